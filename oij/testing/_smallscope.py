"""The small-scope stage of ``oij conform`` (``--small-scope K``): every case of up to K events over a small
alphabet, deduplicated by symmetry, before the generated cases.

The small-scope hypothesis: most bugs show on small inputs, and a search that draws at random meets a given
small input only by luck.  The alphabet is :mod:`oij.testing._exhaustive`'s (four windows, pairs inner and
left, count and min, watermark and lateness mode; tuples at times 0-2 on keys 1 and 2, watermarks at 1 and 2),
every case written with its integral values as JSON integers.  Two symmetries of the specification remove
duplicates: shifting every time by the same amount (W starts at minus infinity, so nothing depends on where
the times start) and renaming keys (keys are compared only for equality), so each case is kept in a canonical
form: times starting at 0, keys numbered by first appearance.

Counts under every feature of ``all`` (``small_scope_sizes``): cases of exactly 1, 2 and 3 events: 80, 1,328
and 17,072 (from 288, 2,624 and 24,192 before deduplication); up to K = 1, 2, 3: 80, 1,408, 18,480.  At about
0.1 s per case for a Python command started once per case, K = 1 fits beside the default run's budget; K = 2
fits with ``--session`` (a few ms per case); K = 3 does not fit a minute either way.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from oij.spec.model import Event, StreamTuple, Watermark
from oij.testing._case import Case, case_features


def canonical(case: Case) -> Case:
    """``case`` with its times shifted to start at 0 and its keys renamed 1, 2, ... by first appearance."""
    times = [e.ts for e in case.events if isinstance(e, (StreamTuple, Watermark))]
    base = min(times, default=0)
    names: dict[object, int] = {}
    out: list[Event] = []
    for e in case.events:
        if isinstance(e, StreamTuple):
            k = names.setdefault((type(e.key), e.key), len(names) + 1)
            out.append(e._replace(ts=e.ts - base, key=k))
        elif isinstance(e, Watermark):
            out.append(e._replace(ts=e.ts - base))
        else:
            out.append(e)
    return Case(case.query, tuple(out), "small-scope", "full|int")


def small_scope_cases(features: Iterable[str], k: int) -> list[Case]:
    """Every case of up to ``k`` events of the alphabet whose features are among ``features``, one per
    symmetry class, in the enumeration's order."""
    from oij.testing._exhaustive import small_cases

    feats = frozenset(features)
    seen: set[tuple[object, ...]] = set()
    out: list[Case] = []
    for c in small_cases(k):
        c = canonical(c)
        key = (c.query, c.events)
        if key in seen or not case_features(c) <= feats:
            continue
        seen.add(key)
        out.append(c)
    return out


def small_scope_sizes(features: Iterable[str], k: int) -> list[tuple[int, int]]:
    """For 1..k events: (cases before deduplication, after) -- the figures of the module docstring."""
    from oij.testing._exhaustive import small_cases

    feats = frozenset(features)
    out = []
    for n in range(1, k + 1):
        raw = [c for c in small_cases(n) if len(c) == n and case_features(c) <= feats]
        out.append((len(raw), len({(d.query, d.events) for d in map(canonical, raw)})))
    return out


COVER_FACTORS = (("query", "value"), ("query", "outcome"), ("window", "sequence"), ("kind", "sequence"),
                 ("mode", "sequence"), ("window", "offset"), ("kind", "offset"), ("mode", "offset"),
                 ("window", "keys"), ("kind", "keys"), ("sequence", "offset"), ("sequence", "keys"),
                 ("offset", "keys"), ("kind", "text"), ("value", "text"), ("outcome", "text"))
"""The pairs of factors whose every combination :func:`small_scope_cover` covers (a pairwise covering array, with
the query as one factor beside the result's values and its shape).  The factors of a case: ``query`` (window,
join or aggregate, mode: the 32 queries of the alphabet), ``window``, ``kind`` (pairs inner or left, count,
min), ``mode`` (watermarks or lateness), ``sequence`` (the kinds of its events in order: base, probe,
watermark), ``offset`` (the probe's time minus the base's, or where the watermark falls), ``keys`` (same key or
not), ``value`` (the classes of its result's values: a null, a count of 0 or more, a negative, zero or positive
value, an unmatched base, a pair, a late tuple), ``outcome`` (how many rows of each kind) and ``text`` (values
written as JSON integers or as floats)."""


def case_factors(case: Case) -> dict[str, object]:
    from oij.spec.model import StreamTuple, Watermark
    from oij.spec.profiles import CANONICAL
    from oij.testing._protocol import expected_output

    q = case.query
    kind = q.aggregate or f"pairs-{q.join}"
    mode = "watermarks" if q.lateness is None else "lateness"
    ev = [e for e in case.events if isinstance(e, (StreamTuple, Watermark))]
    seq = tuple("w" if isinstance(e, Watermark) else e.side[0] for e in ev)
    tuples = [e for e in ev if isinstance(e, StreamTuple)]
    first = next((i for i, e in enumerate(ev) if isinstance(e, StreamTuple) and e.side == "base"), None)
    offset: object = "-"
    if first is not None and len(ev) > 1:
        offset = ev[1 - first if first < 2 else 0].ts - ev[first].ts
    keys = "-" if len(tuples) < 2 else ("same" if tuples[0].key == tuples[1].key else "other")
    res = expected_output(case, CANONICAL)
    values: set[str] = set()
    for _, probe in res.pairs:
        values.add("null-row" if probe is None else "pair")
    for _, count, value in res.aggregates:
        if value is None:
            values.add("null")
        elif q.aggregate == "count":
            values.add("count-0" if count == 0 else "count")
        else:
            values.add("neg" if value < 0 else "zero" if value == 0 else "pos")
    if res.late:
        values.add("late")
    outcome = (sum(p is not None for _, p in res.pairs), sum(p is None for _, p in res.pairs), len(res.aggregates),
               len(res.late))
    return {"query": q, "window": (q.lower, q.upper), "kind": kind, "mode": mode, "sequence": seq, "offset": offset,
            "keys": keys, "value": tuple(sorted(values)), "outcome": outcome,
            "text": "int" if case.encoding.endswith("|int") else "float"}


def small_scope_cover(features: Iterable[str], k: int = 2) -> list[Case]:
    """The small-scope cases of up to ``k`` events (:func:`small_scope_cases`), each written with its values as
    JSON integers and as floats, thinned to a pairwise covering array over :data:`COVER_FACTORS`: greedily, each
    next case the one that covers the most combinations not yet covered (the earlier on a tie), until every
    combination some case has is covered.  Deterministic.  Up to 2 events under every feature of ``all``: 1,408
    cases (2,816 written both ways) give about 190, cheap enough for one process per case (the default of ``oij
    conform`` without ``--session``, which runs every case)."""
    from dataclasses import replace

    pool = [c for case in small_scope_cases(features, k) for c in (case, replace(case, encoding="full"))]
    items = []
    for c in pool:
        f = case_factors(c)
        items.append({(a, b, f[a], f[b]) for a, b in COVER_FACTORS})
    left: set[tuple[str, str, object, object]] = set().union(*items) if items else set()
    chosen: list[int] = []
    heap = [(-len(s), i) for i, s in enumerate(items)]  # -(combinations not yet covered) as last counted, index
    heapq.heapify(heap)
    while left:  # lazy greedy: a count only falls, so a case whose fresh count still heads the heap is the best
        _, best = heapq.heappop(heap)
        gain = len(items[best] & left)
        if heap and (-gain, best) > heap[0]:
            heapq.heappush(heap, (-gain, best))
            continue
        chosen.append(best)
        left -= items[best]
    return [pool[i] for i in sorted(chosen)]
