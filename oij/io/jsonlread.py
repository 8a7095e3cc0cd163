"""Reading oij-jsonl v1, the interchange format: one JSON object per line, in arrival order.

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

Writing it is :mod:`oij.io.jsonlwrite`'s; :func:`parse_result_lines` reads output lines back.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable, Iterator
from typing import IO, Annotated, Any, Literal

import msgspec
import orjson

from oij.io.errors import IdSet, InputError
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
