"""The runtime: replica processes, the job's shared-memory rings, the driver loop, failure handling.

Data flow of one job::

    driver (this process)                                   replica processes (parallel.runtime.replica)
    -------------------------------------------------       ---------------------------------------
    Chunk source --> Router (emitters, lateness) --put--> input rings --> Collector --> JoinState
    Sink <--get-- result rings <---------------------------------------------------- results (pairs/partial rows)
    control: ctl queue per replica (job, calibrate, exit) / one up queue (done, error, map)

Ownership (who creates / who frees):

* :class:`~parallel.runtime.driver.Runtime` starts the replica processes (spawn by default) and is
  the only one to stop them (:meth:`Runtime.close`: abort flag, ``exit``
  message, join, then terminate, then kill), and it creates and unlinks the
  one-word *abort* segment the replicas watch.
* :meth:`Runtime.execute` creates every ring of a job (input rings, result
  rings) and unlinks all of them in a ``finally`` block, whatever happens;
  replicas only attach and close.  Segment names start with ``oij-<pid>-``.
* On any failure -- an exception reported by a replica, a replica that
  exits (killed by a signal or otherwise), a driver exception, Ctrl-C --
  the runtime is closed (no process left, every segment unlinked) and
  :class:`EngineFailure` names the replica and the cause.  The driver polls
  the replicas' liveness every few milliseconds while it waits, so a
  failure is reported in well under a second.  Replicas exit on their own
  if the driver dies (they watch their parent pid), and the
  ``multiprocessing`` resource tracker unlinks segments of a driver killed
  with SIGKILL.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from multiprocessing import shared_memory
from queue import Empty
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from oij.io.atomic import signals_deferred
from parallel.runtime.emitter import Chunk, Router, order_channels
from parallel.runtime.replica import replica_main
from parallel.runtime.ring import KIND_CLOSE, KIND_END, RESULT, TUPLE, Ring, check_platform, ring_dtype
from parallel.runtime.sink import Sink
from spec.batch import Results
from spec.match import lower_offset, upper_offset
from spec.model import Query


class Pump:
    """The driver's side of the rings during one job (used by this runtime and by the Scale-OIJ driver).

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


class EngineFailure(RuntimeError):
    """A parallel run failed; the message names the replica (if any) and the cause."""


@dataclass
class JobOptions:
    """Everything that defines one run besides the query and the input."""

    pattern: str = "kp"
    replicas: int = 2
    emitters: int = 1
    batch: int = 32
    collector: str = "auto"  # auto | standard | rr | naive
    slots: int = 64
    result_width: int = 4096
    theta: float = 1.05
    max_split: int | None = None
    calibration: int = 4096  # HP: tuples observed before Alg. 1 runs
    sync_map: bool = False  # HP: wait for the map instead of applying it when it arrives
    epoch: int | None = None  # events per epoch (default from batch, replicas, emitters)
    rate: float | None = None  # tuples per second of wall clock (None: as fast as possible)
    seed: int = 0
    trace: bool = False
    fail_after: dict[int, int] = field(default_factory=dict)  # test hook: replica -> batches before it raises
    stall: tuple[int, ...] = ()  # test hook: replicas that stop consuming
    cond_index: bool = False  # with a cond: the SPO-Join style cond index (parallel.runtime.store)


def _signame(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class Runtime:
    """A pool of replica processes that runs jobs one after another (see the module docstring)."""

    def __init__(self, replicas: int, start_method: str = "spawn", wait_ready: bool = True, first: int = 0) -> None:
        check_platform()
        if replicas < 1:
            raise ValueError("replicas must be >= 1")
        self.n = replicas
        self.ctx: Any = cast(Any, mp.get_context(start_method))  # every concrete context has Process
        self.tag = f"oij-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.jobs = 0
        self.closed = False
        self.broken: str | None = None
        self.ready: set[int] = set()  # replicas that reported "ready" (started, imports done)
        self.first = first  # messages name process k "replica k + first" (the block engine's driver is replica 0)
        self._abort_seg: shared_memory.SharedMemory | None = None
        self.up: Any = None
        self.ctls: list[Any] = []
        self.procs: list[Any] = []
        try:
            with signals_deferred():  # created and recorded as one step, for close() to free (oij.cli defers Ctrl-C)
                self._abort_seg = shared_memory.SharedMemory(name=f"{self.tag}-abort", create=True, size=8)
            self.abort: npt.NDArray[np.int64] = np.ndarray((1,), np.int64, self._abort_seg.buf, 0)
            self.abort[0] = 0
            with signals_deferred():  # a queue's semaphore is registered, then unlinked: not to be cut in two
                self.up = self.ctx.Queue()
            for r in range(replicas):
                with signals_deferred():
                    ctl = self.ctx.Queue()
                    self.ctls.append(ctl)
                p = self.ctx.Process(target=replica_main, args=(r, ctl, self.up, self._abort_seg.name, os.getpid()),
                                     name=f"oij-replica-{r}", daemon=True)
                # a Ctrl-C in the middle of start() would leave the child reading half its start-up data (an
                # EOFError traceback from the child): oij's handler takes it once the child is in self.procs,
                # for close() to end
                with signals_deferred():
                    p.start()
                    self.procs.append(p)
            self._pending = []
            ready: set[int] = set()
            deadline = time.monotonic() + 60
            while wait_ready and len(ready) < replicas:  # measurements start with every replica imported and waiting
                self._poll_up(0.05)
                ready |= {m[1] for m in self._take("ready")}
                self.check()
                if time.monotonic() > deadline:
                    self._fail(f"replicas {sorted(set(range(replicas)) - ready)} did not start within 60 s")
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pids(self) -> list[int]:
        return [int(p.pid) for p in self.procs]

    # ------------------------------------------------------------------ failure handling

    def check(self) -> None:
        """Raise EngineFailure if a replica reported an error or is no longer alive."""
        self._poll_up(0)
        for r, p in enumerate(self.procs):
            if p.exitcode is not None:
                # prefer the replica's own report if it managed to send one
                deadline = time.monotonic() + 0.5
                while time.monotonic() < deadline:
                    self._poll_up(0.05)
                code = p.exitcode
                cause = f"killed by {_signame(code)}" if code < 0 else f"exited with status {code}"
                self._fail(f"replica {r + self.first} {cause}")

    def _fail(self, msg: str) -> None:
        self.broken = msg
        raise EngineFailure(msg)

    def _poll_up(self, timeout: float) -> None:
        try:
            msg = self.up.get(timeout=timeout) if timeout else self.up.get_nowait()
        except Empty:
            return
        self._pending.append(msg)
        if msg[0] == "ready":
            self.ready.add(msg[1])
        if msg[0] == "error":
            last = msg[2].strip().splitlines()[-1]
            self._fail(f"replica {msg[1] + self.first} raised {last}")

    _pending: list[Any]

    def all_ready(self) -> bool:
        """Whether every replica process has started and imported its modules (never blocks)."""
        for _ in range(self.n + 1):
            if len(self.ready) >= self.n:
                break
            self._poll_up(0)
        return len(self.ready) >= self.n

    def begin_job(self) -> str:
        """Start a job run by another driver (the block engine, :mod:`parallel.blocks.driver`): forget earlier
        messages; the prefix for the job's segment names.  Raises EngineFailure on a closed or broken runtime."""
        if self.closed or self.broken:
            raise EngineFailure(f"the runtime is unusable: {self.broken or 'closed'}")
        self._pending = []
        self.jobs += 1
        return f"{self.tag}-{self.jobs}"

    def collect(self, kind: str, count: int) -> list[Any]:
        """Wait for ``count`` messages of ``kind`` from the replicas, failing fast (EngineFailure) on a replica's
        error or death; the messages, in arrival order."""
        got = self._take(kind)
        last = time.monotonic()
        while len(got) < count:
            self._poll_up(0.01)
            got += self._take(kind)
            if time.monotonic() - last > 0.005:
                self.check()
                last = time.monotonic()
        return got

    def _take(self, kind: str) -> list[Any]:
        got = [m for m in self._pending if m[0] == kind]
        self._pending = [m for m in self._pending if m[0] != kind]
        return got

    def close(self) -> None:
        """Stop every replica and free the abort segment.  Idempotent; never raises for a dead replica."""
        if self.closed:
            return
        self.closed = True
        if hasattr(self, "abort"):
            self.abort[0] = 1
        for ctl in self.ctls:
            with contextlib.suppress(OSError, ValueError):
                ctl.put(("exit",))
        deadline = time.monotonic() + 2.0
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.terminate()
                p.join(1.0)
            if p.is_alive():
                p.kill()
                p.join(1.0)
        for q in [*self.ctls, *([self.up] if self.up is not None else [])]:
            q.close()
            q.cancel_join_thread()
        if hasattr(self, "abort"):
            del self.abort
        if self._abort_seg is not None:
            self._abort_seg.close()
            with contextlib.suppress(FileNotFoundError):
                self._abort_seg.unlink()

    # ------------------------------------------------------------------ a job

    def execute(self, q: Query, chunks: Iterable[Chunk], opt: JobOptions,
                stream: Callable[[Results], None] | None = None) -> tuple[Sink, dict[str, Any]]:
        """Run one job over ``chunks``; return the sink (results) and the driver's measurements.

        With ``stream``, results are handed to it as they complete instead of kept
        (:class:`~parallel.runtime.sink.Sink`).
        """
        if self.closed or self.broken:
            raise EngineFailure(f"the runtime is unusable: {self.broken or 'closed'}")
        if not 1 <= opt.replicas <= self.n:
            raise ValueError(f"replicas must be in [1, {self.n}] for this runtime, got {opt.replicas}")
        if not 1 <= opt.batch <= 4096:
            raise ValueError(f"batch must be in [1, 4096], got {opt.batch}")
        if opt.emitters < 1:
            raise ValueError(f"emitters must be >= 1, got {opt.emitters}")
        if opt.pattern not in ("kp", "dp", "hp"):
            raise ValueError(f"unknown pattern {opt.pattern!r}")
        self._pending = []
        self.jobs += 1
        try:
            return self._execute(q, chunks, opt, stream)
        except BaseException as e:
            if not isinstance(e, EngineFailure):
                self.broken = f"{type(e).__name__}: {e}"
            self.close()
            raise

    def _execute(self, q: Query, chunks: Iterable[Chunk], opt: JobOptions,
                 stream: Callable[[Results], None] | None) -> tuple[Sink, dict[str, Any]]:
        n, m = opt.replicas, opt.emitters
        router = Router(q, opt.pattern, n, m, opt.batch)
        collector = opt.collector
        if collector == "auto":
            collector = "standard" if opt.pattern == "kp" else "rr"
        prefix = f"{self.tag}-{self.jobs}"
        rings: list[Ring] = []
        try:
            nring = router.rings()
            readers = n if opt.pattern == "dp" else 1
            for i in range(nring):
                rings.append(Ring.create(f"{prefix}-i{i}", opt.slots, opt.batch, readers, ring_dtype(q)))
            results = [Ring.create(f"{prefix}-r{r}", opt.slots, opt.result_width, 1, "result") for r in range(n)]
            rings.extend(results)
            inputs = rings[:nring]
            for r in range(n):
                if opt.pattern == "dp":
                    ins = [(c, inputs[c].spec, r) for c in range(2 * m)]
                else:
                    ins = [(c, inputs[c * n + r].spec, 0) for c in range(2 * m)]
                spec = {
                    "inputs": ins,
                    "order": order_channels(m),
                    "result": results[r].spec,
                    "collector": collector,
                    "lo": lower_offset(q),
                    "hi": upper_offset(q),
                    "pairs": q.aggregate is None,
                    "partial": q.aggregate is not None or q.join == "left",
                    "keybased": opt.pattern == "hp",
                    "cond": q.cond,
                    "cond_index": opt.cond_index,
                    "seed": opt.seed,
                    "trace": opt.trace,
                    "fail_after": opt.fail_after.get(r),
                    "stall": r in opt.stall,
                }
                self.ctls[r].put(("job", spec))
            return self._drive(q, chunks, opt, router, inputs, results, stream)
        finally:
            for ring in rings:
                ring.close()
                ring.unlink()

    def _drive(self, q: Query, chunks: Iterable[Chunk], opt: JobOptions, router: Router, inputs: list[Ring],
               results: list[Ring], stream: Callable[[Results], None] | None) -> tuple[Sink, dict[str, Any]]:
        sink = Sink(q, stream)
        n = opt.replicas
        tuples = 0
        deliveries = 0
        batches = 0
        bytes_written = 0
        calib_sent = False
        map_applied_at: int | None = None
        t0 = time.perf_counter()
        t0_ns = time.monotonic_ns()
        pump = Pump(self, results, sink)
        drain, put = pump.drain, pump.put

        for c in chunks:
            if opt.rate:
                # pace the source: the chunk's tuples are "created" when the clock reaches them
                pump.pace(t0 + (tuples + int(np.count_nonzero(c.kind == 0))) / opt.rate)
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
            if opt.pattern == "hp":
                if not calib_sent and tuples >= opt.calibration:
                    counts, key2r = router.calibration_request()
                    self.ctls[0].put(("calibrate", counts, key2r, n, opt.theta, opt.max_split or n))
                    calib_sent = True
                    if opt.sync_map:
                        while not self._take_map(router):
                            drain()
                            self._poll_up(0.002)
                        map_applied_at = tuples
                elif calib_sent and map_applied_at is None:
                    self._poll_up(0)
                    if self._take_map(router):
                        map_applied_at = tuples
        for ring in inputs:
            put(ring, None, router.ms.max() if q.lateness is None else 0, KIND_END)
        while len(sink.ended) < n:
            drain()
            time.sleep(2e-5)
        t_end = time.perf_counter()
        stats: dict[int, dict[str, Any]] = {}
        while len(stats) < n:
            for msg in self._take("done"):
                stats[msg[1]] = msg[2]
            if len(stats) < n:
                self._poll_up(0.01)
                self.check()
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
            "key2r": {int(k): list(v) for k, v in router.key2r.items()},
            "map_applied_at": map_applied_at,
            "calibration_counts": router.counts.sum(axis=0).tolist() if opt.pattern == "hp" else [],
        }
        return sink, drive

    def _take_map(self, router: Router) -> bool:
        got = self._take("map")
        if got:
            router.apply_map({int(k): v for k, v in got[-1][2].items()})
            return True
        return False
