"""sorted_oij: an online interval join (oij-jsonl v1 conformance protocol) over sorted indexes.

Written from the documentation only (docs/format.rst, docs/semantics.rst, docs/watermarks.rst,
docs/conformance.rst, docs/cond.rst), apart from the project's reference, spec and engines, to be one
more independent implementation the conformance kit can be measured against.

Style: a *sorted-index* operator.  Per key, the stored probes and the stored (pending) bases are each held
in a ``SortedList`` of ``(ts, id)``.  Both trigger paths find their partners with a range query (bisect) on
the other side's index, never with a scan:

* a base ``a`` reads the probes with ``ts`` in ``[a.ts + lo, a.ts + hi]``;
* a probe ``b`` reads the bases with ``ts`` in ``[b.ts - hi, b.ts - lo]``.

A base is final once ``W > a.ts + hi``; since ``hi`` is one offset for every base, the final bases of a key are
a prefix of its base index, cut in one slice, and each one's aggregate is computed from the probe index range
of its window at that moment (exact arithmetic with ``fractions.Fraction``).  Probes that no future base can
reach (``b.ts < W + lo``) and no pending base holds are a prefix of the probe index below the first pending
window, plus the uncovered probes of the gap above it; both are cut.  Keys that go idle are woken by one global
heap of ``(W threshold, key)`` entries.

Protocol: one case on stdin, result lines on stdout, exit 0; with ``OIJ_SESSION=1`` cases follow one another on
stdin and each case's results are followed by ``{"type":"end"}``.  Format 1.1 conditions (``cond``) are
supported.  A bad line stops the run with one line on stderr and exit code 2.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TextIO

from sortedcontainers import SortedList

TS_LIMIT = 2**62  # |ts| < 2^62
FIELD_INT_LIMIT = 2**53
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
AGGREGATES = {"count", "sum", "avg", "min", "max"}
OPS = {"<", "<=", ">", ">=", "==", "!="}

Key = tuple[bool, int | str]  # (is_str, key): 1 and "1" differ


class CaseError(Exception):
    """A bad input line: the message names the field."""


def _int(obj: dict[str, Any], name: str, lo: int, hi: int, default: int | None = None) -> int:
    if name not in obj:
        if default is None:
            raise CaseError(f"{name}: missing")
        return default
    v = obj[name]
    if isinstance(v, bool) or not isinstance(v, int):
        raise CaseError(f"{name}: must be an integer, got {json.dumps(v)}")
    if not lo <= v <= hi:
        raise CaseError(f"{name}: out of range [{lo}, {hi}], got {v}")
    return v


def _finite(v: Any, name: str) -> float | int:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise CaseError(f"{name}: must be a number, got {json.dumps(v)}")
    if isinstance(v, float) and not math.isfinite(v):
        raise CaseError(f"{name}: must be finite")
    if isinstance(v, int):
        try:
            float(v)
        except OverflowError:
            raise CaseError(f"{name}: must be finite") from None
    return v


def _check_keys(obj: dict[str, Any], allowed: set[str], what: str) -> None:
    for k in obj:
        if k not in allowed:
            raise CaseError(f"{k}: unknown field of a {what} line")


@dataclass(frozen=True)
class Cmp:
    a: str
    op: str
    b: str
    add: Fraction


@dataclass(frozen=True)
class Query:
    lo: int  # inclusive offsets of the closed window [a.ts + lo, a.ts + hi]
    hi: int
    aggregate: str | None
    left: bool
    channels: int
    lateness: int | None
    cond: tuple[Cmp, ...]

    @property
    def empty(self) -> bool:
        return self.lo > self.hi


def parse_query(obj: dict[str, Any]) -> Query:
    _check_keys(
        obj,
        {"type", "lower", "upper", "lower_inclusive", "upper_inclusive", "aggregate", "join", "channels",
         "lateness", "cond"},
        "query",
    )
    lower = _int(obj, "lower", -(TS_LIMIT - 1), TS_LIMIT - 1)
    upper = _int(obj, "upper", -(TS_LIMIT - 1), TS_LIMIT - 1)
    if lower > upper:
        raise CaseError(f"lower: lower ({lower}) must be <= upper ({upper})")
    flags = []
    for name in ("lower_inclusive", "upper_inclusive"):
        v = obj.get(name, True)
        if not isinstance(v, bool):
            raise CaseError(f"{name}: must be true or false, got {json.dumps(v)}")
        flags.append(v)
    agg: str | None = obj.get("aggregate")
    if agg == "none":
        agg = None
    if agg is not None and agg not in AGGREGATES:
        raise CaseError(f"aggregate: must be null or one of count, sum, avg, min, max, got {json.dumps(agg)}")
    join = obj.get("join", "inner")
    if join not in ("inner", "left"):
        raise CaseError(f"join: must be inner or left, got {json.dumps(join)}")
    channels = _int(obj, "channels", 1, 2**63 - 1, 1)
    lateness = None
    if obj.get("lateness") is not None:
        lateness = _int(obj, "lateness", 0, TS_LIMIT - 1)
    cond: list[Cmp] = []
    raw = obj.get("cond", [])
    if not isinstance(raw, list):
        raise CaseError("cond: must be a list")
    for i, c in enumerate(raw):
        if not isinstance(c, dict):
            raise CaseError(f"cond[{i}]: must be an object")
        for k in c:
            if k not in ("a", "op", "b", "add"):
                raise CaseError(f"cond[{i}].{k}: unknown field")
        for side in ("a", "b"):
            fname = c.get(side)
            if not isinstance(fname, str) or not NAME_RE.match(fname):
                raise CaseError(f"cond[{i}].{side}: must be a field name, got {json.dumps(fname)}")
        if c.get("op") not in OPS:
            raise CaseError(f"cond[{i}].op: must be one of < <= > >= == !=")
        add = _finite(c.get("add", 0), f"cond[{i}].add")
        if abs(add) > FIELD_INT_LIMIT:
            raise CaseError(f"cond[{i}].add: |add| must be at most 2^53")
        cond.append(Cmp(c["a"], c["op"], c["b"], Fraction(add)))
    lo = lower if flags[0] else lower + 1
    hi = upper if flags[1] else upper - 1
    return Query(lo, hi, agg, join == "left", channels, lateness, tuple(cond))


def _holds(x: Fraction, op: str, y: Fraction) -> bool:
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


@dataclass
class Base:
    ts: int
    operands: tuple[Fraction, ...]
    matched: bool = False


@dataclass
class Probe:
    ts: int
    value: float
    operands: tuple[Fraction, ...]


@dataclass
class KeyState:
    bases: Any = field(default_factory=SortedList)  # SortedList[(ts, id)] of pending bases
    probes: Any = field(default_factory=SortedList)  # SortedList[(ts, id)] of stored probes
    base_of: dict[int, Base] = field(default_factory=dict)
    probe_of: dict[int, Probe] = field(default_factory=dict)


def _fmt_float(x: Fraction) -> float | str:
    try:
        return float(x)
    except OverflowError:
        return "inf" if x > 0 else "-inf"


class Join:
    def __init__(self, q: Query) -> None:
        self.q = q
        self.keys: dict[Key, KeyState] = {}
        self.wake: list[tuple[int, int, Key]] = []  # (purge when W > threshold, seq, key)
        self.seq = 0
        self.w: int | None = None  # None = minus infinity
        self.marks: dict[int, int] = {}
        self.max_ts: int | None = None
        self.out: list[str] = []

    # -- emission --------------------------------------------------------------------------------------------
    def _pair(self, base: int, probe: int | None) -> None:
        self.out.append(json.dumps({"type": "pair", "base": base, "probe": probe}))

    def _late(self, ident: int) -> None:
        self.out.append(json.dumps({"type": "late", "id": ident}))

    def _cond(self, base: Base, probe: Probe) -> bool:
        for c, x, y in zip(self.q.cond, base.operands, probe.operands, strict=True):
            if not _holds(x, c.op, y + c.add):
                return False
        return True

    def _finalize(self, st: KeyState, ts: int, ident: int) -> None:
        base = st.base_of.pop(ident)
        q = self.q
        if q.aggregate is None:
            if q.left and not base.matched:
                self._pair(ident, None)
            return
        vals: list[float] = []
        if not q.empty:
            for _, pid in st.probes.irange((ts + q.lo,), (ts + q.hi + 1,), inclusive=(True, False)):
                p = st.probe_of[pid]
                if not q.cond or self._cond(base, p):
                    vals.append(p.value)
        n = len(vals)
        value: float | int | str | None
        if q.aggregate == "count":
            value = n
        elif q.aggregate in ("sum", "avg"):
            total = sum((Fraction(v) for v in vals), Fraction(0))
            mean = total / n if n else None
            value = _fmt_float(total) if q.aggregate == "sum" else None if mean is None else _fmt_float(mean)
        elif q.aggregate == "min":
            value = min(vals) if vals else None
        else:
            value = max(vals) if vals else None
        self.out.append(json.dumps({"type": "aggregate", "base": ident, "count": n, "value": value}))

    # -- state ---------------------------------------------------------------------------------------------
    def _schedule(self, threshold: int, key: Key) -> None:
        self.seq += 1
        heapq.heappush(self.wake, (threshold, self.seq, key))

    def _covered(self, st: KeyState, t: int) -> bool:
        """Does a pending base of this key hold a probe at t in its window?"""
        i = st.bases.bisect_left((t - self.q.hi,))
        return i < len(st.bases) and bool(st.bases[i][0] <= t - self.q.lo)

    def _purge(self, key: Key) -> None:
        st = self.keys.get(key)
        if st is None or self.w is None:
            return
        w, q = self.w, self.q
        # final bases: a.ts + hi < W, a prefix of the base index
        cut = st.bases.bisect_left((w - q.hi,))
        if cut:
            for ts, ident in st.bases[:cut]:
                self._finalize(st, ts, ident)
            del st.bases[:cut]
        # probes no future base reaches: b.ts < W + lo; with an aggregate, only those no pending base holds
        bound = w + q.lo
        if q.aggregate is not None and st.bases:
            first_lo = st.bases[0][0] + q.lo
            cut = st.probes.bisect_left((min(bound, first_lo),))
            gap: list[tuple[int, int]] = []
            if first_lo < bound:
                gap = [e for e in st.probes.irange((first_lo,), (bound,), inclusive=(True, False))
                       if not self._covered(st, e[0])]
        else:
            cut = st.probes.bisect_left((bound,))
            gap = []
        for _, pid in st.probes[:cut]:
            del st.probe_of[pid]
        del st.probes[:cut]
        for e in gap:
            st.probes.remove(e)
            del st.probe_of[e[1]]
        if not st.bases and not st.probes:
            del self.keys[key]

    def _advance(self) -> None:
        w = self.w
        if w is None:
            return
        while self.wake and self.wake[0][0] < w:
            _, _, key = heapq.heappop(self.wake)
            self._purge(key)

    # -- events --------------------------------------------------------------------------------------------
    def watermark(self, ts: int, channel: int) -> None:
        q = self.q
        if q.lateness is not None:
            raise CaseError("type: a watermark line in lateness mode")
        if channel >= q.channels:
            raise CaseError(f"channel: must be below channels={q.channels}, got {channel}")
        if ts > self.marks.get(channel, -(2**64)):
            self.marks[channel] = ts
        if len(self.marks) == q.channels:
            self.w = min(self.marks.values())
        self._advance()

    def on_tuple(self, side: str, ident: int, ts: int, key: Key, value: float, operands: tuple[Fraction, ...]) -> None:
        q = self.q
        if self.w is not None and ts < self.w:
            self._late(ident)
        else:
            st = self.keys.get(key)
            if side == "base":
                if q.aggregate is None and not q.left and q.empty:
                    pass  # can never produce anything
                else:
                    base = Base(ts, operands)
                    if q.aggregate is None and st is not None and not q.empty:
                        for _, pid in st.probes.irange((ts + q.lo,), (ts + q.hi + 1,), inclusive=(True, False)):
                            if not q.cond or self._cond(base, st.probe_of[pid]):
                                base.matched = True
                                self._pair(ident, pid)
                    if st is None:
                        st = self.keys[key] = KeyState()
                    st.bases.add((ts, ident))
                    st.base_of[ident] = base
                    self._schedule(ts + q.hi, key)
            elif not q.empty:
                probe = Probe(ts, value, operands)
                if q.aggregate is None and st is not None:
                    for _, bid in st.bases.irange((ts - q.hi,), (ts - q.lo + 1,), inclusive=(True, False)):
                        base = st.base_of[bid]
                        if not q.cond or self._cond(base, probe):
                            base.matched = True
                            self._pair(bid, ident)
                if st is None:
                    st = self.keys[key] = KeyState()
                st.probes.add((ts, ident))
                st.probe_of[ident] = probe
                self._schedule(ts - q.lo, key)
        if q.lateness is not None and (self.max_ts is None or ts > self.max_ts):
            self.max_ts = ts
            self.w = ts - q.lateness
        self._advance()

    def end(self) -> None:
        for st in self.keys.values():
            for ts, ident in st.bases:
                self._finalize(st, ts, ident)
        self.keys.clear()
        self.wake.clear()


def parse_tuple(obj: dict[str, Any], q: Query, j: Join) -> None:
    _check_keys(obj, {"type", "side", "id", "ts", "key", "value", "channel", "fields"}, "tuple")
    side = obj.get("side")
    if side not in ("base", "probe"):
        raise CaseError(f"side: must be base or probe, got {json.dumps(side)}")
    ident = obj.get("id")
    if isinstance(ident, bool) or not isinstance(ident, int):
        # any integer: the schema says int64, but the kit also sends ids past 2^63 - 1
        raise CaseError(f"id: must be an integer, got {json.dumps(ident)}")
    ts = _int(obj, "ts", -(TS_LIMIT - 1), TS_LIMIT - 1)
    if "key" not in obj:
        raise CaseError("key: missing")
    k = obj["key"]
    if isinstance(k, bool) or not isinstance(k, int | str):
        raise CaseError(f"key: must be an integer or a string, got {json.dumps(k)}")
    value = float(_finite(obj.get("value", 0.0), "value"))
    channel = _int(obj, "channel", 0, 2**63 - 1, 0)
    if channel >= q.channels:
        raise CaseError(f"channel: must be below channels={q.channels}, got {channel}")
    fields = obj.get("fields", {})
    if not isinstance(fields, dict):
        raise CaseError("fields: must be an object")
    for name, v in fields.items():
        if not NAME_RE.match(name) or name in ("ts", "value"):
            raise CaseError(f"fields.{name}: not a valid field name")
        _finite(v, f"fields.{name}")
        if isinstance(v, int) and abs(v) > FIELD_INT_LIMIT:
            raise CaseError(f"fields.{name}: an integer field must have |x| <= 2^53")
    operands: list[Fraction] = []
    for c in q.cond:
        name = c.a if side == "base" else c.b
        if name == "ts":
            if abs(ts) > FIELD_INT_LIMIT:
                raise CaseError("ts: a ts the cond reads must have |ts| <= 2^53")
            operands.append(Fraction(ts))
        elif name == "value":
            operands.append(Fraction(value))
        elif name in fields:
            operands.append(Fraction(fields[name]))
        else:
            raise CaseError(f"fields.{name}: missing (the cond reads it)")
    j.on_tuple(side, ident, ts, (isinstance(k, str), k), value, tuple(operands))


def _no_constant(s: str) -> Any:
    raise CaseError(f"line: {s} is not valid JSON here")


def _lines(stream: TextIO) -> Iterator[tuple[int, dict[str, Any]]]:
    n = 0
    for raw in stream:
        n += 1
        text = raw.lstrip("\ufeff").strip(" \t\r\n")
        if not text:
            continue
        try:
            obj = json.loads(text, parse_constant=_no_constant)
        except CaseError as e:
            raise CaseError(f"{n}: {e}") from None
        except ValueError as e:
            raise CaseError(f"{n}: line: not valid JSON ({e})") from None
        if not isinstance(obj, dict):
            raise CaseError(f"{n}: line: must be a JSON object")
        yield n, obj


def run_case(lines: Iterator[tuple[int, dict[str, Any]]], out: TextIO) -> bool:
    """Read and answer one case; False at EOF before its query line."""
    j: Join | None = None
    where = [0]
    try:
        for n, obj in lines:
            where[0] = n
            kind = obj.get("type")
            if j is None:
                if kind != "query":
                    raise CaseError("type: the first line must be the query")
                j = Join(parse_query(obj))
            elif kind == "tuple":
                parse_tuple(obj, j.q, j)
            elif kind == "watermark":
                _check_keys(obj, {"type", "ts", "channel"}, "watermark")
                j.watermark(_int(obj, "ts", -(TS_LIMIT - 1), TS_LIMIT - 1), _int(obj, "channel", 0, 2**63 - 1, 0))
            elif kind == "end":
                _check_keys(obj, {"type"}, "end")
                j.end()
                out.write("".join(line + "\n" for line in j.out))
                return True
            else:
                raise CaseError(f"type: unknown line type {json.dumps(kind)}")
        if j is None:
            return False
        raise CaseError("line: missing end line")
    except CaseError as e:
        if j is not None:
            out.write("".join(line + "\n" for line in j.out))
            out.flush()
        msg = str(e)
        if not msg[:1].isdigit():
            msg = f"{where[0]}: {msg}"
        sys.stderr.write(f"sorted_oij: error: stdin:{msg}\n")
        raise SystemExit(2) from None


def main() -> int:
    lines = _lines(sys.stdin)
    if os.environ.get("OIJ_SESSION") == "1":
        while run_case(lines, sys.stdout):
            sys.stdout.write('{"type":"end"}\n')
            sys.stdout.flush()
        return 0
    if not run_case(lines, sys.stdout):
        sys.stderr.write("sorted_oij: error: stdin: no query line\n")
        return 2
    for n, _ in lines:
        sys.stderr.write(f"sorted_oij: error: stdin:{n}: line: nothing may follow the end line\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
