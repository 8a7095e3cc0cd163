"""``oij bench schedule``: Spark and Flink jobs as their users run them, judged with a fixed schedule and up to
schedule, planted differences, and the judge's cost at 10^6 tuples.

The method is :mod:`oij.bench.schedule`'s.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from oij.commands.common import options
from oij.options import add_options, option


@dataclass
class ScheduleFlags:
    """The flags of ``oij bench schedule`` (:mod:`oij.options`), those of
    :func:`oij.bench.schedule.run_schedule_bench` (``engines`` comma-separated); kept here, not in
    :mod:`oij.bench.schedule`, so that the code the fresh ``schedule.json`` measured stays as it was."""

    events: int = option(30_000, help="tuples of the real jobs' workload (default 30,000)")
    big: int = option(1_000_000, help="tuples of the cost comparison (default 10^6; 0 leaves it out)")
    repeat: int = option(3, help="interleaved repetitions of the cost comparison")
    engines: str = option("spark,flink-p1,flink-p2", help="comma-separated: spark, flink-p1, flink-p2")
    spark_tuples: int = option(0, help="also judge this many tuples up to schedule on Spark, as one oij check "
                               "process (default 0: left out; e.g. 10000000)")
    spark_master: str = option("local[2]", help="the Spark master of --spark-tuples (default local[2])")
    seed: int = option(1)
    out: str = option("schedule.json", help="where the raw numbers go (default ./schedule.json)")


def register(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = bsub.add_parser("schedule", help="real Spark and Flink jobs judged up to schedule (issue 63's table)")
    add_options(p, ScheduleFlags)
    p.set_defaults(func=run)


ENGINES = ("spark", "flink-p1", "flink-p2")
"""The real jobs ``--engines`` names."""


def run(args: argparse.Namespace) -> int:
    from oij.bench.schedule import format_table, run_schedule_bench
    from oij.errors import UsageError

    opts = options(ScheduleFlags, args)
    for name in ("events", "big", "spark_tuples"):
        if getattr(opts, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')}: a number of tuples, at least 0; got {getattr(opts, name)}")
    if opts.repeat < 1:
        raise UsageError(f"--repeat: at least 1; got {opts.repeat}")
    engines = tuple(e.strip() for e in opts.engines.split(",") if e.strip())
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise UsageError(f"--engines: unknown {unknown[0]!r} (known: {', '.join(ENGINES)})")
    res = run_schedule_bench(opts.out, opts.events, opts.big, opts.repeat, opts.seed, engines, opts.spark_tuples,
                             opts.spark_master)
    print(format_table(res))
    return 0
