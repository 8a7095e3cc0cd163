"""The reference oracle against the executable specification, step by step, plus negative controls."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from oij.reference.oracle import Oracle, run_events
from oij.spec.batch import compute_batch
from oij.spec.model import End, Event, Query, StreamTuple, Watermark
from oij.spec.stream import compute_stream_result, on_time_tuples

from tests.budget import examples
from tests.lockstep import first_disagreement
from tests.strategies import event_lists, queries, workloads

SLOW = settings(max_examples=examples(120, 250), deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Most of these tests' CPU is Hypothesis drawing the workloads (about 0.01 CPU-seconds each), not the checks:
the default run draws 120 per test, ``OIJ_TESTS=full`` 250."""


@SLOW
@given(workloads())
def test_oracle_equals_spec_after_every_event(w: tuple[Query, list[Event]]) -> None:
    q, events = w
    assert first_disagreement(q, events) is None


@SLOW
@given(workloads(aggregate=True, max_events=60))
def test_incremental_aggregates_equal_recomputation(w: tuple[Query, list[Event]]) -> None:
    """Subtract-on-evict (exact) gives bit-for-bit the spec's recomputed aggregates."""
    q, events = w
    assert run_events(events, q).aggregates == compute_stream_result(events, q).aggregates


@SLOW
@given(workloads(max_events=60))
def test_purge_enabled_equals_purge_disabled(w: tuple[Query, list[Event]]) -> None:
    q, events = w
    with_purge, without = Oracle(q), Oracle(q, purge=False)
    for e in events:
        with_purge.on_event(e)
        without.on_event(e)
        assert with_purge.results() == without.results()
    assert with_purge.stored == 0


@SLOW
@given(workloads(max_events=60))
def test_complete_output_is_batch_over_on_time_tuples(w: tuple[Query, list[Event]]) -> None:
    q, events = w
    res = run_events(events, q)
    batch = compute_batch(on_time_tuples(events, q), q)
    assert res.pairs == batch.pairs and res.aggregates == batch.aggregates


def _max_disorder(events: list[Event]) -> int:
    """max over arrival positions i < j of ts_i - ts_j (0 for an ordered stream)."""
    worst, high = 0, None
    for e in events:
        if isinstance(e, StreamTuple):
            if high is not None:
                worst = max(worst, high - e.ts)
            high = e.ts if high is None else max(high, e.ts)
    return worst


@SLOW
@given(workloads(lateness=True, max_events=60), st.integers(0, 5))
def test_enough_lateness_means_nothing_late_and_batch_result(w: tuple[Query, list[Event]], extra: int) -> None:
    q, events = w
    q = replace(q, lateness=_max_disorder(events) + extra)
    res = run_events(events, q)
    assert res.late == []
    tuples = [e for e in events if isinstance(e, StreamTuple)]
    batch = compute_batch(tuples, q)
    assert res.pairs == batch.pairs and res.aggregates == batch.aggregates


@settings(max_examples=100, deadline=None)
@given(workloads(lateness=True, max_events=40))
def test_too_little_lateness_is_seen(w: tuple[Query, list[Event]]) -> None:
    """The converse: with l below the disorder, the tuple that shows the disorder is late."""
    q, events = w
    d = _max_disorder(events)
    if d == 0:
        return
    q = replace(q, lateness=d - 1)
    assert run_events(events, q).late != []


def test_idle_key_state_is_dropped_by_watermarks_alone() -> None:
    q = Query(lower=-10, upper=0)
    o = Oracle(q)
    o.on_tuple(StreamTuple("probe", 1, 100, "idle"))
    o.on_tuple(StreamTuple("base", 2, 105, "idle"))
    assert o.stored == 2
    o.on_watermark(Watermark(106))  # base 2 can still match a probe at ts 105; probe 1 a base at <= 110
    assert o.retained() == {("probe", 1)}
    o.on_watermark(Watermark(111))
    assert o.stored == 0 and o.keys == {}
    o._check()


def test_left_join_emits_unmatched_row_only_when_final() -> None:
    q = Query(lower=0, upper=5, join="left")
    o = Oracle(q)
    o.on_tuple(StreamTuple("base", 1, 10, "k"))
    o.on_watermark(Watermark(15))  # a probe at ts 15 could still match
    assert o.pairs == []
    o.on_watermark(Watermark(16))
    assert o.pairs == [(1, None)]
    o.on_end()
    assert o.pairs == [(1, None)]


def test_exact_sum_survives_cancellation() -> None:
    """1e16 + 1 - 1e16 is 1 exactly, however the window slides."""
    q = Query(lower=-2, upper=0, aggregate="sum")
    ev: list[Event] = [
        StreamTuple("probe", 1, 0, "k", 1e16),
        StreamTuple("probe", 2, 1, "k", 1.0),
        StreamTuple("probe", 3, 2, "k", -1e16),
        StreamTuple("base", 4, 2, "k"),  # window [0, 2]: exact sum 1.0
        StreamTuple("base", 5, 3, "k"),  # window [1, 3]: 1 - 1e16
        End(),
    ]
    assert run_events(ev, q).aggregates == [(4, 3, 1.0), (5, 2, 1.0 - 1e16)]


def test_keys_one_and_string_one_differ() -> None:
    q = Query(lower=0, upper=0)
    ev: list[Event] = [StreamTuple("base", 1, 0, 1), StreamTuple("probe", 2, 0, "1"), End()]
    assert run_events(ev, q).pairs == []


# ---------------------------------------------------------------- negative controls
# Each mutant is a plausible bug.  The lockstep check must find a counterexample
# for every one of them, or the check proves nothing.


class SparkLateness(Oracle):
    """Calls a tuple late when ts <= W (Spark's rule) instead of ts < W."""

    def on_tuple(self, t: StreamTuple) -> None:
        if t.ts == self.w:
            self.late.append(t.id)
            return
        super().on_tuple(t)


class MaxOverChannels(Oracle):
    """Combines channels with max instead of min."""

    def on_watermark(self, wm: Watermark) -> None:
        self.channel_max[wm.channel] = max(self.channel_max[wm.channel], wm.ts)
        self._advance(max(self.channel_max))

    def _check(self) -> None:
        pass


class IgnoresExclusiveUpper(Oracle):
    """Treats an exclusive upper bound as inclusive."""

    def __init__(self, q: Query, **kw: Any) -> None:
        super().__init__(q, **kw)
        self.hi_off = q.upper


class NeverPurges(Oracle):
    """Correct output, but keeps state forever."""

    def __init__(self, q: Query, **kw: Any) -> None:
        super().__init__(q, purge=False)


class PurgesOnlyOnArrival(Oracle):
    """Purges a key only when a tuple of that key arrives (idle keys keep their state)."""

    def _advance(self, w: int) -> None:
        if w > self.w:
            self.w = w
            for ks in list(self.keys.values()):
                if ks.bts and ks.bts[0] + self.hi_off < w:
                    self._process(ks)

    def _check(self) -> None:
        pass


class FloatSubtractOnEvict(Oracle):
    """Keeps the running sum in floats: drifts after cancellation."""

    @staticmethod
    def _scaled(v: float) -> Any:
        return v

    @staticmethod
    def _to_float(total: Any, count: int = 1) -> float:
        return float(total) / count + 0.0

    def _check(self) -> None:
        pass


class EmitsAggregateEarly(Oracle):
    """Finalizes a base once W >= hi (one tick early)."""

    def _advance(self, w: int) -> None:
        super()._advance(w + 1 if w > self.w else w)

    def _check(self) -> None:
        pass


MUTANTS = [
    (SparkLateness, {}),
    (MaxOverChannels, {}),
    (IgnoresExclusiveUpper, {}),
    (NeverPurges, {}),
    (PurgesOnlyOnArrival, {}),
    # the drift needs only aggregates over cancelling values: lateness mode (W from the tuples themselves, no
    # watermark events to draw) finds it in 318 draws, watermarks or lateness in 436
    (FloatSubtractOnEvict, {"aggregate": True, "lateness": True, "values": st.sampled_from([1e16, -1e16, 1.0])}),
    (EmitsAggregateEarly, {}),
]


@pytest.mark.parametrize(("mutant", "kw"), MUTANTS, ids=[m.__name__ for m, _ in MUTANTS])
def test_negative_control_is_caught(mutant: type[Oracle], kw: dict[str, Any]) -> None:
    """The first workload on which the mutant and the oracle disagree, drawn derandomized: the same search every
    run (FloatSubtractOnEvict, the rarest, needs 318 draws, 2.5 s; a random search needed 68 to 2,277 of them)."""
    example = find(
        workloads(**kw),
        lambda w: first_disagreement(w[0], w[1], mutant) is not None,
        settings=settings(max_examples=3000, deadline=None, database=None, derandomize=True, phases=[Phase.generate]),
    )
    assert first_disagreement(example[0], example[1], mutant) is not None


@settings(max_examples=50, deadline=None)
@given(queries(), st.data())
def test_events_strategy_is_valid_input(q: Query, data: st.DataObject) -> None:
    from oij.spec.model import check_query, check_tuple, check_watermark

    check_query(q)
    for e in data.draw(event_lists(q)):
        if isinstance(e, StreamTuple):
            check_tuple(e, q)
        elif isinstance(e, Watermark):
            check_watermark(e, q)
