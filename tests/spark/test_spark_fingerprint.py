"""``oij check`` on Spark compares by fingerprints (:mod:`oij.spark.fingerprint`) and drills down where they differ.

Planted differences -- a missing pair, a duplicated pair, a lost left-join ``(a, null)`` row, one extra late id,
one wrong aggregate value -- are each found, listed and given a replay case, with the unmodified output as the
negative control (it agrees; where every output agrees none of the oracle's rows is written, unless kept).  The
fingerprint path is checked against the row-by-row comparison (:func:`oij.spark.compare.compare_frames_by_rows`)
on random outputs, the value cells against the tolerance (a cell twice as wide is caught), and the sums against
XOR (which a duplicate cancels).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oij.reference.oracle import run_events
from oij.spec.batch import Results

from oij.io.jsonlwrite import result_lines
from oij.io.parquet import read_parquet
from oij.spark import fingerprint as fp
from oij.spark.compare import (
    close,
    compare_frames,
    compare_frames_by_rows,
    engine_dir,
    results_table,
    write_frame,
    write_results,
)
from oij.workloads import resolve, with_overrides, write_workload
from tests.budget import examples

pytestmark = pytest.mark.spark


def _workload(tmp_path: Path, over: dict[str, Any], n: int = 3000, seed: int = 3) -> tuple[Path, Results]:
    p = tmp_path / "w.parquet"
    params = with_overrides(resolve("scale-oij-default"), {"delay_max": 500, "lateness": 300, **over})
    write_workload(str(p), params, n, seed, fmt="parquet")
    q, it = read_parquet(str(p))
    return p, run_events(list(it), q).canonical()


def _write(path: Path, res: Results) -> str:
    path.write_text("".join(result_lines(res)))
    return str(path)


def _bucket_of(d: dict[str, Any]) -> int:
    return int(d["id"] if d["kind"] == "late" else d["base"]) % fp.BUCKETS


def _oracle_buckets(results: str) -> set[int]:
    d = engine_dir(results, "spark-oracle")
    if not os.path.isdir(d):
        return set()
    t = ds.dataset(d, format="parquet").to_table().to_pylist()
    return {_bucket_of(r) for r in t}


def _frame(spark: Any, r: Results) -> Any:
    rows = [tuple(x.values()) for x in results_table(r).to_pylist()]
    return spark.createDataFrame(rows, "kind STRING, base BIGINT, probe BIGINT, count BIGINT, value DOUBLE, id BIGINT")


def _check(tmp_path: Path, p: Path, gots: dict[str, str], out: str = "out") -> Any:
    from oij.check import CheckOptions, check

    return check(CheckOptions(file=str(p), seq_limit=0, out=str(tmp_path / out), no_progress=True, first=FIRST,
                              got=[f"{k}={v}" for k, v in gots.items()]))


FIRST = 10
"""The differences the checks here list per output (``oij check``'s default)."""

SPAN = 10 ** 10
"""Where :func:`_same_verdicts` moves each output's ids (the ``k``-th output by ``k * SPAN``): every id of these
workloads is below ``SPAN / 10`` in size, so each output keeps ids of its own."""


def _same_verdicts(spark: Any, rep: Any, names: list[str], res: Results) -> None:
    """The report's verdicts equal those of the row-by-row comparison of every row (the definition,
    :func:`compare_frames_by_rows`), for every output in one comparison: the ``k``-th output and a copy of the
    oracle's rows, each with every id moved by ``k * SPAN``, are unioned into one output and one reference (as
    ``test_fingerprints_agree_with_the_row_by_row_comparison`` moves its drawn pairs apart); the row-by-row
    comparison groups rows by their ids (pairs and late ids by the row, aggregates by base), so no group holds
    rows of two outputs, and each difference listed belongs to the output its ids name.  Every difference is
    listed (``first`` above their number); each output's are its first ``rep``'s ``first`` once moved back, in
    the same order (a shift keeps the order of ids, and nulls stay null).  One comparison (two Spark jobs)
    instead of one per output; the oracle's remembered frame (its range join) is cached meanwhile."""
    from functools import reduce

    from pyspark.sql import functions as F

    from oij.spark.compare import reference_rows

    ids = [abs(x) for a, b in res.pairs for x in (a, b) if x is not None] + [abs(a) for a, _, _ in res.aggregates]
    assert max([*ids, *map(abs, res.late)]) < SPAN // 10

    def moved(df: Any, by: int) -> Any:
        return df.select("kind", *[(F.col(c) + F.lit(by)).alias(c) for c in ("base", "probe")], "count", "value",
                         (F.col("id") + F.lit(by)).alias("id"))

    lazy = fp.registered(rep.results, "spark-oracle")
    assert lazy is not None
    lazy.frame.persist()
    d = rep.results + "-by-rows"
    try:
        fp.register(d, "ref", reduce(lambda x, y: x.unionByName(y),
                                     [moved(lazy.frame, k * SPAN) for k in range(len(names))]), {})
        fp.register(d, "got", reduce(lambda x, y: x.unionByName(y),
                                     [moved(reference_rows(spark, rep.results, n), k * SPAN)
                                      for k, n in enumerate(names)]), {})
        whole = compare_frames_by_rows(spark, d, "ref", ["got"], first=10 ** 6)["got"]
    finally:
        fp.unregister(d, "ref")
        fp.unregister(d, "got")
        lazy.frame.unpersist()
    assert len(whole.differences) < 10 ** 6
    for k, n in enumerate(names):
        mine = []
        for x in whole.differences:
            at = next(v for v in (x["base"], x["id"]) if v is not None)
            if k * SPAN - SPAN // 2 <= at < k * SPAN + SPAN // 2:
                mine.append({**x, **{c: None if x[c] is None else x[c] - k * SPAN for c in ("base", "probe", "id")}})
        r = rep.row(n)
        issues = Counter({i: 0 for i in ("missing", "extra", "wrong")})
        for x in mine:
            issues[x["issue"]] += x["n"]
        assert (r.missing, r.extra, r.wrong) == (issues["missing"], issues["extra"], issues["wrong"]), n
        assert r.differences == mine[:FIRST], n


def test_planted_pair_and_late_differences_are_found_with_replays(spark: Any, tmp_path: Path) -> None:
    """Four planted differences in two outputs (each one difference in a bucket of its own: a missing pair and a
    lost left-join ``(a, null)`` row in one, a duplicated pair and an extra late id in the other), so that the
    oracle's rows are written for the buckets of both outputs; each difference listed with a replay case of its
    own.  Two outputs with two differences each, not four with one: an output that differs costs a write of its
    rows, a drill-down and the replay's scan."""
    p, res = _workload(tmp_path, {"aggregate": None, "join": "left"})
    assert res.late and any(b is None for _, b in res.pairs) and res.pairs, "the workload must have all three"
    rng = random.Random(1)
    matched = [x for x in res.pairs if x[1] is not None]
    late_set = set(res.late)
    while True:  # four buckets of their own (ids modulo 4096: a collision is rare, and redrawn)
        dropped, dup = rng.choice(matched), rng.choice(matched)
        null_row = rng.choice([x for x in res.pairs if x[1] is None])
        extra_late = rng.choice([a for a, _ in res.pairs if a not in late_set])
        if len({x % fp.BUCKETS for x in (dropped[0], dup[0], null_row[0], extra_late)}) == 4:
            break

    pairs_missing = list(res.pairs)
    pairs_missing.remove(dropped)
    pairs_missing.remove(null_row)
    gots = {
        "same": _write(tmp_path / "same.jsonl", res),
        "missing": _write(tmp_path / "missing.jsonl", Results(pairs=pairs_missing, aggregates=[],
                                                              late=list(res.late))),
        "extra": _write(tmp_path / "extra.jsonl", Results(pairs=[*res.pairs, dup], aggregates=[],
                                                          late=[*res.late, extra_late])),
    }
    rep = _check(tmp_path, p, gots)
    assert rep.row("same").agrees, "negative control: the oracle's own result agrees"
    want = {"missing": {("pair", "missing", dropped[0], dropped[1], None),
                        ("pair", "missing", null_row[0], None, None)},
            "extra": {("pair", "extra", dup[0], dup[1], None), ("late", "extra", None, None, extra_late)}}
    for name, w in want.items():
        r = rep.row(name)
        assert not r.agrees, name
        listed = [(d["kind"], d["issue"], d["base"], d["probe"], d["id"]) for d in r.differences]
        assert len(listed) == 2 and set(listed) == w, name
        assert (r.missing + r.extra + r.wrong) == 2, name
        cases = rep.replays[name]
        assert len(cases) == 2 and all(os.path.isfile(c["file"]) for c in cases), name
        assert {c["difference"] for c in cases} == {f"{i} pair ({a}, {b})" if k == "pair" else f"{i} late id {x}"
                                                   for k, i, a, b, x in w}, name
    assert "same" not in rep.replays
    # the outputs Spark read: only those that differ have their rows written (the others are fingerprints)
    assert not os.path.exists(engine_dir(rep.results, "same"))
    assert all(os.path.isdir(engine_dir(rep.results, n)) for n in want)
    # only the buckets that differ hold the oracle's rows: those of both outputs
    planted = {_bucket_of(d) for n in want for d in rep.row(n).differences}
    assert len(planted) == 4 and _oracle_buckets(rep.results) == planted
    _same_verdicts(spark, rep, ["same", *want], res)


def test_one_wrong_aggregate_is_found_and_the_tolerance_kept(spark: Any, tmp_path: Path) -> None:
    p, res = _workload(tmp_path, {"aggregate": "sum"})
    rng = random.Random(2)
    aggs = [a for a in res.aggregates if a[2]]
    victim = rng.choice(aggs)

    def scaled(pick: Any, factor: float) -> Results:
        rows = [(a, n, v * factor if pick(a) and v is not None else v) for a, n, v in res.aggregates]
        return Results(pairs=[], aggregates=rows, late=list(res.late))

    gots = {
        "same": _write(tmp_path / "same.jsonl", res),
        # every value moved 1e-12 relative: inside the tolerance, so it agrees (cells, or a drill-down)
        "near": _write(tmp_path / "near.jsonl", scaled(lambda a: True, 1 + 1e-12)),
        # one value moved 2e-9 relative: outside the tolerance of 1e-9
        "wrong": _write(tmp_path / "wrong.jsonl", scaled(lambda a: a == victim[0], 1 + 2e-9)),
    }
    rep = _check(tmp_path, p, gots)
    assert rep.row("same").agrees and rep.row("near").agrees
    w = rep.row("wrong")
    assert (w.missing, w.extra, w.wrong) == (0, 0, 1)
    assert [(d["kind"], d["issue"], d["base"]) for d in w.differences] == [("aggregate", "wrong", victim[0])]
    assert len(rep.replays["wrong"]) == 1
    _same_verdicts(spark, rep, list(gots), res)


# ------------------------------------------------------------------------------ fingerprints against row by row
_ids = st.integers(min_value=-5, max_value=40)
_values = st.one_of(st.none(), st.sampled_from([0.0, 1.0, -2.5, 1e300, 5e-324, 3.0000000001]),
                    st.floats(allow_nan=False, allow_infinity=False, width=64))


@st.composite
def _outputs(draw: Any) -> tuple[Results, Results]:
    pairs = draw(st.lists(st.tuples(_ids, st.one_of(st.none(), _ids)), max_size=12))
    bases = draw(st.lists(_ids, unique=True, max_size=8))
    aggs = [(a, draw(st.integers(0, 5)), draw(_values)) for a in bases]
    late = draw(st.lists(_ids, max_size=4))
    ref = Results(pairs=pairs, aggregates=aggs, late=late)
    got = Results(pairs=list(pairs), aggregates=list(aggs), late=list(late))
    for _ in range(draw(st.integers(0, 3))):
        what = draw(st.sampled_from(["drop", "dup", "pair", "late", "value", "count", "agg", "noagg"]))
        if what == "drop" and got.pairs:
            got.pairs.pop(draw(st.integers(0, len(got.pairs) - 1)))
        elif what == "dup" and got.pairs:
            got.pairs.append(got.pairs[draw(st.integers(0, len(got.pairs) - 1))])
        elif what == "pair":
            got.pairs.append((draw(_ids), draw(st.one_of(st.none(), _ids))))
        elif what == "late":
            got.late.append(draw(_ids))
        elif what in ("value", "count") and got.aggregates:
            i = draw(st.integers(0, len(got.aggregates) - 1))
            a, n, v = got.aggregates[i]
            if what == "count":
                n += 1
            else:
                rel = draw(st.sampled_from([0.0, 1e-12, 4e-10, 9e-10, 1.1e-9, 2e-9, 1e-6]))
                v = None if v is None else v * (1 + rel)
            got.aggregates[i] = (a, n, v)
        elif what == "agg":
            got.aggregates.append((draw(_ids), draw(st.integers(0, 5)), draw(_values)))
        elif what == "noagg" and got.aggregates:
            got.aggregates.pop()
    return ref, got


def _shifted(r: Results, by: int) -> Results:
    """``r`` with every id (base, probe, late id) moved by ``by``."""
    def m(x: int | None) -> int | None:
        return None if x is None else x + by

    return Results(pairs=[(a + by, m(b)) for a, b in r.pairs], aggregates=[(a + by, n, v) for a, n, v in r.aggregates],
                   late=[a + by for a in r.late])


SHIFTS = [0, -100, 100, -200, 200, -300, 300, -400]
"""Where each drawn pair of outputs is moved (ids -5..40 to 95..140, -105..-60, ...): apart, in buckets of their
own (the buckets are ids modulo 4096), negative and positive."""


@settings(max_examples=examples(3, 40), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_outputs(), min_size=1, max_size=len(SHIFTS)), st.booleans())
def test_fingerprints_agree_with_the_row_by_row_comparison(spark: Any, tmp_path_factory: Any,
                                                           drawn: list[tuple[Results, Results]],
                                                           remembered: bool) -> None:
    """Up to eight drawn pairs of outputs compared at once, each moved to ids of its own (:data:`SHIFTS`): every
    bucket holds the rows of one pair only, so a difference the fingerprints miss or invent in one pair is one in
    the whole (every difference is listed: ``first`` above their number).  A single pair, empty outputs
    included, is drawn as often as Hypothesis likes (one Spark fingerprint per side and example, whatever the
    number of pairs)."""
    ref = Results(pairs=[], aggregates=[], late=[])
    got = Results(pairs=[], aggregates=[], late=[])
    for (r, g), by in zip(drawn, SHIFTS, strict=False):
        for whole, part in ((ref, _shifted(r, by)), (got, _shifted(g, by))):
            whole.pairs += part.pairs
            whole.aggregates += part.aggregates
            whole.late += part.late
    d = str(tmp_path_factory.mktemp("fp") / "results")
    write_results(d, "got", got)
    if remembered:  # the reference fingerprinted, not written (as oij check does with the oracle)
        write_frame(_frame(spark, ref), d, "ref")
        assert fp.registered(d, "ref") is not None
    else:
        write_results(d, "ref", ref)
    first = 1000  # above every count of differences drawn: all of them listed
    by_fp = compare_frames(spark, d, "ref", ["got"], first=first)["got"]
    by_rows = compare_frames_by_rows(spark, d, "ref", ["got"], first=first)["got"]
    assert len(by_rows.differences) < first
    assert (by_fp.missing, by_fp.extra, by_fp.wrong, by_fp.by_kind, by_fp.differences) == \
        (by_rows.missing, by_rows.extra, by_rows.wrong, by_rows.by_kind, by_rows.differences)
    fp.unregister(d, "ref")


# ------------------------------------------------------------------------------------------------ value cells
def _cells(spark: Any, values: list[float], monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[Any, ...]], ...]:
    """Each value with its cell (value, tag, sign, e, m, exact): as :func:`fp.value_cell` makes it, and as it
    would with cells 16x wider (2^-26 of the value, ~1.5e-8: the negative control), in one Spark job."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, StructField, StructType

    df = spark.createDataFrame([(v,) for v in values], StructType([StructField("value", DoubleType())]))
    cols = fp.value_cell(F.col("value"))
    with monkeypatch.context() as m:
        m.setattr(fp, "CELL_BITS", 26)
        m.setattr(fp, "CELL_WIDTH", 1e-7)
        wide = fp.value_cell(F.col("value"))
    rows = df.select("value", *[c.alias(f"c{i}") for i, c in enumerate(cols)],
                     *[c.alias(f"w{i}") for i, c in enumerate(wide)]).collect()
    k = len(cols)
    return [tuple(r[:1 + k]) for r in rows], [(r[0], *r[1 + k:]) for r in rows]


def _violations(cells: list[tuple[Any, ...]]) -> list[tuple[float, float]]:
    """Pairs of values in one cell that the tolerance calls different."""
    by: dict[tuple[Any, ...], list[float]] = {}
    for v, tag, sign, e, m, _ in cells:
        if tag == 1:
            by.setdefault((sign, e, m), []).append(v)
    out = []
    for vs in by.values():
        lo, hi = min(vs, key=abs), max(vs, key=abs)
        if not close(lo, hi):
            out.append((lo, hi))
    return out


def _near_pairs(seed: int) -> list[float]:
    """Values and neighbours at 0.5e-9 .. 1.5e-9 relative, near cell edges and powers of two."""
    rng = random.Random(seed)
    vals: list[float] = []
    for _ in range(1500):
        x = rng.choice([1.0, -1.0]) * rng.uniform(1, 2) * 2.0 ** rng.randint(-60, 60)
        x = rng.choice([x, 2.0 ** rng.randint(-60, 60), float(rng.randint(1, 10 ** 6))])
        for rel in (4e-10, 5e-10, 9e-10, 1.0000001e-9, 1.2e-9, 1.9e-9):
            vals += [x, x * (1 + rel), x * (1 - rel)]
    return vals


def test_a_cell_never_holds_values_the_tolerance_tells_apart(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    vals = _near_pairs(5)
    cells, wide = _cells(spark, vals, monkeypatch)
    tags = Counter(t[1] for t in cells)
    assert tags[1] > len(vals) * 0.9, "most values are in cells (else the fingerprint would drill down always)"
    assert _violations(cells) == []
    # negative control: cells 16x wider (2^-26 of the value, ~1.5e-8) hold pairs the tolerance tells apart
    assert _violations(wide), "the test must catch a cell wider than the tolerance"


def test_sums_count_duplicates_where_xor_would_cancel(spark: Any) -> None:
    from pyspark.sql import functions as F

    base = Results(pairs=[(1, 2), (1, None), (4097, 5)], aggregates=[], late=[7])
    twice = Results(pairs=[*base.pairs, (1, 2), (1, 2)], aggregates=[], late=list(base.late))

    def frame(r: Results) -> Any:
        return _frame(spark, r)

    assert fp.differing(fp.fingerprint(frame(base)), fp.fingerprint(frame(twice))) == [1]
    # control: the same hashes folded with XOR cannot see the pair added twice
    def xor(r: Results) -> int:
        acc = 0
        for row in frame(r).select(F.xxhash64(F.lit(0).cast("long"), *fp.encoding()).alias("h")).collect():
            acc ^= int(row["h"])
        return acc

    assert xor(base) == xor(twice)


# ------------------------------------------------------------------------------------------------ the report
def test_the_step_table_sums_the_steps_and_gives_bytes_per_tuple() -> None:
    from oij.spark.metrics import steps_table

    step = {"step": "x", "wall_s": 1.0, "task_s": 2.0, "jobs": 1, "tasks": 4, "input_rows": 10,
            "shuffle_write_bytes": 3 << 20, "shuffle_read_bytes": 1 << 20, "spill_bytes": 0, "output_rows": 0,
            "stages": [{}], "result_bytes": 8192}
    old = {k: v for k, v in step.items() if k != "result_bytes"}  # a report from before the column
    lines = steps_table([step, old], tuples=1 << 20)
    assert lines[-3].startswith("| **all steps** | 2.0 | 4.0 | 2 | 2 | 8 | 20 | 6.0 | 2.0 |")
    assert lines[-3].endswith("| 8.0 | 1,024 |") and lines[2].endswith("| 8.0 | 2,048 |")
    assert lines[-1].startswith("Shuffled per tuple: 6.0 bytes written, 2.0 read")
    assert steps_table([step])[-1].startswith("| **all steps**"), "control: no tuples, no line"


def test_write_frame_keeps_every_row_when_asked(spark: Any, tmp_path: Path) -> None:
    ref = Results(pairs=[(1, 2), (3, None)], aggregates=[], late=[9])
    d = str(tmp_path / "results")
    write_results(d, "other", ref)
    write_frame(_frame(spark, ref), d, "ref", keep=True)
    assert fp.registered(d, "ref") is None
    assert ds.dataset(engine_dir(d, "ref"), format="parquet").to_table().num_rows == 3
    write_frame(_frame(spark, ref), d, "ref2", keep=False)  # control: fingerprinted, nothing written
    assert fp.registered(d, "ref2") is not None and not os.path.exists(engine_dir(d, "ref2"))
    fp.unregister(d, "ref2")
