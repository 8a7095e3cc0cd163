"""One job of chunks on the runtime's replica processes: the execute loop every ring-fed engine shares.

Its users describe their job with a :class:`JobPlan`: KP/DP/HP (:class:`oij.parallel.patterns.entry.PatternPlan`)
and Key-OIJ/Scale-OIJ (:class:`oij.parallel.shared.teamrun.TeamPlan`).  The loop itself -- starting the job on
the replicas, feeding, watching for failing replicas, collecting, tearing down -- is :func:`execute_job`.

Data flow of one job (driver process)::

    plan.router()                                          replica processes (oij.parallel.runtime.replica)
    chunks --pace (rate)--> Router.route: late ids, W, destinations
           --Pump.put (batches, then CLOSE(epoch, W) on every ring)--> input rings --> Collector --> job
           plan.after_epoch (HP calibration, Scale-OIJ's schedule and load samples)
    END on every input ring                                       ... END on every result ring
    Sink <--Pump.drain (also: liveness check every 5 ms)-- result rings <-- results
    "done" stats per replica <-- up queue;  drive = common measurements + plan.finish()

Ownership (who creates / who frees):

* Processes: the :class:`~oij.parallel.runtime.pool.Runtime`'s.  It starts them and only it stops them
  (:meth:`~oij.parallel.runtime.pool.Runtime.close`).  :func:`execute_job` closes the runtime on any failure --
  a replica's exception or death (:class:`~oij.parallel.runtime.pool.EngineFailure`), a driver exception,
  Ctrl-C -- and marks it broken unless the failure is an EngineFailure (which already did).
* Shared memory: :func:`execute_job` creates the job's input rings (``<prefix>-i<k>``) and result rings
  (``<prefix>-r<r>``), then :meth:`JobPlan.create` creates the plan's own segments (Scale-OIJ: one index
  per joiner and the team map).  One ``finally`` block closes and unlinks all of them, whatever happens:
  the rings, then :meth:`JobPlan.free`.  Replicas only attach and close.  ``<prefix>`` is
  ``oij-<pid>-<tag>-<job>`` (:meth:`~oij.parallel.runtime.pool.Runtime.begin_job`).
* :class:`Pump` owns nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy.typing as npt
from oij.parallel.config import C, epoch_size
from oij.parallel.registry import EngineOptions, EngineRun
from oij.parallel.runtime.emitter import Chunk, Routed, Router, chunks_from_events, order_channels
from oij.parallel.runtime.pool import EngineFailure, Runtime
from oij.parallel.runtime.ring import KIND_CLOSE, KIND_END, RESULT, TUPLE, Ring, ring_dtype
from oij.parallel.runtime.sink import Sink
from oij.spec.batch import Results
from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import Event, Query, StreamTuple


class Pump:
    """The driver's side of the rings during one job.

    ``put`` retries a full ring with exponential back-off, draining the result
    rings meanwhile so a replica blocked on its result ring can always make
    progress; ``drain`` also checks the replicas' liveness every 5 ms, so a
    dead replica fails the run fast.  ``epoch`` is stamped on every batch.
    Owns nothing: the rings belong to the job, the processes to the runtime.
    """

    def __init__(self, rt: Runtime, results: list[Ring], sink: Sink) -> None:
        self.rt = rt
        self.results = results
        self.sink = sink
        self.epoch = 0
        self._last_check = time.monotonic()

    def drain(self) -> None:
        """Move every available result batch into the sink; check liveness now and then."""
        sink = self.sink
        for r, ring in enumerate(self.results):
            while True:
                b = ring.get(0)
                if b is None:
                    break
                if len(b.recs):
                    sink.take(b.recs, time.monotonic_ns())
                if b.kind == KIND_END:
                    sink.ended.add(r)
        now = time.monotonic()
        if now - self._last_check > 0.005:
            self._last_check = now
            self.rt.check()

    def put(self, ring: Ring, recs: npt.NDArray[Any] | None, wm: int, kind: int) -> None:
        """Put one batch (or a marker) on ``ring``, waiting while it is full."""
        pause = 2e-6
        while not ring.put(recs, self.epoch, wm, kind):
            self.drain()
            time.sleep(pause)
            pause = min(pause * 2, 5e-4)

    def pace(self, due: float) -> None:
        """Wait until ``time.perf_counter()`` reaches ``due`` (a paced source), draining meanwhile."""
        while time.perf_counter() < due:
            self.drain()
            time.sleep(min(2e-4, max(0.0, due - time.perf_counter())))


class LoopOptions(Protocol):
    """The options the loop reads (:class:`~oij.parallel.runtime.pool.JobOptions`,
    :class:`~oij.parallel.shared.teamrun.TeamOptions`)."""

    replicas: int
    emitters: int
    batch: int
    slots: int
    result_width: int
    rate: float | None
    seed: int
    fail_after: dict[int, int]
    stall: tuple[int, ...]


class JobPlan:
    """What one engine adds to :func:`execute_job`: its checks, router, segments, job message and per-epoch
    work.  Subclasses override the hooks; ``collector`` is the replicas' collector."""

    def __init__(self, q: Query, opt: LoopOptions, collector: str) -> None:
        self.q = q
        self.opt = opt
        self.collector = collector

    def check(self, rt: Runtime) -> None:
        """Raise ValueError for options ``rt`` cannot run (before the job starts; the runtime stays usable)."""

    def router(self) -> Router:
        """The job's emitters and routing (called once, inside the failure handling)."""
        raise NotImplementedError

    def create(self, prefix: str) -> None:
        """Create the plan's own segments (names start with ``prefix``), recorded for :meth:`free`."""

    def free(self) -> None:
        """Close and unlink every segment :meth:`create` made, even after a partial :meth:`create`."""

    def extra_spec(self, r: int) -> dict[str, Any]:
        """The plan's part of replica ``r``'s job message."""
        return {}

    def after_epoch(self, pump: Pump, routed: Routed, tuples: int, t0: float) -> None:
        """After every epoch (its batches and CLOSE sent, results drained): ``tuples`` routed so far, ``t0``
        the ``perf_counter`` at the start."""

    def finish(self, tuples: int, wall_s: float) -> dict[str, Any]:
        """The plan's measurements, added to the driver's after every replica is done."""
        return {}


def execute_job(rt: Runtime, q: Query, chunks: Iterable[Chunk], plan: JobPlan,
                stream: Callable[[Results], None] | None = None) -> tuple[Sink, dict[str, Any]]:
    """Run one job over ``chunks`` on ``rt``; return the sink (results) and the driver's measurements.

    With ``stream``, results are handed to it as they complete instead of kept
    (:class:`~oij.parallel.runtime.sink.Sink`).  Failure rules and ownership: module docstring.
    """
    if rt.closed or rt.broken:
        raise EngineFailure(f"the runtime is unusable: {rt.broken or 'closed'}")
    plan.check(rt)
    prefix = rt.begin_job()
    try:
        return _execute(rt, q, chunks, plan, prefix, stream)
    except BaseException as e:
        if not isinstance(e, EngineFailure):
            rt.broken = f"{type(e).__name__}: {e}"
        rt.close()
        raise


def _execute(rt: Runtime, q: Query, chunks: Iterable[Chunk], plan: JobPlan, prefix: str,
             stream: Callable[[Results], None] | None) -> tuple[Sink, dict[str, Any]]:
    opt = plan.opt
    n, m = opt.replicas, opt.emitters
    router = plan.router()
    dp = router.pattern == "dp"
    rings: list[Ring] = []
    try:
        nring = router.rings()
        for i in range(nring):
            rings.append(Ring.create(f"{prefix}-i{i}", opt.slots, opt.batch, n if dp else 1, ring_dtype(q)))
        results = [Ring.create(f"{prefix}-r{r}", opt.slots, opt.result_width, 1, "result") for r in range(n)]
        rings.extend(results)
        inputs = rings[:nring]
        plan.create(prefix)
        for r in range(n):
            spec = {
                "inputs": [(c, inputs[c].spec, r) if dp else (c, inputs[c * n + r].spec, 0) for c in range(2 * m)],
                "order": order_channels(m),
                "result": results[r].spec,
                "collector": plan.collector,
                "lo": lower_offset(q),
                "hi": upper_offset(q),
                "pairs": q.aggregate is None,
                "partial": q.aggregate is not None or q.join == "left",
                "cond": q.cond,
                "seed": opt.seed,
                "fail_after": opt.fail_after.get(r),
                "stall": r in opt.stall,
                **plan.extra_spec(r),
            }
            rt.ctls[r].put(("job", spec))
        return _drive(rt, q, chunks, plan, router, inputs, results, stream)
    finally:
        for ring in rings:
            ring.close()
            ring.unlink()
        plan.free()


def _drive(rt: Runtime, q: Query, chunks: Iterable[Chunk], plan: JobPlan, router: Router, inputs: list[Ring],
           results: list[Ring], stream: Callable[[Results], None] | None) -> tuple[Sink, dict[str, Any]]:
    opt = plan.opt
    sink = Sink(q, stream)
    n = opt.replicas
    tuples = deliveries = batches = bytes_written = 0
    t0 = time.perf_counter()
    t0_ns = time.monotonic_ns()
    pump = Pump(rt, results, sink)
    drain, put = pump.drain, pump.put

    for c in chunks:
        if opt.rate:
            # pace the source: the chunk's tuples are "created" when the clock reaches them
            pump.pace(t0 + (tuples + c.events.tuples) / opt.rate)
        routed = router.route(c, time.monotonic_ns())
        sink.add_late(routed.late)
        tuples += routed.tuples
        deliveries += routed.deliveries
        for ring_i, recs, wm in routed.sends:
            put(inputs[ring_i], recs, wm, 0)
            batches += 1
            bytes_written += recs.nbytes
        for ring in inputs:
            put(ring, None, routed.w_end, KIND_CLOSE)
        drain()
        pump.epoch += 1
        plan.after_epoch(pump, routed, tuples, t0)
    for ring in inputs:
        put(ring, None, router.ms.max() if q.lateness is None else 0, KIND_END)
    while len(sink.ended) < n:
        drain()
        time.sleep(2e-5)
    t_end = time.perf_counter()
    stats: dict[int, dict[str, Any]] = {}
    while len(stats) < n:
        for msg in rt._take("done"):
            stats[msg[1]] = msg[2]
        if len(stats) < n:
            rt._poll_up(0.01)
            rt.check()
    drive = {
        "wall_s": t_end - t0,
        "t0_ns": t0_ns,
        "tuples": tuples,
        "deliveries": deliveries,
        "batches": batches,
        "epochs": pump.epoch,
        "bytes_written": bytes_written,
        "bytes_read": deliveries * TUPLE.itemsize,
        "result_bytes": sink.records * RESULT.itemsize,
        "replica_stats": [stats[r] for r in range(n)],
        **plan.finish(tuples, t_end - t0),
    }
    return sink, drive



RunChunks = Callable[[str, Query, Iterable[Chunk], int, C, Runtime | None, str], tuple[Results, dict[str, Any]]]
"""An event engine's run: ``(pattern, query, chunks, tuples, options, runtime or None, start method) -> (results,
metrics)``."""


def run_registered(q: Query, events: Sequence[Event], opt: C, options: EngineOptions,
                   run_chunks: RunChunks[C]) -> EngineRun:
    """A registered event engine's call: ``events`` cut into epochs of :func:`~oij.parallel.config.epoch_size`
    and run by ``run_chunks`` with ``opt``, on ``options.runtime`` (or a runtime of its own).  O(events) here."""
    chunks = chunks_from_events(events, epoch_size(opt), q=q)
    n = sum(1 for e in events if type(e) is StreamTuple)
    res, metrics = run_chunks(opt.pattern, q, chunks, n, opt, options.runtime, options.start_method)
    return EngineRun(res, metrics)
