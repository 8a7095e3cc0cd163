"""``oij bench NAME``: the benchmarks (:mod:`oij.bench`: the papers' experiments, ``oracle``, ``memory``, ``peers``,
``kit-power``); raw numbers go to files, never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass

from oij.bench.memory import MemoryBenchOptions
from oij.bench.oracle import OracleBenchOptions
from oij.commands.common import UsageError, options
from oij.options import add_options, option


@dataclass
class ListOptions:
    """``oij bench list`` takes no option (an empty dataclass: its parser is made, and compared, like the rest)."""


@dataclass
class PlotFlags:
    """The arguments of ``oij bench plot`` (:mod:`oij.options`): those of :func:`oij.bench.experiment.plot_dir`."""

    dir: str = option(positional=True, help="a directory of raw results (oij bench EXPERIMENT --out DIR)")
    to: str | None = option(None, help="where the plots go (default: DIR)")


@dataclass
class ExperimentFlags:
    """The options of ``oij bench EXPERIMENT`` (:mod:`oij.options`), what :func:`oij.bench.experiment.run_experiment`
    takes (and ``--plot``, drawn by the command).  The flags of the papers' experiments and of ``oij bench spark``
    alike; kept here, not in :mod:`oij.bench.experiment`, so that the code the fresh results measured stays as it
    was."""

    size: str = option("default", consts=(("--quick", "quick", "a few thousand tuples, 2 replicas (CI smoke)"),
                                          ("--full", "full", "the sizes of the docs' figures")))
    out: str = option(".", help="directory for NAME.json and NAME.csv (default .)")
    plot: bool = option(False, help="also draw NAME.png and NAME.svg into --out")
    no_progress: bool = option(False, help="no progress bar")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench", help="benchmarks (raw numbers go to a JSON file: --out, default in .)")
    bsub = p.add_subparsers(dest="bench", metavar="BENCH")
    bsub.required = True
    o = bsub.add_parser("oracle", help="events/s and peak memory of the reference oracle")
    add_options(o, OracleBenchOptions)
    o.set_defaults(func=run_oracle)
    m = bsub.add_parser("memory", help="peak memory of oij join and every pattern as the stream grows (flat = bounded)")
    add_options(m, MemoryBenchOptions)
    m.set_defaults(func=run_memory)
    from oij.commands import peers

    peers.register(bsub)
    from oij.commands import kitpower

    kitpower.register(bsub)
    from oij.commands import shapes

    shapes.register(bsub)
    from oij.commands import results

    results.register(bsub)
    from oij.commands import schedulebench

    schedulebench.register(bsub)
    from oij.bench.experiment import experiments

    ls = bsub.add_parser("list", help="every experiment, with the figure it reproduces")
    add_options(ls, ListOptions)
    ls.set_defaults(func=run_list)
    pl = bsub.add_parser("plot", help="redraw NAME.png and NAME.svg from every NAME.json in DIR")
    add_options(pl, PlotFlags)
    pl.set_defaults(func=run_plot)
    for e in experiments().values():
        x = bsub.add_parser(e.name, help=f"{e.figure}: {e.title}")
        add_options(x, ExperimentFlags)
        x.set_defaults(func=run_named, experiment=e.name)


OWN_FLAGS = {"oracle": "the reference oracle: events/s and peak memory", "memory": "peak memory as the stream grows",
             "peers": "oij against the numpy floor, Flink and Spark",
             "kit-power": "mutation score of oij conform on independent implementations (needs oij[mutation])"}


def run_list(args: argparse.Namespace) -> int:
    from oij.bench.experiment import experiments

    print(f"{'experiment':<16} {'reproduces':<22} what")
    for e in experiments().values():
        print(f"{e.name:<16} {e.figure:<22} {e.title}")
    for name, what in OWN_FLAGS.items():
        print(f"{name:<16} {'this project':<22} {what} (own flags: oij bench {name} --help)")
    print("\nrun: oij bench NAME [--quick|--full] [--out DIR] [--plot]; redraw: oij bench plot DIR")
    return 0


def _need_matplotlib() -> None:
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError('plots need matplotlib: pip install -e ".[bench]" --config-settings editable_mode=strict')


def run_plot(args: argparse.Namespace) -> int:
    from oij.bench.experiment import plot_dir

    _need_matplotlib()
    opts = options(PlotFlags, args)
    if not os.path.isdir(opts.dir):
        raise UsageError(f"{opts.dir}: not a directory")
    written = plot_dir(opts.dir, opts.to)
    if not written:
        raise UsageError(f"{opts.dir}: no experiment results (NAME.json) to plot")
    for w in written:
        print(w)
    return 0


def run_named(args: argparse.Namespace) -> int:
    from oij.bench.experiment import experiments, plot_dir, run_experiment

    e = experiments()[args.experiment]
    opts = options(ExperimentFlags, args)
    if opts.plot:
        _need_matplotlib()
    if os.path.exists(opts.out) and not os.path.isdir(opts.out):
        raise UsageError(f"--out {opts.out}: not a directory")
    res = run_experiment(e, opts.size, opts.out, progress=not opts.no_progress)
    print(f"{e.name} ({e.figure}, {opts.size}): {len(res['rows'])} runs in {res['seconds']} s -> "
          f"{os.path.join(opts.out, e.name)}.json/.csv")
    if opts.plot:
        for w in plot_dir(opts.out):
            if os.path.basename(w).startswith(e.name + "."):
                print(w)
    return 0


def run_oracle(args: argparse.Namespace) -> int:
    from oij.bench.oracle import oracle_bench

    opts = options(OracleBenchOptions, args)
    out = oracle_bench(opts)
    print(json.dumps({k: v for k, v in out.items() if k != "memory"}, indent=2))
    print(f"raw numbers: {opts.out}", file=sys.stderr)
    return 0


def run_memory(args: argparse.Namespace) -> int:
    """``oij bench memory``: the bounded-memory check of docs/reference.rst (a benchmark, never a test)."""
    from oij.bench.memory import memory_bench, memory_table
    from oij.proctree import CommandFailed

    opts = options(MemoryBenchOptions, args)
    try:
        rows = memory_bench(opts)
    except CommandFailed as e:
        print(f"oij: error: a measured command failed, nothing written: {e}", file=sys.stderr)
        return 1
    print(memory_table(rows))
    print(f"raw numbers: {opts.out}", file=sys.stderr)
    return 0
