"""bucket_oij: an online interval join (oij-jsonl v1 conformance protocol) over fixed-width time buckets.

Written from the documentation only (docs/format.rst, docs/semantics.rst, docs/watermarks.rst,
docs/conformance.rst, docs/cond.rst), apart from the project's reference, spec and engines, to be one
more independent implementation the conformance kit can be measured against.

Style: *bucketed, fixed-width, C-like*.

* Every timestamp, bound and watermark computation goes through ``i64()``, which wraps to a 64-bit two's
  complement integer as C or Java ``long`` arithmetic would.  The inputs keep ``|ts| < 2^62`` and
  ``|lower|, |upper| < 2^62``, so each sum below is arranged to stay in range: a bound is formed as
  ``ts + offset`` (at most ``2^63 - 1``), and a comparison with the watermark is written ``ts - offset < W``
  instead of ``ts < W + offset`` (``W`` can be as low as ``-2^63 + 2`` in lateness mode).  Minus infinity
  is the sentinel ``INT64_MIN``.
* Per key, probes and pending bases live in buckets of one fixed width ``2^shift`` (a dict bucket number ->
  list of records).  A window query visits only the buckets that exist and intersect the window (the
  window may span ~2^63 ticks, so the bucket range is never enumerated).
* Every stored record has a timer on one global heap (as an operator's event-time timers): a base's fires
  when ``W > hi(a)`` (it is final: aggregate or null row, then dropped); a probe's when ``W > b.ts - lo``
  (no future base reaches it); with an aggregate a probe still inside a pending base's window is re-armed
  to the last such base's finality.
* Sums are exact with a fixed-point accumulator: every finite double is an integer multiple of 2^-1074, so
  the accumulator holds ``sum(value * 2^1074)`` as one wide integer and is rounded to a double once.
  Conditions (format 1.1) are decided on the same fixed-point operands, so exactly.

Protocol: one case on stdin, result lines on stdout, exit 0; with ``OIJ_SESSION=1`` cases follow one another on
stdin and each case's results are followed by ``{"type":"end"}``.  A bad line stops the run with one line on
stderr and exit code 2.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import sys
from typing import Any

MASK64 = (1 << 64) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
NEG_INF = INT64_MIN  # the watermark before it is known
TS_MAX = (1 << 62) - 1
FRAC_BITS = 1074  # every finite double is a multiple of 2^-1074
FIELD_MAX = 1 << 53


def i64(x: int) -> int:
    """Wrap to a signed 64-bit integer (two's complement), like C/Java long arithmetic."""
    x &= MASK64
    return x - (1 << 64) if x >> 63 else x


def add64(a: int, b: int) -> int:
    return i64(a + b)


def sub64(a: int, b: int) -> int:
    return i64(a - b)


def fixed(v: float) -> int:
    """The double v as an exact integer count of 2^-1074."""
    n, d = v.as_integer_ratio()  # d is a power of two <= 2^1074
    return n * ((1 << FRAC_BITS) // d)


def fixed_to_double(num: int, den: int = 1) -> float | str:
    """num / (den * 2^1074) rounded once to a double; beyond the double range -> "inf" / "-inf"."""
    try:
        return num / (den << FRAC_BITS)
    except OverflowError:
        return "inf" if num > 0 else "-inf"


class BadLine(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------
# records and per-key bucket store


class Rec:
    __slots__ = ("alive", "fx", "hi", "ident", "matched", "ops", "ts", "value")

    def __init__(self, ident: int, ts: int, value: float, ops: list[int]) -> None:
        self.ident = ident
        self.ts = ts
        self.value = value
        self.fx = fixed(value)
        self.ops = ops
        self.hi = 0  # bases: last ts of the window
        self.matched = False
        self.alive = True


class Buckets:
    """bucket number -> records whose ts falls in [n * 2^shift, (n + 1) * 2^shift - 1]."""

    __slots__ = ("count", "shift", "table")

    def __init__(self, shift: int) -> None:
        self.shift = shift
        self.table: dict[int, list[Rec]] = {}
        self.count = 0

    def put(self, r: Rec) -> None:
        n = r.ts >> self.shift  # arithmetic shift: floor division by the width, as in C on int64
        self.table.setdefault(n, []).append(r)
        self.count += 1

    def take(self, r: Rec) -> None:
        n = r.ts >> self.shift
        lst = self.table[n]
        for i in range(len(lst)):
            if lst[i] is r:
                lst[i] = lst[-1]
                lst.pop()
                break
        if not lst:
            del self.table[n]
        self.count -= 1

    def scan(self, lo: int, hi: int) -> list[Rec]:
        """Records with lo <= ts <= hi, visiting only existing buckets that meet [lo, hi]."""
        if lo > hi:
            return []
        first = lo >> self.shift
        last = hi >> self.shift
        found: list[Rec] = []
        for n, lst in self.table.items():
            if n < first or n > last:
                continue
            if first < n < last:
                found.extend(lst)  # a bucket wholly inside the window
            else:
                found.extend(r for r in lst if lo <= r.ts <= hi)
        return found


class KeyStore:
    __slots__ = ("bases", "probes")

    def __init__(self, shift: int) -> None:
        self.bases = Buckets(shift)
        self.probes = Buckets(shift)


# ---------------------------------------------------------------------------------------------------------
# the operator


AGGS = ("count", "sum", "avg", "min", "max")
OPS = ("<", "<=", ">", ">=", "==", "!=")


def compare(x: int, op: str, y: int) -> bool:
    if op == "<":
        return x < y
    if op == "<=":
        return x <= y
    if op == ">":
        return x > y
    if op == ">=":
        return x >= y
    if op == "==":
        return x == y
    return x != y


class Operator:
    def __init__(self, q: dict[str, Any]) -> None:
        lower: int = q["lower"]
        upper: int = q["upper"]
        self.lo_off = lower if q.get("lower_inclusive", True) else add64(lower, 1)
        self.hi_off = upper if q.get("upper_inclusive", True) else sub64(upper, 1)
        self.empty = self.lo_off > self.hi_off
        agg = q.get("aggregate")
        self.agg: str | None = None if agg in (None, "none") else agg
        self.left = q.get("join", "inner") == "left"
        self.channels: int = q.get("channels", 1)
        lateness = q.get("lateness")
        self.lateness: int | None = lateness
        self.cond: list[tuple[str, str, str, int]] = [
            (c["a"], c["op"], c["b"], fixed(float(c.get("add", 0)))) for c in q.get("cond") or []
        ]
        # one bucket width for every key: about the window's length (a window spans 1-2 buckets), 2^4..2^62
        span = sub64(self.hi_off, self.lo_off) if not self.empty else 0
        self.shift = min(max(span.bit_length(), 4), 62)
        self.keys: dict[tuple[bool, int | str], KeyStore] = {}
        self.timers: list[tuple[int, int, bool, Rec, tuple[bool, int | str]]] = []
        self.tick = 0
        self.w = NEG_INF
        self.chan_max: dict[int, int] = {}
        self.max_ts = NEG_INF
        self.out: list[str] = []

    # -- output
    def emit(self, obj: dict[str, Any]) -> None:
        self.out.append(json.dumps(obj, separators=(",", ":")))

    def passes(self, a: Rec, b: Rec) -> bool:
        return all(compare(x, op, y + add) for (_, op, _, add), x, y in zip(self.cond, a.ops, b.ops, strict=True))

    # -- timers
    def arm(self, when: int, is_base: bool, r: Rec, key: tuple[bool, int | str]) -> None:
        self.tick += 1
        heapq.heappush(self.timers, (when, self.tick, is_base, r, key))

    def fire_timers(self) -> None:
        w = self.w
        while self.timers and self.timers[0][0] < w:
            _, _, is_base, r, key = heapq.heappop(self.timers)
            ks = self.keys[key]
            if is_base:
                ks.bases.take(r)
                self.finish(ks, r)
            else:
                if self.agg is not None:
                    holders = ks.bases.scan(sub64(r.ts, self.hi_off), sub64(r.ts, self.lo_off))
                    if holders:
                        self.arm(max(a.hi for a in holders), False, r, key)
                        continue
                ks.probes.take(r)
            if ks.bases.count == 0 and ks.probes.count == 0:
                del self.keys[key]

    def finish(self, ks: KeyStore, a: Rec) -> None:
        """Base a is final (or the stream ended): its aggregate or null row."""
        a.alive = False
        if self.agg is None:
            if self.left and not a.matched:
                self.emit({"type": "pair", "base": a.ident, "probe": None})
            return
        n = 0
        acc = 0  # fixed-point accumulator, units of 2^-1074
        lo_v = hi_v = 0.0
        if not self.empty:
            for b in ks.probes.scan(add64(a.ts, self.lo_off), add64(a.ts, self.hi_off)):
                if self.cond and not self.passes(a, b):
                    continue
                if n == 0:
                    lo_v = hi_v = b.value
                else:
                    lo_v = min(lo_v, b.value)
                    hi_v = max(hi_v, b.value)
                n += 1
                acc += b.fx
        value: Any
        if self.agg == "count":
            value = n
        elif self.agg == "sum":
            value = fixed_to_double(acc)
        elif n == 0:
            value = None
        elif self.agg == "avg":
            value = fixed_to_double(acc, n)
        elif self.agg == "min":
            value = lo_v
        else:
            value = hi_v
        self.emit({"type": "aggregate", "base": a.ident, "count": n, "value": value})

    # -- events
    def on_watermark(self, ts: int, channel: int) -> None:
        if ts > self.chan_max.get(channel, NEG_INF):
            self.chan_max[channel] = ts
        if len(self.chan_max) == self.channels:
            self.w = min(self.chan_max.values())
        self.fire_timers()

    def on_tuple(self, is_base: bool, r: Rec, key: tuple[bool, int | str]) -> None:
        if r.ts < self.w:
            self.emit({"type": "late", "id": r.ident})
        elif is_base:
            keep = self.agg is not None or self.left or not self.empty
            ks = self.keys.get(key)
            if self.agg is None and ks is not None and not self.empty:
                for b in ks.probes.scan(add64(r.ts, self.lo_off), add64(r.ts, self.hi_off)):
                    if not self.cond or self.passes(r, b):
                        r.matched = True
                        self.emit({"type": "pair", "base": r.ident, "probe": b.ident})
            if keep:
                if ks is None:
                    ks = self.keys[key] = KeyStore(self.shift)
                r.hi = add64(r.ts, self.hi_off)
                ks.bases.put(r)
                self.arm(r.hi, True, r, key)
        elif not self.empty:
            ks = self.keys.get(key)
            if self.agg is None and ks is not None:
                for a in ks.bases.scan(sub64(r.ts, self.hi_off), sub64(r.ts, self.lo_off)):
                    if not self.cond or self.passes(a, r):
                        a.matched = True
                        self.emit({"type": "pair", "base": a.ident, "probe": r.ident})
            if ks is None:
                ks = self.keys[key] = KeyStore(self.shift)
            ks.probes.put(r)
            self.arm(sub64(r.ts, self.lo_off), False, r, key)
        if self.lateness is not None and r.ts > self.max_ts:
            self.max_ts = r.ts
            self.w = sub64(self.max_ts, self.lateness)
        self.fire_timers()

    def on_end(self) -> None:
        for ks in self.keys.values():
            for lst in ks.bases.table.values():
                for a in lst:
                    self.finish(ks, a)
        self.keys.clear()
        self.timers.clear()


# ---------------------------------------------------------------------------------------------------------
# reading and checking lines


def want_int(obj: dict[str, Any], name: str, lo: int | None, hi: int | None) -> int:
    v = obj[name]
    if type(v) is not int:
        raise BadLine(f"{name}: must be an integer, got {json.dumps(v)}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise BadLine(f"{name}: out of range, got {v}")
    return v


def want_number(v: Any, name: str) -> float:
    if type(v) is int:
        try:
            return float(v)
        except OverflowError:
            raise BadLine(f"{name}: must be a finite number") from None
    if type(v) is not float or not math.isfinite(v):
        raise BadLine(f"{name}: must be a finite number, got {json.dumps(v)}")
    return v


def is_ident(s: Any) -> bool:
    return isinstance(s, str) and s.isidentifier() and s.isascii()


QUERY_FIELDS = {"type", "lower", "upper", "lower_inclusive", "upper_inclusive", "aggregate", "join", "channels",
                "lateness", "cond"}
TUPLE_FIELDS = {"type", "side", "id", "ts", "key", "value", "channel", "fields"}
WATERMARK_FIELDS = {"type", "ts", "channel"}


def only(obj: dict[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise BadLine(f"{extra[0]}: unknown field")


def check_query(q: dict[str, Any]) -> None:
    only(q, QUERY_FIELDS)
    for name in ("lower", "upper"):
        if name not in q:
            raise BadLine(f"{name}: missing")
        want_int(q, name, -TS_MAX, TS_MAX)
    if q["lower"] > q["upper"]:
        raise BadLine(f"lower: lower ({q['lower']}) must be <= upper ({q['upper']})")
    for name in ("lower_inclusive", "upper_inclusive"):
        if name in q and type(q[name]) is not bool:
            raise BadLine(f"{name}: must be a boolean")
    if q.get("aggregate") not in (None, "none", *AGGS):
        raise BadLine("aggregate: must be null, count, sum, avg, min or max")
    if q.get("join", "inner") not in ("inner", "left"):
        raise BadLine("join: must be inner or left")
    if "channels" in q:
        want_int(q, "channels", 1, None)
    if q.get("lateness") is not None:
        want_int(q, "lateness", 0, TS_MAX)
    conds = q.get("cond")
    if conds is None:
        return
    if type(conds) is not list:
        raise BadLine("cond: must be a list")
    for i, c in enumerate(conds):
        if type(c) is not dict:
            raise BadLine(f"cond[{i}]: must be an object")
        extra = sorted(set(c) - {"a", "op", "b", "add"})
        if extra:
            raise BadLine(f"cond[{i}].{extra[0]}: unknown field")
        for part in ("a", "b"):
            if not is_ident(c.get(part)):
                raise BadLine(f"cond[{i}].{part}: must be a field name")
        if c.get("op") not in OPS:
            raise BadLine(f"cond[{i}].op: must be one of < <= > >= == !=")
        if "add" in c and abs(want_number(c["add"], f"cond[{i}].add")) > FIELD_MAX:
            raise BadLine(f"cond[{i}].add: must have |add| <= 2^53")


def make_record(t: dict[str, Any], op: Operator) -> tuple[bool, Rec, tuple[bool, int | str]]:
    only(t, TUPLE_FIELDS)
    for name in ("side", "id", "ts", "key"):
        if name not in t:
            raise BadLine(f"{name}: missing")
    if t["side"] not in ("base", "probe"):
        raise BadLine("side: must be base or probe")
    is_base = t["side"] == "base"
    ident = want_int(t, "id", None, None)
    ts = want_int(t, "ts", -TS_MAX, TS_MAX)
    key = t["key"]
    if type(key) is not int and type(key) is not str:
        raise BadLine("key: must be an integer or a string")
    value = want_number(t.get("value", 0.0), "value")
    if "channel" in t:
        ch = want_int(t, "channel", 0, None)
        if ch >= op.channels:
            raise BadLine(f"channel: must be below {op.channels}")
    fields = t.get("fields", {})
    if type(fields) is not dict:
        raise BadLine("fields: must be an object")
    for name, v in fields.items():
        if not is_ident(name) or name in ("ts", "value"):
            raise BadLine(f"fields.{name}: bad field name")
        want_number(v, f"fields.{name}")
        if type(v) is int and abs(v) > FIELD_MAX:
            raise BadLine(f"fields.{name}: an integer must have |x| <= 2^53")
    ops: list[int] = []
    for a_name, _, b_name, _ in op.cond:
        name = a_name if is_base else b_name
        if name == "ts":
            if abs(ts) > FIELD_MAX:
                raise BadLine("ts: a ts the cond reads must have |ts| <= 2^53")
            ops.append(ts << FRAC_BITS)
        elif name == "value":
            ops.append(fixed(value))
        elif name in fields:
            v = fields[name]
            ops.append(v << FRAC_BITS if type(v) is int else fixed(v))
        else:
            raise BadLine(f"fields.{name}: missing, the cond reads it")
    return is_base, Rec(ident, ts, value, ops), (type(key) is str, key)


def reject_constant(s: str) -> Any:
    raise ValueError(f"{s} is not JSON")


class Reader:
    def __init__(self) -> None:
        self.lineno = 0

    def next_object(self) -> dict[str, Any] | None:
        while True:
            raw = sys.stdin.readline()
            if not raw:
                return None
            self.lineno += 1
            text = raw.lstrip("\ufeff").strip(" \t\r\n")
            if not text:
                continue
            try:
                obj = json.loads(text, parse_constant=reject_constant)
            except ValueError as e:
                raise BadLine(f"line: not valid JSON ({e})") from None
            if type(obj) is not dict:
                raise BadLine("line: must be a JSON object")
            return obj


def one_case(rd: Reader) -> bool:
    """Read one case and write its results; False at a clean end of input."""
    op: Operator | None = None
    try:
        first = rd.next_object()
        if first is None:
            return False
        if first.get("type") != "query":
            raise BadLine("type: the first line must be the query")
        check_query(first)
        op = Operator(first)
        while True:
            obj = rd.next_object()
            if obj is None:
                raise BadLine("line: input ended before the end line")
            kind = obj.get("type")
            if kind == "tuple":
                is_base, rec, key = make_record(obj, op)
                op.on_tuple(is_base, rec, key)
            elif kind == "watermark":
                only(obj, WATERMARK_FIELDS)
                if "ts" not in obj:
                    raise BadLine("ts: missing")
                ts = want_int(obj, "ts", -TS_MAX, TS_MAX)
                ch = want_int(obj, "channel", 0, None) if "channel" in obj else 0
                if op.lateness is not None:
                    raise BadLine("type: no watermark lines in lateness mode")
                if ch >= op.channels:
                    raise BadLine(f"channel: must be below {op.channels}")
                op.on_watermark(ts, ch)
            elif kind == "end":
                only(obj, {"type"})
                op.on_end()
                for line in op.out:
                    sys.stdout.write(line + "\n")
                return True
            else:
                raise BadLine(f"type: unknown line type {json.dumps(kind)}")
    except BadLine as e:
        if op is not None:
            for line in op.out:
                sys.stdout.write(line + "\n")
            sys.stdout.flush()
        sys.stderr.write(f"bucket_oij: error: <stdin>:{rd.lineno}: {e}\n")
        sys.exit(2)


def main() -> int:
    rd = Reader()
    if os.environ.get("OIJ_SESSION") == "1":
        while one_case(rd):
            sys.stdout.write('{"type":"end"}\n')
            sys.stdout.flush()
        return 0
    if not one_case(rd):
        sys.stderr.write("bucket_oij: error: <stdin>: no query line\n")
        return 2
    try:
        extra = rd.next_object()
    except BadLine as e:
        sys.stderr.write(f"bucket_oij: error: <stdin>:{rd.lineno}: {e}\n")
        return 2
    if extra is not None:
        sys.stderr.write(f"bucket_oij: error: <stdin>:{rd.lineno}: line: nothing may follow the end line\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
