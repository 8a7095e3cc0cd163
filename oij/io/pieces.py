"""Input files cut into pieces that processes decode by themselves: parallel reading with the readers' meaning.

A *piece* is a byte range of whole lines of an oij-jsonl file (after its query line) or one row group of a
Parquet file.  :func:`plan_pieces` cuts a file (the driver reads only the query and a few bytes around each
cut); :func:`decode_piece` turns one piece into an :class:`~oij.reference.columns.EventBlock` in whatever process holds
it, through the columnar fast path of :mod:`oij.io.columnar` or the per-line reader, with a parser of its own.

What a piece cannot know by itself is decided by whoever reads the pieces in order (the parallel engines'
driver, :mod:`oij.parallel.blocks.driver`):

* the line numbers before it (a piece numbers its lines from 1; :func:`decode_piece` reports how many it has);
* whether an id repeats one of an *earlier* piece (a piece checks its own ids only): the caller adds every
  piece's ids to one :class:`~oij.io.errors.IdSet` in order;
* whether the end line came last, and whether it came at all.

On any doubt -- the piece's own reader failed, an id repeats across pieces, something follows an end line --
:func:`reread_piece` reads the piece again with the per-line reader and the caller's parser (its ids and
``ended`` state after every earlier piece) and the true first line number: it raises exactly the error the
sequential reader raises at the same place (file, line, field), or returns the events it accepts.  So a file
read in pieces means what :func:`oij.io.jsonlread.read_jsonl` and :func:`oij.io.parquet.read_parquet` say it means.

Creates no process and no shared memory.
"""

from __future__ import annotations

import io
import itertools
import os
from dataclasses import dataclass
from typing import Any

from oij.io.errors import InputError
from oij.io.jsonlread import EventParser, line_events, read_query_line
from oij.reference.columns import EventBlock
from oij.spec.model import Query

PIECE_BYTES = 8 << 20
"""Bytes of oij-jsonl per piece by default (about 90,000 events of a generated stream)."""


PIECE_ROWS = 1 << 18
"""Rows of a Parquet row group per piece at most (a row group is cut into slices of about this size)."""


@dataclass(frozen=True)
class Piece:
    """One piece: ``[start, stop)`` bytes of an oij-jsonl file, or rows ``[start, stop)`` of row group ``group``
    of a Parquet file."""

    path: str
    index: int
    start: int
    stop: int
    parquet: bool = False
    group: int = 0

    def size(self) -> int:
        """Bytes (oij-jsonl) or rows (Parquet) in the piece.  O(1)."""
        return self.stop - self.start


@dataclass
class Plan:
    """A file cut into pieces: its query, the pieces in file order, and the line (or row) number just before
    the first piece (the query line's; 0 for Parquet)."""

    path: str
    query: Query
    pieces: list[Piece]
    first_line: int
    parquet: bool
    max_rows: int  # an upper bound on the events of any piece


def plan_pieces(path: str, piece_bytes: int = PIECE_BYTES, q: Query | None = None,
                piece_rows: int = PIECE_ROWS) -> Plan:
    """Cut ``path`` (oij-jsonl or a ``.parquet`` file) into pieces.  ``q`` overrides a Parquet file's query.

    Raises :class:`~oij.io.errors.InputError` for a bad query line or an unreadable file.  O(pieces) reads of a
    few bytes.
    """
    if path.endswith(".parquet"):
        from oij.io.parquet import open_parquet

        query, pf = open_parquet(path, q)
        md = pf.metadata
        pieces: list[Piece] = []
        for g in range(md.num_row_groups):
            rows = md.row_group(g).num_rows
            k = max(1, -(-rows // piece_rows))
            cuts = [rows * i // k for i in range(k + 1)]
            pieces += [Piece(path, len(pieces) + i, a, b, True, g) for i, (a, b) in enumerate(itertools.pairwise(cuts))]
        return Plan(path, query, pieces, 0, True, max((p.size() for p in pieces), default=0))
    from oij.io import _open_file

    with _open_file(path) as f:
        query = read_query_line(f, path)
        start = f.tell()
        # the sequential readers number the line after the query line 2, blank lines before it or not
        first_line = 1
        size = os.fstat(f.fileno()).st_size
        cuts = [start]
        pos = start
        while pos < size:
            nxt = pos + piece_bytes
            if nxt >= size:
                break
            f.seek(nxt)
            while True:  # the next newline at or after nxt: a piece holds whole lines
                buf = f.read(1 << 16)
                if not buf:
                    nxt = size
                    break
                i = buf.find(b"\n")
                if i >= 0:
                    nxt += i + 1
                    break
                nxt += len(buf)
            if nxt >= size:
                break
            cuts.append(nxt)
            pos = nxt
        cuts.append(size)
    spans = [(a, b) for a, b in itertools.pairwise(cuts) if b > a]
    pieces = [Piece(path, i, a, b) for i, (a, b) in enumerate(spans)]
    # a tuple line is at least 52 bytes ({"type":"tuple","side":"base","id":0,"ts":0,"key":0}); a watermark 27
    longest = max((p.size() for p in pieces), default=0)
    return Plan(path, query, pieces, first_line, False, longest // 27 + 1)


def _read_bytes(piece: Piece) -> bytes:
    with open(piece.path, "rb") as f:
        f.seek(piece.start)
        return f.read(piece.size())


class GroupCache:
    """The last Parquet row group a process read (pieces of one group usually follow each other), and the
    open file it came from.

    The file is opened (its footer parsed and its columns checked) once per path, not once per row group: a
    footer parse allocates native memory that the allocator keeps, and at one parse per group a block engine's
    worker grew by about 1 MiB per round (3 bytes per tuple; issue 47's kp at 10^8 tuples)."""

    def __init__(self) -> None:
        self.key: tuple[str, int] | None = None
        self.table: Any = None
        self.file: tuple[str, Any] | None = None

    def get(self, path: str, group: int, q: Query, threads: bool) -> Any:
        """Row group ``group`` of ``path`` as a pyarrow table.  O(rows) on a miss; O(footer) on a new path."""
        if self.key != (path, group):
            if self.file is None or self.file[0] != path:
                from oij.io.parquet import open_parquet

                self.close()
                self.file = (path, open_parquet(path, q)[1])
            self.table, self.key = self.file[1].read_row_group(group, use_threads=threads), (path, group)
        return self.table

    def close(self) -> None:
        """Drop the table and close the file (idempotent)."""
        if self.file is not None:
            self.file[1].close()
        self.file, self.key, self.table = None, None, None


def decode_piece(piece: Piece, q: Query, threads: bool = False,
                 cache: GroupCache | None = None) -> tuple[EventBlock, int]:
    """The events of ``piece`` as one block, and its number of lines (rows), read with a fresh parser;
    ``threads``: pyarrow on every core (off by default: the caller is one of several decoding processes);
    ``cache``: keeps the last Parquet row group read.

    Ids are checked against the piece's own only, and its lines are numbered from 1: an
    :class:`~oij.io.errors.InputError` from here says only that the piece is bad; :func:`reread_piece` says
    where (module docstring).  O(piece size).
    """
    from oij.io.columnar import decode_jsonl_chunk, decode_parquet_rows

    p = EventParser(q, piece.path, int64_ids=True)
    if piece.parquet:
        tb = (cache or GroupCache()).get(piece.path, piece.group, q, threads)
        return decode_parquet_rows(tb.slice(piece.start, piece.size()), piece.path, p, 0)
    chunk = _read_bytes(piece)
    return decode_jsonl_chunk(chunk, p, 0, threads)


def reread_piece(piece: Piece, q: Query, p: EventParser, before: int) -> EventBlock:
    """``piece`` read again with the per-line (per-row) reader and the caller's parser ``p``, its first line
    (row) numbered ``before + 1``: the events the sequential reader yields there, or its error.  O(piece)."""
    from oij.reference.columns import EventBlock as Block

    if piece.parquet:
        from oij.io.columnar import read_slow
        from oij.io.parquet import row_events

        tb = GroupCache().get(piece.path, piece.group, q, False).slice(piece.start, piece.size())
        blocks: list[EventBlock] = []
        row = before
        for batch in tb.to_batches():
            blocks.append(read_slow(row_events(batch, row, p, piece.path)))
            row += batch.num_rows
        return Block.concat(blocks)
    from oij.io.columnar import read_slow

    return read_slow(line_events(io.BytesIO(_read_bytes(piece)), before, p))


def missing_end(plan: Plan, lines: int) -> InputError:
    """The error of a stream whose end line never came, ``lines`` lines (rows) after the query."""
    if plan.parquet:
        return InputError(plan.path, lines + 1, "type", "missing the last row of type 'end'")
    return InputError(plan.path, plan.first_line + lines + 1, "type", 'missing the last line {"type":"end"}')
