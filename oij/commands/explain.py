"""``oij explain FILE [--svg OUT] [--got OUTPUT]``: what the oracle does at every arrival of a small case.

Prints one line per event (W after it, late or not, the rows it made the
oracle emit, the tuples still held) and, with ``--svg``, draws the timeline
of :mod:`oij.testing._explain`.  ``--got`` takes the output lines of another
implementation on the same input and marks the rows it missed or added.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from oij.commands.common import UsageError, options
from oij.io.atomic import write_text
from oij.options import add_options, option
from oij.pipelines.files import QueryFlags, input_events, refuse_same_file


@dataclass(kw_only=True)
class ExplainFlags(QueryFlags):
    """The arguments of ``oij explain`` (:mod:`oij.options`), the query flags last: the input, what the command
    draws and compares (:mod:`oij.testing._explain` does the rest)."""

    file: str = option(positional=True,
                       help="input: oij-jsonl, .parquet, or - for stdin (at most a few hundred events)")
    svg: str | None = option(None, metavar="OUT", help="also draw the timeline to this SVG file")
    got: str | None = option(
        None, metavar="OUTPUT", help="output lines of another implementation on FILE: its differences are drawn "
        "and listed")
    title: str | None = option(None, help="title of the picture (default: the file name)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("explain", help="step through a small case with the oracle; draw its timeline as SVG",
                       description="Replay a small oij-jsonl (or Parquet) input through the oracle one event at a "
                       "time: W after each arrival, late tuples, the rows each arrival emitted.")
    add_options(p, ExplainFlags)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from oij.testing._explain import MAX_EVENTS, explain, explain_svg, explain_text, read_output, results_of

    opts = options(ExplainFlags, args)
    refuse_same_file(opts.svg, [opts.file, opts.got])
    with input_events(opts.file, opts) as (q, it):
        events = []
        for e in it:
            events.append(e)
            if len(events) > MAX_EVENTS:
                raise UsageError(f"{opts.file}: more than {MAX_EVENTS} events; oij explain is for small cases "
                                 "(cut the input, or use oij join)")
    got = read_output(opts.got) if opts.got else None
    steps = explain(q, events)
    sys.stdout.write(explain_text(q, steps))
    if got is not None:
        from oij.testing._protocol import all_rows, compare

        d = compare(results_of(steps), got)
        if d.missing or d.unexpected:
            print(f"{opts.got}: {len(d.missing)} row(s) missing, {len(d.unexpected)} unexpected")
            print("\n".join([f"  - {r}" for r in d.missing] + [f"  + {r}" for r in d.unexpected]))
        else:
            print(f"{opts.got}: the same {len(all_rows(got))} row(s)")
    if opts.svg:
        write_text(opts.svg, explain_svg(q, steps, got, opts.title or opts.file))
    return 0
