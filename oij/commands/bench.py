"""``oij bench NAME``: the benchmarks (:mod:`oij.bench`: the papers' experiments, ``oracle``, ``memory``, ``peers``,
``kit-power``); raw numbers go to files, never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from oij.bench.memory import MemoryBenchOptions
from oij.bench.oracle import OracleBenchOptions
from oij.commands.common import UsageError, options
from oij.options import add_options


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
    ls.set_defaults(func=run_list)
    pl = bsub.add_parser("plot", help="redraw NAME.png and NAME.svg from every NAME.json in DIR")
    pl.add_argument("dir", help="a directory of raw results (oij bench EXPERIMENT --out DIR)")
    pl.add_argument("--to", default=None, help="where the plots go (default: DIR)")
    pl.set_defaults(func=run_plot)
    for e in experiments().values():
        x = bsub.add_parser(e.name, help=f"{e.figure}: {e.title}")
        size = x.add_mutually_exclusive_group()
        size.add_argument("--quick", dest="size", action="store_const", const="quick",
                          help="a few thousand tuples, 2 replicas (CI smoke)")
        size.add_argument("--full", dest="size", action="store_const", const="full",
                          help="the sizes of the docs' figures")
        x.add_argument("--out", default=".", help="directory for NAME.json and NAME.csv (default .)")
        x.add_argument("--plot", action="store_true", help="also draw NAME.png and NAME.svg into --out")
        x.add_argument("--no-progress", action="store_true", help="no progress bar")
        x.set_defaults(func=run_named, experiment=e.name, size="default")


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
    if not os.path.isdir(args.dir):
        raise UsageError(f"{args.dir}: not a directory")
    written = plot_dir(args.dir, args.to)
    if not written:
        raise UsageError(f"{args.dir}: no experiment results (NAME.json) to plot")
    for w in written:
        print(w)
    return 0


def run_named(args: argparse.Namespace) -> int:
    from oij.bench.experiment import experiments, plot_dir, run_experiment

    e = experiments()[args.experiment]
    if args.plot:
        _need_matplotlib()
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out {args.out}: not a directory")
    res = run_experiment(e, args.size, args.out, progress=not args.no_progress)
    print(f"{e.name} ({e.figure}, {args.size}): {len(res['rows'])} runs in {res['seconds']} s -> "
          f"{os.path.join(args.out, e.name)}.json/.csv")
    if args.plot:
        for w in plot_dir(args.out):
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
