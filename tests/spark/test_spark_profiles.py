"""Every semantic profile in the Spark oracle equals the spec's step-by-step simulation.

``oij.spark.profiles.spark_profile_oracle`` decides each tuple and each candidate pair from prefix maxima;
``oij.spec.profiles.compute_profile_result`` runs an operator event by event.  Each Hypothesis example is one query
and a batch of independent streams in one event frame (the ``stream`` column), judged under every profile, and
one Spark job computes all of them (each profile's oracle on its own frame, the result frames tagged and
unioned: :func:`run_batches`).  Negative controls: for every profile parameter, the Spark oracle with that
parameter put back to canonical is caught on a workload where the parameter matters (all of them in one job too).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
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
from oij.spark.oracle import METHODS, Method, SparkOracleOptions, frame_to_results
from oij.spark.profiles import STREAM, spark_profile_oracle
from tests.budget import examples
from tests.strategies import event_lists, queries, workloads

EXACT = st.integers(-1000, 1000).map(lambda k: k / 4)  # sums exact in any order

Batch = tuple[Query, list[list[Event]]]


@pytest.fixture(scope="module", autouse=True)
def no_constraint_propagation(spark: Any) -> Iterator[None]:
    """The module's Spark oracles planned without Catalyst's constraint propagation (an optimizer rule: it infers
    filters, never changes a result; its cost grows with the CASE expressions and self-joins these plans are made
    of: this file 80.7 CPU-seconds with it, 68.2 without); the session's setting is put back after the module.
    ``oij check`` keeps it (the bare-install test runs it on Spark's defaults)."""
    key = "spark.sql.constraintPropagation.enabled"
    old = spark.conf.get(key, None)
    spark.conf.set(key, "false")
    yield
    if old is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, old)


@st.composite
def batches(draw: st.DrawFn, size: int = 20, max_events: int = 25, lateness: bool | None = None) -> Batch:
    """A query (in lateness mode or with watermark lines, if ``lateness`` says which) and ``size`` arrival
    sequences for it; some lose their end event (no flush can happen)."""
    q = draw(queries(cond=False, lateness=lateness))
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


Job = tuple[Query, list[list[Event]], Profile, Method]
"""A query, its streams, a profile and a join method: one Spark oracle of :func:`run_batches`."""


def run_batches(spark: Any, jobs: list[Job]) -> list[list[Results]]:
    """Each job's results, one per stream, from ONE Spark job: each job (a query, its streams, a profile, a join
    method) is its own Spark oracle (:func:`spark_profile_oracle` on its own frame), and their result frames are
    tagged with the job's index, unioned and collected once (each oracle's plan is still built, but one job is
    scheduled instead of one per oracle: measured, about 1.5 CPU-seconds per oracle instead of 1.8 to 2.7).  Each
    job's rows go through the oracle's own conversion (:func:`frame_to_results`)."""
    from pyspark.sql import functions as F

    results, backs, frames = [], [], []
    try:
        for i, (q, streams, p, method) in enumerate(jobs):
            renumbered, back = _renumber(streams)
            res = spark_profile_oracle(spark, q, batch_frame(spark, renumbered), p,
                                       SparkOracleOptions(method=method))
            results.append(res)
            backs.append(back)
            frames.append(res.frame().withColumn(JOB, F.lit(i)))
        union = frames[0]
        for f in frames[1:]:
            union = union.unionByName(f)
        rows: list[list[Any]] = [[] for _ in jobs]
        for r in union.collect():
            rows[r[JOB]].append(r)
        return [split(frame_to_results(_Rows(rows[i]), q), backs[i], len(streams))
                for i, (q, streams, _, _) in enumerate(jobs)]
    finally:
        for res in results:
            res.release()


JOB = "_job"
"""The column of the unioned result frames that names the job of each row (:func:`run_batches`)."""


@dataclasses.dataclass
class _Rows:
    """Collected rows, as the frame :func:`frame_to_results` collects."""

    rows: list[Any]

    def collect(self) -> list[Any]:
        return self.rows


@given(lateness=batches(lateness=True), watermarks=batches(lateness=False), start=st.integers(0, 5))
@settings(max_examples=examples(1, 4), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_each_profile_in_spark_equals_the_spec(spark: Any, lateness: Batch, watermarks: Batch, start: int) -> None:
    """Every profile on a batch of its own, all judged in one Spark job (:func:`run_batches`): the profiles take
    the batch in lateness mode and the one with watermark lines in turn, and the join methods in turn (``start``
    drawn), so that each example meets both modes of W (and with them the parameters that matter only in one:
    ``side_combine``, ``lateness_shift``; ``channel_combine``) and every method serves several profiles.  (One
    example is one batch per profile, as one example per profile was; OIJ_TESTS=full runs four.)"""
    assume(all(sum(len(s) for s in b[1]) >= 100 for b in (lateness, watermarks)))  # not the simplest draws
    names = list(PROFILES)
    modes = [(lateness, watermarks)[(i + start) % 2] for i in range(len(names))]
    jobs = [(q, streams, PROFILES[n], METHODS[(i + start) % len(METHODS)])
            for i, (n, (q, streams)) in enumerate(zip(names, modes, strict=True))]
    for (q, streams, p, _), got in zip(jobs, run_batches(spark, jobs), strict=True):
        for ev, g in zip(streams, got, strict=True):
            want = compute_profile_result(ev, q, p)
            assert agrees(g, want), (p.name, q, ev, g, want)


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


def _separating(label: str) -> tuple[Profile, Profile, Query, list[Event]]:
    """The profile of ``label``, its wrong variant (the parameter put back to canonical), and a workload where
    the parameter changes the spec's result (the first that Hypothesis' ``find`` draws, derandomized, spec
    only)."""
    p = {**PARAMS, **MORE}[label]
    wrong = without(p, param=label.split("=")[0])
    q, ev = find(workloads(max_events=25, values=EXACT, cond=False),
                 lambda w: compute_profile_result(w[1], w[0], p) != compute_profile_result(w[1], w[0], wrong),
                 settings=settings(database=None, derandomize=True, max_examples=5000, deadline=None,
                                   phases=[Phase.generate]))
    return p, wrong, q, ev


@pytest.fixture(scope="module")
def caught(spark: Any) -> dict[str, tuple[bool, str]]:
    """Per label: whether the Spark oracle with that parameter put back to canonical disagrees with the spec on
    its separating workload, and what it said; every wrong variant is run in ONE Spark job (:func:`run_batches`),
    which a job per label cost fifteen times over."""
    labels = [*PARAMS, *MORE]
    found = [_separating(label) for label in labels]
    # the plain join: the cheapest plan (the method decides how pairs are found, never which; every method meets
    # every profile parameter in test_each_profile_in_spark_equals_the_spec)
    jobs: list[Job] = [(q, [ev], wrong, "plain") for _, wrong, q, ev in found]
    out = {}
    for label, (p, _, q, ev), (got,) in zip(labels, found, run_batches(spark, jobs), strict=True):
        want = compute_profile_result(ev, q, p)
        out[label] = (not agrees(got, want), f"{label}: dropping it went unseen: {q} {ev} {got} {want}")
    return out


@pytest.mark.parametrize("label", [*PARAMS, *MORE])
def test_a_spark_oracle_that_ignores_a_parameter_is_caught(caught: dict[str, tuple[bool, str]], label: str) -> None:
    """A workload where the parameter changes the spec's result; the Spark oracle with that parameter put back to
    canonical must disagree with the spec there (all labels' wrong oracles judged in one job: ``caught``)."""
    seen, why = caught[label]
    assert seen, why
