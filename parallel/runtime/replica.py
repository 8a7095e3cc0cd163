"""The replica process: collector -> OIJ logic -> result ring, one job after another.

Data flow inside replica r::

    input rings (attached) --> Collector --> JoinState.process --> result ring r (attached) --> driver
                                  |                ^
                                  +-- W (per channel, or per key and channel for HP) --> JoinState.advance

Control flow: the process is started once by :class:`oij.parallel.runtime.pool.Runtime`
(spawn start method: the entry point :func:`replica_main` is importable and
takes only picklable arguments) and then waits on its control queue for
``("job", spec)`` messages; for each job it attaches the job's rings, runs
until every input channel sent END, sends END on its result ring and
``("done", r, stats)`` on the shared up-queue, and closes (never unlinks) the
rings.  ``("exit",)`` ends the process.  Replica 0 of an HP job also answers
``("calibrate", ...)`` with Alg. 1's key -> replicas map (``("map", ...)``).

Ownership: this process creates no shared-memory segment and no process.
It ignores SIGINT (the driver decides how to stop: Ctrl-C in a terminal
reaches the whole process group) and exits on its own when the runtime's
abort flag is set or its parent is gone, so it never outlives the driver.
An exception is reported as ``("error", r, traceback)`` and the process
exits with status 1.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from multiprocessing import shared_memory
from queue import Empty
from typing import Any

import numpy as np
import numpy.typing as npt
from oij.parallel.runtime.balance import assign
from oij.parallel.runtime.collector import Collector, Input, NaiveCollector, RoundRobinCollector, StandardCollector
from oij.parallel.runtime.ring import KIND_CLOSE, KIND_DATA, KIND_END, RESULT, Ring
from oij.parallel.runtime.store import NEG, JoinState

I64MAX = np.iinfo(np.int64).max


class Aborted(Exception):
    """The runtime asked every replica to stop, or the driver died."""


class _Job:
    def __init__(self, me: int, spec: dict[str, Any], ctl: Any, up: Any, abort: npt.NDArray[np.int64],
                 ppid: int) -> None:
        self.me = me
        self.spec = spec
        self.ctl = ctl
        self.up = up
        self.abort = abort
        self.ppid = ppid
        self.rings: list[Ring] = []
        inputs = []
        for chan, rs, reader in spec["inputs"]:
            ring = Ring.attach(rs)
            self.rings.append(ring)
            inputs.append(Input(chan, ring, reader))
        self.res = Ring.attach(spec["result"])
        self.rings.append(self.res)
        kind = spec["collector"]
        self.col: Collector
        if kind == "standard":
            self.col = StandardCollector(inputs)
        elif kind == "round-robin":
            self.col = RoundRobinCollector(inputs, spec["order"])
        else:
            self.col = NaiveCollector(inputs, spec["seed"] * 7919 + me)
        self.js = JoinState(me, spec["lo"], spec["hi"], pairs=spec["pairs"], partial=spec["partial"],
                            cond=spec.get("cond", ()), cond_index=bool(spec.get("cond_index", False)))
        self.js.trace_on = spec["trace"]
        c = len(inputs)
        self.wc = np.full(c, NEG, dtype=np.int64)  # per channel max W (KP/DP), punctuations (HP)
        self.keybased = spec["keybased"]
        self.kc = np.full((0, c), NEG, dtype=np.int64)  # HP: per key and channel max W
        # channels whose END has been *processed*; the collector marks END when it delivers it, possibly
        # in the same poll as earlier, not yet processed batches of that channel, which must still count
        self.ended = [False] * c
        self.batches = 0
        self.result_batches = 0
        self.waits = 0
        self.t_pull = self.t_join = self.t_push = 0.0

    def close(self) -> None:
        for r in self.rings:
            r.close()
        self.rings = []

    # ------------------------------------------------------------------ waiting

    def check(self) -> None:
        if self.abort[0]:
            raise Aborted("abort flag set")
        if os.getppid() != self.ppid:
            raise Aborted("the driver is gone")

    def push(self, out: list[npt.NDArray[Any]], kind: int = KIND_DATA) -> None:
        if not out and kind == KIND_DATA:
            return
        recs = np.concatenate(out) if out else np.empty(0, dtype=RESULT)
        w = self.res.width
        parts = [recs[i: i + w] for i in range(0, len(recs), w)] if len(recs) else []
        if kind != KIND_DATA:
            parts.append(np.empty(0, dtype=RESULT))
        for j, p in enumerate(parts):
            k = kind if (kind != KIND_DATA and j == len(parts) - 1) else KIND_DATA
            pause = 1e-5
            while not self.res.put(p, 0, 0, k):
                self.check()
                time.sleep(pause)
                pause = min(pause * 2, 1e-3)
            self.result_batches += 1

    # ------------------------------------------------------------------ watermarks

    def _key_w(self) -> npt.NDArray[np.int64]:
        ended = np.array(self.ended)
        m = np.maximum(self.kc, self.wc[None, :])
        m[:, ended] = I64MAX
        wk: npt.NDArray[np.int64] = m.min(axis=1) if m.shape[1] else np.full(m.shape[0], I64MAX)
        return wk

    def _global_w(self) -> int:
        live = [int(w) for w, e in zip(self.wc, self.ended, strict=True) if not e]
        return min(live) if live else int(I64MAX)

    def _grow(self, k: int) -> None:
        if k >= len(self.kc):
            n = max(k + 1, 2 * len(self.kc), 64)
            kc = np.full((n, self.kc.shape[1]), NEG, dtype=np.int64)
            kc[: len(self.kc)] = self.kc
            self.kc = kc

    # ------------------------------------------------------------------ main loop

    def run(self) -> dict[str, Any]:
        spec = self.spec
        fail_after = spec.get("fail_after")
        stall = spec.get("stall", False)
        last_w: Any = None
        idle = 0
        polls = 0
        while not self.col.finished():
            polls += 1
            if self.me == 0 and (polls & 63 == 0 or idle):
                self._control()
            if stall:
                self.check()
                time.sleep(0.01)
                continue
            t_a = time.perf_counter()
            got = self.col.poll()
            t_b = time.perf_counter()
            self.t_pull += t_b - t_a
            if not got:
                idle += 1
                self.waits += 1
                self.check()
                time.sleep(0 if idle < 4 else min(1e-5 * idle, 1e-3))
                continue
            idle = 0
            t_a = time.perf_counter()
            out: list[npt.NDArray[Any]] = []
            # consecutive data batches of one poll are joined as one: the delivery order (and so every
            # sequence number) is the same, and W moves only after the tuples that carried it are in
            pending: list[npt.NDArray[Any]] = []
            moved = False
            for i, b in got:
                if b.kind == KIND_DATA:
                    self.batches += 1
                    if fail_after is not None and self.batches > fail_after:
                        raise RuntimeError(f"injected failure after {fail_after} batches")
                    if len(b.recs):
                        pending.append(b.recs)
                    if self.keybased:
                        if len(b.recs):
                            ks = np.unique(b.recs["key"])
                            self._grow(int(ks[-1]))
                            up = ks[self.kc[ks, i] < b.wm]
                            if len(up):
                                self.kc[up, i] = b.wm
                                moved = True
                    elif b.wm > self.wc[i]:
                        self.wc[i] = b.wm
                        moved = True
                    continue
                if pending:
                    out.extend(self.js.process(pending[0] if len(pending) == 1 else np.concatenate(pending)))
                    pending = []
                if b.kind == KIND_CLOSE:
                    if b.wm > self.wc[i]:
                        self.wc[i] = b.wm
                        moved = True
                elif b.kind == KIND_END:
                    self.ended[i] = True
                    moved = True
                last_w = self._advance(out, moved, last_w)
                moved = False
            if pending:
                out.extend(self.js.process(pending[0] if len(pending) == 1 else np.concatenate(pending)))
                last_w = self._advance(out, moved, last_w)
            t_b = time.perf_counter()
            self.t_join += t_b - t_a
            self.push(out)
            self.t_push += time.perf_counter() - t_b
        self.push(self.js.advance(0, force=True), KIND_END)
        js = self.js
        stats: dict[str, Any] = {
            "replica": self.me,
            "received": js.received,
            "stored": js.stored,
            "comparisons": js.comparisons,
            "pairs": js.emitted_pairs,
            "rows": js.emitted_rows,
            "batches": self.batches,
            "result_batches": self.result_batches,
            "merges": js.bases.merges + js.probes.merges,
            "state_max": js.state_max,
            "buffered_max": self.col.buffered_max,
            "idle_waits": self.waits,
            "pull_s": self.t_pull,
            "join_s": self.t_join,
            "push_s": self.t_push,
        }
        if self.keybased and len(self.kc):
            wk = self._key_w()
            stats["output_watermark"] = int(wk.min())
        if js.trace_on:
            stats["trace"] = [(ids.tolist(), st.tolist()) for ids, st in js.trace]
        return stats

    def _advance(self, out: list[npt.NDArray[Any]], moved: bool, last_w: Any) -> Any:
        """After the tuples that carried it are joined: advance to the current W if it moved."""
        if moved and not self.col.finished():
            w: Any = self._key_w() if self.keybased else self._global_w()
            if self.keybased or w != last_w:
                out.extend(self.js.advance(w))
                return w
        return last_w

    def _control(self) -> None:
        try:
            msg = self.ctl.get_nowait()
        except Empty:
            return
        if msg[0] == "calibrate":
            _, counts, key2r, n, theta, max_split = msg
            self.up.put(("map", self.me, assign(counts, key2r, n, theta, max_split)))


def _make_job(me: int, spec: dict[str, Any], ctl: Any, up: Any, abort: npt.NDArray[np.int64], ppid: int) -> _Job:
    """The job object of a ``("job", spec)`` message: ``spec["job"] = "module:Class"`` selects a subclass of
    :class:`_Job` defined by another engine module (``key``, ``scale``: :mod:`oij.parallel.shared.teamrun`)."""
    name = spec.get("job")
    if not name:
        return _Job(me, spec, ctl, up, abort, ppid)
    import importlib

    mod, _, cls = name.partition(":")
    factory = getattr(importlib.import_module(mod), cls)
    job: _Job = factory(me, spec, ctl, up, abort, ppid)
    return job


def replica_main(me: int, ctl: Any, up: Any, abort_name: str, ppid: int) -> None:
    """Process entry point (see the module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    seg = shared_memory.SharedMemory(name=abort_name)
    abort: npt.NDArray[np.int64] = np.ndarray((1,), np.int64, seg.buf, 0)
    job: _Job | None = None
    code = 0
    up.put(("ready", me))
    try:
        while True:
            try:
                msg = ctl.get(timeout=0.05)
            except Empty:
                if abort[0] or os.getppid() != ppid:
                    break
                continue
            if msg[0] == "exit":
                break
            if msg[0] == "job":
                job = _make_job(me, msg[1], ctl, up, abort, ppid)
                try:
                    prof_dir = os.environ.get("OIJ_PROFILE_DIR")  # developer aid: profile the replica
                    if prof_dir:
                        import cProfile

                        pr = cProfile.Profile()
                        stats = pr.runcall(job.run)
                        pr.dump_stats(os.path.join(prof_dir, f"replica{me}.prof"))
                    else:
                        stats = job.run()
                finally:
                    job.close()
                    job = None
                up.put(("done", me, stats))
    except Aborted:
        code = 0
    except BaseException:
        try:
            up.put(("error", me, traceback.format_exc()))
        finally:
            code = 1
    finally:
        del abort
        seg.close()
    if code:
        # give the queue's feeder thread a moment to flush the error report
        up.close()
        up.join_thread()
        sys.exit(code)
