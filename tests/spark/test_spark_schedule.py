"""The judge up to schedule on Spark (:mod:`oij.spark.schedule`) gives :func:`oij.reference.schedule.judge`'s
verdict, witness kinds, loosest and tightest schedules and stats on drawn cases (admissible outputs and perturbed
ones; every family, the floor, the lag bounds, left joins, aggregates), with blocks of two positions so that every
carry between blocks matters; negative controls: a carry dropped between blocks, and the suffix minimum taken as
a prefix minimum, each disagree with the reference on a fixed case.  ``oij check --schedule any`` runs on Spark
when given a ``--master`` (and says so in its report), on one machine with ``--no-spark``; a bad query is one line
and exit 2; an aggregate output that W* does not explain is *undetermined* on Spark, naming ``--no-spark``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oij.reference import schedule as rs
from oij.spec.batch import Results, compute_batch
from oij.spec.model import BASE, PROBE, End, Query, StreamTuple
from oij.spec.profiles import CANONICAL, PROFILES, Profile
from oij.spec.schedule import Family, eager_bounds, flink_instance, result_under_schedule

from oij.cli import main
from oij.io.jsonlwrite import result_lines
from oij.spark import schedule as ss
from oij.spark.compare import engine_dir, write_results
from oij.spark.frames import materialize, read_parquet_events
from tests.reference.test_schedule import perturb

pytestmark = pytest.mark.spark

PROFILE_NAMES = ["canonical", "spark-ss", "flink-datastream", "late-le", "lateness-per-input"]
BLOCK = 2
"""Positions per block of the Spark judge's scans here: most tuples get a carry from the blocks before."""


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[StreamTuple], Query, Profile, Family, Results]:
    """Up to 12 tuples; an output of a drawn monotone schedule under the eager bound (admissible for every
    family without a lag bound), perturbed or not."""
    n = draw(st.integers(3, 12))
    lower = draw(st.integers(-4, 1))
    upper = lower + draw(st.integers(0, 4))
    agg = draw(st.sampled_from([None, None, None, "count", "sum"]))
    join = draw(st.sampled_from(["inner", "left"])) if agg is None else "inner"
    q = Query(lower=lower, upper=upper, lateness=draw(st.integers(0, 4)), aggregate=cast(Any, agg),
              join=cast(Any, join))
    p = PROFILES[draw(st.sampled_from(PROFILE_NAMES))]
    if not p.end_flush and (agg is not None or join == "left"):
        p = CANONICAL
    tuples = [StreamTuple(draw(st.sampled_from([BASE, PROBE])), i + 1, draw(st.integers(0, 12)),
                          draw(st.sampled_from([0, 1, 2])), float(draw(st.integers(-2, 3)))) for i in range(n)]
    order = draw(st.sampled_from(["arrival", "input", "instance", "key"]))
    lag = draw(st.sampled_from([None, ("time", 3), ("tuples", 2)]))
    f = Family(cast(Any, order), instances=flink_instance(2) if order == "instance" else None,
               floor=draw(st.sampled_from([None, 0])), lag_time=lag[1] if lag and lag[0] == "time" else None,
               lag_tuples=lag[1] if lag and lag[0] == "tuples" else None)
    e = eager_bounds(tuples, q, p, f)
    w = [min(a, b) for a, b in zip(sorted(draw(st.lists(st.integers(-3, 14), min_size=n, max_size=n))), e,
                                   strict=True)]
    for j in range(n - 2, -1, -1):
        w[j] = min(w[j], w[j + 1])
    got = result_under_schedule(tuples, w, q, p)
    if draw(st.booleans()):
        got.late = []
    perturb(draw, got, tuples, draw(st.sampled_from(["none", "drop", "dup", "late", "agg"])))
    return tuples, q, p, f, got.canonical()


def _on_spark(spark: Any, tmp: Path, tuples: list[StreamTuple], q: Query, p: Profile, f: Family,
              got: Results) -> ss.SparkJudgement:
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "e.parquet"
    if path.exists():
        path.unlink()
    materialize(q, tuples, str(path), 1 << 20)
    write_results(str(tmp / "res"), "got", got)
    _, frame = read_parquet_events(spark, str(path), q)
    return ss.judge_spark(spark, frame, q, p, f, spark.read.parquet(engine_dir(str(tmp / "res"), "got")),
                          block=BLOCK)


def _differences(spark: Any, tmp: Path, case: tuple[list[StreamTuple], Query, Profile, Family, Results]) -> list[str]:
    """What the Spark judge says differently from the reference judge (empty: the same)."""
    tuples, q, p, f, got = case
    want = rs.judge(rs.TupleColumns.of(tuples), q, p, f, got)
    sj = _on_spark(spark, tmp, tuples, q, p, f, got)
    try:
        have = sj.judgement
        out = []
        if have.undetermined:  # only where the exact search runs: an aggregate output that W* does not explain
            if q.aggregate is None or not (want.admissible or [w.kind for w in want.witnesses] == ["aggregate"]):
                out.append(f"undetermined on Spark, reference {want.admissible} {want.witnesses}")
            return out
        if have.admissible != want.admissible:
            out.append(f"verdict {have.admissible} != {want.admissible}")
        if sorted(w.kind for w in have.witnesses) != sorted(w.kind for w in want.witnesses):
            out.append(f"witnesses {[w.kind for w in have.witnesses]} != {[w.kind for w in want.witnesses]}")
        if have.admissible and want.admissible:
            assert want.w_max is not None and want.w_tight is not None
            w_max, w_tight = sj.schedules()
            if w_max != [int(x) for x in want.w_max]:
                out.append(f"w_max {w_max} != {list(want.w_max)}")
            if w_tight != [int(x) for x in want.w_tight]:
                out.append(f"w_tight {w_tight} != {list(want.w_tight)}")
            if have.stats != want.stats:
                out.append(f"stats {have.stats} != {want.stats}")
        return out
    finally:
        sj.release()


@settings(max_examples=4, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(cases())
def test_the_spark_judge_agrees_with_the_reference_judge(spark: Any, tmp_path: Path, case: Any) -> None:
    assert _differences(spark, tmp_path / "h", case) == []


def _fixed_case() -> tuple[list[StreamTuple], Query, Profile, Family, Results]:
    """Ten tuples of rising ts, then a base and a probe of ts 1 whose pair the output has: they keep W* at 0
    back to the first tuple (a suffix minimum carried over every block), and the output is the plain batch
    join (W = -inf)."""
    ts = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 1]
    tuples = [StreamTuple(BASE if i % 2 == 0 else PROBE, i + 1, t, 0, 1.0) for i, t in enumerate(ts)]
    q = Query(lower=-1, upper=1, lateness=0)
    return tuples, q, CANONICAL, Family("arrival"), compute_batch(tuples, q).canonical()


def test_each_mutant_of_the_spark_judge_disagrees_with_the_reference(spark: Any, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Each mutant disagrees with the reference judge on the fixed case; the unmutated judge (judged once for
    both) agrees on it."""
    from pyspark.sql import functions as F

    case = _fixed_case()
    assert _differences(spark, tmp_path, case) == []
    orig = ss.combine_carry
    mutants = {"carry-dropped": (ss, "combine_carry", lambda op, carry, inner: orig(op, F.lit(None), inner)),
               "suffix-as-prefix": (ss, "scan_order", lambda col, reverse: F.col(col).asc())}
    for mutant, (mod, name, fn) in mutants.items():
        with monkeypatch.context() as m:
            m.setattr(mod, name, fn)
            assert _differences(spark, tmp_path, case), mutant


def _write(path: Path, res: Results) -> str:
    path.write_text("".join(result_lines(res)))
    return str(path)


def _events(path: Path, tuples: list[StreamTuple], q: Query) -> str:
    from oij.testing._case import Case

    path.write_text(Case(q, (*tuples, End())).to_jsonl())
    return str(path)


def test_oij_check_runs_the_judge_on_spark_when_given_a_master(spark: Any, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``--master`` given: the judge runs on Spark and says so; the report's fields are the one-machine judge's
    (same verdict and stats with --no-spark).  An aggregate output only another schedule than W* explains is
    undetermined on Spark (exit 1) and admissible on one machine; a profile that cannot be judged is one line,
    exit 2."""
    tuples, q, _, _, got = _fixed_case()
    ev = _events(tmp_path / "e.jsonl", tuples, q)
    g = _write(tmp_path / "g.jsonl", got)
    rc = main(["check", ev, "--got", f"me={g}", "--schedule", "any", "--master", "local[2]", "--out",
               str(tmp_path / "o1"), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0 and "judged on Spark (master local[2])" in out, out
    rep = json.loads((tmp_path / "o1" / "report.json").read_text())
    rc = main(["check", ev, "--got", f"me={g}", "--schedule", "any", "--no-spark", "--out", str(tmp_path / "o2"),
               "--no-progress"])
    assert rc == 0 and "judged on Spark" not in capsys.readouterr().out
    loc = json.loads((tmp_path / "o2" / "report.json").read_text())
    assert _judged(rep)["ran_on"] == "spark"
    assert _judged(loc)["ran_on"] == "one machine"
    assert _judged(rep)["stats"] == _judged(loc)["stats"] and _judged(rep)["admissible"]
    # an aggregate output: count 2 needs the late probe 3 on time, which W* makes late
    qa = Query(lower=0, upper=1, lateness=0, aggregate="count")
    ta = [StreamTuple(BASE, 1, 5, 0, 1.0), StreamTuple(PROBE, 2, 6, 0, 1.0), StreamTuple(PROBE, 3, 5, 0, 1.0)]
    eva = _events(tmp_path / "a.jsonl", ta, qa)
    ga = _write(tmp_path / "ga.jsonl", Results(aggregates=[(1, 2, 2)]))
    assert rs.judge(rs.TupleColumns.of(ta), qa, CANONICAL, Family("arrival"),
                    Results(aggregates=[(1, 2, 2)])).admissible
    rc = main(["check", eva, "--got", f"me={ga}", "--schedule", "any", "--master", "local[2]", "--out",
               str(tmp_path / "o3"), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 1 and "undetermined" in out and "--no-spark" in out, out
    rc = main(["check", eva, "--got", f"me={ga}", "--schedule", "any", "--no-spark", "--out", str(tmp_path / "o4"),
               "--no-progress"])
    assert rc == 0, capsys.readouterr().out
    # bad input: a left join under a profile with no flush at the end
    ql = Query(lower=0, upper=1, lateness=0, join="left")
    evl = _events(tmp_path / "l.jsonl", ta, ql)
    rc = main(["check", evl, "--got", f"me={ga}", "--schedule", "any", "--master", "local[2]", "--profile",
               "spark-ss", "--out", str(tmp_path / "o5"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "not judged up to schedule" in err, err
    assert not [x for x in os.listdir(tmp_path) if x.startswith("hs_err")]


def _judged(report: dict[str, Any]) -> dict[str, Any]:
    (row,) = [r for r in report["engines"] if r["engine"] == "me"]
    return cast(dict[str, Any], row["metrics"]["judged"])
