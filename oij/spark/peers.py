"""Spark Structured Streaming as a peer in ``oij bench peers``: the stream-stream join over the peers CSV.

Data flow::

    CSV file or directory of CSV parts --file source (side,id,ts,key), one file per micro-batch, AvailableNow-->
        +--side = 0 --withWatermark(t, lateness ms)--+
        +--side = 1 --withWatermark(t, lateness ms)--+--join on key and t_p BETWEEN t_b + lower AND t_b + upper
        --> CSV sink DIR/out (base,probe)

Times are oij's units taken as ms (``timestamp_millis(ts + SHIFT)``, as in :mod:`oij.spark.streaming`).  The
bench gives a directory of parts (mtimes in arrival order, one micro-batch each), so the watermark moves and
the join state is evicted between batches; with every delay <= lateness nothing is dropped as late, so
the result is exact, which the bench checks.  The wall time includes the JVM and
session start (as every peer's includes its own start).

Run as ``python -m oij.spark.peers CSV OUT PARALLELISM LOWER UPPER LATENESS``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from oij.spark.session import spark_session
from oij.spark.streaming import SHIFT


def run(csv: str, out: str, parallelism: int, lower: int, upper: int, lateness: int) -> None:
    spark = spark_session(f"local[{parallelism}]", app_name="oij-peers", shuffle_partitions=4 * parallelism)
    from pyspark.sql import functions as F

    d = Path(tempfile.mkdtemp(prefix="oij-spark-peers-"))
    try:
        if os.path.isdir(csv):
            src = Path(csv)
        else:
            src = d / "in"
            src.mkdir()
            os.symlink(os.path.abspath(csv), src / "events.csv")
        ev = (spark.readStream.schema("side INT, id LONG, ts LONG, k LONG").option("maxFilesPerTrigger", 1)
              .csv(str(src))
              .withColumn("t", F.timestamp_millis(F.col("ts") + F.lit(SHIFT))))
        wm = f"{lateness} milliseconds"
        b = ev.where("side = 0").select(F.col("id").alias("a"), F.col("k").alias("kb"), F.col("t").alias("tb")) \
            .withWatermark("tb", wm)
        p = ev.where("side = 1").select(F.col("id").alias("b"), F.col("k").alias("kp"), F.col("t").alias("tp")) \
            .withWatermark("tp", wm)
        cond = F.expr(f"kb = kp AND tp >= tb + INTERVAL {lower} MILLISECONDS AND tp <= tb + INTERVAL {upper} "
                      "MILLISECONDS")
        q = (b.join(p, cond).select("a", "b").writeStream.format("csv").option("path", str(d / "out"))
             .option("checkpointLocation", str(d / "ck")).trigger(availableNow=True).start())
        try:
            q.awaitTermination()
        finally:
            q.stop()
        with open(out, "wb") as f:
            for part in sorted((d / "out").glob("part-*")):
                f.write(part.read_bytes())
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    _, csv_, out_, par, lo, hi, lat = sys.argv
    run(csv_, out_, int(par), int(lo), int(hi), int(lat))
