"""``oij userjob spark|flink EVENTS -o OUT``: an ordinary Spark or Flink job (not driven by oij) over a workload.

The jobs, their settings and their resources are :mod:`oij.spark.userjob`'s and :mod:`oij.flink.userjob`'s; this
command parses the flags, runs one of them and prints what it returns.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

from oij.commands.common import options
from oij.options import add_options, option


@dataclass
class UserJobFlags:
    """The arguments of ``oij userjob`` (:mod:`oij.options`): the defaults of
    :func:`oij.spark.userjob.run_spark_user_job` and :func:`oij.flink.userjob.run_flink_user_job`; kept here, not
    beside them, so that the code the fresh results measure (``schedule.json``, ``spark.json``) stays as it was."""

    engine: str = option(positional=True, choices=["spark", "flink"], help="the engine")
    events: str = option(positional=True, help="the workload (oij-jsonl, lateness mode)")
    output: str = option(flags=("-o", "--output"), help="the result lines (written atomically)")
    files: int = option(20, help="spark: input files per source, one per micro-batch (default 20)")
    checkpoint: str | None = option(None, help="spark: the checkpoint directory, kept (default: a temporary one)")
    master: str = option("local[2]", help="spark: the master (default local[2])")
    parallelism: int = option(1, help="flink: the join's parallelism (default 1)")
    late_side_outputs: bool = option(True, flags=("--no-late-side-outputs",), help="flink: no late side outputs")
    json: bool = option(False, help="print everything the job reports as JSON")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "userjob",
        help="run an ordinary Spark or Flink stream join (default triggers and watermarks) over a workload",
        description="Run the interval join of a lateness-mode oij-jsonl workload as an ordinary Spark Structured "
        "Streaming job (two file sources, micro-batches of many rows, Trigger.AvailableNow) or Flink DataStream "
        "job (two file sources, periodic watermarks, intervalJoin with late side outputs), and write its result "
        "lines to OUT. The output follows the engine's own watermark schedule: judge it up to schedule.",
    )
    add_options(p, UserJobFlags)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    opts = options(UserJobFlags, args)
    if opts.engine == "spark":
        from oij.spark.userjob import run_spark_user_job

        info = run_spark_user_job(opts.events, opts.output, files=opts.files, checkpoint_dir=opts.checkpoint,
                                  master=opts.master)
        summary = (f"spark: {info['batches']} batches ({info['data_batches']} with data), {info['rows']} rows, "
                   f"{info['dropped_by_watermark']} dropped as late, {info['seconds']} s")
    else:
        from oij.flink.userjob import run_flink_user_job

        info = run_flink_user_job(opts.events, opts.output, parallelism=opts.parallelism,
                                  late_side_outputs=opts.late_side_outputs)
        summary = (f"flink (parallelism {info['parallelism']}): {info['pairs']} pairs, {info['late']} late, "
                   f"{info['seconds']} s")
    if opts.json:
        print(json.dumps(info))
    else:
        print(f"oij: {summary} -> {opts.output}", file=sys.stderr)
    return 0
