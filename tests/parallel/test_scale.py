"""Key-OIJ and Scale-OIJ (``key``, ``scale``) against the oracle, the hazard rule's negative controls, Alg. 3, failures.

Spawn start method; one pool of 4 replica processes serves the differential
tests.  After every test no segment of this process is left in /dev/shm
(rings, indexes, team maps), and after the module no process is alive.
Aggregates are compared *exactly* (``==``): both engines sum exactly.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oij.parallel.registry import get
from oij.parallel.runtime.emitter import chunks_from_events
from oij.parallel.runtime.pool import EngineFailure, Runtime
from oij.parallel.shared.aggr import Acc
from oij.parallel.shared.schedule import alg3, unbalancedness
from oij.parallel.shared.teamrun import TeamOptions, run_chunks
from oij.reference.oracle import run_events
from oij.spec.model import AGGREGATES, Event, Query

from oij.workloads import generate
from tests.procs import alive, opts, segments
from tests.strategies import workloads

pytestmark = pytest.mark.timeout(120)


# ---------------------------------------------------------------- differential (Hypothesis)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    w=workloads(max_events=60),
    pattern=st.sampled_from(["key", "scale"]),
    replicas=st.integers(1, 4),
    emitters=st.integers(1, 3),
    batch=st.integers(1, 16),
    epoch=st.integers(1, 40),
    schedule_every=st.integers(1, 30),
    partitions=st.integers(1, 8),
    incremental=st.booleans(),
)
def test_engines_equal_the_oracle(rt: Runtime, w: tuple[Query, list[Event]], pattern: str, replicas: int,
                                  emitters: int, batch: int, epoch: int, schedule_every: int, partitions: int,
                                  incremental: bool) -> None:
    q, events = w
    run = get(pattern)(q, events, opts(rt, replicas, batch, emitters, epoch=epoch, schedule_every=schedule_every,
                                        delta=0.0, partitions=partitions, incremental=incremental))
    assert run.results == run_events(events, q)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), preset=st.sampled_from(["teach-skew", "teach-late", "teach-watermarks"]),
       pattern=st.sampled_from(["key", "scale"]), agg=st.sampled_from([None, *AGGREGATES]),
       replicas=st.integers(1, 4), emitters=st.integers(1, 3), batch=st.integers(1, 32),
       incremental=st.booleans())
def test_generated_workloads_equal_the_oracle(rt: Runtime, seed: int, preset: str, pattern: str, agg: Any,
                                              replicas: int, emitters: int, batch: int, incremental: bool) -> None:
    q, it = generate(preset, 400, seed)
    q = replace(q, aggregate=agg)
    events = list(it)
    run = get(pattern)(q, events, opts(rt, replicas, batch, emitters, epoch=37, schedule_every=40, delta=0.0,
                                        partitions=4, incremental=incremental))
    assert run.results == run_events(events, q)


def test_rescheduling_happens_and_teams_grow(rt: Runtime) -> None:
    q, it = generate("teach-skew", 600, 11)
    events = list(it)
    run = get("scale")(q, events, opts(rt, 4, 4, 1, epoch=20, schedule_every=20, delta=0.0, partitions=8))
    assert run.results == run_events(events, q)
    m = run.metrics
    assert m["reschedules"] >= 1 and m["team_size_max"] >= 2
    sizes = [s["mean_team_size"] for s in m["schedules"]]
    assert sizes == sorted(sizes), "teams only grow"
    assert m["effectiveness"] in (None, 1.0)


# ---------------------------------------------------------------- incremental aggregation


@settings(max_examples=200, deadline=None)
@given(vals=st.lists(st.integers(-40, 40), max_size=40), starts=st.lists(st.integers(0, 40), min_size=1, max_size=12),
       lens=st.lists(st.integers(0, 9), min_size=12, max_size=12), kind=st.sampled_from(["count", "sum", "avg", "min",
                                                                                          "max"]))
def test_incremental_equals_recomputation(vals: list[int], starts: list[int], lens: list[int], kind: str) -> None:
    v = np.array(vals, dtype=np.float64) / 4
    n = len(v)
    s = np.sort(np.minimum(np.array(starts, dtype=np.int64), n))
    e = np.maximum.accumulate(np.minimum(s + np.array(lens[: len(s)], dtype=np.int64), n))
    a, b = Acc(len(s), kind), Acc(len(s), kind)
    a.add_run(v, s, e, True)
    b.add_run(v, s, e, False)
    assert a.n.tolist() == b.n.tolist() == (e - s).tolist()
    if kind in ("sum", "avg"):
        want = [float(sum(v[x:y].tolist())) for x, y in zip(s, e, strict=True)]
        assert a.sums().tolist() == b.sums().tolist() == want
    assert a.mn.tolist() == b.mn.tolist() and a.mx.tolist() == b.mx.tolist()
    if kind in ("min", "max"):
        assert a.work <= 2 * max(0, int(e[-1] - s[0]))


def test_incremental_aggregation_saves_work(rt: Runtime) -> None:
    q, it = generate("scale-oij-default", 3000, 3)
    q = replace(q, lower=-3000)
    events = list(it)
    want = run_events(events, q)
    got = {}
    for inc in (True, False):
        run = get("scale")(q, events, opts(rt, 2, 64, 1, incremental=inc))
        assert run.results == want
        got[inc] = run.metrics
    assert got[True]["agg_work"] < got[False]["agg_work"] == got[False]["agg_recompute_work"]
    # How much is saved depends on how base tuples group into rounds, which depends on timing
    # (0.49-0.7 seen here); the benchmark reports the figure, the test only that it is substantial.
    assert got[True]["agg_work_saved"] > 0.3


def _key_effectiveness(q: Query, events: list[Event], batch: int, *, advance: bool = True) -> float:
    """Key-OIJ's Eq. 1 effectiveness when its state sees ``batch`` tuples between watermark advances
    (W = max ts - lateness; none before End if not ``advance``), driven directly so that the figure
    does not depend on how a replica's polls happen to group batches."""
    from oij.parallel.runtime.ring import TUPLE
    from oij.parallel.shared.keyoij import KeyJoinState
    from oij.spec.model import StreamTuple

    ts_ = [e for e in events if isinstance(e, StreamTuple)]
    keys = {k: i for i, k in enumerate(sorted({t.key for t in ts_}, key=str))}
    js = KeyJoinState(q.lower, q.upper, emit_pairs=True, partial=False, kind=None)
    assert q.lateness is not None
    top = -(1 << 62)
    for i in range(0, len(ts_), batch):
        part = ts_[i: i + batch]
        recs = np.zeros(len(part), dtype=TUPLE)
        recs["id"] = [t.id for t in part]
        recs["ts"] = [t.ts for t in part]
        recs["key"] = [keys[t.key] for t in part]
        recs["side"] = [0 if t.side == "base" else 1 for t in part]
        js.process(recs)
        top = max(top, max(t.ts for t in part))
        if advance:
            js.advance(top - q.lateness)
    js.advance(0, force=True)
    return js.ratio_sum / js.ratio_n


def test_key_oij_effectiveness_falls_with_lateness(rt: Runtime) -> None:
    """Scale-OIJ Fig. 7: a larger lateness keeps more of each key's buffer, so a full scan finds a smaller
    share of it in the window.  The engine gives the oracle's results at both latenesses; the effect is
    measured on the state itself (negative control: with no advance until End, lateness changes nothing)."""
    eff, flat = [], []
    for late in (0, 2000):
        q, it = generate("scale-oij-default", 3000, 5)
        assert q.lateness is not None
        q = replace(q, lateness=q.lateness + late)
        events = list(it)
        run = get("key")(q, events, opts(rt, 2, 64, 1, epoch=256))
        assert run.results == run_events(events, q)
        eff.append(_key_effectiveness(q, events, 64))
        flat.append(_key_effectiveness(q, events, 64, advance=False))
    assert eff[1] < 0.8 * eff[0], eff
    assert flat[0] == flat[1], flat


# ---------------------------------------------------------------- the hazard rule's negative controls


def _hazard_case() -> tuple[Query, list[Event]]:
    q, it = generate("teach-skew", 600, 21)
    return q, list(it)


def test_team_rule_survives_a_lagging_member(rt: Runtime) -> None:
    q, events = _hazard_case()
    run = get("scale")(q, events, opts(rt, 3, 2, 1, epoch=12, schedule_every=12, delta=0.0, partitions=2,
                                        lag={1: 0.002, 2: 0.002}))
    assert run.results == run_events(events, q)
    assert run.metrics["hazard_waits"] > 0, "the rule never had to wait: the test would prove nothing"


@pytest.mark.parametrize("rule", ["self", "arrival"])
def test_disabling_the_rule_is_caught(rt: Runtime, rule: str) -> None:
    q, events = _hazard_case()
    want = run_events(events, q)
    caught = 0
    for seed in range(4):
        run = get("scale")(q, events, opts(rt, 3, 2, 1, epoch=12, schedule_every=12, delta=0.0, partitions=2,
                                            rule=rule, seed=seed, lag={1: 0.002, 2: 0.002}))
        if run.results != want:
            missing = set(want.pairs) - set(run.results.pairs)
            assert missing, "a broken rule loses pairs (probes never look for bases, so none is doubled)"
            caught += 1
            break
    assert caught, f"rule={rule} was never caught: the differential tests would prove nothing"


# ---------------------------------------------------------------- Alg. 3


def test_alg3_replicates_never_moves_and_balances() -> None:
    x = [100.0, 1, 1, 1, 50, 0, 0, 0]
    masks = [1, 2, 4, 8, 1, 2, 4, 8]
    new = alg3(x, masks, 4, 0.01)
    assert all(m & o == o for m, o in zip(new, masks, strict=True))
    assert unbalancedness(x, new, 4) < unbalancedness(x, masks, 4) - 0.5
    assert alg3(x, masks, 4, 10.0) == masks  # delta too large: nothing changes
    assert alg3([1.0] * 4, [1, 2, 4, 8], 4, 0.0) == [1, 2, 4, 8]  # balanced already


# ---------------------------------------------------------------- failures: fail fast, leave nothing


def _long() -> tuple[Query, list[Event]]:
    q, it = generate("teach-skew", 4000, 1)
    return q, list(it)


@pytest.mark.parametrize("pattern", ["key", "scale"])
def test_exception_in_a_joiner_fails_fast_and_cleans_up(pattern: str) -> None:
    q, events = _long()
    r = Runtime(2, "spawn")
    pids = r.pids()
    with pytest.raises(EngineFailure, match=r"replica 1 raised RuntimeError: injected failure after 3 batches"):
        run_chunks(pattern, q, chunks_from_events(events, 64, q=q), 0,
                   TeamOptions(pattern, replicas=2, batch=4, fail_after={1: 3}), r)
    assert r.closed and not any(alive(p) for p in pids)
    assert not {s for s in segments() if s.startswith(r.tag)}


def test_killed_joiner_fails_fast_and_cleans_up() -> None:
    q, events = _long()
    r = Runtime(3, "spawn")
    pids = r.pids()
    threading.Timer(0.5, os.kill, (pids[2], signal.SIGKILL)).start()
    t = time.monotonic()
    with pytest.raises(EngineFailure, match=r"replica 2 killed by SIGKILL"):
        run_chunks("scale", q, chunks_from_events(events, 64, q=q), 0,
                   TeamOptions("scale", replicas=3, batch=4, stall=(2,)), r)
    assert time.monotonic() - t < 10
    assert not any(alive(p) for p in pids)
    assert not {s for s in segments() if s.startswith(r.tag)}


def test_bad_options_are_rejected_without_leaking(rt: Runtime) -> None:
    q, events = _long()
    with pytest.raises(ValueError, match="replicas must be in"):
        get("scale")(q, events[:20], opts(rt, 9, 4, 1))
