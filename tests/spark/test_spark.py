"""The Spark layer: Spark oracle == sequential oracle, salting (PPOIJ Alg. 1), the ``oij check`` pipeline.

One SparkSession (``local[2]``) serves the whole run (session-scoped
fixture); ``oij check`` run in-process reuses it.  The pipeline on a cluster,
where closures and serialization cross process boundaries, runs in
tests/spark/test_spark_scale.py (on the standalone cluster that test starts).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oij.parallel import registry
from oij.parallel.registry import EngineOptions, EngineRun
from oij.reference.oracle import run_events
from oij.spec.batch import Results
from oij.spec.model import TS_LIMIT, End, Event, Query, StreamTuple, Watermark

from oij.cli import main
from oij.io.errors import InputError
from oij.io.parquet import write_parquet
from oij.spark.compare import compare_results
from oij.spark.frames import events_frame, materialize, read_parquet_events, validate_events
from oij.spark.oracle import METHODS, SparkOracleOptions, run_spark_oracle, spark_oracle
from oij.spark.salting import assign_replicas, is_balanced, split_degrees
from oij.spark.session import SparkUnavailable, check_java
from oij.spark.workload import builtin_workload
from tests.budget import examples
from tests.strategies import event_lists, queries

pytestmark = pytest.mark.spark

# Values whose partial sums are exact in doubles: Spark's sum then equals the exact spec bit for bit.
EXACT_VALUES = st.one_of(st.sampled_from([0.0, -0.0, 1.0, -1.0]), st.integers(-8000, 8000).map(lambda i: i / 8))


def assert_same(got: Results, want: Results) -> None:
    """Pairs and late ids equal; aggregates equal within 1e-9 relative (exact here, given EXACT_VALUES)."""
    assert got.pairs == want.pairs
    assert got.late == want.late
    c = compare_results(want, got)
    assert c.agrees, c.differences
    assert [(a, n) for a, n, _ in got.aggregates] == [(a, n) for a, n, _ in want.aggregates]


# ---------------------------------------------------------------- Alg. 1 (pure)


def test_alg1_uniform_keys_are_not_split() -> None:
    a = assign_replicas([0.1] * 10, 5, theta=1.2)
    assert a.split == [1] * 10
    assert is_balanced(a.loads, 1.2)


def test_alg1_hot_key_is_split_until_balanced() -> None:
    # PPOIJ Fig. 2: k0 60%, k1 and k2 20% each, two replicas: k0 must be shared.
    # Greedy placement gives loads 0.6 / 0.4 (factor 1.2): within theta=1.25 nothing is split ...
    assert assign_replicas([0.6, 0.2, 0.2], 2, theta=1.25).split == [1, 1, 1]
    # ... with theta=1.1 Alg. 1 splits k0, then (still unbalanced) k1 and k2, reaching 0.5 / 0.5.
    a = assign_replicas([0.6, 0.2, 0.2], 2, theta=1.1)
    assert a.split == [2, 2, 2] and a.loads == pytest.approx([0.5, 0.5])
    assert a.key2r[0] == [0, 1]


def test_alg1_max_split_caps_the_degree() -> None:
    a = assign_replicas([0.97, 0.01, 0.01, 0.01], 8, theta=1.0, max_split=3)
    assert max(a.split) == 3


@given(st.lists(st.floats(0.001, 1.0), min_size=1, max_size=30), st.integers(1, 8), st.floats(1.0, 2.0))
@settings(max_examples=150, deadline=None)
def test_alg1_invariants(freqs: list[float], n: int, theta: float) -> None:
    a = assign_replicas(freqs, n, theta)
    assert abs(sum(a.loads) - sum(freqs)) < 1e-9
    for i, reps in enumerate(a.key2r):
        assert len(reps) == len(set(reps)) == a.split[i] and 1 <= a.split[i] <= n
    if not is_balanced(a.loads, theta):
        assert all(s == n for s in a.split)  # stopped only because nothing can be split any more


def test_split_degrees_with_background_load() -> None:
    s, bf = split_degrees([50.0, 1.0], 49.0, 4, theta=1.2)
    assert s[0] >= 2 and s[0] >= s[1]
    assert bf <= 1.2


# ---------------------------------------------------------- Spark oracle == sequential oracle


@st.composite
def segmented(draw: st.DrawFn, cond: bool | None = None, segments: int = 3) -> tuple[Query, list[Event]]:
    """A query and an arrival sequence of 1 to ``segments`` segments, each one of tests.strategies' arrival
    sequences for the query (its own origin, clock, disorder, watermarks and late tuples; the ids renumbered to
    stay unique), then one End.  One Spark job judges them all: each run of the Spark oracle costs about a
    CPU-second of planning and scheduling, whatever its size; and a segment after another meets the watermark
    the first left (a jump forward or back of the clock, tuples late by far)."""
    q = draw(queries(cond=cond))
    events: list[Event] = []
    next_id = draw(st.sampled_from([0, 1, -50, 10**12]))
    for _ in range(draw(st.integers(1, segments))):
        for e in draw(event_lists(q, max_events=30, values=EXACT_VALUES)):
            if isinstance(e, StreamTuple):
                events.append(e._replace(id=next_id))
                next_id += 1
            elif not isinstance(e, End):
                events.append(e)
    events.append(End())
    return q, events


@given(segmented(), st.sampled_from(METHODS), st.sampled_from([1 << 20, 3]))
@settings(max_examples=examples(5, 25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_spark_oracle_equals_sequential(spark: Any, wl: tuple[Query, list[Event]], method: Any, block: int) -> None:
    q, events = wl
    got = run_spark_oracle(spark, q, events, SparkOracleOptions(method=method, block=block, replicas=2, salt_from=0))
    assert_same(got, run_events(events, q))


@given(segmented(cond=True), st.sampled_from(METHODS))
@settings(max_examples=examples(3, 12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_spark_oracle_pushes_the_cond_into_the_join(spark: Any, wl: tuple[Query, list[Event]], method: Any) -> None:
    q, events = wl
    got = run_spark_oracle(spark, q, events, SparkOracleOptions(method=method, replicas=2, salt_from=0))
    assert_same(got, run_events(events, q))


def _skewed(n: int, hot_share: float, q: Query) -> list[Event]:
    """n tuples, keys 0..9 with key 0 holding ``hot_share`` of them, in ts order, one watermark per 50."""
    out: list[Event] = []
    for i in range(n):
        key = 0 if (i * 7919) % 1000 < hot_share * 1000 else 1 + i % 9
        out.append(StreamTuple("base" if i % 2 else "probe", i, i, key, float(i % 16) / 4))
        if i % 50 == 49:
            out.append(Watermark(i - 30))
    out.append(End())
    return out


@pytest.mark.parametrize("agg", [None, "sum", "max"])
def test_salting_splits_the_hot_group_and_keeps_the_result(spark: Any, agg: Any) -> None:
    q = Query(-2000, 0, aggregate=agg, join="left")  # one bucket per key: key 0 is one hot group
    events = _skewed(600, 0.7, q)
    res = spark_oracle(spark, q, events_frame(spark, events, q),
                       SparkOracleOptions(method="salted", replicas=4, salt_from=0))
    try:
        assert res.plan["salted_groups"] >= 1 and res.plan["max_salt"] >= 2
        assert res.plan["load_balance_factor"] <= 1.2
        assert_same(res.collect(), run_events(events, q))
    finally:
        res.release()


def test_int_and_str_keys_stay_apart(spark: Any) -> None:
    q = Query(-5, 5)
    events: list[Event] = [
        StreamTuple("base", 1, 10, 1), StreamTuple("probe", 2, 10, "1"), StreamTuple("probe", 3, 11, 1),
        StreamTuple("base", 4, 10, "i:1"), End(),
    ]
    got = run_spark_oracle(spark, q, events)
    assert got.pairs == [(1, 3)] == run_events(events, q).pairs


def test_the_salting_statistics_start_at_salt_from_tuples_and_take_one_job_when_every_group_is_in_hand(
        spark: Any) -> None:
    """Alg. 1's statistics, on 10 (key, bucket) groups of which key 0 is the hot one, three oracle calls:

    * below ``salt_from`` tuples the salted join is the bucketed one: no statistics, the plan says so;
    * at ``salt_from`` they are computed and the hot group split; with at most ``heavy_groups`` groups (the
      default), the heaviest ones listed are all of them and no job sums the rest;
    * with more (``heavy_groups=4``), a second job sums them.

    Every call keeps the result.  Negative controls for the counts: the threshold is where the plan changes, not
    elsewhere (one tuple fewer skips them, at least one job fewer), and the second path runs exactly one job
    more."""
    q = Query(-2000, 0)  # one bucket per key
    events = _skewed(600, 0.7, q)
    want = run_events(events, q)
    n = sum(1 for e in events if isinstance(e, StreamTuple))
    sc = spark.sparkContext
    jobs: dict[str, int] = {}
    for name, salt_from, heavy in (("skipped", n + 1, None), ("all-in-hand", n, None), ("summed", n, 4)):
        group = f"oij-salt-{name}"
        sc.setJobGroup(group, "salting statistics")
        try:
            res = spark_oracle(spark, q, events_frame(spark, events, q),
                               SparkOracleOptions(method="salted", replicas=4, heavy_groups=heavy,
                                                  salt_from=salt_from))
            try:
                assert_same(res.collect(), want)
                if name == "skipped":
                    assert res.plan["salting"] == f"skipped: {n} tuples, fewer than {n + 1}", res.plan
                    assert "salted_groups" not in res.plan
                else:
                    assert "salting" not in res.plan, res.plan
                    assert res.plan["salted_groups"] >= 1 and res.plan["max_salt"] >= 2, res.plan
            finally:
                res.release()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        jobs[name] = len(sc.statusTracker().getJobIdsForGroup(group))
    assert jobs["all-in-hand"] >= jobs["skipped"] + 1, jobs
    assert jobs["summed"] == jobs["all-in-hand"] + 1, jobs


def test_extreme_timestamps_and_bounds(spark: Any) -> None:
    big = (1 << 62) - 5
    q = Query(-TS_LIMIT, TS_LIMIT, lower_inclusive=False, aggregate="count")
    events: list[Event] = [
        StreamTuple("base", 1, big, 0), StreamTuple("probe", 2, -big, 0), StreamTuple("probe", 3, big, 0),
        StreamTuple("base", 4, -big, 0), End(),
    ]
    for m in METHODS:
        got = run_spark_oracle(spark, q, events, SparkOracleOptions(method=m, salt_from=0))
        assert_same(got, run_events(events, q))


def test_parquet_fast_path(spark: Any, tmp_path: Path) -> None:
    q, it = builtin_workload(3000, seed=5)
    events = list(it)
    path = str(tmp_path / "w.parquet")
    write_parquet(path, q, events, key_type="int")
    q2, frame = read_parquet_events(spark, path)
    assert q2 == q
    assert validate_events(frame, q, path) == len(events)
    res = spark_oracle(spark, q, frame)
    try:
        assert_same(res.collect(), run_events(events, q))
    finally:
        res.release()


def test_materialize_keeps_or_streams(tmp_path: Path) -> None:
    q = Query(0, 1)
    events: list[Event] = [StreamTuple("base", i, i, i % 2 if i % 3 else "x") for i in range(10)]
    events.append(End())
    kept, n = materialize(q, iter(events), str(tmp_path / "a.parquet"), keep_limit=100)
    assert kept == events and n == 11
    kept, n = materialize(q, iter(events), str(tmp_path / "b.parquet"), keep_limit=4, chunk=3)
    assert kept is None and n == 11
    t = pq.read_table(str(tmp_path / "b.parquet"))
    assert t.column("pos").to_pylist() == list(range(11))
    assert t.column("key").to_pylist()[:3] == ["s:x", "i:1", "i:0"]
    # more than keep_limit but fewer than one chunk: all of it is written (it once wrote an empty file and
    # returned [], so that `oij check small.jsonl --seq-limit 0` checked an empty workload)
    kept, n = materialize(q, iter(events), str(tmp_path / "c.parquet"), keep_limit=0)
    assert kept is None and n == 11
    assert pq.read_table(str(tmp_path / "c.parquet")).column("id").to_pylist()[:10] == list(range(10))


# ------------------------------------------------------------------ bad input


def _bad_parquet(path: str, rows: dict[str, list[Any]], q: Query) -> None:
    from oij.io.jsonlwrite import format_query
    from oij.io.parquet import META_KEY

    t = pa.table(rows)
    pq.write_table(t.replace_schema_metadata({META_KEY: format_query(q).encode()}), path)


def test_validate_events_names_the_row(spark: Any, tmp_path: Path) -> None:
    q = Query(0, 1)
    path = str(tmp_path / "dup.parquet")
    _bad_parquet(path, {
        "type": ["tuple", "tuple", "tuple", "end"], "side": ["base", "probe", "probe", None],
        "id": [1, 2, 1, None], "ts": [1, 2, 3, None], "key": [1, 1, 1, None],
    }, q)
    _, frame = read_parquet_events(spark, path)
    with pytest.raises(InputError, match=r"dup.parquet:3: id: duplicate id 1"):
        validate_events(frame, q, path)
    path2 = str(tmp_path / "noend.parquet")
    _bad_parquet(path2, {"type": ["tuple", "watermark"], "side": ["sideways", None], "id": [1, None],
                         "ts": [1, 2], "key": [1, None]}, q)
    _, frame = read_parquet_events(spark, path2)
    with pytest.raises(InputError, match=r"noend.parquet:1: side"):
        validate_events(frame, q, path2)


def test_check_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any) -> None:
    out = str(tmp_path / "o")
    assert main(["check", str(tmp_path / "missing.jsonl"), "--out", out, "--no-progress"]) == 2
    assert main(["check", str(tmp_path / "missing.parquet"), "--out", out, "--no-progress"]) == 2
    bad = str(tmp_path / "bad.parquet")
    _bad_parquet(bad, {"type": ["tuple", "end"], "ts": ["1", None]}, Query(0, 1))
    assert main(["check", bad, "--out", out, "--no-progress"]) == 2
    assert main(["check", "--engines", "nope", "--out", out, "--no-progress"]) == 2
    assert main(["check", "--patterns", "blocks-nope", "--out", out, "--no-progress"]) == 2  # the older name
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 5 and all(line.startswith("oij: error: ") for line in err)
    assert "missing.jsonl" in err[0] and "No such file" in err[0]
    assert "missing.parquet" in err[1] and "No such file" in err[1]
    assert "ts: schema mismatch" in err[2]
    assert "unknown engine 'nope'" in err[3]
    assert "--engines: unknown engine 'blocks-nope'" in err[4]


def test_java_not_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkUnavailable, match="openjdk-17-jre-headless"):
        check_java()
    assert main(["check", "--out", str(tmp_path / "o"), "--no-progress", "--events", "100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Java not found" in err[0] and "apt-get install openjdk-17-jre-headless" in err[0]
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert main(["check", "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "has no bin/java" in capsys.readouterr().err


def test_check_large_parquet_uses_spark_only(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    q, it = builtin_workload(800, seed=2)
    good = str(tmp_path / "good.parquet")
    write_parquet(good, q, list(it), key_type="int")
    out = tmp_path / "out"
    assert main(["check", good, "--seq-limit", "10", "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert [r["engine"] for r in report["engines"]] == ["spark-oracle"]
    bad = str(tmp_path / "bad.parquet")
    _bad_parquet(bad, {"type": ["tuple", "tuple", "end"], "side": ["base", "probe", None], "id": [1, 2, None],
                       "ts": [1, 2, None], "key": [1, 1, None], "channel": [0, 3, None]}, Query(0, 1))
    capsys.readouterr()
    assert main(["check", bad, "--seq-limit", "0", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"oij: error: {bad}:2: channel: must be an integer in [0, 1)"]


# -------------------------------------------------- the pipeline catches planted disagreements


def _planted(change: str) -> Any:
    """An engine that runs the oracle and then plants differences (never registered outside a test): ``mixed``
    drops one pair, duplicates another and loses the first late id (each a difference of its own kind and
    issue, all three judged in one comparison); ``nudge`` and ``tiny`` move the first non-zero aggregate value by
    1e-6 and 1e-12 relative."""

    def engine(q: Query, events: Sequence[Event], opts: EngineOptions) -> EngineRun:
        res = run_events(events, q)
        if change in ("drop", "mixed"):
            res.pairs.pop(len(res.pairs) // 2)
        if change in ("dup", "mixed"):
            res.pairs.append(res.pairs[len(res.pairs) // 3])
        if change in ("late", "mixed"):
            res.late.pop(0)
        if change in ("nudge", "tiny"):
            i = _first_nonzero(res)
            a, n, v = res.aggregates[i]
            assert isinstance(v, float)
            res.aggregates[i] = (a, n, v * (1 + (1e-6 if change == "nudge" else 1e-12)) + 1e-300)
        return EngineRun(res, {"throughput_tuples_per_s": 123.0, "latency_ms": {"p99": 4.5},
                               "load_balance_factor": 1.25})

    return engine


def _first_nonzero(res: Results) -> int:
    """The index of the first aggregate row with a non-zero value (a zero moved by a relative amount stays 0)."""
    return next(i for i, (_, _, v) in enumerate(res.aggregates) if v)


@pytest.mark.parametrize("spark_flag", ["--spark", "--no-spark"])
def test_check_reports_exactly_the_planted_pair(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spark_flag: str
) -> None:
    """Each planted difference is reported, exactly, by the comparison in Spark (--spark: the Spark oracle is the
    reference, the seq-oracle its agreeing control) and in Python (--no-spark: the seq-oracle is the reference,
    ``same`` the agreeing control).  With Spark the three differences are planted in one engine (``mixed``):
    every engine's output costs a fingerprint and a comparison job; without Spark in one engine each as well."""
    names = ("mixed",) if spark_flag == "--spark" else ("mixed", "drop", "dup", "late", "same")
    for name in names:
        monkeypatch.setitem(registry._ENGINES, name, _planted(name))
        monkeypatch.setitem(registry._DESCRIPTIONS, name, "negative control")
    q, it = builtin_workload(1500, seed=3)
    want = run_events(list(it), q)
    out = tmp_path / "out"
    rc = main(["check", "--preset", "builtin-small", "--events", "1500", "--seed", "3", "--out", str(out),
               "--no-progress", "--engines", ",".join(names), spark_flag])
    assert rc == 1
    report = json.loads((out / "report.json").read_text())
    rows = {r["engine"]: r for r in report["engines"]}
    assert report["reference"] == ("spark-oracle" if spark_flag == "--spark" else "seq-oracle")
    assert rows["seq-oracle"]["agrees"]
    dropped = want.pairs[len(want.pairs) // 2]
    dup = want.pairs[len(want.pairs) // 3]
    assert dropped != dup
    m = rows["mixed"]
    assert (m["agrees"], m["missing"], m["extra"], m["wrong"]) == (False, 2, 1, 0)
    by_kind = {k: {i: n for i, n in v.items() if n} for k, v in m["by_kind"].items()}
    assert by_kind == {"pair": {"missing": 1, "extra": 1}, "late": {"missing": 1}}, m["by_kind"]
    assert [(x["kind"], x["issue"], x["base"], x["probe"], x["id"], x["n"]) for x in m["differences"]] == sorted(
        [("late", "missing", None, None, want.late[0], 1), ("pair", "missing", *dropped, None, 1),
         ("pair", "extra", *dup, None, 1)], key=lambda d: (d[0], d[2] or 0, d[3] or 0, d[4] or 0))
    assert m["throughput"] == 123.0 and m["p99_ms"] == 4.5 and m["load_balance"] == 1.25
    if spark_flag == "--no-spark":
        assert rows["same"]["agrees"]
        d = rows["drop"]
        assert (d["agrees"], d["missing"], d["extra"], d["wrong"]) == (False, 1, 0, 0)
        assert [(x["kind"], x["issue"], x["base"], x["probe"]) for x in d["differences"]] == [
            ("pair", "missing", *dropped)
        ]
        d = rows["dup"]
        assert (d["missing"], d["extra"]) == (0, 1)
        assert [(x["kind"], x["issue"], x["base"], x["probe"], x["n"]) for x in d["differences"]] == [
            ("pair", "extra", *dup, 1)
        ]
        d = rows["late"]
        assert (d["missing"], d["extra"]) == (1, 0)
        assert d["differences"][0]["id"] == want.late[0] and d["differences"][0]["kind"] == "late"
    md = (out / "report.md").read_text()
    assert f"missing pair ({dropped[0]}, {dropped[1]})" in md and f"extra pair ({dup[0]}, {dup[1]})" in md
    stdout = capsys.readouterr().out
    assert "mixed" in stdout and "NO" in stdout
    parts = sorted(p.name for p in (out / "results").iterdir())
    want_parts = {f"engine={n}" for n in (*names, "seq-oracle")}
    if spark_flag == "--spark":
        want_parts.add("engine=spark-oracle")
    assert set(parts) == want_parts


def test_check_default_runs_clean_and_flags_wrong_aggregates_at_1e9(spark: Any, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``oij check`` as it runs by default (the default preset, an aggregate query, Spark the reference): the
    seq-oracle agrees with the Spark oracle; an aggregate value moved 1e-12 relative agrees (within the 1e-9 of
    the comparison), one moved 1e-6 is the one wrong row.  (One run: each of these outputs costs a
    fingerprint; a clean run's exit 0 with Spark is test_check_large_parquet_uses_spark_only's and
    tests/testing/test_check_got.py's.)"""
    from oij.check.options import DEFAULT_PRESET
    from oij.workloads import generate

    for name in ("nudge", "tiny"):
        monkeypatch.setitem(registry._ENGINES, name, _planted(name))
    q, it = generate(DEFAULT_PRESET, 3000, 1)
    assert q.aggregate is not None
    want = run_events(list(it), q)
    out = tmp_path / "out"
    assert main(["check", "--events", "3000", "--engines", "nudge,tiny", "--out", str(out), "--no-progress"]) == 1
    report = json.loads((out / "report.json").read_text())
    assert report["reference"] == "spark-oracle" and not report["all_agree"]
    rows = {r["engine"]: r for r in report["engines"]}
    assert list(rows) == ["spark-oracle", "seq-oracle", "nudge", "tiny"]
    assert rows["seq-oracle"]["agrees"] is True and rows["tiny"]["agrees"] is True
    n = rows["nudge"]
    assert (n["missing"], n["extra"], n["wrong"]) == (0, 0, 1)
    base = want.aggregates[_first_nonzero(want)][0]
    assert n["differences"][0]["base"] == base and n["differences"][0]["issue"] == "wrong"
