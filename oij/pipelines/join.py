"""The reference oracle from an event file to a file of result lines: ``oij join FILE [-o OUT]`` (``join_file``).

Two paths to the same bytes:

* **the block path** (:mod:`oij.reference.block_oracle`), whenever its output is the event-by-event oracle's: the
  canonical order (the default), no ``--stats``, the canonical profile, and a query it supports
  (:func:`oij.reference.block_oracle.supports`: every query without a joining condition).  A file is read in column
  blocks (:mod:`oij.io.columnar`: the per-line reader's events and errors); stdin, Parquet datasets and small
  files (``SMALL_FILE``) line by line, grouped into blocks; each block is decided with numpy and its
  pairs go to the external sort (:class:`oij.io.extsort.CanonicalSorter`) as columns;
* **the event path** (:class:`oij.reference.oracle.Oracle`, one event at a time) otherwise: ``--order arrival``
  (the order is the oracle's emission order), ``--stats`` (per-join counters), a ``cond`` query.

On bad input both paths print the same one-line error and exit 2; a file output is left as it was, stdout
gets the results of the events before the error (the same rows: after a prefix both emitted
:func:`oij.spec.stream.compute_emitted` of it).

Which path, by default (``auto``): the block path for Parquet input and for oij-jsonl files of
``SMALL_INPUT`` or more; the event path for smaller files and for stdin.  The block path's numpy costs
about 70 ms to import, more than the event path takes for a file of some 10^4 events, and most pipes into
``oij join -`` are the small cases of ``oij vectors verify`` and ``oij conform``.  ``OIJ_JOIN_PATH`` in the
environment overrides it (a developer's knob: the tests and the benchmarks compare the two paths' bytes and
times with it): ``block`` wherever the block path applies, whatever the size (a large pipe), ``event``
always the event path.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from oij.errors import UsageError
from oij.io.atomic import write_text
from oij.io.errors import InputError
from oij.io.extsort import CanonicalSorter
from oij.io.jsonlwrite import result_lines
from oij.options import option
from oij.pipelines.files import (
    QueryFlags,
    check_outputs,
    input_events,
    is_stdout,
    open_input,
    output_file,
    progress,
    sort_dir,
)
from oij.reference.oracle import Oracle
from oij.spec.batch import Results
from oij.spec.model import End, Event, Query, StreamTuple, Watermark

if TYPE_CHECKING:
    from oij.io.columnar import EventBlock
    from oij.reference.block_oracle import BlockOracle

PATHS = ("auto", "block", "event")
"""Values of ``OIJ_JOIN_PATH`` (module docstring)."""

SMALL_INPUT = 1 << 20
"""Under ``OIJ_JOIN_PATH=auto`` (the default), oij-jsonl files smaller than this, and stdin, take the event path
(module docstring)."""

SMALL_FILE = 16 << 20
"""An oij-jsonl file smaller than this (one block of the columnar reader) is read line by line on the block path
too: importing pyarrow costs about 0.3 s, the time the per-line reader takes for some 10^5 lines."""


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


@dataclass
class JoinOptions(QueryFlags):
    """The options of ``oij join``, each with its flag, help and default (:mod:`oij.options`): the input (a path
    or ``-``), the output (None or ``-``: stdout), the query flags; with ``state`` (not None) the restart protocol
    (:mod:`oij.pipelines.restartable`) instead."""

    file: str = option("-", positional=True, help="input: oij-jsonl, .parquet, or - for stdin")
    output: str | None = option(None, flags=("-o", "--output"), help="output file (default stdout)")
    order: str = option(
        "canonical", choices=["canonical", "arrival"],
        help="canonical: sorted, in bounded memory (sorted runs spilled to --tmp-dir and merged); arrival: in "
        "emission order, no temporary files")
    tmp_dir: str | None = option(
        None, metavar="DIR",
        help="where the canonical order's sorted runs go (default: beside the output, or $TMPDIR for stdout); "
        "removed at the end, on an error and on Ctrl-C")
    no_progress: bool = option(False, help="no progress bar")
    stats: str | None = option(
        None, metavar="JSON",
        help="also count entries visited per join (Scale-OIJ effectiveness, Eq. 1) and the retained state after "
        "every watermark move, and write them to JSON")
    profile: str = option(
        "canonical",
        help="compute the result under a semantic profile (docs/conformance.rst, 'Semantic profiles and the "
        "fingerprint': spark-ss, flink-sql, ...); a non-canonical profile is simulated step by step, in memory, "
        "for small inputs")
    state: str | None = option(
        None, nargs="?", const="", metavar="DIR",
        help="speak the restart protocol (docs/recovery.rst): checkpoint into DIR (default $OIJ_STATE_DIR), resume "
        "from $OIJ_CHECKPOINT or DIR's newest checkpoint; rows in emission order")
    checkpoint_every: int = option(1, metavar="N", help="with --state: checkpoint after every N events (default 1)")


def join_file(args: JoinOptions) -> int:
    """Join ``args.file`` with the oracle and write the result lines to ``args.output`` (and the counters to
    ``args.stats``); 0.  Bad input raises :class:`~oij.io.errors.InputError` after saying, in its message, what
    became of the output (module docstring)."""
    if args.profile != "canonical":
        return _run_profile(args)
    check_outputs([args.output, args.stats], [args.file])
    path = os.environ.get("OIJ_JOIN_PATH", "") or "auto"
    if path not in PATHS:
        raise UsageError(f"OIJ_JOIN_PATH: must be one of {', '.join(PATHS)}, got {path!r}")
    block = path == "block" or (path == "auto" and _large(args.file))
    if args.order == "canonical" and args.stats is None and block:
        return _run_blocks(args)
    with input_events(args.file, args) as (q, events):
        return _run_events(args, q, events)


def _large(path: str) -> bool:
    """Whether ``auto`` takes the block path for input ``path``: Parquet, or a file of ``SMALL_INPUT`` or more."""
    if path == "-":
        return False
    if path.endswith(".parquet") or os.path.isdir(path):
        return True
    try:
        return os.path.getsize(path) >= SMALL_INPUT
    except OSError:
        return True  # the reader reports it, as either path would


def _run_events(args: JoinOptions, q: Query, events: Iterator[Event]) -> int:
    """The event path: the oracle one event at a time."""
    canonical = args.order == "canonical"
    with output_file(args.output, [args.file]) as out, CanonicalSorter(sort_dir(args)) as sorter:
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
            _explain(err, args.output, n)
            raise
        late += _finish(o, out, sink)
    if args.stats is not None:
        _write_stats(o, n, late, args.stats)
    return 0


def _explain(err: InputError, output: str | None, n: int) -> None:
    """Say what became of the output on an input error (both paths say the same)."""
    if is_stdout(output):
        err.args = (f"{err.args[0]} (the results of the {n} events before it were written)",)
    else:
        # A file is written whole or not at all: the old one stays.
        err.args = (f"{err.args[0]} ({output} was left as it was)",)


# ---------------------------------------------------------------------- the block path

Columns = tuple[Any, Any, Any, Any, Any, Any, Any]
"""kind, side, id, ts, key, value, channel: the columns :meth:`oij.reference.block_oracle.BlockOracle.feed` takes."""


@dataclass
class _Source:
    """The input of the block path: column blocks (``(columns, end follows)``), or -- for a query the block path
    does not support -- the events for the event path."""

    blocks: Iterator[tuple[Columns, bool]] | None = None
    events: Iterator[Event] | None = None


def _run_blocks(args: JoinOptions) -> int:
    """The block path (module docstring); a query it does not support goes to the event path, same reader."""
    from oij.reference.block_oracle import BlockOracle

    with open_input(args.file, args, _open_source) as (q, src):
        if src.blocks is None:
            assert src.events is not None
            return _run_events(args, q, src.events)
        with output_file(args.output, [args.file]) as out, CanonicalSorter(sort_dir(args)) as sorter:
            bo = BlockOracle(q)
            bar = _progress_bar(not args.no_progress)
            n = 0
            try:
                for cols, end in src.blocks:
                    bo.feed(*cols)
                    n += len(cols[0])
                    if end:
                        bo.end()
                        n += 1
                    _drain_blocks(bo, sorter)
                    if bar is not None:
                        bar.update(len(cols[0]) + end)
            except InputError as err:
                if is_stdout(args.output):
                    _drain_blocks(bo, sorter)
                    _write_sorted(out, sorter)
                _explain(err, args.output, n)
                raise
            finally:
                if bar is not None:
                    bar.close()
            _drain_blocks(bo, sorter)
            _write_sorted(out, sorter)
    return 0


def _open_source(path: str, q: Query | None = None) -> tuple[Query, _Source, IO[bytes] | None]:
    """Open ``path`` as :func:`oij.io.open_events` does (same readers, same errors), and choose: column blocks
    if the block path supports the query, else events.  Returns the query, the source, the stream to close."""
    from oij.io import DATASET_BLOCK, STDIN_BLOCK
    from oij.io.jsonlread import read_jsonl
    from oij.reference.block_oracle import supports

    if os.path.isdir(path):  # a Parquet dataset: its files one after the other, row by row
        from oij.io.parquet import read_parquet

        query, events = read_parquet(path, q)
        return query, _grouped(query, events, DATASET_BLOCK), None
    if path.endswith(".parquet"):
        from oij.io.columnar import blocks_to_events, read_parquet_blocks

        query, blocks = read_parquet_blocks(path, q)
        if not supports(query):
            return query, _Source(events=blocks_to_events(blocks)), None
        return query, _Source(blocks=_block_columns(blocks)), None
    if path == "-":  # a pipe may be interactive: line by line
        query, events = read_jsonl(sys.stdin.buffer, "<stdin>")
        return query, _grouped(query, events, STDIN_BLOCK), None
    from oij.io import _open_file

    f = _open_file(path)  # the caller closes it
    try:
        query, events = read_jsonl(f, path)  # reads the query line only
    except BaseException:
        f.close()
        raise
    if not supports(query):
        return query, _Source(events=events), f
    if os.path.isfile(path) and os.path.getsize(path) < SMALL_FILE:
        return query, _Source(blocks=_group(events, DATASET_BLOCK)), f
    from oij.io.columnar import jsonl_blocks_after_query

    return query, _Source(blocks=_block_columns(jsonl_blocks_after_query(f, path, query))), f


def _block_columns(blocks: Iterator[EventBlock]) -> Iterator[tuple[Columns, bool]]:
    for b in blocks:
        yield (b.kind, b.side, b.id, b.ts, b.key, b.value, b.channel), b.end


def _grouped(q: Query, events: Iterator[Event], size: int) -> _Source:
    from oij.reference.block_oracle import supports

    return _Source(blocks=_group(events, size)) if supports(q) else _Source(events=events)


def _group(events: Iterator[Event], size: int) -> Iterator[tuple[Columns, bool]]:
    """Events as column blocks of at most ``size``; on an input error, the events before it as a last block,
    then the error (a stream keeps its valid prefix, as on the event path)."""
    from oij.reference.block_oracle import event_columns

    buf: list[Event] = []
    try:
        for e in events:
            buf.append(e)
            if len(buf) >= size or type(e) is End:
                yield event_columns(buf), type(e) is End
                buf = []
    except InputError:
        if buf:
            yield event_columns(buf), False
        raise
    if buf:
        yield event_columns(buf), False


def _drain_blocks(bo: BlockOracle, sorter: CanonicalSorter) -> None:
    """Hand the block path's output so far to the sorter: pairs and aggregate rows as columns, the rest as rows."""
    import numpy as np

    res = bo.take()
    for a, b, null in res.pairs:
        if a.dtype == np.int64 and b.dtype == np.int64:
            sorter.add_pair_columns(a, b, null)
        else:  # an id beyond 64 bits (an object column): the sorter takes rows, and sorts in memory
            sorter.add(Results(pairs=[(x, None if z else y)
                                      for x, y, z in zip(a.tolist(), b.tolist(), null.tolist(), strict=True)]))
    for base, count, value, null, counts_are_values in res.aggregate_columns:
        sorter.add_aggregate_columns(base, count, value, null, counts_are_values)
    if res.aggregates or res.late:
        sorter.add(Results(aggregates=res.aggregates, late=[x for c in res.late for x in c.tolist()]))


def _write_sorted(out: IO[str], sorter: CanonicalSorter) -> None:
    sorter.write(out)
    out.flush()
    if out is sys.stdout:
        sys.stdout.flush()


def _progress_bar(enabled: bool) -> Any:
    """A progress bar on stderr counting events (None unless enabled and stderr is a terminal)."""
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(desc="join", unit=" ev", unit_scale=True, mininterval=0.5, file=sys.stderr)


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


def _run_profile(args: JoinOptions) -> int:
    from oij.spec.profiles import PROFILES, compute_profile_result

    if args.profile not in PROFILES:
        raise UsageError(f"--profile: unknown profile {args.profile!r}; known: {', '.join(PROFILES)}")
    check_outputs([args.output], [args.file])
    with input_events(args.file, args) as (q, events):
        evs = list(events)
    res = compute_profile_result(evs, q, PROFILES[args.profile])
    with output_file(args.output, [args.file]) as out:
        out.writelines(result_lines(res))
    return 0


__all__ = ["PATHS", "SMALL_FILE", "SMALL_INPUT", "JoinOptions", "join_file"]
