"""Every semantic profile in the Spark oracle equals the spec's step-by-step simulation.

``oij.spark.profiles.spark_profile_oracle`` decides each tuple and each candidate pair from prefix maxima;
``oij.spec.profiles.compute_profile_result`` runs an operator event by event.  Each Hypothesis example is one query
and a batch of independent streams in one event frame (the ``stream`` column), so that one Spark job checks a
dozen workloads.  Negative controls: for every profile parameter, the Spark oracle with that parameter put back
to canonical is caught on a workload where the parameter matters.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, assume, find, given, settings
from hypothesis import strategies as st
from oij.spec.batch import Results
from oij.spec.model import End, Event, Query, StreamTuple
from oij.spec.profiles import CANONICAL, PROFILES, Profile, compute_profile_result, custom_profile

from oij.spark.compare import compare_results
from oij.spark.frames import events_table
from oij.spark.profiles import STREAM, spark_profile_oracle
from tests.budget import examples
from tests.strategies import event_lists, queries, workloads

EXACT = st.integers(-1000, 1000).map(lambda k: k / 4)  # sums exact in any order

Batch = tuple[Query, list[list[Event]]]


@st.composite
def batches(draw: st.DrawFn, size: int = 20, max_events: int = 25) -> Batch:
    """A query and ``size`` arrival sequences for it; some lose their end event (no flush can happen)."""
    q = draw(queries(cond=False))
    streams = []
    for _ in range(size):
        ev = draw(event_lists(q, max_events=max_events, values=EXACT))
        if draw(st.integers(0, 5)) == 0:
            ev = [e for e in ev if not isinstance(e, End)]
        streams.append(ev)
    return q, streams


def _renumber(streams: list[list[Event]]) -> tuple[list[list[Event]], dict[int, tuple[int, int]]]:
    """The streams with ids unique over the batch, and the map back: new id -> (stream, old id)."""
    back: dict[int, tuple[int, int]] = {}
    out = []
    for i, ev in enumerate(streams):
        new: list[Event] = []
        for e in ev:
            if isinstance(e, StreamTuple):
                back[len(back)] = (i, e.id)
                e = e._replace(id=len(back) - 1)
            new.append(e)
        out.append(new)
    return out, back


def batch_frame(spark: Any, streams: list[list[Event]]) -> Any:
    """One event frame holding every stream: positions from 0 each, keys tagged with the stream."""
    tables = []
    for i, ev in enumerate(streams):
        t = events_table(ev, 0, "tagged")
        keys = [None if k is None else f"{i}/{k}" for k in t.column("key").to_pylist()]
        t = t.set_column(t.schema.get_field_index("key"), "key", pa.array(keys, pa.string()))
        tables.append(t.append_column(STREAM, pa.array([i] * t.num_rows, pa.int32())))
    # one chunk: pyspark's createDataFrame loses the rows of an Arrow table whose first chunks are empty
    return spark.createDataFrame(pa.concat_tables(tables).combine_chunks())


def split(res: Results, back: dict[int, tuple[int, int]], n: int) -> list[Results]:
    """The results of a batch, one per stream, with the streams' own ids."""
    out = [Results() for _ in range(n)]
    for a, b in res.pairs:
        out[back[a][0]].pairs.append((back[a][1], None if b is None else back[b][1]))
    for a, c, v in res.aggregates:
        out[back[a][0]].aggregates.append((back[a][1], c, v))
    for x in res.late:
        out[back[x][0]].late.append(back[x][1])
    return [r.canonical() for r in out]


def agrees(got: Results, want: Results) -> bool:
    return got.pairs == want.pairs and got.late == want.late and compare_results(want, got).agrees and \
        [(a, n) for a, n, _ in got.aggregates] == [(a, n) for a, n, _ in want.aggregates]


def without(p: Profile, param: str) -> Profile:
    """``p`` with parameter ``param`` put back to canonical: a wrong variant."""
    return dataclasses.replace(p, name=f"{p.name}-without-{param}", **{param: getattr(CANONICAL, param)})


def run_batch(spark: Any, q: Query, streams: list[list[Event]], p: Profile, salted: bool = True) -> list[Results]:
    """The Spark oracle's result under ``p`` for each stream, from one job over the batch.  ``salted``: the
    salted join's statistics run whatever the batch's size (the oracle knows no tuple count); else the oracle is
    told the count, and below ``SALT_FROM`` tuples it skips them (two jobs fewer)."""
    renumbered, back = _renumber(streams)
    n = 0 if salted else sum(isinstance(e, StreamTuple) for ev in streams for e in ev)
    res = spark_profile_oracle(spark, q, batch_frame(spark, renumbered), p, n_tuples=n)
    try:
        return split(res.collect(), back, len(streams))
    finally:
        res.release()


@pytest.mark.parametrize("name", list(PROFILES))
@given(batch=batches())
@settings(max_examples=examples(1, 4), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_each_profile_in_spark_equals_the_spec(spark: Any, name: str, batch: Batch) -> None:
    q, streams = batch
    assume(sum(len(s) for s in streams) >= 100)  # not Hypothesis' first, simplest draw: one example must count
    p = PROFILES[name]
    got = run_batch(spark, q, streams, p)
    for ev, g in zip(streams, got, strict=True):
        want = compute_profile_result(ev, q, p)
        assert agrees(g, want), (name, q, ev, g, want)


# One wrong variant per parameter: the profile that sets it, with the parameter put back to canonical.
PARAMS: dict[str, Profile] = {
    "late_rule": PROFILES["late-le"],
    "channel_combine": PROFILES["watermark-max"],
    "side_combine": PROFILES["lateness-per-input"],
    "lateness_shift": PROFILES["flink-datastream"],
    "lag": PROFILES["micro-batch"],
    "late_tuples": PROFILES["flink-sql"],
    "purge": PROFILES["purge-early"],
    "end_flush": PROFILES["no-end-flush"],
    "retract_on_purge": PROFILES["pathway-forget"],
}
MORE: dict[str, Profile] = {  # the other values of late_tuples, side_combine and purge
    "late_tuples=drop": PROFILES["late-silent"],
    "late_tuples=join": PROFILES["late-joined"],
    "late_tuples=revise": PROFILES["pathway"],
    "side_combine=own": custom_profile(side_combine="own"),
    "purge=flink-timers": custom_profile(purge="flink-timers"),
    "purge=lazy-own": custom_profile(late_rule="le", side_combine="own", late_tuples="drop", purge="lazy-own"),
}


def test_every_parameter_has_a_negative_control() -> None:
    fields = {f.name for f in dataclasses.fields(CANONICAL)} - {"name", "system", "summary"}
    assert set(PARAMS) == fields


@pytest.mark.parametrize("label", [*PARAMS, *MORE])
def test_a_spark_oracle_that_ignores_a_parameter_is_caught(spark: Any, label: str) -> None:
    """A workload where the parameter changes the spec's result (the first that Hypothesis' ``find`` draws,
    derandomized, spec only); the Spark oracle with that parameter put back to canonical must disagree with the
    spec there."""
    p = {**PARAMS, **MORE}[label]
    wrong = without(p, param=label.split("=")[0])
    q, ev = find(workloads(max_events=25, values=EXACT, cond=False),
                 lambda w: compute_profile_result(w[1], w[0], p) != compute_profile_result(w[1], w[0], wrong),
                 settings=settings(database=None, derandomize=True, max_examples=5000, deadline=None,
                                   phases=[Phase.generate]))
    got = run_batch(spark, q, [ev], wrong, salted=False)[0]  # the salting is the equality tests' concern
    assert not agrees(got, compute_profile_result(ev, q, p)), f"{label}: dropping it went unseen"
