r"""The block path of the reference oracle: whole blocks of events decided at once, in numpy.

:class:`oij.reference.oracle.Oracle` takes the arrival sequence one event at a
time, about 2 µs of interpreter work per tuple.  :class:`BlockOracle` takes it
in blocks of ``block`` consecutive events (default :data:`BLOCK`; any size
from 1 gives the same output) and decides each block with a handful of numpy
calls.  Its output, as a multiset, is the event-by-event oracle's; in the
canonical order (:meth:`oij.spec.batch.Results.canonical`, which ``oij join``
writes by default) the bytes are the same.  It keeps the arrival order's
meaning -- lateness, watermarks, finality, purging -- and streams: its state
is what :mod:`oij.spec.purge` needs at the last block end plus one block, bounded
by the live window, not by the input.

Notation as in :mod:`oij.spec`: a block is the events :math:`e_s \dots e_{t-1}`;
:math:`W_i` is the watermark in force at the arrival of :math:`e_i`, before
it is applied (:func:`oij.spec.watermark.arrival_watermarks`); :math:`W_t` is the
watermark after the block; :math:`\ell', u'` are the inclusive offsets
(:func:`oij.spec.match.lower_offset`, :func:`oij.spec.match.upper_offset`), so
:math:`lo(a) = a.ts + \ell'`, :math:`hi(a) = a.ts + u'`.

**Why each step equals the event-by-event definition.**

**1. W at every arrival is a prefix maximum.**  Watermark mode: the maximum
of channel c at event i is

.. math:: m_c(i) = \max\big(m_c(s),\ \max\{e_j.ts \mid s \le j < i,\ e_j
          \text{ a watermark of channel } c\}\big)

(:func:`oij.spec.watermark.on_watermark`; a regression changes no maximum), so
``maximum.accumulate`` along the block's watermark events, with the carry
:math:`m_c(s)` as the first element, gives :math:`m_c` after each watermark;
:math:`W = \min_c m_c` after it; and :math:`W_i` is W after the last
watermark event before i (or :math:`W_s`): only a watermark changes W.  With
many channels (:math:`N \cdot k` above :data:`WM_MATRIX_CELLS` for k
watermarks) the same values come from the oracle's own one-watermark loop.
Lateness mode: :math:`W_i = \max(M_s, \max_{s \le j < i} e_j.ts) - l`, with
:math:`M_s` the maximum carried from the earlier blocks (:math:`-\infty`
while no tuple was seen).  The specification counts only non-late tuples in
the maximum; counting every tuple changes nothing, because a late x has
:math:`x.ts < W = M - l \le M` and cannot raise it.

**2. Late marks are one comparison.**  :math:`late_i \iff e_i \text{ is a
tuple} \land e_i.ts < W_i` (:func:`oij.spec.watermark.is_late`).

**3. Every pair is found exactly once, in the block of its second tuple.**
For on-time a, b with b matching a, let the later of the two arrive in block
K.  If both arrive in K, the join of K's on-time bases with K's on-time
probes finds the pair; if a arrived earlier, the join of the *stored* bases
with K's probes; if b arrived earlier, K's bases with the stored probes.
These three joins are disjoint, so nothing is found twice.  Nothing is
missed, because the earlier tuple is still stored: state is purged only at
block ends, by the rules of :mod:`oij.spec.purge` under :math:`W_t`, and those
rules keep every tuple a later on-time tuple can match (a later on-time probe
b has :math:`b.ts \ge W_i \ge W_t`, so it can match a only if
:math:`hi(a) \ge W_t`; a later on-time base a has :math:`a.ts \ge W_t`, so it
can match b only if :math:`b.ts - \ell' \ge W_t`).  Nothing is spurious: the
join tests key equality and :math:`lo(a) \le b.ts \le hi(a)` exactly, in
integers.  So the pairs are :func:`oij.spec.batch.compute_pairs` over the on-time
tuples, which is :func:`oij.spec.stream.compute_stream_result`, which the oracle
emits.  Purging at block ends rather than at the event where W moves
changes what is stored in between, never what is found: a stored tuple is an
on-time tuple, so an extra one can only produce true pairs.

**4. Rows when a base becomes final.**  :math:`a` is final iff :math:`W > hi(a)`
(:func:`oij.spec.stream.is_final`).  At the end of each block the stored bases
with :math:`hi(a) < W_t` get their aggregate or (a, null) row and are
dropped; at End every base is final.  The row is the one the oracle emits,
because by then every on-time probe in a's window has arrived (one arriving
later would have :math:`b.ts \le hi(a) < W_t \le W` at its arrival: late) and
is still stored (:mod:`oij.spec.purge` keeps a probe a later on-time base can
match, and in aggregate mode one inside a pending base's window); a base that
is final on arrival gets the same row at its block's end, since a probe of its
window arriving after it is late.  A left join's base carries a ``matched``
flag set by every pair of step 3.  Hence after every block the output so far is
:func:`oij.spec.stream.compute_emitted` of the prefix read, exactly what the
oracle has emitted after the same prefix: a stream cut short by an input
error keeps the same results on either path.

**5. Window runs.**  The stored and new tuples of a side are sorted by the
composite :math:`c = key \cdot (n+1) + rank(ts)`, :math:`rank(t) = |\{j :
ts_j < t\}|` over their n sorted timestamps; the tuples of key k with
:math:`L \le ts \le H` are then the run of c in :math:`[k(n+1) + rank(L),\
k(n+1) + |\{j : ts_j \le H\}|)`: two ``searchsorted`` per query tuple, the
query tuples taken in the same order (the numpy floor's method,
:mod:`oij.reference.batchjoin`; when keys x span of the
timestamps fit in :data:`DIRECT_LIMIT`, :math:`ts - \min ts` serves as the
rank, with the bounds clamped to the timestamps' range first).  A run gives a
window's pairs (``repeat``), its count (:math:`e - s`), its exact sum
(prefix sums of the exact integers :math:`v \cdot 2^{1074}` of
:mod:`oij.reference.exact`: :math:`C_e - C_s`, rounded once by
:func:`oij.reference.exact.to_float` -- the number
:func:`oij.spec.aggregate.compute_aggregate` defines, in any order; while
the stored values fit one int64 scale :math:`2^F`,
:func:`oij.reference.exact.int_scale`, the same integers divided by
:math:`2^{1074 - F}` are int64 prefix sums, rounded once by a double
conversion; from the first window that does not fit on, Python integers) and its
min/max (``reduceat`` over the runs, taken in order of s so that the gaps
between runs add up to at most the stored probes; ``+ 0.0`` as the spec).

**6. Keys and timestamps.**  Keys become small integer codes through a
dictionary: ``1`` and ``"1"`` are different dictionary keys, as they are
different join keys (the reader admits only ints and strs).  The dictionary
is renumbered when it outgrows twice the stored tuples, so it stays bounded
by the live state too.  Timestamps stay ``int64`` throughout, never floats:
:math:`|ts|, |\ell'|, |u'| \le 2^{62}` (``oij.spec.model.TS_LIMIT``), so
:math:`ts + \ell'`, :math:`ts + u'` and :math:`ts - \ell'` fit; an offset is
always applied to the tuple, never to W (:math:`W + \ell'` could overflow);
:math:`-\infty` is :data:`NEG` :math:`= -2^{63}`, below every W and ts.

Data flow::

    events --block--> W before each event (prefix max + carry) --ts < W--> late ids
                            | on-time tuples, keys -> codes
                            v
       block bases x (stored + block probes), stored bases x block probes --> pairs (columns)
                            |
                            v  store; at the block end, under W_t:
       final bases --> aggregate rows / (a, null) rows;  purge by oij.spec.purge (bounded state)

What it supports: every query without a joining condition (:func:`supports`);
a query with ``cond`` goes to the event-by-event oracle (``oij join`` does so).
It creates no process and no shared memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from oij.reference.columns import EventBlock
from oij.reference.exact import SHIFT, int_means_to_float, int_scale, int_sums_to_float, scaled, to_float
from oij.spec.batch import AggregateRow, Pair, Results
from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import End, Event, Key, Query, check_query

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
Ids = npt.NDArray[Any]
"""Id columns: int64, or object when an id does not fit 64 bits (the protocol allows it)."""

BLOCK = 1 << 16
"""Events per block by default."""

NEG = -(1 << 63)
r""":math:`-\infty` in int64 columns: below every timestamp and every finite W (both :math:`> -2^{63} + 1`)."""

WM_MATRIX_CELLS = 1 << 22
"""Largest channels x watermarks matrix of step 1; beyond it, the one-watermark loop."""

RADIX_CODES = 1 << 16
"""Key codes below this are sorted as uint16: numpy's stable sort of a 16-bit column is a radix sort, O(n)."""

SORTED_QUERIES = 256
"""Step 5 sorts its query tuples by (key, ts) first when there are at least this many: ``searchsorted`` with
needles in order walks the sorted targets once instead of jumping across them (measured about 4x faster on 32,768
needles)."""

KEY_TABLE = 1 << 20
"""Integer keys in ``[0, KEY_TABLE)`` are coded through an array indexed by the key (:class:`KeyCodes`)."""

DIRECT_LIMIT = 1 << 62
"""Step 5 uses the timestamps themselves as the rank when keys x timestamp span stays below this (else it ranks
them through a sort: the same runs)."""

COMPACT_MIN = 1 << 16
"""The key dictionary is renumbered only when it holds more codes than this (and than twice the state)."""


def supports(q: Query) -> bool:
    """True iff the block path computes ``q``: every query without a joining condition.  O(1)."""
    return not q.cond


# ---------------------------------------------------------------------- window runs


def key_ts_order(kc: I64, ts: I64) -> npt.NDArray[np.intp] | None:
    """A permutation that sorts the tuples by (key code, ts), ties in their given order; None when some code is
    not below :data:`RADIX_CODES` (the caller sorts another way).

    Requires ``kc >= 0``.  A stable sort of ``ts``, then a stable radix sort of the codes as uint16.  numpy's
    stable sort of int64 is a timsort, which merges the runs it finds: O(n log n), and close to O(n) on the
    nearly ordered timestamps of a stream with bounded delay.
    """
    if not len(kc) or int(kc.max()) >= RADIX_CODES:
        return None
    o = np.argsort(ts, kind="stable")
    out: npt.NDArray[np.intp] = o[np.argsort(kc[o].astype(np.uint16), kind="stable")]
    return out


def window_runs(t_kc: I64, t_ts: I64, q_kc: I64, q_lo: I64,
                q_hi: I64) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """For each query i, the targets of key ``q_kc[i]`` with ``q_lo[i] <= ts <= q_hi[i]``: ``order[s[i]:e[i]]``.

    Returns ``(s, e, order)`` with ``order`` the targets sorted by (key, ts); step 5 of the module
    docstring.  O((n + m) log n) for n targets and m queries.

    Implements :func:`oij.spec.match.window_lo` and :func:`oij.spec.match.window_hi` as runs of sorted targets.
    """
    n = len(t_ts)
    if n == 0 or len(q_kc) == 0:
        z = np.zeros(len(q_kc), np.intp)
        return z, z, np.empty(0, np.intp)
    tmin, tmax = int(t_ts.min()), int(t_ts.max())
    span = tmax - tmin + 2
    if (max(int(t_kc.max()), int(q_kc.max())) + 1) * span < DIRECT_LIMIT:
        # the timestamps themselves as the rank: c = key * span + (ts - tmin), bounds clamped to the targets'
        # range first (so that nothing overflows); the same runs, without sorting the timestamps
        comp = t_kc * span + (t_ts - tmin)
        order = key_ts_order(t_kc, t_ts)
        if order is None:
            order = np.argsort(comp)
        comp = comp[order]
        qo = key_ts_order(q_kc, q_lo) if len(q_kc) >= SORTED_QUERIES else None
        if qo is None:  # the needles as they come
            qo = np.arange(len(q_kc))
        base = q_kc[qo] * span
        s = np.empty(len(q_kc), np.intp)
        e = np.empty(len(q_kc), np.intp)
        s[qo] = np.searchsorted(comp, base + (np.clip(q_lo[qo], tmin, tmax + 1) - tmin), "left")
        e[qo] = np.searchsorted(comp, base + (np.clip(q_hi[qo], tmin - 1, tmax) + 1 - tmin), "left")
        return s, np.maximum(e, s), order
    sts = np.sort(t_ts)
    comp = t_kc * (n + 1) + np.searchsorted(sts, t_ts, "left")
    order = np.argsort(comp, kind="stable")
    comp = comp[order]
    rlo = np.searchsorted(sts, q_lo, "left")
    rhi = np.maximum(np.searchsorted(sts, q_hi, "right"), rlo)
    base = q_kc * (n + 1)
    s = np.searchsorted(comp, base + rlo, "left")
    e = np.searchsorted(comp, base + rhi, "left")
    return s, e, order


def window_pairs(a_kc: I64, a_ts: I64, b_kc: I64, b_ts: I64, lo: int,
                 hi: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Indices (i, j) of every pair with ``a_kc[i] == b_kc[j]`` and ``a_ts[i] + lo <= b_ts[j] <= a_ts[i] + hi``
    (requires ``lo <= hi``).  O((n + m) log n + pairs).

    Implements :func:`oij.spec.match.is_window_match` for every pair of two blocks.
    """
    s, e, order = window_runs(b_kc, b_ts, a_kc, a_ts + lo, a_ts + hi)
    cnt = e - s
    ia = np.repeat(np.arange(len(a_ts)), cnt)
    if len(ia) == 0:
        return ia, ia
    starts = np.cumsum(cnt) - cnt
    ib = order[s[ia] + (np.arange(len(ia)) - starts[ia])]
    return ia, ib


# ---------------------------------------------------------------------- keys


class KeyCodes:
    """Injective codes ``0 .. next-1`` for join keys (``1`` and ``"1"`` get different codes).

    ``table[k]``, for ``0 <= k < len(table)``, is the code of the int key ``k`` or -1 (not yet looked up
    through the table): a copy of the dictionary's entries for such keys, so that a block of small int keys is
    coded by one gather.
    """

    def __init__(self) -> None:
        self.codes: dict[Key, int] = {}
        self.next = 0
        self.table: I64 = np.empty(0, np.int64)

    def _code(self, k: Key) -> int:
        c = self.codes.get(k)
        if c is None:
            c = self.codes[k] = self.next
            self.next += 1
        return c

    def encode(self, keys: npt.NDArray[Any]) -> I64:
        """The codes of ``keys`` (int64, or object holding ints and strs).  O(n) for int64 keys in ``[0,
        KEY_TABLE)`` (a gather from ``table``, plus one dictionary look-up per new key), O(n log n) for other
        int64 keys (one dictionary look-up per distinct key), O(n) look-ups for object keys (in C: the distinct
        keys by ``dict.fromkeys``, new ones coded in the order they first occur -- the codes one look-up per key
        in order would give -- then one ``map`` of the look-up)."""
        if len(keys) == 0:
            return np.empty(0, np.int64)
        if keys.dtype != object and int(keys.min()) >= 0 and (top := int(keys.max())) < KEY_TABLE:
            if top >= len(self.table):
                grown = np.full(min(KEY_TABLE, max(2 * len(self.table), top + 1)), -1, np.int64)
                grown[:len(self.table)] = self.table
                self.table = grown
            got: I64 = self.table[keys]
            if bool((got < 0).any()):
                for k in np.unique(keys[got < 0]).tolist():
                    self.table[k] = self._code(k)
                got = self.table[keys]
            return got
        if keys.dtype != object:
            u, inv = np.unique(keys, return_inverse=True)
            cu = np.fromiter((self._code(k) for k in u.tolist()), np.int64, len(u))
            out: I64 = cu[inv.reshape(-1)]
            return out
        lst = keys.tolist()
        codes = self.codes
        for k in dict.fromkeys(lst):
            if k not in codes:
                codes[k] = self.next
                self.next += 1
        return np.fromiter(map(codes.__getitem__, lst), np.int64, len(lst))

    def _check(self) -> None:
        """Assert the invariants: the codes are exactly ``0 .. next-1``, one per key; ``table[k]`` is -1 or the
        dictionary's code of ``k`` (it is filled as keys come through it).  O(codes log codes + table)."""
        assert sorted(self.codes.values()) == list(range(self.next)), "key codes are not 0 .. next-1"
        for k in np.flatnonzero(self.table >= 0).tolist():
            assert self.codes.get(k) == int(self.table[k]), f"the key table codes {k} unlike the dictionary"

    def compact(self, live: I64) -> I64:
        """Keep only the codes in ``live`` (sorted, unique), renumbered ``0 .. len(live)-1`` in the same order;
        return the map old code -> new code (-1 for a dropped one).  O(codes)."""
        remap = np.full(self.next, -1, np.int64)
        remap[live] = np.arange(len(live))
        r = remap.tolist()
        self.codes = {k: r[c] for k, c in self.codes.items() if r[c] >= 0}
        self.next = len(live)
        if len(self.table):
            held = self.table >= 0
            self.table[held] = remap[self.table[held]]
        return remap


# ---------------------------------------------------------------------- state and output


@dataclass
class Tuples:
    """Stored tuples of one side, column-wise, in no particular order.  ``ex``: the exact scaled values as
    Python integers (probes of sum/avg, once their values did not fit int64: ``BlockStore._exact_objects``);
    ``matched``: a pair was found (bases of a left join)."""

    id: Ids
    kc: I64
    ts: I64
    value: F64
    matched: Bools
    ex: npt.NDArray[Any] | None = None

    def __len__(self) -> int:
        return len(self.ts)

    def take(self, m: Bools | npt.NDArray[np.intp]) -> Tuples:
        return Tuples(self.id[m], self.kc[m], self.ts[m], self.value[m], self.matched[m],
                       None if self.ex is None else self.ex[m])

    def cat(self, o: Tuples) -> Tuples:
        if not len(o):
            return self
        if not len(self):
            return o
        ex = None if self.ex is None or o.ex is None else np.concatenate([self.ex, o.ex])
        return Tuples(np.concatenate([self.id, o.id]), np.concatenate([self.kc, o.kc]),
                       np.concatenate([self.ts, o.ts]), np.concatenate([self.value, o.value]),
                       np.concatenate([self.matched, o.matched]), ex)

    @staticmethod
    def empty(exact: bool) -> Tuples:
        return Tuples(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0),
                       np.zeros(0, np.bool_), np.empty(0, object) if exact else None)


@dataclass
class BlockOutput:
    """What a :class:`BlockOracle` emitted: pair columns ``(base, probe, probe is null)`` in chunks, aggregate
    rows (as columns in chunks, or as rows where a value is exact only as a Python object), and chunks of late
    ids.  Any order; :meth:`results` sorts."""

    pairs: list[tuple[Ids, Ids, Bools]] = field(default_factory=list)
    aggregates: list[AggregateRow] = field(default_factory=list)
    late: list[Ids] = field(default_factory=list)
    aggregate_columns: list[tuple[Ids, I64, F64, Bools, bool]] = field(default_factory=list)
    """Chunks ``(base, count, value, value is null, counts_are_values)``: row i is ``(base[i], count[i],
    count[i])`` when ``counts_are_values`` (the count aggregate), else ``(base[i], count[i], None if null[i]
    else value[i])``."""

    def add_pairs(self, a: Ids, b: Ids) -> None:
        """Emit the pairs (a[i], b[i]).  O(n)."""
        if len(a):
            self.pairs.append((a, b, np.zeros(len(a), np.bool_)))

    def add_nulls(self, a: Ids) -> None:
        """Emit the rows (a[i], null) of a left join.  O(n)."""
        if len(a):
            self.pairs.append((a, np.zeros_like(a), np.ones(len(a), np.bool_)))

    def add_aggregates(self, base: Ids, count: I64, value: F64, null: Bools, counts_are_values: bool) -> None:
        """Emit aggregate rows as columns (:attr:`aggregate_columns`).  O(1)."""
        if len(base):
            self.aggregate_columns.append((base, count, value, null, counts_are_values))

    def aggregate_rows(self) -> list[AggregateRow]:
        """Every aggregate row emitted, as ``(base, count, value)`` tuples.  O(rows)."""
        rows = list(self.aggregates)
        for base, count, value, null, counts_are_values in self.aggregate_columns:
            counts = count.tolist()
            if counts_are_values:
                rows += zip(base.tolist(), counts, counts, strict=True)
            else:
                rows += zip(base.tolist(), counts,
                            [None if z else v for v, z in zip(value.tolist(), null.tolist(), strict=True)],
                            strict=True)
        return rows

    def results(self) -> Results:
        """The output as a :class:`~oij.spec.batch.Results` in canonical order.  O(rows log rows)."""
        pairs: list[Pair] = []
        for a, b, null in self.pairs:
            pairs += [(x, None if z else y) for x, y, z in zip(a.tolist(), b.tolist(), null.tolist(), strict=True)]
        late = [x for chunk in self.late for x in chunk.tolist()]
        return Results(pairs, self.aggregate_rows(), late).canonical()


# ---------------------------------------------------------------------- step 1 as functions


def watermarks_before(is_w: Bools, ts: I64, channel: I64, cm: I64, w: int,
                      matrix_cells: int = WM_MATRIX_CELLS) -> tuple[I64, I64, int]:
    r"""Step 1, watermark mode: W before each event of a block, given the carries.

    ``cm`` holds the per-channel maxima :math:`m_c(s)` and ``w`` the W in force before the block's first event.
    Returns ``(before, cm_after, w_after)``: :math:`W_i` for every event, the maxima and W after the block.
    Pure.  O(n + N k) vectorised, or O(n + k) interpreted steps when N x k exceeds ``matrix_cells``.

    Implements :func:`oij.spec.watermark.on_watermark` and :func:`oij.spec.watermark.effective_watermark` over a
    block (:func:`oij.spec.watermark.arrival_watermarks`).
    """
    widx = np.flatnonzero(is_w)
    k = len(widx)
    if k == 0:
        return np.full(len(is_w), w, np.int64), cm, w
    wts, wch = ts[widx], channel[widx]
    nch = len(cm)
    if nch * k <= matrix_cells:
        m = np.full((nch, k), NEG, np.int64)
        m[wch, np.arange(k)] = wts
        m[:, 0] = np.maximum(m[:, 0], cm)
        m = np.maximum.accumulate(m, axis=1)
        after: I64 = m.min(axis=0)
        cm_after: I64 = m[:, -1].copy()
    else:  # many channels: the oracle's rule (W moves only when a channel at W rises)
        cl = cm.tolist()
        cur = min(cl)
        got: list[int] = []
        for t, c in zip(wts.tolist(), wch.tolist(), strict=True):
            if t > cl[c]:
                old = cl[c]
                cl[c] = t
                if old == cur:
                    cur = min(cl)
            got.append(cur)
        after = np.array(got, np.int64)
        cm_after = np.array(cl, np.int64)
    prev = np.empty(k + 1, np.int64)
    prev[0] = w
    prev[1:] = after
    before: I64 = prev[np.cumsum(is_w) - is_w]  # W after the last watermark strictly before each event
    return before, cm_after, int(after[-1])


def lateness_before(ts: I64, max_ts: int, lateness: int) -> tuple[I64, int]:
    r"""Step 1, lateness mode: :math:`W_i = \max(M_s, \max_{s \le j < i} e_j.ts) - l` for every event of a block
    (:math:`-\infty` while no tuple was seen), given the carried maximum ``max_ts`` (:data:`NEG` for none).

    Returns ``(before, max_after)``.  Pure.  O(n).

    Implements :func:`oij.spec.watermark.lateness_watermark` over a block
    (:func:`oij.spec.watermark.arrival_watermarks`).
    """
    run = np.maximum.accumulate(ts)
    before = np.empty(len(ts), np.int64)
    before[0] = NEG
    before[1:] = run[:-1]
    before = np.maximum(before, max_ts)
    # max - l, and -inf while no tuple was seen: NEG + l - l == NEG, and every real max is above NEG + l
    wb: I64 = np.maximum(before, NEG + lateness) - lateness
    return wb, max(max_ts, int(run[-1]))


def w_after_lateness(max_ts: int, lateness: int) -> int:
    """W in lateness mode once the largest ts seen is ``max_ts`` (:data:`NEG`: none seen, W is -inf).  O(1).

    Implements :func:`oij.spec.watermark.lateness_watermark`.
    """
    return NEG if max_ts == NEG else max_ts - lateness


# ---------------------------------------------------------------------- the state: steps 3-6


class BlockStore:
    """The stored on-time tuples of both sides, joined a block at a time (steps 3-6 of the module docstring).

    It takes blocks of tuples already decided on time, each with the W in force after its block
    (:meth:`add`), so that :class:`BlockOracle` (which decides lateness itself) and the parallel engines'
    replicas (which get on-time tuples routed to them, and W from the driver) run the same code.  A replica
    holding only some keys, or only some bases and every probe, finds exactly the pairs and rows of its
    bases: steps 3 and 4 join what is stored with what arrives, whatever subset that is.

    Complexities: n tuples in a block, S stored tuples, p pairs or rows emitted.
    """

    def __init__(self, q: Query) -> None:
        self.q = check_query(q)
        if not supports(q):
            raise ValueError("the block path has no joining condition (cond): use oij.reference.oracle.Oracle")
        self.lo = lower_offset(q)
        self.hi = upper_offset(q)
        self.empty = self.lo > self.hi
        self.agg = q.aggregate
        self.left = q.join == "left" and q.aggregate is None
        self.exact = q.aggregate in ("sum", "avg")
        # sum/avg: the exact values as Python integers in ``Tuples.ex``, from the first window whose values did
        # not fit int64 (oij.reference.exact.int_scale) on; until then none are kept (each window's int64
        # integers are made from the stored values when its rows are due)
        self.objects = False
        self.keep_bases = self.agg is not None or self.left or not self.empty
        self.w = NEG  # W after the blocks added so far
        self.ended = False
        self.keys = KeyCodes()
        self.bases = Tuples.empty(False)
        self.probes = Tuples.empty(False)
        self.out = BlockOutput()
        self.compact_min = COMPACT_MIN
        self.visited = 0  # window entries the joins visited (pairs found, rows' window sizes)
        self.stored_max = 0

    # ------------------------------------------------------------------ public

    def add(self, ids: Ids, keys: npt.NDArray[Any], ts: I64, value: F64, is_base: Bools, w: int) -> None:
        """Join a block of on-time tuples (arrival order; ``keys`` int64 or object) and settle under ``w``.

        Requires: not ended; every tuple on time (``ts >= W`` at its arrival); ``w`` the W after the block,
        never below the last one.  Changes: stores the tuples, drops the final bases and what
        :mod:`oij.spec.purge` lets go.  Emits (into ``self.out``): the block's pairs and the rows of the bases
        that became final.  O(n log(n + S) + S log S + p).

        Implements :func:`oij.spec.batch.compute_pairs` over the on-time tuples (each pair found in the
        block of its second tuple) and the purge of :mod:`oij.spec.purge` at the block end.
        """
        if self.ended:
            raise ValueError("tuples after the end of the stream")
        if w < self.w:
            raise ValueError(f"W went back from {self.w} to {w}")
        if len(ts):
            kc = self.keys.encode(keys)
            isp = ~is_base
            new_b = Tuples(ids[is_base], kc[is_base], ts[is_base], value[is_base],
                            np.zeros(int(is_base.sum()), np.bool_))
            pval = value[isp]
            new_p = Tuples(ids[isp], kc[isp], ts[isp], pval, np.zeros(len(pval), np.bool_),
                            np.array([scaled(v) for v in pval.tolist()], dtype=object) if self.objects else None)
            self._join_new(new_b, new_p)
            if self.keep_bases:
                self.bases = self.bases.cat(new_b)
        self.w = w
        self.stored_max = max(self.stored_max, self.stored())
        self._settle(final_all=False)

    def end(self) -> None:
        """The end of the stream: every stored base is final (its row is emitted); all state is dropped.
        O(S log S + p).

        Implements :func:`oij.spec.stream.compute_emitted` for a prefix that ends with End (every base
        final, nothing needed).
        """
        if not self.ended:
            self.ended = True
            self._settle(final_all=True)

    def take(self) -> BlockOutput:
        """The output emitted since the last ``take`` (and forget it).  O(1)."""
        out, self.out = self.out, BlockOutput()
        return out

    def stored(self) -> int:
        """Tuples held in the state.  O(1)."""
        return len(self.bases) + len(self.probes)

    # ------------------------------------------------------------------ steps 3 and 4

    def _join_new(self, new_b: Tuples, new_p: Tuples) -> None:
        """Step 3: block bases x (stored + block probes), stored bases x block probes; stores the probes.

        Implements :func:`oij.spec.match.is_window_match` for the three joins of step 3
        (:func:`oij.spec.batch.compute_pairs`).
        """
        if self.agg is None and not self.empty:
            probes = self.probes.cat(new_p)
            ia, ib = window_pairs(new_b.kc, new_b.ts, probes.kc, probes.ts, self.lo, self.hi)
            ja, jb = window_pairs(self.bases.kc, self.bases.ts, new_p.kc, new_p.ts, self.lo, self.hi)
            self.out.add_pairs(new_b.id[ia], probes.id[ib])
            self.out.add_pairs(self.bases.id[ja], new_p.id[jb])
            self.visited += len(ia) + len(ja)
            if self.left:
                new_b.matched[ia] = True
                self.bases.matched[ja] = True
            self.probes = probes
        elif self.agg is not None and not self.empty:
            self.probes = self.probes.cat(new_p)

    def _final(self, done: Tuples) -> None:
        """Step 4 for the bases ``done`` that became final: their aggregate or (a, null) rows.

        Implements :func:`oij.spec.stream.is_final`: the rows emitted once, on finality.
        """
        if self.agg is not None:
            self._rows(done)
        elif self.left:
            self.out.add_nulls(done.id[~done.matched])

    def _keeps_pending_windows(self) -> bool:
        """Whether a probe inside a pending base's window is kept although no future tuple needs it (its row,
        or pairs made at finality, are not out yet).

        Implements the pending-window clause of :func:`oij.spec.purge.is_probe_needed`.
        """
        return self.agg is not None

    def _settle(self, final_all: bool) -> None:
        """Step 4 at a block end (or at End): rows of the final bases, then purge by :mod:`oij.spec.purge`.

        Implements :func:`oij.spec.stream.is_final`, :func:`oij.spec.purge.is_base_needed` and
        :func:`oij.spec.purge.is_probe_needed` at a block end.
        """
        w = self.w
        bases = self.bases
        final = np.ones(len(bases), np.bool_) if final_all else bases.ts + self.hi < w
        if final.any():
            self._final(bases.take(final))
            self.bases = bases.take(~final)
        if final_all:
            self.probes = Tuples.empty(self.objects)
            return
        probes = self.probes
        if len(probes):
            keep = probes.ts - self.lo >= w
            if self._keeps_pending_windows() and len(self.bases) and not bool(keep.all()):
                # still in the window of a pending base: its row is not out yet
                c = np.flatnonzero(~keep)
                s, e, _ = window_runs(self.bases.kc, self.bases.ts, probes.kc[c], probes.ts[c] - self.hi,
                                      probes.ts[c] - self.lo)
                keep[c] = e > s
            if not bool(keep.all()):
                self.probes = probes.take(keep)
        self._compact()

    def _rows(self, done: Tuples) -> None:
        """The aggregate rows of the final bases ``done`` over the stored probes (step 5).  O((m + S) log S +
        window sizes) for m bases; sum and avg add O(S) exact integer additions.

        Implements :func:`oij.spec.batch.compute_aggregates` (:func:`oij.spec.batch.compute_window`,
        :func:`oij.spec.aggregate.compute_aggregate`).
        """
        probes = self.probes
        m = len(done)
        if self.empty or not len(probes):
            s = e = np.zeros(m, np.intp)
            order = np.empty(0, np.intp)
        else:
            s, e, order = window_runs(probes.kc, probes.ts, done.kc, done.ts + self.lo, done.ts + self.hi)
        cnt = e - s
        self.visited += int(cnt.sum())
        agg = self.agg
        ids, cnt64, no_null = done.id, cnt.astype(np.int64), np.zeros(m, np.bool_)
        if agg == "count":
            self.out.add_aggregates(ids, cnt64, np.zeros(m), no_null, True)
        elif agg == "sum" or agg == "avg":
            fit = None if self.objects else int_scale(probes.value[order])
            if fit is not None:  # the exact totals in int64 at scale 2^f, rounded once (oij.reference.exact)
                x, f = fit
                prefix64 = np.zeros(len(order) + 1, np.int64)
                np.cumsum(x, out=prefix64[1:])
                t64 = prefix64[e] - prefix64[s]
                if agg == "sum":
                    self.out.add_aggregates(ids, cnt64, int_sums_to_float(t64, f), no_null, False)
                else:
                    means, rounded = int_means_to_float(t64, np.maximum(cnt, 1), f)
                    avgs = np.array(means, np.float64)
                    for i in np.flatnonzero(~rounded & (cnt > 0)).tolist():
                        avgs[i] = to_float(int(t64[i]) << (SHIFT - f), int(cnt[i]))
                    self.out.add_aggregates(ids, cnt64, avgs, cnt == 0, False)
            else:
                aids, counts = ids.tolist(), cnt.tolist()
                probes = self._exact_objects()
                assert probes.ex is not None
                prefix = np.zeros(len(order) + 1, dtype=object)
                if len(order):
                    prefix[1:] = np.cumsum(probes.ex[order])
                totals = (prefix[e] - prefix[s]).tolist()
                rows: list[AggregateRow]
                if agg == "sum":
                    rows = [(a, n, to_float(t, 1)) for a, n, t in zip(aids, counts, totals, strict=True)]
                else:
                    rows = [(a, n, to_float(t, n) if n else None)
                            for a, n, t in zip(aids, counts, totals, strict=True)]
                self.out.aggregates += rows
        else:
            ext = np.zeros(m)
            nz = cnt > 0
            if nz.any():
                ss, ee = s[nz], e[nz]
                o = np.argsort(ss, kind="stable")  # runs in order of s: the gaps between them add up to <= S
                idx = np.empty(2 * len(o), np.intp)
                idx[0::2] = ss[o]
                idx[1::2] = ee[o]
                vals = np.append(probes.value[order], 0.0)  # so that an end index == S is valid
                ufunc = np.minimum if agg == "min" else np.maximum
                r = ufunc.reduceat(vals, idx)[0::2]
                got = np.empty(len(o))
                got[o] = r
                ext[nz] = got
            self.out.add_aggregates(ids, cnt64, ext + 0.0, cnt == 0, False)

    def _exact_objects(self) -> Tuples:
        """The stored probes with their exact values as Python integers (``Tuples.ex``), kept so from now on
        (the values of a window did not fit int64).  O(S) the first time, O(1) after."""
        if not self.objects:
            self.objects = True
            p = self.probes
            p.ex = np.array([scaled(v) for v in p.value.tolist()], dtype=object)
        return self.probes

    def _compact(self) -> None:
        """Renumber the key codes when the dictionary outgrows the state (step 6).  O(1), or O(S + codes)."""
        stored = len(self.bases) + len(self.probes)
        if self.keys.next <= max(self.compact_min, 2 * stored):
            return
        live = np.unique(np.concatenate([self.bases.kc, self.probes.kc]))
        remap = self.keys.compact(live)
        self.bases.kc = remap[self.bases.kc]
        self.probes.kc = remap[self.probes.kc]

    # ---------------------------------------------------------------- inspection

    def _check(self) -> None:
        """Assert the invariants (tests call it after every block).  O(S log S + codes)."""
        if self.ended:
            assert not len(self.bases) and not len(self.probes), "state left after the end"
            return
        self.keys._check()
        for t in (self.bases, self.probes):
            n = len(t)
            assert len(t.id) == len(t.kc) == len(t.value) == len(t.matched) == n
            assert t.ts.dtype == np.int64 and t.kc.dtype == np.int64
            assert not n or (int(t.kc.min()) >= 0 and int(t.kc.max()) < self.keys.next)
        b, p = self.bases, self.probes
        assert self.keep_bases or not len(b), "bases stored although none can be needed"
        assert bool((b.ts + self.hi >= self.w).all()), "a final base is still stored"
        assert self.left or not bool(b.matched.any())
        assert not self.empty or not len(p), "probes stored for an empty window"
        if len(p):
            needed = p.ts - self.lo >= self.w
            if self._keeps_pending_windows():
                s, e, _ = window_runs(b.kc, b.ts, p.kc, p.ts - self.hi, p.ts - self.lo)
                needed |= e > s
            assert bool(needed.all()), "a probe no future tuple or pending row needs is still stored"
        assert (p.ex is not None) == self.objects and (self.exact or not self.objects)
        if p.ex is not None:
            assert p.ex.tolist() == [scaled(v) for v in p.value.tolist()]
        if self.left and len(b) and not self.empty and self.agg is None and not self._keeps_pending_windows():
            # a pair with a stored probe sets the base's flag
            ia, _ = window_pairs(b.kc, b.ts, p.kc, p.ts, self.lo, self.hi)
            assert not bool(((np.bincount(ia, minlength=len(b)) > 0) & ~b.matched).any())


# ---------------------------------------------------------------------- the operator


class BlockOracle:
    """The block path (module docstring): steps 1 and 2 here, steps 3-6 in a :class:`BlockStore`.  ``feed``
    columns of events in arrival order, then ``end``; ``take`` the output emitted so far at any point between
    calls.

    Complexities: n events in a block, S stored tuples, p pairs or rows emitted, N channels.
    """

    def __init__(self, q: Query, block: int = BLOCK) -> None:
        self.q = check_query(q)
        if not supports(q):
            raise ValueError("the block path has no joining condition (cond): use oij.reference.oracle.Oracle")
        if block < 1:
            raise ValueError(f"block must be >= 1, got {block}")
        self.block = block
        self.store = BlockStore(q)
        self.cm: I64 = np.full(q.channels, NEG, np.int64)  # per-channel maxima (watermark mode)
        self.max_ts = NEG  # largest ts seen (lateness mode)
        self.w = NEG  # W after the events fed so far
        self.wm_matrix_cells = WM_MATRIX_CELLS

    @property
    def ended(self) -> bool:
        return self.store.ended

    @property
    def compact_min(self) -> int:
        """Step 6's threshold (the store's; tests lower it)."""
        return self.store.compact_min

    @compact_min.setter
    def compact_min(self, v: int) -> None:
        self.store.compact_min = v

    # ------------------------------------------------------------------ public

    def feed(self, kind: npt.NDArray[Any], side: npt.NDArray[Any], ids: Ids, ts: I64, key: npt.NDArray[Any],
             value: F64, channel: I64) -> None:
        """Process consecutive valid events, column-wise (``kind`` 0 tuple / 1 watermark, ``side`` 0 base /
        1 probe; the columns of :class:`oij.reference.columns.EventBlock`), in blocks of ``self.block``.

        Requires: not ended.  Emits (into the store's output): late ids, pairs, and the rows of the bases that
        became final.  O(n log(n + S) + S log S + p) per block.

        Implements :func:`oij.spec.stream.compute_emitted` a block at a time: after each block the output is
        what that function gives for the prefix read so far.
        """
        if self.ended:
            raise ValueError("events after the end of the stream")
        for i in range(0, len(kind), self.block):
            j = i + self.block
            self._block(kind[i:j], side[i:j], ids[i:j], ts[i:j], key[i:j], value[i:j], channel[i:j])

    def end(self) -> None:
        """The end of the stream: every stored base is final (its row is emitted); all state is dropped.
        O(S log S + p).

        Implements :func:`oij.spec.stream.compute_emitted` for a prefix that ends with End.
        """
        self.store.end()

    def take(self) -> BlockOutput:
        """The output emitted since the last ``take`` (and forget it).  O(1)."""
        return self.store.take()

    # ------------------------------------------------------------------ one block

    def _is_late(self, ts: I64, w_before: I64) -> Bools:
        """Step 2: late iff ts < W at arrival (the negative control of the tests overrides it).

        Implements :func:`oij.spec.watermark.is_late`.
        """
        late: Bools = ts < w_before
        return late

    def _channel_carry(self) -> I64:
        """The per-channel maxima carried into the block (step 1)."""
        return self.cm

    def _ts_carry(self) -> int:
        """The largest ts carried into the block (lateness mode, step 1)."""
        return self.max_ts

    def _block(self, kind: npt.NDArray[Any], side: npt.NDArray[Any], ids: Ids, ts: I64, key: npt.NDArray[Any],
               value: F64, channel: I64) -> None:
        """Decide one block: W before each event (step 1), the late marks (step 2), then the on-time tuples
        to the store (steps 3-6).

        Implements :func:`oij.spec.watermark.arrival_watermarks` (W at each arrival),
        :func:`oij.spec.watermark.is_late` and :func:`oij.spec.stream.on_time_tuples` for one block.
        """
        if not len(kind):
            return
        is_t = kind == 0
        lateness = self.q.lateness
        if lateness is None:
            wb, self.cm, self.w = watermarks_before(~is_t, ts, channel, self._channel_carry(), self.w,
                                                    self.wm_matrix_cells)
        else:
            if not bool(is_t.all()):
                raise ValueError("watermark events are not allowed when the query sets a lateness")
            wb, _ = lateness_before(ts, self._ts_carry(), lateness)
            self.max_ts = max(self.max_ts, int(ts.max()))  # the carry kept here (the tests' NoCarry drops only W_i)
            self.w = w_after_lateness(self.max_ts, lateness)
        late = is_t & self._is_late(ts, wb)
        if late.any():
            self.store.out.late.append(ids[late])
        ot = is_t & ~late
        self.store.add(ids[ot], key[ot], ts[ot], value[ot], side[ot] == 0, self.w)

    # ---------------------------------------------------------------- inspection

    def stored(self) -> int:
        """Tuples held in the state.  O(1)."""
        return self.store.stored()

    def _check(self) -> None:
        """Assert the invariants (tests call it after every block).  O(S log S + codes)."""
        q = self.q
        if not self.ended:
            if q.lateness is None:
                assert self.w == int(self.cm.min()), (self.w, self.cm)
            else:
                assert self.max_ts == NEG or self.w == self.max_ts - q.lateness, (self.w, self.max_ts)
                assert self.max_ts != NEG or self.w == NEG
            assert self.store.w == self.w, (self.store.w, self.w)
        self.store._check()


# ---------------------------------------------------------------------- events as columns


def event_columns(events: Iterable[Event]) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int8], Ids, I64,
                                                    npt.NDArray[Any], F64, I64]:
    """Tuples and watermarks (up to an End) as the columns :meth:`BlockOracle.feed` takes
    (:meth:`oij.reference.columns.EventBlock.columns`).  Keys are int64 when every key is an int that fits, else an
    object column; ids likewise.  O(n)."""
    return EventBlock.from_events(events).columns()


def run_blocks(events: Iterable[Event], q: Query, block: int = BLOCK) -> Results:
    """Run the block path over a whole event sequence (up to End); the result in canonical order, as
    :func:`oij.reference.oracle.run_events`.  O(n log n + output).

    Implements :func:`oij.spec.stream.compute_stream_result`.
    """
    evs: list[Event] = []
    ended = False
    for e in events:
        if type(e) is End:
            ended = True
            break
        evs.append(e)
    o = BlockOracle(q, block)
    if evs:
        o.feed(*event_columns(evs))
    if ended:
        o.end()
    return o.take().results()
