"""``oij join FILE [-o OUT]``: run the reference oracle over an event file and write the result lines."""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO

from oij.commands.common import (
    UsageError,
    add_query_flags,
    check_outputs,
    input_events,
    is_stdout,
    output_file,
    progress,
    sort_dir,
)
from oij.io.atomic import write_text
from oij.io.errors import InputError
from oij.io.extsort import CanonicalSorter
from oij.io.jsonl import result_lines
from reference.oracle import Oracle
from spec.batch import Results
from spec.model import StreamTuple, Watermark


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
        help="compute the result under a semantic profile (docs/profiles.rst: spark-ss, flink-sql, ...); a "
        "non-canonical profile is simulated step by step, in memory, for small inputs",
    )
    add_query_flags(p)
    p.set_defaults(func=run)


def _drain(o: Oracle, out: IO[str] | CanonicalSorter) -> int:
    """Hand the oracle's results so far to ``out`` (the output in arrival order, or the sorter) and clear them;
    the number of late ids handed over."""
    res = Results(o.pairs, o.aggregates, o.late)
    if isinstance(out, CanonicalSorter):
        out.add(res)
    else:
        out.writelines(result_lines(res))
    late = len(o.late)
    o.pairs = []
    o.aggregates = []
    o.late = []
    return late


def run(args: argparse.Namespace) -> int:
    if args.profile != "canonical":
        return _run_profile(args)
    canonical = args.order == "canonical"
    check_outputs([args.output, args.stats], [args.file])
    with input_events(args.file, args) as (q, events), output_file(args.output, [args.file]) as out, \
            CanonicalSorter(sort_dir(args)) as sorter:
        o = Oracle(q, instrument=args.stats is not None)
        on_tuple, on_watermark = o.on_tuple, o.on_watermark
        sink: IO[str] | CanonicalSorter = sorter if canonical else out
        n = late = 0
        try:
            for e in progress(events, enabled=not args.no_progress, desc="join"):
                if type(e) is StreamTuple:
                    on_tuple(e)
                elif type(e) is Watermark:
                    on_watermark(e)
                else:
                    o.on_end()
                n += 1
                if n & 0xFFFF == 0:
                    late += _drain(o, sink)
        except InputError as err:
            if is_stdout(args.output):
                # A stream: nothing read is dropped; the results of the valid prefix are written, then the error.
                _finish(o, out, sink)
                err.args = (f"{err.args[0]} (the results of the {n} events before it were written)",)
            else:
                # A file is written whole or not at all: the old one stays.
                err.args = (f"{err.args[0]} ({args.output} was left as it was)",)
            raise
        late += _finish(o, out, sink)
    if args.stats is not None:
        _write_stats(o, n, late, args.stats)
    return 0


def _write_stats(o: Oracle, events: int, late: int, path: str) -> None:
    samples = o.state_samples
    stats = {
        "events": events,
        "late": late,
        "joins": o.joins,
        "entries_visited": o.visited,
        "entries_in_window": o.in_window,
        "effectiveness": o.effectiveness(),
        "retained_state_peak": max((s for _, s in samples), default=0),
        "retained_state_samples": samples[:: max(1, len(samples) // 1000)],
    }
    write_text(path, json.dumps(stats, indent=1) + "\n")


def _finish(o: Oracle, out: IO[str], sink: IO[str] | CanonicalSorter) -> int:
    late = _drain(o, sink)
    if isinstance(sink, CanonicalSorter):
        sink.write(out)
    out.flush()
    if out is sys.stdout:
        sys.stdout.flush()
    return late


def _run_profile(args: argparse.Namespace) -> int:
    from spec.profiles import PROFILES, compute_profile_result

    if args.profile not in PROFILES:
        raise UsageError(f"--profile: unknown profile {args.profile!r}; known: {', '.join(PROFILES)}")
    check_outputs([args.output], [args.file])
    with input_events(args.file, args) as (q, events):
        evs = list(events)
    res = compute_profile_result(evs, q, PROFILES[args.profile])
    with output_file(args.output, [args.file]) as out:
        out.writelines(result_lines(res))
    return 0
