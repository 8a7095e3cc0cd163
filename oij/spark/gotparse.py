"""A ``--got`` output of oij-jsonl result lines parsed column-wise on the executors: byte ranges, pyarrow, numpy.

:func:`oij.spark.got.read_got_spark` reads a JSON-lines output with Spark's ``from_json`` and regular
expressions per line, then hashes every row in the JVM; at 10^7 tuples that was the largest step of ``oij check
--got``.  Here the file is cut into byte ranges (:func:`ranges`), each range's lines are parsed in one Python
worker by ``pyarrow.json.read_json`` with an explicit schema (:func:`parse_lines`) and, in the same pass,
reduced to the partial fingerprints of :mod:`oij.spark.fingerprint` (:func:`fingerprint_table`: Spark's
``xxhash64`` and its ``log2`` -- fdlibm's ``log`` -- ported to numpy, bit for bit), so only at most 4096 rows a
range reach the JVM (:func:`arrow_prints`).  The rows themselves stay a lazy frame (:func:`arrow_rows`, the
same parse handing Arrow batches of the result layout to the JVM), computed only when the fingerprints differ
from the oracle's or every row is kept.

A range takes the lines that *start* in it: its first line starts at the first line start at or after its
first byte (the byte before it is ``\\n``), its last line is the one running over its end.  So the ranges
partition the lines, whatever their sizes (a range may hold no line).

**Exactness.**  :func:`parse_lines` keeps the rules of :func:`oij.testing._schedule.fast_got_table` (the
pyarrow fast path of the small checks): it vouches for a range only when :func:`oij.testing._got.read_got`
certainly reads the same rows, and otherwise returns None -- a blank line or a CR anywhere, a field other than
those read, a kind other than ``pair``, ``aggregate`` or ``late`` (a null or missing kind too: ``read_got``
would infer it), an id, count or base that is not a JSON integer of 64 bits (pyarrow's int64 parse: ``3.0``,
``"3"``, ``true`` and ``2^63`` fail it), a value that is not a JSON number (or null), a missing field a kind
needs, a negative count, a row count other than the line count (two objects on one line, a line of spaces).
``--got-columns`` mappings are followed as ``read_got`` follows them (:func:`plan`), and declined where a
field could be read two ways.  A range that cannot vouch yields one row flagged (bucket -1, ``_bad``); the caller then
drops the whole parse and reads the file the old way (Spark's ``from_json``, then ``read_got``, which names
the first bad row).

The file is read by the executors at the driver's absolute path: in local mode the same file; on a cluster it
must be on storage every executor sees (as the events file already must).  A worker that cannot open it flags
its range bad (the file then goes the old way).

Data flow::

    PATH --ranges (driver: sizes only)--> spark.range(n) --mapInArrow: seek, align to lines, pyarrow.json,
         rules, numpy hashes--> per range: (bucket, n, s0..s5) or bucket -1 (declined) --sum per bucket-->
         the fingerprints (driver, <= 4096 rows)
    the same ranges --mapInArrow--> rows (kind, base, probe, count, value, id, _bad): lazy, on a difference only
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

RANGE_BYTES = 16 << 20
"""The most bytes a range spans (a worker holds one range and its table at a time)."""

INTS = ("base", "probe", "count", "id")
OUT_SCHEMA = "kind string, base long, probe long, count long, value double, id long, _bad boolean"


def plan(cols: dict[str, str]) -> tuple[str, dict[str, str]] | None:
    """(the column the kind is read from, {column: arrow type name}) for the ``--got-columns`` mapping ``cols``,
    or None where :func:`oij.testing._got.read_got` could read a field two ways.

    ``read_got`` reads a field from its mapped column, else from the column of its own name; the kind from the
    mapped column, else ``kind``, else ``type`` unless a field is mapped to ``type``.  Here the kind comes from
    exactly one column, which every row must hold: ``cols["kind"]``; else ``kind`` when a field is mapped to
    ``type``; else ``type`` (a row naming ``kind`` then has a field outside the schema and is declined).  A
    field mapped to ``kind`` without a kind mapping is declined (``read_got`` would read the kind from it)."""
    src = {f: cols.get(f, f) for f in (*INTS, "value")}
    if "kind" in cols:
        kind = cols["kind"]
    elif "kind" in src.values():
        return None
    elif "type" in cols.values():
        kind = "kind"
    else:
        kind = "type"
    types: dict[str, str] = {kind: "string"}
    for f, c in src.items():
        if types.setdefault(c, "float64" if f == "value" else "int64") != ("float64" if f == "value" else "int64"):
            return None  # one column read as two types: only read_got says what that means
    return kind, types


def parse_lines(data: bytes, cols: dict[str, str]) -> Any | None:
    """The rows of the oij-jsonl lines ``data`` as an Arrow table of the result layout (kind, base, probe, count,
    value, id), or None when ``read_got`` might read them otherwise (module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    p = plan(cols)
    if p is None:
        return None
    kind_col, types = p
    if not data:
        return _empty()
    if b"\r" in data or b"\n\n" in data or data.startswith(b"\n"):
        return None
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    schema = pa.schema([(n, getattr(pa, t)()) for n, t in types.items()])
    try:
        tb = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(use_threads=False),
                          parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer"))
    except (pa.ArrowException, ValueError):  # a parse error; UnicodeDecodeError (not UTF-8) is a ValueError
        return None
    if tb.num_rows != lines or set(tb.column_names) - set(types):
        return None
    tb = tb.combine_chunks()

    def col(f: str) -> Any:  # at least one row here (data holds a line, and rows == lines)
        return tb.column(cols.get(f, f) if f != "kind" else kind_col).chunk(0)

    kind = col("kind")
    pair, agg, late = (pc.fill_null(pc.equal(kind, k), False) for k in ("pair", "aggregate", "late"))
    pa_ = pc.or_(pair, agg)

    def any_(mask: Any) -> bool:
        return bool(pc.any(mask).as_py() or False)

    if not pc.all(pc.or_(pa_, late)).as_py():
        return None
    base, probe, count, value, id_ = col("base"), col("probe"), col("count"), col("value"), col("id")
    if (any_(pc.and_(pc.is_null(base), pa_)) or any_(pc.and_(pc.is_null(count), agg))
            or any_(pc.and_(pc.fill_null(pc.less(count, 0), False), agg)) or any_(pc.and_(pc.is_null(id_), late))
            or any_(pc.invert(pc.fill_null(pc.is_finite(value), True)))):
        return None

    def kept(c: Any, where: Any) -> Any:
        return pc.if_else(where, c, pa.scalar(None, c.type))

    return pa.table([pc.cast(kind, pa.string()), kept(base, pa_), kept(probe, pair), kept(count, agg),
                     kept(pc.cast(value, pa.float64()), agg), kept(id_, late)],
                    names=["kind", "base", "probe", "count", "value", "id"])


# ------------------------------------------------------------------------------------------------ fingerprints
# Spark's xxhash64 (org.apache.spark.unsafe.hash.XXH64.hashLong, seed 42, one hashLong per column in order, a double
# as the bits of its value with -0.0 as 0.0) and Spark's log2 (StrictMath.log(x) / StrictMath.log(2): fdlibm's
# e_log.c, ported below for normal positive doubles), in numpy, so that a worker computes the fingerprints of
# :mod:`oij.spark.fingerprint` bit for bit (the tests compare them with Spark's on random and edge rows).
_P1, _P2, _P3, _P4, _P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                           0x27D4EB2F165667C5)
_SEED = 42
_LN2_HI, _LN2_LO = 0x3FE62E42FEE00000, 0x3DEA39EF35793C76
_LG = (0x3FE5555555555593, 0x3FD999999997FA04, 0x3FD2492494229359, 0x3FCC71C51D8E78AF, 0x3FC7466496CB03DE,
       0x3FC39A09D078C69F, 0x3FC2F112DF3E5244)


def _f64(bits: int) -> float:
    import struct

    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


def hash_long(x: Any, seed: Any) -> Any:
    """XXH64.hashLong of the uint64 arrays ``x`` (a long's bits) and ``seed``, as Spark computes it."""
    import numpy as np

    u = np.uint64

    def rotl(v: Any, r: int) -> Any:
        return (v << u(r)) | (v >> u(64 - r))

    with np.errstate(over="ignore"):
        h = seed + u(_P5) + u(8)
        h ^= rotl(x * u(_P2), 31) * u(_P1)
        h = rotl(h, 27) * u(_P1) + u(_P4)
        h ^= h >> u(33)
        h *= u(_P2)
        h ^= h >> u(29)
        h *= u(_P3)
        h ^= h >> u(32)
    return h


def fdlibm_log(x: Any) -> Any:
    """fdlibm's ``__ieee754_log`` (Java's StrictMath.log) of an array of normal positive finite doubles, each
    operation rounded as there (numpy does one IEEE operation per ufunc, no fused multiply-add)."""
    import numpy as np

    x = np.asarray(x, np.float64)
    bits = x.view(np.uint64)
    hx = (bits >> np.uint64(32)).astype(np.int64)
    lx = bits & np.uint64(0xFFFFFFFF)
    k = (hx >> 20) - 1023
    hx = hx & 0x000FFFFF
    i = (hx + 0x95F64) & 0x100000
    xn = ((((hx | (i ^ 0x3FF00000)).astype(np.uint64)) << np.uint64(32)) | lx).view(np.float64)
    k = k + (i >> 20)
    f = xn - 1.0
    dk = k.astype(np.float64)
    ln2_hi, ln2_lo = _f64(_LN2_HI), _f64(_LN2_LO)
    lg1, lg2, lg3, lg4, lg5, lg6, lg7 = (_f64(b) for b in _LG)
    with np.errstate(all="ignore"):
        # |f| < 2^-20
        r_a = f * f * (0.5 - 0.33333333333333333 * f)
        small = np.where(f == 0.0, np.where(k == 0, 0.0, dk * ln2_hi + dk * ln2_lo),
                         np.where(k == 0, f - r_a, dk * ln2_hi - ((r_a - dk * ln2_lo) - f)))
        s = f / (2.0 + f)
        z = s * s
        w = z * z
        t1 = w * (lg2 + w * (lg4 + w * lg6))
        t2 = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7)))
        r = t2 + t1
        ij = (hx - 0x6147A) | (0x6B851 - hx)
        hfsq = 0.5 * f * f
        big = np.where(ij > 0,
                       np.where(k == 0, f - (hfsq - s * (hfsq + r)),
                                dk * ln2_hi - ((hfsq - (s * (hfsq + r) + dk * ln2_lo)) - f)),
                       np.where(k == 0, f - s * (f - r), dk * ln2_hi - ((s * (f - r) - dk * ln2_lo) - f)))
    return np.where((0x000FFFFF & (2 + hx)) < 3, small, big)


def _value_cell(v: Any, null: Any) -> list[Any]:
    """(tag, sign, e, m, exact) of :func:`oij.spark.fingerprint.value_cell` for the float64 array ``v`` (``null``:
    where the value is null), in numpy: longs as int64 arrays, ``exact`` as float64."""
    import numpy as np

    from oij.spark.fingerprint import CELL_BITS, CELL_WIDTH

    ax = np.abs(v)
    inside = ~null & ~np.isnan(v) & (ax >= 2.0 ** -900) & (ax <= 2.0 ** 900)
    safe = np.where(inside, ax, 1.0)
    with np.errstate(all="ignore"):
        e = np.floor(fdlibm_log(safe) / float(fdlibm_log(np.array([2.0]))[0])).astype(np.int64)
        sc = np.ldexp(1.0, (e - CELL_BITS).astype(np.int32))
        m = np.floor(safe / sc).astype(np.int64)
        lo = m.astype(np.float64) * sc
        hi = (m + 1).astype(np.float64) * sc
        ok = inside & (safe >= lo) & (safe < hi) & ((hi - lo) <= CELL_WIDTH * lo)
    zero = np.zeros(len(v), np.int64)
    tag = np.where(null, 0, np.where(ok, 1, 2)).astype(np.int64)
    return [tag, np.where(ok, np.sign(v).astype(np.int64), zero), np.where(ok, e, zero), np.where(ok, m, zero),
            np.where(tag == 2, v, 0.0)]


def fingerprint_table(tb: Any) -> dict[str, Any]:
    """Per bucket, the count and the six sums of :func:`oij.spark.fingerprint.fingerprint_frame` (value cells) of
    the rows of ``tb`` (the result layout, every kind one of pair, aggregate, late): arrays ``bucket`` (int32),
    ``n``, ``s0`` .. ``s5`` (int64), buckets without rows left out."""
    import numpy as np
    import pyarrow.compute as pc

    from oij.spark.fingerprint import BUCKETS, HASHES

    u = np.uint64
    kind = tb.column("kind")
    code = np.where(np.asarray(pc.equal(kind, "pair")), 1, np.where(np.asarray(pc.equal(kind, "aggregate")), 2, 3))
    cols: list[Any] = [code.astype(np.int64), np.zeros(tb.num_rows, np.int64)]
    ints = {}
    for c in ("base", "probe", "count", "id"):
        col = tb.column(c)
        ints[c] = np.asarray(pc.fill_null(col, 0), np.int64)
        cols += [ints[c], np.asarray(pc.is_null(col), np.int64)]
    value = tb.column("value")
    null = np.asarray(pc.is_null(value), np.bool_)
    cols += _value_cell(np.asarray(pc.fill_null(value, 0.0), np.float64), null)
    words = [np.where(c == 0.0, 0.0, c).view(u) if c.dtype == np.float64 else c.view(u) for c in cols]
    key = np.where(code == 3, ints["id"], ints["base"])
    bucket = np.mod(key, BUCKETS)
    out: dict[str, Any] = {"n": np.bincount(bucket, minlength=BUCKETS).astype(np.int64)}
    for j in range(HASHES):
        h = hash_long(np.full(tb.num_rows, j, u), np.full(tb.num_rows, _SEED, u))
        for w in words:
            h = hash_long(w, h)
        for half, part in ((2 * j, h >> u(32)), (2 * j + 1, h & u(0xFFFFFFFF))):
            # exact sums: 16-bit halves summed as float64 (exact below 2^37 rows), joined as int64
            hi = np.bincount(bucket, (part >> u(16)).astype(np.float64), minlength=BUCKETS).astype(np.int64)
            lo = np.bincount(bucket, (part & u(0xFFFF)).astype(np.float64), minlength=BUCKETS).astype(np.int64)
            out[f"s{half}"] = hi * 65536 + lo
    keep = out["n"] > 0
    return {"bucket": np.flatnonzero(keep).astype(np.int32), **{k: v[keep] for k, v in out.items()}}


def _empty() -> Any:
    from oij.spark.compare import RESULT_SCHEMA

    return RESULT_SCHEMA.empty_table()


def ranges(size: int, n: int) -> list[tuple[int, int]]:
    """``n`` byte ranges ``[start, end)`` covering ``size`` bytes, as even as integers allow."""
    return [(size * i // n, size * (i + 1) // n) for i in range(n)]


def _line_start(f: Any, pos: int, size: int) -> int:
    """The first line start at or after ``pos`` (``size`` if none): 0, or one past a ``\\n`` at ``pos - 1`` or
    later."""
    if pos <= 0:
        return 0
    f.seek(pos - 1)
    at = pos - 1
    while at < size:
        block = f.read(1 << 16)
        if not block:
            break
        i = int(block.find(b"\n"))
        if i >= 0:
            return at + i + 1
        at += len(block)
    return size


def range_lines(path: str, start: int, end: int, size: int) -> bytes:
    """The bytes of the lines of ``path`` that start in ``[start, end)`` (module docstring)."""
    with open(path, "rb") as f:
        a = _line_start(f, start, size)
        b = _line_start(f, end, size) if end < size else size
        if a >= b:
            return b""
        f.seek(a)
        return f.read(b - a)


def _range_table(path: str, span: tuple[int, int], size: int, cols: dict[str, str]) -> Any | None:
    """:func:`parse_lines` of :func:`range_lines`: the rows of the lines of ``path`` that start in ``span`` =
    ``[start, end)``, or None when it cannot vouch for them (a line off the fast path, or the file not where the driver
    saw it)."""
    try:
        return parse_lines(range_lines(path, *span, size), cols)
    except OSError:  # the file is not where the driver saw it (a cluster without shared storage)
        return None


def _parse_ranges(path: str, spans: list[tuple[int, int]], size: int,
                  cols: dict[str, str]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function: for each range index of its input, that range's rows (or one ``_bad`` row)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        for batch in batches:
            for i in batch.column(0).to_pylist():
                tb = _range_table(path, spans[i], size, cols)
                if tb is None:
                    yield pa.RecordBatch.from_pylist([{"_bad": True}], schema=_out_schema())
                    continue
                tb = tb.append_column("_bad", pa.array(np.zeros(tb.num_rows, np.bool_)))
                yield from tb.to_batches(max_chunksize=1 << 16)

    return run


PRINTS_SCHEMA = "bucket int, n long, s0 long, s1 long, s2 long, s3 long, s4 long, s5 long"


def _print_ranges(path: str, spans: list[tuple[int, int]], size: int,
                  cols: dict[str, str]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function of :func:`arrow_prints`: for each range index of its input, that range's
    partial fingerprints (or one row of bucket -1 when it cannot vouch for its lines)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        names = ["bucket", "n", "s0", "s1", "s2", "s3", "s4", "s5"]
        for batch in batches:
            for i in batch.column(0).to_pylist():
                tb = _range_table(path, spans[i], size, cols)
                if tb is None:
                    yield pa.RecordBatch.from_pylist([{"bucket": -1, **{c: 1 for c in names[1:]}}],
                                                     schema=_prints_schema())
                    continue
                fp = fingerprint_table(tb)
                yield pa.RecordBatch.from_arrays([pa.array(fp[c]) for c in names], schema=_prints_schema())

    return run


def _prints_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("bucket", pa.int32()), *((c, pa.int64()) for c in ("n", "s0", "s1", "s2", "s3", "s4", "s5"))])


def arrow_prints(spark: Any, path: str, cols: dict[str, str],
                 range_bytes: int | None = None) -> dict[int, tuple[int, ...]] | None:
    """The fingerprints of the rows of the oij-jsonl output ``path`` (:func:`oij.spark.fingerprint.fingerprint`'s
    dict, value cells), computed where the ranges are parsed (:func:`fingerprint_table`); None when a range
    cannot vouch for its lines, or the mapping or the file is declined (as :func:`arrow_rows`)."""
    from pyspark.sql import functions as F

    plan_ = _ranges_of(spark, path, cols, range_bytes)
    if plan_ is None:
        return None
    n, spans, size = plan_
    parts = spark.range(0, n, 1, n).mapInArrow(_print_ranges(os.path.abspath(path), spans, size, dict(cols)),
                                               PRINTS_SCHEMA)
    sums = [F.sum(c).alias(c) for c in ("n", "s0", "s1", "s2", "s3", "s4", "s5")]
    out: dict[int, tuple[int, ...]] = {}
    for r in parts.groupBy("bucket").agg(*sums).collect():
        out[int(r["bucket"])] = tuple(int(r[c]) for c in ("n", "s0", "s1", "s2", "s3", "s4", "s5"))
    return None if -1 in out else out


def _out_schema() -> Any:
    import pyarrow as pa

    from oij.spark.compare import RESULT_SCHEMA

    return RESULT_SCHEMA.append(pa.field("_bad", pa.bool_()))


def _ranges_of(spark: Any, path: str, cols: dict[str, str],
               range_bytes: int | None) -> tuple[int, list[tuple[int, int]], int] | None:
    """(ranges, their spans, the file's size), or None when the mapping ``cols`` or the file (empty, not a file
    the driver sees) is declined before any job."""
    if plan(cols) is None or not os.path.isfile(path):
        return None
    size = os.path.getsize(path)
    if size == 0:
        return None  # read_got reads no row; the old path writes the empty partition
    width = range_bytes or RANGE_BYTES
    n = max(int(spark.sparkContext.defaultParallelism), -(-size // width))
    return n, ranges(size, n), size


def arrow_rows(spark: Any, path: str, cols: dict[str, str], range_bytes: int | None = None) -> Any | None:
    """A lazy frame of the rows of the oij-jsonl output ``path`` (the result layout and ``_bad``, True on one row
    per range that cannot vouch for its lines), parsed on the executors; None when the mapping ``cols`` or the
    file (empty, a directory, not local) is declined before any job.  Nothing runs until the frame is used."""
    plan_ = _ranges_of(spark, path, cols, range_bytes)
    if plan_ is None:
        return None
    n, spans, size = plan_
    return spark.range(0, n, 1, n).mapInArrow(_parse_ranges(os.path.abspath(path), spans, size, dict(cols)),
                                              OUT_SCHEMA)


__all__ = ["RANGE_BYTES", "arrow_prints", "arrow_rows", "fdlibm_log", "fingerprint_table", "hash_long", "parse_lines",
           "plan", "range_lines", "ranges"]
