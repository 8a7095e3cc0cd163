r"""The edges of the specification's rules, and which of them a case hits.

A rule edge is a situation where an implementation that is one tick off, or
reads a flag on the wrong path, gives another answer than the specification.
``oij conform`` counts how many generated cases hit each edge and warns about
an edge no case hit: a "conforms" then says nothing about it.

With :math:`\ell', u'` the inclusive offsets, W the watermark in force when a
tuple x arrives, and y an earlier on-time tuple of the same key on the other
side:

* late rule: :math:`x.ts = W` (on time) and :math:`x.ts = W - 1` (late);
* each raw bound, on each trigger path: :math:`b.ts - a.ts = lower` or
  :math:`= upper`, x the base (base-triggered) or the probe (probe-triggered);
* equal timestamps in both arrival orders;
* a probe's purge edge :math:`W - (b.ts - \ell') \in \{-1, 0, 1\}` when a base arrives;
* a base's finality edge :math:`W - hi(a) \in \{-1, 0, 1\}` when a probe arrives;
* colliding keys: a base and a probe whose different keys agree modulo 8,
  16 or 2^32, under ``str()``, or as a string prefix;
* representation (other languages' and systems' integers, strings, doubles
  and optional fields): a base and a probe of one key on both sides of
  +/-2^31, 2^32 or 2^53; a probe outside a base's window but inside it
  modulo 2^31 or 2^32; two ids, or a base's and a probe's different int
  keys, equal in 32 bits or through a double; string keys equal under case
  folding, NFC normalization or trimming; a value of 17 significant digits,
  -0.0, a subnormal or the largest double; a watermark line without a
  ``channel`` field under ``channels > 1`` while channel 0 is ahead of
  another channel.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import BASE, NO_WATERMARK, StreamTuple
from oij.spec.watermark import arrival_watermarks
from oij.testing._case import Case

EDGES: tuple[str, ...] = (
    "late rule: ts == W (on time)",
    "late rule: ts == W - 1 (late)",
    "lower bound, base-triggered",
    "lower bound, probe-triggered",
    "upper bound, base-triggered",
    "upper bound, probe-triggered",
    "equal timestamps, base first",
    "equal timestamps, probe first",
    "probe purge: W == b.ts - lo' - 1",
    "probe purge: W == b.ts - lo'",
    "probe purge: W == b.ts - lo' + 1",
    "base finality: W == hi(a) - 1",
    "base finality: W == hi(a)",
    "base finality: W == hi(a) + 1",
    "colliding keys",
    "representation: a window across 2^31, 2^32 or 2^53",
    "representation: a probe inside a window modulo 2^32",
    "representation: ids equal in 32 bits or through a double",
    "representation: int keys equal in 32 bits or through a double",
    "representation: string keys equal folded, normalized or trimmed",
    "representation: a value of 17 digits, -0.0, subnormal or the largest double",
    "representation: a watermark without its channel under channels > 1, channel 0 ahead",
)
"""Every edge, in the order ``oij conform`` prints them."""

EDGE_NEEDS: dict[str, frozenset[str]] = {
    **{e: frozenset({"representation"}) for e in EDGES if e.startswith("representation")},
    "representation: string keys equal folded, normalized or trimmed": frozenset({"representation", "mixed-keys"}),
    "representation: a watermark without its channel under channels > 1, channel 0 ahead":
        frozenset({"channels", "watermarks"}),
}
"""The features a case needs to hit an edge (``oij conform`` warns about a missed edge only if they are claimed)."""


def _alike_ints(x: int, y: int) -> bool:
    """Different ints equal truncated to 32 bits or read as doubles."""
    return x != y and ((x - y) % (1 << 32) == 0 or float(x) == float(y))


def _repr_edges(case: Case, hits: set[str]) -> None:
    from oij.testing._case import REPR_EDGES, has_repr_value, text_twins

    q = case.query
    lo, hi = lower_offset(q), upper_offset(q)
    ts = case.tuples
    ids = sorted(t.id for t in ts)
    if any(_alike_ints(x, y) for x, y in itertools.pairwise(ids)):
        hits.add(EDGES[17])
    if any(has_repr_value(t.value) for t in ts if t.side != BASE):
        hits.add(EDGES[20])
    bases = [t for t in ts if t.side == BASE]
    probes = [t for t in ts if t.side != BASE]
    for a in bases:
        for b in probes:
            if type(a.key) is type(b.key) and a.key == b.key:
                d = b.ts - a.ts
                if any((a.ts < s * e <= b.ts or b.ts < s * e <= a.ts) for e in REPR_EDGES[:3] for s in (1, -1)):
                    hits.add(EDGES[15])
                if not lo <= d <= hi and any(lo <= d - m <= hi for m in (1 << 32, -(1 << 32), 1 << 31, -(1 << 31))):
                    hits.add(EDGES[16])
            elif isinstance(a.key, int) and isinstance(b.key, int) and _alike_ints(a.key, b.key):
                hits.add(EDGES[18])
            elif (isinstance(a.key, str) and isinstance(b.key, str) and text_twins(a.key, b.key)) or (
                    isinstance(a.key, str) != isinstance(b.key, str)
                    and _numeric(a.key) == _numeric(b.key) is not None):
                hits.add(EDGES[19])  # equal folded, normalized, trimmed, or a numeric string and its number
    if q.channels > 1 and q.lateness is None and case.encoding.split("|")[0] != "full":
        import orjson

        marks: dict[int, int] = {}
        for line in case.to_jsonl().splitlines():
            obj = orjson.loads(line)
            if obj["type"] != "watermark":
                continue
            c = obj.get("channel", 0)
            marks[c] = max(marks.get(c, obj["ts"]), obj["ts"])
            if "channel" not in obj and (len(marks) < q.channels or min(marks.values()) < marks[0]):
                hits.add(EDGES[21])


def _numeric(k: int | str) -> float | None:
    try:
        return float(k)
    except (TypeError, ValueError, OverflowError):
        return None

_STEP = {-1: " - 1", 0: "", 1: " + 1"}


def _key_id(k: Any) -> tuple[str, Any]:
    return (type(k).__name__, k)


def do_keys_collide(k1: Any, k2: Any) -> bool:
    """Different keys that a careless comparison could confuse (see the module docstring)."""
    if _key_id(k1) == _key_id(k2):
        return False
    if str(k1) == str(k2):
        return True
    if isinstance(k1, int) and isinstance(k2, int):
        return any((k1 - k2) % m == 0 for m in (8, 16, 1 << 32)) or {k1, k2} == {-1, -2}
    if isinstance(k1, str) and isinstance(k2, str):
        return k1.startswith(k2) or k2.startswith(k1)
    return False


def compute_edges(case: Case) -> set[str]:
    """The names of :data:`EDGES` that ``case`` hits."""
    q = case.query
    lo, hi = lower_offset(q), upper_offset(q)
    hits: set[str] = set()
    stored: dict[tuple[str, Any], list[StreamTuple]] = defaultdict(list)
    keys_seen: dict[str, set[tuple[str, Any]]] = defaultdict(set)
    for e, w in zip(case.events, arrival_watermarks(case.events, q), strict=True):
        if not isinstance(e, StreamTuple):
            continue
        finite = w != NO_WATERMARK
        if finite and e.ts == w:
            hits.add(EDGES[0])
        if finite and e.ts == w - 1:
            hits.add(EDGES[1])
        late = finite and e.ts < w
        path = "base-triggered" if e.side == BASE else "probe-triggered"
        for y in stored[_key_id(e.key)]:
            if y.side == e.side:
                continue
            a, b = (e, y) if e.side == BASE else (y, e)
            d = b.ts - a.ts
            if not late:
                if d == q.lower:
                    hits.add(f"lower bound, {path}")
                if d == q.upper:
                    hits.add(f"upper bound, {path}")
                if d == 0:
                    hits.add(f"equal timestamps, {y.side} first")
            if finite and e.side == BASE and (w - (b.ts - lo)) in _STEP:
                hits.add(f"probe purge: W == b.ts - lo'{_STEP[w - (b.ts - lo)]}")
            if finite and e.side != BASE and (w - (a.ts + hi)) in _STEP:
                hits.add(f"base finality: W == hi(a){_STEP[w - (a.ts + hi)]}")
        other = "probe" if e.side == BASE else BASE
        if any(do_keys_collide(k[1], e.key) for k in keys_seen[other]):
            hits.add("colliding keys")
        keys_seen[e.side].add(_key_id(e.key))
        if not late:
            stored[_key_id(e.key)].append(e)
    _repr_edges(case, hits)
    return hits
