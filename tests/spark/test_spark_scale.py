"""The Spark layer at scale: late marking without a shuffle, ``--got`` read by Spark, the step breakdown.

Each fast path is checked against its definition: :func:`oij.spark.oracle.mark_late` against the window-function
scan and the sequential oracle (also when partitions are not runs of positions), and
:func:`oij.spark.got.read_got_spark` against :func:`oij.testing._got.read_got` on generated outputs in every
format and many foreign shapes: it either declines (None) or writes exactly the rows the definition writes,
and it declines every file the definition rejects.  Negative controls: the fast path must take oij's own
result lines (a fast path that always declined would pass the rest), and a conversion that differs from the
definition (a float id truncated) must be caught.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oij.io.errors import InputError
from oij.spark.compare import engine_dir
from oij.spark.frames import read_parquet_events, validate_events
from oij.spark.got import read_got_spark
from oij.spark.oracle import ids_verdict, mark_late, mark_late_windows, scan_events
from oij.testing._got import read_got
from oij.workloads import resolve, with_overrides, write_workload
from tests.budget import examples

pytestmark = pytest.mark.spark


def _rows(d: str) -> Counter[tuple[Any, ...]]:
    t = ds.dataset(d, format="parquet").to_table()
    return Counter(tuple(r[c] for c in ("kind", "base", "probe", "count", "value", "id")) for r in t.to_pylist())


def _marked(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.select("pos", "id", "W", "late").collect())


# ------------------------------------------------------------------------------------------------ late marking
OVERS = [{"lateness": 300}, {"lateness": 300, "watermark": "count", "watermark_every": 16}]
"""The two workloads of the late-marking tests (4,000 events of scale-oij-default, delays up to 3,000 against a
lateness of 300: many late tuples): event-time watermarks, and count watermarks every 16 tuples."""


class LateFile:
    """A late-marking workload in row groups of 500 (Spark reads it in several partitions when
    ``spark.sql.files.maxPartitionBytes`` is small: :meth:`split`) and its tuples as the window scan marks them
    (:func:`oij.spark.oracle.mark_late_windows`, the definition), computed once for every test on it."""

    def __init__(self, spark: Any, path: Path) -> None:
        self.spark, self.path = spark, str(path)
        with self.split():
            q, frame = read_parquet_events(spark, self.path)
            assert frame.rdd.getNumPartitions() > 1
            self.slow = _marked(mark_late_windows(frame, q, 512))
        assert any(late for *_, late in self.slow)  # the workload has late tuples to mark

    def split(self) -> Any:
        """The file is small: split it anyway, while the block runs."""
        import contextlib

        @contextlib.contextmanager
        def conf() -> Any:
            self.spark.conf.set("spark.sql.files.maxPartitionBytes", "8k")
            try:
                yield
            finally:
                self.spark.conf.unset("spark.sql.files.maxPartitionBytes")

        return conf()


@pytest.fixture(scope="module", params=[0, 1], ids=["over0", "over1"])
def late_file(request: pytest.FixtureRequest, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> LateFile:
    """One workload of :data:`OVERS` and its window scan for every late-marking test on it (module-scoped: the
    window scan, the slowest marking, once per workload instead of once per test)."""
    d = tmp_path_factory.mktemp("late")
    one = d / "one.parquet"
    write_workload(str(one), with_overrides(resolve("scale-oij-default"),
                                            {"aggregate": None, "delay_max": 3000, **OVERS[request.param]}), 4000, 5,
                   fmt="parquet")
    p = d / "w.parquet"  # the same file in row groups of 500: Spark reads it in several partitions
    pq.write_table(pq.read_table(str(one)), str(p), row_group_size=500)
    return LateFile(spark, p)


def test_late_marking_without_a_shuffle_equals_the_window_scan(spark: Any, late_file: LateFile) -> None:
    with late_file.split():
        q, frame = read_parquet_events(spark, late_file.path)
        assert frame.rdd.getNumPartitions() > 1
        fast = _marked(mark_late(frame, q, 512))
    assert fast == late_file.slow


@pytest.mark.parametrize("late_file", [0], indirect=True, ids=["over0"])
def test_partitions_that_are_not_runs_fall_back_to_the_window_scan(spark: Any, late_file: LateFile) -> None:
    q, frame = read_parquet_events(spark, late_file.path)
    shuffled = frame.repartition(3)  # rows dealt round-robin: no partition is a run of consecutive positions
    assert _marked(mark_late(shuffled, q, 512)) == late_file.slow


@pytest.mark.parametrize("keep", [4096, 1])
def test_the_oracle_scan_marks_the_tuples_the_window_scan_marks(spark: Any, late_file: LateFile, monkeypatch: Any,
                                                                keep: int) -> None:
    """scan_events (the oracle's one pass: validation, W, late positions, the id verdict) against the window
    scan, over a file Spark reads in several partitions; a valid file passes its validation.  ``keep``: the
    candidates a partition keeps for the driver (4096: every tuple the carry can make late is judged on the
    driver; 1: partitions keep too few, and a second scan marks the tuples).  Negative control: without
    the candidates judged with the carry, tuples late only by an earlier partition's maxima go unmarked."""
    from oij.spark import oracle

    p = late_file.path
    monkeypatch.setattr(oracle, "LATE_CANDIDATES", keep)
    with late_file.split():
        q, frame = read_parquet_events(spark, p)
        assert frame.rdd.getNumPartitions() > 1
        scan = scan_events(frame, q, p)
        if keep == 4096:
            with monkeypatch.context() as m:
                m.setattr(oracle, "carry_late", lambda *a: [])
                blind = scan_events(frame, q, p)
    slow = late_file.slow
    assert scan is not None
    want = sorted(pos for pos, _, _, late in slow if late)
    assert want  # the workload has late tuples to mark
    assert scan.late is not None and sorted(r["pos"] for r in scan.late.collect()) == want
    assert scan.late_count == len(want) and scan.tuples == len(slow)
    assert len(scan.cached) == (1 if keep == 4096 else 2)  # the second scan's late positions cached
    if keep == 4096:
        assert blind is not None and blind.late is not None
        assert blind.late_count < len(want)  # the carry matters in this workload: the control fails without it
        for df in blind.cached:
            df.unpersist()
    for df in scan.cached:
        df.unpersist()


def _with_ids(src: Path, dst: Path, ids: list[int]) -> None:
    t = pq.read_table(str(src))
    is_tuple = [x == "tuple" for x in t.column("type").to_pylist()]
    it = iter(ids)
    col = pa.array([next(it) if k else None for k in is_tuple], pa.int64())
    pq.write_table(t.set_column(t.schema.get_field_index("id"), "id", col), str(dst), row_group_size=300)


@pytest.fixture(scope="module")
def dup_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workload whose ids the duplicate-id tests rewrite (3,000 events), generated once for all of them."""
    src = tmp_path_factory.mktemp("dup") / "src.parquet"
    write_workload(str(src), with_overrides(resolve("scale-oij-default"), {"aggregate": None}), 3000, 3,
                   fmt="parquet")
    return src


@pytest.mark.parametrize("how", ["boundary", "inside", "shuffled", "shuffled-unique", "sorted-unique"])
def test_the_oracle_scan_finds_the_duplicate_id_validate_events_finds(spark: Any, tmp_path: Path, dup_src: Path,
                                                                       how: str) -> None:
    """A repeated id across two partitions' edges, inside one partition, and among ids in random order (the
    summaries cannot tell: the shuffle decides): the same first duplicate row as validate_events; no error
    where ids are unique (a check that always raised would fail here)."""
    import random

    src = dup_src
    n = sum(1 for x in pq.read_table(str(src)).column("type").to_pylist() if x == "tuple")
    ids = list(range(10, 10 + n))
    if how.startswith("shuffled"):
        random.Random(1).shuffle(ids)
    if how == "boundary":
        ids[305] = ids[295]  # a row in the second row group repeats one of the first's
    elif how in ("inside", "shuffled"):
        ids[2000] = ids[1900]
    p = tmp_path / "w.parquet"
    _with_ids(src, p, ids)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "8k")
    try:
        q, frame = read_parquet_events(spark, str(p))
        assert frame.rdd.getNumPartitions() > 2
        if how.endswith("unique"):
            scan = scan_events(frame, q, str(p))
            assert scan is not None and scan.tuples == n
            return
        with pytest.raises(InputError) as want:
            validate_events(frame, q, str(p))
        with pytest.raises(InputError) as got:
            scan_events(frame, q, str(p))
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert "duplicate id" in str(want.value) and str(got.value) == str(want.value)


def _summary(ids: list[int], tail: int) -> dict[str, Any]:
    s = sorted(ids)
    twice = [a for a, b in itertools.pairwise(s) if a == b]
    edge = s if len(s) <= 2 * tail else s[:tail] + s[-tail:]
    return {"n": len(s), "lo": s[0] if s else None, "hi": s[-1] if s else None,
            "dup": twice[0] if twice else None, "tail": edge}


@settings(max_examples=examples(300, 3000), deadline=None)
@given(st.lists(st.lists(st.integers(0, 60), max_size=12), max_size=6), st.integers(1, 4))
def test_ids_verdict_never_contradicts_the_ids(parts: list[list[int]], tail: int) -> None:
    """True only when no id repeats, False only when one does (None: cannot tell, then Spark shuffles)."""
    flat = [x for p in parts for x in p]
    verdict = ids_verdict([_summary(p, tail) for p in parts], tail)
    if verdict is not None:
        assert verdict == (len(set(flat)) == len(flat))


def test_ids_verdict_decides_near_sorted_ids_without_a_shuffle() -> None:
    """Runs of near-sorted ids (each run's range overlapping its neighbours' at the edges) are decided from
    the tails; a repeat in an overlap is found; a range past the tails is left to the shuffle."""
    runs = [list(range(k * 100 - 3, k * 100 + 100)) for k in range(5)]
    runs = [r[3:] if k % 2 else r for k, r in enumerate(runs)]  # even runs reach 3 ids into the previous run
    assert ids_verdict([_summary(r, 8) for r in runs], 8) is False
    runs = [list(range(k * 100, k * 100 + 100)) for k in range(5)]
    runs[2] = [*range(195, 200), *runs[2]]  # overlaps run 1's last ids at its edge...
    runs[1] = runs[1][:-5]  # ...which run 1 no longer holds: unique
    assert ids_verdict([_summary(r, 8) for r in runs], 8) is True
    runs[1].append(197)  # now 197 is in both, inside both tails
    assert ids_verdict([_summary(r, 8) for r in runs], 8) is False
    wide = [list(range(0, 1000, 2)), list(range(1, 1000, 2))]  # interleaved: every id in the overlap
    assert ids_verdict([_summary(r, 8) for r in wide], 8) is None


# ------------------------------------------------------------------------------------------------ --got by Spark
def _written_by_python(path: str, cols: dict[str, str], d: Path) -> Counter[tuple[Any, ...]] | InputError:
    out = str(d / "py")
    shutil.rmtree(out, ignore_errors=True)
    try:
        read_got(path, cols, out)
    except InputError as e:
        return e
    return _rows(out)


def _kept_by_spark(spark: Any, path: str, cols: dict[str, str], d: Path) -> Counter[tuple[Any, ...]] | None:
    """The rows read_got_spark writes when every row is kept (``keep=True``, no fingerprint: one Spark job), or
    None where it declines (and then leaves nothing behind).  JSON lines are read by Spark's ``from_json`` only
    (``reader="spark"``, the path a declining pyarrow parse falls back to); the pyarrow parse on the executors is
    checked against read_got in ``test_spark_gotparse.py``."""
    results = str(d / "sp")
    shutil.rmtree(results, ignore_errors=True)
    n = read_got_spark(spark, path, cols, results, "x", keep=True, reader="spark")
    if n is None:
        assert not os.path.exists(engine_dir(results, "x")), "a declined read leaves nothing behind"
        return None
    rows = _rows(engine_dir(results, "x"))
    assert sum(rows.values()) == n
    return rows


def _written_by_spark(spark: Any, path: str, cols: dict[str, str], d: Path) -> Counter[tuple[Any, ...]] | None:
    """The rows read_got_spark reads, both ways: written (keep, :func:`_kept_by_spark`) and remembered with their
    fingerprints (the check's default); both must hold the same rows, the fingerprints theirs.  The fingerprints
    of the written rows are computed by :func:`oij.spark.gotparse.fingerprint_table` (numpy, held to Spark's
    own fingerprint to the bit in ``test_spark_gotparse.py``) instead of a second Spark fingerprint: a Spark
    fingerprint is the most expensive job here (the value cells' expressions), and the remembered one is
    still Spark's."""
    from oij.spark import fingerprint as fp
    from oij.spark import gotparse

    results = str(d / "sp")
    rows = _kept_by_spark(spark, path, cols, d)
    lazy_dir = str(d / "lazy")
    n_lazy = read_got_spark(spark, path, cols, lazy_dir, "x", keep=False, reader="spark")
    if rows is None:
        assert n_lazy is None
        assert fp.registered(lazy_dir, "x") is None
        return None
    assert n_lazy == sum(rows.values())
    lazy = fp.registered(lazy_dir, "x")
    assert lazy is not None and not os.path.exists(engine_dir(lazy_dir, "x"))
    assert Counter(tuple(r) for r in lazy.frame.collect()) == rows
    f = gotparse.fingerprint_table(ds.dataset(engine_dir(results, "x"), format="parquet").to_table())
    names = ("n", *(f"s{i}" for i in range(2 * fp.HASHES)))
    assert lazy.fingerprint == {int(b): tuple(int(f[c][i]) for c in names) for i, b in enumerate(f["bucket"])}
    fp.unregister(lazy_dir, "x")
    return rows


INTS = st.one_of(st.integers(-(10 ** 6), 10 ** 6), st.sampled_from([0, -1, 2 ** 62, -(2 ** 63), 2 ** 63 - 1]))
JSON_INT = st.one_of(INTS.map(str), INTS.map(lambda i: json.dumps(str(i))),
                     st.sampled_from(["3.0", "1e2", "-0", "true", "null", '"x"', "[1]", "007", '" 4"', "2e0",
                                      "18446744073709551615", "99999999999999999999", '"3_000"']))
JSON_VALUE = st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr),
                       st.integers(-(10 ** 20), 10 ** 20).map(str),
                       st.sampled_from(["null", "-0.0", "1e308", "1E-5", '"2.5"', '"inf"', '"nan"', "true", "NaN"]))
# the same texts without a quote, for CSV cells: drawn directly (a filter on the JSON ones rejects about a third of
# the draws, and five cells a row made Hypothesis's filter_too_much health check fail now and then)
CSV_INT = st.one_of(INTS.map(str), st.sampled_from(["3.0", "1e2", "-0", "true", "null", "[1]", "007", "2e0",
                                                    "18446744073709551615", "99999999999999999999"]))
CSV_VALUE = st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr),
                      st.integers(-(10 ** 20), 10 ** 20).map(str),
                      st.sampled_from(["null", "-0.0", "1e308", "1E-5", "true", "NaN"]))
KIND = st.sampled_from(["pair", "aggregate", "late", "Pair", "end"])


@st.composite
def jsonl_lines(draw: Any) -> str:
    kind = draw(KIND)
    keys = {"pair": ["base", "probe"], "aggregate": ["base", "count", "value"], "late": ["id"]}.get(kind, ["id"])
    parts = [f'"{draw(st.sampled_from(["type", "kind"]))}":"{kind}"']
    for k in keys:
        if draw(st.integers(0, 9)):
            parts.append(f'"{k}":{draw(JSON_VALUE if k == "value" else JSON_INT)}')
    if draw(st.booleans()):
        parts.append('"extra":{"nested":1}' if draw(st.booleans()) else '"note":"a b"')
    draw(st.randoms()).shuffle(parts)
    sep = draw(st.sampled_from([",", ", ", " ,"]))
    line = "{" + sep.join(parts) + "}"
    lead: str = draw(st.sampled_from(["", " ", "\t"]))
    trail: str = draw(st.sampled_from(["", " ", "\r", " x", "}"]))
    return f"{lead}{line}{trail}"


JSONL_FILES = st.lists(st.one_of(jsonl_lines(), st.sampled_from(["", "   ", "[1]", "{bad"])), min_size=1, max_size=6)
CSV_FILES = st.tuples(st.lists(st.tuples(st.sampled_from(["pair", "aggregate", "late", "", "null", "bad"]), CSV_INT,
                                         CSV_VALUE), min_size=1, max_size=5),
                      st.sampled_from([["kind", "base", "probe", "count", "value", "id"], ["base", "probe"], ["a", "b"],
                                       ["type", "base", "count", "value"]]))


def _jsonl_file(tmp_path: Path, lines: list[str]) -> tuple[str, dict[str, str]]:
    path = tmp_path / "got.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path), {}


def _csv_file(tmp_path: Path, drawn: tuple[list[tuple[str, str, str]], list[str]]) -> tuple[str, dict[str, str]]:
    rows, header = drawn
    path = tmp_path / "got.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_MINIMAL)
        w.writerow(header)
        for kind, i, v in rows:
            cells = {"kind": kind, "type": kind, "value": v}
            w.writerow([cells.get(h, "" if i == "null" else i) for h in header])
    return str(path), {"base": "a", "probe": "b"} if header == ["a", "b"] else {}


def _as_read_got_does_or_declines(spark: Any, tmp_path: Path, path: str, cols: dict[str, str],
                                  both: bool) -> None:
    """Spark's rows are read_got's, or Spark declines; read_got's rejection is always declined.  ``both``: the
    rows remembered with their fingerprints too (:func:`_written_by_spark`), else only the rows written."""
    want = _written_by_python(path, cols, tmp_path)
    got = (_written_by_spark if both else _kept_by_spark)(spark, path, cols, tmp_path)
    if isinstance(want, InputError):
        assert got is None, f"read_got rejects ({want}) but Spark accepted"
    else:
        assert got is None or got == want


# Each format twice: the conversion and the verdict on many drawn files, through the written rows (a Spark job a
# file); and the same on fewer drawn files through both ways of read_got_spark, the remembered rows and their
# fingerprints too (a Spark fingerprint a file, the most expensive job here).  Both share one conversion (the
# frame of _jsonl or _csv, then _take); at OIJ_TESTS=full both see 200 files.
@given(lines=JSONL_FILES)
@settings(max_examples=examples(25, 200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_spark_reads_jsonl_as_read_got_does_or_declines(spark: Any, tmp_path: Path, lines: list[str]) -> None:
    _as_read_got_does_or_declines(spark, tmp_path, *_jsonl_file(tmp_path, lines), both=False)


@given(lines=JSONL_FILES)
@settings(max_examples=examples(6, 200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_spark_remembers_jsonl_as_it_writes_it(spark: Any, tmp_path: Path, lines: list[str]) -> None:
    _as_read_got_does_or_declines(spark, tmp_path, *_jsonl_file(tmp_path, lines), both=True)


@given(drawn=CSV_FILES)
@settings(max_examples=examples(20, 200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_spark_reads_csv_as_read_got_does_or_declines(spark: Any, tmp_path: Path,
                                                      drawn: tuple[list[tuple[str, str, str]], list[str]]) -> None:
    _as_read_got_does_or_declines(spark, tmp_path, *_csv_file(tmp_path, drawn), both=False)


@given(drawn=CSV_FILES)
@settings(max_examples=examples(5, 200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_spark_remembers_csv_as_it_writes_it(spark: Any, tmp_path: Path,
                                             drawn: tuple[list[tuple[str, str, str]], list[str]]) -> None:
    _as_read_got_does_or_declines(spark, tmp_path, *_csv_file(tmp_path, drawn), both=True)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_spark_takes_the_plain_shapes(spark: Any, tmp_path: Path, fmt: str) -> None:
    """The negative control of the tests above: on ordinary outputs the fast path must not decline."""
    rows = [("pair", 1, 2, None, None, None), ("pair", 3, None, None, None, None),
            ("aggregate", 4, None, 2, 1.5, None), ("aggregate", 5, None, 0, None, None), ("late", None, None, None,
                                                                                       None, 9)]
    path = tmp_path / f"got.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps({"type": k, **{f: x for f, x in zip(("base", "probe", "count", "value",
                                                                                  "id"), r, strict=True)
                                                        if x is not None or (k == "pair" and f == "probe")}}) + "\n"
                                for k, *r in rows))
    elif fmt == "csv":
        path.write_text("kind,base,probe,count,value,id\n" + "".join(
            ",".join("" if x is None else str(x) for x in r) + "\n" for r in rows))
    else:
        pq.write_table(pa.table({c: [r[i] for r in rows] for i, c in enumerate(("kind", "base", "probe", "count",
                                                                                  "value", "id"))}), str(path))
    got = _written_by_spark(spark, str(path), {}, tmp_path)
    assert got is not None
    assert got == _written_by_python(str(path), {}, tmp_path)
    assert got == Counter(rows)


def test_a_conversion_unlike_read_got_is_caught(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a fast path that took '3.5' as the id 3 (Spark's own cast) differs from read_got, and
    the comparison above sees it."""
    import oij.spark.got as g

    path = tmp_path / "got.csv"
    path.write_text("kind,id\nlate,3.5\n")
    assert isinstance(_written_by_python(str(path), {}, tmp_path), InputError)
    assert _written_by_spark(spark, str(path), {}, tmp_path) is None

    def lax(c: Any) -> tuple[Any, Any]:
        from pyspark.sql import functions as F

        return c.cast("double").cast("long"), F.lit(False)

    monkeypatch.setattr(g, "_int_text", lax)
    assert _written_by_spark(spark, str(path), {}, tmp_path) == Counter([("late", None, None, None, None, 3)])


# ------------------------------------------------------------------------------------------------ the breakdown
def test_check_reports_where_sparks_time_went(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agreeing output checked twice: with ``OIJ_KEEP_RESULTS`` every row of it and of the oracle is written
    (the control of what follows), then by default none (both fingerprinted), and the report says where Spark's
    time went."""
    from oij.reference.oracle import run_events

    from oij.check import CheckOptions, check
    from oij.io.jsonlwrite import result_lines
    from oij.io.parquet import read_parquet

    p = tmp_path / "w.parquet"
    write_workload(str(p), with_overrides(resolve("scale-oij-default"), {"aggregate": None}), 3000, 2, fmt="parquet")
    q, it = read_parquet(str(p))
    res = run_events(list(it), q).canonical()
    got = tmp_path / "got.jsonl"
    got.write_text("".join(result_lines(res)))
    with monkeypatch.context() as m:
        m.setenv("OIJ_KEEP_RESULTS", "1")
        kept = check(CheckOptions(file=str(p), seq_limit=0, out=str(tmp_path / "a"), got=[f"me={got}"],
                                  no_progress=True))
    assert kept.all_agree
    t = ds.dataset(engine_dir(kept.results, "spark-oracle"), format="parquet").to_table()
    assert t.num_rows == len(res.pairs) + len(res.late)
    assert ds.dataset(engine_dir(kept.results, "me"), format="parquet").to_table().num_rows == t.num_rows
    rep = check(CheckOptions(file=str(p), seq_limit=0, out=str(tmp_path / "b"), got=[f"me={got}"],
                             no_progress=True))
    assert rep.all_agree
    assert rep.row("me").metrics["read_by"] == "spark"
    # agreeing outputs write none of the oracle's rows, nor the output's (fingerprinted as it was parsed); the
    # control, every row written when kept, is the first check above
    assert not os.path.exists(engine_dir(rep.results, "spark-oracle"))
    assert not os.path.exists(engine_dir(rep.results, "me"))
    steps = {s["step"]: s for s in rep.spark_steps}
    for name in ("loading --got me", "validating events, watermarks and late marking",
                 "range join, aggregation and writing results"):
        assert steps[name]["jobs"] >= 1, name
    # both fingerprints were computed where the rows were made (the --got parse, the oracle's join): comparing
    # agreeing outputs runs no Spark job (a step without one is left out of the report)
    assert steps.get("comparison", {"jobs": 0})["jobs"] == 0
    assert steps["validating events, watermarks and late marking"]["input_rows"] < 2 * 3001  # the events once
    assert steps["validating events, watermarks and late marking"]["input_rows"] >= 3000
    assert steps["range join, aggregation and writing results"]["shuffle_write_bytes"] > 0
    assert "Where Spark's time went" in (tmp_path / "b" / "report.md").read_text()



# ------------------------------------------------------------------------------------------------ the cluster
def test_a_stop_right_after_the_url_is_a_clean_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cluster command's exit code does not depend on when the stop lands: SIGTERM (taken as Ctrl-C) just
    after the URL is printed ends it with 0, the cluster stopped (found by CI: the stop fell between the print and
    the wait, and the command died of SIGINT).  Simulated in-process: the print raises the KeyboardInterrupt the
    handler would.  Negative control: a stop before the URL is out exits 130."""
    import contextlib

    from oij.spark import cluster

    stopped: list[bool] = []

    @contextlib.contextmanager
    def fake(workers: int) -> Any:
        try:
            yield "spark://127.0.0.1:7077"
        finally:
            stopped.append(True)

    def stop_now(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cluster, "standalone", fake)
    monkeypatch.setattr("builtins.print", stop_now)
    assert cluster.main(["1"]) == 0 and stopped == [True]

    @contextlib.contextmanager
    def interrupted_start(workers: int) -> Any:
        raise KeyboardInterrupt
        yield ""

    monkeypatch.setattr(cluster, "standalone", interrupted_start)
    assert cluster.main(["1"]) == 130


@pytest.mark.timeout(400)
def test_the_cluster_command_runs_the_pipeline_and_stops_its_jvms_on_sigterm(tmp_path: Path) -> None:
    """``python -m oij.spark.cluster 2`` run as the docs show (a background job, ended with ``kill``): its URL is
    out once both workers have registered with the master; ``oij check`` (as a command, its own driver) runs the
    whole pipeline on them -- two executor JVMs, so every closure and row crosses a process boundary; then
    SIGTERM (taken as Ctrl-C: an exception raised inside :func:`oij.spark.cluster.standalone`'s block) stops its
    master and worker JVMs with it.  Negative control: a SIGKILL, which no handler sees, leaves them (killed here
    by hand).  Only the command's own children count: another test's cluster may come and go meanwhile.  (One
    cluster for the pipeline and the stop: each cluster is a master and worker JVMs to start.  The control's
    cluster is ``python -m oij.spark.cluster 0``, its master alone, started as the workers are (a process group
    of its own): killed once its JVM runs, before it has spent its start-up on a cluster nobody uses.)"""
    import signal
    import subprocess
    import sys
    import time

    from tests.procs import alive

    def start(workers: int) -> tuple[subprocess.Popen[str], list[int], str]:
        with tempfile.TemporaryFile() as err:  # the command's reason, if it ends without its URL
            # TMPDIR: the cluster's work folder under the test's own (the SIGKILLed control cannot remove its own)
            p = subprocess.Popen([sys.executable, "-m", "oij.spark.cluster", str(workers)], stdout=subprocess.PIPE,
                                 text=True, stderr=err, env={**os.environ, "TMPDIR": str(tmp_path)})
            assert p.stdout is not None
            url = p.stdout.readline().strip()
            if not url.startswith("spark://127.0.0.1:"):
                rc = p.wait(timeout=60)
                err.seek(0)
                pytest.fail(f"no URL; exit {rc}: {err.read().decode(errors='replace')[-3000:]}")
        assert int(url.rsplit(":", 1)[1]) > 0
        # the master and the workers; with no worker the URL comes as soon as the master's spark-class is started,
        # which may not show its class on its command line yet under load (once: 0 found), so look a while
        deadline = time.monotonic() + 30
        while True:
            kids = []
            for d in Path("/proc").iterdir():
                try:
                    if d.name.isdigit() and b"org.apache.spark.deploy." in (d / "cmdline").read_bytes() and \
                            int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == p.pid:
                        kids.append(int(d.name))
                except (OSError, ValueError, IndexError):  # a process that ended meanwhile
                    continue
            if len(kids) >= workers + 1 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if len(kids) != workers + 1:
            p.send_signal(signal.SIGTERM)  # the command stops what it started
            p.wait(timeout=60)
            pytest.fail(f"{len(kids)} of the cluster's {workers + 1} JVMs found")
        return p, kids, url

    p, kids, url = start(2)
    try:
        out = tmp_path / "out"
        run = subprocess.run([sys.executable, "-m", "oij.cli", "check", "--preset", "builtin-small", "--events",
                              "1000", "--master", url, "--driver-memory", "1g", "--out", str(out), "--no-progress",
                              "--engines", ""], capture_output=True, text=True, timeout=280, check=False)
        assert run.returncode == 0, run.stdout + run.stderr
        report = json.loads((out / "report.json").read_text())
        assert report["all_agree"] and [r["engine"] for r in report["engines"]] == ["spark-oracle", "seq-oracle"]
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 0
    assert not any(alive(k) for k in kids)
    p, kids, _ = start(0)
    deadline = time.monotonic() + 120
    while not all(_is_java(k) for k in kids):  # the launcher has run and spark-class has exec'd the master's JVM
        assert time.monotonic() < deadline and all(alive(k) for k in kids), "the master's JVM did not start"
        time.sleep(0.1)
    p.kill()
    p.wait(timeout=60)
    time.sleep(1)
    try:
        assert all(alive(k) for k in kids)  # the control: nothing stopped them
    finally:
        for k in kids:
            os.kill(k, signal.SIGKILL)


def _is_java(pid: int) -> bool:
    """Whether process ``pid`` runs java (spark-class execs it once its launcher has built the command)."""
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")) == "java"
    except OSError:
        return False
