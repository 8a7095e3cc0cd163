"""oij-jsonl v1: the interchange format, one JSON object per line, in arrival order.

Input::

    {"type":"query","lower":-1000,"upper":0,"lower_inclusive":true,"upper_inclusive":true,
     "aggregate":null,"channels":1}                       (first line; optional "join", "lateness", "cond")
    {"type":"tuple","side":"base","id":1,"ts":100,"key":"u1","value":2.5,"channel":0}
    {"type":"tuple","side":"probe","id":2,"ts":90,"key":"u1","fields":{"power":3000,"cool":12.5}}
    {"type":"watermark","ts":90,"channel":0}
    {"type":"end"}                                          (last line)

"value" and "channel" are optional (0.0 and 0), and so are "fields" (format 1.1)
and the query's "cond", a list of comparisons ``a.<a> <op> b.<b> + <add>``::

    "cond":[{"a":"power","op":"<","b":"power"},{"a":"cool","op":">","b":"cool","add":-2}]

Output lines, in canonical order::

    {"type":"pair","base":1,"probe":7}        ("probe":null: unmatched base of a left join)
    {"type":"aggregate","base":1,"count":3,"value":7.5}
    {"type":"late","id":5}

Every violation raises :class:`oij.io.errors.InputError` naming the file, the
line and the field.  Decoding uses msgspec (decode and type-check in one C
pass); a line it rejects is decoded again with orjson and, where orjson loses
information (NaN, an integer beyond 64 bits), the standard library, so that
the error can name the field and show the value as written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Generator, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Annotated, Any, Literal

import msgspec
import orjson

from oij.io.errors import IdSet, InputError
from oij.spec.aggregate import AggregateValue
from oij.spec.batch import Results
from oij.spec.model import (
    AGGREGATES,
    COND_OPS,
    JOINS,
    TS_LIMIT,
    Comparison,
    End,
    Event,
    Query,
    SpecError,
    StreamTuple,
    Watermark,
    check_fields,
    check_number,
    check_query,
)

if TYPE_CHECKING:  # numpy is imported by the column writers only, when they run (a quick start)
    import numpy as np
    import numpy.typing as npt

QUERY_FIELDS = frozenset(
    {"type", "lower", "upper", "lower_inclusive", "upper_inclusive", "aggregate", "join", "channels", "lateness",
     "cond"}
)
TUPLE_FIELDS = frozenset({"type", "side", "id", "ts", "key", "value", "channel", "fields"})
COMPARISON_FIELDS = frozenset({"a", "op", "b", "add"})
WATERMARK_FIELDS = frozenset({"type", "ts", "channel"})


def _decode(raw: bytes | str, where: tuple[str, int]) -> dict[str, Any]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        if isinstance(raw, bytes):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(*where, "line", f"not valid UTF-8 (byte {e.start})") from None
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise InputError(*where, "line", f"not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise InputError(*where, "line", "must be a JSON object")
    return obj


def _exact(raw: bytes, obj: dict[str, Any], where: tuple[str, int]) -> dict[str, Any]:
    """Decode again with the standard library, which keeps integers beyond 64 bits exact.

    orjson reads such an integer as a float; an error message must show the
    integer the user wrote (then "out of range"), not a float.
    """
    if not any(type(v) is float for v in obj.values()):
        return obj
    exact = json.loads(raw)
    assert isinstance(exact, dict)
    return exact


def _unknown(obj: dict[str, Any], allowed: frozenset[str], where: tuple[str, int]) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise InputError(*where, extra[0], f"unknown field (allowed: {', '.join(sorted(allowed))})")


def parse_query(obj: dict[str, Any], where: tuple[str, int]) -> Query:
    """The query of a ``{"type":"query",...}`` object.  Raises InputError."""
    _unknown(obj, QUERY_FIELDS, where)
    for name in ("lower", "upper"):
        if name not in obj:
            raise InputError(*where, name, "missing")
    agg = obj.get("aggregate")
    if agg == "none":
        agg = None
    if agg is not None and agg not in AGGREGATES:
        raise InputError(*where, "aggregate", f"must be null or one of {', '.join(AGGREGATES)}; got {agg!r}")
    join = obj.get("join", "inner")
    if join not in JOINS:
        raise InputError(*where, "join", f"must be one of {', '.join(JOINS)}; got {join!r}")
    q = Query(
        lower=obj["lower"],
        upper=obj["upper"],
        lower_inclusive=obj.get("lower_inclusive", True),
        upper_inclusive=obj.get("upper_inclusive", True),
        aggregate=agg,
        join=join,
        channels=obj.get("channels", 1),
        lateness=obj.get("lateness"),
        cond=parse_cond(obj.get("cond", []), where),
    )
    try:
        return check_query(q)
    except SpecError as e:
        raise InputError(*where, e.field, e.message) from None


def parse_cond(obj: Any, where: tuple[str, int]) -> tuple[Comparison, ...]:
    """The comparisons of a query's ``"cond"`` list (data, never code).  Raises InputError naming ``cond[i].part``."""
    if not isinstance(obj, list):
        raise InputError(*where, "cond", f"must be a list of comparisons, got {obj!r}")
    out = []
    for i, c in enumerate(obj):
        name = f"cond[{i}]"
        if not isinstance(c, dict):
            raise InputError(*where, name, f'must be an object {{"a":..,"op":..,"b":..}}, got {c!r}')
        extra = sorted(set(c) - COMPARISON_FIELDS)
        if extra:
            raise InputError(*where, f"{name}.{extra[0]}", "unknown field (allowed: a, add, b, op)")
        for part in ("a", "op", "b"):
            if part not in c:
                raise InputError(*where, f"{name}.{part}", "missing")
        if c["op"] not in COND_OPS:
            raise InputError(*where, f"{name}.op", f"must be one of {' '.join(COND_OPS)}; got {c['op']!r}")
        try:
            add = check_number(f"{name}.add", c.get("add", 0))
        except SpecError as e:
            raise InputError(*where, e.field, e.message) from None
        out.append(Comparison(c["a"], c["op"], c["b"], add))
    try:
        return check_query(Query(0, 0, cond=tuple(out))).cond
    except SpecError as e:
        raise InputError(*where, e.field.replace(".left", ".a").replace(".right", ".b"), e.message) from None


class EventParser:
    """Validates decoded objects into events: the checks shared by the JSONL and Parquet readers.

    Tracks the ids seen (duplicates are an error) and the end of the stream
    (nothing may follow it).
    """

    def __init__(self, q: Query, path: str, int64_ids: bool = False) -> None:
        self.q = q
        self.path = path
        self.int64_ids = int64_ids  # the parallel engines hold ids in int64: refuse the others by line
        self.ids = IdSet()
        self.ended = False

    def tuple_(self, side: Any, id_: Any, ts: Any, key: Any, value: Any, channel: Any, line: int,
               fields: Any = None) -> StreamTuple:
        """Build a validated tuple.  O(1)."""
        if side != "base" and side != "probe":
            raise InputError(self.path, line, "side", f"must be 'base' or 'probe', got {side!r}")
        if type(id_) is not int:
            raise InputError(self.path, line, "id", f"must be an integer, got {id_!r}")
        if type(ts) is not int:
            raise InputError(self.path, line, "ts", f"must be an integer, got {ts!r}")
        if not -TS_LIMIT <= ts <= TS_LIMIT:
            raise InputError(self.path, line, "ts", f"out of range: |ts| must be < 2^62, got {ts}")
        tk = type(key)
        if tk is not str and tk is not int:
            raise InputError(self.path, line, "key", f"must be an integer or a string, got {key!r}")
        if type(value) is not float:
            if type(value) is not int:
                raise InputError(self.path, line, "value", f"must be a number, got {value!r}")
            try:
                value = float(value)
            except OverflowError:
                raise InputError(self.path, line, "value", "out of range for a double") from None
        if value - value != 0.0:
            raise InputError(self.path, line, "value", f"must be finite, got {value!r}")
        if type(channel) is not int or not 0 <= channel < self.q.channels:
            raise InputError(
                self.path, line, "channel", f"must be an integer in [0, {self.q.channels}), got {channel!r}"
            )
        if self.int64_ids and not -(1 << 63) <= id_ < 1 << 63:
            raise InputError(self.path, line, "id", f"out of range for the parallel engines: ids must fit in 64 "
                             f"bits, got {id_} (oij join takes any integer)")
        if not self.ids.add(id_):
            raise InputError(self.path, line, "id", f"duplicate id {id_}")
        t = StreamTuple(side, id_, ts, key, value, channel)
        return self.with_fields(t, fields, line) if fields is not None or self.q.cond else t

    def with_fields(self, t: StreamTuple, fields: Any, line: int) -> StreamTuple:
        """``t`` with the named fields of a decoded ``"fields"`` object (None: absent), checked for the cond.  O(F)."""
        items: tuple[tuple[str, float], ...] = ()
        if fields is not None:
            if not isinstance(fields, dict):
                raise InputError(self.path, line, "fields", f"must be an object of named numbers, got {fields!r}")
            try:
                items = tuple(sorted((k, check_number(f"fields.{k}", v)) for k, v in fields.items()))
                t = t._replace(fields=items)
                check_fields(t, self.q)
            except SpecError as e:
                raise InputError(self.path, line, e.field, e.message) from None
            return t
        try:
            check_fields(t, self.q)
        except SpecError as e:
            raise InputError(self.path, line, e.field, e.message) from None
        return t

    def watermark(self, ts: Any, channel: Any, line: int) -> Watermark:
        """Build a validated watermark.  O(1)."""
        if self.q.lateness is not None:
            raise InputError(self.path, line, "type", "watermark events are not allowed when the query sets lateness")
        if type(ts) is not int:
            raise InputError(self.path, line, "ts", f"must be an integer, got {ts!r}")
        if not -TS_LIMIT <= ts <= TS_LIMIT:
            raise InputError(self.path, line, "ts", f"out of range: |ts| must be < 2^62, got {ts}")
        if type(channel) is not int or not 0 <= channel < self.q.channels:
            raise InputError(
                self.path, line, "channel", f"must be an integer in [0, {self.q.channels}), got {channel!r}"
            )
        return Watermark(ts, channel)


def read_jsonl(stream: IO[bytes], path: str, int64_ids: bool = False) -> tuple[Query, Iterator[Event]]:
    """Read the query line now; return it and a lazy iterator of the events that follow.

    The iterator raises :class:`~oij.io.errors.InputError` at the first bad line (after
    yielding every event before it), including a missing or early ``end``.
    """
    q = read_query_line(stream, path)
    return q, _events(stream, path, q, int64_ids)


def read_query_line(stream: IO[bytes], path: str) -> Query:
    """Read and check the first (non-blank) line, the query."""
    first = stream.readline()
    while first and not first.strip():
        first = stream.readline()
    if not first:
        raise InputError(path, 1, "type", "empty input: the first line must be the query")
    obj = _decode(first, (path, 1))
    if obj.get("type") != "query":
        raise InputError(path, 1, "type", f"the first line must be the query, got type {obj.get('type')!r}")
    return parse_query(obj, (path, 1))


class _TupleLine(msgspec.Struct, tag_field="type", tag="tuple", forbid_unknown_fields=True):
    side: Literal["base", "probe"]
    id: int
    ts: Annotated[int, msgspec.Meta(ge=-TS_LIMIT, le=TS_LIMIT)]
    key: int | str
    value: float = 0.0
    channel: Annotated[int, msgspec.Meta(ge=0)] = 0
    fields: dict[str, int | float] | None = None


class _WatermarkLine(msgspec.Struct, tag_field="type", tag="watermark", forbid_unknown_fields=True):
    ts: Annotated[int, msgspec.Meta(ge=-TS_LIMIT, le=TS_LIMIT)]
    channel: Annotated[int, msgspec.Meta(ge=0)] = 0


class _EndLine(msgspec.Struct, tag_field="type", tag="end", forbid_unknown_fields=True):
    pass


_DECODER = msgspec.json.Decoder(_TupleLine | _WatermarkLine | _EndLine)


def _events(stream: IO[bytes], path: str, q: Query, int64_ids: bool = False) -> Iterator[Event]:
    """The events after the query line (:func:`line_events`), then the check that the end line came."""
    p = EventParser(q, path, int64_ids)
    line = yield from line_events(stream, 1, p)
    if not p.ended:
        raise InputError(path, line + 1, "type", 'missing the last line {"type":"end"}')


def line_events(stream: Iterable[bytes], line: int, p: EventParser) -> Generator[Event, None, int]:
    """The events of the lines of ``stream``, the first being line ``line + 1``; returns the last line number.

    Fast path: msgspec decodes and type-checks a line in C against the three
    line shapes; the per-query checks (channel range, lateness mode, duplicate
    ids) stay in Python.  Any line msgspec rejects goes through
    ``_slow_line``, which finds the exact field to blame (or accepts a
    blank line).  ``p`` carries the ids seen and whether the end line came.
    """
    path = p.path
    q = p.q
    decode = _DECODER.decode
    add_id = p.ids.add
    channels = q.channels
    watermarks_ok = q.lateness is None
    cond = bool(q.cond)
    wide = not p.int64_ids  # any integer id (the oracle); else int64 only (the parallel engines)
    for raw in stream:
        line += 1
        if p.ended:
            if raw.strip():
                raise InputError(path, line, "type", "nothing may follow the end line")
            continue
        try:
            m = decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError):
            e = _slow_line(raw, line, p)
            if e is not None:
                yield e
            continue
        if type(m) is _TupleLine:
            if m.channel < channels and (wide or -(1 << 63) <= m.id < 1 << 63) and add_id(m.id):
                t = StreamTuple(m.side, m.id, m.ts, m.key, m.value, m.channel)
                yield p.with_fields(t, m.fields, line) if m.fields is not None or cond else t
                continue
        elif type(m) is _WatermarkLine:
            if watermarks_ok and m.channel < channels:
                yield Watermark(m.ts, m.channel)
                continue
        else:
            p.ended = True
            yield End()
            continue
        e = _slow_line(raw, line, p)  # raises the precise error (channel, lateness mode)
        if e is not None:  # pragma: no cover - _slow_line raises on every line the fast path refused
            yield e
    return line


def _slow_line(raw: bytes, line: int, p: EventParser) -> Event | None:
    """Decode and check one line field by field; None for a blank line.  Raises InputError naming the field."""
    path = p.path
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        if not raw.strip():
            return None
        obj = _decode(raw, (path, line))
    if not isinstance(obj, dict):
        raise InputError(path, line, "line", "must be a JSON object")
    typ = obj.get("type")
    if typ == "tuple":
        _unknown(obj, TUPLE_FIELDS, (path, line))
        obj = _exact(raw, obj, (path, line))
        for name in ("side", "id", "ts", "key"):
            if name not in obj:
                raise InputError(path, line, name, "missing")
        return p.tuple_(
            obj["side"], obj["id"], obj["ts"], obj["key"], obj.get("value", 0.0), obj.get("channel", 0), line,
            obj.get("fields"),
        )
    if typ == "watermark":
        _unknown(obj, WATERMARK_FIELDS, (path, line))
        if "ts" not in obj:
            raise InputError(path, line, "ts", "missing")
        obj = _exact(raw, obj, (path, line))
        return p.watermark(obj["ts"], obj.get("channel", 0), line)
    if typ == "end":
        _unknown(obj, frozenset({"type"}), (path, line))
        p.ended = True
        return End()
    if typ == "query":
        raise InputError(path, line, "type", "a second query line")
    raise InputError(path, line, "type", f"unknown type {typ!r} (tuple, watermark or end)")


# ---------------------------------------------------------------------- writing


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


def parse_result_lines(lines: Iterable[str | bytes]) -> Results:
    """Read output lines back into a :class:`~oij.spec.batch.Results` (used by tests and ``oij check``)."""
    res = Results()
    for raw in lines:
        if not raw.strip():
            continue
        d = orjson.loads(raw)
        t = d["type"]
        if t == "pair":
            res.pairs.append((d["base"], d["probe"]))
        elif t == "aggregate":
            v = d["value"]
            if isinstance(v, str):
                v = float(v)
            res.aggregates.append((d["base"], d["count"], v))
        elif t == "late":
            res.late.append(d["id"])
        else:
            raise ValueError(f"unknown result type {t!r}")
    return res


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
