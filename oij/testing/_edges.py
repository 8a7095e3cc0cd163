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

import bisect
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


def alike_ints(x: int, y: int) -> bool:
    """Different ints equal truncated to 32 bits or read as doubles."""
    return x != y and ((x - y) % (1 << 32) == 0 or float(x) == float(y))


def _repr_edges(case: Case, hits: set[str]) -> None:
    from oij.testing._case import has_repr_value, text_twins

    q = case.query
    lo, hi = lower_offset(q), upper_offset(q)
    ts = case.tuples
    ids = sorted(t.id for t in ts)
    if any(alike_ints(x, y) for x, y in itertools.pairwise(ids)):
        hits.add(EDGES[17])
    if any(has_repr_value(t.value) for t in ts if t.side != BASE):
        hits.add(EDGES[20])
    groups: dict[tuple[str, Any], tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for t in ts:  # each key's base and probe timestamps: the edges of one key look at its pairs alone
        groups[_key_id(t.key)][t.side != BASE].append(t.ts)
    for a_ts, b_ts in groups.values():
        if a_ts and b_ts:
            _same_key_edges(a_ts, sorted(b_ts), lo, hi, hits)
    base_keys = [k for k, (a_ts, _) in groups.items() if a_ts]
    probe_keys = [k for k, (_, b_ts) in groups.items() if b_ts]
    for (_, x), (_, y) in itertools.product(base_keys, probe_keys):  # keys that differ: each pair of keys once
        if type(x) is type(y) and x == y:
            continue
        if isinstance(x, int) and isinstance(y, int):
            if alike_ints(x, y):
                hits.add(EDGES[18])
        elif (isinstance(x, str) and isinstance(y, str) and text_twins(x, y)) or (
                isinstance(x, str) != isinstance(y, str) and numeric_edges(x) == numeric_edges(y) is not None):
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


def _same_key_edges(a_ts: list[int], b_ts: list[int], lo: int, hi: int, hits: set[str]) -> None:
    """The representation edges of the pairs of one key, from its base timestamps ``a_ts`` and its probe
    timestamps ``b_ts`` (sorted): some pair on both sides of +/-2^31, 2^32 or 2^53 (:data:`EDGES` 15), some
    probe outside a base's window ``[lo, hi]`` but inside it moved by +/-2^31 or 2^32 (16).  The same answer as
    looking at every pair (``tests/testing/test_kit_edges.py`` compares them), in O(n log n): a case of a few
    hundred tuples of one key has tens of thousands of pairs."""
    from oij.testing._case import REPR_EDGES

    if EDGES[15] not in hits:  # a pair (a, b) with a.ts < v <= b.ts or b.ts < v <= a.ts, for some edge v
        a_min, a_max, b_min, b_max = min(a_ts), max(a_ts), b_ts[0], b_ts[-1]
        if any(a_min < s * e <= b_max or b_min < s * e <= a_max for e in REPR_EDGES[:3] for s in (1, -1)):
            hits.add(EDGES[15])
    if EDGES[16] not in hits:  # b.ts - a.ts outside [lo, hi] but in [lo + m, hi + m]
        for a, m in itertools.product(a_ts, _WRAPS):
            i, j = bisect.bisect_left(b_ts, a + lo + m), bisect.bisect_right(b_ts, a + hi + m)
            if i < j and (b_ts[i] < a + lo or b_ts[j - 1] > a + hi):  # the probes in range, not all in the window
                hits.add(EDGES[16])
                return


_WRAPS = (1 << 32, -(1 << 32), 1 << 31, -(1 << 31))
"""How far a window moves when a difference of timestamps wraps around in 32 bits (signed or not)."""


def numeric_edges(k: int | str) -> float | None:
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
