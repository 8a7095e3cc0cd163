"""PPOIJ's joining condition: the exact comparison, the oracle and every engine against the spec, bad input."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oij.parallel.registry import get
from oij.parallel.runtime.pool import Runtime
from oij.reference.oracle import run_events
from oij.spec.model import End, Event, Query, StreamTuple

from tests.budget import examples
from tests.procs import opts
from tests.strategies import EXACT_VALUES_COND, workloads

pytestmark = pytest.mark.timeout(300)

PATTERNS = ["kp", "dp", "hp", "key", "scale"]


@settings(max_examples=examples(30, 60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(w=workloads(max_events=60, values=EXACT_VALUES_COND, cond=True), pattern=st.sampled_from(PATTERNS),
       replicas=st.integers(1, 4), emitters=st.integers(1, 3), batch=st.integers(1, 32), index=st.booleans())
def test_every_engine_equals_the_oracle_with_a_cond(rt: Runtime, w: tuple[Query, list[Event]], pattern: str,
                                                    replicas: int, emitters: int, batch: int, index: bool) -> None:
    q, events = w
    extra: dict[str, Any] = {"epoch": 16, "theta": 1.0, "cond_index": index} if pattern in ("kp", "dp", "hp") else {}
    run = get(pattern)(q, events, opts(rt, replicas, batch, emitters, **extra))
    assert run.results == run_events(events, q)


# ---------------------------------------------------------------- the exact comparison


@given(st.floats(-1e17, 1e17, allow_nan=False), st.floats(-1e17, 1e17, allow_nan=False),
       st.sampled_from([0.0, 1.0, -1.0, 0.5, 3.0, float(1 << 53), -float(1 << 53), 1e-300]),
       st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
@settings(max_examples=400, deadline=None)
def test_twosum_comparison_is_exact(x: float, y: float, add: float, op: Any) -> None:
    """The engines' double-only rule equals the spec's rational comparison, including where y + add rounds."""
    from fractions import Fraction

    from oij.reference.cond import compare_split, split_sum
    from oij.spec.match import COMPARE

    s, e = split_sum(y, add)
    assert Fraction(s) + Fraction(e) == Fraction(y) + Fraction(add)
    assert bool(compare_split(x, op, s, e)) == COMPARE[op](Fraction(x), Fraction(y) + Fraction(add))


def test_the_rounding_corner_is_decided_exactly() -> None:
    """1e16 + 1 rounds to 1e16 in doubles; the cond must not: a.x = 1e16 < b.y + 1 = 1e16 + 1."""
    from oij.spec.match import is_cond_true
    from oij.spec.model import Comparison

    q = Query(-1, 1, cond=(Comparison("x", "<", "y", 1.0),))
    a = StreamTuple("base", 1, 0, 1, fields=(("x", 1e16),))
    b = StreamTuple("probe", 2, 0, 1, fields=(("y", 1e16),))
    assert is_cond_true(a, b, q)
    assert not (1e16 < 1e16 + 1.0), "negative control: naive float arithmetic gets it wrong"
    assert run_events([a, b, End()], q).pairs == [(1, 2)]


# ---------------------------------------------------------------- negative controls


def _cond_workload() -> tuple[Query, list[Event]]:
    from oij.spec.model import Comparison, Watermark

    q = Query(-4, 0, aggregate=None, join="left", cond=(Comparison("x", "<", "y", 0.0),))
    events: list[Event] = []
    for i in range(200):
        side: Any = "base" if i % 2 else "probe"
        events.append(StreamTuple(side, i, i // 2, i % 3, 1.0, 0, (("x", float(i % 7)), ("y", float(i % 5)))))
        if i % 25 == 24:
            events.append(Watermark(i // 2 - 6))
    events.append(End())
    return q, events


@pytest.mark.parametrize("pattern", PATTERNS)
def test_an_engine_that_ignores_the_cond_is_caught(rt: Runtime, pattern: str) -> None:
    """The differential check can fail: an engine given the query without its cond differs from the oracle."""
    from dataclasses import replace

    q, events = _cond_workload()
    expected = run_events(events, q)
    ok = get(pattern)(q, events, opts(rt, 2, 8, 1))
    wrong = get(pattern)(replace(q, cond=()), events, opts(rt, 2, 8, 1))
    assert ok.results == expected
    assert wrong.results != expected


# ---------------------------------------------------------------- bad input: exit 2, one line


@pytest.mark.parametrize(("cond", "field"), [
    ('[{"a":"x","op":"<<","b":"y"}]', "cond[0].op"),
    ('[{"a":"x","op":"<"}]', "cond[0].b"),
    ('[{"a":"x","op":"<","b":"y","add":1e300}]', "cond[0].add"),
    ('[{"a":"x y","op":"<","b":"y"}]', "cond[0].a"),
    ('[{"a":"x","op":"<","b":"y","code":"import os"}]', "cond[0].code"),
    ('{"a":"x"}', "cond"),
    ('["a.x < b.y"]', "cond[0]"),
])
def test_bad_cond_specification_exits_2_with_one_line(tmp_path: Any, capsys: pytest.CaptureFixture[str], cond: str,
                                                      field: str) -> None:
    from oij.cli import main

    f = tmp_path / "in.jsonl"
    f.write_text('{"type":"query","lower":-1,"upper":0,"cond":' + cond + '}\n{"type":"end"}\n')
    assert main(["join", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"in.jsonl:1: {field}:" in err, err


@pytest.mark.parametrize(("fields", "field"), [
    ('{"y":1}', "fields.x"),
    ('{"x":"big"}', "fields.x"),
    ('{"x":9007199254740993}', "fields.x"),
    ('{"x":1,"ts":2}', "fields"),
    ('[1]', "fields"),
])
def test_bad_fields_exit_2_with_one_line(tmp_path: Any, capsys: pytest.CaptureFixture[str], fields: str,
                                         field: str) -> None:
    from oij.cli import main

    f = tmp_path / "in.jsonl"
    f.write_text('{"type":"query","lower":-1,"upper":0,"cond":[{"a":"x","op":"<","b":"x"}]}\n'
                 '{"type":"tuple","side":"base","id":1,"ts":0,"key":1,"fields":' + fields + '}\n{"type":"end"}\n')
    for cmd in (["join", str(f)], ["run", str(f), "--pattern", "kp", "--replicas", "1"]):
        assert main(cmd) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"in.jsonl:2: {field}:" in err, err


def test_old_files_mean_what_they_meant(tmp_path: Any) -> None:
    """A file without fields and cond reads as before; fields a query without cond does not read are kept."""
    from oij.io.jsonlread import read_jsonl
    from oij.io.jsonlwrite import format_event

    text = ('{"type":"query","lower":-1,"upper":0}\n'
            '{"type":"tuple","side":"base","id":1,"ts":0,"key":1,"fields":{"power":3000,"cool":12.5}}\n'
            '{"type":"tuple","side":"probe","id":2,"ts":0,"key":1}\n{"type":"end"}\n')
    import io

    q, evs = read_jsonl(io.BytesIO(text.encode()), "x")
    events = list(evs)
    assert q.cond == ()
    assert isinstance(events[0], StreamTuple) and events[0].fields == (("cool", 12.5), ("power", 3000.0))
    assert format_event(events[0]).endswith(',"fields":{"cool":12.5,"power":3000}}')
    assert run_events(events, q).pairs == [(1, 2)]


# ---------------------------------------------------------------- the generator


@pytest.mark.parametrize("sel", [0.01, 0.3, 1.0])
def test_generator_hits_the_target_selectivity(sel: float) -> None:
    """With independent fields the cond holds for about ``cond_selectivity`` of the window's candidates."""
    from dataclasses import replace

    from oij.spec.stream import on_time_tuples

    from oij.workloads import generate, resolve, with_overrides

    p = with_overrides(resolve("teach-skew"), {"cond": "a.power<b.power,a.cool>b.cool", "cond_selectivity": sel,
                                                "field_range": 100_000, "lower": -4000})
    q, it = generate(p, 3000, 5)
    events = list(it)
    with_cond = len([x for x in run_events(events, q).pairs if x[1] is not None])
    without = len([x for x in run_events(events, replace(q, cond=())).pairs if x[1] is not None])
    assert without > 2000 and len(on_time_tuples(events, q)) > 0
    assert abs(with_cond / without - sel) <= max(0.2 * sel, 0.004), (with_cond, without)


# ---------------------------------------------------------------- the cond index


def _state_run(q: Query, events: list[Event], index: bool, batch: int) -> tuple[list[tuple[int, int]], int]:
    """Drive one replica's JoinState (no processes, no watermarks: nothing is purged) over the events' tuples;
    (sorted pairs, entries walked)."""
    import numpy as np
    from oij.parallel.runtime.emitter import chunks_from_events
    from oij.parallel.runtime.ring import tuple_dtype
    from oij.parallel.runtime.store import JoinState
    from oij.spec.match import lower_offset, upper_offset

    js = JoinState(0, lower_offset(q), upper_offset(q), pairs=True, partial=False, cond=q.cond, cond_index=index)
    out: list[tuple[int, int]] = []
    for c in chunks_from_events(events, batch, q=q):
        e = c.events
        t = e.kind == 0
        recs = np.zeros(int(t.sum()), dtype=tuple_dtype(len(q.cond)))
        for name, col in (("id", e.id), ("ts", e.ts), ("key", e.key), ("value", e.value), ("side", e.side)):
            recs[name] = col[t]
        assert c.ch is not None and c.cl is not None
        recs["ch"], recs["cl"] = c.ch[t], c.cl[t]
        for r in js.process(recs):
            out.extend(zip(r["a"].tolist(), r["b"].tolist(), strict=True))
    return sorted(out), js.probes.visited + js.bases.visited


@settings(max_examples=examples(75, 150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads(max_events=80, values=EXACT_VALUES_COND, cond=True, lateness=False, aggregate=False),
       batch=st.integers(1, 16))
def test_the_cond_index_answers_exactly_what_filtering_answers(w: tuple[Query, list[Event]], batch: int) -> None:
    q, events = w
    q = Query(q.lower, q.upper, q.lower_inclusive, q.upper_inclusive, cond=q.cond)
    plain, _ = _state_run(q, events, False, batch)
    indexed, _ = _state_run(q, events, True, batch)
    assert indexed == plain
    from oij.spec.batch import compute_pairs

    ts = [e for e in events if isinstance(e, StreamTuple)]
    want = compute_pairs([t for t in ts if t.side == "base"], [t for t in ts if t.side == "probe"], q)
    assert plain == want  # no watermark reaches the state: every tuple is joined, as in the batch definition


def _selective(n: int, sel: float) -> tuple[Query, list[Event]]:
    from oij.workloads import generate, resolve, with_overrides

    p = with_overrides(resolve("scale-oij-default"), {
        "keys": 1, "lower": -2000, "upper": 0, "lateness": 100, "aggregate": None,
        "cond": "a.power<b.power,a.cool>b.cool", "cond_selectivity": sel, "watermark": "count"})
    q, it = generate(p, n, 2)
    return q, list(it)


def test_the_cond_index_walks_fewer_entries_and_a_wrong_index_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted, not timed: at 1 % selectivity the index walks a fraction of the window.  Negative control: an index
    that takes the wrong side of a comparison (ge for le) loses pairs and the comparison with filtering sees it."""
    from oij.parallel.runtime import store

    q, events = _selective(3000, 0.01)
    plain, walked_plain = _state_run(q, events, False, 64)
    indexed, walked_indexed = _state_run(q, events, True, 64)
    assert indexed == plain and len(plain) > 0
    assert walked_indexed * 3 < walked_plain, (walked_indexed, walked_plain)
    flip = {"ge": "le", "le": "ge", "eq": "eq"}
    real = store._direction
    monkeypatch.setattr(store, "_direction", lambda op, stored_left: flip[real(op, stored_left)])
    wrong, _ = _state_run(q, events, True, 64)
    assert wrong != plain
