"""Writing oij-jsonl v1 (the format: :mod:`oij.io.jsonlread`): input lines, and output lines in canonical order,
one result at a time or vectorised from numpy columns (numpy is imported by the column writers only, when they run).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

import orjson

from oij.spec.aggregate import AggregateValue
from oij.spec.batch import Results
from oij.spec.model import Event, Query, StreamTuple, Watermark

if TYPE_CHECKING:  # numpy is imported by the column writers only, when they run (a quick start)
    import numpy as np
    import numpy.typing as npt


def format_query(q: Query) -> str:
    """The query line of ``q``."""
    d: dict[str, Any] = {
        "type": "query",
        "lower": q.lower,
        "upper": q.upper,
        "lower_inclusive": q.lower_inclusive,
        "upper_inclusive": q.upper_inclusive,
        "aggregate": q.aggregate,
        "channels": q.channels,
    }
    if q.join != "inner":
        d["join"] = q.join
    if q.lateness is not None:
        d["lateness"] = q.lateness
    if q.cond:
        d["cond"] = [{"a": c.left, "op": c.op, "b": c.right, **({"add": _number(c.add)} if c.add else {})}
                     for c in q.cond]
    return orjson.dumps(d).decode()


def _number(v: float) -> int | float:
    """An integral float as an int (``3000`` rather than ``3000.0``), other floats as they are."""
    return int(v) if v.is_integer() and abs(v) <= 1 << 53 else v


def format_event(e: Event) -> str:
    """One input line for an event (no newline)."""
    if isinstance(e, StreamTuple):
        key = e.key if type(e.key) is int else orjson.dumps(e.key).decode()
        line = (
            f'{{"type":"tuple","side":"{e.side}","id":{e.id},"ts":{e.ts},"key":{key},'
            f'"value":{format_float(e.value)},"channel":{e.channel}}}'
        )
        if e.fields:
            line = line[:-1] + ',"fields":' + orjson.dumps({k: _number(v) for k, v in e.fields}).decode() + "}"
        return line
    if isinstance(e, Watermark):
        return f'{{"type":"watermark","ts":{e.ts},"channel":{e.channel}}}'
    return '{"type":"end"}'


def write_events(q: Query, events: Iterable[Event], out: IO[str]) -> None:
    """Write a whole oij-jsonl input: the query line, then one line per event."""
    out.write(format_query(q) + "\n")
    for e in events:
        out.write(format_event(e) + "\n")


def format_float(v: float) -> str:
    """A float as JSON: shortest round-trip repr; non-finite values as the strings "inf"/"-inf"."""
    if math.isfinite(v):
        return repr(v + 0.0)
    return '"inf"' if v > 0 else '"-inf"'


def format_value(v: AggregateValue) -> str:
    """An aggregate value: null, an integer (count), or a float."""
    if v is None:
        return "null"
    if type(v) is int:
        return str(v)
    return format_float(float(v))


def result_lines(res: Results) -> Iterator[str]:
    """The output lines of a result, in the order given (call ``res.canonical()`` first for canonical order)."""
    for b, p in res.pairs:
        yield f'{{"type":"pair","base":{b},"probe":{"null" if p is None else p}}}\n'
    for b, n, v in res.aggregates:
        yield f'{{"type":"aggregate","base":{b},"count":{n},"value":{format_value(v)}}}\n'
    for i in res.late:
        yield f'{{"type":"late","id":{i}}}\n'


# ---------------------------------------------------------------------- vectorised writing

_I64_MIN = -(1 << 63)


_LUT: list[Any] = []  # 0 .. 9999 as four ASCII digits in a little-endian uint32: with and without leading zeros


def _digits(x: npt.NDArray[np.int64]) -> npt.NDArray[np.uint8]:
    """Decimal text of every int64, right-aligned in as many columns as the longest needs, zero bytes as
    padding (the caller drops them), a ``-`` in column 0 of a negative number (the padding between it and
    the digits is dropped too).  Four digits at a time: one division by 10^4 and a table look-up of a 4-byte
    word per group; the group holding a number's first digit from a table without leading zeros, groups
    before it zero.  O(n)."""
    import numpy as np

    if not _LUT:
        t = np.arange(10000)
        full = np.stack([t // 1000, t // 100 % 10, t // 10 % 10, t % 10], axis=1).astype(np.uint8) + 48
        lead = full.copy()
        nd = np.array([len(str(i)) for i in range(10000)])
        lead[np.arange(4)[None, :] < (4 - nd)[:, None]] = 0  # leading zeros as padding
        _LUT.extend([np.ascontiguousarray(full).view("<u4").reshape(-1),
                     np.ascontiguousarray(lead).view("<u4").reshape(-1)])
    full_w, lead_w = _LUT
    n = len(x)
    neg = x < 0
    mag = np.where(neg, -(x + 1), x).astype(np.uint64) + neg.astype(np.uint64)  # |x|, int64 min included
    groups = (len(str(int(mag.max()))) + 3) // 4 if n else 1
    sign = 1 if bool(neg.any()) else 0
    words = np.empty((n, sign + groups), dtype="<u4")
    if sign:
        words[:, 0] = np.where(neg, 45, 0)  # "-", then three zero bytes
    v = mag
    ten4 = np.uint64(10000)
    for g in range(groups):  # group g from the right (digits 4g .. 4g + 3): column sign + groups - 1 - g
        q = v // ten4
        r = (v - q * ten4).astype(np.intp)
        last = q == 0  # no digit before this group: it holds the first digit (or is zero, or above it)
        w = np.where(last, lead_w[r], full_w[r])
        words[:, sign + groups - 1 - g] = np.where(v == 0, 0, w) if g else w  # a group above the first: empty
        v = q
    out: npt.NDArray[np.uint8] = words.view(np.uint8)
    return out


def pair_lines(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64], null: npt.NDArray[np.bool_]) -> bytes:
    """The pair lines of (a[i], b[i] or null), in the order given; byte-identical to :func:`result_lines`.  O(n)."""
    data: bytes = _pair_text(a, b, null).tobytes()
    return data


def _pair_text(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64], null: npt.NDArray[np.bool_]
               ) -> npt.NDArray[np.uint8]:
    """:func:`pair_lines` as a uint8 array (written as it is: no copy to bytes): one byte matrix, every row
    the line's fixed text and its numbers' right-aligned digits (:func:`_digits`), then its zero bytes (the
    padding) dropped.  O(n)."""
    import numpy as np

    pre, mid, end = b'{"type":"pair","base":', b',"probe":', b"}\n"
    n = len(a)
    if n == 0:
        return np.zeros(0, np.uint8)
    da = _digits(a)
    db = _digits(np.where(null, 0, b))
    has_null = bool(null.any())
    wa = da.shape[1]
    wb = max(db.shape[1], 4) if has_null else db.shape[1]
    row = np.frombuffer(pre + bytes(wa) + mid + bytes(wb) + end, np.uint8)
    m = np.empty((n, len(row)), dtype=np.uint8)
    m[:] = row
    c = len(pre)
    m[:, c: c + wa] = da
    c += wa + len(mid)
    m[:, c + wb - db.shape[1]: c + wb] = db
    if has_null:
        m[null, c: c + wb] = 0
        m[null, c + wb - 4: c + wb] = np.frombuffer(b"null", np.uint8)
    out: npt.NDArray[np.uint8] = m[m != 0]
    return out


_REPR_WHOLE_BELOW = 1e16
"""Python's shortest repr spells a float with an integer value below this as the integer and ``.0``, and one at
or above it with an exponent (``1e+16``)."""


def aggregate_lines(base: npt.NDArray[np.int64], count: npt.NDArray[np.int64], value: npt.NDArray[np.float64],
                    null: npt.NDArray[np.bool_], counts_are_values: bool = False) -> bytes:
    """The aggregate lines of ``(base[i], count[i], value)``, in the order given; byte-identical to
    :func:`result_lines` (:func:`format_value`).  The value is ``count[i]`` (an integer) when
    ``counts_are_values`` (the count aggregate), else ``null`` where ``null[i]``, else ``value[i]`` as
    :func:`format_float` spells it.  O(n): one byte matrix as in :func:`pair_lines`; a float with an integer
    value below 10^16 is its integer's digits and ``.0`` (that is Python's shortest repr of it), any other
    float is spelled by :func:`format_float` itself, row by row."""
    import numpy as np

    n = len(base)
    if n == 0:
        return b""
    pre, mid, mid2, end = b'{"type":"aggregate","base":', b',"count":', b',"value":', b"}\n"
    db = _digits(base)
    dc = _digits(count)
    if counts_are_values:
        dv = dc
    else:
        v = np.where(null, 0.0, value)
        with np.errstate(invalid="ignore"):
            whole = ~null & np.isfinite(v) & (np.abs(v) < _REPR_WHOLE_BELOW)
            whole &= v == np.trunc(np.where(whole, v, 0.0))
        di = _digits(np.where(whole, v, 0.0).astype(np.int64))
        other = np.flatnonzero(~whole & ~null)
        texts = np.array([format_float(x).encode() for x in v[other].tolist()], dtype=bytes)
        ws = texts.dtype.itemsize if len(other) else 0
        wi = di.shape[1] + 2
        wv = max(wi, 4 if bool(null.any()) else 0, ws)
        dv = np.zeros((n, wv), np.uint8)
        dv[:, wv - wi: wv - 2] = di
        dv[:, wv - 2:] = np.frombuffer(b".0", np.uint8)
        dv[~whole] = 0
        dv[null, wv - 4:] = np.frombuffer(b"null", np.uint8)
        if len(other):
            dv[other, :ws] = texts.view(np.uint8).reshape(len(other), ws)  # zero-padded on the right
    row = np.frombuffer(pre + bytes(db.shape[1]) + mid + bytes(dc.shape[1]) + mid2 + bytes(dv.shape[1]) + end,
                        np.uint8)
    m = np.empty((n, len(row)), dtype=np.uint8)
    m[:] = row
    c = len(pre)
    m[:, c: c + db.shape[1]] = db
    c += db.shape[1] + len(mid)
    m[:, c: c + dc.shape[1]] = dc
    c += dc.shape[1] + len(mid2)
    m[:, c: c + dv.shape[1]] = dv
    data: bytes = m[m != 0].tobytes()
    return data


def canonical_pair_order(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64],
                         null: npt.NDArray[np.bool_]) -> npt.NDArray[np.intp]:
    """The permutation that sorts pairs canonically (:func:`oij.spec.batch.pair_order`: base, null first, probe)."""
    import numpy as np

    order: npt.NDArray[np.intp] = np.lexsort((np.where(null, 0, b), ~null, a))
    return order


def pair_columns(pairs: list[tuple[int, int | None]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                                                                npt.NDArray[np.bool_]] | None:
    """Pairs as columns (a, b, b is null), or None if an id does not fit int64.  O(n)."""
    import numpy as np

    n = len(pairs)
    try:
        a = np.fromiter((p[0] for p in pairs), np.int64, n)
        null = np.fromiter((p[1] is None for p in pairs), np.bool_, n)
        b = np.fromiter((0 if p[1] is None else p[1] for p in pairs), np.int64, n)
    except OverflowError:
        return None
    return a, b, null


def write_pairs(out: IO[str], a: npt.NDArray[np.int64], b: npt.NDArray[np.int64], null: npt.NDArray[np.bool_],
                chunk: int = 1 << 18) -> None:
    """Write the pair lines of columns, in the order given (:func:`pair_lines`), ``chunk`` rows at a time."""
    buf = getattr(out, "buffer", None)
    if buf is not None:
        out.flush()
    for i in range(0, len(a), chunk):
        data = _pair_text(a[i: i + chunk], b[i: i + chunk], null[i: i + chunk])
        if buf is not None:
            buf.write(data)  # the array's buffer: no copy
        else:
            out.write(data.tobytes().decode())
    if buf is not None:
        buf.flush()


def write_results(out: IO[str], res: Results) -> None:
    """``out.writelines(result_lines(res.canonical()))``: every part in canonical order, the pair lines sorted
    and formatted column-wise when there are many (the same bytes).  ``res`` need not be sorted."""
    cols = pair_columns(res.pairs) if len(res.pairs) > 1024 else None
    if cols is None:
        out.writelines(result_lines(res.canonical()))
        return
    a, b, null = cols
    order = canonical_pair_order(a, b, null)
    write_pairs(out, a[order], b[order], null[order])
    out.writelines(result_lines(Results([], res.aggregates, res.late).canonical()))
