"""The judge up to schedule (:mod:`oij.reference.schedule`) accepts exactly the outputs some admissible schedule
gives (:func:`oij.spec.schedule.is_admissible_output`, a brute force over every schedule of small cases), both
ways; and mutants of the judge (no monotone propagation, an eager bound that counts the tuple itself, Spark's
late rule read as Flink's, the aggregate search cut off) each disagree with the brute force on some case."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from oij.reference import schedule as rs
from oij.spec.batch import Results
from oij.spec.model import BASE, PROBE, Query, StreamTuple
from oij.spec.profiles import CANONICAL, PROFILES, Profile
from oij.spec.schedule import (
    Family,
    admissible_schedules,
    eager_bounds,
    is_admissible_output,
    is_admissible_schedule,
    result_under_schedule,
)

from tests.budget import examples

PROFILE_NAMES = ["canonical", "spark-ss", "flink-datastream", "late-le", "lateness-per-input"]


@dataclass
class Case:
    """Tuples in input order, the query, the profile, the family and an output to judge."""

    tuples: list[StreamTuple]
    q: Query
    p: Profile
    f: Family
    got: Results


def _family(draw: st.DrawFn, p: Profile) -> Family:
    order = draw(st.sampled_from(["arrival", "input", "instance", "key"]))
    floor = draw(st.sampled_from([None, None, 0]))
    lag = draw(st.sampled_from([None, None, ("time", 3), ("tuples", 2)]))
    return Family(cast(Any, order), instances=(lambda k: int(k) % 2) if order == "instance" else None, floor=floor,
                  lag_time=lag[1] if lag and lag[0] == "time" else None,
                  lag_tuples=lag[1] if lag and lag[0] == "tuples" else None)


@st.composite
def cases(draw: st.DrawFn, max_tuples: int = 4, aggregate: bool | None = None) -> Case:
    """A small case: up to ``max_tuples`` tuples, and an output drawn either from an admissible schedule (then
    perturbed or not) or as an arbitrary set of rows."""
    n = draw(st.integers(1, max_tuples))
    lower = draw(st.integers(-4, 1))
    upper = lower + draw(st.integers(0, 4))
    agg = draw(st.sampled_from([None, None, "count", "sum"])) if aggregate is None else \
        (draw(st.sampled_from(["count", "sum", "min"])) if aggregate else None)
    join = draw(st.sampled_from(["inner", "inner", "left"])) if agg is None else "inner"
    q = Query(lower=lower, upper=upper, lateness=draw(st.integers(0, 4)), aggregate=cast(Any, agg),
              join=cast(Any, join))
    p = PROFILES[draw(st.sampled_from(PROFILE_NAMES))]
    if not p.end_flush and (agg is not None or join == "left"):
        p = CANONICAL
    tuples = [StreamTuple(draw(st.sampled_from([BASE, PROBE])), i + 1, draw(st.integers(0, 9)),
                          draw(st.sampled_from([0, 1])), float(draw(st.integers(-2, 3))))
              for i in range(n)]
    f = _family(draw, p)
    how = draw(st.sampled_from(["schedule", "schedule", "perturbed", "arbitrary"]))
    if how == "arbitrary":
        from oij.spec.batch import compute_batch

        full = compute_batch(tuples, q)
        got = Results(pairs=[x for x in full.pairs if draw(st.booleans())],
                      aggregates=[(a, c, v) for a, c, v in full.aggregates if draw(st.booleans())],
                      late=[t.id for t in tuples if draw(st.booleans())] if draw(st.booleans()) else [])
        return Case(tuples, q, p, f, got.canonical())
    schedules = list(admissible_schedules(tuples, q, p, f))
    ws = draw(st.sampled_from(schedules)) if schedules else [0] * n
    got = result_under_schedule(tuples, ws, q, p)
    if not draw(st.booleans()):
        got.late = []  # an engine that drops late tuples silently
    if how == "perturbed":
        perturb(draw, got, tuples, draw(st.sampled_from(["drop", "dup", "late", "agg"])))
    return Case(tuples, q, p, f, got.canonical())


def perturb(draw: st.DrawFn, got: Results, tuples: list[StreamTuple], kind: str) -> None:
    """Changes ``got`` in place as ``kind`` says: a pair dropped, the first pair duplicated, a tuple listed late,
    the first aggregate's count raised by one (each only where there is such a row); ``none`` changes nothing."""
    if kind == "drop" and got.pairs:
        got.pairs.pop(draw(st.integers(0, len(got.pairs) - 1)))
    elif kind == "dup" and got.pairs:
        got.pairs.append(got.pairs[0])
    elif kind == "late":
        got.late = sorted({*got.late, draw(st.sampled_from(tuples)).id})
    elif kind == "agg" and got.aggregates:
        a, c, v = got.aggregates[0]
        got.aggregates[0] = (a, c + 1, v)


def fast(c: Case) -> bool:
    return rs.judge(rs.TupleColumns.of(c.tuples), c.q, c.p, c.f, c.got).admissible


def brute(c: Case) -> bool:
    return is_admissible_output(c.got, c.tuples, c.q, c.p, c.f)


SETTINGS = settings(max_examples=examples(200, 400), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(cases())
def test_the_judge_accepts_exactly_the_admissible_outputs(c: Case) -> None:
    assert fast(c) == brute(c)


@settings(max_examples=examples(75, 150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(aggregate=True))
def test_the_judge_decides_aggregate_outputs_exactly(c: Case) -> None:
    assert fast(c) == brute(c)


@settings(max_examples=examples(100, 200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_an_accepted_output_comes_with_schedules_that_explain_it(c: Case) -> None:
    """The loosest and the tightest schedule the judge reports are admissible, and the tightest gives the
    output (the loosest too, for pairs)."""
    j = rs.judge(rs.TupleColumns.of(c.tuples), c.q, c.p, c.f, c.got)
    if not j.admissible:
        assert j.witnesses
        return
    assert j.w_tight is not None and j.w_max is not None
    for ws in (j.w_tight, j.w_max):
        assert is_admissible_schedule(rs.as_spec_schedule(ws), c.tuples, c.q, c.p, c.f)
    from oij.spec.schedule import explains

    assert explains(c.got, c.tuples, rs.as_spec_schedule(j.w_tight), c.q, c.p)
    if c.q.aggregate is None:
        assert explains(c.got, c.tuples, rs.as_spec_schedule(j.w_max), c.q, c.p)


def test_the_tightest_schedule_makes_one_tuple_of_an_absent_pair_late() -> None:
    """An absent pair both of whose tuples the loosest schedule makes late, and no late ids listed: the tightest
    schedule must still make one of them late (found by Hypothesis in CI; the judge once forced neither)."""
    c = Case([StreamTuple(BASE, 1, 2, 1, 0.0), StreamTuple(PROBE, 2, 2, 1, 0.0)], Query(lower=0, upper=0, lateness=0),
             PROFILES["late-le"], Family("input"), Results(pairs=[], aggregates=[], late=[]))
    j = rs.judge(rs.TupleColumns.of(c.tuples), c.q, c.p, c.f, c.got)
    assert j.admissible and j.w_tight is not None
    from oij.spec.schedule import explains

    assert explains(c.got, c.tuples, rs.as_spec_schedule(j.w_tight), c.q, c.p)
    assert is_admissible_schedule(rs.as_spec_schedule(j.w_tight), c.tuples, c.q, c.p, c.f)
    # only the later-arriving tuple is forced late: the base stays on time
    assert rs.is_late_at(rs.TupleColumns.of(c.tuples), j.w_tight, c.p).tolist() == [False, True]


def test_the_fast_eager_bounds_are_the_spec_s() -> None:
    @settings(max_examples=examples(100, 200), deadline=None)
    @given(cases(max_tuples=6))
    def check(c: Case) -> None:
        want = eager_bounds(c.tuples, c.q, c.p, c.f)
        got = rs.eager_bounds(rs.TupleColumns.of(c.tuples), c.q, c.p, c.f)
        assert [max(int(x), rs.NEG) for x in got] == [max(w, rs.NEG) for w in want]

    check()


# ------------------------------------------------------------------------------------------- negative controls
def _mutant(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    if name == "no-propagation":  # W* = U, not the suffix minimum along the chain
        monkeypatch.setattr(rs, "chain_cummax", lambda v, chain, reverse=False: v.copy())
    elif name == "inclusive-eager-bound":  # E_j counts x_j itself
        orig = rs.eager_bounds

        def inclusive(c: rs.TupleColumns, q: Query, p: Profile, f: Family, fw: Any = None) -> rs.I64:
            e = orig(c, q, p, f, fw)
            own = np.maximum(e, np.where(e == rs.NEG, c.ts - (q.lateness or 0), e))
            return np.maximum(e, own - p.lateness_shift)

        monkeypatch.setattr(rs, "eager_bounds", inclusive)
    elif name == "lt-rule-only":
        monkeypatch.setattr(rs, "late_threshold", lambda c, p: c.ts + 1)
    elif name == "no-aggregate-search":
        monkeypatch.setattr(rs, "search_aggregates", lambda *a: None)


@pytest.mark.parametrize("mutant,aggregate", [("no-propagation", False), ("inclusive-eager-bound", False),
                                              ("lt-rule-only", False), ("no-aggregate-search", True)])
def test_each_mutant_of_the_judge_disagrees_with_the_brute_force(monkeypatch: pytest.MonkeyPatch, mutant: str,
                                                                  aggregate: bool) -> None:
    _mutant(monkeypatch, mutant)

    def bad(c: Case) -> bool:
        return fast(c) != brute(c)

    # the first case found is enough (not shrunk: shrinking cost a fifth of the search, and any disagreement
    # shows the mutant caught)
    found = find(cases(aggregate=aggregate), bad, settings=settings(
        max_examples=5000, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck),
        phases=[Phase.generate]))
    assert bad(found)


def test_a_planted_difference_of_each_kind_is_found_with_its_witness() -> None:
    """One real-looking stream, judged right; then a lost pair of two on-time tuples, a duplicate, a pair outside
    the window and a late treatment no monotone W allows are each rejected with the witness kind that names
    them."""
    q = Query(lower=-10, upper=0, lateness=5)
    ts = [StreamTuple(BASE, 1, 100, 1), StreamTuple(PROBE, 2, 95, 1), StreamTuple(PROBE, 3, 120, 1),
          StreamTuple(PROBE, 4, 90, 1), StreamTuple(BASE, 5, 125, 1), StreamTuple(PROBE, 6, 118, 1),
          StreamTuple(BASE, 7, 126, 1)]
    cols = rs.TupleColumns.of(ts)
    f = Family("arrival")
    ok = Results(pairs=[(1, 2), (5, 3), (7, 3)])  # probe 4 (ts 90) and probe 6 (118) late
    assert rs.judge(cols, q, CANONICAL, f, ok).admissible
    planted = {
        "missing": Results(pairs=[(1, 2), (5, 3)]),
        "duplicate": Results(pairs=[(1, 2), (5, 3), (5, 3), (7, 3)]),
        "row": Results(pairs=[(1, 2), (1, 3), (5, 3), (7, 3)]),
        "order": Results(pairs=[(1, 2), (5, 3), (7, 3)], late=[4, 2]),
    }
    for kind, got in planted.items():
        j = rs.judge(cols, q, CANONICAL, f, got)
        assert not j.admissible and j.witnesses[0].kind in ({kind} if kind != "order" else {"order", "row"}), \
            (kind, j.witnesses)
    # a watermark that moves back: probe 6 late (W > 118 at position 5) then base 7 on time at 126 is fine, but
    # listing probe 6 late while probe 3 (ts 120, before it) is on time needs W <= 120 then W >= 119: allowed;
    # listing probe 3 late while probe 6 (after it, ts 118) is on time needs W >= 121 then W <= 118: refused
    back = Results(pairs=[(1, 2), (1, 4)], late=[3, 5, 7])
    j = rs.judge(cols, q, replace(CANONICAL, name="x"), f, back)
    assert not j.admissible and j.witnesses[0].kind in ("order", "bound"), j.witnesses
