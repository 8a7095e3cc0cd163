"""``oij bench schedule``: Spark and Flink jobs as their users run them, judged with a fixed schedule and up to
schedule, planted differences, and the judge's cost at 10^6 tuples.

The method is :mod:`oij.bench.schedule`'s.
"""

from __future__ import annotations

import argparse


def register(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = bsub.add_parser("schedule", help="real Spark and Flink jobs judged up to schedule (issue 63's table)")
    p.add_argument("--events", type=int, default=30_000, help="tuples of the real jobs' workload (default 30,000)")
    p.add_argument("--big", type=int, default=1_000_000,
                   help="tuples of the cost comparison (default 10^6; 0 leaves it out)")
    p.add_argument("--repeat", type=int, default=3, help="interleaved repetitions of the cost comparison")
    p.add_argument("--engines", default="spark,flink-p1,flink-p2", help="comma-separated: spark, flink-p1, flink-p2")
    p.add_argument("--spark-tuples", type=int, default=0,
                   help="also judge this many tuples up to schedule on Spark, as one oij check process (default 0: "
                   "left out; e.g. 10000000)")
    p.add_argument("--spark-master", default="local[2]", help="the Spark master of --spark-tuples (default local[2])")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="schedule.json", help="where the raw numbers go (default ./schedule.json)")
    p.set_defaults(func=run)


ENGINES = ("spark", "flink-p1", "flink-p2")
"""The real jobs ``--engines`` names."""


def run(args: argparse.Namespace) -> int:
    from oij.bench.schedule import format_table, run_schedule_bench
    from oij.errors import UsageError

    for name in ("events", "big", "spark_tuples"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')}: a number of tuples, at least 0; got {getattr(args, name)}")
    if args.repeat < 1:
        raise UsageError(f"--repeat: at least 1; got {args.repeat}")
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise UsageError(f"--engines: unknown {unknown[0]!r} (known: {', '.join(ENGINES)})")
    res = run_schedule_bench(args.out, args.events, args.big, args.repeat, args.seed, engines, args.spark_tuples,
                             args.spark_master)
    print(format_table(res))
    return 0
