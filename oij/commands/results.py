"""``oij bench status``, ``oij bench tables``, ``oij bench conform-time`` and ``oij bench recovery``: the
provenance of the measured numbers (:mod:`oij.bench.results`), the conform timing (:mod:`oij.bench.conformtime`)
and the engines under crashes (:mod:`oij.bench.recovery`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from oij.bench.recovery import RecoveryOptions
from oij.bench.results import ResultsOptions
from oij.commands.common import options
from oij.options import add_options, option


@dataclass
class ConformTimeFlags:
    """The flags of ``oij bench conform-time`` (:mod:`oij.options`); kept here, not beside
    :func:`oij.bench.conformtime.measure` (whose defaults they are), so that its measured code stays as measured."""

    adapters: str = option("", help="comma-separated adapters (oij adapter NAME) to time too, each at its defaults "
                           "against its own profile (default: none)")
    out: str = option("conform-time.json", help="where the raw numbers go")


def register(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = bsub.add_parser("status", help="every raw result in bench/results/ against the code it measured: "
                        "exit 1 while any is stale (its code changed after the commit it measured), unknown, "
                        "missing or unregistered")
    add_options(s, ResultsOptions)
    s.set_defaults(func=run_status)
    t = bsub.add_parser("tables", help="write the README's results table (and the docs' tables, which the docs "
                        "build also writes) from the raw results and bench/results/manifest.toml")
    add_options(t, ResultsOptions)
    t.set_defaults(func=run_tables)
    c = bsub.add_parser("conform-time", help="the time of oij conform at its defaults: one process per case, "
                        "two at a time, and one session")
    add_options(c, ConformTimeFlags)
    c.set_defaults(func=run_conform_time)
    r = bsub.add_parser("recovery", help="real engines under crashes and restores: the kit's restart mode on each "
                        "engine and sink (Spark, Flink DataStream, Pathway), the verdict, cases, plans and times")
    add_options(r, RecoveryOptions)
    r.set_defaults(func=run_recovery)


def run_status(args: argparse.Namespace) -> int:
    from oij.bench.results import status

    report = status(options(ResultsOptions, args).repo)
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


def run_tables(args: argparse.Namespace) -> int:
    from oij.bench.results import write_tables

    changed = write_tables(options(ResultsOptions, args).repo)
    print("\n".join(f"wrote {p}" for p in changed) or "the README's table is in step")
    return 0


def run_conform_time(args: argparse.Namespace) -> int:
    from oij.adapters import ADAPTERS
    from oij.bench.conformtime import measure
    from oij.errors import UsageError

    opts = options(ConformTimeFlags, args)
    adapters = tuple(a for a in opts.adapters.split(",") if a)
    unknown = [a for a in adapters if a not in ADAPTERS]
    if unknown:
        raise UsageError(f"--adapters: unknown adapter {unknown[0]!r}; known: {', '.join(ADAPTERS)}")
    result = measure(opts.out, adapters=adapters)
    for r in result["runs"]:
        print(f"{r['impl']:18s} {r['mode']:12s} {r['wall_s']:8.1f} s wall {r['cpu_s']:8.1f} s CPU "
              f"{r['cases']} cases  exit {r['exit']}")
    print(f"raw numbers: {opts.out}")
    return 0


def run_recovery(args: argparse.Namespace) -> int:
    from oij.bench.recovery import measure
    from oij.errors import UsageError

    opts = options(RecoveryOptions, args)
    try:
        measure(opts)
    except ValueError as e:
        raise UsageError(str(e)) from None
    print(f"raw numbers: {opts.out}")
    return 0
