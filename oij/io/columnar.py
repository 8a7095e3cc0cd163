"""Columnar reading: events in blocks of numpy columns, with exactly the per-line reader's semantics.

Data flow::

    oij-jsonl file --16 MiB of whole lines--> [DECODERS helper threads, that many chunks ahead] the template
       (oij.io.template: a chunk whose lines follow one layout per line kind, learned from its first line of
       each kind -- oij's own shape, json.dumps's spacing, any fixed field order after "type", optional fields
       absent, int or short plain string keys -- by position), else pyarrow.json (C++, every core) and the
       vectorised checks on the Arrow buffers --> [this thread, in stream order] ids and the end line --> EventBlock
                                                   | any doubt                              | any violation
                                                   v                                        v
                                     the per-line reader (oij.io.jsonlread) on that block's lines: the same events,
                                     or the same InputError (file, line, field) as it would raise
    Parquet file --row group batch [helper thread, one ahead: read, vectorised checks]--> [this thread] ids and
       the end line --> EventBlock   (any violation: the per-row reader)

Any valid oij-jsonl takes the fast path: any field order, spaces after ``:`` and ``,``, absent optional
fields, string keys, CRLF lines, values with exponents, blank lines, spaces before a line's end (a chunk
that mixes int and str keys, or holds the text ``null`` anywhere, goes to the per-line reader).  The checks
read the Arrow buffers with numpy -- strings compared byte by byte at their offsets, string keys packed into
integers for numpy's unique -- and import neither pandas nor pyarrow.compute.

The per-line readers (:func:`oij.io.jsonlread.read_jsonl`, :func:`oij.io.parquet.read_parquet`)
define what a file means; this module is only a faster way to the same
events.  Its rule: a block is accepted by the fast path only when the checks
below *prove* that the per-line reader would accept every line of it and
read the same values; otherwise the block goes through the per-line reader,
which yields its events or raises its error.  The JSONL proof obligations:

* every line that is not blank ends with ``}`` (then only spaces, tabs or
  CRs), so no object spans two lines (our fields hold no nested values, so
  a ``}`` that ends a line ends the object); both readers skip blank lines;
* pyarrow produced exactly one row per non-blank line (so no line holds two
  objects);
* the text holds no ``null`` (pyarrow reads an explicit null like an absent
  field; the per-line reader rejects it) and no unknown field (pyarrow
  raises), integers fit int64 (pyarrow raises), values are finite, and a
  chunk whose text holds an integer ``-0`` holds no -0.0 value (pyarrow
  reads that ``-0``, which is 0.0 to the per-line reader, as -0.0: such a
  chunk is the per-line reader's; ``-0.0`` and ``-0e0`` are -0.0 to both,
  and so is a -0.0 in Parquet);
* the ``type`` of every row is tuple, watermark or end, each row has its
  type's required fields and none of another type's, side is base or
  probe, channels are in range, ``|ts| <= 2^62``, watermarks only without
  lateness, ids are new (:meth:`oij.io.errors.IdSet.add_many`, atomic), and
  an end row is the last row of the stream.

``tests/io/test_blocks.py`` checks the two readers against each other on
mutated files (the per-line reader's fuzz corpus) and keeps a negative
control: a fast path without the ``null`` check is caught;
``tests/io/test_foreign_shapes.py`` on generated files in foreign shapes, with
planted errors, and negative controls of the string checks; and the template
on files in random layouts, with planted changes and negative controls
(a fixed text compared in part, a layout that repeats a field, string keys
read without the escape check).

Creates no process and no shared memory; helper threads per open stream (one for Parquet, :data:`DECODERS`
for oij-jsonl), stopped when its blocks are exhausted or closed.
"""

from __future__ import annotations

import io
import re
from collections.abc import Generator, Iterator
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pyarrow as pa

from oij.io.errors import InputError
from oij.io.jsonlread import EventParser, line_events, read_query_line
from oij.reference.columns import EventBlock as EventBlock  # re-exported: the type of the readers' blocks
from oij.spec.model import TS_LIMIT, Event, Query

BLOCK_BYTES = 16 << 20

I64 = npt.NDArray[np.int64]


# ---------------------------------------------------------------------- checks shared by both formats


STATS = {"fast": 0, "slow": 0}
"""Blocks read by the fast path and by the per-line reader since the process started (for tests)."""


def slow_block(events: Iterator[Event]) -> Generator[EventBlock, None, EventBlock]:
    """The per-line reader over one block: its events as a block, or -- on its error -- the events before the
    error as a block (yielded), then the error (so a stream keeps its valid prefix, as with the per-line reader)."""
    evs: list[Event] = []
    try:
        for e in events:
            evs.append(e)
    except InputError:
        if evs:
            yield EventBlock.from_events(evs)
        raise
    return EventBlock.from_events(evs)


def read_slow(events: Iterator[Event]) -> EventBlock:
    """The per-line (per-row) reader's events as one block, or its error; unlike :func:`slow_block`, the valid
    prefix before an error is not kept (for a caller that discards a block with an error).  O(n)."""
    gen = slow_block(events)
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            blk: EventBlock = stop.value
            return blk


def refuse_text(chunk: bytes) -> bool:
    """Text the fast path must not read: an explicit ``null`` (pyarrow reads it as an absent field)."""
    return b"null" in chunk


class _Doubt(Exception):
    """The fast path cannot prove the block valid: read it with the per-line reader."""


def _col(tb: pa.Table, name: str) -> pa.Array:
    import pyarrow as pa

    if name not in tb.column_names:
        return pa.nulls(tb.num_rows)
    c = tb.column(name)
    if isinstance(c, pa.ChunkedArray):
        return c.chunk(0) if c.num_chunks == 1 else c.combine_chunks()  # one chunk: no copy
    return c


def _valid(a: pa.Array) -> npt.NDArray[np.bool_]:
    """Which rows of ``a`` are not null (from its validity bitmap; no pyarrow.compute, whose import alone costs
    about half a CPU-second per process)."""
    import pyarrow as pa

    n = len(a)
    if pa.types.is_null(a.type):
        return np.zeros(n, np.bool_)
    if not a.null_count:
        return np.ones(n, np.bool_)
    bits = np.unpackbits(np.frombuffer(a.buffers()[0], np.uint8), bitorder="little")
    out: npt.NDArray[np.bool_] = bits[a.offset: a.offset + n].astype(np.bool_)
    return out


def _np_dtype(t: pa.DataType) -> np.dtype[Any]:
    """The numpy dtype of a fixed-width integer or float Arrow type (``to_pandas_dtype`` imports pandas)."""
    import pyarrow as pa

    size = t.bit_width // 8
    if pa.types.is_floating(t):
        return np.dtype(f"<f{size}")
    return np.dtype(f"<{'i' if pa.types.is_signed_integer(t) else 'u'}{size}")


def _ints(a: pa.Array) -> I64:
    """An integer (or null-typed) column as int64, nulls as 0 (``fill_null(a, 0)`` then ``astype(int64)``)."""
    import pyarrow as pa

    n = len(a)
    if pa.types.is_null(a.type):
        return np.zeros(n, np.int64)
    dt = _np_dtype(a.type)
    vals = np.frombuffer(a.buffers()[1], dt, n, a.offset * dt.itemsize).astype(np.int64)
    out: I64 = np.where(_valid(a), vals, 0) if a.null_count else vals
    return out


def _floats(a: pa.Array) -> npt.NDArray[np.float64]:
    """A float, integer (exact in a double only: else doubt) or null-typed column as float64, nulls as 0."""
    import pyarrow as pa

    n = len(a)
    if pa.types.is_null(a.type):
        return np.zeros(n)
    if pa.types.is_integer(a.type):
        iv = _ints(a)
        if len(iv) and int(np.abs(iv).max()) > 1 << 53:
            raise _Doubt
        return iv.astype(np.float64)
    dt = _np_dtype(a.type)
    vals = np.frombuffer(a.buffers()[1], dt, n, a.offset * dt.itemsize).astype(np.float64)
    out: npt.NDArray[np.float64] = np.where(_valid(a), vals, 0.0) if a.null_count else vals
    return out


def _string_parts(a: pa.Array) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """The row offsets (n + 1, from row 0 of ``a``'s data) and the data bytes of a string or large-string
    column, read from its Arrow buffers (no copy of the data; ``to_numpy`` of strings imports pandas)."""
    import pyarrow as pa

    n = len(a)
    dt = np.dtype("<i8") if pa.types.is_large_string(a.type) else np.dtype("<i4")
    offs = np.frombuffer(a.buffers()[1], dt, n + 1, a.offset * dt.itemsize).astype(np.int64)
    data_buf = a.buffers()[2]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return offs, data


def _equals(a: pa.Array, text: str) -> npt.NDArray[np.bool_]:
    """Row-wise ``a == text`` for a string, dictionary-of-strings or null column (null rows: False); doubt for
    another type.  On the Arrow buffers: the rows of ``text``'s length, then their bytes (one 8-byte word a row
    for a text of at most 8 bytes, else byte by byte; ``text`` is ASCII, so equal bytes are equal text, whatever
    the rest of the column holds).  O(n) (O(n len(text)) for a longer text)."""
    import pyarrow as pa

    n = len(a)
    if pa.types.is_null(a.type):
        return np.zeros(n, np.bool_)
    if pa.types.is_dictionary(a.type):
        d = a.dictionary
        if not (pa.types.is_string(d.type) or pa.types.is_large_string(d.type)):
            raise _Doubt
        hit = np.append(_equals(d, text), False)
        out: npt.NDArray[np.bool_] = hit[_ints(a.indices)] & _valid(a)
        return out
    if not (pa.types.is_string(a.type) or pa.types.is_large_string(a.type)):
        raise _Doubt
    want = np.frombuffer(text.encode("ascii"), np.uint8)
    offs, data = _string_parts(a)
    eq: npt.NDArray[np.bool_] = (offs[1:] - offs[:-1]) == len(want)
    rows = np.flatnonzero(eq)
    if len(rows) and len(want) <= 8:
        # one gather of 8 bytes a row: the data seen as overlapping little-endian words, one starting at each byte
        # (padded so that the last row's word stays inside), masked to the text's length
        padded = np.concatenate([data[offs[0]: offs[-1]], np.zeros(8, np.uint8)])
        words: npt.NDArray[np.uint64] = np.ndarray((len(padded) - 7,), np.dtype("<u8"), padded, 0, (1,))
        packed = int.from_bytes(want.tobytes(), "little")
        mask = np.uint64((1 << (8 * len(want))) - 1)
        eq[rows] = (words[offs[rows] - offs[0]] & mask) == np.uint64(packed)
    elif len(rows):
        start = offs[rows]
        for j, byte in enumerate(want.tolist()):
            eq[rows] &= data[start + j] == byte
    if a.null_count:
        eq &= _valid(a)
    return eq


def _string_keys(a: pa.Array) -> npt.NDArray[Any]:
    """A string column (UTF-8 checked by the caller) as an object array of str, None for a null, without
    pyarrow.compute or pandas: keys of 1 to 8 bytes (no zero byte) are packed in one integer each, numpy's
    unique finds the distinct ones, each is decoded once and every row takes its str; other keys by
    ``to_pylist``.  O(n log n)."""
    n = len(a)
    offs, data = _string_parts(a)
    valid = _valid(a)
    lens = np.where(valid, offs[1:] - offs[:-1], 1)
    short = n and bool(valid.any()) and int(lens.max()) <= 8 and int(lens.min()) >= 1
    if short and not bool((data[offs[0]: offs[-1]] == 0).any()):
        words = np.zeros(n, np.uint64)
        start = offs[:-1]
        for j in range(int(lens.max())):
            has = valid & (lens > j)
            byte = data[np.where(has, start + j, offs[0])].astype(np.uint64)
            words |= np.where(has, byte, np.uint64(0)) << np.uint64(8 * j)
        uniq, inv = np.unique(words, return_inverse=True)
        texts = np.empty(len(uniq), dtype=object)
        texts[:] = [int(w).to_bytes(8, "little").rstrip(b"\0").decode("utf-8") if w else None
                    for w in uniq.tolist()]
        out: npt.NDArray[Any] = texts[inv.reshape(-1)]
        return out
    keys = np.empty(n, dtype=object)
    keys[:] = a.to_pylist()
    return keys


_Prepared = tuple[EventBlock, "npt.NDArray[np.int64]", int]
"""A table's block before the stream's state is consulted: the block, its tuples' ids, its end lines."""


def _check_table(tb: pa.Table, p: EventParser, *, absent_is_null: bool) -> EventBlock:
    """The block of a table whose columns are the oij event columns; raises _Doubt when not proven valid:
    :func:`_prepare_table`, then :func:`_commit_table`."""
    return _commit_table(_prepare_table(tb, p.q, absent_is_null=absent_is_null), p)


def _commit_table(prepared: _Prepared, p: EventParser) -> EventBlock:
    """The checks of a prepared table that need the stream's state, in stream order: nothing after the end line,
    every id new (then recorded); raises _Doubt (and changes nothing) when one fails."""
    blk, tuple_ids, n_end = prepared
    if p.ended or not p.ids.add_many(tuple_ids):
        raise _Doubt
    if n_end:
        p.ended = True
    return blk


def _prepare_table(tb: pa.Table, q: Query, *, absent_is_null: bool) -> _Prepared:
    """Every check of :func:`_check_table` that needs only the table and the query (a pure function: it runs on
    a helper thread ahead of the stream); raises _Doubt when not proven valid.

    ``absent_is_null``: JSONL, where a field a line does not have must be absent (null here); in
    Parquet a row's cells that its type does not use are ignored, as the per-row reader does.
    Column types and nulls are read from the Arrow buffers with numpy.
    """
    import pyarrow as pa

    n = tb.num_rows
    typ = _col(tb, "type")
    if typ.null_count or q.cond:
        raise _Doubt
    is_t = _equals(typ, "tuple")
    is_w = _equals(typ, "watermark")
    is_e = _equals(typ, "end")
    if not bool((is_t | is_w | is_e).all()):
        raise _Doubt
    n_end = int(is_e.sum())
    if n_end > 1 or (n_end == 1 and not is_e[-1]):
        raise _Doubt
    if is_w.any() and q.lateness is not None:
        raise _Doubt
    side, ids, ts, key, value, channel = (_col(tb, c) for c in ("side", "id", "ts", "key", "value", "channel"))
    # required fields
    if not bool(_valid(side)[is_t].all() and _valid(ids)[is_t].all() and _valid(ts)[~is_e].all()
                and _valid(key)[is_t].all()):
        raise _Doubt
    if absent_is_null:
        for a, allowed in ((side, is_t), (ids, is_t), (key, is_t), (value, is_t), (ts, ~is_e), (channel, ~is_e)):
            if a.null_count < n and bool(_valid(a)[~allowed].any()):
                raise _Doubt
    if not all(pa.types.is_integer(a.type) or pa.types.is_null(a.type) for a in (ts, ids, channel)):
        raise _Doubt
    if not (pa.types.is_floating(value.type) or pa.types.is_integer(value.type) or pa.types.is_null(value.type)):
        raise _Doubt
    isb = _equals(side, "base")
    isp = _equals(side, "probe")
    if not bool((isb | isp)[is_t].all()):
        raise _Doubt
    keep = slice(0, n - n_end)  # the end line, if any, is the last row (above): every other row is an event
    tsn = _ints(ts)[keep]
    if len(tsn) and not bool(((tsn >= -TS_LIMIT) & (tsn <= TS_LIMIT)).all()):
        raise _Doubt
    chn = _ints(channel)[keep]
    if len(chn) and not bool(((chn >= 0) & (chn < q.channels)).all()):
        raise _Doubt
    vals = _floats(value)[keep]
    tk = is_t[keep]
    every_t = bool(tk.all())  # no watermark line (lateness mode, or a block between two): no masking below
    if not every_t:
        vals = np.where(tk, vals, 0.0)
    if len(vals) and not bool(np.isfinite(vals).all()):
        raise _Doubt
    idn = _ints(ids)[keep]
    if pa.types.is_integer(key.type):
        keys: npt.NDArray[Any] = _ints(key)[keep]
    elif pa.types.is_string(key.type) or pa.types.is_large_string(key.type):
        try:  # pyarrow's JSON reader leaves UTF-8 inside strings unchecked: the per-line reader names the line
            key.validate(full=True)
            keys = _string_keys(key)[keep]
        except (pa.ArrowException, UnicodeDecodeError):
            raise _Doubt from None
    elif pa.types.is_null(key.type) and not tk.any():
        keys = np.zeros(len(tk), np.int64)
    else:
        raise _Doubt
    if every_t:
        sides = (~isb[keep]).astype(np.int8)
        return EventBlock(np.zeros(len(tk), np.int8), sides, idn, tsn, keys, vals, chn, bool(n_end)), idn, n_end
    kind = np.where(tk, 0, 1).astype(np.int8)
    sides = np.where(tk, np.where(isb[keep], 0, 1), -1).astype(np.int8)
    return (EventBlock(kind, sides, np.where(tk, idn, 0), tsn, keys, vals, np.where(tk | is_w[keep], chn, 0),
                       bool(n_end)), idn[tk], n_end)


# ---------------------------------------------------------------------- oij-jsonl

def _schema(key_type: str) -> pa.Schema:
    """The explicit schema of pyarrow's JSON reader, with int (``"int"``) or str (``"str"``) keys."""
    import pyarrow as pa

    kt = pa.int64() if key_type == "int" else pa.string()
    return pa.schema([("type", pa.string()), ("side", pa.string()), ("id", pa.int64()), ("ts", pa.int64()),
                      ("key", kt), ("value", pa.float64()), ("channel", pa.int64())])


def read_jsonl_blocks(stream: IO[bytes], path: str, block_bytes: int = BLOCK_BYTES,
                      int64_ids: bool = False) -> tuple[Query, Iterator[EventBlock]]:
    """Read the query line now; return it and a lazy iterator of event blocks (module docstring).

    ``int64_ids``: refuse, naming the line, an id beyond 64 bits (the parallel engines' reader)."""
    q = read_query_line(stream, path)
    return q, _jsonl_blocks(stream, path, q, block_bytes, int64_ids)


def jsonl_blocks_after_query(stream: IO[bytes], path: str, q: Query, block_bytes: int = BLOCK_BYTES,
                             int64_ids: bool = False) -> Iterator[EventBlock]:
    """The lazy event blocks of an oij-jsonl stream whose query line ``q`` was already read (by
    :func:`oij.io.jsonlread.read_jsonl` or :func:`oij.io.jsonlread.read_query_line`): what :func:`read_jsonl_blocks`
    returns after the query, for a caller that chose blocks or events only once it knew the query."""
    return _jsonl_blocks(stream, path, q, block_bytes, int64_ids)


def whole_lines(stream: IO[bytes], block_bytes: int) -> Iterator[bytes]:
    """The stream in chunks of whole lines, about ``block_bytes`` each (the last one may lack its newline).
    Each byte is copied once at most: a chunk is the text left over from the last read joined with this
    read's bytes up to its last newline (a view), or this read itself when nothing was left over and it ends
    with a newline."""
    rest: list[bytes] = []  # the text after the last newline read so far (no newline in it), in pieces
    while True:
        data = stream.read(block_bytes)
        if not data:
            if rest:
                yield b"".join(rest)
            return
        cut = data.rfind(b"\n") + 1
        if not cut:
            rest.append(data)  # a line longer than a block: keep reading (joined once, not once per block)
            continue
        if cut == len(data) and not rest:
            yield data
            continue
        yield b"".join([*rest, memoryview(data)[:cut]])
        rest = [data[cut:]] if cut < len(data) else []


DECODERS = 2
"""Chunks of an oij-jsonl stream decoded at once on helper threads, ahead of the one being checked (the template
holds the GIL only between its numpy calls: on two cores, two decoders keep this thread busy where one left it
waiting)."""


def _jsonl_blocks(stream: IO[bytes], path: str, q: Query, block_bytes: int,
                  int64_ids: bool = False) -> Iterator[EventBlock]:
    """The blocks of the stream after its query line.  Decoding (:func:`_decode_jsonl`: the template, else
    pyarrow's reader; a pure function of the chunk) runs :data:`DECODERS` chunks ahead on as many helper
    threads, while this thread checks the chunk before them in the stream's order (:func:`_commit_jsonl`) and
    its consumer joins it: pyarrow and numpy release the GIL while they work.  Any doubt: the per-line reader,
    here, in order."""
    import collections
    import itertools
    from concurrent.futures import Future, ThreadPoolExecutor

    p = EventParser(q, path, int64_ids)
    line = 1  # the last line read so far
    key_types = ["int", "str"]
    ex = ThreadPoolExecutor(DECODERS, thread_name_prefix="oij-decode")
    pending: collections.deque[tuple[bytes, int, Future[_Decoded | None]]] = collections.deque()
    try:
        for chunk in itertools.chain(whole_lines(stream, block_bytes), [b""]):  # lazily: DECODERS chunks ahead
            if chunk:
                lines = chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)  # memchr-fast
                pending.append((chunk, lines, ex.submit(_decode_jsonl, chunk, lines, q, list(key_types))))
            while pending and (len(pending) > DECODERS or not chunk):
                done, n, fut = pending.popleft()
                blk = _commit_jsonl(fut.result(), p, key_types)
                if blk is None:
                    STATS["slow"] += 1
                    blk = yield from slow_block(line_events(io.BytesIO(done), line, p))
                else:
                    STATS["fast"] += 1
                line += n
                if len(blk) or blk.end:
                    yield blk
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
    if not p.ended:
        raise InputError(path, line + 1, "type", 'missing the last line {"type":"end"}')


_Decoded = tuple[str, Any]
"""What :func:`_decode_jsonl` found: ``("template", (columns, ids))``, ``("blank", None)`` or
``("arrow", (prepared block, key type))`` (:func:`_prepare_table`)."""


_INTEGER_MINUS_ZERO = re.compile(rb":\s*-0\s*[,}]")
"""A field whose value is the integer ``-0`` in a chunk's text (or the same characters inside a string: the
test only needs to catch every integer ``-0``, and a valid line spells a number after ``:``, before ``,`` or
``}``, with JSON's white space around it)."""


def _decode_jsonl(chunk: bytes, lines: int, q: Query, key_types: list[str],
                  threads: bool = True) -> _Decoded | None:
    """The stateless part of the fast path for ``chunk`` (``lines`` lines): the template's columns, or
    pyarrow's table of a chunk whose every non-blank line ends with ``}`` and that holds no ``null``, with the
    first key type of ``key_types`` it reads, checked by :func:`_prepare_table`; None when neither applies.  No
    check that needs the stream's state (ids seen, the end line): :func:`_commit_jsonl` makes them, in order.
    O(len(chunk))."""
    from oij.io.template import decode_template  # the writer's own shape, by position: no pyarrow

    cols = decode_template(chunk, q)  # (it reads no null: digits and fixed text only)
    if cols is not None:
        return "template", cols
    if not chunk.strip(b" \t\r\n"):  # blank lines only: nothing
        return "blank", None
    if q.cond or refuse_text(chunk):  # a cond's fields: the per-line reader checks them
        return None
    import pyarrow as pa  # imported only when the template could not take the chunk
    import pyarrow.json as pj

    rows = _object_lines(chunk, lines)
    if rows is None:
        return None
    for kt in key_types:
        try:
            tb = pj.read_json(io.BytesIO(chunk), read_options=pj.ReadOptions(block_size=1 << 20, use_threads=threads),
                              parse_options=pj.ParseOptions(explicit_schema=_schema(kt),
                                                            unexpected_field_behavior="error"))
        except (pa.ArrowException, UnicodeDecodeError, OverflowError):  # e.g. an id of 2^64, or invalid UTF-8
            continue  # in a string ("Unknown error: Wrapping ... failed"): the per-line reader gives the error
        if tb.num_rows != rows:
            return None
        try:
            prepared = _prepare_table(tb, q, absent_is_null=True)
        except _Doubt:
            return None
        v = prepared[0].value
        if bool(((v == 0.0) & np.signbit(v)).any()) and _INTEGER_MINUS_ZERO.search(chunk):
            return None  # pyarrow read an integer -0 (0.0 to the per-line reader) as -0.0
        return "arrow", (prepared, kt)
    return None


def _commit_jsonl(decoded: _Decoded | None, p: EventParser, key_types: list[str]) -> EventBlock | None:
    """The block of a decoded chunk once the stream's state accepts it (ids new, nothing after the end line,
    the Arrow checks of :func:`_check_table`); None for the per-line reader.  Moves the key type that read the
    chunk to the front of ``key_types``."""
    from oij.io.template import commit_template

    if decoded is None:
        return None
    kind, got = decoded
    if kind == "blank":
        return EventBlock.from_events([])
    if kind == "template":
        cols = commit_template(got, p)
        if cols is None:
            return None
        STATS["template"] = STATS.get("template", 0) + 1
        return EventBlock(*cols)
    prepared, kt = got
    if kt != key_types[0]:
        key_types.reverse()  # try this key type first next time
    try:
        return _commit_table(prepared, p)
    except _Doubt:
        return None


def _fast_jsonl(chunk: bytes, lines: int, p: EventParser, key_types: list[str],
                threads: bool = True) -> EventBlock | None:
    """The fast path on one chunk, decoded and checked on this thread; None for the per-line reader."""
    return _commit_jsonl(_decode_jsonl(chunk, lines, p.q, list(key_types), threads), p, key_types)


TRAIL_STEPS = 8
"""Vectorised steps ``_object_lines`` takes back over the whitespace that ends a line before it strips the
lines still in a run one by one."""

_SPACE = np.zeros(256, np.bool_)
_SPACE[[32, 9, 13]] = True  # the JSON whitespace a line may end with (its newline aside): what both readers skip


def _object_lines(chunk: bytes, lines: int) -> int | None:
    """The number of lines of ``chunk`` that are not blank, when every such line's last byte other than space,
    tab or CR is ``}``; else None.  A blank line (space, tab or CR only) is skipped by both readers.  With
    pyarrow's row count equal to this number, every such line holds exactly one object (our fields hold no
    nested values, so a ``}`` that ends a line ends the object).  O(len(chunk)): :data:`TRAIL_STEPS` vectorised
    steps back over trailing whitespace, then ``bytes.rstrip`` for each line still in a run (a line ending in
    3 MiB of spaces took 15 s when every step of a run was a vectorised step)."""
    a = np.frombuffer(chunk, dtype=np.uint8)
    ends = np.flatnonzero(a == 10)
    if not chunk.endswith(b"\n"):
        ends = np.r_[ends, len(a)]
    if len(ends) != lines:
        return None
    starts = np.r_[0, ends[:-1] + 1]
    pos = ends - 1
    back = np.flatnonzero(pos >= starts)
    back = back[_SPACE[a[pos[back]]]]
    for _ in range(TRAIL_STEPS):  # a line's own few trailing spaces or CR, all lines at once
        if not len(back):
            break
        pos[back] -= 1
        back = back[pos[back] >= starts[back]]
        back = back[_SPACE[a[pos[back]]]]
    _strip_runs(chunk, starts, pos, back)
    full = pos >= starts
    if not bool((a[pos[full]] == 125).all()):
        return None
    return int(full.sum())


def _strip_runs(chunk: bytes, starts: npt.NDArray[np.int64], pos: npt.NDArray[np.int64],
                lines: npt.NDArray[np.int64]) -> None:
    """For each of ``lines`` (still in a run of whitespace at ``pos``), move ``pos`` to the line's last byte
    other than space, tab or CR (before ``starts`` when there is none): C's rstrip over that line alone."""
    for k in lines.tolist():
        s = int(starts[k])
        pos[k] = s + len(chunk[s:int(pos[k]) + 1].rstrip(b" \t\r")) - 1


def decode_jsonl_chunk(chunk: bytes, p: EventParser, before: int, threads: bool = True) -> tuple[EventBlock, int]:
    """Whole lines of oij-jsonl after the query line, the first numbered ``before + 1``, as one block (the fast
    path, else the per-line reader with ``p``), and their number.  ``threads``: let pyarrow parse on every core
    (a process that is one of several workers, one per core, says False).  Raises the reader's
    :class:`~oij.io.errors.InputError`.  O(len(chunk))."""
    lines = chunk.count(b"\n") + (0 if not chunk or chunk.endswith(b"\n") else 1)
    blk = _fast_jsonl(chunk, lines, p, ["int", "str"], threads) if chunk else EventBlock.from_events([])
    if blk is None:
        blk = read_slow(line_events(io.BytesIO(chunk), before, p))
    assert blk is not None
    return blk, lines


# ---------------------------------------------------------------------- Parquet


def decode_parquet_rows(tb: pa.Table, path: str, p: EventParser, before: int) -> tuple[EventBlock, int]:
    """Rows of an oij Parquet file (a table slice), the first numbered ``before + 1``, as one block (the fast path
    per batch, else the per-row reader with ``p``), and their number.  O(rows)."""
    import pyarrow as pa

    from oij.io.parquet import row_events

    blocks: list[EventBlock] = []
    row = before
    for batch in tb.to_batches(max_chunksize=1 << 18):
        try:
            blk = _check_table(pa.Table.from_batches([batch]), p, absent_is_null=False)
        except _Doubt:
            blk = read_slow(row_events(batch, row, p, path))
        row += batch.num_rows
        blocks.append(blk)
    return EventBlock.concat(blocks), row - before


def read_parquet_blocks(path: str, q: Query | None = None) -> tuple[Query, Iterator[EventBlock]]:
    """The query and a lazy iterator of event blocks of an oij Parquet file (module docstring)."""
    from oij.io.parquet import open_parquet, row_events

    query, pf = open_parquet(path, q)

    def gen() -> Iterator[EventBlock]:
        p = EventParser(query, path)
        row = 0
        for batch, prepared in _ahead(_prepared_batches(pf.iter_batches(batch_size=1 << 18), query)):
            try:
                if prepared is None:
                    raise _Doubt
                blk = _commit_table(prepared, p)
                STATS["fast"] += 1
            except _Doubt:
                STATS["slow"] += 1
                blk = yield from slow_block(row_events(batch, row, p, path))
            row += batch.num_rows
            if len(blk) or blk.end:
                yield blk
        if not p.ended:
            raise InputError(path, row + 1, "type", "missing the last row of type 'end'")

    return query, gen()


def _prepared_batches(batches: Iterator[pa.RecordBatch], q: Query) -> Iterator[tuple[pa.RecordBatch, _Prepared | None]]:
    """Each batch with its :func:`_prepare_table` (None: doubt), lazily."""
    import pyarrow as pa

    for batch in batches:
        try:
            yield batch, _prepare_table(pa.Table.from_batches([batch]), q, absent_is_null=False)
        except _Doubt:
            yield batch, None


_DONE = object()


def _ahead(items: Iterator[Any]) -> Iterator[Any]:
    """``items``, each taken one step ahead on a helper thread (a Parquet file's next batch is read and decoded
    while the caller works on this one: pyarrow releases the GIL).  The helper is stopped when this generator
    ends or is closed."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="oij-read") as ex:
        fut = ex.submit(next, items, _DONE)
        while True:
            item = fut.result()
            if item is _DONE:
                return
            fut = ex.submit(next, items, _DONE)
            yield item


def blocks_to_events(blocks: Iterator[EventBlock]) -> Iterator[Event]:
    """The events of a block stream, in order."""
    for b in blocks:
        yield from b.events()
