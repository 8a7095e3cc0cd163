"""Virtual teams: key partition -> set of joiners, in shared memory, grow-only, replaced atomically.

Scale-OIJ §V-B1: the joiners sharing a key form its *virtual team*; a tuple
of the key may go to any member (it is inserted into that member's index),
and a base tuple of the key reads the indexes of every member.  Keys are
grouped into ``P`` partitions by :func:`partition_of` (a hash of the key
code), and the map stores one team per partition as a bit mask of joiners
(at most 63 joiners).

Layout (int64 words): ``[version, P, mask_0 .. mask_{P-1}]``.  Owner: the
driver creates the segment before a job, is its only writer (Alg. 3 runs in
the driver, :mod:`oij.parallel.shared.schedule`) and unlinks it after the job;
joiners attach read-only.

Atomic replacement and growth.  A partition's team is one word, so it is
replaced by one 8-byte store: a reader sees the old team or the new one,
never a mix.  Teams only grow (``new & old == old`` is asserted): Alg. 3
*replicates* a partition to another joiner, never moves it, so a member that
stored tuples of the key stays a member and no stored tuple is ever out of
its readers' reach, and tuples routed under the old map while the new one is
being published (in flight in the rings) still go to members.  A whole
schedule is published partition by partition, then ``version`` is
incremented (for metrics); correctness never needs two partitions to change
together, since the tuples of a key only ever concern its own partition.
"""

from __future__ import annotations

import contextlib
from multiprocessing import shared_memory

import numpy as np
import numpy.typing as npt
from oij.parallel.runtime.emitter import key_hash

I64 = npt.NDArray[np.int64]


def partition_of(key: I64 | int, partitions: int) -> I64:
    """The partition of key codes (the same multiplicative hash as KP's key -> replica)."""
    out: I64 = key_hash(key, partitions)
    return out


def members(mask: int) -> list[int]:
    return [j for j in range(63) if mask >> j & 1]


class TeamMap:
    """The shared team map (see the module docstring)."""

    def __init__(self, shm: shared_memory.SharedMemory, owner: bool) -> None:
        self.shm = shm
        self.owner = owner
        p = int(np.ndarray((2,), np.int64, shm.buf, 0)[1])
        self.w: I64 = np.ndarray((2 + p,), np.int64, shm.buf, 0)
        self.p = p

    @classmethod
    def create(cls, name: str, masks: list[int]) -> TeamMap:
        shm = shared_memory.SharedMemory(name=name, create=True, size=8 * (2 + len(masks)))
        w: I64 = np.ndarray((2 + len(masks),), np.int64, shm.buf, 0)
        w[0] = 0
        w[1] = len(masks)
        w[2:] = masks
        del w
        return cls(shm, True)

    @classmethod
    def attach(cls, name: str) -> TeamMap:
        return cls(shared_memory.SharedMemory(name=name), False)

    @property
    def masks(self) -> I64:
        """A live view: each word is one partition's current team."""
        return self.w[2:]

    def version(self) -> int:
        return int(self.w[0])

    def replace(self, new: list[int]) -> None:
        """Publish a grown schedule, one word per changed partition, then bump the version."""
        assert self.owner
        for p, m in enumerate(new):
            old = int(self.w[2 + p])
            if m != old:
                assert m & old == old, f"partition {p}: team {old:#x} -> {m:#x} shrinks"
                self.w[2 + p] = m
        self.w[0] = int(self.w[0]) + 1

    def close(self) -> None:
        del self.w
        self.shm.close()

    def unlink(self) -> None:
        assert self.owner
        with contextlib.suppress(FileNotFoundError):
            self.shm.unlink()
