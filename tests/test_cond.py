"""PPOIJ's joining condition: the exact comparison, the oracle and every engine against the spec, bad input."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parallel.registry import get
from parallel.runtime.driver import Runtime
from reference.oracle import run_events
from spec.model import Event, Query

from .procs import opts
from .strategies import EXACT_VALUES_COND, workloads

pytestmark = pytest.mark.timeout(300)

PATTERNS = ["kp", "dp", "hp", "key", "scale"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(w=workloads(max_events=60, values=EXACT_VALUES_COND, cond=True), pattern=st.sampled_from(PATTERNS),
       replicas=st.integers(1, 4), emitters=st.integers(1, 3), batch=st.integers(1, 32))
def test_every_engine_equals_the_oracle_with_a_cond(rt: Runtime, w: tuple[Query, list[Event]], pattern: str,
                                                    replicas: int, emitters: int, batch: int) -> None:
    q, events = w
    extra: dict[str, Any] = {"epoch": 16, "theta": 1.0} if pattern in ("kp", "dp", "hp") else {}
    run = get(pattern)(q, events, opts(rt, replicas, batch, emitters, **extra))
    assert run.results == run_events(events, q)
