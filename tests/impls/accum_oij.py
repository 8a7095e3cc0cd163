"""accum_oij: a small streaming implementation of the oij-jsonl v1 conformance protocol.

It reads one case (a query line, tuples and watermarks, ``{"type":"end"}``) on stdin and
writes result lines on stdout.  Written from docs/semantics.rst, docs/format.rst,
docs/conformance.rst and docs/watermarks.rst only, as a second opinion on the oracle and as the
target of ``oij bench kit-power`` (mutants of this file must not pass ``oij conform``); the eight
bug shapes of tests/impls/accum_bugs.py are subclasses of :class:`Join`:

* Window: an exclusive bound is the neighbouring inclusive one, so a base ``a`` matches a
  probe ``b`` of the same key iff ``a.ts + lo <= b.ts <= a.ts + hi`` with ``lo = lower``
  (``lower + 1`` if exclusive) and ``hi = upper`` (``upper - 1`` if exclusive).  Keys are
  tagged with their type, so ``1`` and ``"1"`` differ.
* W: watermark mode takes, per channel, the largest watermark sent, and W is their minimum
  (-inf until every channel has spoken); lateness mode has ``W = max ts seen - lateness``.
  A tuple is late iff ``ts < W`` on arrival: it gets a ``late`` line and never joins.
* Two trigger paths: an arriving base searches the stored probes (``on_base``), an arriving
  probe searches the stored bases (``on_probe``); each pair is found by its second tuple.
* Each stored base owns an accumulator (matched probe ids, count, exact Fraction sum,
  min, max).  Its aggregate row, or its ``(a, null)`` row in a left join, is written when
  it is final (``W > hi(a)``) or at the end, never earlier.
* On every change of W, ``on_watermark_change`` walks the state: a base is kept while
  ``W <= hi(a)`` (else finalised and dropped); a probe is kept while ``b.ts >= W + lo`` or,
  with an aggregate, while a pending base of its key has it in its window.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

Key = tuple[str, int | str]


@dataclass
class Acc:
    """What one base has matched so far."""

    probes: list[int] = field(default_factory=list)
    total: Fraction = Fraction(0)
    low: float | None = None
    high: float | None = None

    def add(self, pid: int, value: float) -> None:
        self.probes.append(pid)
        self.total += Fraction(float(value))  # a value is a double: a JSON integer above 2^53 too
        self.low = value if self.low is None else min(self.low, value)
        self.high = value if self.high is None else max(self.high, value)


@dataclass
class Tup:
    id: int
    ts: int
    key: Key
    value: float
    acc: Acc = field(default_factory=Acc)


def as_float(x: Fraction) -> float | str:
    try:
        return float(x)
    except OverflowError:
        return "inf" if x > 0 else "-inf"


class Join:
    def __init__(self, q: dict[str, Any]) -> None:
        self.q = q
        self.lower, self.upper = int(q["lower"]), int(q["upper"])
        self.lo_incl, self.hi_incl = q.get("lower_inclusive", True), q.get("upper_inclusive", True)
        self.lo = self.lower if self.lo_incl else self.lower + 1
        self.hi = self.upper if self.hi_incl else self.upper - 1
        self.left = q.get("join", "inner") == "left"
        self.agg: str | None = q.get("aggregate")
        self.lateness: int | None = q.get("lateness")
        self.channels = int(q.get("channels", 1))
        self.marks: dict[int, int] = {}
        self.max_seen: float = -math.inf
        self.w: float = -math.inf
        self.bases: dict[Key, list[Tup]] = {}
        self.probes: dict[Key, list[Tup]] = {}

    def emit(self, line: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")

    def key(self, k: int | str) -> Key:
        return (type(k).__name__, k)

    def match(self, a: Tup, b: Tup) -> None:
        a.acc.add(b.id, b.value)
        if self.agg is None:
            self.emit({"type": "pair", "base": a.id, "probe": b.id})

    # -- the two trigger paths ------------------------------------------------------------
    def on_base(self, a: Tup) -> None:
        for b in self.probes.get(a.key, []):
            if a.ts + self.lo <= b.ts <= a.ts + self.hi:
                self.match(a, b)

    def on_probe(self, b: Tup) -> None:
        for a in self.bases.get(b.key, []):
            if a.ts + self.lo <= b.ts <= a.ts + self.hi:
                self.match(a, b)

    # -- finality and purging -------------------------------------------------------------
    def is_final(self, a: Tup) -> bool:
        return self.w > a.ts + self.hi

    def keep_probe(self, b: Tup) -> bool:
        if b.ts >= self.w + self.lo:
            return True
        bases = self.bases.get(b.key, [])
        return self.agg is not None and any(a.ts + self.lo <= b.ts <= a.ts + self.hi for a in bases)

    def finalize(self, a: Tup) -> None:
        acc, n = a.acc, len(a.acc.probes)
        if self.agg is None:
            if self.left and n == 0:
                self.emit({"type": "pair", "base": a.id, "probe": None})
            return
        value: float | str | None
        if self.agg == "count":
            value = n
        elif self.agg == "sum":
            value = as_float(acc.total)
        elif self.agg == "avg":
            value = as_float(acc.total / n) if n else None
        else:
            extreme = acc.low if self.agg == "min" else acc.high
            value = None if extreme is None else float(extreme)
        self.emit({"type": "aggregate", "base": a.id, "count": n, "value": value})

    def on_watermark_change(self) -> None:
        for k in list(self.bases):
            pending = []
            for a in self.bases[k]:
                if self.is_final(a):
                    self.finalize(a)
                else:
                    pending.append(a)
            self.bases[k] = pending
        for k in list(self.probes):
            self.probes[k] = [b for b in self.probes[k] if self.keep_probe(b)]

    def set_w(self, w: float) -> None:
        if w > self.w:
            self.w = w
            self.on_watermark_change()

    # -- events ---------------------------------------------------------------------------
    def on_tuple(self, ev: dict[str, Any]) -> None:
        t = Tup(int(ev["id"]), int(ev["ts"]), self.key(ev["key"]), ev.get("value", 0.0))
        if t.ts < self.w:
            self.emit({"type": "late", "id": t.id})
        elif ev["side"] == "base":
            self.on_base(t)
            if self.is_final(t):
                self.finalize(t)
            elif self.agg is not None or self.left or self.lo <= self.hi:
                self.bases.setdefault(t.key, []).append(t)
        else:
            self.on_probe(t)
            if self.keep_probe(t):
                self.probes.setdefault(t.key, []).append(t)
        if self.lateness is not None:
            self.max_seen = max(self.max_seen, t.ts)
            self.set_w(self.max_seen - self.lateness)

    def on_watermark(self, ev: dict[str, Any]) -> None:
        ch = int(ev.get("channel", 0))
        self.marks[ch] = max(self.marks.get(ch, int(ev["ts"])), int(ev["ts"]))
        if len(self.marks) >= self.channels:
            self.set_w(min(self.marks.values()))

    def on_end(self) -> None:
        for bases in self.bases.values():
            for a in bases:
                self.finalize(a)
        self.bases.clear()


def main(make: Callable[[dict[str, Any]], Join] = Join) -> None:
    """Read one case on stdin, write its result lines on stdout; ``make`` builds the operator from the query."""
    join: Join | None = None
    for line in sys.stdin:
        if not line.strip():
            continue
        ev = json.loads(line)
        if ev["type"] == "query":
            join = make(ev)
        elif join is None:
            sys.exit("the first line must be the query")
        elif ev["type"] == "tuple":
            join.on_tuple(ev)
        elif ev["type"] == "watermark":
            join.on_watermark(ev)
        elif ev["type"] == "end":
            join.on_end()
            break


if __name__ == "__main__":
    main()
