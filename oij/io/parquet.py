"""oij events in Parquet, for bulk data: the same columns as oij-jsonl, one row per event.

Columns: ``type`` (tuple|watermark|end), ``side``, ``id``, ``ts``, ``key``,
``value``, ``channel``; fields an event does not have are null.  ``key`` is
int64 or string for the whole file (a stream that mixes int and str keys
needs oij-jsonl).  The query is stored as its oij-jsonl line in the file's
key-value metadata under ``oij.query``; command-line flags can supply or
override it.  Errors name the file, the row (1-based, like a line number:
row r is the event on line r+1 of the equivalent oij-jsonl) and the field.

Named fields (format 1.1): one float64 column ``fields.<name>`` per field the
query's cond reads (other than ``ts`` and ``value``), null where a row has
none.  A tuple with a field the cond does not read cannot be written (no data
is silently dropped: use oij-jsonl for it).

A *dataset* (a directory of Parquet files, as Spark or pyarrow writes one)
is read as one stream: its ``.parquet`` files in name order (Spark's
``part-00000-...``, ``part-00001-...``), the rows of each in file order;
hidden files (``.``, ``_``: ``_SUCCESS``, checksums) are skipped; a
subdirectory (a partitioned dataset, whose layout loses the arrival order) is
refused.  Ids are unique, and the end row last, over the whole dataset;
errors name the file inside the directory and its row.

Data flow: the writer buffers rows column-wise and writes a row group every
``rows_per_group`` events, so memory is constant in the stream length.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from oij.io.errors import InputError
from oij.io.jsonlread import EventParser, parse_query
from oij.io.jsonlwrite import format_query
from oij.spec.model import BUILTIN_FIELDS, End, Event, Query, StreamTuple, Watermark

META_KEY = b"oij.query"


COLUMNS = ("type", "side", "id", "ts", "key", "value", "channel")


FIELD_PREFIX = "fields."


def field_names(q: Query) -> tuple[str, ...]:
    """The named fields ``q.cond`` reads (``ts`` and ``value`` excluded), sorted: the file's field columns."""
    return tuple(sorted({n for c in q.cond for n in (c.left, c.right)} - set(BUILTIN_FIELDS)))


def event_row(e: Event, fields: tuple[str, ...] = (), strict: bool = True) -> tuple[Any, ...]:
    """The row of an event, in ``COLUMNS`` order then ``fields`` (None where the event has no such field).

    Raises ValueError for a tuple field not in ``fields`` if ``strict`` (a file must not lose data; a
    frame that only computes the join may leave out the fields the cond does not read).
    """
    if isinstance(e, StreamTuple):
        extra: tuple[Any, ...] = ()
        if fields or e.fields:
            have = dict(e.fields)
            unknown = sorted(set(have) - set(fields))
            if unknown and strict:
                raise ValueError(f"tuple {e.id} has field {unknown[0]!r}, which the query's cond does not read; "
                                 "Parquet keeps only the fields the cond reads: use oij-jsonl")
            extra = tuple(have.get(n) for n in fields)
        return ("tuple", e.side, e.id, e.ts, e.key, e.value, e.channel, *extra)
    none = (None,) * len(fields)
    if isinstance(e, Watermark):
        return ("watermark", None, None, e.ts, None, None, e.channel, *none)
    return ("end", None, None, None, None, None, None, *none)


def schema(key_type: pa.DataType, fields: tuple[str, ...] = ()) -> pa.Schema:
    """The Parquet schema of an event file whose keys have ``key_type`` (int64 or string), with ``fields``."""
    return pa.schema(
        [
            ("type", pa.string()),
            ("side", pa.string()),
            ("id", pa.int64()),
            ("ts", pa.int64()),
            ("key", key_type),
            ("value", pa.float64()),
            ("channel", pa.int32()),
            *((FIELD_PREFIX + n, pa.float64()) for n in fields),
        ]
    )


class ParquetEventWriter:
    """Write events to a Parquet file in row groups; use as a context manager."""

    def __init__(
        self,
        path: str,
        q: Query,
        *,
        key_type: str = "string",
        rows_per_group: int = 1 << 20,
        use_dictionary: bool | list[str] = True,
    ) -> None:
        """``use_dictionary`` is passed to pyarrow: a list of columns (e.g. the low-cardinality ones) is
        faster for bulk writing than dictionary-encoding the unique ``id``/``ts`` columns (same schema)."""
        self.path = path
        self.key_is_int = key_type == "int"
        self.fields = field_names(q)
        sch = schema(pa.int64() if self.key_is_int else pa.string(), self.fields)
        self.schema = sch.with_metadata({META_KEY: format_query(q).encode()})
        self.writer = pq.ParquetWriter(path, self.schema, compression="zstd", use_dictionary=use_dictionary)
        self.rows_per_group = rows_per_group
        self._reset()

    def _reset(self) -> None:
        self.cols: dict[str, list[Any]] = {name: [] for name in self.schema.names}

    def write(self, e: Event) -> None:
        """Buffer one event; flushes a row group when the buffer is full.  Amortised O(1)."""
        c = self.cols
        if isinstance(e, StreamTuple) and (type(e.key) is int) != self.key_is_int:
            raise ValueError(f"key {e.key!r} does not fit this file's key type; use oij-jsonl for mixed keys")
        for name, v in zip(self.schema.names, event_row(e, self.fields), strict=True):
            c[name].append(v)
        if len(c["type"]) >= self.rows_per_group:
            self.flush()

    def write_columns(self, cols: dict[str, list[Any]]) -> None:
        """Write a block of rows given column-wise (the fast path for generators)."""
        self.flush()
        self.writer.write_table(pa.table(cols, schema=self.schema))

    def flush(self) -> None:
        if self.cols["type"]:
            self.writer.write_table(pa.table(self.cols, schema=self.schema))
            self._reset()

    def close(self) -> None:
        self.flush()
        self.writer.close()

    def __enter__(self) -> ParquetEventWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_parquet(path: str) -> bool:
    """True iff ``path`` names Parquet input: a ``.parquet`` file or a directory (a dataset)."""
    return path.endswith(".parquet") or os.path.isdir(path)


def dataset_files(path: str) -> list[str]:
    """The files of Parquet input ``path``, in arrival order: ``[path]`` for a file; for a directory its
    ``.parquet`` files in name order (see the module docstring).  O(files log files)."""
    if not os.path.isdir(path):
        return [path]
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        raise InputError(path, 0, "file", e.strerror or str(e)) from None
    visible = [n for n in names if not n.startswith((".", "_"))]
    for n in visible:
        if os.path.isdir(os.path.join(path, n)):
            raise InputError(os.path.join(path, n), 0, "file", "a subdirectory: a partitioned dataset has no "
                             "arrival order; give a directory of Parquet files (part files in arrival order)")
    files = [os.path.join(path, n) for n in visible if n.endswith(".parquet")]
    if not files:
        raise InputError(path, 0, "file", "a directory without .parquet files")
    return files


def parquet_query(path: str) -> Query | None:
    """The query stored in the file's metadata (for a dataset: in its files, which must agree), or None."""
    found: list[tuple[str, Query | None]] = []
    for f in dataset_files(path):
        try:
            meta = pq.read_schema(f).metadata or {}
        except (OSError, pa.ArrowInvalid) as e:
            raise InputError(f, 0, "file", f"not a readable Parquet file ({e})") from None
        raw = meta.get(META_KEY)
        found.append((f, None if raw is None else parse_query(orjson.loads(raw), (f, 0))))
    first = found[0][1]
    for f, q in found[1:]:
        if q != first:
            raise InputError(f, 0, "query", f"the stored query differs from that of {found[0][0]}")
    return first


def open_parquet(path: str, q: Query | None = None) -> tuple[Query, pq.ParquetFile]:
    """The query (``q`` if given, else the stored one) and the open file, its required columns checked."""
    stored = parquet_query(path)
    query = q if q is not None else stored
    if query is None:
        raise InputError(path, 0, "query", "no query in the file's metadata: give --lower and --upper")
    return query, _open_checked(path)


def _open_checked(path: str) -> pq.ParquetFile:
    try:
        # type and side dictionary-encoded, as Parquet stores them: the block reader compares the few
        # dictionary values instead of every row's string
        pf = pq.ParquetFile(path, read_dictionary=["type", "side"])
    except (OSError, pa.ArrowInvalid) as e:
        raise InputError(path, 0, "file", f"not a readable Parquet file ({e})") from None
    missing = [n for n in ("type", "ts") if n not in pf.schema_arrow.names]
    if missing:
        raise InputError(path, 0, missing[0], "missing column")
    return pf


def read_parquet(path: str, q: Query | None = None) -> tuple[Query, Iterator[Event]]:
    """The query (``q`` if given, else the stored one) and a lazy iterator of the events (a file or a dataset)."""
    if os.path.isdir(path):
        files = dataset_files(path)
        stored = parquet_query(path)
        query = q if q is not None else stored
        if query is None:
            raise InputError(path, 0, "query", "no query in the dataset's metadata: give --lower and --upper")
        return query, _dataset_events(files, query)
    query, pf = open_parquet(path, q)
    return query, _events(pf, path, query)


def _events(pf: pq.ParquetFile, path: str, q: Query) -> Iterator[Event]:
    p = EventParser(q, path)
    row = 0
    for batch in pf.iter_batches(batch_size=65536):
        yield from row_events(batch, row, p, path)
        row += batch.num_rows
    if not p.ended:
        raise InputError(path, row + 1, "type", "missing the last row of type 'end'")


def _dataset_events(files: list[str], q: Query) -> Iterator[Event]:
    """The events of the files in order, checked as one stream (one parser: ids, the end row); rows counted
    per file."""
    p = EventParser(q, files[0])
    row = 0
    for f in files:
        pf = _open_checked(f)
        p.path = f
        row = 0
        for batch in pf.iter_batches(batch_size=65536):
            yield from row_events(batch, row, p, f)
            row += batch.num_rows
    if not p.ended:
        raise InputError(files[-1], row + 1, "type", "missing the last row of type 'end'")


def parquet_rows(path: str) -> int:
    """The number of rows (events) of a Parquet file or dataset, from the footers alone.  O(files)."""
    return sum(pq.ParquetFile(f).metadata.num_rows for f in dataset_files(path))


def row_events(batch: pa.RecordBatch, row: int, p: EventParser, path: str) -> Iterator[Event]:
    """The events of one record batch whose first row is row ``row + 1``, checked row by row."""
    n = batch.num_rows
    names = set(batch.schema.names)
    col = {
        name: batch.column(name).to_pylist() if name in names else [None] * n
        for name in schema(pa.string()).names
    }
    types, sides, ids, tss = col["type"], col["side"], col["id"], col["ts"]
    keys, vals, chans = col["key"], col["value"], col["channel"]
    fcols = [(name[len(FIELD_PREFIX):], batch.column(name).to_pylist()) for name in batch.schema.names
             if name.startswith(FIELD_PREFIX)]
    for r in range(n):
        row += 1
        if p.ended:
            raise InputError(path, row, "type", "nothing may follow the end row")
        typ = types[r]
        if typ == "tuple":
            v = vals[r]
            ch = chans[r]
            fv = {name: c[r] for name, c in fcols if c[r] is not None} if fcols else None
            yield p.tuple_(sides[r], ids[r], tss[r], keys[r], 0.0 if v is None else v, 0 if ch is None else ch, row,
                           fv)
        elif typ == "watermark":
            ch = chans[r]
            yield p.watermark(tss[r], 0 if ch is None else ch, row)
        elif typ == "end":
            p.ended = True
            yield End()
        else:
            raise InputError(path, row, "type", f"unknown type {typ!r} (tuple, watermark or end)")


def write_parquet(path: str, q: Query, events: Iterable[Event], *, key_type: str = "string") -> None:
    """Write a whole event sequence to ``path``."""
    with ParquetEventWriter(path, q, key_type=key_type) as w:
        for e in events:
            w.write(e)
