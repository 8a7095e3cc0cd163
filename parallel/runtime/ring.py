"""Shared-memory ring buffers of fixed-width records: the data path of the parallel engines.

Data flow::

    producer (driver-side emitter / replica)          consumer(s) (replica collector / driver sink)
        put(records, epoch, W, kind) --> [slot0][slot1]...[slotC-1] --> get(reader) -> Batch
                     head (written by the producer)        tails[r] (one per reader, written by reader r)

A :class:`Ring` is one ``multiprocessing.shared_memory`` segment holding

* a control block of int64 words: ``head`` (slots published) and one ``tail``
  per reader (slots that reader has consumed), each on its own 64-byte line;
* ``C`` slot headers ``(n, epoch, W, kind)``;
* ``C x B`` records of a numpy structured dtype (:data:`TUPLE` for tuples,
  :data:`RESULT` for results).

One producer, ``R >= 1`` readers.  With one reader it is the SPSC queue of
FastFlow; with ``R`` readers it is the DP-OIJ broadcast: the batch is written
once, every reader reads the same shared copy, and the slot is reused only
when the *last* reader has moved past it (``head - min(tails) < C``), which is
PPOIJ's shared pointer with an atomic reader count, without the atomics: each
reader owns its tail word.

Memory ordering: the producer writes the slot, then ``head``; a reader reads
``head``, then the slot, then writes its ``tail``.  Each word has one writer.
Aligned 8-byte numpy stores are single instructions, and x86-64 (TSO) keeps
stores in program order and loads in program order, which is all this
protocol needs.  (A weakly ordered CPU would need fences; the runtime checks
the architecture, see :func:`check_platform`.)

Ownership: the process that calls :meth:`Ring.create` (always the driver, see
:mod:`oij.parallel.runtime.pool`) owns the segment and is the only one that calls
:meth:`Ring.unlink`; other processes :meth:`Ring.attach` and :meth:`Ring.close`.
"""

from __future__ import annotations

import contextlib
import platform
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any

import numpy as np
import numpy.typing as npt
from oij.spec.model import Query

TUPLE = np.dtype(
    [
        ("id", np.int64),
        ("ts", np.int64),
        ("key", np.int64),  # dense key code >= 0 (assigned by the driver)
        ("value", np.float64),
        ("born", np.int64),  # creation at the source, time.monotonic_ns()
        ("side", np.int8),  # 0 base, 1 probe
        ("owner", np.int8),  # the replica that stores the tuple
        ("fan", np.int8),  # how many replicas receive the tuple
        ("chan", np.int8),  # the emitter (input channel) that sent it
    ]
)
"""A tuple record (40 bytes + 4 one-byte fields)."""


def tuple_dtype(conds: int = 0) -> np.dtype[Any]:
    """The tuple record of a query with ``conds`` comparisons: :data:`TUPLE`, plus, when ``conds > 0``, the
    cond operands ``ch``/``cl`` (``conds`` float64 each: a base's x and 0, a probe's s and e,
    :func:`oij.reference.cond.operand_rows`)."""
    if conds == 0:
        return TUPLE
    return np.dtype([*TUPLE.descr, ("ch", np.float64, (conds,)), ("cl", np.float64, (conds,))])

RESULT = np.dtype(
    [
        ("a", np.int64),  # base id
        ("b", np.int64),  # probe id (pairs), -1 for partial aggregate rows
        ("n", np.int64),  # partial count
        ("si", np.int64),  # partial sum of the common values, in units of 2**-10 (exactsum)
        ("s", np.float64),  # partial sum of the other values: one piece of it (exactsum)
        ("mn", np.float64),
        ("mx", np.float64),
        ("born", np.int64),  # max creation time of the tuples that made the result
        ("fan", np.int32),  # partial rows expected for this base
        ("kind", np.int8),  # 0 pair, 1 partial row, 2 one more piece of a partial row's exact sum
    ]
)
"""A result record: a pair, or one replica's partial row for a base (aggregates, left join), or a piece of a
partial row's exact sum (:mod:`oij.parallel.runtime.exactsum`)."""

KIND_DATA = 0
KIND_CLOSE = 1  # end of an epoch on this channel (a punctuation: carries W, may be the channel's only message)
KIND_END = 2  # end of the stream on this channel

_LINE = 8  # int64 words per cache line


def ring_dtype(q: Query) -> str:
    """The ring dtype name of the tuple rings of query ``q``: ``"tuple"``, or ``"tuple:<conds>"`` with a cond."""
    return f"tuple:{len(q.cond)}" if q.cond else "tuple"


def check_platform() -> None:
    """Raise RuntimeError on a CPU whose memory model this ring does not support (see the module docstring)."""
    m = platform.machine().lower()
    if m not in ("x86_64", "amd64", "i686", "i386"):
        raise RuntimeError(f"the shared-memory rings assume x86 total store order; this machine is {m}")


@dataclass(frozen=True)
class RingSpec:
    """What a process needs to attach a ring: segment name, shape and dtype name."""

    name: str
    slots: int
    width: int
    readers: int
    dtype: str  # "tuple" | "tuple:<conds>" | "result"


@dataclass
class Batch:
    """One slot's content, copied out of shared memory."""

    kind: int
    epoch: int
    wm: int
    recs: npt.NDArray[Any]


def _dtype(name: str) -> np.dtype[Any]:
    if name.startswith("tuple"):
        return tuple_dtype(int(name[6:] or 0))
    return RESULT


class Ring:
    """A shared-memory ring; see the module docstring for the layout and the protocol."""

    def __init__(self, spec: RingSpec, shm: shared_memory.SharedMemory, owner: bool) -> None:
        self.spec = spec
        self.shm = shm
        self.owner = owner
        dt = _dtype(spec.dtype)
        c, w, r = spec.slots, spec.width, spec.readers
        buf = shm.buf
        ctrl_words = _LINE * (1 + r)
        self.ctrl: npt.NDArray[np.int64] = np.ndarray((ctrl_words,), np.int64, buf, 0)
        off = ctrl_words * 8
        self.meta: npt.NDArray[np.int64] = np.ndarray((c, 4), np.int64, buf, off)
        off += c * 4 * 8
        self.data: npt.NDArray[Any] = np.ndarray((c, w), dt, buf, off)
        self.slots = c
        self.width = w
        # producer-local cache of head; reader-local caches of tails
        self._head = int(self.ctrl[0])

    @staticmethod
    def nbytes(slots: int, width: int, readers: int, dtype: str) -> int:
        return _LINE * (1 + readers) * 8 + slots * 4 * 8 + slots * width * _dtype(dtype).itemsize

    @classmethod
    def create(cls, name: str, slots: int, width: int, readers: int, dtype: str) -> Ring:
        spec = RingSpec(name, slots, width, readers, dtype)
        shm = shared_memory.SharedMemory(name=name, create=True, size=cls.nbytes(slots, width, readers, dtype))
        ring = cls(spec, shm, True)
        ring.ctrl[:] = 0
        return ring

    @classmethod
    def attach(cls, spec: RingSpec) -> Ring:
        return cls(spec, shared_memory.SharedMemory(name=spec.name), False)

    # ------------------------------------------------------------------ producer

    def free(self) -> int:
        """Slots the producer may write now."""
        r = self.spec.readers
        tails = self.ctrl[_LINE: _LINE * (1 + r): _LINE]
        return self.slots - (self._head - int(tails.min()))

    def put(self, recs: npt.NDArray[Any] | None, epoch: int, wm: int, kind: int = KIND_DATA) -> bool:
        """Publish one batch (``len(recs) <= width``); False (nothing written) if the ring is full."""
        if self.free() <= 0:
            return False
        i = self._head % self.slots
        n = 0 if recs is None else len(recs)
        if n:
            self.data[i, :n] = recs
        m = self.meta[i]
        m[0] = n
        m[1] = epoch
        m[2] = wm
        m[3] = kind
        self._head += 1
        self.ctrl[0] = self._head
        return True

    # ------------------------------------------------------------------ reader

    def available(self, reader: int) -> int:
        return int(self.ctrl[0]) - int(self.ctrl[_LINE * (1 + reader)])

    def get(self, reader: int) -> Batch | None:
        """The next batch for ``reader`` (copied), or None if there is none yet."""
        t_idx = _LINE * (1 + reader)
        tail = int(self.ctrl[t_idx])
        if int(self.ctrl[0]) == tail:
            return None
        i = tail % self.slots
        n, epoch, wm, kind = (int(x) for x in self.meta[i])
        recs = self.data[i, :n].copy()
        self.ctrl[t_idx] = tail + 1
        return Batch(kind, epoch, wm, recs)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Drop this process's mapping (every process, owner or not)."""
        # numpy views must go before the mmap can close
        del self.ctrl, self.meta, self.data
        self.shm.close()

    def unlink(self) -> None:
        """Remove the segment from /dev/shm (owner only; idempotent)."""
        assert self.owner, "only the creator unlinks a ring"
        with contextlib.suppress(FileNotFoundError):
            self.shm.unlink()
