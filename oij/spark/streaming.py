"""Spark Structured Streaming as an implementation under test: one oij-jsonl case through a stream-stream join.

Data flow for one case::

    events --(one JSON file per tuple, mtimes in arrival order)--> DIR/in/
    DIR/in --file source, maxFilesPerTrigger=1, Trigger.AvailableNow--> one micro-batch per tuple
          +--filter side=base --withWatermark(t, L ms)--+
          +--filter side=probe--withWatermark(t, L ms)--+--join on key and the time range--> foreachBatch
    foreachBatch --collect--> pair rows (base id, probe id or null) --> Results

What is mapped, and how:

* lateness mode only: Spark derives watermarks from event times
  (``max event time - delay`` per input); it has no watermark lines, so the
  ``watermarks``/``channels``/``regressions`` features are absent;
* timestamps are shifted by :data:`SHIFT` ms before ``timestamp_millis``, so
  that Spark's initial watermark 0 (and the 0 an input without rows counts
  as) lies below every shifted timestamp and plays the part of :math:`-\\infty`;
  ``|ts|`` must stay below :data:`TS_RANGE` (Spark timestamps end in year 9999), so
  ``extreme-ts`` is absent;
* keys are tagged strings (``i:1`` and ``s:1`` differ), so ``mixed-keys`` works;
* bounds: ``probe.t >= base.t + lower ms`` (``>`` when exclusive), likewise upper;
* ``join="left"`` is Spark's left outer join: the (a, null) row appears when
  the base is evicted;
* ``aggregates`` (adapter ``spark-ss-agg``): the left outer join, then
  ``groupBy(a_id, a_ts)`` in append mode (a stateful aggregation chained after
  the join; the grouping includes the base's watermarked event-time column, so
  Spark emits a group once the watermark passes it): ``count(b_id)`` (the
  null row counts 0), ``sum(b_value)`` with null as 0.0, ``min``, ``max``, and
  avg as sum / count.  Spark adds doubles in float arithmetic, in the order the
  rows reach the group, not exactly (see :mod:`oij.spec.aggregate`);
* late rows are dropped silently by Spark: ``late-report`` is absent.

``spark.sql.streaming.noDataMicroBatches.enabled=false``: with it on, Spark
runs extra batches without data when the watermark moves, and their number
depends on timing that this drive does not control.

Resources: :func:`run_case` creates a temporary directory (input files and
the checkpoint) and removes it before returning, also on failure; the
streaming query is stopped in a ``finally``.  The SparkSession (one JVM per
process) is created by the caller and reused across cases.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from oij.io.adapt import LATENESS_FEATURES, Unsupported, aggregate_row, check_lateness_case
from oij.io.keys import tag_key
from oij.spec.batch import Results
from oij.spec.model import BASE, End, Event, Query, StreamTuple

SHIFT = 10**12
"""Added to every timestamp (ms), so Spark's watermark 0 is below every tuple (about year 2001)."""

TS_RANGE = 10**14
"""``|ts|`` allowed by the adapter: shifted timestamps stay within Spark's years 1..9999."""

FEATURES = LATENESS_FEATURES
"""The oij.testing features this adapter implements (see the module docstring for the rest)."""

POLICIES = ("min", "max")
"""``spark.sql.streaming.multipleWatermarkPolicy`` values."""


def check_supported(q: Query, events: Sequence[Event]) -> None:
    """Raise :class:`Unsupported` unless the case is within ``FEATURES`` or is a per-base aggregate."""
    check_lateness_case(q, events, TS_RANGE,
                        "Spark derives watermarks from event times",
                        "Spark timestamps end in year 9999")


def spark_conf(policy: str = "min") -> dict[str, str]:
    """The SQL settings the drive needs (deterministic batches, one shuffle partition); set per query."""
    if policy not in POLICIES:
        raise ValueError(f"multipleWatermarkPolicy must be one of {POLICIES}, got {policy!r}")
    return {
        "spark.sql.streaming.multipleWatermarkPolicy": policy,
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.sql.shuffle.partitions": "1",
    }


def tuple_json(t: StreamTuple) -> str:
    """One tuple as the JSON line the file source reads (timestamps shifted by :data:`SHIFT`, keys tagged)."""
    return json.dumps({"side": t.side, "id": t.id, "t": t.ts + SHIFT, "key": tag_key(t.key), "value": t.value})


def _write_inputs(dirname: str, events: Sequence[Event]) -> int:
    """One JSON-lines file per tuple, in arrival order, with strictly increasing mtimes; returns the count."""
    tuples = [e for e in events if isinstance(e, StreamTuple)]
    now = time.time()
    for j, t in enumerate(tuples):
        path = os.path.join(dirname, f"e{j:06d}.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(tuple_json(t) + "\n")
        stamp = now - (len(tuples) - j) * 2.0
        os.utime(path, (stamp, stamp))
    return len(tuples)


def output_frame(spark: Any, q: Query, inp: str) -> Any:
    """The streaming DataFrame of the join's output rows over the tuple files in ``inp`` (one micro-batch per
    file): ``a_id, b_id`` pairs, or ``a_id, a_ts, n, s, mn, mx`` per base for an aggregate query.  Shared by
    :func:`run_case` and the restartable drive (:mod:`oij.spark.recovery`)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    schema = StructType([
        StructField("side", StringType()), StructField("id", LongType()),
        StructField("t", LongType()), StructField("key", StringType()), StructField("value", DoubleType()),
    ])
    src = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(inp)
           .withColumn("ts", F.timestamp_millis("t")))
    delay = f"{q.lateness} milliseconds"
    base = (src.where(F.col("side") == BASE)
            .select(F.col("id").alias("a_id"), F.col("key").alias("a_key"), F.col("ts").alias("a_ts"))
            .withWatermark("a_ts", delay))
    probe = (src.where(F.col("side") != BASE)
             .select(F.col("id").alias("b_id"), F.col("key").alias("b_key"), F.col("ts").alias("b_ts"),
                     F.col("value").alias("b_value"))
             .withWatermark("b_ts", delay))
    lo = F.col("a_ts") + F.expr(f"INTERVAL {q.lower} MILLISECONDS")
    hi = F.col("a_ts") + F.expr(f"INTERVAL {q.upper} MILLISECONDS")
    cond = ((F.col("a_key") == F.col("b_key"))
            & (F.col("b_ts") >= lo if q.lower_inclusive else F.col("b_ts") > lo)
            & (F.col("b_ts") <= hi if q.upper_inclusive else F.col("b_ts") < hi))
    how = "leftOuter" if q.join == "left" or q.aggregate is not None else "inner"
    joined = base.join(probe, cond, how)
    if q.aggregate is None:
        out = joined.select("a_id", "b_id")
    else:
        out = joined.groupBy("a_id", "a_ts").agg(
            F.count("b_id").alias("n"), F.sum("b_value").alias("s"),
            F.min("b_value").alias("mn"), F.max("b_value").alias("mx"))
    return out


def result_rows(q: Query, rows: Sequence[Any]) -> Results:
    """Collected rows of :func:`output_frame` as results (emission order kept)."""
    res = Results()
    if q.aggregate is None:
        res.pairs.extend((r["a_id"], r["b_id"]) for r in rows)
    else:
        res.aggregates.extend(aggregate_row(q.aggregate, int(r["a_id"]), int(r["n"]), r["s"], r["mn"], r["mx"])
                              for r in rows)
    return res


def run_case(spark: Any, q: Query, events: Sequence[Event], policy: str = "min") -> Results:
    """The pairs Spark's stream-stream join emits for the case, one micro-batch per tuple.

    Requires: ``check_supported(q, events)`` passes (else :class:`Unsupported`).
    Changes: nothing lasting; :func:`spark_conf` is set on the session for the
    query's start (SQL settings) and the old values are put back.  Emits no late lines (Spark drops late rows silently).
    Cost: one micro-batch per tuple, about 0.3 to 1 s each here.
    """
    check_supported(q, events)
    settings = spark_conf(policy)
    saved = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    work = tempfile.mkdtemp(prefix="oij-spark-ss-")
    query = None
    try:
        inp = os.path.join(work, "in")
        os.mkdir(inp)
        n = _write_inputs(inp, [e for e in events if not isinstance(e, End)])
        if n == 0:
            return Results()
        out = output_frame(spark, q, inp)
        rows: list[Any] = []

        def collect(df: Any, _batch: int) -> None:
            rows.extend(df.collect())

        query = (out.writeStream.outputMode("append").foreachBatch(collect)
                 .option("checkpointLocation", os.path.join(work, "ckpt"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return result_rows(q, rows).canonical()
    finally:
        if query is not None and query.isActive:
            query.stop()
        shutil.rmtree(work, ignore_errors=True)
        for k, old in saved.items():  # the session is shared (tests, oij check): leave it as it was
            if old is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, old)


__all__ = ["FEATURES", "POLICIES", "SHIFT", "TS_RANGE", "Unsupported", "check_supported", "output_frame",
           "result_rows", "run_case", "spark_conf", "tuple_json"]
