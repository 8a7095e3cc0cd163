"""``oij join FILE [-o OUT]``: run the reference oracle over an event file and write the result lines.

The work, its two paths (block and event) and ``OIJ_JOIN_PATH`` are :mod:`oij.pipelines.join`'s.
"""

from __future__ import annotations

import argparse

from oij.commands.common import add_query_flags, options
from oij.pipelines.join import JoinOptions, join_file
from oij.pipelines.restartable import StateOptions, join_with_state


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "join",
        help="join an event file with the reference oracle",
        description="Read oij-jsonl (or Parquet with the query stored or given as flags) and write result "
        "lines: pairs or aggregates, then late tuples. Canonical order by default, so outputs can be diffed.",
    )
    p.add_argument("file", help="input: oij-jsonl, .parquet, or - for stdin")
    p.add_argument("-o", "--output", help="output file (default stdout)")
    p.add_argument(
        "--order",
        choices=["canonical", "arrival"],
        default="canonical",
        help="canonical: sorted, in bounded memory (sorted runs spilled to --tmp-dir and merged); arrival: in "
        "emission order, no temporary files",
    )
    p.add_argument("--tmp-dir", metavar="DIR",
                   help="where the canonical order's sorted runs go (default: beside the output, or $TMPDIR for "
                   "stdout); removed at the end, on an error and on Ctrl-C")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--stats",
        metavar="JSON",
        help="also count entries visited per join (Scale-OIJ effectiveness, Eq. 1) and the retained state "
        "after every watermark move, and write them to JSON",
    )
    p.add_argument(
        "--profile",
        default="canonical",
        help="compute the result under a semantic profile (docs/conformance.rst, 'Semantic profiles and the "
        "fingerprint': spark-ss, flink-sql, ...); a "
        "non-canonical profile is simulated step by step, in memory, for small inputs",
    )
    p.add_argument("--state", nargs="?", const="", metavar="DIR",
                   help="speak the restart protocol (docs/recovery.rst): checkpoint into DIR (default "
                   "$OIJ_STATE_DIR), resume from $OIJ_CHECKPOINT or DIR's newest checkpoint; rows in emission order")
    p.add_argument("--checkpoint-every", type=int, default=1, metavar="N",
                   help="with --state: checkpoint after every N events (default 1)")
    add_query_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.state is not None:
        return join_with_state(StateOptions(args.file, args.state or None, args.checkpoint_every))
    return join_file(options(JoinOptions, args))
