"""``oij check [FILE | --preset P] [--engines ...]``: check every engine against the oracles (the main job).

The steps are :func:`oij.check.check`'s; this module parses the flags and prints its :class:`~oij.check.CheckReport`.
Exit code 0 iff every engine (and the sequential oracle) agrees with the reference, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse

from oij.check import CheckOptions, check
from oij.commands.common import options
from oij.options import add_options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="check every engine against the sequential and the Spark oracle (the main job)",
        description="Run the sequential oracle (when the workload fits in memory), the Spark oracle and every "
        "chosen engine on one workload; store all outputs as a Parquet dataset partitioned by engine; compare "
        "each engine with the oracle in Spark; print a table and write OUT/report.json and OUT/report.md. "
        "Exit 0 only if every engine agrees. With no arguments: a small default workload.",
    )
    add_options(p, CheckOptions)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = check(options(CheckOptions, args))
    print(report.text())
    return 0 if report.all_agree else 1
