"""Issue 65: the rule edges a generated case hits (``oij conform``'s "rule edges hit") are computed per key in
O(n log n), not over every base-probe pair.

The representation edges of a key's pairs (a window across 2^31, 2^32 or 2^53; a probe inside a base's window
only modulo 2^31 or 2^32; different int keys equal in 32 bits or through a double; string keys equal folded,
normalized or trimmed) are compared with the pairwise definition below (the kit's code before issue 65) on
generated cases and on cases made to sit on each edge, both sides of it; the negative control: the comparison
tells a one-tick-off mutant of the definition apart.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, seed, settings
from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import BASE, PROBE, End, Query, Side, StreamTuple

from oij.testing import Case
from oij.testing._case import REPR_EDGES, text_twins
from oij.testing._cases import cases
from oij.testing._edges import EDGES, alike_ints, compute_edges, numeric_edges

PAIR_EDGES = EDGES[15], EDGES[16], EDGES[18], EDGES[19]

Within = Callable[[int, int, int], bool]


def _within(lo: int, d: int, hi: int) -> bool:
    return lo <= d <= hi


def pairwise(case: Case, within: Within = _within) -> set[str]:
    """The edges of :data:`PAIR_EDGES` that ``case`` hits, by looking at every base-probe pair (``within``: the
    window test, replaced by the negative control)."""
    q = case.query
    lo, hi = lower_offset(q), upper_offset(q)
    hits: set[str] = set()
    bases = [t for t in case.tuples if t.side == BASE]
    probes = [t for t in case.tuples if t.side != BASE]
    for a in bases:
        for b in probes:
            if type(a.key) is type(b.key) and a.key == b.key:
                d = b.ts - a.ts
                if any((a.ts < s * e <= b.ts or b.ts < s * e <= a.ts) for e in REPR_EDGES[:3] for s in (1, -1)):
                    hits.add(EDGES[15])
                if not within(lo, d, hi) and any(within(lo, d - m, hi)
                                                 for m in (1 << 32, -(1 << 32), 1 << 31, -(1 << 31))):
                    hits.add(EDGES[16])
            elif isinstance(a.key, int) and isinstance(b.key, int) and alike_ints(a.key, b.key):
                hits.add(EDGES[18])
            elif (isinstance(a.key, str) and isinstance(b.key, str) and text_twins(a.key, b.key)) or (
                    isinstance(a.key, str) != isinstance(b.key, str)
                    and numeric_edges(a.key) == numeric_edges(b.key) is not None):
                hits.add(EDGES[19])
    return hits


def made(lower: int, upper: int, *tuples: tuple[Side, int, int | str]) -> Case:
    """A case of ``(side, ts, key)`` tuples in that order (no watermarks), window ``[lower, upper]``."""
    q = Query(lower=lower, upper=upper)
    events = tuple(StreamTuple(side=side, id=i, ts=ts, key=key, value=1.0) for i, (side, ts, key) in
                   enumerate(tuples, 1))
    return Case(q, (*events, End()))


W31, W32, W53 = 1 << 31, 1 << 32, 1 << 53
EDGE_CASES = [  # each on an edge or one tick beside it
    made(0, 10, (BASE, W31 - 1, 1), (PROBE, W31, 1)),  # across 2^31
    made(0, 10, (BASE, W31, 1), (PROBE, W31 + 5, 1)),  # not across (a.ts == 2^31)
    made(0, 10, (PROBE, -W53, 1), (BASE, -W53 + 1, 1)),  # across -2^53, the probe first
    made(0, 10, (BASE, 0, 1), (PROBE, W32 + 10, 1)),  # in the window modulo 2^32: d - 2^32 == hi
    made(0, 10, (BASE, 0, 1), (PROBE, W32 + 11, 1)),  # one past it
    made(0, 10, (BASE, 0, 1), (PROBE, -W31, 1)),  # d + 2^31 == lo
    made(0, 10, (BASE, 0, 1), (PROBE, -W31 - 1, 1)),  # one before it
    made(-5, 5, (BASE, 0, 1), (PROBE, W31 - 5, 1), (PROBE, 3, 1)),  # one probe in the window, one only wrapped
    made(-W31, W31, (BASE, 0, 1), (PROBE, W31, 1)),  # in the window itself (so not the wrap edge)
    made(0, 10, (BASE, 0, 1), (PROBE, 0, 1 + W32)),  # int keys equal in 32 bits
    made(0, 10, (BASE, 0, W53), (PROBE, 0, W53 + 1)),  # equal through a double
    made(0, 10, (BASE, 0, 7), (PROBE, 0, 8)),  # different, not alike
    made(0, 10, (BASE, 0, "Straße"), (PROBE, 0, "STRASSE")),  # equal folded
    made(0, 10, (BASE, 0, "7"), (PROBE, 0, 7)),  # a numeric string and its number
    made(0, 10, (BASE, 0, "ab"), (PROBE, 0, "abc")),  # not twins
    made(0, 10, (BASE, 0, 1), (BASE, W31 + 1, 2), (PROBE, W31 + 3, 1), (PROBE, 1, 2)),  # the pair split by keys
]


def _pair_edges(case: Case) -> set[str]:
    return compute_edges(case) & set(PAIR_EDGES)


@pytest.mark.parametrize("case", EDGE_CASES, ids=range(len(EDGE_CASES)))
def test_a_case_on_or_beside_an_edge_hits_it_as_every_pair_says(case: Case) -> None:
    assert _pair_edges(case) == pairwise(case)


def test_the_made_cases_hit_each_edge_and_miss_it() -> None:
    for edge in PAIR_EDGES:  # both answers occur: the comparison above is not vacuous
        assert {edge in pairwise(c) for c in EDGE_CASES} == {True, False}, edge


def test_generated_cases_hit_the_edges_as_every_pair_says() -> None:
    seen: set[str] = set()

    @seed(65)
    @settings(max_examples=400, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases())
    def check(case: Case) -> None:
        want = pairwise(case)
        assert _pair_edges(case) == want, case.to_jsonl()
        seen.update(want)

    check()
    assert EDGES[15] in seen and EDGES[16] in seen, seen


def test_negative_control_a_window_one_tick_short_is_told_apart() -> None:
    def short(lo: int, d: int, hi: int) -> bool:
        return lo <= d < hi

    assert any(pairwise(c, short) != _pair_edges(c) for c in EDGE_CASES)
