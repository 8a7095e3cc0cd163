"""Comparing an engine's output with the oracle's: missing and extra rows both ways, wrong aggregates, late sets.

Results of every engine are stored as one Parquet dataset partitioned by
engine (``results/engine=<name>/``) with the columns of
:data:`oij.spark.oracle.RESULT_COLUMNS`.  Two results agree iff

* their pairs are equal as multisets (a duplicated pair is one *extra* row,
  a pair the engine lacks one *missing* row; a left join's (a, null) rows
  included);
* every base has exactly one aggregate row in both, with the same count and a
  value equal within ``tol`` relative (:func:`close`) -- otherwise the row is
  missing, extra or *wrong*;
* their late ids are equal as multisets.

:func:`compare_frames` does this with Spark (any size); :func:`compare_results`
does the same in Python for results in memory (``--no-spark``).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from oij.spec.aggregate import AggregateValue
from oij.spec.batch import Pair, Results

TOLERANCE = 1e-9

RESULT_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("base", pa.int64()),
        ("probe", pa.int64()),
        ("count", pa.int64()),
        ("value", pa.float64()),
        ("id", pa.int64()),
    ]
)


@dataclass
class ResultComparison:
    """How one engine's output differs from the reference.

    ``missing``/``extra`` count rows of every kind (pairs, aggregate rows,
    late ids); ``wrong`` counts aggregate rows present in both with a
    different count or value; ``by_kind`` splits them per kind;
    ``differences`` lists the first ones (dicts with kind, issue, base,
    probe, id, n, expected, got).
    """

    missing: int = 0
    extra: int = 0
    wrong: int = 0
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    differences: list[dict[str, Any]] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        """True iff nothing is missing, extra or wrong."""
        return self.missing == 0 and self.extra == 0 and self.wrong == 0

    def add(self, kind: str, issue: str, n: int) -> None:
        """Count ``n`` rows of ``kind`` with ``issue`` (missing | extra | wrong)."""
        setattr(self, issue, getattr(self, issue) + n)
        d = self.by_kind.setdefault(kind, {"missing": 0, "extra": 0, "wrong": 0})
        d[issue] += n


def close(x: AggregateValue, y: AggregateValue, tol: float = TOLERANCE) -> bool:
    """True iff two aggregate values agree: both null, equal, or within ``tol`` relative
    (``|x-y| <= tol max(|x|,|y|)``)."""
    if x is None or y is None:
        return x is None and y is None
    if x == y:
        return True
    return abs(x - y) <= tol * max(abs(x), abs(y))


def results_table(res: Results) -> pa.Table:
    """A :class:`~oij.spec.batch.Results` as an Arrow table with ``RESULT_SCHEMA``."""
    rows: list[tuple[str, int | None, int | None, int | None, float | None, int | None]] = []
    rows += [("pair", a, b, None, None, None) for a, b in res.pairs]
    rows += [("aggregate", a, None, n, None if v is None else float(v) + 0.0, None) for a, n, v in res.aggregates]
    rows += [("late", None, None, None, None, i) for i in res.late]
    cols = list(zip(*rows, strict=True)) if rows else [()] * 6
    return pa.table([list(c) for c in cols], schema=RESULT_SCHEMA)


def engine_dir(results_dir: str, engine: str) -> str:
    """The partition directory of ``engine`` in the results dataset."""
    return os.path.join(results_dir, f"engine={engine}")


def write_results(results_dir: str, engine: str, res: Results) -> str:
    """Write an in-memory result as the ``engine`` partition of the dataset (pyarrow, no Spark)."""
    d = engine_dir(results_dir, engine)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "part-00000.parquet")
    pq.write_table(results_table(res), path, compression="zstd")
    return path


def write_rows(frame: Any, results_dir: str, engine: str) -> str:
    """Write every row of a result frame (Spark) as the ``engine`` partition of the dataset."""
    d = engine_dir(results_dir, engine)
    frame.select(*_typed()).write.mode("overwrite").parquet(os.path.abspath(d))
    return d


def _typed() -> list[Any]:
    """The result columns cast to their types (a frame from pandas may hold ids as doubles)."""
    from pyspark.sql import functions as F

    types = {"kind": "string", "value": "double"}
    return [F.col(c).cast(types.get(c, "long")).alias(c) for c in RESULT_SCHEMA.names]


def _others(results_dir: str, engine: str) -> bool:
    """True when ``results_dir`` holds a partition of an engine other than ``engine``, written or remembered
    (:func:`oij.spark.fingerprint.register`)."""
    from oij.spark import fingerprint as fp

    if any(e != engine for e in fp.remembered(results_dir)):
        return True
    if not os.path.isdir(results_dir):
        return False
    return any(n.startswith("engine=") and n != f"engine={engine}" for n in os.listdir(results_dir))


def write_remembered(results_dir: str, engines: list[str]) -> None:
    """Write every row of each of ``engines`` that is only remembered (an output read by
    :func:`oij.spark.got.read_got_spark` without its rows written) as its partition, and forget the frame:
    for the steps that read the partitions themselves (the attribution to profiles)."""
    from oij.spark import fingerprint as fp

    for name in engines:
        lazy = fp.registered(results_dir, name)
        if lazy is not None:
            write_rows(lazy.frame, results_dir, name)
            fp.unregister(results_dir, name)


def write_frame(frame: Any, results_dir: str, engine: str, keep: bool | None = None) -> str:
    """Store a result frame (Spark; the reference) as the ``engine`` partition of the dataset.

    When the dataset already holds other engines' outputs (they are compared with this one) and ``keep`` is
    false (None: :func:`oij.spark.fingerprint.keep_results`, the environment), no row is written: the frame's
    fingerprints are computed (one pass, the rows aggregated where they are produced) and the frame is
    remembered, so that :func:`compare_frames` writes the rows of the buckets that differ only.  Otherwise
    every row is written.
    Returns the partition's directory.
    """
    from oij.spark import fingerprint as fp

    d = engine_dir(results_dir, engine)
    fp.unregister(results_dir, engine)
    if (fp.keep_results() if keep is None else keep) or not _others(results_dir, engine):
        return write_rows(frame, results_dir, engine)
    rows = frame.select(*_typed())
    fp.register(results_dir, engine, rows, fp.fingerprint(rows, cells=True))
    return d


def _diff(kind: str, issue: str, n: int, base: Any = None, probe: Any = None, id_: Any = None,
          expected: Any = None, got: Any = None) -> dict[str, Any]:
    return {"kind": kind, "issue": issue, "n": n, "base": base, "probe": probe, "id": id_, "expected": expected,
            "got": got}


def compare_results(ref: Results, got: Results, tol: float = TOLERANCE, first: int = 10) -> ResultComparison:
    """Compare in Python (see the module docstring); ``differences`` holds the first ``first`` in sorted order."""
    c = ResultComparison()
    diffs: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    rp: Counter[Pair] = Counter(ref.pairs)
    gp: Counter[Pair] = Counter(got.pairs)
    for p in rp.keys() | gp.keys():
        d = gp[p] - rp[p]
        if d:
            issue = "extra" if d > 0 else "missing"
            c.add("pair", issue, abs(d))
            diffs.append((("pair", p[0], -1 if p[1] is None else p[1], 0), _diff("pair", issue, abs(d), p[0], p[1])))
    ra: dict[int, list[tuple[int, AggregateValue]]] = {}
    ga: dict[int, list[tuple[int, AggregateValue]]] = {}
    for a, n, v in ref.aggregates:
        ra.setdefault(a, []).append((n, v))
    for a, n, v in got.aggregates:
        ga.setdefault(a, []).append((n, v))
    for a in ra.keys() | ga.keys():
        r, g = ra.get(a, []), ga.get(a, [])
        d = len(g) - len(r)
        if d:
            issue = "extra" if d > 0 else "missing"
            c.add("aggregate", issue, abs(d))
            diffs.append((("aggregate", a, 0, 0), _diff("aggregate", issue, abs(d), a, expected=r, got=g)))
        if r and g and any(n != r[0][0] or not close(r[0][1], v, tol) for n, v in g):
            c.add("aggregate", "wrong", 1)
            diffs.append((("aggregate", a, 1, 0), _diff("aggregate", "wrong", 1, a, expected=list(r[0]),
                                                        got=[list(x) for x in g])))
    rl: Counter[int] = Counter(ref.late)
    gl: Counter[int] = Counter(got.late)
    for i in rl.keys() | gl.keys():
        d = gl[i] - rl[i]
        if d:
            issue = "extra" if d > 0 else "missing"
            c.add("late", issue, abs(d))
            diffs.append((("late", 0, 0, i), _diff("late", issue, abs(d), id_=i)))
    diffs.sort(key=lambda t: t[0])
    c.differences = [d for _, d in diffs[:first]]
    return c


def _diff_frame(ref: Any, eng: Any, tol: float) -> Any:
    """One row per difference: kind, issue, n, base, probe, id, expected_count, expected_value, got_count, got_value.

    Two aggregations over the union of both outputs, each one shuffle: pairs and late ids grouped by the row
    itself with +1 for the engine's copies and -1 for the reference's (a non-zero sum is that many extra or
    missing rows), and aggregate rows grouped by base with each side's count and extreme values.
    """
    from pyspark.sql import functions as F

    null_l = F.lit(None).cast("long")
    null_d = F.lit(None).cast("double")
    rows = ("base", "probe", "id")
    signed = (ref.where(F.col("kind") != "aggregate").select("kind", *rows, F.lit(-1).alias("s"))
              .unionByName(eng.where(F.col("kind") != "aggregate").select("kind", *rows, F.lit(1).alias("s"))))
    d = F.col("d")
    multi = (signed.groupBy("kind", *rows).agg(F.sum("s").alias("d")).where(d != 0)
             .select("kind", F.when(d > 0, "extra").otherwise("missing").alias("issue"), F.abs(d).cast("long")
                     .alias("n"), *rows, null_l.alias("expected_count"), null_d.alias("expected_value"),
                     null_l.alias("got_count"), null_d.alias("got_value")))
    side = F.col("side")
    both = (ref.where(F.col("kind") == "aggregate").select("base", "count", "value", F.lit(0).alias("side"))
            .unionByName(eng.where(F.col("kind") == "aggregate").select("base", "count", "value",
                                                                         F.lit(1).alias("side"))))

    def of(s: int, c: Any) -> Any:
        return F.when(side == s, c)

    j = both.groupBy("base").agg(
        F.sum(of(0, F.lit(1))).alias("rn"), F.min(of(0, F.col("count"))).alias("rc"),
        F.min(of(0, F.col("value"))).alias("rv"),
        F.sum(of(1, F.lit(1))).alias("en"), F.min(of(1, F.col("count"))).alias("ec0"),
        F.max(of(1, F.col("count"))).alias("ec1"), F.min(of(1, F.col("value"))).alias("ev0"),
        F.max(of(1, F.col("value"))).alias("ev1"),
        F.sum(of(1, F.col("value").isNull().cast("int"))).alias("enull"),
    )

    def near(x: Any, y: Any) -> Any:
        both_null = x.isNull() & y.isNull()
        within = (x == y) | (F.abs(x - y) <= F.lit(tol) * F.greatest(F.abs(x), F.abs(y)))
        return both_null | F.coalesce(within, F.lit(False))

    rn, en = F.coalesce(F.col("rn"), F.lit(0)), F.coalesce(F.col("en"), F.lit(0))
    present = F.col("rn").isNotNull() & F.col("en").isNotNull()
    ref_null = F.col("rv").isNull()
    nulls_ok = F.when(ref_null, F.col("enull") == F.col("en")).otherwise(F.col("enull") == 0)
    wrong = present & ~(
        (F.col("rc") == F.col("ec0")) & (F.col("rc") == F.col("ec1")) & nulls_ok
        & near(F.col("rv"), F.col("ev0")) & near(F.col("rv"), F.col("ev1"))
    )

    def agg_rows(issue: Any, n: Any) -> list[Any]:
        return [
            F.lit("aggregate").alias("kind"), issue.alias("issue"), n.cast("long").alias("n"), F.col("base"),
            null_l.alias("probe"), null_l.alias("id"),
            F.col("rc").alias("expected_count"), F.col("rv").alias("expected_value"),
            F.col("ec0").alias("got_count"), F.col("ev0").alias("got_value"),
        ]

    count_rows = j.where(rn != en).select(*agg_rows(F.when(en > rn, "extra").otherwise("missing"), F.abs(en - rn)))
    wrong_rows = j.where(wrong).select(*agg_rows(F.lit("wrong"), F.lit(1)))
    return multi.unionByName(count_rows).unionByName(wrong_rows)


def _partition(spark: Any, results_dir: str, engine: str) -> Any:
    """The rows of ``engine``'s partition (an explicit schema: an empty partition reads as no rows)."""
    d = engine_dir(results_dir, engine)
    if not os.path.isdir(d):
        return spark.createDataFrame([], _SPARK_SCHEMA)
    return spark.read.schema(_SPARK_SCHEMA).parquet(os.path.abspath(d))


_SPARK_SCHEMA = "kind STRING, base BIGINT, probe BIGINT, count BIGINT, value DOUBLE, id BIGINT"


def reference_rows(spark: Any, results_dir: str, engine: str) -> Any:
    """Every row of ``engine`` in ``results_dir``: its remembered frame (:func:`write_frame`,
    :func:`oij.spark.got.read_got_spark`) or its partition."""
    from oij.spark import fingerprint as fp

    lazy = fp.registered(results_dir, engine)
    return lazy.frame if lazy is not None else _partition(spark, results_dir, engine)


def _differences(diffs: Any, first: int) -> ResultComparison:
    from pyspark.sql import functions as F

    c = ResultComparison()
    for r in diffs.groupBy("kind", "issue").agg(F.sum("n").alias("n")).collect():
        c.add(r["kind"], r["issue"], int(r["n"]))
    if not c.agrees:
        rows = diffs.orderBy("kind", "base", "probe", "id", "issue").limit(first).collect()
        for r in rows:
            exp = got = None
            if r["kind"] == "aggregate":
                exp = [r["expected_count"], r["expected_value"]]
                got = [r["got_count"], r["got_value"]]
            c.differences.append(_diff(r["kind"], r["issue"], int(r["n"]), r["base"], r["probe"], r["id"], exp, got))
    return c


def _compared(ref: Any, eng: Any, tol: float, first: int) -> ResultComparison:
    """:func:`_differences` of :func:`_diff_frame` (kept on the executors while both of its queries read it)."""
    from pyspark import StorageLevel

    diffs = _diff_frame(ref, eng, tol).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        return _differences(diffs, first)
    finally:
        diffs.unpersist()


def compare_frames(
    spark: Any, results_dir: str, reference: str, engines: list[str], tol: float = TOLERANCE, first: int = 10
) -> dict[str, ResultComparison]:
    """Compare every engine's partition of the dataset at ``results_dir`` with ``reference``, in Spark.

    By fingerprints (:mod:`oij.spark.fingerprint`): per bucket of base ids each side's row count and hash sums;
    only the buckets that differ are compared row by row (``_diff_frame``), so the result is that of the
    row-by-row comparison of everything.  A reference remembered by :func:`write_frame` has the rows of those
    buckets written to its partition (once, for every engine); when no bucket differs nothing of it is written.
    An engine remembered with its fingerprints (:func:`oij.spark.got.read_got_spark`) is compared by them, and
    its rows are written only when it differs (:func:`write_remembered`).
    """
    from oij.spark import fingerprint as fp

    cells = tol >= fp.MIN_TOLERANCE
    lazy = fp.registered(results_dir, reference)
    ref_all = reference_rows(spark, results_dir, reference)
    ref_fp = lazy.fingerprint if lazy is not None and lazy.cells == cells else fp.fingerprint(ref_all, cells)
    buckets: dict[str, list[int]] = {}
    for name in engines:
        mine = fp.registered(results_dir, name)
        prints = mine.fingerprint if mine is not None and mine.cells == cells else \
            fp.fingerprint(reference_rows(spark, results_dir, name), cells)
        buckets[name] = fp.differing(ref_fp, prints)
        if buckets[name]:  # an output that differs: its rows written, for the row-by-row look and the cases
            write_remembered(results_dir, [name])
    every = sorted(set().union(*buckets.values())) if buckets else []
    if lazy is not None and every:  # the reference's rows of the buckets that differ, computed once
        write_rows(fp.in_buckets(ref_all, every), results_dir, reference)
        ref_all = _partition(spark, results_dir, reference)  # the frame stays remembered: reference_rows
    out: dict[str, ResultComparison] = {}
    for name in engines:
        b = buckets[name]
        if not b:
            out[name] = ResultComparison()
            continue
        out[name] = _compared(fp.in_buckets(ref_all, b), fp.in_buckets(_partition(spark, results_dir, name), b),
                              tol, first)
    return out


def compare_frames_by_rows(
    spark: Any, results_dir: str, reference: str, engines: list[str], tol: float = TOLERANCE, first: int = 10
) -> dict[str, ResultComparison]:
    """:func:`compare_frames` without fingerprints: every row of both sides through ``_diff_frame`` (the
    definition the fingerprint path is tested against)."""
    ref = reference_rows(spark, results_dir, reference)
    out: dict[str, ResultComparison] = {}
    for name in engines:
        out[name] = _compared(ref, reference_rows(spark, results_dir, name), tol, first)
    return out
