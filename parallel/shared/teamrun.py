"""The driver of ``key`` and ``scale`` jobs, on the runtime's replica processes
(:class:`oij.parallel.runtime.pool.Runtime`).

Data flow of one job (driver process)::

    Chunk --Router (lateness at the emitter, as for KP/DP/HP)--> input rings --> joiners
            key:   hash(key) -> joiner (KP routing)                           (KeyJob / ScaleJob,
            scale: partition(key) -> a random member of its virtual team       loaded by the
                   (ScaleRouter), tuple counts per partition                   runtime's job hook)
            every ``schedule_every`` tuples: Alg. 3 -> TeamMap.replace (grow-only), then route with it
    Sink <-- result rings <-- joiners

The loop is the one KP/DP/HP use (:func:`oij.parallel.runtime.execute.execute_job`); :class:`TeamPlan` adds
the team-specific parts: the router, the job message, the schedule and the load samples after every epoch.

Ownership (who creates / who frees): :func:`~oij.parallel.runtime.execute.execute_job` creates the input and
result rings and unlinks them in its ``finally`` block; for ``scale``, :meth:`TeamPlan.create` creates one
index per joiner (:mod:`oij.parallel.shared.swmr`) and the team map (:mod:`oij.parallel.shared.teams`), and
:meth:`TeamPlan.free`, called from that same ``finally`` block, unlinks them.  The processes belong to the
:class:`~oij.parallel.runtime.pool.Runtime`; on any failure (an exception in a joiner, a killed joiner, a
driver exception, Ctrl-C) the runtime is closed exactly as for KP/DP/HP (no process left, every segment
unlinked) and :class:`~oij.parallel.runtime.pool.EngineFailure` names the cause.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from oij.parallel.config import DECAY, SCHEDULE_EVERY, EngineConfig
from oij.parallel.registry import EngineOptions, EngineRun, options_for
from oij.parallel.runtime.emitter import Chunk, Routed, Router, key_hash
from oij.parallel.runtime.execute import JobPlan, Pump, execute_job, run_registered
from oij.parallel.runtime.metrics import balance, compute_metrics
from oij.parallel.runtime.pool import Runtime
from oij.parallel.runtime.sink import Sink
from oij.parallel.shared.schedule import alg3, loads, unbalancedness
from oij.parallel.shared.swmr import Index, IndexSpec
from oij.parallel.shared.teams import TeamMap, partition_of
from oij.spec.batch import Results
from oij.spec.model import Event, Query

I64 = npt.NDArray[np.int64]


@dataclass
class TeamOptions(EngineConfig):
    """Options of a ``key`` or ``scale`` run: the shared settings (:class:`~oij.parallel.config.EngineConfig`;
    ``partitions`` and ``delta`` are Scale-OIJ's) and the teams' own (``scale``-only ones are ignored by
    ``key``)."""

    pattern: str = "scale"
    decay: float = DECAY  # scale: Alg. 3 lambda
    schedule_every: int = SCHEDULE_EVERY  # scale: tuples between two runs of Alg. 3 (0: never)
    rule: str = "team"  # scale: team | self | arrival (the last two are negative controls)
    incremental: bool = True  # scale: incremental aggregation (False: recompute every window)
    arena: int = 1 << 24  # scale: words per joiner index arena
    sample_every: int = 8192  # tuples per sample of the per-joiner loads over time
    lag: dict[int, float] = field(default_factory=dict)  # test hook: joiner -> seconds slept before each insert
    collector: str = "standard"  # fixed: every tuple of a job has one joiner (read by compute_metrics)


class ScaleRouter(Router):
    """KP's emitters and lateness decision, with Scale-OIJ's routing: a random member of the key's team."""

    def __init__(self, q: Query, n: int, m: int, batch: int, masks: list[int], partitions: int, seed: int) -> None:
        super().__init__(q, "kp", n, m, batch)
        self.partitions = partitions
        self.rng = np.random.default_rng(seed)
        self.x = np.zeros(partitions)  # tuples per partition (decayed): Eq. 3's |x_p|
        self.set_masks(masks)

    def set_masks(self, masks: list[int]) -> None:
        self.masks = list(masks)
        self.size = np.array([bin(m).count("1") for m in masks], dtype=np.int64)
        width = int(self.size.max())
        self.mem = np.zeros((len(masks), width), dtype=np.int64)
        for p, m in enumerate(masks):
            js = [j for j in range(self.n) if m >> j & 1]
            self.mem[p, : len(js)] = js

    def _kp(self, recs: npt.NDArray[Any], em: I64, wrow: I64) -> tuple[list[Any], int]:
        part = partition_of(recs["key"], self.partitions)
        self.x += np.bincount(part, minlength=self.partitions)
        pick = (self.rng.random(len(recs)) * self.size[part]).astype(np.int64)
        dest = self.mem[part, pick]
        recs["owner"] = dest
        recs["fan"] = 1
        g = em * self.n + dest
        order = np.argsort(g, kind="stable")
        bounds = np.flatnonzero(np.diff(g[order])) + 1
        out: list[Any] = []
        for sel in np.split(order, bounds):
            self._cut(int(g[sel[0]]), recs[sel], wrow[sel], out)
        return out, len(recs)


def initial_masks(n: int, partitions: int) -> list[int]:
    """Before any schedule: partition p belongs to joiner hash(p) mod n alone (Key-OIJ's static assignment)."""
    return [1 << int(key_hash(p, n)) for p in range(partitions)]


class TeamPlan(JobPlan):
    """``key`` or ``scale`` (``opt.pattern``) in the execute loop (:mod:`oij.parallel.runtime.execute`)."""

    opt: TeamOptions

    def __init__(self, q: Query, opt: TeamOptions) -> None:
        super().__init__(q, opt, "standard")
        self.scale = opt.pattern == "scale"
        self.masks = initial_masks(opt.replicas, opt.partitions)
        self.indexes: list[Index] = []
        self.ispecs: list[IndexSpec] = []
        self.team: TeamMap | None = None
        self._router: Router | None = None
        self.interval = np.zeros(opt.replicas, dtype=np.int64)  # tuples routed to each joiner since the last sample
        self.samples: list[dict[str, Any]] = []
        self.schedules: list[dict[str, Any]] = []
        self.next_sample = opt.sample_every
        self.next_schedule = opt.schedule_every

    def check(self, rt: Runtime) -> None:
        opt = self.opt
        if not 1 <= opt.replicas <= min(rt.n, 63):
            raise ValueError(f"replicas must be in [1, {min(rt.n, 63)}] for this runtime, got {opt.replicas}")
        if not 1 <= opt.batch <= 4096:
            raise ValueError(f"batch must be in [1, 4096], got {opt.batch}")
        if opt.pattern not in ("key", "scale"):
            raise ValueError(f"unknown pattern {opt.pattern!r}")
        if opt.rule not in ("team", "self", "arrival"):
            raise ValueError(f"unknown rule {opt.rule!r}")

    def router(self) -> Router:
        opt, q, n, m = self.opt, self.q, self.opt.replicas, self.opt.emitters
        self._router = (ScaleRouter(q, n, m, opt.batch, self.masks, opt.partitions, opt.seed) if self.scale
                        else Router(q, "kp", n, m, opt.batch))
        return self._router

    def create(self, prefix: str) -> None:
        """Scale-OIJ's team map and one index per joiner."""
        if not self.scale:
            return
        n = self.opt.replicas
        self.team = TeamMap.create(f"{prefix}-teams", self.masks)
        for r in range(n):
            s = IndexSpec(f"{prefix}-x{r}", n, self.opt.arena, conds=len(self.q.cond))
            self.indexes.append(Index.create(s, n))
            self.ispecs.append(s)

    def free(self) -> None:
        for ix in self.indexes:
            ix.close()
            ix.unlink()
        if self.team is not None:
            self.team.close()
            self.team.unlink()

    def extra_spec(self, r: int) -> dict[str, Any]:
        opt = self.opt
        return {
            "job": "oij.parallel.shared.scaleoij:ScaleJob" if self.scale else "oij.parallel.shared.keyoij:KeyJob",
            "aggregate": self.q.aggregate,
            "keybased": False,
            "trace": False,
            "lag": opt.lag.get(r, 0.0),
            "joiners": opt.replicas,
            "indexes": self.ispecs,
            "teams": self.team.shm.name if self.team else None,
            "partitions": opt.partitions,
            "rule": opt.rule,
            "incremental": opt.incremental,
        }

    def after_epoch(self, pump: Pump, routed: Routed, tuples: int, t0: float) -> None:
        """The joiners' loads over time, and Scale-OIJ's schedule (Alg. 3) every ``schedule_every`` tuples."""
        opt, n, router, team, interval = self.opt, self.opt.replicas, self._router, self.team, self.interval
        for ring_i, recs, _wm in routed.sends:
            interval[ring_i % n] += len(recs)
        if tuples >= self.next_sample:
            unb = balance([float(x) for x in interval])[1]
            self.samples.append({"tuples": tuples, "t_s": time.perf_counter() - t0,
                                 "per_joiner": interval.tolist(), "unbalancedness": unb})
            interval[:] = 0
            self.next_sample = tuples + opt.sample_every
        if isinstance(router, ScaleRouter) and team is not None and opt.schedule_every \
                and tuples >= self.next_schedule:
            self.next_schedule = tuples + opt.schedule_every
            x = router.x.tolist()
            before = unbalancedness(x, router.masks, n)
            new = alg3(x, router.masks, n, opt.delta)
            changed = new != router.masks
            if changed:
                team.replace(new)  # published before any tuple is routed with it
                router.set_masks(new)
            router.x *= opt.decay
            sizes = [bin(mk).count("1") for mk in router.masks]
            self.schedules.append({"tuples": tuples, "t_s": time.perf_counter() - t0, "changed": changed,
                                   "unbalancedness_before": before, "unbalancedness_after": unbalancedness(x, new, n),
                                   "eq3_loads": loads(x, new, n), "mean_team_size": float(np.mean(sizes)),
                                   "max_team_size": max(sizes), "version": team.version()})

    def finish(self, tuples: int, wall_s: float) -> dict[str, Any]:
        interval = self.interval
        if interval.any():
            self.samples.append({"tuples": tuples, "t_s": wall_s, "per_joiner": interval.tolist(),
                                 "unbalancedness": balance([float(x) for x in interval])[1]})
        router = self._router
        return {"samples": self.samples, "schedules": self.schedules,
                "masks": list(router.masks) if isinstance(router, ScaleRouter) else []}


def execute(rt: Runtime, q: Query, chunks: Iterable[Chunk], opt: TeamOptions,
            stream: Callable[[Results], None] | None = None) -> tuple[Sink, dict[str, Any]]:
    """Run one ``key``/``scale`` job on ``rt`` (:func:`oij.parallel.runtime.execute.execute_job` with a
    :class:`TeamPlan`); the runtime's failure rules apply (module docstring)."""
    return execute_job(rt, q, chunks, TeamPlan(q, opt), stream)


def team_metrics(pattern: str, q: Query, opt: TeamOptions, drive: dict[str, Any], sink: Sink, events: int,
                 cdf_points: int = 0) -> dict[str, Any]:
    """The common metrics (:func:`oij.parallel.runtime.metrics.compute_metrics`) plus Scale-OIJ's
    (docs/scaleoij.rst)."""
    base = compute_metrics("kp", q, opt, drive, sink, events, cdf_points)
    rs = drive["replica_stats"]
    out = dict(base)
    out["pattern"] = pattern
    out["collector"] = "standard"
    lookups = sum(s.get("lookups", 0) for s in rs)
    ratio_n = sum(s.get("ratio_n", 0) for s in rs)
    visited = sum(s.get("visited", 0) for s in rs)
    in_window = sum(s.get("in_window", 0) for s in rs)
    agg = sum(s.get("agg_work", 0) for s in rs)
    agg_re = sum(s.get("agg_recompute_work", 0) for s in rs)
    work = [float(s.get("received", 0)) for s in rs]
    out.update({
        "lookups": lookups,
        "visited": visited,
        "in_window": in_window,
        "search_steps": sum(s.get("search_steps", 0) for s in rs),
        "effectiveness": (sum(s.get("ratio_sum", 0.0) for s in rs) / ratio_n) if ratio_n else None,
        "effectiveness_total": (in_window / visited) if visited else None,
        "unbalancedness": balance(work)[1],
        "load_balance_factor": balance(work)[0],
        "agg_work": agg,
        "agg_recompute_work": agg_re,
        "agg_work_saved": (1 - agg / agg_re) if agg_re else None,
        "sum_fallback_windows": sum(s.get("sum_fallback_windows", 0) for s in rs),
        "loads_over_time": drive["samples"],
        "unbalancedness_over_time": [s["unbalancedness"] for s in drive["samples"]],
    })
    if pattern == "scale":
        sched = drive["schedules"]
        masks = drive["masks"]
        sizes = [bin(mk).count("1") for mk in masks]
        out.update({
            "partitions": opt.partitions, "delta": opt.delta, "decay": opt.decay,
            "schedule_every": opt.schedule_every, "rule": opt.rule, "incremental": opt.incremental,
            "reschedules": sum(1 for s in sched if s["changed"]),
            "schedules": sched,
            "team_size_mean": float(np.mean(sizes)) if sizes else 1.0,
            "team_size_max": max(sizes) if sizes else 1,
            "avg_splitting_degree": float(np.mean(sizes)) if sizes else 1.0,
            "index_merges": sum(s.get("index_merges", 0) for s in rs),
            "index_evicted": sum(s.get("index_evicted", 0) for s in rs),
            "index_writer_waits": sum(s.get("index_waits", 0) for s in rs),
            "hazard_waits": sum(s.get("hazard_waits", 0) for s in rs),
        })
    return out


def run_chunks(pattern: str, q: Query, chunks: Iterable[Chunk], events: int, opt: TeamOptions,
               runtime: Runtime | None = None, start_method: str = "spawn",
               cdf_points: int = 0, stream: Callable[[Results], None] | None = None, columns: bool = False
               ) -> tuple[Results, dict[str, Any]]:
    """Run ``key``/``scale`` over ``chunks``; (canonical results, metrics).  Owns ``rt`` only if not given.

    With ``stream``, results go to it as they complete and the returned results are empty; ``columns``:
    as :func:`oij.parallel.patterns.entry.run_chunks`.
    """
    rt = runtime if runtime is not None else Runtime(opt.replicas, start_method)
    try:
        sink, drive = execute(rt, q, chunks, opt, stream)
        cols = columns and stream is None and q.aggregate is None
        metrics = team_metrics(pattern, q, opt, drive, sink, events, cdf_points)
        if cols:
            metrics["pair_columns"] = sink.pair_columns()
        return (Results() if cols else sink.results()), metrics
    finally:
        if runtime is None:
            rt.close()


def run_engine(pattern: str, q: Query, events: Sequence[Event], options: EngineOptions) -> EngineRun:
    """The registry's engine callable for ``key`` and ``scale``."""
    return run_registered(q, events, options_for(TeamOptions, pattern, options), options, run_chunks)
