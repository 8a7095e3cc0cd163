"""An ordinary Spark Structured Streaming job over an oij-jsonl workload, written as its users write it.

Unlike :mod:`oij.spark.streaming` (oij's adapter, which drives Spark one tuple per micro-batch with no-data
batches off and shifted timestamps), this job runs Spark its ordinary way: many rows per micro-batch, Spark's
default streaming settings, its own watermark schedule.  Its output is what a judge "up to schedule" (issue 63)
must accept.

Data flow::

    EVENTS (oij-jsonl, lateness mode) --tuples in arrival order, cut into FILES consecutive chunks-->
      WORK/in/base/part-00000.json ... part-{FILES-1}.json    (chunk i's base tuples; may be empty)
      WORK/in/probe/part-00000.json ...                       (chunk i's probe tuples; may be empty)
      (one JSON object per line: id, ts, key, value; mtimes strictly increasing with i)
    spark.readStream.json(base dir,  maxFilesPerTrigger=1) --t = timestamp_millis(ts)--withWatermark(t, L ms)--+
    spark.readStream.json(probe dir, maxFilesPerTrigger=1) --t = timestamp_millis(ts)--withWatermark(t, L ms)--+
      --inner (or left outer) join on key and b.t BETWEEN a.t + lower ms AND a.t + upper ms-->
      file sink (json, append mode) WORK/out, checkpointLocation CKPT, Trigger.AvailableNow
    WORK/out (read back as a batch, committed files only) --sorted canonically--> OUT (atomic: temp, fsync, rename)

Choices, and what they mean for the watermark:

* **Trigger**: ``Trigger.AvailableNow``.  The default trigger (processing time 0, "as fast as possible") never
  stops by itself; ``AvailableNow`` is Spark's trigger for "process everything that is there, in batches that
  respect ``maxFilesPerTrigger``, then stop", so each micro-batch reads file *i* of both sources (chunk *i*) and
  the query terminates once both directories are consumed.  Spark may add no-data batches (on by default,
  ``spark.sql.streaming.noDataMicroBatches.enabled``) when the watermark moved, e.g. one after the last file.
* **Watermark**: Spark's own, per input ``max(event time seen) - L`` at the end of each micro-batch, the global one
  the minimum over the two inputs (the default ``multipleWatermarkPolicy``); every row of a batch is judged
  against one watermark: the one computed at the end of batch *i* is ``batchWatermarkMs`` of batch *i+1*
  (``offsets/i+1``, used for its state eviction) and filters late rows (``t <= W``) in batch *i+2* (docs/findings.rst).
  Measured on issue 63's 3x10^4-tuple workload with 20 files: 21 batches (the last a no-data batch), no row
  dropped (each batch spans about 3.7 s of event time, more than any tuple's delay).
* **Timestamps are not shifted** (oij's adapter shifts them by 10^12 ms): ``t = timestamp_millis(ts)``, as a user
  would write it.  Spark's initial watermark is 0 (1970-01-01), and an input with no rows yet counts as 0, so
  the late filter ``t <= W`` drops every tuple with ``ts <= 0``, from batch 0 on (measured: tuples at -20, -10
  and 0 dropped, in one batch or in four, a pair at 5 joined).  oij generate's workloads start at ``ts >= 0``, so
  there only a tuple at exactly ``ts = 0`` is affected.
* Every other streaming setting is Spark's default.  The SparkSession is oij's
  (``oij.spark.session.spark_session``: UI off, quiet logs, ``spark.sql.shuffle.partitions`` 4 per core for
  a local master), which changes the number of state-store partitions, not which rows are late or joined.
* Keys: ints stay longs; any string key makes every key a tagged string (``i:1``, ``s:1``: distinct).
* ``join: left`` is Spark's left outer join: the ``(a, null)`` row appears when ``a`` is evicted.
* The output has pairs only: Spark drops late rows silently (no late lines).

Resources: :func:`run_spark_user_job` creates a temporary work directory (``oij-spark-userjob-*`` in the
system's temp dir: the input files, the sink's files and, unless ``checkpoint_dir`` is given, the checkpoint)
and removes it before returning, also on failure; a ``checkpoint_dir`` given is created if missing and kept (the
judge reads ``offsets/N`` and ``commits/N`` there), and the input files are then written beside it and kept
(``CKPT-inputs``: the checkpoint names them).  The streaming query is stopped in a ``finally``.  The
SparkSession (one JVM per process) is the one already running in this process, else started with ``master`` and
left running for the process's next Spark work (pyspark stops it at exit).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from oij.errors import UsageError
from oij.io.atomic import atomic_text
from oij.io.jsonlwrite import canonical_pair_order, write_pairs
from oij.io.keys import tag_key
from oij.io.userjob import read_workload
from oij.spec.model import BASE, Query, StreamTuple


def _write_inputs(root: str, tuples: Sequence[StreamTuple], files: int) -> int:
    """``files`` consecutive chunks of the tuples as ``root/base/part-NNNNN.json`` and ``root/probe/...``, mtimes
    increasing with the chunk; returns the number of chunks written (at most ``files``, at least 1)."""
    tagged = any(type(t.key) is not int for t in tuples)
    n = max(1, min(files, len(tuples)))
    now = time.time()
    for side in ("base", "probe"):
        os.makedirs(os.path.join(root, side))
    for i in range(n):
        chunk = tuples[len(tuples) * i // n: len(tuples) * (i + 1) // n]
        stamp = now - (n - i) * 2.0
        for side in ("base", "probe"):
            path = os.path.join(root, side, f"part-{i:05d}.json")
            with open(path, "w", encoding="utf-8") as f:
                for t in chunk:
                    if (t.side == BASE) == (side == "base"):
                        key = tag_key(t.key) if tagged else t.key
                        f.write(json.dumps({"id": t.id, "ts": t.ts, "key": key, "value": t.value}) + "\n")
            os.utime(path, (stamp, stamp))
    return n


def _frame(spark: Any, q: Query, inp: str, string_keys: bool) -> Any:
    """The join's streaming DataFrame (``a_id``, ``b_id``) over the two file sources under ``inp``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    schema = StructType([StructField("id", LongType()), StructField("ts", LongType()),
                         StructField("key", StringType() if string_keys else LongType()),
                         StructField("value", DoubleType())])
    delay = f"{q.lateness} milliseconds"

    def source(side: str, p: str) -> Any:
        df = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(os.path.join(inp, side))
              .select(F.col("id").alias(f"{p}_id"), F.col("key").alias(f"{p}_key"),
                      F.timestamp_millis("ts").alias(f"{p}_t")))
        return df.withWatermark(f"{p}_t", delay)

    a, b = source("base", "a"), source("probe", "b")
    lo = F.col("a_t") + F.expr(f"INTERVAL {q.lower} MILLISECONDS")
    hi = F.col("a_t") + F.expr(f"INTERVAL {q.upper} MILLISECONDS")
    cond = ((F.col("a_key") == F.col("b_key"))
            & (F.col("b_t") >= lo if q.lower_inclusive else F.col("b_t") > lo)
            & (F.col("b_t") <= hi if q.upper_inclusive else F.col("b_t") < hi))
    return a.join(b, cond, "leftOuter" if q.join == "left" else "inner").select("a_id", "b_id")


def checkpoint_batches(ckpt: str) -> list[dict[str, Any]]:
    """Per committed micro-batch of the checkpoint ``ckpt``: ``batch``, ``watermark_ms`` (the
    ``batchWatermarkMs`` of ``offsets/N``: the watermark the batch ran with) and the source offsets
    (``offsets``: the JSON of each source, in the order of ``offsets/N``)."""
    out: list[dict[str, Any]] = []
    commits = os.path.join(ckpt, "commits")
    done = sorted(int(f) for f in os.listdir(commits) if f.isdigit()) if os.path.isdir(commits) else []
    for n in done:
        with open(os.path.join(ckpt, "offsets", str(n)), encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        meta = json.loads(lines[1]) if len(lines) > 1 else {}
        out.append({"batch": n, "watermark_ms": meta.get("batchWatermarkMs"),
                    "offsets": [None if s == "-" else json.loads(s) for s in lines[2:]]})
    return out


def inputs_beside(checkpoint_dir: str) -> str:
    """Where the job keeps its input files when it keeps its checkpoint: ``CKPT-inputs`` beside ``CKPT``."""
    return os.path.abspath(checkpoint_dir.rstrip(os.sep)) + "-inputs"


def run_spark_user_job(events_path: str, out_path: str, *, files: int = 20, checkpoint_dir: str | None = None,
                       master: str = "local[2]") -> dict[str, Any]:
    """Run the ordinary Spark job (module docstring) on ``events_path``; write its pairs to ``out_path``.

    Returns ``{"batches", "data_batches", "rows", "tuples", "files", "seconds", "seconds_total", "checkpoint",
    "watermarks", "dropped_by_watermark", "progress"}``: committed micro-batches (no-data ones included), those
    that read a file, output rows, input tuples, chunks written, the wall time of the query (start to
    termination) and of the whole call, the checkpoint directory (None when it was temporary, hence removed),
    each committed batch's ``batchWatermarkMs`` (every batch's offsets and commits are retained in the checkpoint:
    ``spark.sql.streaming.minBatchesToRetain`` is raised above the batch count for the query, as is
    ``numRecentProgressUpdates``; Spark's default 100 would delete the older ones), the rows Spark's join
    dropped as late (its ``numRowsDroppedByWatermark``, summed) and each batch's progress report (``_progress``).

    Requires: a lateness-mode workload (else UsageError); Java 17 for Spark.  ``checkpoint_dir``, if given,
    must be empty or absent (Spark would otherwise resume an old query): UsageError if it holds anything; the
    input files are then kept beside it (:func:`inputs_beside`), where the checkpoint's source logs name them,
    so that ``oij check --schedule spark-checkpoint`` can read which tuples each batch held.
    Cost: one micro-batch per file (about 0.5 to 2 s each here) plus Spark's start.
    """
    from oij.spark.session import spark_session

    if files < 1:
        raise UsageError(f"files must be at least 1, got {files}")
    if checkpoint_dir is not None and os.path.isdir(checkpoint_dir) and os.listdir(checkpoint_dir):
        raise UsageError(f"{checkpoint_dir}: the checkpoint directory is not empty (Spark would resume from it)")
    kept_inputs = None if checkpoint_dir is None else inputs_beside(checkpoint_dir)
    if kept_inputs is not None and os.path.exists(kept_inputs):
        raise UsageError(f"{kept_inputs}: the input files beside the checkpoint already exist")
    begin = time.perf_counter()
    q, tuples = read_workload(events_path)
    string_keys = any(type(t.key) is not int for t in tuples)
    work = tempfile.mkdtemp(prefix="oij-spark-userjob-")
    query = None
    try:
        inp = os.path.join(work, "in") if kept_inputs is None else kept_inputs
        chunks = _write_inputs(inp, tuples, files)
        ckpt = checkpoint_dir if checkpoint_dir is not None else os.path.join(work, "ckpt")
        os.makedirs(ckpt, exist_ok=True)
        spark = spark_session(master)
        sink = os.path.join(work, "out")
        # keep every batch's progress report and every batch's offsets, commits and state versions in the
        # checkpoint (Spark keeps the last 100 of each): housekeeping settings, no semantics
        n_keep = str(max(100, 4 * chunks + 10))
        keep = {"spark.sql.streaming.numRecentProgressUpdates": n_keep,
                "spark.sql.streaming.minBatchesToRetain": n_keep}
        saved = {k: spark.conf.get(k, None) for k in keep}
        for k, v in keep.items():
            spark.conf.set(k, v)
        started = time.perf_counter()
        query = (_frame(spark, q, inp, string_keys).writeStream.format("json").outputMode("append")
                 .option("path", sink).option("checkpointLocation", ckpt)
                 .trigger(availableNow=True).start())
        try:
            query.awaitTermination()
        finally:
            for k, old in saved.items():  # the session may be shared (tests): leave it as it was
                if old is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, old)
        seconds = time.perf_counter() - started
        progress = [_progress(p) for p in query.recentProgress]
        a, b, null = _read_sink(spark, sink)
        order = canonical_pair_order(a, b, null)
        with atomic_text(out_path) as out:
            write_pairs(out, a[order], b[order], null[order])
        batches = checkpoint_batches(ckpt)
        data_batches = sum(1 for p in progress if p["input_rows"] > 0)
        return {"batches": len(progress), "data_batches": data_batches, "rows": len(a),
                "tuples": len(tuples), "files": chunks, "seconds": round(seconds, 3),
                "seconds_total": round(time.perf_counter() - begin, 3),
                "checkpoint": checkpoint_dir, "watermarks": [x["watermark_ms"] for x in batches],
                "dropped_by_watermark": sum(p["dropped"] for p in progress), "progress": progress}
    finally:
        if query is not None and query.isActive:
            query.stop()
        shutil.rmtree(work, ignore_errors=True)


def _progress(p: Any) -> dict[str, Any]:
    """The parts of one ``StreamingQueryProgress`` the judge may use: batch id, input rows, the event-time
    watermark Spark reports for it, and the join's state rows and rows dropped as late."""
    ops = list(p.stateOperators)
    return {"batch": p.batchId, "input_rows": p.numInputRows, "watermark": p.eventTime.get("watermark"),
            "dropped": sum(int(o.numRowsDroppedByWatermark) for o in ops),
            "state_rows": sum(int(o.numRowsTotal) for o in ops)}


def _read_sink(spark: Any, sink: str) -> tuple[Any, Any, Any]:
    """The committed rows of the file sink at ``sink`` as int64 columns (base, probe, probe is null)."""
    import numpy as np
    from pyspark.sql.types import LongType, StructField, StructType

    if not os.path.isdir(sink):
        z = np.empty(0, np.int64)
        return z, z, np.empty(0, np.bool_)
    schema = StructType([StructField("a_id", LongType()), StructField("b_id", LongType())])
    table = spark.read.schema(schema).json(sink).toArrow()
    a = table.column("a_id").to_numpy(zero_copy_only=False).astype(np.int64)
    bcol = table.column("b_id")
    null = bcol.is_null().to_numpy(zero_copy_only=False).astype(np.bool_)
    b = bcol.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return a, b, null


__all__ = ["checkpoint_batches", "inputs_beside", "run_spark_user_job"]
