"""``oij run FILE | --preset P --events N``: run a parallel engine (KP/DP/HP, Key-OIJ, Scale-OIJ).

Writes the result lines in exactly the canonical form of ``oij join`` (so the two can be diffed), prints a
metrics table on stderr, and with ``--metrics`` writes them as JSON; the work is
:func:`oij.pipelines.run.run_engine`'s.
"""

from __future__ import annotations

import argparse
import sys

from oij.commands.common import options
from oij.options import add_options
from oij.pipelines.run import RunOptions


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run a parallel engine (kp, dp, hp, key, scale) on replica processes and shared memory",
        description="Run KP-OIJ, DP-OIJ or HP-OIJ over an event file (oij-jsonl or Parquet) or a generated "
        "preset. Result lines are canonical, byte-identical to `oij join` when the engine is correct.",
    )
    add_options(p, RunOptions)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from oij.parallel.runtime.pool import EngineFailure
    from oij.pipelines.run import run_engine

    try:
        report = run_engine(options(RunOptions, args))
    except EngineFailure as e:
        print(f"oij: error: {e}", file=sys.stderr)
        return 1
    print(report.table(), file=sys.stderr)
    return 0
