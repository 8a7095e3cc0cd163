"""Column boxes: shared-memory segments of typed columns, the block engine's only shared data.

Data flow::

    worker w, round t:  decoded piece --route--> outbox[w][t % 2]: per replica r the columns
                                                  r.id, r.ts, r.key, r.value, r.side (n_r rows)
                                                  and the piece's tuple ids (read by the driver's id check)
    worker r, round t:  outbox[w][t % 2] r.* for every w, in piece order --> its BlockStore
    driver (columns in memory: a generated stream, stdin, a Parquet dataset, oij check's events):
                        a piece's events --> inbox[w] (kind, side, id, ts, key, value, channel) --> worker w

Two outbox slots per worker let worker w route round t + 1 while another worker still reads round t; the
driver sends round t + 2's routing only after every worker has joined round t (it has their replies), so a
slot is never written while it is read.  Counts and everything else travel in the control messages.

Ownership (who creates / who frees): the driver creates every box of a job
(:func:`oij.parallel.blocks.driver.execute`) before it sends the job, and closes and unlinks all of them in a
``finally`` block, whatever happens; workers only attach and close.  Names start with the runtime's tag
(``oij-<driver pid>-...``), like the rings', and a driver killed with SIGKILL leaves them to the
``multiprocessing`` resource tracker, which unlinks them.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any

import numpy as np
import numpy.typing as npt

Layout = tuple[tuple[str, str], ...]
"""Column names and numpy dtype strings, in segment order."""

INBOX: Layout = (("id", "<i8"), ("ts", "<i8"), ("key", "<i8"), ("value", "<f8"), ("channel", "<i8"),
                 ("kind", "|i1"), ("side", "|i1"))


def outbox_layout(n: int) -> Layout:
    """An outbox's columns for ``n`` replicas: the piece's tuple ids, then per replica its tuples."""
    cols: list[tuple[str, str]] = [("ids", "<i8")]
    for r in range(n):
        cols += [(f"{r}.id", "<i8"), (f"{r}.ts", "<i8"), (f"{r}.key", "<i8"), (f"{r}.value", "<f8")]
    cols += [(f"{r}.side", "|i1") for r in range(n)]
    return tuple(cols)


@dataclass(frozen=True)
class BoxSpec:
    """What a process needs to attach a box (picklable)."""

    name: str
    layout: Layout
    cap: int

    def nbytes(self) -> int:
        return max(8, sum(np.dtype(dt).itemsize for _, dt in self.layout) * self.cap)


class Box:
    """A shared-memory segment of columns of ``cap`` rows each (module docstring)."""

    def __init__(self, spec: BoxSpec, shm: shared_memory.SharedMemory, owner: bool) -> None:
        self.spec = spec
        self.shm = shm
        self.owner = owner
        self.cols: dict[str, npt.NDArray[Any]] = {}
        off = 0
        for name, dt in spec.layout:
            d = np.dtype(dt)
            self.cols[name] = np.ndarray((spec.cap,), d, shm.buf, off)
            off += d.itemsize * spec.cap

    @classmethod
    def create(cls, name: str, layout: Layout, cap: int) -> Box:
        spec = BoxSpec(name, layout, max(1, cap))
        return cls(spec, shared_memory.SharedMemory(name=name, create=True, size=spec.nbytes()), True)

    @classmethod
    def attach(cls, spec: BoxSpec) -> Box:
        return cls(spec, shared_memory.SharedMemory(name=spec.name), False)

    def put(self, prefix: str, **cols: npt.NDArray[Any]) -> None:
        """Write columns ``prefix + name`` from row 0.  O(rows)."""
        for name, a in cols.items():
            self.cols[prefix + name][: len(a)] = a

    def get(self, name: str, n: int) -> npt.NDArray[Any]:
        """A copy of the first ``n`` rows of column ``name``.  O(n)."""
        return self.cols[name][:n].copy()

    def close(self) -> None:
        """Drop this process's mapping (every process, owner or not)."""
        self.cols = {}
        self.shm.close()

    def unlink(self) -> None:
        """Remove the segment from /dev/shm (the creator only; idempotent)."""
        assert self.owner, "only the creator unlinks a box"
        with contextlib.suppress(FileNotFoundError):
            self.shm.unlink()
