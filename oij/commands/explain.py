"""``oij explain FILE [--svg OUT] [--got OUTPUT]``: what the oracle does at every arrival of a small case.

Prints one line per event (W after it, late or not, the rows it made the
oracle emit, the tuples still held) and, with ``--svg``, draws the timeline
of :mod:`oij.testing._explain`.  ``--got`` takes the output lines of another
implementation on the same input and marks the rows it missed or added.
"""

from __future__ import annotations

import argparse
import sys

from oij.commands.common import UsageError, add_query_flags, options
from oij.io.atomic import write_text
from oij.pipelines.files import QueryFlags, input_events, refuse_same_file


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("explain", help="step through a small case with the oracle; draw its timeline as SVG",
                       description="Replay a small oij-jsonl (or Parquet) input through the oracle one event at a "
                       "time: W after each arrival, late tuples, the rows each arrival emitted.")
    p.add_argument("file", help="input: oij-jsonl, .parquet, or - for stdin (at most a few hundred events)")
    p.add_argument("--svg", metavar="OUT", help="also draw the timeline to this SVG file")
    p.add_argument("--got", metavar="OUTPUT",
                   help="output lines of another implementation on FILE: its differences are drawn and listed")
    p.add_argument("--title", help="title of the picture (default: the file name)")
    add_query_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from oij.testing._explain import MAX_EVENTS, explain, explain_svg, explain_text, read_output, results_of

    refuse_same_file(args.svg, [args.file, args.got])
    with input_events(args.file, options(QueryFlags, args)) as (q, it):
        events = []
        for e in it:
            events.append(e)
            if len(events) > MAX_EVENTS:
                raise UsageError(f"{args.file}: more than {MAX_EVENTS} events; oij explain is for small cases "
                                 "(cut the input, or use oij join)")
    got = read_output(args.got) if args.got else None
    steps = explain(q, events)
    sys.stdout.write(explain_text(q, steps))
    if got is not None:
        from oij.testing._protocol import all_rows, compare

        d = compare(results_of(steps), got)
        if d.missing or d.unexpected:
            print(f"{args.got}: {len(d.missing)} row(s) missing, {len(d.unexpected)} unexpected")
            print("\n".join([f"  - {r}" for r in d.missing] + [f"  + {r}" for r in d.unexpected]))
        else:
            print(f"{args.got}: the same {len(all_rows(got))} row(s)")
    if args.svg:
        write_text(args.svg, explain_svg(q, steps, got, args.title or args.file))
    return 0
