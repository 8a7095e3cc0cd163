r"""Routing whole blocks: which replicas store each on-time tuple, for every pattern, with numpy.

Every pattern is one rule over a block's on-time tuples (a tuple's *position* is its index in the block plus
the piece number, so that round robin goes on across pieces):

=========  ===============================================  ==============================================
pattern    base tuple goes to                               probe tuple goes to
=========  ===============================================  ==============================================
``kp``     ``owner(key)``                                   ``owner(key)``
``key``    ``owner(key)`` (Key-OIJ: joined at finality)     ``owner(key)``
``dp``     ``position mod n``                               every replica
``hp``     a hot key's set ``S(k)``: ``S(k)[position mod    every member of ``S(k)``; other keys:
           |S(k)|]``; other keys ``owner(key)``             ``owner(key)``
``scale``  partition ``p(k)``'s team ``T(p)``:              every member of ``T(p)``
           ``T(p)[position mod |T(p)|]``
=========  ===============================================  ==============================================

Why every pair and row is found exactly once: a base is stored by exactly one replica, and every probe of
its key reaches that replica (a probe goes to the whole set its base may be in), so the base's replica
finds all its pairs and its row, and no other replica stores the base.

``owner(key)`` is a multiplicative hash of a 64-bit key digest (:func:`key_digest`), the same in every
process (Python's ``hash`` of a str is not), and the same for an int key whether its block's key column is
int64 or holds strs too.  ``S(k)`` comes from PPOIJ's Alg. 1 (:func:`oij.parallel.runtime.balance.assign`) and
``T(p)`` from Scale-OIJ's Alg. 3 (:func:`oij.parallel.shared.schedule.alg3`), both run once on the key counts of
the first round of pieces, *before* any tuple is routed, and fixed for the run: a replica never has to find
tuples stored under an earlier map (the event engines instead grow their maps while running).

Creates no process and no shared memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from oij.parallel.config import DELTA, PARTITIONS, PATTERNS, THETA
from oij.parallel.runtime.balance import assign
from oij.parallel.shared.schedule import alg3

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
Bools = npt.NDArray[np.bool_]

GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def key_digest(keys: npt.NDArray[Any]) -> U64:
    """A 64-bit digest of every key, equal in every process: an int key times the golden ratio (mod 2^64);
    a str key, or an int beyond int64, the first 8 bytes of its BLAKE2b hash (str and int kept apart).
    O(n), and one hash per distinct non-int64 key."""
    if keys.dtype != object:
        with np.errstate(over="ignore"):
            d: U64 = keys.astype(np.int64).astype(np.uint64) * GOLDEN
        return d
    memo: dict[Any, int] = {}
    out = np.empty(len(keys), np.uint64)
    for i, k in enumerate(keys.tolist()):
        v = memo.get((type(k), k))
        if v is None:
            if type(k) is int and -(1 << 63) <= k < 1 << 63:
                v = ((k & 0xFFFFFFFFFFFFFFFF) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
            else:
                tag = b"s" if type(k) is str else b"i"
                v = int.from_bytes(hashlib.blake2b(tag + str(k).encode("utf-8", "surrogatepass"),
                                                   digest_size=8).digest(), "little")
            memo[(type(k), k)] = v
        out[i] = v
    return out


def bucket(d: U64, n: int) -> I64:
    """The bucket ``0 .. n-1`` of digests (KP's owner for n replicas; Scale-OIJ's partition for n partitions)."""
    out: I64 = ((d >> np.uint64(33)) % np.uint64(n)).astype(np.int64)
    return out


@dataclass
class Groups:
    """Keys routed to more than one replica: sorted group ids (key digests for ``hp``, partitions for
    ``scale``), and per group its members (a row of ``members``, ``size`` of them used)."""

    ids: U64 = field(default_factory=lambda: np.empty(0, np.uint64))
    members: I64 = field(default_factory=lambda: np.zeros((0, 1), np.int64))
    size: I64 = field(default_factory=lambda: np.empty(0, np.int64))

    def as_map(self) -> dict[int, list[int]]:
        """Group id -> replicas (for metrics).  O(groups)."""
        return {int(g): self.members[i, : int(self.size[i])].tolist() for i, g in enumerate(self.ids.tolist())}


@dataclass
class Router:
    """The routing rule of one run (module docstring).  ``groups`` is set by :meth:`calibrate` for ``hp`` and
    ``scale``; until then (and always for the other patterns) nothing is grouped."""

    pattern: str
    n: int
    theta: float = THETA
    max_split: int | None = None
    partitions: int = PARTITIONS
    delta: float = DELTA
    groups: Groups = field(default_factory=Groups)
    calibrated: bool = False

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise ValueError(f"unknown pattern {self.pattern!r}; known: {', '.join(PATTERNS)}")

    @property
    def needs_calibration(self) -> bool:
        return self.pattern in ("hp", "scale") and self.n > 1

    def counts(self, d: U64) -> dict[int, int]:
        """What calibration counts in a block: tuples per key digest (``hp``) or per partition (``scale``)."""
        g = bucket(d, self.partitions) if self.pattern == "scale" else d
        u, c = np.unique(g, return_counts=True)
        return dict(zip(u.tolist(), c.tolist(), strict=True))

    def calibrate(self, counts: Mapping[int, int]) -> None:
        """Fix the groups from the first round's counts: Alg. 1 from the KP assignment (``hp``), or Alg. 3 from
        teams of one (``scale``).  O(keys x n) arithmetic."""
        self.calibrated = True
        if not self.needs_calibration or not counts:
            return
        rows: list[tuple[int, list[int]]] = []
        if self.pattern == "hp":
            keys = sorted(counts)
            owners = bucket(np.array(keys, np.uint64), self.n).tolist()
            got = assign({k: float(c) for k, c in counts.items()}, {k: [o] for k, o in zip(keys, owners, strict=True)},
                         self.n, self.theta, self.max_split or self.n)
            rows = [(k, rs) for k, rs in got.items() if len(rs) > 1]
        else:
            x = [float(counts.get(p, 0)) for p in range(self.partitions)]
            masks = alg3(x, [1 << (p % self.n) for p in range(self.partitions)], self.n, self.delta)
            rows = [(p, [j for j in range(self.n) if m >> j & 1]) for p, m in enumerate(masks)]
        rows.sort()
        g = Groups(np.array([k for k, _ in rows], np.uint64), np.zeros((len(rows), max(1, self.n)), np.int64),
                   np.array([len(rs) for _, rs in rows], np.int64))
        for i, (_, rs) in enumerate(rows):
            g.members[i, : len(rs)] = rs
        self.groups = g

    def destinations(self, d: U64, is_base: Bools, first: int) -> list[npt.NDArray[np.intp]]:
        """For each replica, the indices of the block's tuples it stores (in block order).  ``d``: the key
        digests; ``first``: the position of the block's first tuple.  O(n x tuples)."""
        m = len(d)
        n = self.n
        if n == 1:
            return [np.arange(m)]
        pos = np.arange(first, first + m, dtype=np.int64)
        if self.pattern == "dp":
            base_to = pos % n
            return [np.flatnonzero(~is_base | (base_to == r)) for r in range(n)]
        if self.pattern == "scale":
            gid = bucket(d, self.partitions).astype(np.uint64)
            owner = (gid.astype(np.int64) % n)
        else:
            gid = d
            owner = bucket(d, n)
        base_to = owner.copy()
        probe_in: Bools | None = None
        gr = self.groups
        if len(gr.ids):
            j = np.minimum(np.searchsorted(gr.ids, gid), len(gr.ids) - 1)
            hot = gr.ids[j] == gid
            if hot.any():
                h = np.flatnonzero(hot)
                jh = j[h]
                size = gr.size[jh]
                base_to[h] = gr.members[jh, pos[h] % size]
                # probe_in[r]: a hot tuple goes to r iff r is a member of its group
                member = np.zeros((len(gr.ids), n), np.bool_)
                rows = np.repeat(np.arange(len(gr.ids)), gr.size)
                cols = np.concatenate([gr.members[i, : int(s)] for i, s in enumerate(gr.size.tolist())])
                member[rows, cols] = True
                probe_in = np.zeros((m, n), np.bool_)
                probe_in[h] = member[jh]
                probe_in[np.flatnonzero(~hot), owner[~hot]] = True
        out = []
        for r in range(n):
            if probe_in is None:
                out.append(np.flatnonzero(base_to == r))
            else:
                out.append(np.flatnonzero(np.where(is_base, base_to == r, probe_in[:, r])))
        return out
