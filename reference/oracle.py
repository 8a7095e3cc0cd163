"""The sequential streaming OIJ operator: the oracle every engine is checked against.

It implements :mod:`oij.spec.stream` event by event:

* per key, the stored base and probe tuples in timestamp order (parallel
  Python lists kept sorted with :mod:`bisect`; a window is two bisections and
  a slice, so a join visits only in-window entries);
* eager symmetric emission: a pair is emitted when its second tuple arrives;
* purging by the rules of :mod:`oij.spec.purge`, driven by a heap of per-key
  *wake times* (the smallest watermark at which something of that key can be
  purged or becomes final), so an idle key's state is dropped as soon as the
  watermark passes it, without waiting for another tuple of that key;
* aggregates emitted on finality.  A key's pending bases become final in
  timestamp order, so their windows slide forward and a per-key cursor keeps
  a running aggregate: add the probes that enter, subtract those that leave
  (subtract-on-evict), exactly (:mod:`oij.reference.exact`); min/max use a
  monotonic deque over the same sliding window;
* a joining condition (``q.cond``) filters the window's candidates: each
  stored tuple keeps its cond operands (:func:`oij.reference.cond.operands`) in
  one more parallel list per comparison, and a window slice is filtered with
  the comparison's operator mapped over that list (``map`` and
  ``itertools.compress``, at C speed).  With a cond, a base's aggregate is
  computed over its filtered window when it becomes final (the cursor would
  have to forget probes a base rejects), and purging is unchanged: cond only
  removes pairs, so nothing that may be dropped without it is needed with it.

Why sorted lists and not ``sortedcontainers.SortedList``: a key's state is
bounded by window + lateness and new tuples land near the end, so
``list.insert`` moves few entries, and a single list keeps the ids and values
in parallel arrays the window slice can take at C speed.  On the default
workload this measured about 2.6x faster than ``SortedList`` of (ts, id)
tuples (see docs/reference.rst).

Complexities below: n = stored tuples of the key, k = tuples in the window,
K = keys with state, p = pairs emitted.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable
from functools import reduce
from itertools import compress, repeat
from typing import Any

from oij.reference.exact import scaled, to_float
from oij.spec.batch import AggregateRow, Pair, Results
from oij.spec.match import COMPARE, lower_offset, upper_offset
from oij.spec.model import BASE, NO_WATERMARK, End, Event, Key, Query, StreamTuple, Watermark, check_query

INF = 1 << 70  # above every timestamp + bound


class _KeyState:
    """The state of one key.  Lists ``b*`` are the stored bases, ``p*`` the stored probes."""

    __slots__ = (
        "b0",
        "bcv",
        "bid",
        "bts",
        "cur_dq",
        "cur_hi",
        "cur_lo",
        "cur_n",
        "cur_sum",
        "key",
        "pcv",
        "pex",
        "pid",
        "pts",
        "pval",
        "slot",
        "wake",
    )

    def __init__(self, key: Key, slot: int, conds: int = 0) -> None:
        self.key = key
        self.slot = slot  # unique: breaks ties in the wake heap
        self.bts: list[int] = []
        self.bid: list[int] = []
        self.b0 = 0  # bases before b0 are final (only when purging is disabled)
        self.pts: list[int] = []
        self.pid: list[int] = []
        self.pval: list[float] = []  # aggregate mode only
        self.pex: list[Any] = []  # exact scaled values (sum/avg only)
        self.bcv: list[list[Any]] = [[] for _ in range(conds)]  # per comparison, the bases' cond operands
        self.pcv: list[list[Any]] = [[] for _ in range(conds)]  # per comparison, the probes' cond operands
        self.wake: int | None = None
        # The aggregate cursor: a running aggregate over the stored probes with
        # cur_lo <= ts <= cur_hi (empty when cur_lo > cur_hi).
        self.cur_lo = INF
        self.cur_hi = -INF
        self.cur_n = 0
        self.cur_sum: Any = 0
        self.cur_dq: deque[tuple[int, float]] = deque()


class Oracle:
    """The streaming operator.  Feed it events; read ``pairs``, ``aggregates`` and ``late``.

    ``purge=False`` keeps every stored tuple forever (results must not change:
    a test checks it).  ``instrument=True`` counts entries visited per join
    and samples the retained state after every watermark.
    """

    def __init__(self, q: Query, *, purge: bool = True, instrument: bool = False) -> None:
        self.q = check_query(q)
        self.purge = purge
        self.instrument = instrument
        self.lo_off = lower_offset(q)
        self.hi_off = upper_offset(q)
        self.empty = self.lo_off > self.hi_off
        self.agg = q.aggregate
        self.left = q.join == "left" and q.aggregate is None
        self.lateness = q.lateness
        self.channel_max = [NO_WATERMARK] * q.channels
        self.w = NO_WATERMARK
        self.max_ts = NO_WATERMARK
        self.keys: dict[Key, _KeyState] = {}
        self.heap: list[tuple[int, int, _KeyState]] = []
        self._seq = itertools.count()
        self.matched: set[int] = set()
        self.pairs: list[Pair] = []
        self.aggregates: list[AggregateRow] = []
        self.late: list[int] = []
        self.stored = 0
        self.ended = False
        # instrumentation
        self.visited = 0
        self.in_window = 0
        self.joins = 0
        self.state_samples: list[tuple[int, int]] = []  # (W, stored tuples) after each watermark move
        self._on_base = self._base_pairs if self.agg is None else self._base_aggregate
        self._store_bases = self.left or not self.empty
        self.cond = q.cond
        self._ops = [COMPARE[c.op] for c in q.cond]
        self._fast = (self.agg is None and not self.left and purge and not instrument and not self.empty
                      and not self.cond)

    # ------------------------------------------------------------------ events

    def on_event(self, e: Event) -> None:
        """Dispatch one event to :meth:`on_tuple`, :meth:`on_watermark` or :meth:`on_end`.

        Implements :func:`oij.spec.stream.compute_emitted`, one event at a time: after each event the output
        is what that function gives for the prefix read so far.
        """
        if isinstance(e, StreamTuple):
            self.on_tuple(e)
        elif isinstance(e, Watermark):
            self.on_watermark(e)
        else:
            self.on_end()

    def on_tuple(self, t: StreamTuple) -> None:
        """Process a tuple.

        Requires: not ended; ``t`` valid for the query.
        Changes: stores ``t`` if :func:`oij.spec.purge` says it is needed; in
        lateness mode advances W (and purges).
        Emits: ``late`` if ``t.ts < W``; else every pair ``t`` completes; an
        aggregate or (a, null) row if ``t`` is a base that is final on arrival.
        Cost: O(log n + n_moved + p), plus purging in lateness mode.

        Implements :func:`oij.spec.watermark.is_late` (the late mark), :func:`oij.spec.match.is_match` (the
        pairs it completes), :func:`oij.spec.watermark.lateness_watermark` (W in lateness mode) and
        :func:`oij.spec.purge.is_base_needed` / :func:`oij.spec.purge.is_probe_needed` (whether it is
        stored).
        """
        ts = t.ts
        w = self.w
        if ts < w:
            self.late.append(t.id)
            return
        if not self._fast:
            if t.side == BASE:
                self._on_base(t)
            else:
                self._probe(t)
        else:
            # The inner pairs mode with purging, inlined: the same steps as
            # _base_pairs/_probe/_store_base, without the calls.
            ks = self.keys.get(t.key)
            if t.side == BASE:
                hi = ts + self.hi_off
                if ks is not None:
                    pts = ks.pts
                    if pts:
                        i = bisect_left(pts, ts + self.lo_off)
                        j = bisect_right(pts, hi, i)
                        if j > i:
                            self.pairs.extend(zip(repeat(t.id, j - i), ks.pid[i:j], strict=False))
                if hi >= w:
                    if ks is None:
                        ks = self._key_state(t.key)
                    bts = ks.bts
                    if not bts or ts >= bts[-1]:
                        bts.append(ts)
                        ks.bid.append(t.id)
                    else:
                        i = bisect_right(bts, ts)
                        bts.insert(i, ts)
                        ks.bid.insert(i, t.id)
                    self.stored += 1
                    wake = hi + 1
                    if ks.wake is None or wake < ks.wake:
                        ks.wake = wake
                        heapq.heappush(self.heap, (wake, ks.slot, ks))
            else:
                lo_off = self.lo_off
                if ks is not None:
                    bts = ks.bts
                    if bts:
                        i = bisect_left(bts, ts - self.hi_off)
                        j = bisect_right(bts, ts - lo_off, i)
                        if j > i:
                            self.pairs.extend(zip(ks.bid[i:j], repeat(t.id, j - i), strict=False))
                if ts - lo_off >= w:
                    if ks is None:
                        ks = self._key_state(t.key)
                    pts = ks.pts
                    if not pts or ts >= pts[-1]:
                        pts.append(ts)
                        ks.pid.append(t.id)
                    else:
                        i = bisect_right(pts, ts)
                        pts.insert(i, ts)
                        ks.pid.insert(i, t.id)
                    self.stored += 1
                    wake = ts - lo_off + 1
                    if ks.wake is None or wake < ks.wake:
                        ks.wake = wake
                        heapq.heappush(self.heap, (wake, ks.slot, ks))
        if self.lateness is not None and ts > self.max_ts:
            self.max_ts = ts
            w = ts - self.lateness
            heap = self.heap
            # Most new maxima wake no key: skip the call unless one is due (or we sample state).
            if w > self.w and ((heap and heap[0][0] <= w) or self.instrument):
                self._advance(w)
            elif w > self.w:
                self.w = w

    def on_watermark(self, wm: Watermark) -> None:
        """Process a watermark.

        Requires: not ended; watermark mode; ``0 <= wm.channel < channels``.
        Changes: raises the channel's maximum; if W = min over channels rises,
        purges every key whose wake time W has reached.
        Emits: the aggregate / (a, null) rows of bases that became final.
        Cost: O(1) if W does not move, else O(N + (woken keys) * log K + purged).

        Implements :func:`oij.spec.watermark.on_watermark` and
        :func:`oij.spec.watermark.effective_watermark`; the rows it emits are those
        :func:`oij.spec.stream.is_final` makes final.
        """
        c = wm.channel
        cm = self.channel_max
        if wm.ts > cm[c]:
            old = cm[c]
            cm[c] = wm.ts
            if old == self.w:
                self._advance(min(cm))

    def on_end(self) -> None:
        """End of stream.  Emits every pending row (all bases are final); drops all state.  O(total state).

        Implements :func:`oij.spec.stream.compute_emitted` for a prefix that ends with End (every base
        final) and :func:`oij.spec.purge.compute_needed` there (nothing needed).
        """
        self.ended = True
        self.w = INF
        for ks in list(self.keys.values()):
            self._finalize(ks, len(ks.bts))
        self.keys.clear()
        self.heap.clear()
        self.matched.clear()
        self.stored = 0

    # ------------------------------------------------------------------ joining

    def _key_state(self, key: Key) -> _KeyState:
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = _KeyState(key, next(self._seq), len(self.cond))
        return ks

    def _passing(self, cols: list[list[Any]], cv: list[Any], i: int, j: int, stored_bases: bool) -> Any:
        """Lazily, for the stored entries i..j-1 (operand lists ``cols``), whether cond holds with the arriving
        tuple (operands ``cv``): ``a op b`` with a stored base, or with the arriving one.  O(j - i) at C speed."""
        masks = [map(op, col[i:j], repeat(v)) if stored_bases else map(op, repeat(v), col[i:j])
                 for op, v, col in zip(self._ops, cv, cols, strict=True)]
        return reduce(lambda x, y: map(operator.and_, x, y), masks)

    def _base_pairs(self, t: StreamTuple) -> None:
        """Emit the pairs an arriving on-time base completes with the stored probes, and store it when
        needed.

        Implements :func:`oij.spec.match.is_match` for an arriving base against the stored probes
        (:func:`oij.spec.match.window_lo`, :func:`oij.spec.match.window_hi`,
        :func:`oij.spec.match.is_cond_true`).
        """
        lo = t.ts + self.lo_off
        hi = t.ts + self.hi_off
        ks = self.keys.get(t.key)
        found = 0
        cv = _operands(t, self.q) if self.cond else None
        if ks is not None and ks.pts:
            pts = ks.pts
            i = bisect_left(pts, lo)
            j = bisect_right(pts, hi, i)
            found = j - i
            if self.instrument:
                self.joins += 1
                self.visited += found
                self.in_window += found
            if found > 0:
                if cv is None:
                    self.pairs.extend(zip(repeat(t.id, found), ks.pid[i:j], strict=False))
                else:
                    ids = list(compress(ks.pid[i:j], self._passing(ks.pcv, cv, i, j, False)))
                    found = len(ids)
                    self.pairs.extend(zip(repeat(t.id, found), ids, strict=False))
        if hi < self.w:  # final on arrival: no future probe can match
            if self.left and not found:
                self.pairs.append((t.id, None))
            return
        if not self._store_bases:
            return
        if self.left and found:
            self.matched.add(t.id)
        self._store_base(ks if ks is not None else self._key_state(t.key), t, cv)

    def _store_base(self, ks: _KeyState, t: StreamTuple, cv: list[Any] | None = None) -> None:
        """Insert a base into the key's sorted lists (with its cond operands ``cv``).  O(n).

        Implements the storage that :func:`oij.spec.purge.is_base_needed` asks for.
        """
        i = bisect_right(ks.bts, t.ts)
        ks.bts.insert(i, t.ts)
        ks.bid.insert(i, t.id)
        if cv is not None:
            for col, x in zip(ks.bcv, cv, strict=True):
                col.insert(i, x)
        self.stored += 1
        wake = t.ts + self.hi_off + 1
        if ks.wake is None or wake < ks.wake:
            self._schedule(ks, wake)

    def _probe(self, t: StreamTuple) -> None:
        """Emit the pairs an arriving on-time probe completes with the stored bases (pairs mode), and store
        it when needed.

        Implements :func:`oij.spec.match.is_match` for an arriving probe against the stored bases, and
        :func:`oij.spec.purge.is_probe_needed` for whether it is stored.
        """
        ks = self.keys.get(t.key)
        cv = _operands(t, self.q) if self.cond else None
        if self.agg is None and ks is not None and len(ks.bts) > ks.b0:
            bts = ks.bts
            i = bisect_left(bts, t.ts - self.hi_off, ks.b0)
            j = bisect_right(bts, t.ts - self.lo_off, i)
            if j > i:
                ids = ks.bid[i:j]
                if cv is not None:
                    ids = list(compress(ids, self._passing(ks.bcv, cv, i, j, True)))
                self.pairs.extend(zip(ids, repeat(t.id, len(ids)), strict=False))
                if self.left:
                    self.matched.update(ids)
            if self.instrument:
                self.joins += 1
                self.visited += j - i
                self.in_window += j - i
        if self.empty:
            return
        future = t.ts - self.lo_off >= self.w
        if not future and self.purge and not self._covered(ks, t.ts):
            return
        if ks is None:
            ks = self._key_state(t.key)
        pts = ks.pts
        i = bisect_right(pts, t.ts)
        pts.insert(i, t.ts)
        ks.pid.insert(i, t.id)
        if self.agg is not None:
            ks.pval.insert(i, t.value)
            if self.agg == "sum" or self.agg == "avg":
                ks.pex.insert(i, self._scaled(t.value))
        if cv is not None:
            for col, y in zip(ks.pcv, cv, strict=True):
                col.insert(i, y)
        self.stored += 1
        if self.purge:
            wake = t.ts - self.lo_off + 1
            if ks.wake is None or wake < ks.wake:
                self._schedule(ks, wake)

    def _covered(self, ks: _KeyState | None, ts: int) -> bool:
        """True iff a pending base of the key (aggregate mode) has ``ts`` in its window.

        Implements the pending-window clause of :func:`oij.spec.purge.is_probe_needed`
        (:func:`oij.spec.match.is_window_match` with a non-final base).
        """
        if self.agg is None or ks is None or len(ks.bts) == ks.b0:
            return False
        i = bisect_left(ks.bts, ts - self.hi_off, ks.b0)
        return i < len(ks.bts) and ks.bts[i] <= ts - self.lo_off

    # ---------------------------------------------------------------- aggregates

    def _base_aggregate(self, t: StreamTuple) -> None:
        """An arriving on-time base in aggregate mode: its row at once when it is final on arrival, else
        stored pending.

        Implements :func:`oij.spec.stream.is_final` on arrival and :func:`oij.spec.batch.compute_window` for
        a base that is final at once.
        """
        hi = t.ts + self.hi_off
        cv = _operands(t, self.q) if self.cond else None
        if hi < self.w:  # final on arrival: every probe it can see is stored
            ks = self.keys.get(t.key)
            self.aggregates.append(self._direct_row(ks, t.id, t.ts + self.lo_off, hi, cv))
            return
        self._store_base(self._key_state(t.key), t, cv)

    def _direct_row(self, ks: _KeyState | None, aid: int, lo: int, hi: int,
                    cv: list[Any] | None = None) -> AggregateRow:
        """The aggregate over stored probes in [lo, hi] passing cond (operands ``cv``), from scratch.  O(log n + k).

        Implements :func:`oij.spec.batch.compute_window` and :func:`oij.spec.aggregate.compute_aggregate`
        from scratch.
        """
        if ks is None or lo > hi:
            return self._row(aid, 0, 0, None)
        i = bisect_left(ks.pts, lo)
        j = bisect_right(ks.pts, hi, i)
        if self.instrument:
            self.joins += 1
            self.visited += j - i
            self.in_window += j - i
        vals = ks.pval[i:j]
        exact = ks.pex[i:j]
        if cv is not None and j > i:
            keep = list(self._passing(ks.pcv, cv, i, j, False))
            vals = list(compress(vals, keep))
            exact = list(compress(exact, keep))
        n = len(vals)
        if self.agg == "min":
            return self._row(aid, n, 0, min(vals) if n else None)
        if self.agg == "max":
            return self._row(aid, n, 0, max(vals) if n else None)
        return self._row(aid, n, sum(exact) if exact else 0, None)

    def _row(self, aid: int, n: int, total: Any, extreme: float | None) -> AggregateRow:
        """The aggregate row of base ``aid`` from ``n`` probes, their exact ``total`` and their ``extreme``
        (min/max).

        Implements the row of :func:`oij.spec.aggregate.compute_aggregate` (with
        :func:`oij.spec.aggregate.round_to_float`) from a count and an exact total.
        """
        agg = self.agg
        if agg == "count":
            return (aid, n, n)
        if agg == "sum":
            return (aid, n, self._to_float(total, 1))
        if n == 0:
            return (aid, 0, None)
        if agg == "avg":
            return (aid, n, self._to_float(total, n))
        assert extreme is not None
        return (aid, n, extreme + 0.0)

    # Exact arithmetic hooks (a test's negative control swaps them for plain floats).
    @staticmethod
    def _scaled(v: float) -> Any:
        return scaled(v)

    @staticmethod
    def _to_float(total: Any, count: int = 1) -> float:
        return to_float(total, count)

    def _move_cursor(self, ks: _KeyState, lo: int, hi: int) -> None:
        """Slide the cursor to [lo, hi] (lo and hi never decrease).  O(log n + entering + leaving).

        Implements :func:`oij.spec.batch.compute_window` incrementally, for bases final in ts order.
        """
        pts = ks.pts
        is_sum = self.agg == "sum" or self.agg == "avg"
        dq = ks.cur_dq
        if lo > ks.cur_hi or ks.cur_lo > ks.cur_hi:  # disjoint: start over
            ks.cur_n = 0
            ks.cur_sum = 0
            dq.clear()
            i = bisect_left(pts, lo)
        else:  # subtract-on-evict: the probes in [cur_lo, lo)
            i = bisect_left(pts, ks.cur_lo)
            j = bisect_left(pts, lo, i)
            ks.cur_n -= j - i
            if is_sum:
                ks.cur_sum -= sum(ks.pex[i:j])
            while dq and dq[0][0] < lo:
                dq.popleft()
            i = bisect_right(pts, ks.cur_hi)
        j = bisect_right(pts, hi, i)
        if self.instrument:
            self.joins += 1
            self.visited += j - i
            self.in_window += j - i
        ks.cur_n += j - i
        if is_sum:
            ks.cur_sum += sum(ks.pex[i:j])
        elif self.agg == "min" or self.agg == "max":
            sign = 1.0 if self.agg == "min" else -1.0
            for x in range(i, j):
                v = ks.pval[x]
                while dq and dq[-1][1] * sign >= v * sign:
                    dq.pop()
                dq.append((pts[x], v))
        ks.cur_lo = lo
        ks.cur_hi = hi

    def _cursor_evict_below(self, ks: _KeyState, x: int) -> None:
        """Subtract from the cursor the probes with ts < x that are about to be deleted.

        Implements :func:`oij.spec.batch.compute_window` incrementally (the probes that leave the window).
        """
        if ks.cur_lo >= x or ks.cur_lo > ks.cur_hi:
            return
        pts = ks.pts
        i = bisect_left(pts, ks.cur_lo)
        j = bisect_left(pts, min(x, ks.cur_hi + 1), i)
        ks.cur_n -= j - i
        if self.agg == "sum" or self.agg == "avg":
            ks.cur_sum -= sum(ks.pex[i:j])
        dq = ks.cur_dq
        while dq and dq[0][0] < x:
            dq.popleft()
        ks.cur_lo = x

    # ------------------------------------------------------------------ finality

    def _finalize(self, ks: _KeyState, k: int) -> None:
        """Emit the rows of the pending bases ks.b0 .. k-1 (in ts order) and drop or retire them.

        Implements :func:`oij.spec.stream.is_final` (the rows emitted once, on finality) and
        :func:`oij.spec.batch.compute_aggregates` (their values).
        """
        b0 = ks.b0
        if k <= b0:
            return
        if self.agg is not None:
            lo_off, hi_off = self.lo_off, self.hi_off
            for x in range(b0, k):
                ts = ks.bts[x]
                if lo_off > hi_off:
                    self.aggregates.append(self._row(ks.bid[x], 0, 0, None))
                    continue
                if self.cond:
                    cv = [col[x] for col in ks.bcv]
                    self.aggregates.append(self._direct_row(ks, ks.bid[x], ts + lo_off, ts + hi_off, cv))
                    continue
                self._move_cursor(ks, ts + lo_off, ts + hi_off)
                ext = ks.cur_dq[0][1] if ks.cur_dq else None
                self.aggregates.append(self._row(ks.bid[x], ks.cur_n, ks.cur_sum, ext))
        elif self.left:
            matched = self.matched
            for aid in ks.bid[b0:k]:
                if aid in matched:
                    matched.discard(aid)
                else:
                    self.pairs.append((aid, None))
        if self.purge:
            del ks.bts[:k]
            del ks.bid[:k]
            for col in ks.bcv:
                del col[:k]
            self.stored -= k
            ks.b0 = 0
        else:
            ks.b0 = k

    def _advance(self, w: int) -> None:
        """Raise W to ``w`` and process every key whose wake time has come.  O(woken * log K).

        Implements :func:`oij.spec.watermark.watermark_after` (W only rises) and
        :func:`oij.spec.stream.is_final` for the keys it wakes.
        """
        if w <= self.w:
            return
        self.w = w
        heap = self.heap
        if self.agg is None and self.purge and not self.left and not self.cond:
            self._advance_pairs(w)
        else:
            while heap and heap[0][0] <= w:
                t, _, ks = heapq.heappop(heap)
                if ks.wake != t:
                    continue  # stale entry
                ks.wake = None
                self._process(ks)
        if self.instrument:
            self.state_samples.append((self.w, self.stored))

    def _advance_pairs(self, w: int) -> None:
        """The heap loop of :meth:`_advance` with :meth:`_process` inlined, for the inner pairs mode.

        The same rules, fewer Python calls: in lateness mode W moves on almost
        every tuple, and every stored tuple costs one wake-up when it expires.

        Implements :func:`oij.spec.purge.is_base_needed` and :func:`oij.spec.purge.is_probe_needed` for the
        inner pairs mode.
        """
        heap, keys = self.heap, self.keys
        heappop, heappush = heapq.heappop, heapq.heappush
        lo_off, hi_off = self.lo_off, self.hi_off
        f = w + lo_off
        while heap and heap[0][0] <= w:
            t, slot, ks = heappop(heap)
            if ks.wake != t:
                continue  # stale entry
            bts, pts = ks.bts, ks.pts
            if bts and bts[0] + hi_off < w:
                k = bisect_left(bts, w - hi_off)
                del bts[:k]
                del ks.bid[:k]
                self.stored -= k
            if pts and pts[0] < f:
                k = bisect_left(pts, f)
                del pts[:k]
                del ks.pid[:k]
                self.stored -= k
            if bts:
                wake = bts[0] + hi_off + 1
                if pts and pts[0] - lo_off + 1 < wake:
                    wake = pts[0] - lo_off + 1
            elif pts:
                wake = pts[0] - lo_off + 1
            else:
                ks.wake = None
                if keys.get(ks.key) is ks:
                    del keys[ks.key]
                continue
            ks.wake = wake
            heappush(heap, (wake, slot, ks))

    def _process(self, ks: _KeyState) -> None:
        """Finalize the key's bases with hi < W and purge what is no longer needed; reschedule.

        Implements :func:`oij.spec.stream.is_final`, :func:`oij.spec.purge.is_base_needed` and
        :func:`oij.spec.purge.is_probe_needed` for one key.
        """
        w = self.w
        lo_off, hi_off = self.lo_off, self.hi_off
        self._finalize(ks, bisect_left(ks.bts, w - hi_off, ks.b0))
        if self.purge and ks.pts:
            f = w + lo_off  # probes at or above f may still match a future base
            p = f
            pending = len(ks.bts) > ks.b0
            if self.agg is not None and pending:
                p = min(p, ks.bts[ks.b0] + lo_off)
            k = bisect_left(ks.pts, p)
            if self.agg is not None:
                self._cursor_evict_below(ks, p)
            if k:
                self._drop_probes(ks, 0, k)
            if self.agg is not None and pending and lo_off > 0:
                self._drop_gap_probes(ks, f)
        if not ks.bts and not ks.pts:
            if self.keys.get(ks.key) is ks:
                del self.keys[ks.key]
            return
        wake = INF
        if len(ks.bts) > ks.b0:
            wake = ks.bts[ks.b0] + hi_off + 1
        if self.purge and ks.pts:
            i = bisect_left(ks.pts, w + lo_off)
            if i < len(ks.pts):
                wake = min(wake, ks.pts[i] - lo_off + 1)
        if wake < INF:
            self._schedule(ks, wake)

    def _drop_probes(self, ks: _KeyState, i: int, j: int) -> None:
        """Delete the key's stored probes ``i .. j-1`` from every parallel list.

        Implements :func:`oij.spec.purge.is_probe_needed`: the probes it drops are no longer needed.
        """
        del ks.pts[i:j]
        del ks.pid[i:j]
        if ks.pval:
            del ks.pval[i:j]
        if ks.pex:
            del ks.pex[i:j]
        for col in ks.pcv:
            del col[i:j]
        self.stored -= j - i

    def _drop_gap_probes(self, ks: _KeyState, f: int) -> None:
        """Window wholly in the future (lower' > 0): drop probes below f covered by no pending window.

        Implements :func:`oij.spec.purge.is_probe_needed` when the window lies wholly in the future.
        """
        end = bisect_left(ks.pts, f)
        for i in range(end - 1, -1, -1):
            if not self._covered(ks, ks.pts[i]):
                self._drop_probes(ks, i, i + 1)

    def _schedule(self, ks: _KeyState, wake: int) -> None:
        """Make sure the key is processed once W >= wake.  O(log K) when it moves the wake earlier.

        Implements the wake times of :func:`oij.spec.stream.is_final` and
        :func:`oij.spec.purge.is_base_needed`: the smallest W at which either can change for the key.
        """
        if wake <= self.w:
            return
        if ks.wake is None or wake < ks.wake:
            ks.wake = wake
            heapq.heappush(self.heap, (wake, ks.slot, ks))

    # ---------------------------------------------------------------- inspection

    def results(self) -> Results:
        """The output emitted so far, in canonical order.

        Implements :meth:`oij.spec.batch.Results.canonical` on the output so far.
        """
        return Results(list(self.pairs), list(self.aggregates), list(self.late)).canonical()

    def retained(self) -> set[tuple[str, int]]:
        """(side, id) of every stored tuple that is still live (not final).  O(state).

        Implements :func:`oij.spec.purge.compute_needed` (checked against it by the tests).
        """
        out: set[tuple[str, int]] = set()
        for ks in self.keys.values():
            out.update(("base", i) for i in ks.bid[ks.b0 :])
            out.update(("probe", i) for i in ks.pid)
        return out

    def effectiveness(self) -> float:
        """Scale-OIJ Eq. (1) over the joins done so far: in-window entries / entries visited (1.0 if none)."""
        return self.in_window / self.visited if self.visited else 1.0

    def _check(self) -> None:
        """Assert the structural invariants.  Tests call it after every event.  O(state)."""
        from oij.spec.aggregate import compute_aggregate

        if not self.ended:
            expect = min(self.channel_max) if self.lateness is None else (
                NO_WATERMARK if self.max_ts == NO_WATERMARK else self.max_ts - self.lateness
            )
            assert self.w == expect, (self.w, expect)
        total = 0
        for key, ks in self.keys.items():
            assert ks.key == key
            assert ks.bts == sorted(ks.bts) and ks.pts == sorted(ks.pts)
            assert len(ks.bts) == len(ks.bid) and len(ks.pts) == len(ks.pid)
            assert len(ks.pval) == (len(ks.pts) if self.agg is not None else 0)
            assert not ks.pex or len(ks.pex) == len(ks.pts)
            assert len(ks.bcv) == len(ks.pcv) == len(self.cond)
            assert all(len(col) == len(ks.bts) for col in ks.bcv) and all(len(col) == len(ks.pts) for col in ks.pcv)
            assert ks.bts or ks.pts, "an empty key state must be dropped"
            total += len(ks.bts) + len(ks.pts)
            for ts in ks.bts[ks.b0 :]:
                assert ts + self.hi_off >= self.w, "a final base is still pending"
                assert ks.wake is not None and ks.wake <= ts + self.hi_off + 1, "base not scheduled"
            if self.agg is not None and ks.cur_lo <= ks.cur_hi:
                vals = [v for ts, v in zip(ks.pts, ks.pval, strict=False) if ks.cur_lo <= ts <= ks.cur_hi]
                assert ks.cur_n == len(vals)
                if self.agg in ("sum", "avg"):
                    assert ks.cur_sum == sum(self._scaled(v) for v in vals)
                if self.agg in ("min", "max") and vals:
                    assert ks.cur_dq and ks.cur_dq[0][1] + 0.0 == compute_aggregate(vals, self.agg)[1]
        assert total == self.stored, (total, self.stored)


def _operands(t: StreamTuple, q: Query) -> Any:
    """:func:`oij.reference.cond.operands`, imported on the first cond query only (it loads numpy, which a plain
    join does not need)."""
    from oij.reference.cond import operands

    return operands(t, q)


def run_events(events: Iterable[Event], q: Query, *, purge: bool = True) -> Results:
    """Run the oracle over a whole event sequence; the result in canonical order.

    Implements :func:`oij.spec.stream.compute_stream_result`.
    """
    o = Oracle(q, purge=purge)
    for e in events:
        o.on_event(e)
        if isinstance(e, End):
            break
    return o.results()
