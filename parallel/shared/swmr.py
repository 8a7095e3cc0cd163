r"""The time-travel index: per joiner, key -> timestamp-ordered probe entries in shared memory; one writer,
lock-free readers.

The numpy analogue of Scale-OIJ's two-layer skip-list (§V-A, Alg. 1-2): an
index is a small set of immutable *runs* (an LSM tree).  A run holds entries
sorted by (key, ts) with the rank-compressed composite of
:class:`oij.parallel.runtime.store.Tier`: locating the window of (k, [lo, hi]) is four
binary searches -- :math:`O(\log N_{key} + \log N_{ts})` per run -- and
visits only the entries in the window.

Segment layout (int64 words; owner: the driver, :mod:`oij.parallel.shared.teamrun`,
creates it before the job and unlinks it after; the joiner that owns the
index is its only writer, every joiner of a virtual team reads it)::

    line 0  gen        generation: which directory slot is current (gen mod D)
    line 1  prog       insert progress: the W up to which every probe routed here is inserted
    line 2  eval       evaluation frontier: no base this joiner will still evaluate has ts < eval
    line 3  live       entries in the current directory (metrics)
    line r+4  qs[r]    reader r's last quiescent generation (I64MAX: reader offline)
    D directory slots: [n_runs, (offset, n) x RUNCAP]
    arena: runs, each [n | sts n | comp n | ts n | value n | id n | born n | (ch n, cl n) x conds]

(``conds`` = the query's cond comparisons: each entry's cond operands, one
float64 column per comparison for ``ch`` and for ``cl``, :func:`oij.reference.cond.operand_rows`.)

Publication protocol (what is written first):

1. *Append a run*: the writer writes the run's words into free arena space,
   then its descriptor at index ``n_runs`` of the current directory slot,
   then stores ``n_runs + 1``.  A reader loads ``gen``, then ``n_runs`` of
   slot ``gen mod D``, then the descriptors, then the runs: it sees either
   the old count (and not the run) or the new count, and then the run is
   complete.  A run is never modified after its publication.
2. *Merge / evict* (compaction): the writer writes the merged run into free
   space, fills the *next* directory slot completely, then stores
   ``gen + 1``.  Readers that loaded the old ``gen`` keep reading the old
   slot and the old runs, which stay intact until reclaimed.
3. *Reclamation* (quiescent-state-based, QSBR): the runs and the directory
   slot retired by the switch to generation g are reused only once every
   reader's ``qs`` is >= g.  A reader stores ``qs = gen`` (loaded just
   before) only at a *quiescent point*, when it holds no reference into the
   index (between evaluation rounds, and while it waits).  Its later reads
   load ``gen`` again, so they never reach a slot or run retired before
   that ``gen``.
4. ``prog`` is stored after the runs it covers are published; readers load
   ``prog`` before they read the directory (see :mod:`oij.parallel.shared.scaleoij`).

Memory-ordering assumption.  Python has no atomics and no fences, so the
design relies on, and only on: (a) an aligned int64 numpy element is loaded
and stored with one 8-byte access (no torn words); (b) the interpreter
executes the statements of one process in program order -- each numpy call
is an opaque C call, so the C compiler cannot move the stores of one
statement past those of the next; (c) x86-64 total store order: stores
become visible in program order, loads are not reordered with older loads,
stores are not reordered with older loads.  No step needs store->load
ordering (the one x86 reorders): QSBR needs only load->store (the reader's
data loads complete before its ``qs`` store) and the publication needs
store->store on the writer and load->load on the reader.  The runtime
refuses other architectures (:func:`oij.parallel.runtime.ring.check_platform`), and
``tests/parallel/test_scale_swmr.py`` stress-tests the protocol (many readers
verifying every entry during heavy appends, merges and arena reuse).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
I64MAX = int(np.iinfo(np.int64).max)
NEG = int(np.iinfo(np.int64).min)
LINE = 8
GEN, PROG, EVAL, LIVE = 0, LINE, 2 * LINE, 3 * LINE
QS0 = 4 * LINE



def build_run(cols: dict[str, npt.NDArray[Any]]) -> dict[str, npt.NDArray[Any]]:
    """A run's columns as the index stores them: entries sorted by (key, ts), plus the composite index.

    ``sts`` is the run's timestamps sorted; ``comp = key * (n + 1) + rank(ts)``
    with rank the position of ts in ``sts``, so that one sorted array answers
    "key k, ts in [lo, hi]" with binary searches
    (:func:`oij.parallel.shared.scaleoij.ranges`).  Pure; O(n log n).  The model
    checker (:mod:`oij.proofs.shared`) builds its indexes with it.
    """
    n = len(cols["ts"])
    order = np.lexsort((cols["ts"], cols["key"]))
    ts = cols["ts"][order]
    key = cols["key"][order]
    sts = np.sort(ts)
    comp = key * (n + 1) + np.searchsorted(sts, ts, "left")
    run = {"sts": sts, "comp": comp, "ts": ts, "key": key, "value": cols["value"][order], "id": cols["id"][order],
           "born": cols["born"][order]}
    if "ch" in cols:
        run["ch"] = cols["ch"][order]
        run["cl"] = cols["cl"][order]
    return run

class ArenaFull(RuntimeError):
    """The index's arena has no room even after reclaiming everything the readers released."""


@dataclass(frozen=True)
class IndexSpec:
    """What a process needs to attach an index."""

    name: str
    readers: int
    arena: int  # words
    runcap: int = 64  # runs per directory slot
    dslots: int = 4
    conds: int = 0  # cond comparisons: 2 more float64 words per entry for each

    @property
    def width(self) -> int:
        """Words per entry in a run."""
        return 6 + 2 * self.conds

    @property
    def dir0(self) -> int:
        return QS0 + LINE * self.readers

    @property
    def dwords(self) -> int:
        return 1 + 2 * self.runcap

    @property
    def arena0(self) -> int:
        x = self.dir0 + self.dslots * self.dwords
        return (x + LINE - 1) // LINE * LINE

    @property
    def words(self) -> int:
        return self.arena0 + self.arena


class Index:
    """One joiner's index (see the module docstring); ``writer=True`` only in the owning joiner."""

    def __init__(self, spec: IndexSpec, shm: shared_memory.SharedMemory, writer: bool, me: int) -> None:
        self.spec = spec
        self.shm = shm
        self.me = me  # this process's reader slot
        self.w: I64 = np.ndarray((spec.words,), np.int64, shm.buf, 0)
        self.f: F64 = np.ndarray((spec.words,), np.float64, shm.buf, 0)
        self.writer = writer
        # writer-local state
        self.runs: list[tuple[int, int]] = []
        self.free: list[tuple[int, int]] = [(spec.arena0, spec.arena)]
        self.retired: list[tuple[int, list[tuple[int, int]]]] = []  # (generation, blocks)
        self.merges = 0
        self.evicted = 0
        self.waits = 0
        self.below: int | None = None  # the latest eviction bound given to compact()
        self.unsafe = False  # negative control of the stress test: reclaim without waiting for the readers

    @classmethod
    def create(cls, spec: IndexSpec, participants: int) -> Index:
        """Create the segment (owner: the driver); readers ``>= participants`` start offline."""
        shm = shared_memory.SharedMemory(name=spec.name, create=True, size=spec.words * 8)
        ix = cls(spec, shm, False, -1)
        ix.w[: spec.arena0] = 0
        ix.w[PROG] = NEG
        ix.w[EVAL] = NEG
        for r in range(spec.readers):
            ix.w[QS0 + LINE * r] = 0 if r < participants else I64MAX
        return ix

    @classmethod
    def attach(cls, spec: IndexSpec, writer: bool, me: int) -> Index:
        return cls(spec, shared_memory.SharedMemory(name=spec.name), writer, me)

    def close(self) -> None:
        del self.w, self.f
        self.shm.close()

    def unlink(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.shm.unlink()

    # ------------------------------------------------------------------ words

    def get(self, word: int) -> int:
        return int(self.w[word])

    def put(self, word: int, v: int) -> None:
        self.w[word] = v

    # ------------------------------------------------------------------ reader

    def snapshot(self) -> list[tuple[int, int]]:
        """The runs (offset, n) of the current generation (load gen, then n_runs, then the descriptors)."""
        s = self.spec
        g = int(self.w[GEN])
        base = s.dir0 + (g % s.dslots) * s.dwords
        nr = int(self.w[base])
        d = self.w[base + 1: base + 1 + 2 * nr].copy()
        return [(int(d[2 * i]), int(d[2 * i + 1])) for i in range(nr)]

    def columns(self, off: int, n: int) -> dict[str, npt.NDArray[Any]]:
        """Zero-copy views of one published run."""
        o = off + 1
        cols = {"sts": self.w[o: o + n], "comp": self.w[o + n: o + 2 * n], "ts": self.w[o + 2 * n: o + 3 * n],
                "value": self.f[o + 3 * n: o + 4 * n], "id": self.w[o + 4 * n: o + 5 * n],
                "born": self.w[o + 5 * n: o + 6 * n]}
        k = self.spec.conds
        if k:
            cols["ch"] = self.f[o + 6 * n: o + (6 + k) * n].reshape(k, n).T
            cols["cl"] = self.f[o + (6 + k) * n: o + (6 + 2 * k) * n].reshape(k, n).T
        return cols

    def quiesce(self) -> None:
        """A quiescent point of reader ``me``: it holds no reference into this index."""
        g = int(self.w[GEN])
        self.w[QS0 + LINE * self.me] = g

    def offline(self) -> None:
        self.w[QS0 + LINE * self.me] = I64MAX

    # ------------------------------------------------------------------ writer

    def _min_qs(self) -> int:
        if self.unsafe:
            return I64MAX
        r = self.spec.readers
        qs = self.w[QS0: QS0 + LINE * r: LINE].copy()
        if 0 <= self.me < r:
            qs[self.me] = I64MAX
        return int(qs.min())

    def _reclaim(self) -> None:
        if not self.retired:
            return
        m = self._min_qs()
        keep = []
        for g, blocks in self.retired:
            if m >= g:
                for b in blocks:
                    self._release(b)
            else:
                keep.append((g, blocks))
        self.retired = keep

    def _release(self, blk: tuple[int, int]) -> None:
        fr = self.free
        fr.append(blk)
        fr.sort()
        out: list[tuple[int, int]] = []
        for o, n in fr:
            if out and out[-1][0] + out[-1][1] == o:
                out[-1] = (out[-1][0], out[-1][1] + n)
            else:
                out.append((o, n))
        self.free = out

    def _alloc(self, size: int, wait: Callable[[], None]) -> int:
        while True:
            for i, (o, n) in enumerate(self.free):
                if n >= size:
                    if n == size:
                        del self.free[i]
                    else:
                        self.free[i] = (o + size, n - size)
                    return o
            if not self.retired:
                raise ArenaFull(f"index {self.spec.name}: no {size} free words in an arena of {self.spec.arena}")
            self._reclaim()
            if not any(n >= size for _, n in self.free):
                self.waits += 1
                wait()

    def _write_run(self, cols: dict[str, npt.NDArray[Any]], wait: Callable[[], None]) -> tuple[int, int]:
        """Sort by (key, ts), build the composite index, write into free space; (offset, n)."""
        run = build_run(cols)
        n = len(run["ts"])
        k = self.spec.conds
        off = self._alloc(1 + self.spec.width * n, wait)
        o = off + 1
        self.w[off] = n
        self.w[o: o + n] = run["sts"]
        self.w[o + n: o + 2 * n] = run["comp"]
        self.w[o + 2 * n: o + 3 * n] = run["ts"]
        self.f[o + 3 * n: o + 4 * n] = run["value"]
        self.w[o + 4 * n: o + 5 * n] = run["id"]
        self.w[o + 5 * n: o + 6 * n] = run["born"]
        if k:
            self.f[o + 6 * n: o + (6 + k) * n] = run["ch"].T.ravel()
            self.f[o + (6 + k) * n: o + (6 + 2 * k) * n] = run["cl"].T.ravel()
        return off, n

    def _read_run(self, off: int, n: int) -> dict[str, npt.NDArray[Any]]:
        c = self.columns(off, n)
        out = {"ts": c["ts"].copy(), "key": c["comp"] // (n + 1), "value": c["value"].copy(),
               "id": c["id"].copy(), "born": c["born"].copy()}
        if self.spec.conds:
            out["ch"] = c["ch"].copy()
            out["cl"] = c["cl"].copy()
        return out

    def append(self, cols: dict[str, npt.NDArray[Any]], wait: Callable[[], None]) -> None:
        """Insert a batch of entries (columns ts, key, value, id, born) as one new run, then publish it."""
        if len(cols["ts"]) == 0:
            return
        s = self.spec
        if len(self.runs) >= s.runcap:
            self.compact(self.below, wait, force=True)
        off, n = self._write_run(cols, wait)
        g = int(self.w[GEN])
        base = s.dir0 + (g % s.dslots) * s.dwords
        i = len(self.runs)
        self.w[base + 1 + 2 * i] = off
        self.w[base + 2 + 2 * i] = n
        self.w[base] = i + 1  # publication
        self.runs.append((off, n))
        self.w[LIVE] = int(self.w[LIVE]) + n

    def _dead(self, below: int | None) -> int:
        if below is None:
            return 0
        return sum(int(np.searchsorted(self.columns(o, n)["sts"], below, "left")) for o, n in self.runs)

    def compact(self, below: int | None, wait: Callable[[], None], force: bool = False) -> bool:
        """LSM maintenance: merge the small newest runs, or everything when many entries are dead
        (``ts < below``: evicted).  Publishes a new generation; False if the next slot is still in use."""
        self._reclaim()
        if below is not None:
            self.below = below
        below = self.below
        runs = self.runs
        if not runs:
            return False
        live = sum(n for _, n in runs)
        dead = self._dead(below)
        if force or dead >= max(256, live // 2):
            k = 0
        else:
            k = len(runs) - 1
            total = runs[-1][1]
            while k > 0 and runs[k - 1][1] <= 2 * total:
                k -= 1
                total += runs[k][1]
            if k >= len(runs) - 1 and len(runs) < 8:
                return False
            if k >= len(runs) - 1:
                k = max(0, len(runs) - 2)
        s = self.spec
        g = int(self.w[GEN])
        # the next directory slot was last used by generation g + 1 - D: free once every qs >= g + 2 - D
        while g + 2 - s.dslots > self._min_qs():
            if not force:
                return False
            self.waits += 1
            wait()
        parts = [self._read_run(o, n) for o, n in runs[k:]]
        cols = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
        if below is not None:
            keep = cols["ts"] >= below
            self.evicted += int(len(keep) - keep.sum())
            cols = {c: v[keep] for c, v in cols.items()}
        new = runs[:k]
        if len(cols["ts"]):
            new = [*new, self._write_run(cols, wait)]
        base = s.dir0 + ((g + 1) % s.dslots) * s.dwords
        for i, (o, n) in enumerate(new):
            self.w[base + 1 + 2 * i] = o
            self.w[base + 2 + 2 * i] = n
        self.w[base] = len(new)
        self.w[LIVE] = sum(n for _, n in new)
        self.w[GEN] = g + 1  # publication of the new generation
        self.retired.append((g + 1, [(o, 1 + s.width * n) for o, n in runs[k:]]))
        self.runs = new
        self.merges += 1
        return True


def wait_briefly(check: Callable[[], None] | None = None, quiesce: Callable[[], None] | None = None) -> Callable[
        [], None]:
    """A writer's wait step: become quiescent everywhere (no deadlock between joiners), check, sleep."""

    def step() -> None:
        if quiesce is not None:
            quiesce()
        if check is not None:
            check()
        time.sleep(5e-5)

    return step
