"""The parallel engines (KP/DP/HP on processes + shared memory) against the oracle and the ordering rules.

Every test runs under the spawn start method.  One pool of 4 replica
processes (module fixture) serves the differential tests, so the spawn cost
is paid once; failure tests use their own small runtimes.  After every test
no segment of this process is left in /dev/shm, and after the module no
replica process is alive.
"""

from __future__ import annotations

import _thread
import os
import signal
import threading
import time
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oij.parallel.patterns.entry import run_chunks
from oij.parallel.patterns.hp import assign, is_balanced, model_loads
from oij.parallel.registry import EngineOptions, get
from oij.parallel.runtime.emitter import Chunk, chunks_from_events
from oij.parallel.runtime.pool import EngineFailure, JobOptions, Runtime
from oij.reference.oracle import run_events
from oij.spec import ordering
from oij.spec.batch import Results
from oij.spec.model import AGGREGATES, End, Event, Query, StreamTuple
from oij.spec.stream import on_time_tuples

from oij.workloads import generate
from tests.procs import alive, opts, segments
from tests.strategies import workloads

pytestmark = pytest.mark.timeout(120)

# ---------------------------------------------------------------- differential (Hypothesis)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    w=workloads(max_events=60),
    pattern=st.sampled_from(["kp", "dp", "hp"]),
    replicas=st.integers(1, 4),
    emitters=st.integers(1, 3),
    batch=st.integers(1, 32),
    epoch=st.integers(1, 40),
    calibration=st.integers(0, 30),
    sync_map=st.booleans(),
)
def test_engines_equal_the_oracle(rt: Runtime, w: tuple[Query, list[Event]], pattern: str, replicas: int,
                                  emitters: int, batch: int, epoch: int, calibration: int, sync_map: bool) -> None:
    q, events = w
    expected = run_events(events, q)
    run = get(pattern)(q, events, opts(rt, replicas, batch, emitters, epoch=epoch, calibration=calibration,
                                        sync_map=sync_map, theta=1.0))
    assert run.results == expected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), preset=st.sampled_from(["teach-skew", "teach-late", "teach-watermarks"]),
       pattern=st.sampled_from(["kp", "dp", "hp"]), agg=st.sampled_from([None, *AGGREGATES]),
       replicas=st.integers(1, 4), emitters=st.integers(1, 3), batch=st.integers(1, 32))
def test_generated_workloads_equal_the_oracle(rt: Runtime, seed: int, preset: str, pattern: str, agg: Any,
                                              replicas: int, emitters: int, batch: int) -> None:
    q, it = generate(preset, 300, seed)
    q = replace(q, aggregate=agg)
    events = list(it)
    run = get(pattern)(q, events, opts(rt, replicas, batch, emitters, epoch=37, calibration=40, theta=1.0))
    assert run.results == run_events(events, q)


# ---------------------------------------------------------------- ordering rules on traces


def _traces(metrics: dict[str, Any]) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    orders: dict[int, list[int]] = {}
    stored: dict[int, list[int]] = {}
    for r, tr in enumerate(metrics["traces"]):
        orders[r] = [x for ids, _ in tr for x in ids]
        stored[r] = [x for _, st_ in tr for x in st_]
    return orders, stored


def _same_key_pairs(events: list[Event], q: Query) -> list[tuple[int, int]]:
    ts = on_time_tuples(events, q)
    return [(a.id, b.id) for a in ts if a.side == "base" for b in ts
            if b.side == "probe" and type(a.key) is type(b.key) and a.key == b.key]


@pytest.mark.parametrize("pattern", ["kp", "dp", "hp"])
def test_traces_follow_the_ordering_rules(rt: Runtime, pattern: str) -> None:
    q, it = generate("teach-skew", 400, 7)
    events = list(it)
    run = get(pattern)(q, events, opts(rt, 4, 2, 2, trace=True, epoch=16, calibration=60, sync_map=True, theta=1.0))
    assert run.results == run_events(events, q)
    orders, stored = _traces(run.metrics)
    on_time = on_time_tuples(events, q)
    ids = [t.id for t in on_time]
    assert ordering.stored_once(orders, stored, ids)
    assert ordering.pairs_decided_once(orders, stored, _same_key_pairs(events, q))
    if pattern == "dp":
        assert ordering.dp_rule(orders, stored, ids)
    if pattern == "hp":
        assert ordering.hp_rule(orders, stored, {t.id: (type(t.key), t.key) for t in on_time})
        assert any(len(v) > 1 for v in run.metrics["key2r"].values()), "the workload should split a key"


def test_ordering_predicates_catch_examples_4_1_and_4_2() -> None:
    # Example 4.1: R0 stores a1 then sees b1; R1 stores b1 then sees a1 -> the pair twice.
    dup_orders = {0: [1, 2], 1: [2, 1]}
    dup_stored = {0: [1], 1: [2]}
    assert not ordering.common_order(dup_orders)
    assert not ordering.pairs_decided_once(dup_orders, dup_stored, [(1, 2)])
    # Example 4.2: R0 sees b1 (not stored) then stores a1; R1 sees a1 (not stored) then stores b1 -> no pair.
    miss_orders = {0: [2, 1], 1: [1, 2]}
    miss_stored = {0: [1], 1: [2]}
    assert not ordering.pairs_decided_once(miss_orders, miss_stored, [(1, 2)])
    assert not ordering.dp_rule(miss_orders, miss_stored, [1, 2])
    ok = {0: [1, 2], 1: [1, 2]}
    assert ordering.dp_rule(ok, {0: [1], 1: [2]}, [1, 2])
    assert ordering.pairs_decided_once(ok, {0: [1], 1: [2]}, [(1, 2)])
    # HP coverage: a tuple stored at 1 whose later same-key tuple never reaches replica 1
    assert not ordering.hp_rule({0: [1, 2], 1: [1]}, {0: [2], 1: [1]}, {1: "k", 2: "k"})
    assert ordering.hp_rule({0: [1, 2], 1: [1, 2]}, {0: [2], 1: [1]}, {1: "k", 2: "k"})


# ---------------------------------------------------------------- the naive collector is caught


@pytest.mark.parametrize("pattern", ["dp", "hp"])
def test_naive_collector_is_caught_by_the_differential_check(rt: Runtime, pattern: str) -> None:
    q, it = generate("teach-skew", 400, 3)
    events = list(it)
    expected = run_events(events, q)
    caught = []
    for seed in range(8):  # a seeded adversarial schedule: the first seeds already disagree
        run = get(pattern)(q, events, opts(rt, 4, 1, 2, collector="naive", seed=seed, epoch=50, trace=True,
                                            calibration=40, sync_map=True, theta=1.0))
        if run.results != expected:
            got = set(run.results.pairs)
            exp = set(expected.pairs)
            orders, stored = _traces(run.metrics)
            assert not ordering.pairs_decided_once(orders, stored, _same_key_pairs(events, q))
            caught.append((len(got - exp) + (len(run.results.pairs) - len(got)), len(exp - got)))
    assert caught, "the naive collector was never caught: the check would prove nothing"
    assert any(extra or missing for extra, missing in caught)


# ---------------------------------------------------------------- Alg. 1


def test_alg1_keeps_calibration_replicas_and_balances() -> None:
    f = {0: 0.5, 1: 0.2, 2: 0.1, 3: 0.1, 4: 0.05, 5: 0.05}
    init = {k: [k % 4] for k in f}
    out = assign(f, init, 4, 1.05, 4)
    for k in f:
        assert init[k][0] in out[k]
        assert len(out[k]) == len(set(out[k])) <= 4
    assert is_balanced(model_loads(f, out, 4), 1.05)
    capped = assign(f, init, 4, 1.0, 2)
    assert max(len(v) for v in capped.values()) <= 2
    assert assign({0: 1.0}, {0: [2]}, 3, 1.05, 3)[0][0] == 2


# ---------------------------------------------------------------- failures: fail fast, leave nothing


def _long_events(n: int = 4000) -> tuple[Query, list[Event]]:
    q, it = generate("teach-skew", n, 1)
    return q, list(it)


def test_exception_in_a_replica_fails_fast_and_cleans_up() -> None:
    q, events = _long_events()
    r = Runtime(2, "spawn")
    pids = r.pids()
    t = time.monotonic()
    with pytest.raises(EngineFailure, match=r"replica 1 raised RuntimeError: injected failure after 3 batches"):
        run_chunks("kp", q, chunks_from_events(events, 64, q=q), 0,
                   JobOptions("kp", replicas=2, batch=4, fail_after={1: 3}), r)
    assert time.monotonic() - t < 10
    assert r.closed
    assert not any(alive(p) for p in pids)
    assert not {s for s in segments() if s.startswith(r.tag)}


def test_killed_replica_fails_fast_and_cleans_up() -> None:
    q, events = _long_events()
    r = Runtime(3, "spawn")
    pids = r.pids()
    threading.Timer(0.5, os.kill, (pids[2], signal.SIGKILL)).start()
    t = time.monotonic()
    with pytest.raises(EngineFailure, match=r"replica 2 killed by SIGKILL"):
        run_chunks("dp", q, chunks_from_events(events, 64, q=q), 0,
                   JobOptions("dp", replicas=3, batch=4, stall=(2,)), r)
    assert time.monotonic() - t < 10
    assert not any(alive(p) for p in pids)
    assert not {s for s in segments() if s.startswith(r.tag)}


def test_ctrl_c_in_the_driver_cleans_up() -> None:
    q, events = _long_events()
    r = Runtime(2, "spawn")
    pids = r.pids()
    # A shell that starts a job in the background makes it ignore SIGINT, and then
    # interrupt_main() does nothing: install Python's own handler, as an interactive run has it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.5, _thread.interrupt_main).start()
        with pytest.raises(KeyboardInterrupt):
            run_chunks("hp", q, chunks_from_events(events, 64, q=q), 0,
                       JobOptions("hp", replicas=2, batch=4, stall=(0,)), r)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not any(alive(p) for p in pids)
    assert not {s for s in segments() if s.startswith(r.tag)}


def test_bad_options_are_rejected_without_leaking(rt: Runtime) -> None:
    q, events = _long_events(50)
    with pytest.raises(ValueError, match="replicas must be in"):
        get("kp")(q, events, opts(rt, 9, 4, 1))


def test_registry_engine_without_a_runtime_starts_and_stops_its_own() -> None:
    q = Query(lower=-5, upper=5)
    events: list[Event] = [StreamTuple("base", 1, 10, "k"), StreamTuple("probe", 2, 12, "k"), End()]
    before = {p for p in os.listdir("/proc") if p.isdigit()}
    run = get("kp")(q, events, EngineOptions(replicas=2, batch=2))
    assert run.results == Results(pairs=[(1, 2)])
    assert run.metrics["pattern"] == "kp" and run.metrics["latency_ms"]["p99"] is not None
    children = [p for p in os.listdir("/proc") if p.isdigit() and p not in before and alive(int(p))]
    for p in children:
        try:
            with open(f"/proc/{p}/stat") as f:
                assert int(f.read().split()[3]) != os.getpid(), "a replica of the engine is still alive"
        except FileNotFoundError:
            pass


def test_chunk_type_is_numpy_columns() -> None:
    c = next(chunks_from_events([StreamTuple("base", 1, 10, 1), StreamTuple("probe", 2, 12, "1"), End()], 8))
    assert isinstance(c, Chunk) and c.events.key.tolist() == [0, 1]  # 1 and "1" are different keys


# ---------------------------------------------------------------- streamed results (oij run --order arrival)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(w=workloads(max_events=60), pattern=st.sampled_from(["kp", "dp", "hp", "key", "scale"]),
       replicas=st.integers(1, 3), batch=st.integers(1, 16))
def test_streamed_results_equal_the_oracle(rt: Runtime, w: tuple[Query, list[Event]], pattern: str, replicas: int,
                                           batch: int) -> None:
    """With a stream, every result is handed out once as it completes and nothing is kept."""
    from oij.parallel.shared.teamrun import TeamOptions
    from oij.parallel.shared.teamrun import run_chunks as team_run

    q, events = w
    got = Results()

    def stream(r: Results) -> None:
        got.pairs += r.pairs
        got.aggregates += r.aggregates
        got.late += r.late

    chunks = chunks_from_events(events, 16, q=q)
    if pattern in ("kp", "dp", "hp"):
        opt = JobOptions(pattern=pattern, replicas=replicas, batch=batch, calibration=10, theta=1.0)
        res, metrics = run_chunks(pattern, q, chunks, 0, opt, runtime=rt, stream=stream)
    else:
        topt = TeamOptions(pattern=pattern, replicas=replicas, batch=batch, schedule_every=5, delta=0.0)
        res, metrics = team_run(pattern, q, chunks, 0, topt, runtime=rt, stream=stream)
    assert res == Results()
    assert got.canonical() == run_events(events, q)
    assert metrics["late"] == len(got.late)
