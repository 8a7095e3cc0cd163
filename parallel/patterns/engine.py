"""One entry point for the three patterns: events (or chunks) in, :class:`~parallel.registry.EngineRun` out.

Data flow::

    Sequence[Event] --chunks_from_events--> Runtime.execute (processes, rings) --> Sink --> Results
                                                                               --> compute_metrics

Ownership: if ``options.extra["runtime"]`` is given, the caller owns that
:class:`~parallel.runtime.driver.Runtime` (tests reuse one pool of processes
across many runs); otherwise a runtime is created here and closed before
returning, on success and on failure alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from parallel.registry import EngineOptions, EngineRun
from parallel.runtime.driver import JobOptions, Runtime
from parallel.runtime.emitter import EPOCH_MIN, Chunk, chunks_from_events
from parallel.runtime.metrics import compute_metrics
from spec.batch import Results
from spec.model import Event, Query, StreamTuple

_JOB_FIELDS = ("collector", "slots", "result_width", "theta", "max_split", "calibration", "sync_map", "epoch",
               "rate", "seed", "trace", "fail_after", "stall", "cond_index")


def job_options(pattern: str, options: EngineOptions) -> JobOptions:
    kw: dict[str, Any] = {k: options.extra[k] for k in _JOB_FIELDS if k in options.extra}
    return JobOptions(pattern=pattern, replicas=options.replicas, emitters=options.emitters, batch=options.batch,
                      **kw)


def epoch_size(opt: JobOptions) -> int:
    """Events per epoch: enough for a few full batches per channel and replica."""
    if opt.epoch:
        return opt.epoch
    return max(EPOCH_MIN, 4 * opt.batch * opt.replicas * opt.emitters)


def run_chunks(pattern: str, q: Query, chunks: Iterable[Chunk], events: int, opt: JobOptions,
               runtime: Runtime | None = None, start_method: str = "spawn",
               cdf_points: int = 0, stream: Callable[[Results], None] | None = None, columns: bool = False
               ) -> tuple[Results, dict[str, Any]]:
    """Run ``pattern`` over ``chunks``; (canonical results, metrics).  ``events`` counts the input tuples.

    With ``stream``, results go to it as they complete and the returned results are empty.  With
    ``columns`` (pairs mode, no stream), the returned results are empty too and ``metrics["pair_columns"]``
    holds them column-wise (:meth:`~parallel.runtime.sink.Sink.pair_columns`), for a writer that needs
    no Python object per pair.
    """
    rt = runtime if runtime is not None else Runtime(opt.replicas, start_method)
    try:
        sink, drive = rt.execute(q, chunks, opt, stream)
        cols = columns and stream is None and q.aggregate is None
        res = Results() if cols else sink.results()
        metrics = compute_metrics(pattern, q, opt, drive, sink, events, cdf_points)
        if cols:
            metrics["pair_columns"] = sink.pair_columns()
        if opt.trace:
            metrics["traces"] = [s.get("trace", []) for s in drive["replica_stats"]]
            metrics["key2r"] = drive["key2r"]
        return res, metrics
    finally:
        if runtime is None:
            rt.close()


def run_engine(pattern: str, q: Query, events: Sequence[Event], options: EngineOptions) -> EngineRun:
    """The registry's engine callable for ``pattern``."""
    opt = job_options(pattern, options)
    chunks = chunks_from_events(events, epoch_size(opt), q=q)
    n = sum(1 for e in events if type(e) is StreamTuple)
    res, metrics = run_chunks(pattern, q, chunks, n, opt, options.extra.get("runtime"),
                              options.extra.get("start_method", "spawn"))
    return EngineRun(res, metrics)
