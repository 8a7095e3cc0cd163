"""One state machine drives the spec and the oracle in lockstep, then every registered engine on the same stream.

Hypothesis picks the next event (a base or probe tuple near the clock, a
watermark on some channel, a late tuple at exactly W); after every event the
oracle's invariants, its emitted output and its retained state are compared
with the specification.  When the stream ends, every engine in
:mod:`oij.parallel.registry` runs on the whole stream and must emit the
oracle's result (aggregates within 1e-9 relative, since engines need not sum
exactly).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from oij.parallel.registry import EngineOptions, engines
from oij.parallel.runtime.pool import Runtime
from oij.reference.oracle import Oracle
from oij.spec.batch import Results
from oij.spec.model import BASE, PROBE, End, Event, Query, StreamTuple, Watermark
from oij.spec.purge import compute_needed
from oij.spec.stream import compute_emitted

from tests.budget import examples
from tests.strategies import FIELD_VALUES, KEYS, VALUES, queries

_SHARED: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def shared_runtime(rt: Runtime) -> Iterator[None]:
    """One pool of replica processes for every engine run of this module (spawning per example is too slow)."""
    _SHARED["runtime"] = rt
    yield
    _SHARED.clear()


def same_results(got: Results, want: Results) -> bool:
    """Equal multisets; aggregate values within 1e-9 relative (None only equals None)."""
    g, w = got.canonical(), want.canonical()
    if g.pairs != w.pairs or g.late != w.late or len(g.aggregates) != len(w.aggregates):
        return False
    for (gb, gn, gv), (wb, wn, wv) in zip(g.aggregates, w.aggregates, strict=True):
        if gb != wb or gn != wn or (gv is None) != (wv is None):
            return False
        if gv is not None and wv is not None and not math.isclose(gv, wv, rel_tol=1e-9, abs_tol=1e-300):
            return False
    return True


class Lockstep(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[Event] = []
        self.clock = 0
        self.next_id = 0
        self.ended = False

    @initialize(q=queries())
    def start(self, q: Query) -> None:
        self.q = q
        self.oracle = Oracle(q)

    def _apply(self, e: Event) -> None:
        self.events.append(e)
        self.oracle.on_event(e)

    @precondition(lambda self: not self.ended)
    @rule(side=st.sampled_from([BASE, PROBE]), back=st.integers(0, 10), step=st.integers(0, 3),
          key=st.sampled_from(KEYS), value=VALUES, channel=st.integers(0, 2), x=st.sampled_from(FIELD_VALUES),
          y=st.sampled_from(FIELD_VALUES))
    def tuple_(self, side: str, back: int, step: int, key: int | str, value: float, channel: int, x: float,
               y: float) -> None:
        self.clock += step
        self.next_id += 1
        self._apply(StreamTuple(BASE if side == BASE else PROBE, self.next_id, self.clock - back, key, value,
                                channel % self.q.channels, (("x", x), ("y", y))))

    @precondition(lambda self: not self.ended and self.q.lateness is None)
    @rule(lag=st.integers(-2, 12), channel=st.integers(0, 2))
    def watermark(self, lag: int, channel: int) -> None:
        self._apply(Watermark(self.clock - lag, channel % self.q.channels))

    @precondition(lambda self: not self.ended and -(1 << 62) < self.oracle.w < (1 << 62))
    @rule(side=st.sampled_from([BASE, PROBE]), key=st.sampled_from(KEYS))
    def tuple_at_exactly_w(self, side: str, key: int | str) -> None:
        self.next_id += 1
        self._apply(StreamTuple(BASE if side == BASE else PROBE, self.next_id, self.oracle.w, key,
                                fields=(("x", 1.0), ("y", 0.0))))

    @precondition(lambda self: not self.ended and len(self.events) >= 3)
    @rule()
    def end(self) -> None:
        self._apply(End())
        self.ended = True
        want = self.oracle.results()
        for name, engine in engines().items():
            run = engine(self.q, self.events, EngineOptions(replicas=2, batch=2, runtime=_SHARED.get("runtime")))
            assert same_results(run.results, want), f"engine {name} disagrees with the oracle"

    @precondition(lambda self: self.ended)
    @rule()
    def nothing_is_kept_after_end(self) -> None:
        assert self.oracle.stored == 0 and not self.oracle.keys and not self.oracle.heap

    @invariant()
    def agrees_with_spec(self) -> None:
        if not hasattr(self, "oracle"):
            return
        self.oracle._check()
        assert self.oracle.results() == compute_emitted(self.events, self.q)
        assert self.oracle.retained() == compute_needed(self.events, self.q)


Lockstep.TestCase.settings = settings(
    max_examples=examples(75, 150), stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestLockstep = Lockstep.TestCase
