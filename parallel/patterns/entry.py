"""One entry point for the three patterns: events (or chunks) in, :class:`~oij.parallel.registry.EngineRun` out.

Data flow::

    Sequence[Event] --chunks_from_events--> execute_job(PatternPlan) (processes, rings) --> Sink --> Results
                                                                                         --> compute_metrics

:class:`PatternPlan` is what KP, DP and HP add to the shared execute loop
(:mod:`oij.parallel.runtime.execute`): the option checks, the collector, and HP's
calibration (after ``calibration`` tuples, the per-emitter key counts go to
replica 0, which runs Alg. 1; the router adopts the map it sends back at an
epoch boundary, or waits for it with ``sync_map``).  It creates no segment.

Ownership: if ``options.runtime`` is given, the caller owns that
:class:`~oij.parallel.runtime.pool.Runtime` (tests reuse one pool of processes
across many runs); otherwise a runtime is created here and closed before
returning, on success and on failure alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from oij.parallel.config import ROUTED_PATTERNS
from oij.parallel.registry import EngineOptions, EngineRun, options_for
from oij.parallel.runtime.emitter import Chunk, Routed, Router
from oij.parallel.runtime.execute import JobPlan, Pump, execute_job, run_registered
from oij.parallel.runtime.metrics import compute_metrics
from oij.parallel.runtime.pool import JobOptions, Runtime
from oij.spec.batch import Results
from oij.spec.model import Event, Query


class PatternPlan(JobPlan):
    """KP, DP or HP (``opt.pattern``) in the execute loop (module docstring)."""

    opt: JobOptions

    def __init__(self, q: Query, opt: JobOptions) -> None:
        collector = opt.collector
        if collector == "auto":
            collector = "standard" if opt.pattern == "kp" else "round-robin"
        super().__init__(q, opt, collector)
        self.calib_sent = False
        self.map_applied_at: int | None = None
        self._router: Router | None = None

    def check(self, rt: Runtime) -> None:
        opt = self.opt
        if not 1 <= opt.replicas <= rt.n:
            raise ValueError(f"replicas must be in [1, {rt.n}] for this runtime, got {opt.replicas}")
        if not 1 <= opt.batch <= 4096:
            raise ValueError(f"batch must be in [1, 4096], got {opt.batch}")
        if opt.emitters < 1:
            raise ValueError(f"emitters must be >= 1, got {opt.emitters}")
        if opt.pattern not in ROUTED_PATTERNS:
            raise ValueError(f"unknown pattern {opt.pattern!r}")

    def router(self) -> Router:
        opt = self.opt
        self._router = Router(self.q, opt.pattern, opt.replicas, opt.emitters, opt.batch)
        return self._router

    def extra_spec(self, r: int) -> dict[str, Any]:
        opt = self.opt
        return {"keybased": opt.pattern == "hp", "cond_index": opt.cond_index, "trace": opt.trace}

    def after_epoch(self, pump: Pump, routed: Routed, tuples: int, t0: float) -> None:
        opt, rt, router = self.opt, pump.rt, self._router
        assert router is not None
        if opt.pattern != "hp":
            return
        if not self.calib_sent and tuples >= opt.calibration:
            counts, key2r = router.calibration_request()
            n = opt.replicas
            rt.ctls[0].put(("calibrate", counts, key2r, n, opt.theta, opt.max_split or n))
            self.calib_sent = True
            if opt.sync_map:
                while not self._take_map(rt, router):
                    pump.drain()
                    rt._poll_up(0.002)
                self.map_applied_at = tuples
        elif self.calib_sent and self.map_applied_at is None:
            rt._poll_up(0)
            if self._take_map(rt, router):
                self.map_applied_at = tuples

    @staticmethod
    def _take_map(rt: Runtime, router: Router) -> bool:
        got = rt._take("map")
        if got:
            router.apply_map({int(k): v for k, v in got[-1][2].items()})
            return True
        return False

    def finish(self, tuples: int, wall_s: float) -> dict[str, Any]:
        router = self._router
        assert router is not None
        return {
            "key2r": {int(k): list(v) for k, v in router.key2r.items()},
            "map_applied_at": self.map_applied_at,
            "calibration_counts": router.counts.sum(axis=0).tolist() if self.opt.pattern == "hp" else [],
        }


def run_chunks(pattern: str, q: Query, chunks: Iterable[Chunk], events: int, opt: JobOptions,
               runtime: Runtime | None = None, start_method: str = "spawn",
               cdf_points: int = 0, stream: Callable[[Results], None] | None = None, columns: bool = False
               ) -> tuple[Results, dict[str, Any]]:
    """Run ``pattern`` over ``chunks``; (canonical results, metrics).  ``events`` counts the input tuples.

    With ``stream``, results go to it as they complete and the returned results are empty.  With
    ``columns`` (pairs mode, no stream), the returned results are empty too and ``metrics["pair_columns"]``
    holds them column-wise (:meth:`~oij.parallel.runtime.sink.Sink.pair_columns`), for a writer that needs
    no Python object per pair.
    """
    rt = runtime if runtime is not None else Runtime(opt.replicas, start_method)
    try:
        sink, drive = execute_job(rt, q, chunks, PatternPlan(q, opt), stream)
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
    return run_registered(q, events, options_for(JobOptions, pattern, options), options, run_chunks)
