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
