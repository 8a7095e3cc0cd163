r"""The profiles' operator with indexes: :func:`oij.spec.profiles.compute_profile_result`, fast.

The specification simulates the operator of a :class:`~oij.spec.profiles.Profile` with one list of stored
tuples: every arrival scans it for partners and every step scans it for tuples to drop, quadratic on purpose.
This module keeps the same state in indexes, so that each step touches only what it changes:

* per key (its type and its value: ``1`` and ``"1"`` are different keys), the stored bases and the stored probes,
  each a ``SortedList`` of ``(ts, seq)``; an arrival reads the other side's window range of its key, not all of
  the state;
* a heap of ``(drop edge, seq)``: the stored tuples in the order a rising W drops them
  (:func:`oij.spec.profiles.is_droppable` compares W with a per-tuple edge fixed at storing time);
* under ``purge="lazy-own"``, per input, a ``SortedList`` of ``(ts, seq)``: the tuples a later on-time tuple of
  the input forgets are a prefix of it.

Data flow: event j -> :meth:`ProfileOracle.on_tuple` (late or not, probe the window range, store or emit the
final row, lazy-own's forgetting) or :meth:`ProfileOracle.on_watermark` -> W_j appended to the history ->
:meth:`ProfileOracle.evict` (pop the heap while the W of the profile's lag drops its head).  End ->
:meth:`ProfileOracle.on_end`; :meth:`ProfileOracle.result` is the canonical result (with ``retract_on_purge``,
the batch join of what was held, :func:`batch_result`).

Cost, with n tuples, m rows out and s the tuples a key's window range holds: an arrival
:math:`O(\log n + s)`, a drop :math:`O(\log n)`; a stream :math:`O(n \log n + \sum s + m)`, where the
specification is :math:`O(n^2)`.  Aggregates are exact (:func:`oij.spec.aggregate.compute_aggregate`), so the
order in which a base meets its probes does not change its row.  Tested against the specification for every
named profile and for random combinations of the parameters (``tests/reference/test_profiles.py``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from typing import Any

from oij.spec.aggregate import compute_aggregate
from oij.spec.batch import Results
from oij.spec.match import is_cond_true, lower_offset, upper_offset
from oij.spec.model import BASE, NO_WATERMARK, PROBE, End, Event, Query, StreamTuple, Watermark
from oij.spec.profiles import CANONICAL, Profile
from sortedcontainers import SortedList

_KeyId = tuple[type, Any]


def _key(t: StreamTuple) -> _KeyId:
    return (type(t.key), t.key)


class ProfileOracle:
    """The operator of profile ``p`` for query ``q``, fed one event at a time (``seq`` is the event's position,
    1-based, as ``j`` in the specification)."""

    def __init__(self, q: Query, p: Profile = CANONICAL) -> None:
        """The state's layout; see the module docstring."""
        self.q, self.p = q, p
        self.lo, self.hi = lower_offset(q), upper_offset(q)
        self.channel_max = [NO_WATERMARK] * q.channels
        self.side_max = {BASE: NO_WATERMARK, PROBE: NO_WATERMARK}
        self.history = [NO_WATERMARK]
        self.stored: dict[int, StreamTuple] = {}
        self.by_key: dict[_KeyId, dict[str, SortedList]] = {}
        self.heap: list[tuple[int, int]] = []
        self.by_side = {BASE: SortedList(), PROBE: SortedList()}
        self.met: dict[int, list[float]] = {}
        self.held: list[StreamTuple] | None = None
        self.res = Results()
        self.evicts = p.late_tuples != "revise" and p.purge != "lazy-own"

    def watermark_at(self, k: int) -> int:
        r""":math:`W_k`, W after the first k events, :math:`-\infty` for :math:`k \le 0`.

        Implements :func:`oij.spec.profiles.history_watermark`."""
        return self.history[k] if k > 0 else NO_WATERMARK

    def watermark_before(self, side: str, j: int) -> int:
        """The W that judges a tuple of input ``side`` arriving as event j.

        Implements :func:`oij.spec.profiles.watermark_before`."""
        q, p = self.q, self.p
        if p.side_combine != "own" or q.lateness is None:
            return self.watermark_at(j - 1 - p.lag)
        m = self.side_max[side]
        return NO_WATERMARK if m == NO_WATERMARK else m - q.lateness - p.lateness_shift

    def drop_edge(self, t: StreamTuple) -> int:
        """The edge W is compared with to drop ``t`` (W above it under ``exact``, at or above it otherwise).

        Implements :func:`oij.spec.profiles.is_droppable` and :func:`oij.spec.profiles.state_edge`."""
        if self.p.purge == "flink-timers":
            return t.ts + max(self.hi, 0) if t.side == BASE else t.ts - min(self.lo, 0)
        return t.ts + self.hi if t.side == BASE else t.ts - self.lo

    def emit_final(self, a: StreamTuple) -> None:
        """Base ``a`` is final: its aggregate, or its (a, null) row of a left join if it met nothing.

        Implements :func:`oij.spec.profiles.emit_final_row`."""
        values = self.met.pop(a.id)
        if self.q.aggregate is not None:
            self.res.aggregates.append((a.id, *compute_aggregate(values, self.q.aggregate)))
        elif self.q.join == "left" and not values:
            self.res.pairs.append((a.id, None))

    def probe(self, e: StreamTuple) -> None:
        """``e`` meets the stored tuples of the other input in its window range of its key, whose cond holds.

        Implements :func:`oij.spec.profiles.probe_stored` and :func:`oij.spec.match.is_match`."""
        idx = self.by_key.get(_key(e))
        if idx is None:
            return
        q = self.q
        if e.side == BASE:
            found = idx[PROBE].irange((e.ts + self.lo,), (e.ts + self.hi, math.inf))
        else:
            found = idx[BASE].irange((e.ts - self.hi,), (e.ts - self.lo, math.inf))
        for _, seq in found:
            x = self.stored[seq]
            a, b = (e, x) if e.side == BASE else (x, e)
            if q.cond and not is_cond_true(a, b, q):
                continue
            if q.aggregate is None:
                self.res.pairs.append((a.id, b.id))
            if a.id in self.met:
                self.met[a.id].append(b.value)

    def is_stored(self, e: StreamTuple, late: bool, j: int) -> bool:
        """Whether ``e`` (event j) is stored.

        Implements :func:`oij.spec.profiles.is_stored_under`."""
        if self.p.late_tuples == "ignore":
            edge = e.ts + self.hi if e.side == BASE else e.ts - self.lo
            return self.watermark_at(j - 1 - self.p.lag) < edge
        return self.p.late_tuples == "revise" or not late

    def store(self, e: StreamTuple, j: int) -> None:
        """``e`` joins the indexes under its position ``j``.

        Implements the ``stored`` list of :class:`oij.spec.profiles.ProfileState`."""
        self.stored[j] = e
        idx = self.by_key.get(_key(e))
        if idx is None:
            idx = self.by_key[_key(e)] = {BASE: SortedList(), PROBE: SortedList()}
        idx[e.side].add((e.ts, j))
        if self.evicts:
            heapq.heappush(self.heap, (self.drop_edge(e), j))
        elif self.p.purge == "lazy-own":
            self.by_side[e.side].add((e.ts, j))

    def remove(self, j: int) -> StreamTuple:
        """The stored tuple at position ``j`` leaves the indexes (the heap's entry is left, and skipped).

        Implements the ``stored`` list of :class:`oij.spec.profiles.ProfileState`."""
        e = self.stored.pop(j)
        self.by_key[_key(e)][e.side].remove((e.ts, j))
        if self.p.purge == "lazy-own" and not self.evicts:
            self.by_side[e.side].remove((e.ts, j))
        return e

    def on_tuple(self, e: StreamTuple, j: int) -> None:
        """Event j is tuple ``e``: late or not, probe, store or emit its final row, lazy-own's forgetting.

        Implements :func:`oij.spec.profiles.on_profile_tuple` (with :func:`oij.spec.profiles.is_late_under`)."""
        p = self.p
        w_before = self.watermark_before(e.side, j)
        late = p.late_tuples not in ("ignore", "revise") and (
            e.ts <= w_before if p.late_rule == "le" else e.ts < w_before)
        if late and p.late_tuples == "report":
            self.res.late.append(e.id)
        self.side_max[e.side] = max(self.side_max[e.side], e.ts)
        if late and p.late_tuples != "join":
            return
        if e.side == BASE:
            self.met[e.id] = []
        self.probe(e)
        if self.is_stored(e, late, j):
            self.store(e, j)
        elif e.side == BASE:
            self.emit_final(e)
        if p.purge == "lazy-own" and not late:
            gone = [s for _, s in self.by_side[e.side].irange(maximum=(w_before, math.inf)) if s != j]
            for s in gone:
                x = self.remove(s)
                if x.side == BASE:
                    self.emit_final(x)

    def on_watermark(self, w: Watermark) -> None:
        """A watermark raises its channel's maximum.

        Implements the watermark step of :func:`oij.spec.profiles.compute_profile_result`."""
        self.channel_max[w.channel] = max(self.channel_max[w.channel], w.ts)

    def advance(self) -> None:
        """W after this event, appended to the history.

        Implements :func:`oij.spec.profiles.combine_watermark`."""
        q, p = self.q, self.p
        if q.lateness is None:
            w = max(self.channel_max) if p.channel_combine == "max" else min(self.channel_max)
        else:
            m = min(self.side_max.values()) if p.side_combine == "min" else max(self.side_max.values())
            w = NO_WATERMARK if m == NO_WATERMARK else m - q.lateness - p.lateness_shift
        self.history.append(w)

    def evict(self, j: int) -> None:
        """After event j, every stored tuple the W of the profile's lag drops leaves; a base emits its final row.

        Implements :func:`oij.spec.profiles.evict_after`."""
        if not self.evicts:
            return
        w = self.watermark_at(j - self.p.lag)
        exact = self.p.purge == "exact"
        heap = self.heap
        while heap and (w > heap[0][0] if exact else w >= heap[0][0]):
            _, s = heapq.heappop(heap)
            if s in self.stored:
                x = self.remove(s)
                if x.side == BASE:
                    self.emit_final(x)

    def on_end(self) -> None:
        """End: what is stored is held; with ``end_flush`` every stored base emits its final row.

        Implements :func:`oij.spec.profiles.on_profile_end`."""
        self.held = list(self.stored.values())
        if self.p.end_flush:
            for s in sorted(self.stored):
                if self.stored[s].side == BASE:
                    self.emit_final(self.stored[s])
        self.stored.clear()
        self.by_key.clear()
        self.heap.clear()
        self.by_side = {BASE: SortedList(), PROBE: SortedList()}

    def step(self, e: Event, j: int) -> bool:
        """Event j, whole: End (True: the stream is over), or a watermark or a tuple, then W after it and the
        evictions it allows.

        Implements the loop of :func:`oij.spec.profiles.compute_profile_result`."""
        if isinstance(e, End):
            self.on_end()
            return True
        if isinstance(e, Watermark):
            self.on_watermark(e)
        else:
            self.on_tuple(e, j)
        self.advance()
        self.evict(j)
        return False

    def result(self) -> Results:
        """The rows emitted (canonical order); with ``retract_on_purge`` the batch join of the tuples held.

        Implements the last step of :func:`oij.spec.profiles.compute_profile_result`."""
        if self.p.retract_on_purge:
            return batch_result(list(self.stored.values()) if self.held is None else self.held, self.q)
        return self.res.canonical()

    def _check(self) -> None:
        """The invariants: every stored tuple is in its key's index once (and in its input's under lazy-own),
        and nothing else is; under eviction the heap holds an entry for each; every stored base awaits its
        final row; the history has one W per event and one before them."""
        n = 0
        for k, idx in self.by_key.items():
            for side in (BASE, PROBE):
                for ts, s in idx[side]:
                    t = self.stored[s]
                    assert (t.side, t.ts, _key(t)) == (side, ts, k)
                    n += 1
        assert n == len(self.stored)
        if self.evicts:
            assert set(self.stored) <= {s for _, s in self.heap}
        if self.p.purge == "lazy-own" and not self.evicts:
            assert sorted(s for side in (BASE, PROBE) for _, s in self.by_side[side]) == sorted(self.stored)
        assert all(t.id in self.met for t in self.stored.values() if t.side == BASE)


def batch_result(tuples: Iterable[StreamTuple], q: Query) -> Results:
    """The batch join of a set of tuples (both sides), pairs or aggregates, in canonical order.

    Implements :func:`oij.spec.batch.compute_batch`."""
    lo, hi = lower_offset(q), upper_offset(q)
    bases: list[StreamTuple] = []
    probes: dict[_KeyId, SortedList] = {}
    for t in tuples:
        if t.side == BASE:
            bases.append(t)
        else:
            probes.setdefault(_key(t), SortedList(key=lambda b: b.ts)).add(t)
    out = Results()
    for a in bases:
        found = probes.get(_key(a))
        window = [] if found is None else [
            b for b in found.irange_key(a.ts + lo, a.ts + hi) if not q.cond or is_cond_true(a, b, q)]
        if q.aggregate is not None:
            out.aggregates.append((a.id, *compute_aggregate([b.value for b in window], q.aggregate)))
        else:
            out.pairs.extend((a.id, b.id) for b in window)
            if not window and q.join == "left":
                out.pairs.append((a.id, None))
    return out.canonical()


def compute_profile_result(events: Sequence[Event], q: Query, p: Profile = CANONICAL) -> Results:
    """The result of a complete stream under profile ``p`` (canonical order), equal to the specification's.

    Implements :func:`oij.spec.profiles.compute_profile_result`.

    Requires: ``events`` valid for ``q`` (ids unique), ending with End or not."""
    o = ProfileOracle(q, p)
    for j, e in enumerate(events, 1):
        if o.step(e, j):
            break
    return o.result()


__all__ = ["ProfileOracle", "batch_result", "compute_profile_result"]
