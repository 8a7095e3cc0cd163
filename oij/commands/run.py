"""``oij run FILE | --preset P --events N``: run a parallel engine (KP/DP/HP, Key-OIJ, Scale-OIJ).

Writes the result lines in exactly the canonical form of ``oij join`` (so the two can be diffed), prints a
metrics table on stderr, and with ``--metrics`` writes them as JSON; the work is
:func:`oij.pipelines.run.run_engine`'s.
"""

from __future__ import annotations

import argparse
import sys

from oij.commands.common import add_query_flags, options
from oij.parallel.config import (
    CALIBRATION,
    COLLECTOR_ALIASES,
    COLLECTORS,
    DECAY,
    DELTA,
    PARTITIONS,
    PATTERNS,
    REPLICAS,
    SCHEDULE_EVERY,
    THETA,
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run a parallel engine (kp, dp, hp, key, scale) on replica processes and shared memory",
        description="Run KP-OIJ, DP-OIJ or HP-OIJ over an event file (oij-jsonl or Parquet) or a generated "
        "preset. Result lines are canonical, byte-identical to `oij join` when the engine is correct.",
    )
    p.add_argument("file", nargs="?", help="input: oij-jsonl, .parquet, or - for stdin")
    p.add_argument("--preset", help="generate this workload preset in-process instead of reading a file")
    p.add_argument("--events", type=int, default=None, help="tuples to generate (with --preset; default: preset's)")
    p.add_argument("--seed", type=int, default=1, help="generator seed (with --preset)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="override a preset parameter (repeatable)")
    p.add_argument("--pattern", choices=PATTERNS, default="kp",
                   help="kp/dp/hp: PPOIJ patterns; key: Key-OIJ; scale: Scale-OIJ (docs/scaleoij.rst)")
    p.add_argument("--replicas", type=int, default=REPLICAS)
    p.add_argument("--emitters", type=int, default=1, help="emitters per stream (M)")
    p.add_argument("--engine", choices=["auto", "blocks", "events"], default="auto",
                   help="blocks: every replica decodes, routes and joins whole blocks (parallel/blocks); events: "
                   "tuples in batches through rings and collectors, one at a time in each replica (latency "
                   "experiments, cond, --order arrival). auto: blocks unless an option only the event engine has is "
                   "given")
    p.add_argument("--barriers", choices=["piece", "round"], default="piece",
                   help="block engine: piece -- each piece is routed once the pieces before it are decoded and joined "
                   "once it is routed; round -- a round's pieces wait for each other at both steps (slower by a few "
                   "per cent; docs/blocks.rst)")
    p.add_argument("--batch", type=int, default=None,
                   help="event engine: tuples per batch (1..4096; default 256: PPOIJ's b=32 pays numpy's per-call "
                   "cost per 32 tuples, see docs/results.rst); giving it selects the event engine")
    p.add_argument("--collector", choices=["auto", *COLLECTORS], default="auto",
                   type=lambda s: COLLECTOR_ALIASES.get(s, s),
                   help="collector policy (auto: standard for kp, round-robin for dp/hp; naive = negative control; "
                   "rr is round-robin)")
    p.add_argument("--theta", type=float, default=THETA, help="HP: Alg. 1 balance threshold")
    p.add_argument("--max-split", type=int, default=None, help="HP: maximum splitting degree (default replicas)")
    p.add_argument("--calibration", type=int, default=CALIBRATION, help="HP: tuples counted before Alg. 1 runs")
    p.add_argument("--epoch", type=int, default=None,
                   help="events per epoch (default max(8192, 4 x batch x replicas x M))")
    p.add_argument("--rate", type=float, default=None, help="pace the source at this many tuples/s (latency runs)")
    p.add_argument("--cond-index", action="store_true",
                   help="kp/dp/hp with a cond: answer window AND cond from the SPO-Join style cond index instead of "
                   "filtering the window (docs/cond.rst)")
    g = p.add_argument_group("Scale-OIJ (--pattern scale)")
    g.add_argument("--partitions", type=int, default=PARTITIONS, help="key partitions (hash ranges) of the team map")
    g.add_argument("--delta", type=float, default=DELTA, help="Alg. 3: minimum unbalancedness decrease (delta)")
    g.add_argument("--decay", type=float, default=DECAY, help="Alg. 3: statistics decay (lambda)")
    g.add_argument("--schedule-every", type=int, default=SCHEDULE_EVERY,
                   help="tuples between two runs of Alg. 3 (0: never)")
    g.add_argument("--rule", choices=["team", "self", "arrival"], default="team",
                   help="hazard rule (self, arrival: negative controls that lose pairs)")
    g.add_argument("--no-incremental", action="store_true", help="recompute every window (no subtract-on-evict)")
    g.add_argument("--arena-mb", type=int, default=128, help="index arena per joiner (MiB, sparse)")
    p.add_argument("--start-method", choices=["spawn", "forkserver", "fork"], default="spawn")
    p.add_argument("-o", "--output", help="result lines to this file (default stdout; '/dev/null' to skip)")
    p.add_argument("--metrics", help="write the metrics as JSON to this file")
    p.add_argument("--cdf", help="write the latency CDF (percentile, ms) as JSON to this file")
    p.add_argument("--no-output", action="store_true", help="do not write result lines (nor keep them: bounded memory)")
    p.add_argument("--order", choices=["canonical", "arrival"], default="canonical",
                   help="canonical: sorted, byte-identical to `oij join`, in bounded memory (sorted runs spilled to "
                   "--tmp-dir and merged); arrival: each result written as the driver receives it (the order varies "
                   "between runs)")
    p.add_argument("--tmp-dir", metavar="DIR",
                   help="where the canonical order's sorted runs go (default: beside the output, or $TMPDIR for "
                   "stdout); removed at the end, on an error and on Ctrl-C")
    add_query_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from oij.parallel.runtime.pool import EngineFailure
    from oij.pipelines.run import RunOptions, run_engine

    try:
        report = run_engine(options(RunOptions, args))
    except EngineFailure as e:
        print(f"oij: error: {e}", file=sys.stderr)
        return 1
    print(report.table(), file=sys.stderr)
    return 0
