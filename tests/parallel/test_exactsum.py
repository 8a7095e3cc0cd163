"""Exact sums across replicas (oij.parallel.runtime.exactsum): one rounding, as the specification.

Partial sums are split over replicas and batches, travel as an int64 part and pieces, and the sink rounds the
exact total once.  The properties run in-process on the sink and the replica state; the engines themselves are
checked end to end on a case where a second rounding shows (every engine, both aggregation methods), and a
negative control puts the old second rounding back into the sink.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oij.parallel.registry import get
from oij.parallel.runtime import exactsum, sink
from oij.parallel.runtime.exactsum import (
    PIECE,
    ROW,
    UNIT_BITS,
    add_units,
    piece_records,
    pieces,
    round_sum,
    spill,
    split_units,
    total,
)
from oij.parallel.runtime.pool import Runtime
from oij.parallel.runtime.ring import RESULT
from oij.parallel.runtime.sink import Sink
from oij.parallel.runtime.store import JoinState
from oij.reference.exact import SHIFT, scaled
from oij.reference.oracle import run_events
from oij.spec.aggregate import compute_aggregate
from oij.spec.model import End, Event, Query, StreamTuple, Watermark

from tests.budget import examples
from tests.procs import opts
from tests.strategies import VALUES

pytestmark = pytest.mark.timeout(120)

WIDE = st.one_of(VALUES, st.sampled_from([1.7e308, -1.7e308, 2.0**30, 0.1, 1 / 3, 2.0**-1074]))
"""The strategies' values plus ones beyond the int64 part: past 2**30, not multiples of 2**-10, overflowing."""


def _exact(vals: list[float]) -> int:
    return sum((scaled(v) for v in vals), 0)


@given(st.lists(WIDE, max_size=12))
@settings(max_examples=examples(200, 600), deadline=None)
def test_pieces_are_finite_doubles_whose_exact_sum_is_the_total(vals: list[float]) -> None:
    t = _exact(vals)
    p = pieces(t)
    assert all(abs(c) <= exactsum.DBL_MAX for c in p)
    assert _exact(p) == t
    assert (p == []) == (t == 0)


def _partials(vals: list[float], cuts: list[int], base: int) -> list[np.ndarray[Any, Any]]:
    """The records replicas would send for one base whose matches ``vals`` are split at ``cuts`` (fan =
    len(cuts) + 1): each partial's int64 part and pieces, the pieces before their row."""
    bounds = [0, *sorted(cuts), len(vals)]
    fan = len(bounds) - 1
    out = []
    for lo, hi in pairwise(bounds):
        v = np.array(vals[lo:hi], dtype=np.float64)
        si = np.zeros(1, np.int64)
        big: dict[int, int] = {}
        units, odd = split_units(v)
        qi = np.zeros(len(v), np.int64)
        for x in v[odd].tolist():
            big[base] = big.get(base, 0) + scaled(x)
        assert add_units(si, qi, units)
        s, extra = piece_records(big, np.array([base], np.int64))
        r = np.zeros(1, dtype=RESULT)
        r["a"], r["b"], r["n"], r["si"], r["s"], r["fan"], r["kind"] = base, -1, len(v), si, s, fan, ROW
        r["mn"], r["mx"] = (v.min(), v.max()) if len(v) else (np.inf, -np.inf)
        out.append(np.concatenate((extra, r)))
    return out


@given(vals=st.lists(WIDE, max_size=10), cuts=st.lists(st.integers(0, 10), max_size=3), order=st.randoms(),
       kind=st.sampled_from(["sum", "avg"]), stream=st.booleans())
@settings(max_examples=examples(150, 500), deadline=None)
def test_the_sink_rounds_split_sums_once_as_the_spec(vals: list[float], cuts: list[int], order: Any, kind: Any,
                                                      stream: bool) -> None:
    cuts = [min(c, len(vals)) for c in cuts]
    parts = _partials(vals, cuts, 7)
    order.shuffle(parts)  # replicas' rows arrive in any order; each keeps its pieces before it
    q = Query(lower=0, upper=1, aggregate=kind)
    got: list[Any] = []
    sk = Sink(q, stream=(lambda r: got.extend(r.aggregates)) if stream else None)
    for p in parts:
        sk.take(p, 0)
    rows = got if stream else sk.results().aggregates
    n, value = compute_aggregate(vals, kind)
    assert rows == [(7, n, value)]
    assert not sk.extra and not sk.pending


def test_a_second_rounding_in_the_sink_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: the sink before the fix (the mean of the rounded sum) fails the property's case."""
    vals = [0.0, 0.0, 0.0, 1.0, 1e16]

    def twice(si: int, s: float, extra: int, n: int, mean: bool) -> float:
        once = round_sum(si, s, extra, 1, False)
        return once / n if mean else once

    monkeypatch.setattr(sink, "round_sum", twice)
    sk = Sink(Query(lower=0, upper=1, aggregate="avg"))
    for p in _partials(vals, [2], 7):
        sk.take(p, 0)
    assert sk.results().aggregates != [(7, 5, compute_aggregate(vals, "avg")[1])]


def test_the_int64_part_spills_and_a_huge_batch_goes_exact() -> None:
    """Past 2**21 matches a stored row's int64 part moves to the exact sum; a batch of 2**61 units or more is
    added exactly instead of wrapping; either way the total is unchanged."""
    big: dict[int, int] = {}
    si = np.array([5 << 40, 3], np.int64)
    n = np.array([exactsum.SPILL, 1], np.int64)
    ids = np.array([10, 11], np.int64)
    spill(si, n, ids, np.array([0, 1, 0], np.int64), big)
    assert si.tolist() == [0, 3] and big == {10: (5 << 40) << (SHIFT - UNIT_BITS)}
    units = np.full((1 << 21) + 1, (1 << 40) - 1, np.int64)
    acc = np.zeros(1, np.int64)
    assert not add_units(acc, np.zeros(len(units), np.int64), units) and acc[0] == 0
    st_ = JoinState(0, 0, 0, pairs=False, partial=True)
    row = np.zeros(1, np.int64)
    v = np.ldexp(units.astype(np.float64), -UNIT_BITS)
    st_._add_sums(row, np.zeros(len(v), np.int64), v, np.array([4], np.int64), *split_units(v))
    assert total(int(row[0]), 0.0, st_.big.get(4, 0)) == len(units) * (((1 << 40) - 1) << (SHIFT - UNIT_BITS))


def _case(values: list[float]) -> list[Event]:
    def t(side: Any, i: int, ts: int, v: float = 0.0) -> StreamTuple:
        return StreamTuple(side=side, id=i, ts=ts, key=0, value=v, channel=0, fields=())

    probes = [t("probe", 7 + j, 1, v) for j, v in enumerate(values)]
    return [Watermark(ts=0, channel=0), t("base", 0, 0), t("base", 1, 0), *probes, End()]


@pytest.mark.parametrize("pattern", ["kp", "dp", "hp", "key", "scale"])
def test_every_engine_rounds_sum_and_avg_once(rt: Runtime, pattern: str) -> None:
    """The case that caught the second rounding (avg 2000000000000000.0 for the oracle's ...0.2) and a sum whose
    float64 adds differ from the exact sum (1e16 + 1 + 1), on every engine, with and without incremental
    aggregation, split over two replicas."""
    for values in ([0.0, 0.0, 0.0, 1.0, 1e16], [1e16, 1.0, 1.0], [0.1, 0.2, 0.3, 1 / 3]):
        events = _case(values)
        for agg in ("sum", "avg"):
            q = Query(lower=0, upper=2, aggregate=agg)
            want = run_events(events, q)
            for inc in (False, True):
                o = opts(rt, 2, 1, 1, epoch=1, schedule_every=1, delta=0.0, partitions=1, incremental=inc)
                got = get(pattern)(q, events, o).results
                assert got == want, (pattern, values, agg, inc)


def test_piece_records_come_before_their_rows() -> None:
    big = {3: scaled(1e16) + scaled(1.0)}
    s, extra = piece_records(big, np.array([3, 4], np.int64))
    assert s.tolist()[1] == 0.0 and not big
    assert extra["kind"].tolist() == [PIECE] * len(extra) and set(extra["a"].tolist()) == {3}
    assert scaled(float(s[0])) + sum(scaled(c) for c in extra["s"].tolist()) == scaled(1e16) + scaled(1.0)
    assert round_sum(0, float(s[0]), sum(scaled(c) for c in extra["s"].tolist()), 1, False) == 1e16 + 1.0
