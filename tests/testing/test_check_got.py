"""``oij check EVENTS --got NAME=PATH``: another system's output judged against the oracle, each difference with a
small replay case (oij/testing/_got.py)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from oij.reference.oracle import run_events
from oij.spec.batch import Results

from oij.cli import main
from oij.io import open_events
from oij.io.errors import InputError
from oij.io.jsonlread import parse_result_lines
from oij.io.jsonlwrite import result_lines
from oij.testing._cases import Case
from oij.workloads import resolve, with_overrides, write_workload


def _workload(tmp_path: Path, aggregate: str | None) -> tuple[Path, Results]:
    w = tmp_path / f"w-{aggregate}.jsonl"
    write_workload(str(w), with_overrides(resolve("scale-oij-default"), {"aggregate": aggregate}), 3000, 3)
    q, events, f = open_events(str(w))
    try:
        res = run_events(list(events), q).canonical()
    finally:
        if f is not None:
            f.close()
    return w, res


def _read(w: Path) -> tuple[Any, list[Any]]:
    """The query and the events of an event file (or dataset)."""
    q, events, f = open_events(str(w))
    try:
        return q, list(events)
    finally:
        if f is not None:
            f.close()


def _write(path: Path, res: Results) -> Path:
    path.write_text("".join(result_lines(res)))
    return path


def _check(tmp_path: Path, w: Path, *args: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "chk"
    rc = main(["check", str(w), "--no-progress", "--out", str(out), *args])
    return rc, json.loads((out / "report.json").read_text())


def _subject(q_events: tuple[Any, list[Any]], ids: set[int]) -> tuple[Any, ...]:
    """The oracle's rows of a case that involve ``ids``."""
    q, evs = q_events
    r = run_events(evs, q).canonical()
    return (tuple(p for p in r.pairs if p[0] in ids or p[1] in ids), tuple(x for x in r.aggregates if x[0] in ids),
            tuple(x for x in r.late if x in ids))


# Spark in this process, on the worker's session (tests/conftest.py keeps these tests on one worker)
SPARK = [pytest.mark.spark, pytest.mark.spark_session]
MODES = {"memory": ["--no-spark"], "spark": [], "spark-only": ["--seq-limit", "0"]}
"""How oij check runs: all in memory; Spark beside the sequential oracle; Spark alone (replay cases from Spark)."""
NO_ATTRIBUTION = ["--attribute", "none"]
"""For the tests that judge rows and replay cases, not attribution: ``--attribute auto`` (the default) simulates all
15 named profiles over the whole stream whenever an output differs (3,000 events: ~20 s of a 25 s test, none of it
asserted on).  Attribution keeps its default in the tests about it (test_differences_are_attributed_..., the
flink-datastream replay test, the Spark ones past the limits)."""


@pytest.mark.parametrize("mode", ["memory", pytest.param("spark", marks=SPARK),
                                  pytest.param("spark-only", marks=SPARK)])
def test_injected_differences_are_found_with_small_replay_cases(tmp_path: Path, mode: str,
                                                                  request: pytest.FixtureRequest) -> None:
    """One pair dropped, one added; the replay case of each is at most 10 events, and in it the oracle's rows for
    the difference's ids are those of the whole stream (so the difference reproduces)."""
    if mode != "memory":
        request.getfixturevalue("spark")
    w, res = _workload(tmp_path, None)
    assert len(res.pairs) > 10
    dropped, added = res.pairs[5], (res.pairs[0][0], 10**9)
    bad = Results([p for p in res.pairs if p != dropped] + [added], [], res.late)
    rc, rep = _check(tmp_path, w, *MODES[mode], *NO_ATTRIBUTION, "--got", f"sys={_write(tmp_path / 'o', bad)}")
    assert rc == 1
    row = next(r for r in rep["engines"] if r["engine"] == "sys")
    assert (row["missing"], row["extra"], row["wrong"], row["agrees"]) == (1, 1, 0, False)
    cases = rep["replays"]["sys"]
    assert {c["difference"] for c in cases} == {f"missing pair ({dropped[0]}, {dropped[1]})",
                                                f"extra pair ({added[0]}, {added[1]})"}
    for c in cases:
        case = Case.from_jsonl(Path(c["file"]).read_text(), c["file"])
        assert len(case.events) <= 10
        ids = {x for x in dropped if x is not None} if "missing" in c["difference"] else {added[0]}
        small = _subject((case.query, list(case.events)), ids)
        if "missing" in c["difference"]:
            assert dropped in small[0]  # the oracle joins it in the small case too: the system lacks it
        else:
            assert added not in small[0]


@pytest.mark.parametrize("mode", ["memory", pytest.param("spark-only", marks=SPARK)])
def test_a_changed_aggregate_is_wrong_and_its_case_holds_the_window(tmp_path: Path, mode: str,
                                                                     request: pytest.FixtureRequest) -> None:
    """The replay case of a wrong aggregate holds its base and every probe in its window, from memory or (past
    --seq-limit) from Spark, and in it the oracle computes the whole stream's row for that base."""
    if mode != "memory":
        request.getfixturevalue("spark")
    w, res = _workload(tmp_path, "sum")
    a, n, v = next(r for r in res.aggregates if r[1] >= 2)
    bad = Results([], [(b, m, (x or 0) + 1 if b == a else x) for b, m, x in res.aggregates], res.late)
    rc, rep = _check(tmp_path, w, *MODES[mode], *NO_ATTRIBUTION, "--got", f"sys={_write(tmp_path / 'o', bad)}")
    assert rc == 1
    row = next(r for r in rep["engines"] if r["engine"] == "sys")
    assert (row["missing"], row["extra"], row["wrong"]) == (0, 0, 1)
    (c,) = rep["replays"]["sys"]
    case = Case.from_jsonl(Path(c["file"]).read_text(), c["file"])
    assert len(case.events) <= 2 * n + 2
    assert _subject((case.query, list(case.events)), {a})[1] == ((a, n, v),)


def test_the_right_output_agrees_in_any_format(tmp_path: Path) -> None:
    """Negative control of the above: the oracle's own output, as oij-jsonl and as CSV with other column names
    (--got-columns), agrees; exit 0."""
    w, res = _workload(tmp_path, None)
    csv = tmp_path / "o.csv"
    csv.write_text("a_id,b_id\n" + "".join(f"{a},{'' if b is None else b}\n" for a, b in res.pairs))
    late = tmp_path / "late.jsonl"
    assert not res.late  # the workload has no late tuple: the CSV of pairs is the whole output
    rc, rep = _check(tmp_path, w, "--no-spark", "--got", f"mine={_write(late, res)}", "--got", f"csv={csv}",
                     "--got-columns", "csv:base=a_id,probe=b_id")
    assert rc == 0, rep
    assert [r["agrees"] for r in rep["engines"]] == [True, True, True]


@pytest.mark.parametrize(("text", "where"), [
    ('{"type":"pair","base":1,"probe":2}\n{"type":"pair","base":"x","probe":2}\n', ":2: base: not an integer"),
    ('{"type":"pair","base":1,"probe":2}\nnot json\n', ":2: line: not JSON"),
    ('{"type":"aggregate","base":1,"count":-1,"value":2}\n', ":1: count: negative"),
    ('{"type":"wat","base":1}\n', ":1: kind: must be pair, aggregate or late"),
])
def test_a_bad_output_row_is_one_line_naming_file_row_and_field(tmp_path: Path, text: str, where: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    w, _ = _workload(tmp_path, None)
    got = tmp_path / "o.jsonl"
    got.write_text(text)
    rc = main(["check", str(w), "--no-progress", "--no-spark", "--out", str(tmp_path / "c"), "--got", f"s={got}"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and f"{got}{where}" in err, err


def test_a_bad_csv_row_names_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w, _ = _workload(tmp_path, None)
    got = tmp_path / "o.csv"
    got.write_text("base,probe\n1,2\n3,x\n")
    rc = main(["check", str(w), "--no-progress", "--no-spark", "--out", str(tmp_path / "c"), "--got", f"s={got}"])
    err = capsys.readouterr().err
    assert rc == 2 and f"{got}:3: probe: not an integer: 'x'" in err, err


def test_the_replay_case_parses_back_as_the_oracle_sees_it(tmp_path: Path) -> None:
    """The replay file is an oij-jsonl case: ``oij join`` reads it (the file `oij explain` and `oij conform
    --replay` take)."""
    w, res = _workload(tmp_path, None)
    bad = Results(res.pairs[1:], [], res.late)
    _check(tmp_path, w, "--no-spark", *NO_ATTRIBUTION, "--got", f"s={_write(tmp_path / 'o', bad)}")
    f = tmp_path / "chk" / "replays" / "s-1.jsonl"
    out = tmp_path / "r.jsonl"
    assert main(["join", str(f), "-o", str(out)]) == 0
    assert res.pairs[0] in parse_result_lines(out.read_text().splitlines()).pairs


def _dataset(tmp_path: Path, w: Path, cuts: tuple[int, ...]) -> Path:
    """The events of ``w`` as a directory of Parquet files cut at rows ``cuts`` (as Spark writes a dataset: part
    files in name order, a _SUCCESS marker), the query in each file's metadata."""
    from oij.io.parquet import write_parquet

    q, evs = _read(w)
    d = tmp_path / "dataset"
    d.mkdir()
    bounds = [0, *cuts, len(evs)]
    single = tmp_path / "all.parquet"
    write_parquet(str(single), q, evs, key_type="int")
    import pyarrow.parquet as pq

    table = pq.read_table(single)
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
        pq.write_table(table.slice(a, b - a), d / f"part-{i:05d}-x.snappy.parquet")
    (d / "_SUCCESS").write_text("")
    return d


@pytest.mark.parametrize("spark_on", [False, pytest.param(True, marks=SPARK)])
def test_a_parquet_dataset_is_one_stream_in_file_order(tmp_path: Path, spark_on: bool,
                                                        request: pytest.FixtureRequest,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """EVENTS as a directory: the same verdict as the single file, through the sequential readers and (past
    --seq-limit) through Spark, whose positions are the file's start plus the row inside it; a duplicate id
    across files is named by its file and row there; negative control: the files in another order are another
    stream, and the oracle's output for it differs."""
    if spark_on:
        request.getfixturevalue("spark")
    w, res = _workload(tmp_path, None)
    d = _dataset(tmp_path, w, (700, 1900))
    got = _write(tmp_path / "got.jsonl", res)
    extra = ["--seq-limit", "10"] if spark_on else ["--no-spark"]
    rc, report = _check(tmp_path, d, "--got", f"mine={got}", *extra)
    assert rc == 0 and report["all_agree"], report
    # another order of the same files is another arrival order: the canonical output changes
    q, events, _ = open_events(str(d))
    assert run_events(list(events), q).canonical() == res
    parts = sorted(d.glob("part-*"))
    parts[0].rename(d / "part-99999-x.snappy.parquet")
    q, events, _ = open_events(str(d))
    with pytest.raises(InputError, match="nothing may follow the end row"):
        run_events(list(events), q)
    (d / "part-99999-x.snappy.parquet").rename(parts[0])
    # a duplicate id in the second file, of an id of the first: named by the second file and its row
    import pyarrow as pa
    import pyarrow.parquet as pq

    t0, t1 = pq.read_table(parts[0]), pq.read_table(parts[1])
    ids = t1.column("id").to_pylist()
    ids[5] = t0.column("id").to_pylist()[3]
    pq.write_table(t1.set_column(t1.schema.get_field_index("id"), "id", pa.array(ids, type=pa.int64())), parts[1])
    rc = main(["check", str(d), "--no-progress", "--out", str(tmp_path / "bad"), "--got", f"mine={got}", *extra])
    assert rc == 2
    err = capsys.readouterr().err
    assert f"{parts[1]}:6: id: duplicate id" in err, err


def test_a_dataset_with_a_subdirectory_or_an_output_inside_is_refused(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    w, res = _workload(tmp_path, None)
    d = _dataset(tmp_path, w, (1000,))
    got = _write(tmp_path / "got.jsonl", res)
    assert main(["check", str(d), "--no-spark", "--out", str(d / "out"), "--got", f"mine={got}"]) == 2
    assert "inside the input dataset" in capsys.readouterr().err
    assert not (d / "out").exists()
    (d / "key=1").mkdir()
    assert main(["join", str(d), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert "a partitioned dataset has no arrival order" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.spark
@pytest.mark.spark_session
def test_differences_are_attributed_to_the_profile_that_explains_them(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A system that follows spark-ss (here: that profile's result) differs from the canonical result in hundreds
    of rows, every one explained by spark-ss, and ``--profile spark-ss`` agrees with it; negative control: the
    same output with one pair lost is explained by no profile, and --profile spark-ss finds the lost pair.  Both
    outputs are judged in each run (the in-memory attribution simulates every profile once for both; Spark
    computes the spark-ss result once for both)."""
    from oij.spec.profiles import compute_profile_result, get_profile

    w = tmp_path / "late.jsonl"
    write_workload(str(w), resolve("teach-late"), 1000, 3)
    q, evs = _read(w)
    ss = compute_profile_result(evs, q, get_profile("spark-ss")).canonical()
    assert ss != run_events(evs, q).canonical()
    got = _write(tmp_path / "ss.jsonl", ss)
    lost = Results(pairs=ss.pairs[1:], aggregates=ss.aggregates, late=ss.late)
    bad = _write(tmp_path / "bad.jsonl", lost)
    rc, report = _check(tmp_path, w, "--no-spark", "--got", f"spark={got}", "--got", f"bad={bad}")
    assert rc == 1
    a, b = report["attribution"]
    assert a["system"] == "spark" and a["differences"] > 10 and "spark-ss" in a["explained_by"], a
    assert b["system"] == "bad" and b["explained_by"] == [] and b["partly"][0]["profile"] == "spark-ss", b
    assert b["partly"][0]["explains"] == b["differences"] - 1  # all but the lost pair
    out = capsys.readouterr().out
    assert "are explained by spark-ss" in out and "no named profile explains all" in out
    rc, report = _check(tmp_path, w, *NO_ATTRIBUTION, "--got", f"spark={got}", "--got", f"bad={bad}",
                        "--profile", "spark-ss")
    assert report["profile"] == "spark-ss" and report["reference"] == "spark-oracle"
    rows = {r["engine"]: r for r in report["engines"]}
    assert rows["spark"]["agrees"] and (rows["spark"]["missing"], rows["spark"]["extra"]) == (0, 0), rows["spark"]
    assert rc == 1 and (rows["bad"]["missing"], rows["bad"]["extra"], rows["bad"]["wrong"]) == (1, 0, 0), rows


@pytest.mark.spark
@pytest.mark.spark_session
def test_a_profile_is_computed_by_spark_past_the_limits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Past --seq-limit (nothing in memory) ``--profile`` is the Spark oracle's (oij.spark.profiles): for
    flink-sql and for pathway-cutoff, the profile's own result agrees; negative controls: that output with one
    pair added and one aggregate-free row lost disagrees in exactly those rows (judged in the same run: the
    Spark oracle computes the profile's result once for both outputs), and the canonical check of both right
    outputs (one run) disagrees with each, with nothing attributed there by default (``--attribute auto``: no
    profile simulated past the limits)."""
    from oij.spec.profiles import compute_profile_result, get_profile

    w = tmp_path / "late.jsonl"
    write_workload(str(w), resolve("teach-late"), 600, 5)
    q, evs = _read(w)
    canonical = run_events(evs, q).canonical()
    right: list[str] = []
    for profile in ("flink-sql", "pathway-cutoff"):
        want = compute_profile_result(evs, q, get_profile(profile)).canonical()
        assert want != canonical
        got = _write(tmp_path / f"{profile}.jsonl", want)
        right += ["--got", f"{profile}={got}"]
        extra = (want.pairs[0][0], 10**9)
        bad = _write(tmp_path / "bad.jsonl", Results(pairs=sorted([*want.pairs[1:], extra]),
                                                     aggregates=want.aggregates, late=want.late))
        rc, report = _check(tmp_path, w, "--got", f"sys={got}", "--got", f"bad={bad}", "--profile", profile,
                            "--seq-limit", "0")
        rows = {r["engine"]: r for r in report["engines"]}
        assert list(rows) == ["spark-oracle", "sys", "bad"], rows
        assert rows["sys"]["agrees"] and (rows["sys"]["missing"], rows["sys"]["extra"]) == (0, 0), rows["sys"]
        assert rc == 1 and not report["all_agree"] and (rows["bad"]["missing"], rows["bad"]["extra"]) == (1, 1), \
            rows
        assert f"the {profile} profile (oij.spec.profiles), computed by the Spark oracle" in capsys.readouterr().out
    rc, report = _check(tmp_path, w, *right, "--seq-limit", "0")
    rows = {r["engine"]: r for r in report["engines"]}
    assert list(rows) == ["spark-oracle", "flink-sql", "pathway-cutoff"], rows
    assert rc == 1 and all(rows[p]["missing"] + rows[p]["extra"] > 0 for p in ("flink-sql", "pathway-cutoff")), rows
    assert report["attribution"] == [], report["attribution"]


@pytest.mark.spark
@pytest.mark.spark_session
def test_attribution_past_the_limits_runs_the_named_profiles_in_spark(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Past --sim-limit, ``--attribute P,P`` computes each profile's result in Spark: spark-ss explains every
    difference of its own result, late-le only some; a name that is no profile is a usage error.  (By default,
    auto, nothing is attributed there: :func:`test_a_profile_is_computed_by_spark_past_the_limits`, whose
    canonical check is that run.)"""
    from oij.spec.profiles import compute_profile_result, get_profile

    w = tmp_path / "late.jsonl"
    write_workload(str(w), resolve("teach-late"), 600, 3)
    q, evs = _read(w)
    got = _write(tmp_path / "ss.jsonl", compute_profile_result(evs, q, get_profile("spark-ss")).canonical())
    rc, report = _check(tmp_path, w, "--got", f"s={got}", "--seq-limit", "0", "--attribute", "spark-ss,late-le")
    (a,) = report["attribution"]
    assert rc == 1 and a["explained_by"] == ["spark-ss"], a
    (late_le,) = a["partly"]
    assert late_le["profile"] == "late-le" and late_le["explains"] < a["differences"], a
    assert "are explained by spark-ss" in capsys.readouterr().out
    assert main(["check", str(w), "--got", f"s={got}", "--attribute", "spark-sss", "--out", str(tmp_path / "x")]) == 2


def test_a_system_that_follows_a_profile_gets_replay_cases_in_the_streams_own_terms(tmp_path: Path) -> None:
    """An output that is flink-datastream's result (W per input, minus one) differs from canonical because of
    how it computes W; its replay cases keep the lateness bound and the tuples that decide W, so that under the
    profile the small case shows the same difference (it reproduces against such a system); negative control: the
    canonical-W case of the same difference shows none under the profile."""
    from oij.spec.model import StreamTuple
    from oij.spec.profiles import compute_profile_result, get_profile

    from oij.testing._got import replay_case

    prof = get_profile("flink-datastream")
    w = tmp_path / "late.jsonl"
    write_workload(str(w), resolve("teach-late"), 400, 5)
    q, evs = _read(w)
    out = _write(tmp_path / "fl.jsonl", compute_profile_result(evs, q, prof).canonical())
    rc, rep = _check(tmp_path, w, "--no-spark", "--got", f"fl={out}", "--first", "4")
    assert rc == 1 and rep["attribution"][0]["explained_by"][0] == "flink-datastream"
    cases = rep["replays"]["fl"]
    assert len(cases) == 4 and all(c["follows"] == "flink-datastream" for c in cases)
    shown_by_canonical_w = 0
    for c, d in zip(cases, rep["engines"][1]["differences"], strict=True):
        case = Case.from_jsonl(Path(c["file"]).read_text(), c["file"])
        assert case.query.lateness == q.lateness and len(case.events) <= 10
        small = list(case.events)
        ids = {e.id for e in small if isinstance(e, StreamTuple)}  # the rows among the case's own tuples
        canon, under = _within(run_events(small, q), ids), _within(compute_profile_result(small, q, prof), ids)
        assert canon == _within(run_events(evs, q), ids) and canon != under
        assert under == _within(compute_profile_result(evs, q, prof), ids)
        sq, sev = replay_case(q, evs, d)
        shown_by_canonical_w += _within(run_events(sev, sq), ids) != _within(compute_profile_result(sev, sq, prof), ids)
    assert shown_by_canonical_w < len(cases)


def _within(r: Results, ids: set[int]) -> tuple[Any, ...]:
    """The rows among the tuples ``ids``: pairs of two of them (or a null row), their aggregates, late ids."""
    r = r.canonical()
    return (tuple(p for p in r.pairs if p[0] in ids and (p[1] is None or p[1] in ids)),
            tuple(x for x in r.aggregates if x[0] in ids), tuple(x for x in r.late if x in ids))


def test_duplicates_only_is_the_at_least_once_signature(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An output that is the result with some rows repeated is named as the at-least-once signature, not
    attributed to a profile; negative controls: the same output with one row lost, or with a wrong row, is not."""
    from oij.testing._attribute import duplicates_only

    w = tmp_path / "late.jsonl"
    write_workload(str(w), resolve("teach-late"), 400, 3)
    q, evs = _read(w)
    r = run_events(evs, q).canonical()
    assert len(r.pairs) > 3
    dup = Results(pairs=sorted([*r.pairs, r.pairs[0], r.pairs[2], r.pairs[2]]), aggregates=r.aggregates, late=r.late)
    assert duplicates_only(r, dup) == 3
    rc, report = _check(tmp_path, w, "--no-spark", "--got", f"replayed={_write(tmp_path / 'd.jsonl', dup)}")
    (a,) = report["attribution"]
    assert rc == 1 and a["duplicated"] == 3 and a["explained_by"] == [], a
    assert "the at-least-once signature" in capsys.readouterr().out
    lossy = Results(pairs=sorted([*r.pairs[1:], r.pairs[2]]), aggregates=r.aggregates, late=r.late)
    assert duplicates_only(r, lossy) == 0
    wrong = Results(pairs=sorted([*r.pairs, (r.pairs[0][0], 10**9)]), aggregates=r.aggregates, late=r.late)
    assert duplicates_only(r, wrong) == 0
    assert duplicates_only(r, r) == 0
    agg = Results(aggregates=[(1, 2, 3.0), (2, 0, None)])
    assert duplicates_only(agg, Results(aggregates=[(1, 2, 3.0), (1, 2, 3.0), (2, 0, None)])) == 1
    assert duplicates_only(agg, Results(aggregates=[(1, 2, 3.0), (1, 2, 4.0), (2, 0, None)])) == 0
