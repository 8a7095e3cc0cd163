"""The driver of ``key`` and ``scale`` jobs, on the runtime's replica processes
(:class:`parallel.runtime.driver.Runtime`).

Data flow of one job (driver process)::

    Chunk --Router (lateness at the emitter, as for KP/DP/HP)--> input rings --> joiners
            key:   hash(key) -> joiner (KP routing)                           (KeyJob / ScaleJob,
            scale: partition(key) -> a random member of its virtual team       loaded by the
                   (ScaleRouter), tuple counts per partition                   runtime's job hook)
            every ``schedule_every`` tuples: Alg. 3 -> TeamMap.replace (grow-only), then route with it
    Sink <-- result rings <-- joiners

Ownership (who creates / who frees): :func:`execute` creates every segment of
the job -- the input and result rings, and for ``scale`` one index per
joiner (:mod:`parallel.shared.swmr`) and the team map
(:mod:`parallel.shared.teams`) -- and unlinks all of them in a ``finally``
block.  The processes belong to the :class:`~parallel.runtime.driver.Runtime`; on any failure (an
exception in a joiner, a killed joiner, a driver exception, Ctrl-C) the
runtime is closed exactly as for KP/DP/HP (no process left, every segment
unlinked) and :class:`~parallel.runtime.driver.EngineFailure` names the cause.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from parallel.registry import EngineOptions, EngineRun
from parallel.runtime.driver import EngineFailure, Pump, Runtime
from parallel.runtime.emitter import EPOCH_MIN, Chunk, Router, chunks_from_events, key_hash, order_channels
from parallel.runtime.metrics import balance, compute_metrics
from parallel.runtime.ring import KIND_CLOSE, KIND_END, RESULT, TUPLE, Ring, ring_dtype
from parallel.runtime.sink import Sink
from parallel.shared.schedule import alg3, loads, unbalancedness
from parallel.shared.swmr import Index, IndexSpec
from parallel.shared.teams import TeamMap, partition_of
from spec.batch import Results
from spec.match import lower_offset, upper_offset
from spec.model import Event, Query, StreamTuple

I64 = npt.NDArray[np.int64]


@dataclass
class TeamOptions:
    """Options of a ``key`` or ``scale`` run (``scale``-only ones are ignored by ``key``)."""

    pattern: str = "scale"
    replicas: int = 2
    emitters: int = 1
    batch: int = 32
    slots: int = 64
    result_width: int = 4096
    epoch: int | None = None
    rate: float | None = None
    seed: int = 0
    partitions: int = 64  # scale: key partitions (hash ranges) of the team map
    delta: float = 0.01  # scale: Alg. 3 threshold
    decay: float = 0.5  # scale: Alg. 3 lambda
    schedule_every: int = 4096  # scale: tuples between two runs of Alg. 3 (0: never)
    rule: str = "team"  # scale: team | self | arrival (the last two are negative controls)
    incremental: bool = True  # scale: incremental aggregation (False: recompute every window)
    arena: int = 1 << 24  # scale: words per joiner index arena
    sample_every: int = 8192  # tuples per sample of the per-joiner loads over time
    fail_after: dict[int, int] = field(default_factory=dict)  # test hook: joiner -> batches before it raises
    lag: dict[int, float] = field(default_factory=dict)  # test hook: joiner -> seconds slept before each insert
    stall: tuple[int, ...] = ()
    collector: str = "standard"  # fixed: every tuple of a job has one joiner (read by compute_metrics)


_FIELDS = ("slots", "result_width", "epoch", "rate", "seed", "partitions", "delta", "decay", "schedule_every",
           "rule", "incremental", "arena", "sample_every", "fail_after", "lag", "stall")


def team_options(pattern: str, options: EngineOptions) -> TeamOptions:
    kw: dict[str, Any] = {k: options.extra[k] for k in _FIELDS if k in options.extra}
    return TeamOptions(pattern=pattern, replicas=options.replicas, emitters=options.emitters, batch=options.batch,
                       **kw)


def epoch_size(opt: TeamOptions) -> int:
    return opt.epoch or max(EPOCH_MIN, 4 * opt.batch * opt.replicas * opt.emitters)


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


def execute(rt: Runtime, q: Query, chunks: Iterable[Chunk], opt: TeamOptions,
            stream: Callable[[Results], None] | None = None) -> tuple[Sink, dict[str, Any]]:
    """Run one ``key``/``scale`` job on ``rt``; the runtime's failure rules apply (module docstring)."""
    if rt.closed or rt.broken:
        raise EngineFailure(f"the runtime is unusable: {rt.broken or 'closed'}")
    if not 1 <= opt.replicas <= min(rt.n, 63):
        raise ValueError(f"replicas must be in [1, {min(rt.n, 63)}] for this runtime, got {opt.replicas}")
    if not 1 <= opt.batch <= 4096:
        raise ValueError(f"batch must be in [1, 4096], got {opt.batch}")
    if opt.pattern not in ("key", "scale"):
        raise ValueError(f"unknown pattern {opt.pattern!r}")
    if opt.rule not in ("team", "self", "arrival"):
        raise ValueError(f"unknown rule {opt.rule!r}")
    rt._pending = []
    rt.jobs += 1
    try:
        return _execute(rt, q, chunks, opt, stream)
    except BaseException as e:
        if not isinstance(e, EngineFailure):
            rt.broken = f"{type(e).__name__}: {e}"
        rt.close()
        raise


def _execute(rt: Runtime, q: Query, chunks: Iterable[Chunk], opt: TeamOptions,
             stream: Callable[[Results], None] | None) -> tuple[Sink, dict[str, Any]]:
    n, m = opt.replicas, opt.emitters
    scale = opt.pattern == "scale"
    prefix = f"{rt.tag}-{rt.jobs}"
    masks = initial_masks(n, opt.partitions)
    router: Router = (ScaleRouter(q, n, m, opt.batch, masks, opt.partitions, opt.seed) if scale
                      else Router(q, "kp", n, m, opt.batch))
    rings: list[Ring] = []
    indexes: list[Index] = []
    team: TeamMap | None = None
    try:
        for i in range(2 * m * n):
            rings.append(Ring.create(f"{prefix}-i{i}", opt.slots, opt.batch, 1, ring_dtype(q)))
        results = [Ring.create(f"{prefix}-r{r}", opt.slots, opt.result_width, 1, "result") for r in range(n)]
        rings.extend(results)
        inputs = rings[: 2 * m * n]
        ispecs: list[IndexSpec] = []
        if scale:
            team = TeamMap.create(f"{prefix}-teams", masks)
            for r in range(n):
                s = IndexSpec(f"{prefix}-x{r}", n, opt.arena, conds=len(q.cond))
                indexes.append(Index.create(s, n))
                ispecs.append(s)
        for r in range(n):
            spec = {
                "job": "parallel.shared.scaleoij:ScaleJob" if scale else "parallel.shared.keyoij:KeyJob",
                "inputs": [(c, inputs[c * n + r].spec, 0) for c in range(2 * m)],
                "order": order_channels(m),
                "result": results[r].spec,
                "collector": "standard",
                "lo": lower_offset(q),
                "hi": upper_offset(q),
                "pairs": q.aggregate is None,
                "partial": q.aggregate is not None or q.join == "left",
                "aggregate": q.aggregate,
                "cond": q.cond,
                "keybased": False,
                "seed": opt.seed,
                "trace": False,
                "fail_after": opt.fail_after.get(r),
                "stall": r in opt.stall,
                "lag": opt.lag.get(r, 0.0),
                "joiners": n,
                "indexes": ispecs,
                "teams": team.shm.name if team else None,
                "partitions": opt.partitions,
                "rule": opt.rule,
                "incremental": opt.incremental,
            }
            rt.ctls[r].put(("job", spec))
        return _drive(rt, q, chunks, opt, router, inputs, results, team, stream)
    finally:
        for ring in rings:
            ring.close()
            ring.unlink()
        for ix in indexes:
            ix.close()
            ix.unlink()
        if team is not None:
            team.close()
            team.unlink()


def _drive(rt: Runtime, q: Query, chunks: Iterable[Chunk], opt: TeamOptions, router: Router, inputs: list[Ring],
           results: list[Ring], team: TeamMap | None,
           stream: Callable[[Results], None] | None) -> tuple[Sink, dict[str, Any]]:
    sink = Sink(q, stream)
    n = opt.replicas
    tuples = deliveries = batches = bytes_written = 0
    t0 = time.perf_counter()
    t0_ns = time.monotonic_ns()
    interval = np.zeros(n, dtype=np.int64)  # tuples routed to each joiner since the last sample
    samples: list[dict[str, Any]] = []
    schedules: list[dict[str, Any]] = []
    next_sample = opt.sample_every
    next_schedule = opt.schedule_every

    pump = Pump(rt, results, sink)
    drain, put = pump.drain, pump.put

    for c in chunks:
        if opt.rate:
            pump.pace(t0 + (tuples + int(np.count_nonzero(c.kind == 0))) / opt.rate)
        routed = router.route(c, time.monotonic_ns())
        sink.add_late(routed.late)
        tuples += routed.tuples
        deliveries += routed.deliveries
        for ring_i, recs, wm in routed.sends:
            put(inputs[ring_i], recs, wm, 0)
            interval[ring_i % n] += len(recs)
            batches += 1
            bytes_written += recs.nbytes
        for ring in inputs:
            put(ring, None, routed.w_end, KIND_CLOSE)
        drain()
        pump.epoch += 1
        if tuples >= next_sample:
            unb = balance([float(x) for x in interval])[1]
            samples.append({"tuples": tuples, "t_s": time.perf_counter() - t0, "per_joiner": interval.tolist(),
                            "unbalancedness": unb})
            interval[:] = 0
            next_sample = tuples + opt.sample_every
        if isinstance(router, ScaleRouter) and team is not None and opt.schedule_every and tuples >= next_schedule:
            next_schedule = tuples + opt.schedule_every
            x = router.x.tolist()
            before = unbalancedness(x, router.masks, n)
            new = alg3(x, router.masks, n, opt.delta)
            changed = new != router.masks
            if changed:
                team.replace(new)  # published before any tuple is routed with it
                router.set_masks(new)
            router.x *= opt.decay
            sizes = [bin(mk).count("1") for mk in router.masks]
            schedules.append({"tuples": tuples, "t_s": time.perf_counter() - t0, "changed": changed,
                              "unbalancedness_before": before, "unbalancedness_after": unbalancedness(x, new, n),
                              "eq3_loads": loads(x, new, n), "mean_team_size": float(np.mean(sizes)),
                              "max_team_size": max(sizes), "version": team.version()})
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
    if interval.any():
        samples.append({"tuples": tuples, "t_s": t_end - t0, "per_joiner": interval.tolist(),
                        "unbalancedness": balance([float(x) for x in interval])[1]})
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
        "samples": samples,
        "schedules": schedules,
        "masks": list(router.masks) if isinstance(router, ScaleRouter) else [],
    }
    return sink, drive


def team_metrics(pattern: str, q: Query, opt: TeamOptions, drive: dict[str, Any], sink: Sink, events: int,
                 cdf_points: int = 0) -> dict[str, Any]:
    """The common metrics (:func:`parallel.runtime.metrics.compute_metrics`) plus Scale-OIJ's (docs/scaleoij.rst)."""
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
    as :func:`parallel.patterns.engine.run_chunks`.
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
    opt = team_options(pattern, options)
    chunks = chunks_from_events(events, epoch_size(opt), q=q)
    n = sum(1 for e in events if type(e) is StreamTuple)
    res, metrics = run_chunks(pattern, q, chunks, n, opt, options.extra.get("runtime"),
                              options.extra.get("start_method", "spawn"))
    return EngineRun(res, metrics)
