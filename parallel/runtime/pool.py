"""The runtime: replica processes, their control queues, failure handling.

Data flow (one job's loop is :func:`oij.parallel.runtime.execute.execute_job`)::

    driver (this process)                                   replica processes (oij.parallel.runtime.replica)
    -------------------------------------------------       ---------------------------------------
    Chunk source --> Router (emitters, lateness) --put--> input rings --> Collector --> JoinState
    Sink <--get-- result rings <---------------------------------------------------- results (pairs/partial rows)
    control: ctl queue per replica (job, calibrate, exit) / one up queue (ready, done, error, map)

Ownership (who creates / who frees):

* :class:`~oij.parallel.runtime.pool.Runtime` starts the replica processes (spawn by default) and is
  the only one to stop them (:meth:`Runtime.close`: abort flag, ``exit``
  message, join, then terminate, then kill), and it creates and unlinks the
  one-word *abort* segment the replicas watch.
* A job's driver -- :func:`oij.parallel.runtime.execute.execute_job`, or the block
  engine's :func:`oij.parallel.blocks.driver.execute` -- creates every segment of
  the job and unlinks all of them in a ``finally`` block, whatever happens;
  replicas only attach and close.  Segment names start with ``oij-<pid>-``
  (:meth:`Runtime.begin_job` gives a job its prefix).
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
from dataclasses import dataclass
from multiprocessing import shared_memory
from queue import Empty
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from oij.parallel.config import CALIBRATION, EngineConfig
from oij.parallel.runtime.replica import replica_main
from oij.parallel.runtime.ring import check_platform

from oij.io.atomic import signals_deferred


class EngineFailure(RuntimeError):
    """A parallel run failed; the message names the replica (if any) and the cause."""


@dataclass
class JobOptions(EngineConfig):
    """Everything that defines one run of the event engine (KP, DP, HP) besides the query and the input: the
    shared settings (:class:`~oij.parallel.config.EngineConfig`) and the event engine's own."""

    collector: str = "auto"  # auto or one of oij.parallel.config.COLLECTORS
    calibration: int = CALIBRATION  # HP: tuples observed before Alg. 1 runs
    sync_map: bool = False  # HP: wait for the map instead of applying it when it arrives
    trace: bool = False
    cond_index: bool = False  # with a cond: the SPO-Join style cond index (oij.parallel.runtime.store)


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
        """Start a job (:func:`oij.parallel.runtime.execute.execute_job`, the block engine's
        :func:`oij.parallel.blocks.driver.execute`): forget earlier messages; the prefix for the job's segment
        names.  Raises EngineFailure on a closed or broken runtime."""
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

    def receive(self, kinds: tuple[str, ...], wait: bool) -> list[Any]:
        """The messages of any of ``kinds`` that have arrived -- with ``wait``, at least one (failing fast, as
        :meth:`collect` does); in arrival order."""
        last = time.monotonic()
        while True:
            before = -1
            while len(self._pending) != before:  # everything that is there, one message a call
                before = len(self._pending)
                self._poll_up(0.01 if wait and not self._pending else 0)
            got = [m for m in self._pending if m[0] in kinds]
            if got or not wait:
                self._pending = [m for m in self._pending if m[0] not in kinds]
                if not wait:
                    self.check()
                return got
            if time.monotonic() - last > 0.005:
                self.check()
                last = time.monotonic()

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
