"""The profiles' fast operator (:mod:`oij.reference.profiles`) equals the specification's simulation
(:func:`oij.spec.profiles.compute_profile_result`) under every named profile and random combinations of the
parameters, with its invariants checked after every event; subtle mutants of it are each caught by the same
generator (the comparison can fail), and a corrupted state by ``_check``."""

from __future__ import annotations

import heapq
from dataclasses import fields
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oij.reference.profiles import ProfileOracle, batch_result, compute_profile_result
from oij.spec import profiles as spec
from oij.spec.batch import compute_batch
from oij.spec.model import BASE, PROBE, End, Event, Query, Side, StreamTuple, Watermark
from oij.spec.profiles import CANONICAL, PROFILES, Profile, custom_profile

from tests.budget import examples
from tests.strategies import workloads

PARAMS: dict[str, list[Any]] = {
    "late_rule": ["lt", "le"],
    "channel_combine": ["min", "max"],
    "side_combine": ["global", "min", "own"],
    "lateness_shift": [0, 1, 3],
    "lag": [0, 1, 2],
    "late_tuples": ["report", "drop", "join", "ignore", "revise"],
    "purge": ["exact", "early", "flink-timers", "lazy-own"],
    "end_flush": [True, False],
    "retract_on_purge": [False, True],
}
"""Every parameter of a :class:`~oij.spec.profiles.Profile` and the values drawn for it."""

profiles = st.one_of(st.sampled_from(list(PROFILES.values())),
                     st.fixed_dictionaries({k: st.sampled_from(v) for k, v in PARAMS.items()})
                     .map(lambda kw: custom_profile(**kw)))


def stepped(events: list[Event], q: Query, p: Profile, cls: type[ProfileOracle] = ProfileOracle) -> Any:
    """:func:`compute_profile_result` step by step, with ``_check`` after every event."""
    o = cls(q, p)
    for j, e in enumerate(events, 1):
        over = o.step(e, j)
        o._check()
        if over:
            break
    return o.result()


def test_the_parameters_drawn_are_every_parameter() -> None:
    """A parameter added to Profile is drawn here too (or this fails)."""
    assert set(PARAMS) == {f.name for f in fields(Profile)} - {"name", "system", "summary"}


@settings(max_examples=examples(300, 3000), deadline=None)
@given(workloads(max_events=30), profiles)
def test_the_fast_operator_equals_the_specification(w: tuple[Query, list[Event]], p: Profile) -> None:
    q, events = w
    want = spec.compute_profile_result(events, q, p)
    assert stepped(events, q, p) == want
    assert compute_profile_result(events[:-1], q, p) == spec.compute_profile_result(events[:-1], q, p), "no End"


@settings(max_examples=examples(100, 1000), deadline=None)
@given(workloads(max_events=30))
def test_the_batch_join_equals_the_specification(w: tuple[Query, list[Event]]) -> None:
    q, events = w
    tuples = [e for e in events if not isinstance(e, End | Watermark)]
    assert batch_result(tuples, q) == compute_batch(tuples, q).canonical()


# ----------------------------------------------------------------------------------------- negative controls
class EvictsAtTheEdge(ProfileOracle):
    """Drops a tuple when W reaches its edge under ``exact`` too (one tick early)."""

    def evict(self, j: int) -> None:
        if not self.evicts:
            return
        w = self.watermark_at(j - self.p.lag)
        while self.heap and w >= self.heap[0][0]:
            _, s = heapq.heappop(self.heap)
            if s in self.stored:
                x = self.remove(s)
                if x.side == BASE:
                    self.emit_final(x)


class UpperBoundOpen(ProfileOracle):
    """A base reads its probes' range one tick short of its upper bound (a probe reading bases is right)."""

    def probe(self, e: Any) -> None:
        if e.side == BASE:
            self.hi -= 1
            try:
                super().probe(e)
            finally:
                self.hi += 1
        else:
            super().probe(e)


class ForgetsItself(ProfileOracle):
    """Under lazy-own, the arriving tuple may forget itself too."""

    def on_tuple(self, e: Any, j: int) -> None:
        p = self.p
        w_before = self.watermark_before(e.side, j)
        super().on_tuple(e, j)
        late = e.ts <= w_before if p.late_rule == "le" else e.ts < w_before
        if p.purge == "lazy-own" and not late and j in self.stored and e.ts <= w_before:
            self.remove(j)
            if e.side == BASE:
                self.emit_final(e)


class IgnoresTheLag(ProfileOracle):
    """Judges arrivals against the newest W whatever the profile's lag (evicts with the lag, as it should)."""

    def watermark_before(self, side: str, j: int) -> int:
        if self.p.side_combine != "own" or self.q.lateness is None:
            return self.watermark_at(j - 1)
        return super().watermark_before(side, j)


def _t(side: str, i: int, ts: int, key: Any = "k", value: float = 1.0) -> StreamTuple:
    return StreamTuple(cast("Side", side), i, ts, key, value)


MUTANTS: list[tuple[type[ProfileOracle], Query, Profile, list[Event]]] = [
    # a base at 5 with a window [5, 5] and no lateness: W = 5 after it, which the edge 5 does not yet pass; a
    # probe at 5 is on time (5 < 5 is false) and meets it, unless it was dropped when W reached the edge
    (EvictsAtTheEdge, Query(lower=0, upper=0, lateness=0), CANONICAL, [_t(BASE, 1, 5), _t(PROBE, 2, 5), End()]),
    # a probe at 5 stored, then a base at 5 with the window [3, 5]: it must read up to 5
    (UpperBoundOpen, Query(lower=-2, upper=0, lateness=10), CANONICAL, [_t(PROBE, 1, 5), _t(BASE, 2, 5), End()]),
    # lazy-own, late iff ts < W: the second base at 5 is on time against its input's W = 5 and forgets the
    # first (ts <= 5), not itself; the probe at 5 meets it
    (ForgetsItself, Query(lower=0, upper=0, lateness=0),
     custom_profile(purge="lazy-own", side_combine="own", late_tuples="drop"),
     [_t(BASE, 1, 5), _t(BASE, 2, 5), _t(PROBE, 3, 5), End()]),
    # lag 1: the base at 5, the second event, is judged against W_0 = -inf, not W_1 = 10
    (IgnoresTheLag, Query(lower=-1, upper=1, lateness=0), PROFILES["micro-batch"],
     [_t(PROBE, 1, 10), _t(BASE, 2, 5), _t(PROBE, 3, 6), End()]),
]


@pytest.mark.parametrize(("mutant", "q", "p", "events"), MUTANTS, ids=[m.__name__ for m, *_ in MUTANTS])
def test_each_mutant_is_caught(mutant: type[ProfileOracle], q: Query, p: Profile, events: list[Event]) -> None:
    """Each mutant differs from the specification on a stream of three or four events, where the operator does
    not: the comparison above fails on an operator that drops one tick early, reads a window one tick short,
    forgets the tuple that arrives or ignores the lag."""
    want = spec.compute_profile_result(events, q, p)
    assert stepped(events, q, p) == want
    assert stepped(events, q, p, mutant) != want


def test_the_witnesses_are_valid_streams() -> None:
    """Every witness is a valid input (the checks the commands make raise on an invalid one)."""
    from oij.spec.model import check_query, check_tuple

    for _, q, _, events in MUTANTS:
        assert check_query(q) == q
        assert all(check_tuple(e, q) == e for e in events if isinstance(e, StreamTuple))


def test_check_fails_on_a_corrupted_state() -> None:
    """``_check`` finds a stored tuple missing from its key's index, and one missing from the heap."""
    q = Query(lower=-2, upper=2, lateness=3)
    events = workloads_fixed()
    o = ProfileOracle(q, CANONICAL)
    for j, e in enumerate(events, 1):
        assert not o.step(e, j)
    o._check()
    seq = next(iter(o.stored))
    t = o.stored[seq]
    o.by_key[(type(t.key), t.key)][t.side].remove((t.ts, seq))
    with pytest.raises(AssertionError):
        o._check()
    o.by_key[(type(t.key), t.key)][t.side].add((t.ts, seq))
    o._check()
    o.heap = [x for x in o.heap if x[1] != seq]
    with pytest.raises(AssertionError):
        o._check()


def workloads_fixed() -> list[Any]:
    from oij.spec.model import StreamTuple

    return [StreamTuple(BASE, 1, 10, "k", 1.0), StreamTuple("probe", 2, 11, "k", 2.0),
            StreamTuple(BASE, 3, 12, 1, 3.0)]


def test_a_window_range_reads_no_further_than_its_bounds() -> None:
    """Bounds and keys at their edges: exclusive bounds, an empty window, 1 and "1" as different keys."""
    from oij.spec.model import StreamTuple

    for lower, upper, li, ui in [(-2, 2, True, True), (-2, 2, False, False), (0, 0, True, False), (3, 5, True, True)]:
        q = Query(lower=lower, upper=upper, lower_inclusive=li, upper_inclusive=ui, lateness=100)
        evs: list[Event] = [StreamTuple(BASE, 1, 0, 1, 1.0), StreamTuple(BASE, 2, 0, "1", 1.0)]
        evs += [StreamTuple("probe", 10 + i, t, k, 1.0) for i, (t, k) in enumerate(
            [(t, k) for t in range(-4, 7) for k in (1, "1")])]
        evs.append(End())
        for p in PROFILES.values():
            assert compute_profile_result(evs, q, p) == spec.compute_profile_result(evs, q, p), (q, p.name)
