"""Emitters: the driver-side sources of the replicas' input channels, and the lateness decision.

Data flow (in the driver process)::

    events / EventBlocks (read or generated) --> Chunk (an EventBlock with key codes, + cond operands)
        --> Router.route(chunk): W at every arrival, late ids, key codes, emitter of every tuple
        --> per pattern: destination ring(s), owner, fan of every tuple; batches of <= b records
        --> (ring, records) list, sent by the runtime; then CLOSE(epoch, W) on every ring

There are M emitters per stream (2M input channels per replica); tuple i of
a stream goes to emitter ``i mod M`` of that stream.  Each chunk the driver
routes is one *epoch*: every batch of the epoch is sent before the epoch's
CLOSE punctuation, which carries the watermark, so an idle channel still
tells every collector how far the stream has progressed.

Lateness is a property of the whole arrival sequence (:mod:`oij.spec.watermark`),
so it is decided here, on the input order, before the stream is split:
a late tuple is reported by the driver and never sent.  A batch carries the
W in force at the arrival of its last tuple; every later tuple of the same
channel arrived later, so its ts is >= that W (it is not late), which is
the only property the replicas' finality and purging rely on.

Patterns (PPOIJ Table 1): KP point-to-point by hash(key); DP one broadcast
ring per emitter, owner round robin; HP partial multicast to the key's
replica set (Alg. 1 after calibration, KP before): ring (e, r) carries the
tuples of emitter e whose key's set holds r, in batches of any keys; owner
round robin per key.

This module creates no shared memory and no process.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from oij.parallel.runtime.ring import tuple_dtype
from oij.parallel.runtime.store import NEG
from oij.reference.columns import EventBlock
from oij.reference.cond import operand_matrix, operand_rows
from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import End, Event, Key, Query, StreamTuple

if TYPE_CHECKING:
    from oij.workloads import generator

I64 = npt.NDArray[np.int64]

"""Events per epoch at least: one epoch is one routing call and one CLOSE per ring, a fixed cost of a few
hundred microseconds in numpy, so small epochs made the driver the bottleneck (issue 14: 7,816 epochs of
256 events cost 1.5 s of routing on 2x10^6 tuples).  Larger epochs only delay DP/HP deliveries a little."""


@dataclass
class Chunk:
    """One epoch's input to the :class:`Router`: consecutive events in arrival order and, with a cond, their
    operands.

    ``events`` is a :class:`~oij.reference.columns.EventBlock` whose ``key`` column holds dense key *codes*
    (:class:`KeyCodes`, or a generator's key indexes; -1 for a watermark): they stand for the keys in
    equality, all the routing needs.  ``ch``/``cl``: the (n, len(cond)) cond operands (see ``tuple_dtype``),
    None without a cond.
    """

    events: EventBlock
    ch: npt.NDArray[np.float64] | None = None
    cl: npt.NDArray[np.float64] | None = None

    def __len__(self) -> int:
        return len(self.events)

    def slice(self, a: int, b: int) -> Chunk:
        return Chunk(self.events.slice(a, b), None if self.ch is None else self.ch[a:b],
                     None if self.cl is None else self.cl[a:b])


class KeyCodes:
    """Dense integer codes for join keys (1 and "1" are different keys)."""

    def __init__(self) -> None:
        self.codes: dict[tuple[type, Key], int] = {}

    def code(self, k: Key) -> int:
        t = (type(k), k)
        c = self.codes.get(t)
        if c is None:
            c = self.codes[t] = len(self.codes)
        return c

    def codes_of(self, keys: npt.NDArray[Any], tuples: npt.NDArray[np.bool_], in_order: bool = False) -> I64:
        """The codes of ``keys`` where ``tuples`` (-1 elsewhere): vectorised for int64 keys (new keys get codes
        in sorted order), or with ``in_order`` new keys coded in arrival order, one lookup per tuple.
        O(n log n)."""
        out = np.full(len(keys), -1, dtype=np.int64)
        if keys.dtype == np.int64 and not in_order:
            uniq, inv = np.unique(keys[tuples], return_inverse=True)
            table = np.array([self.code(k) for k in uniq.tolist()], dtype=np.int64)
            out[tuples] = table[inv.reshape(-1)] if len(uniq) else 0
        else:
            code = self.code
            out[tuples] = [code(k) for k in keys[tuples].tolist()]
        return out


def _coded(b: EventBlock, codes: I64) -> EventBlock:
    """``b`` with key codes for keys (int64 ids: the engines refuse ids beyond 64 bits)."""
    return EventBlock(b.kind, b.side, np.asarray(b.id, dtype=np.int64), b.ts, codes, b.value, b.channel, b.end,
                      b.fields)


def _cut(c: Chunk, size: int) -> Iterator[Chunk]:
    for a in range(0, len(c), size):
        yield c.slice(a, a + size)


def chunks_from_events(events: Iterable[Event], size: int, codes: KeyCodes | None = None,
                       q: Query | None = None) -> Iterator[Chunk]:
    """Cut an event sequence into chunks of ``size`` events (End stops the input; keys coded in arrival order);
    with ``q.cond``, with the tuples' cond operands."""
    codes = codes or KeyCodes()
    conds = q is not None and bool(q.cond)
    rows: list[Event] = []

    def flush() -> Chunk:
        b = EventBlock.from_events(rows)
        c = Chunk(_coded(b, codes.codes_of(b.key, b.kind == 0, in_order=True)))
        if conds:
            assert q is not None
            c.ch, c.cl = operand_rows(rows, q)
        rows.clear()
        return c

    for e in events:
        if type(e) is End:
            break
        rows.append(e)
        if len(rows) >= size:
            yield flush()
    if rows:
        yield flush()


def chunks_from_event_blocks(blocks: Iterable[EventBlock], size: int, codes: KeyCodes | None = None,
                             counter: list[int] | None = None, q: Query | None = None) -> Iterator[Chunk]:
    """Chunks of ``size`` events from the reader's column blocks (:mod:`oij.io.columnar`); stops at the end.

    ``counter[0]`` is increased by the number of tuples read.
    """
    codes = codes or KeyCodes()
    for b in blocks:
        tup = b.kind == 0
        if counter is not None:
            counter[0] += int(np.count_nonzero(tup))
        c = Chunk(_coded(b, codes.codes_of(b.key, tup)))
        if q is not None and q.cond:
            c.ch, c.cl = operand_rows(list(b.events()), q)
        yield from _cut(c, size)
        if b.end:
            return


def chunks_from_blocks(blocks: Iterable[generator.Block], size: int, q: Query | None = None) -> Iterator[Chunk]:
    """Chunks from :func:`oij.workloads.generate_blocks` blocks (key indexes are already dense codes)."""
    for g in blocks:
        b = g.events
        c = Chunk(_coded(b, b.key))
        if q is not None and q.cond:
            c.ch, c.cl = _block_operands(b, q)
        yield from _cut(c, size)


def _block_operands(b: EventBlock, q: Query) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The cond operands of a generated block (:func:`oij.reference.cond.operand_matrix` over its columns)."""
    fields = b.fields or {}

    def col(name: str) -> npt.NDArray[np.float64]:
        if name == "ts":
            return np.asarray(b.ts, dtype=np.float64)
        return np.asarray(b.value if name == "value" else fields[name], dtype=np.float64)

    return operand_matrix(b.side == 0, col, q)


def key_hash(k: npt.NDArray[np.int64] | int, n: int) -> Any:
    """KP's hash(key) -> replica: a multiplicative (Fibonacci) hash of the key code, mod n."""
    x = np.asarray(k, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return ((x >> np.uint64(33)) % np.uint64(n)).astype(np.int64)


@dataclass
class Routed:
    """One epoch's output: late ids, (ring index, records) to send in order, W after the epoch."""

    late: I64
    sends: list[tuple[int, npt.NDArray[Any], int]]  # (ring index, records, W of the batch)
    w_end: int
    tuples: int
    deliveries: int


class Router:
    """The 2M emitters of one run (see the module docstring)."""

    def __init__(self, q: Query, pattern: str, replicas: int, emitters: int, batch: int) -> None:
        self.q = q
        self.dtype = tuple_dtype(len(q.cond))
        self.pattern = pattern
        self.n = replicas
        self.m = emitters
        self.b = batch
        self.lo = lower_offset(q)
        self.hi = upper_offset(q)
        self.ms = np.full(q.channels, NEG, dtype=np.int64)  # per channel max watermark
        self.maxts = NEG
        self.side_count = [0, 0]
        self.owner_ctr = np.zeros(2 * emitters, dtype=np.int64)  # DP: round robin per emitter
        # HP
        self.key2r: dict[int, tuple[int, ...]] = {}
        self.key_rr = np.zeros(0, dtype=np.int64)
        self.counts = np.zeros((2 * emitters, 0), dtype=np.int64)
        self.counting = pattern == "hp"
        self._sets_cache: tuple[I64, I64, npt.NDArray[np.bool_]] | None = None

    def rings(self) -> int:
        return 2 * self.m if self.pattern == "dp" else 2 * self.m * self.n

    # ------------------------------------------------------------------ watermarks

    def _watermarks(self, c: EventBlock) -> tuple[I64, int]:
        """W in force at the arrival of every row, and W after the chunk."""
        n = len(c)
        is_t = c.kind == 0
        if self.q.lateness is not None:
            x = np.where(is_t, c.ts, NEG)
            run = np.maximum.accumulate(np.concatenate(([self.maxts], x)))
            self.maxts = int(run[-1])
            excl = run[:-1]
            lat = self.q.lateness
            w = np.where(excl == NEG, NEG, excl - lat)
            w_end = NEG if self.maxts == NEG else self.maxts - lat
            return w, w_end
        is_w = c.kind == 1
        w = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        for ch in range(self.q.channels):
            x = np.where(is_w & (c.channel == ch), c.ts, NEG)
            run = np.maximum.accumulate(np.concatenate(([self.ms[ch]], x)))
            self.ms[ch] = run[-1]
            np.minimum(w, run[:-1], out=w)
        return w, int(self.ms.min())

    # ------------------------------------------------------------------ routing

    def route(self, chunk: Chunk, born: int) -> Routed:
        c = chunk.events
        w, w_end = self._watermarks(c)
        is_t = c.kind == 0
        late_m = is_t & (c.ts < w)
        late = c.id[late_m]
        idx = np.flatnonzero(is_t & ~late_m)
        t = len(idx)
        if t == 0:
            return Routed(late, [], w_end, 0, 0)
        recs = np.empty(t, dtype=self.dtype)
        if self.q.cond and (chunk.ch is None or chunk.cl is None):
            raise ValueError("a query with a cond needs chunks with its operands (chunks_from_events(..., q=q))")
        if chunk.ch is not None and chunk.cl is not None:
            recs["ch"] = chunk.ch[idx]
            recs["cl"] = chunk.cl[idx]
        recs["id"] = c.id[idx]
        recs["ts"] = c.ts[idx]
        recs["key"] = c.key[idx]
        recs["value"] = c.value[idx]
        recs["born"] = born
        side = c.side[idx]
        recs["side"] = side
        wrow = w[idx]
        # emitter of every tuple: i-th tuple of a stream -> emitter i mod M of that stream
        em = np.empty(t, dtype=np.int64)
        for s in (0, 1):
            ms = side == s
            k = int(ms.sum())
            em[ms] = s * self.m + (self.side_count[s] + np.arange(k)) % self.m
            self.side_count[s] += k
        recs["chan"] = em
        if self.counting:
            self._count(em, recs["key"])
        if self.pattern == "kp":
            sends, deliveries = self._kp(recs, em, wrow)
        elif self.pattern == "dp":
            sends, deliveries = self._dp(recs, em, wrow)
        else:
            sends, deliveries = self._hp(recs, em, wrow)
        return Routed(late, sends, w_end, t, deliveries)

    def _cut(self, ring: int, recs: npt.NDArray[Any], wrow: I64, out: list[Any]) -> None:
        for a in range(0, len(recs), self.b):
            part = recs[a: a + self.b]
            out.append((ring, part, int(wrow[a: a + self.b][-1])))

    def _kp(self, recs: npt.NDArray[Any], em: I64, wrow: I64) -> tuple[list[Any], int]:
        dest = key_hash(recs["key"], self.n)
        recs["owner"] = dest
        recs["fan"] = 1
        g = em * self.n + dest
        order = np.argsort(g, kind="stable")
        gs = g[order]
        bounds = np.flatnonzero(np.diff(gs)) + 1
        out: list[Any] = []
        for part in np.split(order, bounds):
            self._cut(int(g[part[0]]), recs[part], wrow[part], out)
        return out, len(recs)

    def _dp(self, recs: npt.NDArray[Any], em: I64, wrow: I64) -> tuple[list[Any], int]:
        out: list[Any] = []
        recs["fan"] = self.n
        for e in range(2 * self.m):
            sel = np.flatnonzero(em == e)
            if not len(sel):
                continue
            recs["owner"][sel] = (self.owner_ctr[e] + np.arange(len(sel))) % self.n
            self.owner_ctr[e] += len(sel)
            self._cut(e, recs[sel], wrow[sel], out)
        return out, len(recs) * self.n

    # ------------------------------------------------------------------ HP

    def _count(self, em: I64, keys: I64) -> None:
        kmax = int(keys.max()) + 1
        if kmax > self.counts.shape[1]:
            c = np.zeros((2 * self.m, kmax), dtype=np.int64)
            c[:, : self.counts.shape[1]] = self.counts
            self.counts = c
        for e in range(2 * self.m):
            sel = em == e
            if sel.any():
                self.counts[e] += np.bincount(keys[sel], minlength=self.counts.shape[1])

    def replicas_of(self, k: int) -> tuple[int, ...]:
        s = self.key2r.get(k)
        return s if s is not None else (int(key_hash(k, self.n)),)

    def calibration_request(self) -> tuple[list[list[int]], dict[int, list[int]]]:
        """Per-emitter key counts and the current (KP) assignment of every counted key."""
        self.counting = False
        seen = np.flatnonzero(self.counts.sum(axis=0))
        return self.counts.tolist(), {int(k): list(self.replicas_of(int(k))) for k in seen}

    def apply_map(self, key2r: dict[int, list[int]]) -> None:
        """Adopt Alg. 1's assignment (at an epoch boundary: nothing of the old assignment is pending)."""
        for k, rs in key2r.items():
            old = self.replicas_of(k)
            assert set(old) <= set(rs), "a replica assigned during calibration must stay assigned"
            self.key2r[k] = tuple(rs)
        self._sets_cache = None

    def _sets(self, kmax: int) -> tuple[I64, I64, npt.NDArray[np.bool_]]:
        """Per key code < kmax: replica-set size, the set padded to n columns, and membership (key, replica)."""
        k = np.arange(kmax, dtype=np.int64)
        sets = np.repeat(key_hash(k, self.n)[:, None], self.n, axis=1)
        size = np.ones(kmax, dtype=np.int64)
        for key, rs in self.key2r.items():
            if key < kmax:
                sets[key, : len(rs)] = rs
                size[key] = len(rs)
        member = np.zeros((kmax, self.n), dtype=np.bool_)
        for j in range(self.n):
            np.logical_or.at(member, (k[size > j], sets[size > j, j]), True)
        return size, sets, member

    def _hp(self, recs: npt.NDArray[Any], em: I64, wrow: I64) -> tuple[list[Any], int]:
        """Partial multicast: ring (e, r) gets, in arrival order, the tuples of emitter e whose key's set holds r.

        Owners go round robin over the key's set, per key, in arrival order.  Batches mix keys: the
        round-robin collector delivers a channel's whole epoch in one turn, so every replica of a key
        sees that key's tuples in the same order however the batches are cut (:mod:`oij.spec.ordering`).
        """
        keys = recs["key"]
        kmax = int(keys.max()) + 1
        if kmax > len(self.key_rr):
            rr = np.zeros(kmax, dtype=np.int64)
            rr[: len(self.key_rr)] = self.key_rr
            self.key_rr = rr
        if self._sets_cache is None or len(self._sets_cache[0]) < kmax:
            self._sets_cache = self._sets(max(kmax, 2 * len(self._sets_cache[0]) if self._sets_cache else kmax))
        size, sets, member = self._sets_cache
        # rank of every tuple among the tuples of its key in this epoch (arrival order)
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        first = np.r_[0, np.flatnonzero(np.diff(sk)) + 1]
        cnt = np.diff(np.r_[first, len(sk)])
        rank = np.empty(len(keys), dtype=np.int64)
        rank[order] = np.arange(len(sk)) - np.repeat(first, cnt)
        ns = size[keys]
        recs["fan"] = ns
        recs["owner"] = sets[keys, (self.key_rr[keys] + rank) % ns]
        np.add.at(self.key_rr, sk[first], cnt)
        out: list[Any] = []
        for e in range(2 * self.m):
            me = em == e
            for r in range(self.n):
                sel = np.flatnonzero(me & member[keys, r])
                if len(sel):
                    self._cut(e * self.n + r, recs[sel], wrow[sel], out)
        return out, int(ns.sum())


def order_channels(m: int) -> list[int]:
    """The round-robin order of the 2M channels, alternating base and probe emitters: b0, p0, b1, p1, ..."""
    out: list[int] = []
    for i in range(m):
        out += [i, m + i]
    return out


def n_tuples(events: Sequence[Event]) -> int:
    return sum(1 for e in events if type(e) is StreamTuple)
