"""The oracle's checkpoints: :func:`oij.reference.checkpoint.snapshot` and :func:`oij.reference.checkpoint.restore`.

Restoring at any event, or at every event, changes nothing: the rows, in their order, are those of a run
without a restore, and the restored operator passes ``_check()``.  A negative control shows the comparison
can fail: a restore that loses the pending bases (a fresh operator whose W is set) differs.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from oij.reference.checkpoint import restore, snapshot
from oij.reference.oracle import Oracle
from oij.spec.model import End, Event, Query, StreamTuple, Watermark

from tests.strategies import workloads


def _rows(o: Oracle) -> tuple[list[object], list[object], list[int]]:
    return list(o.pairs), list(o.aggregates), list(o.late)


def _run(q: Query, events: list[Event], restore_at: set[int]) -> tuple[list[object], list[object], list[int]]:
    o = Oracle(q)
    for i, e in enumerate(events):
        if i in restore_at:
            o = restore(snapshot(o))
            o._check()
        o.on_event(e)
    return _rows(o)


@settings(max_examples=150, deadline=None)
@given(workloads(max_events=30))
def test_restore_at_every_event_equals_no_restore(w: tuple[Query, list[Event]]) -> None:
    q, events = w
    assert _run(q, events, set(range(len(events)))) == _run(q, events, set())


@settings(max_examples=100, deadline=None)
@given(workloads(max_events=30, cond=True), st.data())
def test_restore_at_one_event_equals_no_restore_with_cond(w: tuple[Query, list[Event]], data: st.DataObject) -> None:
    q, events = w
    at = data.draw(st.integers(0, len(events) - 1))
    assert _run(q, events, {at}) == _run(q, events, set())


def test_snapshot_changes_nothing_and_restore_is_independent() -> None:
    o = Oracle(Query(-5, 0, aggregate="sum"))
    o.on_tuple(StreamTuple("probe", 1, 10, "k", 2.0))
    o.on_tuple(StreamTuple("base", 2, 12, "k"))
    before = snapshot(o)
    r = restore(before)
    assert snapshot(o) == before  # taking a snapshot changes nothing
    r.on_watermark(Watermark(20))  # the restored copy moves on alone
    assert r.aggregates and not o.aggregates
    o._check()
    r._check()


def test_negative_control_a_restore_that_loses_state_differs() -> None:
    q = Query(-5, 0)
    events: list[Event] = [StreamTuple("base", 1, 10, "k"), Watermark(6), StreamTuple("probe", 2, 9, "k"), End()]
    o = Oracle(q)
    o.on_event(events[0])
    lossy = Oracle(q)  # "restored" without the stored base
    lossy.w, lossy.channel_max = o.w, list(o.channel_max)
    for e in events[1:]:
        lossy.on_event(e)
    assert _rows(lossy) != _run(q, events, {1})
    assert _run(q, events, {1}) == ([(1, 2)], [], [])


def test_restore_refuses_a_snapshot_of_something_else() -> None:
    import pickle

    import pytest

    with pytest.raises(ValueError, match="not an oracle snapshot"):
        restore(pickle.dumps({"w": 1}))
    with pytest.raises(ValueError, match="not an oracle snapshot"):
        restore(b"garbage")
