"""``oij join FILE [-o OUT]``: run the reference oracle over an event file and write the result lines.

The work, its two paths (block and event) and ``OIJ_JOIN_PATH`` are :mod:`oij.pipelines.join`'s.
"""

from __future__ import annotations

import argparse

from oij.commands.common import options
from oij.options import add_options
from oij.pipelines.join import JoinOptions, join_file
from oij.pipelines.restartable import StateOptions, join_with_state


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "join",
        help="join an event file with the reference oracle",
        description="Read oij-jsonl (or Parquet with the query stored or given as flags) and write result "
        "lines: pairs or aggregates, then late tuples. Canonical order by default, so outputs can be diffed.",
    )
    add_options(p, JoinOptions)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.state is not None:
        return join_with_state(StateOptions(args.file, args.state or None, args.checkpoint_every))
    return join_file(options(JoinOptions, args))
