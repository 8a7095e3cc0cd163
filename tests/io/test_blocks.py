"""The columnar reader (oij.io.columnar) against the per-line readers, and the column-wise writer.

The per-line readers define what a file means; the block reader must give the
same events, or the same error after the same valid prefix, on every input --
including the fuzz corpus of the nothing-lost suite and inputs aimed at the
places where pyarrow's JSON reader is more lenient than ours (explicit nulls,
two objects on a line, an object over two lines, fields of another type).
Negative control: without its ``null`` guard the fast path accepts a line the
per-line reader rejects, and the differential check catches it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Generator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oij.spec.batch import Results
from oij.spec.model import End, Event, Query, StreamTuple, Watermark

from oij.io import columnar as blocks_mod
from oij.io.columnar import blocks_to_events, read_jsonl_blocks, read_parquet_blocks
from oij.io.errors import IdSet, InputError
from oij.io.jsonlread import read_jsonl
from oij.io.jsonlwrite import aggregate_lines, canonical_pair_order, pair_lines, result_lines
from oij.io.parquet import read_parquet, write_parquet
from oij.workloads import resolve, with_overrides, write_workload
from tests.budget import examples
from tests.io.test_nothing_lost import SEEDS, mutated

pytestmark = pytest.mark.timeout(120)

Outcome = tuple[list[Event], str | None]


def _drain(it: Any) -> Outcome:
    got: list[Event] = []
    try:
        for e in it:
            got.append(e)
    except InputError as e:
        return got, str(e)
    return got, None


def _per_line(data: bytes) -> Outcome:
    try:
        _q, events = read_jsonl(io.BytesIO(data), "f")
    except InputError as e:
        return [], str(e)
    return _drain(events)


def _blocks(data: bytes, block_bytes: int) -> Outcome:
    try:
        _q, blocks = read_jsonl_blocks(io.BytesIO(data), "f", block_bytes)
    except InputError as e:
        return [], str(e)
    return _drain(blocks_to_events(blocks))


def _same(a: Outcome, b: Outcome) -> bool:
    """Same error and the same events; repr also tells 1 from 1.0 and 1 from "1" (== would not)."""
    return a[1] == b[1] and [repr(x) for x in a[0]] == [repr(y) for y in b[0]]


SNEAKY = [
    b'"value":null', b'"channel":null', b'"side":null',  # explicit nulls
    b'"ts":1.0', b'"ts":1e3', b'"id":true', b'"value":"1"', b'"value":NaN', b'"value":1e400',
    b'"ts":5,"ts":6',  # a duplicate field
]


@st.composite
def sneaky(draw: st.DrawFn) -> bytes:
    """Valid files with one line changed where pyarrow and msgspec could disagree."""
    data = draw(st.sampled_from(SEEDS))
    lines = data.split(b"\n")
    i = draw(st.integers(1, max(1, len(lines) - 2)))
    op = draw(st.sampled_from(["field", "two", "split", "wm-side", "end-extra", "query"]))
    if op == "field":
        lines[i] = re.sub(rb',"ts":-?\d+', b"," + draw(st.sampled_from(SNEAKY)), lines[i], count=1)
    elif op == "two":
        lines[i] = lines[i] + lines[i + 1]
        del lines[i + 1]
        lines.insert(i + 1, b"")
    elif op == "split" and b"," in lines[i]:
        at = lines[i].index(b",")
        lines[i: i + 1] = [lines[i][: at + 1], lines[i][at + 1:]]
    elif op == "wm-side":
        lines[i] = b'{"type":"watermark","ts":1,"side":"base"}'
    elif op == "end-extra":
        lines[i] = b'{"type":"end","ts":1}'
    else:
        lines[i] = lines[0]
    return b"\n".join(lines)


@pytest.mark.timeout(900)  # 3 MiB lines read in 64-byte blocks (49152 reads each); slow on a loaded machine
@settings(max_examples=examples(60, 120), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.one_of(mutated(), sneaky()), block=st.sampled_from([64, 300, 4096, 1 << 20]))
def test_block_reader_reads_what_the_line_reader_reads(data: bytes, block: int) -> None:
    assert _same(_per_line(data), _blocks(data, block))


def test_invalid_utf8_inside_a_string_gets_the_line_readers_error() -> None:
    """pyarrow's JSON reader raises a bare ArrowException ("Wrapping ... failed", not ArrowInvalid) on invalid
    UTF-8 inside a string; the block goes to the per-line reader, which names the line (found by the block
    oracle's fuzz test)."""
    lines = SEEDS[0].split(b"\n")
    lines[1] = lines[1].replace(b'"ts"', b'"key":"\xeb2","ts"', 1) if b'"key"' not in lines[1] else \
        re.sub(rb'"key":("[^"]*"|-?\d+)', b'"key":"\xeb2"', lines[1], count=1)
    data = b"\n".join(lines)
    got = _blocks(data, 1 << 20)
    assert got[1] is not None and ":2:" in got[1], got[1]
    assert _same(_per_line(data), got)


def test_negative_control_without_the_null_guard_the_readers_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    data = SEEDS[0].replace(b'"channel":0}', b'"channel":null}', 1)
    assert _per_line(data)[1] is not None  # the per-line reader rejects the explicit null
    assert _same(_per_line(data), _blocks(data, 1 << 20))
    monkeypatch.setattr(blocks_mod, "refuse_text", lambda chunk: False)
    assert not _same(_per_line(data), _blocks(data, 1 << 20))


def test_clean_generated_files_take_the_fast_path(tmp_path: Path) -> None:
    for key_type in ("int", "str"):
        p = with_overrides(resolve("scale-oij-default"), {"key_type": key_type, "aggregate": None})
        f = tmp_path / f"w-{key_type}.jsonl"
        write_workload(str(f), p, 20_000, 1)
        before = dict(blocks_mod.STATS)
        with f.open("rb") as fh:
            got = _drain(blocks_to_events(read_jsonl_blocks(fh, str(f), 1 << 16)[1]))
        with f.open("rb") as fh:
            want = _drain(read_jsonl(fh, str(f))[1])
        assert got == want and got[1] is None
        assert blocks_mod.STATS["slow"] == before["slow"]
        assert blocks_mod.STATS["fast"] > before["fast"] + 10


class _CountingReader(io.RawIOBase):
    """A file that counts the bytes its reader took so far."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)
        self.taken = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self._f.readinto(b)
        self.taken += n
        return n


def _taken_at_first_block(data: bytes, block: int) -> tuple[int, int]:
    raw = _CountingReader(data)
    _q, it = read_jsonl_blocks(io.BufferedReader(raw), "w.jsonl", block)  # as open(path, "rb") gives it
    next(it)
    taken = raw.taken
    assert isinstance(it, Generator)
    it.close()  # the helper thread stopped
    return taken, len(data)


def test_the_block_reader_streams_holding_a_chunk_ahead_not_the_file(tmp_path: Path) -> None:
    """The reader holds the chunk it checks and the one being decoded ahead, never the rest of the input: at its
    first block it has taken a few chunks of a 100-chunk file, not the whole of it."""
    f = tmp_path / "w.jsonl"
    write_workload(str(f), with_overrides(resolve("scale-oij-default"), {"aggregate": None}), 20_000, 1)
    data = f.read_bytes()
    block = len(data) // 100
    taken, size = _taken_at_first_block(data, block)
    assert taken <= 4 * block < size


def test_negative_control_a_reader_that_lists_its_chunks_first_is_caught(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    """The bug this test was written for: ``[*whole_lines(...)]`` read the whole file before the first block."""
    f = tmp_path / "w.jsonl"
    write_workload(str(f), with_overrides(resolve("scale-oij-default"), {"aggregate": None}), 20_000, 1)
    data = f.read_bytes()
    block = len(data) // 100
    whole = blocks_mod.whole_lines
    monkeypatch.setattr(blocks_mod, "whole_lines", lambda stream, b: iter(list(whole(stream, b))))
    taken, size = _taken_at_first_block(data, block)
    assert taken == size


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200).map(lambda b: b.replace(b"\x00", b"\n")), block=st.integers(1, 40))
def test_whole_lines_cuts_at_newlines_and_loses_nothing(data: bytes, block: int) -> None:
    """The chunks put back together are the stream; every chunk but the last ends with a newline, none is
    empty, each is ``bytes`` (the decoders search it), and a chunk ends at the last newline of its read."""
    chunks = list(blocks_mod.whole_lines(io.BytesIO(data), block))
    assert all(type(c) is bytes and c for c in chunks)
    assert b"".join(chunks) == data
    assert all(c.endswith(b"\n") for c in chunks[:-1])
    ends = [sum(map(len, chunks[: k + 1])) for k in range(len(chunks))]
    for k, end in enumerate(ends[:-1]):  # no newline in the read after a cut (else the cut would be there)
        read_end = -(-end // block) * block
        assert b"\n" not in data[end:read_end], (k, end)


@st.composite
def parquet_events(draw: st.DrawFn) -> tuple[Query, list[Any], str]:
    keys = draw(st.sampled_from(["int", "str"]))
    n = draw(st.integers(0, 40))
    rows: list[Any] = []
    for _ in range(n):
        if draw(st.integers(0, 9)) == 0:
            rows.append(("watermark", None, None, draw(st.integers(-5, 50)), None, None, draw(st.integers(0, 1))))
        else:
            key: Any = draw(st.integers(0, 3))
            rows.append(("tuple", draw(st.sampled_from(["base", "probe", "bad", None])), draw(st.integers(0, n + 2)),
                         draw(st.one_of(st.integers(-100, 100), st.just(1 << 62), st.just(-(1 << 62) - 1))),
                         str(key) if keys == "str" else key,
                         draw(st.sampled_from([0.0, 1.5, None, float("nan")])), draw(st.sampled_from([0, 1, 2, None]))))
    if draw(st.booleans()):
        rows.append(("end", None, None, None, None, None, None))
        if draw(st.integers(0, 5)) == 0:
            rows.append(rows[0] if rows else ("end", None, None, None, None, None, None))
    return Query(-10, 5, channels=2), rows, keys


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=parquet_events())
def test_parquet_block_reader_reads_what_the_row_reader_reads(case: tuple[Query, list[Any], str],
                                                             tmp_path_factory: pytest.TempPathFactory) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from oij.io.jsonlwrite import format_query
    from oij.io.parquet import META_KEY, schema

    q, rows, keys = case
    path = tmp_path_factory.mktemp("pq") / "e.parquet"
    sch = schema(pa.int64() if keys == "int" else pa.string()).with_metadata({META_KEY: format_query(q).encode()})
    cols: list[Any] = list(zip(*rows, strict=True)) if rows else [() for _ in range(7)]
    pq.write_table(pa.table({n: list(c) for n, c in zip(sch.names, cols, strict=True)}, schema=sch), path)

    def outcome(reader: Any) -> Outcome:
        try:
            _q, it = reader(str(path))
        except InputError as e:
            return [], str(e)
        return _drain(it)

    want = outcome(read_parquet)
    got = outcome(lambda p: (lambda qb: (qb[0], blocks_to_events(qb[1])))(read_parquet_blocks(p)))
    assert _same(want, got)


def test_parquet_round_trip_is_read_column_wise(tmp_path: Path) -> None:
    q = Query(-10, 0, channels=2)
    events: list[Event] = [StreamTuple("base", i, i, i % 3, float(i), 0) for i in range(100)]
    events.append(Watermark(50, 1))
    f = tmp_path / "e.parquet"
    write_parquet(str(f), q, [*events, End()], key_type="int")
    before = dict(blocks_mod.STATS)
    assert _drain(blocks_to_events(read_parquet_blocks(str(f))[1])) == ([*events, End()], None)
    assert blocks_mod.STATS["slow"] == before["slow"]
    g = tmp_path / "no-end.parquet"
    write_parquet(str(g), q, events, key_type="int")  # no end row: both readers say so, at the same row
    assert _same(_drain(read_parquet(str(g))[1]), _drain(blocks_to_events(read_parquet_blocks(str(g))[1])))


def test_a_negative_zero_value_in_parquet_stays_on_the_column_path(tmp_path: Path) -> None:
    """In Parquet a -0.0 value is -0.0 to both readers (only oij-jsonl's integer ``-0`` is 0.0 to the per-line
    reader and -0.0 to pyarrow's): the batch is read column-wise, and the value keeps its sign."""
    q = Query(-10, 0, aggregate="sum")
    events: list[Event] = [StreamTuple("probe", 1, 1, 1, -0.0), StreamTuple("base", 2, 2, 1, 1.0), End()]
    f = tmp_path / "z.parquet"
    write_parquet(str(f), q, events, key_type="int")
    before = dict(blocks_mod.STATS)
    got = _drain(blocks_to_events(read_parquet_blocks(str(f))[1]))
    assert got == (events, None) and repr(cast(StreamTuple, got[0][0]).value) == "-0.0"
    assert blocks_mod.STATS["slow"] == before["slow"]


def test_the_group_cache_opens_a_file_once_and_reads_every_group(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """oij.io.pieces.GroupCache: the block engine's workers read row group after row group of one file; the
    file is opened (its footer parsed) once per path, not once per group -- one parse per group grew a kp
    worker by about 1 MiB a round (issue 47) -- and every group read is the file's own.  Negative control: a
    second path is opened again, and a closed cache opens its file again."""
    import pyarrow.parquet as pq

    from oij.io import parquet as parquet_mod
    from oij.io.pieces import GroupCache

    q = Query(-10, 0)
    paths = []
    for name in ("a", "b"):
        one, f = tmp_path / f"{name}-one.parquet", tmp_path / f"{name}.parquet"
        write_parquet(str(one), q, [*[StreamTuple("base", i, i, i % 3, float(i)) for i in range(300)], End()],
                      key_type="int")
        pq.write_table(pq.read_table(one), f, row_group_size=64)  # the query stays in the schema's metadata
        assert pq.ParquetFile(f).metadata.num_row_groups >= 4
        paths.append(str(f))
    opened: list[str] = []
    real = parquet_mod.open_parquet

    def counting(path: str, query: Query | None = None) -> Any:
        opened.append(path)
        return real(path, query)

    monkeypatch.setattr(parquet_mod, "open_parquet", counting)
    def group(path: str, g: int) -> Any:
        return pq.ParquetFile(path, read_dictionary=["type", "side"]).read_row_group(g)

    cache = GroupCache()
    a, b = paths
    for g in (0, 1, 1, 2, 3, 0):
        assert cache.get(a, g, q, False).equals(group(a, g))
    assert opened == [a]
    assert cache.get(b, 2, q, False).equals(group(b, 2))
    assert opened == [a, b]
    cache.close()
    cache.close()
    assert cache.get(b, 2, q, False).equals(group(b, 2)) and opened == [a, b, b]


# ---------------------------------------------------------------------- IdSet.add_many


PAGED = st.builds(lambda page, low: page << 16 | low, st.integers(0, 150), st.integers(0, 3))
"""Ids over 151 pages, a few per page: batches that cross 64 pages, where the set may turn into a plain one."""


@settings(max_examples=150, deadline=None)
@given(batches=st.lists(st.lists(st.one_of(st.integers(0, 300), st.integers(0, 1 << 22), PAGED,
                                            st.integers(-(1 << 63), (1 << 63) - 1)), max_size=50), max_size=12))
def test_add_many_is_atomic_and_agrees_with_add(batches: list[list[int]]) -> None:
    many, one = IdSet(), IdSet()
    model: set[int] = set()
    for b in batches:
        ok = len(set(b)) == len(b) and not (set(b) & model)
        assert many.add_many(np.array(b, dtype=np.int64)) == ok
        if ok:
            model |= set(b)
            for x in sorted(b):
                assert one.add(x)
        assert all(x in many for x in model) and many.count == len(model)
        assert all((x in many) == (x in model) for x in b)
        assert (many.sparse is None) == (one.sparse is None)  # the switch to a plain set as add makes it


RUN = st.tuples(st.integers(-3, 5), st.sampled_from([0, 1, 7, 8, 9, 4095, 65528, 65535]), st.integers(1, 70_000))
"""A run of consecutive ids: its page (some negative), an offset in it near a byte or page edge, a length."""


def _expected_pages(model: set[int]) -> dict[int, bytes]:
    """The bit pages of the ids ``model``: page -> 8 KiB, bit i of byte j set iff id page * 2^16 + 8j + i is in it."""
    ids = np.array(sorted(model), dtype=np.int64)
    pages: dict[int, bytes] = {}
    for pg in np.unique(ids >> 16).tolist():
        bits = np.zeros(1 << 16, np.bool_)
        bits[ids[(ids >> 16) == pg] & 0xFFFF] = True
        pages[pg] = np.packbits(bits, bitorder="little").tobytes()
    return pages


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(RUN, min_size=1, max_size=4), max_size=5), data=st.data())
def test_add_many_of_runs_sets_the_bits_add_sets(batches: list[list[tuple[int, int, int]]],
                                                  data: st.DataObject) -> None:
    """Batches of a few runs of consecutive ids (the range path of add_many: pages tested and set as bytes), some
    overlapping earlier batches or themselves: the verdict and the pages are the model's, bit for bit, and a
    refused batch changes nothing.  Negative control: a last-byte mask one bit short fails it."""
    many = IdSet()
    model: set[int] = set()
    for runs in batches:
        b = [x for pg, off, length in runs for x in range((pg << 16) + off, (pg << 16) + off + length)]
        b = data.draw(st.permutations(b)) if len(b) < 300 else b[::-1]
        ok = len(set(b)) == len(b) and not (set(b) & model)
        assert many.add_many(np.array(b, dtype=np.int64)) == ok
        if ok:
            model |= set(b)
        assert many.count == len(model) and many.sparse is None
        assert {pg: bytes(arr) for pg, arr in many.pages.items() if any(arr)} == _expected_pages(model)


@pytest.mark.parametrize("a", [0, 5, 8, 65535, 65536 + 9])
@pytest.mark.parametrize("length", [64, 200, 70_000])
def test_add_many_of_runs_refuses_a_run_that_meets_an_earlier_one_in_one_id(a: int, length: int) -> None:
    """A run ``[a, b]`` held; each run that shares exactly one id with it -- its first or its last, from either side,
    across byte and page edges -- is refused whole, and the runs that only touch it are taken.  Negative control:
    the range test skipping the last bit of each page's share fails it."""
    b = a + length - 1
    for lo, hi, ok in [(a - 100, a, False), (b, b + 100, False), (a - 100, a - 1, True), (b + 1, b + 100, True)]:
        s = IdSet()
        assert s.add_many(np.arange(a, b + 1, dtype=np.int64))
        assert s.add_many(np.arange(lo, hi + 1, dtype=np.int64)) == ok
        assert s.count == length + (hi - lo + 1) * ok
        assert all((x in s) == (ok or a <= x <= b) for x in (lo, hi))  # a refused run: only the shared id


def test_dense_ids_past_64_pages_stay_on_the_vectorised_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """4.6 million dense ids (70 pages) in blocks of 2^16, in a bounded disorder: add_many never falls back to
    ``add`` per id (it did for every block that opened a page past 64 pages), and
    the set is the one ``add`` gives: pages, every full page the shared one.  Negative control: with the
    fallback's condition always true, the spy sees ``add`` called."""
    calls = []
    real_add = IdSet.add

    def spy(self: IdSet, x: int) -> bool:
        calls.append(x)
        return real_add(self, x)

    monkeypatch.setattr(IdSet, "add", spy)
    n = 70 << 16
    ids = np.arange(n, dtype=np.int64).reshape(-1, 1 << 12)[:, ::-1].ravel()  # reversed within each 4,096
    s = IdSet()
    for blk in np.split(ids, n >> 16):
        assert s.add_many(blk)
    assert calls == [] and s.sparse is None and s.count == n
    s._sweep()
    assert all(arr is IdSet.FULL for arr in s.pages.values()) and len(s.pages) == 70
    assert (n - 1) in s and n not in s
    monkeypatch.setattr(IdSet, "may_turn_sparse", lambda self, opened: True)
    assert s.add_many(np.arange(n, n + 10, dtype=np.int64)) and len(calls) == 10


# ---------------------------------------------------------------------- the column-wise writer

I64 = st.integers(-(1 << 63), (1 << 63) - 1)


@settings(max_examples=150, deadline=None)
@given(pairs=st.lists(st.tuples(I64, st.one_of(st.none(), I64)), max_size=60))
def test_pair_lines_are_byte_identical_to_result_lines(pairs: list[tuple[int, int | None]]) -> None:
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    null = np.array([p[1] is None for p in pairs], dtype=np.bool_)
    b = np.array([0 if p[1] is None else p[1] for p in pairs], dtype=np.int64)
    order = canonical_pair_order(a, b, null)
    want = "".join(result_lines(Results(pairs=pairs).canonical())).encode()
    assert pair_lines(a[order], b[order], null[order]) == want


AGG_VALUES = st.one_of(st.none(), st.floats(allow_nan=False), st.integers(-(2**60), 2**60).map(float),
                       st.sampled_from([0.0, -0.0, 1e16, -1e16, 9999999999999998.0, 1e16 - 2, 0.1, 1e22, 5e-324,
                                        float("inf"), float("-inf"), 2.5, -7.0]))


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**40), AGG_VALUES), max_size=40),
       counts=st.booleans())
def test_aggregate_lines_are_byte_identical_to_result_lines(rows: list[tuple[int, int, float | None]],
                                                            counts: bool) -> None:
    """The vectorised aggregate lines (the count aggregate's integer values, or floats and nulls) are the bytes
    :func:`result_lines` writes, row for row."""
    want_rows = [(b, n, n if counts else v) for b, n, v in rows]
    base = np.array([r[0] for r in rows], np.int64)
    count = np.array([r[1] for r in rows], np.int64)
    null = np.array([r[2] is None for r in rows], np.bool_)
    value = np.array([0.0 if r[2] is None else r[2] for r in rows], np.float64)
    got = aggregate_lines(base, count, value, null, counts)
    assert got.decode() == "".join(result_lines(Results(aggregates=want_rows)))


def test_negative_control_an_exponent_threshold_one_digit_late_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python spells 2e16 with an exponent; lines that took every integer-valued float below 10^17 for
    ``digits.0`` write ``20000000000000000.0`` and differ from :func:`result_lines` there, and only there."""
    from oij.io import jsonlwrite

    base, count, null = np.array([1, 2], np.int64), np.array([1, 1], np.int64), np.zeros(2, np.bool_)
    value = np.array([2e16, 5.0])
    want = "".join(result_lines(Results(aggregates=[(1, 1, 2e16), (2, 1, 5.0)])))
    assert aggregate_lines(base, count, value, null).decode() == want
    monkeypatch.setattr(jsonlwrite, "_REPR_WHOLE_BELOW", 1e17)
    assert aggregate_lines(base, count, value, null).decode() != want


def test_negative_control_a_sort_by_base_only_is_not_canonical() -> None:
    a = np.array([1, 1, 1], dtype=np.int64)
    b = np.array([9, 2, 0], dtype=np.int64)
    null = np.array([False, False, True])
    want = "".join(result_lines(Results(pairs=[(1, 9), (1, 2), (1, None)]).canonical())).encode()
    order = np.argsort(a, kind="stable")
    assert pair_lines(a[order], b[order], null[order]) != want
    order = canonical_pair_order(a, b, null)
    assert pair_lines(a[order], b[order], null[order]) == want


# ---------------------------------------------------------------- the writer's shape, by position (oij.io.template)

ODD = st.sampled_from(["00", "01", "-01", "-", "1.5", "1e3", "", " 1", "9" * 19, str((1 << 62) + 1),
                       str(-(1 << 62) - 1), "1" * 25])
NUMBERS = st.one_of(st.integers(-(10**18) + 1, 10**18 - 1).map(str),
                    st.sampled_from(["0", "-0", "9" * 18, "-" + "9" * 18, str(1 << 62), str(-(1 << 62))]),
                    st.integers(-10, 10).map(str), st.integers(-10, 10).map(str), ODD)
VALUES = st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(lambda v: repr(v + 0.0)),
                   st.integers(-(10**6), 10**6).map(lambda k: repr(k / 8)), st.sampled_from(
    ["0.0", "-0.0", "00.5", "0.05", "1.", ".5", "1", "123456789012.345", "1234567890123.456", "9007199254740993.0",
     "0.1", "5e-324", "1.7976931348623157e+308", "-1.25", "999999999999999.0", "99999999999999.99"]))


@st.composite
def writer_lines(draw: st.DrawFn) -> bytes:
    """Files in the writer's exact shape, some numbers (ids, ts, keys, values, channels) replaced by edge
    spellings: the template must read what the per-line reader reads, or leave the chunk to it."""
    n = draw(st.integers(1, 12))
    odd = draw(st.booleans())  # else only spellings the template reads: it must take the chunk and agree
    nums = NUMBERS if odd else st.one_of(st.integers(-(10**18) + 1, 10**18 - 1).map(str), st.sampled_from(
        ["0", "-0", "9" * 18, "-" + "9" * 18, str(1 << 62), str(-(1 << 62))]), st.integers(-10, 10).map(str))
    chans = NUMBERS if odd else st.sampled_from(["0", "1", "2", "-0"])
    vals = VALUES if odd else st.one_of(st.integers(-(10**6), 10**6).map(lambda k: repr(k / 8)), st.sampled_from(
        ["0.0", "-0.0", "0.05", "123456789012.345", "0.1", "-1.25", "999999999999999.0", "99999999999999.99"]))
    lines = [b'{"type":"query","lower":-5,"upper":5,"channels":3}']
    for i in range(n):
        if draw(st.integers(0, 4)) == 0:
            ts, ch = draw(st.one_of(st.just(str(i)), nums)), draw(st.one_of(st.just("1"), chans))
            lines.append(f'{{"type":"watermark","ts":{ts},"channel":{ch}}}'.encode())
            continue
        side = draw(st.sampled_from(["base", "probe"]))
        f = {k: draw(st.one_of(st.just(str(d)), chans if k == "channel" else nums)) for k, d in (
            ("id", i + 1), ("ts", i), ("key", i % 3), ("channel", 0))}
        v = draw(st.one_of(st.just("1.5"), vals))
        lines.append((f'{{"type":"tuple","side":"{side}","id":{f["id"]},"ts":{f["ts"]},"key":{f["key"]},'
                      f'"value":{v},"channel":{f["channel"]}}}').encode())
    if draw(st.booleans()):
        lines.append(b'{"type":"end"}')
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))  # the template reads CRLF lines too
    return eol.join(lines) + eol


@settings(max_examples=examples(250, 500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=writer_lines())
def test_the_template_reads_what_the_line_reader_reads(data: bytes) -> None:
    assert _same(_per_line(data), _blocks(data, 1 << 20))


def test_clean_files_take_the_template(tmp_path: Path) -> None:
    p = with_overrides(resolve("scale-oij-default"), {"aggregate": None})
    f = tmp_path / "w.jsonl"
    write_workload(str(f), p, 20_000, 1)
    before = dict(blocks_mod.STATS)
    with f.open("rb") as fh:
        got = _drain(blocks_to_events(read_jsonl_blocks(fh, str(f), 1 << 16)[1]))
    assert got[1] is None and len(got[0]) > 20_000
    assert blocks_mod.STATS.get("template", 0) > before.get("template", 0) + 10


def test_negative_control_a_template_that_allows_leading_zeros_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """JSON has no leading zeros (the per-line reader rejects ``"ts":01``); a template without that check
    reads the line, and the differential check sees the difference."""
    from oij.io import template

    data = b'{"type":"query","lower":-5,"upper":5}\n' \
           b'{"type":"tuple","side":"base","id":1,"ts":01,"key":1,"value":1.0,"channel":0}\n{"type":"end"}\n'
    assert _per_line(data)[1] is not None
    assert _same(_per_line(data), _blocks(data, 1 << 20))
    real = template._digits
    monkeypatch.setattr(template, "_digits", lambda a, w8, s, e, leading_zero_ok=False: real(a, w8, s, e, True))
    assert not _same(_per_line(data), _blocks(data, 1 << 20))
