r"""The replica's state buffers and the vectorised per-batch join (pure numpy, no processes).

Data flow inside one replica (:mod:`oij.parallel.runtime.replica` feeds it)::

    delivered batch --> JoinState.process --> pair / partial-row result records
    watermark       --> JoinState.advance --> partial rows of bases that became final; purge

State buffer: a *two-tier store* per side, the IM-tree idea of Shahvarani &
Jacobsen ([PIM-Tree]_ §3.2): a small mutable tier (``delta``, re-sorted when a batch
is inserted) and a large immutable tier (``main``) that is rebuilt by merging
``delta`` into it when ``delta`` grows past a fraction of ``main`` (merge
ratio); expired entries are dropped during the merge (coarse-grained
disposal), and flagged before that.  Each tier is sorted by (key code, ts).

Vectorised range search.  A tier of n entries keeps ``sts`` (its timestamps
sorted) and :math:`comp_i = key_i (n+1) + rank(ts_i)` with
:math:`rank(t) = |\{j : sts_j < t\}|`.  Then for a query (k, [lo, hi]) with
:math:`r_{lo} = |\{sts < lo\}|` and :math:`r_{hi} = |\{sts \le hi\}|`,
:math:`lo \le ts_i \le hi \iff r_{lo} \le rank(ts_i) < r_{hi}`, so the
matching entries are the contiguous run of ``comp`` in
:math:`[k(n+1) + r_{lo},\ k(n+1) + r_{hi})`: four ``searchsorted`` calls for
a whole batch of queries, whatever the key and timestamp ranges.

Who makes a pair.  Every tuple a replica receives gets a sequence number in
the replica's delivery order.  Tuple x joins the stored opposite-side
entries y with ``y.seq < x.seq``; a tuple is stored only by its ``owner``
replica.  So the pair (x, y), y delivered first, is made by the replica that
stores y, once, provided that replica also receives x after y (the ordering
rules of :mod:`oij.spec.ordering`).

A joining condition (``cond``) filters the candidates of every range search
before they make pairs or enter a partial aggregate: each stored entry keeps
its cond operands (``ch``/``cl``, :func:`oij.reference.cond.operand_rows`) and a
candidate (x, y) passes iff :func:`oij.reference.cond.cond_mask` holds for it.
Purging and finality are unchanged (they depend on keys, times and W only).

The cond index (``cond_index=True``: SPO-Join's idea, [SPO-Join]_ §3, in this
store's terms).  Filtering visits every candidate of the window; with a 1 %
selective cond, 99 % of those visits are wasted.  With the index every tier
also keeps, per indexable comparison i (``< <= > >= ==``), its entries
ordered by (key, operand) -- the composite :math:`ocomp_i = key (n+1) +
rank(h_i)` over the operand's high part h, and the *permutation* ``perm_i``
from that order to the tier's (key, ts) order (IE-Join's permutation array).
A query then has, per tier, three runs: its time window in (key, ts) order,
and for each comparison the entries whose h can pass (an inequality passes a
prefix or a suffix of the operand order: :math:`h \ge h_q` or
:math:`h \le h_q`, a superset of the exact answer that adds only the ties).
It walks the *shortest* run; a comparison run is intersected with the window
by position (``ws <= perm_i[j] < we``: no timestamp is read), and every
survivor gets the exact check (:func:`oij.reference.cond.cond_mask`), so the
answer is exactly the window's passing candidates.  The two tiers are
SPO-Join's: the small mutable ``delta`` (rebuilt on insert) and the
immutable ``main`` (rebuilt on merge), each with its own permutations.
``Store.visited`` counts the entries walked (the hardware-independent cost).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from oij.parallel.runtime.exactsum import ROW, UNIT_BITS, add_exact, add_units, piece_records, spill, split_units
from oij.parallel.runtime.ring import RESULT
from oij.reference.cond import cond_mask, operand_columns
from oij.spec.model import Comparison

NEG = np.iinfo(np.int64).min
"""The watermark before any watermark (-inf): below every valid timestamp."""

I64 = npt.NDArray[np.int64]
Cols = dict[str, npt.NDArray[Any]]
"""Named columns of equal length (a structure of arrays)."""

MERGE_RATIO = 0.25
MIN_DELTA = 512


def empty_column(t: Any, n: int) -> npt.NDArray[Any]:
    """An uninitialised column of n rows of column type ``t``: a dtype, or (dtype, shape) for a row of that shape."""
    return np.empty((n, *t[1]), dtype=t[0]) if isinstance(t, tuple) else np.empty(n, dtype=t)


def operand_spec(conds: int) -> dict[str, Any]:
    """The column types of the cond operands ``ch``/``cl`` a stored entry keeps (none without a cond)."""
    return {"ch": (np.float64, (conds,)), "cl": (np.float64, (conds,))} if conds else {}


def _empty(spec: dict[str, Any]) -> Cols:
    return {k: empty_column(v, 0) for k, v in spec.items()}


def _sorted(cols: Cols) -> Cols:
    if len(cols["ts"]) <= 1:
        return cols
    order = np.lexsort((cols["ts"], cols["key"]))
    return {k: v[order] for k, v in cols.items()}


class Tier:
    """Entries sorted by (key, ts) with the rank-compressed composite index (module docstring); with
    ``index``, also the cond index of those comparisons: (comparison, sorted h, ocomp in order, perm)."""

    __slots__ = ("cidx", "cols", "comp", "n", "sts")

    def __init__(self, cols: Cols, index: tuple[int, ...] = ()) -> None:
        self.cols = cols
        self.n = n = len(cols["ts"])
        self.sts: I64 = np.sort(cols["ts"])
        rank = np.searchsorted(self.sts, cols["ts"], "left")
        self.comp: I64 = cols["key"] * (n + 1) + rank
        self.cidx: list[tuple[int, npt.NDArray[np.float64], I64, I64]] = []
        for i in index if n else ():
            h = cols["ch"][:, i]
            shi = np.sort(h)
            oc = cols["key"] * (n + 1) + np.searchsorted(shi, h, "left")
            perm = np.argsort(oc, kind="stable")
            self.cidx.append((i, shi, oc[perm], perm))

    def ranges(self, qk: I64, qlo: I64, qhi: I64) -> tuple[I64, I64]:
        """Per query i, the index run [s_i, e_i) of entries with key qk_i and ts in [qlo_i, qhi_i]."""
        n = self.n
        rlo = np.searchsorted(self.sts, qlo, "left")
        rhi = np.searchsorted(self.sts, qhi, "right")
        base = qk * (n + 1)
        s = np.searchsorted(self.comp, base + rlo, "left")
        e = np.searchsorted(self.comp, base + np.maximum(rhi, rlo), "left")
        return s, e


def expand(s: I64, e: I64) -> tuple[I64, I64]:
    """Flatten runs: (query index, entry index) for every entry of every run."""
    cnt = e - s
    tot = int(cnt.sum())
    if tot == 0:
        z = np.empty(0, dtype=np.int64)
        return z, z
    qi = np.repeat(np.arange(len(s), dtype=np.int64), cnt)
    starts = np.cumsum(cnt) - cnt
    ei = s[qi] + (np.arange(tot, dtype=np.int64) - starts[qi])
    return qi, ei


def _indexed(t: Tier, qk: I64, s: I64, e: I64, qh: npt.NDArray[np.float64],
             dirs: tuple[str, ...]) -> tuple[I64, I64, int]:
    """(query idx, entry idx, entries walked): the window runs [s, e) of the queries, each walked through its
    shortest run, window or cond index (module docstring).  ``dirs[j]``: "ge" | "le" | "eq" for ``t.cidx[j]``."""
    n = t.n
    m = len(qk)
    best = e - s
    choice = np.full(m, -1, dtype=np.int64)
    base = qk * (n + 1)
    runs = []
    for j, (i, shi, ocs, _perm) in enumerate(t.cidx):
        h = qh[:, i]
        d = dirs[j]
        rlo = np.searchsorted(shi, h, "left") if d != "le" else np.zeros(m, dtype=np.int64)
        rhi = np.searchsorted(shi, h, "right") if d != "ge" else np.full(m, n, dtype=np.int64)
        cs = np.searchsorted(ocs, base + rlo, "left")
        ce = np.searchsorted(ocs, base + np.maximum(rhi, rlo), "left")
        better = ce - cs < best
        choice[better] = j
        best = np.minimum(best, ce - cs)
        runs.append((cs, ce))
    w = choice == -1
    qi, ei = expand(np.where(w, s, 0), np.where(w, e, 0))
    walked = len(qi)
    qis, eis = [qi], [ei]
    for j, (cs, ce) in enumerate(runs):
        c = choice == j
        if not c.any():
            continue
        qc, pc = expand(np.where(c, cs, 0), np.where(c, ce, 0))
        walked += len(qc)
        pos = t.cidx[j][3][pc]
        keep = (pos >= s[qc]) & (pos < e[qc])
        qis.append(qc[keep])
        eis.append(pos[keep])
    if len(qis) == 1:
        return qi, ei, walked
    return np.concatenate(qis), np.concatenate(eis), walked


class Store:
    """One side's two-tier state buffer (with ``index``: the cond index of those comparisons, module docstring)."""

    def __init__(self, spec: dict[str, Any], index: tuple[int, ...] = ()) -> None:
        self.spec = spec
        self.index = index
        self.main = Tier(_empty(spec))
        self.delta = Tier(_empty(spec))
        self.dead = 0  # flagged (final / expired) entries not yet dropped
        self.merges = 0
        self.visited = 0  # entries walked by match()

    def __len__(self) -> int:
        return self.main.n + self.delta.n

    def tiers(self) -> tuple[Tier, Tier]:
        return self.main, self.delta

    def insert(self, cols: Cols) -> None:
        d = self.delta.cols
        self.delta = Tier(_sorted({k: np.concatenate((d[k], cols[k])) for k in self.spec}), self.index)

    def match(self, qk: I64, qlo: I64, qhi: I64, qseq: I64, qh: npt.NDArray[np.float64] | None = None,
              dirs: tuple[str, ...] = ()) -> list[tuple[Tier, I64, I64]]:
        """Per tier, (tier, query idx, entry idx) of the stored entries in range delivered before the query.

        With the cond index and the queries' operands ``qh``, the result is the window's entries whose
        operands can pass (a superset of the cond's answer that :func:`oij.reference.cond.cond_mask` narrows).
        """
        out = []
        for t in (self.main, self.delta):
            if t.n == 0:
                continue
            if t.cidx and qh is not None:
                s, e = t.ranges(qk, qlo, qhi)
                qi, ei, walked = _indexed(t, qk, s, e, qh, dirs)
                self.visited += walked
            else:
                qi, ei = expand(*t.ranges(qk, qlo, qhi))
                self.visited += len(qi)
            if len(qi):
                keep = t.cols["seq"][ei] < qseq[qi]
                if not keep.all():
                    qi, ei = qi[keep], ei[keep]
                if len(qi):
                    out.append((t, qi, ei))
        return out

    def maybe_merge(self, live: Any, force: bool = False) -> None:
        """Merge delta into main, dropping entries for which ``live(cols)`` is False (IM-tree merge)."""
        if not force and self.delta.n < max(MIN_DELTA, int(MERGE_RATIO * self.main.n)) and (
            self.dead < max(MIN_DELTA, self.main.n // 2)
        ):
            return
        m, d = self.main.cols, self.delta.cols
        cols = {k: np.concatenate((m[k], d[k])) for k in self.spec}
        keep = live(cols)
        if not keep.all():
            cols = {k: v[keep] for k, v in cols.items()}
        self.main = Tier(_sorted(cols), self.index)
        self.delta = Tier(_empty(self.spec))
        self.dead = 0
        self.merges += 1


def _direction(op: str, stored_left: bool) -> str:
    """Which operand run of a stored entry can pass ``op``: "ge" (h >= the query's), "le" or "eq".

    Stored on the left (a base, ``k op q``): ``<``/``<=`` need k <= q.  Stored on the right (a probe,
    ``q op k``): ``<``/``<=`` need k >= q.  Comparing high parts only keeps the ties for the exact check.
    """
    if op == "==":
        return "eq"
    small = op in ("<", "<=")
    return ("le" if small else "ge") if stored_left else ("ge" if small else "le")


PROBE_COLS = {"id": np.int64, "ts": np.int64, "key": np.int64, "value": np.float64, "born": np.int64,
              "seq": np.int64}
BASE_COLS = {"id": np.int64, "ts": np.int64, "key": np.int64, "born": np.int64, "seq": np.int64,
             "fan": np.int32, "n": np.int64, "si": np.int64, "mn": np.float64, "mx": np.float64,
             "bmax": np.int64, "done": np.bool_}


class JoinState:
    """The OIJ logic of one replica over its delivery order.

    ``lo``/``hi`` are the inclusive offsets l', u' (:mod:`oij.spec.match`);
    ``partial``: keep per-base running aggregates and emit partial rows
    (aggregates, or a left join that must report unmatched bases);
    ``pairs``: emit pair records (pairs mode).
    """

    def __init__(self, me: int, lo: int, hi: int, *, pairs: bool, partial: bool,
                 cond: tuple[Comparison, ...] = (), cond_index: bool = False) -> None:
        self.me = me
        self.lo = lo
        self.hi = hi
        self.pairs = pairs
        self.partial = partial
        self.cond = cond
        extra = operand_spec(len(cond))
        idx = tuple(i for i, c in enumerate(cond) if c.op != "!=") if cond_index else ()
        # stored probes answer bases (x op k: k >= or <= x); stored bases answer probes (k op y)
        self.probe_dirs = tuple(_direction(cond[i].op, stored_left=False) for i in idx)
        self.base_dirs = tuple(_direction(cond[i].op, stored_left=True) for i in idx)
        self.bases = Store({**BASE_COLS, **extra}, idx)
        self.probes = Store({**PROBE_COLS, **extra}, idx)
        self.big: dict[int, int] = {}  # base id -> exact sum of its uncommon values, units of 2**-1074 (exactsum)
        self.seq = 0
        self.received = 0
        self.stored = 0
        self.comparisons = 0
        self.emitted_pairs = 0
        self.emitted_rows = 0
        self.state_max = 0
        self.trace_on = False
        self.trace: list[tuple[I64, I64]] = []  # (ids in delivery order, stored ids)

    # --------------------------------------------------------------- per batch

    def process(self, recs: npt.NDArray[Any]) -> list[npt.NDArray[Any]]:
        """Join one delivered batch; return result records (pairs and/or partial rows of non-owned bases)."""
        n = len(recs)
        if n == 0:
            return []
        seq = np.arange(self.seq, self.seq + n, dtype=np.int64)
        self.seq += n
        self.received += n
        out: list[npt.NDArray[Any]] = []
        isb = recs["side"] == 0
        mine = recs["owner"] == self.me
        if self.trace_on:
            self.trace.append((recs["id"].copy(), recs["id"][mine].copy()))
        self.stored += int(np.count_nonzero(mine))
        # a. store my probes first: a later base of this same batch must see them
        pm = ~isb & mine
        if pm.any():
            p = recs[pm]
            self.probes.insert({"id": p["id"], "ts": p["ts"], "key": p["key"], "value": p["value"],
                                "born": p["born"], "seq": seq[pm], **operand_columns(p, self.cond)})
        # b. bases query the stored probes
        bi = np.flatnonzero(isb)
        if len(bi):
            out.extend(self._bases(recs, bi, seq, mine))
        # d. probes query the stored bases (including the bases of this batch stored in c.)
        pi = np.flatnonzero(~isb)
        if len(pi) and len(self.bases):
            out.extend(self._probes(recs, pi, seq))
        self.state_max = max(self.state_max, len(self.bases) + len(self.probes))
        return out

    def _passing(self, hits: list[tuple[Tier, I64, I64]], q: npt.NDArray[Any],
                 probe_query: bool) -> list[tuple[Tier, I64, I64]]:
        """The candidates of ``hits`` that satisfy cond (all of them without one); counts every candidate."""
        out = []
        for t, qi, ei in hits:
            self.comparisons += len(qi)
            if self.cond:
                c = t.cols
                if probe_query:  # q are probes, the tier holds bases
                    keep = cond_mask(self.cond, c["ch"][ei], q["ch"][qi], q["cl"][qi])
                else:
                    keep = cond_mask(self.cond, q["ch"][qi], c["ch"][ei], c["cl"][ei])
                qi, ei = qi[keep], ei[keep]
            out.append((t, qi, ei))
        return out

    def _bases(self, recs: npt.NDArray[Any], bi: I64, seq: I64, mine: npt.NDArray[np.bool_]) -> list[Any]:
        out: list[Any] = []
        b = recs[bi]
        qk, qts, qseq = b["key"], b["ts"], seq[bi]
        m = len(bi)
        qh = b["ch"] if self.probes.index else None
        hits = self._passing(self.probes.match(qk, qts + self.lo, qts + self.hi, qseq, qh, self.probe_dirs), b,
                             False)
        cnt = np.zeros(m, dtype=np.int64)
        ssum = np.zeros(m, dtype=np.int64)
        mn = np.full(m, np.inf)
        mx = np.full(m, -np.inf)
        bmax = b["born"].copy()
        for t, qi, ei in hits:
            pc = t.cols
            if self.pairs:
                r = np.empty(len(qi), dtype=RESULT)
                r["a"] = b["id"][qi]
                r["b"] = pc["id"][ei]
                r["born"] = np.maximum(b["born"][qi], pc["born"][ei])
                r["kind"] = 0
                out.append(r)
                self.emitted_pairs += len(qi)
            if self.partial:
                v = pc["value"][ei]
                cnt += np.bincount(qi, minlength=m)
                self._add_sums(ssum, qi, v, b["id"], *split_units(v))
                np.minimum.at(mn, qi, v)
                np.maximum.at(mx, qi, v)
                np.maximum.at(bmax, qi, pc["born"][ei])
        bm = mine[bi]
        if bm.any():
            self.bases.insert({"id": b["id"][bm], "ts": qts[bm], "key": qk[bm], "born": b["born"][bm],
                               "seq": qseq[bm], "fan": b["fan"][bm].astype(np.int32), "n": cnt[bm],
                               "si": ssum[bm], "mn": mn[bm], "mx": mx[bm], "bmax": bmax[bm],
                               "done": np.zeros(int(bm.sum()), dtype=np.bool_),
                               **{k: v[bm] for k, v in operand_columns(b, self.cond).items()}})
        if self.partial and not bm.all():
            nm = ~bm
            out.append(self._rows(b["id"][nm], cnt[nm], ssum[nm], mn[nm], mx[nm], bmax[nm], b["fan"][nm]))
        return out

    def _probes(self, recs: npt.NDArray[Any], pi: I64, seq: I64) -> list[Any]:
        out: list[Any] = []
        p = recs[pi]
        pts = p["ts"]
        qh = p["ch"] if self.bases.index else None
        hits = self._passing(self.bases.match(p["key"], pts - self.hi, pts - self.lo, seq[pi], qh, self.base_dirs),
                             p, True)
        units, odd = split_units(p["value"]) if self.partial and hits else (None, None)  # once per probe
        for t, qi, ei in hits:
            bc = t.cols
            if self.pairs:
                r = np.empty(len(qi), dtype=RESULT)
                r["a"] = bc["id"][ei]
                r["b"] = p["id"][qi]
                r["born"] = np.maximum(bc["born"][ei], p["born"][qi])
                r["kind"] = 0
                out.append(r)
                self.emitted_pairs += len(qi)
            if self.partial:
                v = p["value"][qi]
                spill(bc["si"], bc["n"], bc["id"], ei, self.big)
                np.add.at(bc["n"], ei, 1)
                assert units is not None and odd is not None
                self._add_sums(bc["si"], ei, v, bc["id"], units[qi], odd[qi])
                np.minimum.at(bc["mn"], ei, v)
                np.maximum.at(bc["mx"], ei, v)
                np.maximum.at(bc["bmax"], ei, p["born"][qi])
        return out

    def _add_sums(self, si: I64, qi: I64, v: Any, ids: I64, units: I64, odd: npt.NDArray[np.bool_]) -> None:
        """Add the matched values ``v`` (``split_units(v)``: ``units``, ``odd``) to the sums of rows ``qi``
        (``si``, ids ``ids``) exactly (exactsum)."""
        if odd.any():
            add_exact(self.big, ids[qi[odd]], v[odd])
        if not add_units(si, qi, units):
            add_exact(self.big, ids[qi], np.ldexp(units.astype(np.float64), -UNIT_BITS))

    def _rows(self, ids: I64, n: I64, si: Any, mn: Any, mx: Any, born: I64, fan: Any) -> npt.NDArray[Any]:
        """Partial rows of bases ``ids``, preceded by the pieces of their exact sums (exactsum) if any."""
        s, extra = piece_records(self.big, ids)
        r = np.empty(len(ids), dtype=RESULT)
        r["a"] = ids
        r["b"] = -1
        r["n"] = n
        r["si"] = si
        r["s"] = s
        r["mn"] = mn
        r["mx"] = mx
        r["born"] = born
        r["fan"] = fan
        r["kind"] = ROW
        self.emitted_rows += len(ids)
        return np.concatenate((extra, r)) if len(extra) else r

    # --------------------------------------------------------------- watermarks

    def advance(self, w: Any, force: bool = False) -> list[npt.NDArray[Any]]:
        """Finalize my bases with W > hi(a) (``w``: a scalar, or per key code an array); purge; merge tiers.

        Returns the partial rows of the bases that became final (when ``partial``).
        ``force`` finalizes everything (the end of the stream).
        """
        out: list[npt.NDArray[Any]] = []
        for t in self.bases.tiers():
            c = t.cols
            if t.n == 0:
                continue
            if force:
                fin = ~c["done"]
            else:
                wk: Any = w if np.isscalar(w) else w[c["key"]]
                fin = ~c["done"] & (c["ts"] + self.hi < wk)
            if fin.any():
                if self.partial:
                    out.append(self._rows(c["id"][fin], c["n"][fin], c["si"][fin], c["mn"][fin], c["mx"][fin],
                                          c["bmax"][fin], c["fan"][fin]))
                c["done"] |= fin
                self.bases.dead += int(fin.sum())
        self.bases.maybe_merge(lambda cols: ~cols["done"], force=force)
        if not force:
            lo = self.lo

            def probe_live(cols: Cols) -> npt.NDArray[np.bool_]:
                wk: Any = w if np.isscalar(w) else w[cols["key"]]
                live: npt.NDArray[np.bool_] = (cols["ts"] - lo >= wk) | (wk == NEG)
                return live

            self.probes.maybe_merge(probe_live)
        return out
