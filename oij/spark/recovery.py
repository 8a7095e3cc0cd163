"""Spark Structured Streaming under crashes: the stream-stream join restarted from its checkpoint location.

``oij adapter spark-ss --restart-protocol`` runs one incarnation of the restart protocol (docs/recovery.rst,
:mod:`oij.io.recovery`).  The query is :func:`oij.spark.streaming.output_frame`, the same plan as the
``spark-ss`` adapter, judged under the same profile.

Data flow of one incarnation::

    stdin: query, events k+1..
      event j --tuple_json--> STATE/in/e{j}.json   (written once: an earlier incarnation's file stays, mtime T0 + j)
      after each file: query.processAllAvailable()  (file source, maxFilesPerTrigger=1: a micro-batch per file)
        micro-batch b --foreachBatch(df, b)--> the sink, then its new rows to stdout (provisional: b is not
                                                 committed in Spark's log yet; a kill here is a kill
                                                 *during* a micro-batch)
      processAllAvailable returned: STATE/chk/commits/b exists --> ledger (b, j), then {"type":"checkpoint","events":j}
    end line: every file processed --> exit 0

    restart (OIJ_CHECKPOINT=k): Ledger.rewind(k) = batch e; Spark resumes from STATE/chk (a batch planned in its
      offset log but not in its commit log runs again, on the same files); the sink records of batches after e
      are printed again first, then only what newly enters the sink.

The sinks (``-o sink=...``):

* ``idempotent`` (default): ``STATE/out/batch-{b}.jsonl``, written once per batch id (temp, fsync, rename):
  a batch that runs again after a crash finds its file and adds nothing, the exactly-once contract Spark
  documents for ``foreachBatch``;
* ``append``: every call of ``foreachBatch`` appends its rows to ``STATE/out/append.jsonl`` (fsynced), without
  looking at the batch id: the negative control, at-least-once when a batch runs again.

What the kit judges is what the sink holds, as a downstream reader would read it.

Resources: the SparkSession's JVM is a child of this process, in its process group (a SIGKILL of the group,
as the kit sends, ends both); the query is stopped and the session closed on a normal exit.  Every file lives
in the caller's state directory, which this module never removes, except ``STATE/tmp``: the session's
``spark.local.dir`` and the JVM's ``java.io.tmpdir`` (block manager, pyspark's and Spark's temporary
directories, extracted native libraries), emptied at each start.  Spark removes them at a normal stop; a killed
incarnation leaves them, and the next one removes them.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from oij.io.errors import InputError
from oij.io.jsonlread import read_jsonl
from oij.io.jsonlwrite import format_query, result_lines
from oij.io.recovery import Ledger, ProtocolOut, RestartRequest, fsync_dir, write_once
from oij.spark.streaming import check_supported, output_frame, result_rows, spark_conf, tuple_json
from oij.spec.model import End, StreamTuple

SINKS = ("idempotent", "append")
"""``-o sink=``: the exactly-once sink keyed by batch id, or the at-least-once negative control."""


class Sink:
    """The sink's records in ``STATE/out``: per batch id, the result lines it holds (O(records) to list)."""

    def __init__(self, out_dir: str, kind: str) -> None:
        self.dir = out_dir
        self.kind = kind
        os.makedirs(out_dir, exist_ok=True)

    def _batch_path(self, b: int) -> str:
        return os.path.join(self.dir, f"batch-{b:06d}.jsonl")

    def put(self, b: int, lines: list[str]) -> list[str]:
        """Batch ``b``'s rows into the sink; the lines that newly entered it."""
        if self.kind == "idempotent":
            return lines if write_once(self._batch_path(b), "".join(lines).encode()) else []
        path = os.path.join(self.dir, "append.jsonl")
        new = not os.path.exists(path)
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(f"{b}\t{line}" for line in lines)
            f.flush()
            os.fsync(f.fileno())
        if new:
            fsync_dir(self.dir)
        return lines

    def after(self, epoch: int | None) -> Iterator[str]:
        """Every line the sink holds for the batches after ``epoch`` (all when None), in batch order."""
        first = -1 if epoch is None else epoch
        if self.kind == "idempotent":
            names = sorted(n for n in os.listdir(self.dir) if n.startswith("batch-") and n.endswith(".jsonl"))
            for n in names:
                if int(n[6:-6]) > first:
                    with open(os.path.join(self.dir, n), encoding="utf-8") as f:
                        yield from f
            return
        path = os.path.join(self.dir, "append.jsonl")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    b, tab, rest = line.partition("\t")
                    if tab and rest.endswith("\n") and int(b) > first:  # a torn last line was never printed
                        yield rest


def committed_batches(chk: str) -> list[int]:
    """The batch ids in Spark's commit log (``chk/commits/N``), ascending."""
    d = os.path.join(chk, "commits")
    if not os.path.isdir(d):
        return []
    return sorted(int(n) for n in os.listdir(d) if n.isdigit())


def _tuples(events: Iterable[Any], path: str) -> Iterator[StreamTuple]:
    for e in events:
        if isinstance(e, End):
            return
        if not isinstance(e, StreamTuple):  # check_supported refuses watermark lines before this
            raise InputError(path, 0, "type", "spark-ss maps tuples only")
        yield e


def run_restart(req: RestartRequest, policy: str = "min") -> int:
    """One incarnation of the restart protocol on Spark (module docstring); 0 after the end line.

    Requires: the case within the ``spark-ss`` adapter's features (else exit 2 with one line, through
    :class:`InputError`).  Changes: ``STATE/in``, ``STATE/chk`` (Spark's), ``STATE/out``, ``STATE/ledger``,
    ``STATE/tmp``.
    Emits: the sink's new rows as they enter it, a checkpoint line after each committed micro-batch.
    """
    req.unknown_options(["sink"])
    sink_kind = req.option("sink", "idempotent", SINKS)
    r = req.env
    q, events = read_jsonl(req.stdin, "<stdin>")
    r.claim(format_query(q))
    check_supported(q, [])
    ledger = Ledger(r.state_dir)
    epoch = ledger.rewind(r.checkpoint)
    out = ProtocolOut(req.stdout, ledger)
    inp, chk = r.path("in"), r.path("chk")
    os.makedirs(inp, exist_ok=True)
    sink = Sink(r.path("out"), sink_kind)
    out.rows(sink.after(epoch))  # what the sink holds beyond the last checkpoint the kit saw
    t0 = os.stat(r.path("query.json")).st_mtime

    tmp = r.path("tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # what a killed incarnation's JVM left
    os.makedirs(tmp)

    from oij.spark.session import spark_session

    spark: Any = spark_session(req.master or "local[1]", app_name="oij-restart", driver_memory="1g",
                               conf=spark_conf(policy), tmp_dir=tmp)
    query = None
    try:
        def to_sink(df: Any, b: int) -> None:
            lines = list(result_lines(result_rows(q, df.collect())))
            out.rows(sink.put(b, lines))

        query = (output_frame(spark, q, inp).writeStream.outputMode("append").foreachBatch(to_sink)
                 .option("checkpointLocation", chk).start())
        j = r.checkpoint
        for t in _tuples(events, "<stdin>"):
            j += 1
            check_supported(q, [t])
            path = os.path.join(inp, f"e{j:06d}.json")
            if write_once(path, (tuple_json(t) + "\n").encode()):
                os.utime(path, (t0 + j, t0 + j))
            query.processAllAvailable()
            done = committed_batches(chk)
            out.checkpoint(done[-1] if done else -1, j)
        query.processAllAvailable()
        query.stop()
        query = None
    finally:
        if query is not None:
            query.stop()
        spark.stop()
    sys.stdout.flush()
    return 0


__all__ = ["SINKS", "Sink", "committed_batches", "run_restart"]
