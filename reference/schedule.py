r"""The judge up to schedule, fast: :func:`oij.spec.schedule.is_admissible_output` in :math:`O(n \log n)`.

It never searches over schedules.  Every fact an output states about a tuple is a *bound* on W:

* a tuple in a row (or, when the output lists late ids, a tuple not listed) is on time:
  :math:`W_j \le ts_j` (:math:`ts_j - 1` under Spark's rule ``le``); every W is at most the eager bound
  :math:`E_j`.  These are *upper* bounds;
* a listed late tuple has :math:`W_j \ge ts_j + 1` (``le``: :math:`ts_j`); the floor and the lag bound are
  *lower* bounds.

Monotone along a chain, an upper bound at k holds at every earlier j of the chain and a lower bound at i at
every later one, so the highest admissible schedule is the suffix minimum of the upper bounds,
:math:`W^*_j = \min_{k \ge j} U_k`, and the lowest the prefix maximum of the lower bounds,
:math:`W^{min}_j = \max_{i \le j} L_i` (:func:`chain_cummax`).  Some schedule meets all bounds iff
:math:`W^{min} \le W^*` everywhere; otherwise a lower bound at i exceeds an upper bound at some k at or after i
in its chain: the two tuples are the witness.

The pairs of an output only *remove* pairs: a missing pair (a, b) of matching tuples says
:math:`late(a) \lor late(b)`, a lower bound at a or at b.  :math:`W^*` is pointwise the highest admissible
schedule, so it makes every tuple late that any admissible schedule makes late: if a missing pair has both
tuples on time under :math:`W^*`, they are on time under every admissible schedule and no schedule explains the
output (the pair is the witness); otherwise :math:`W^*` itself explains every missing pair.  So for pairs and a
left join's null rows (which are pairs with the probes all missing) :math:`W^*` decides: the output is admissible
iff the result under :math:`W^*` equals it.  Aggregate rows are not monotone in the late set (a count needs some
probes on time and others late): when :math:`W^*` does not explain them, the judge tries the schedules that
keep some of the tuples on time that :math:`W^{min}` and :math:`W^*` treat differently (exact, exponential in
their number, and cut at a budget: the verdict then says *undetermined*).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from oij.reference.batchjoin import compute_pair_columns
from oij.spec.batch import Results
from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import BASE, NO_WATERMARK, Key, Query, StreamTuple
from oij.spec.profiles import Profile
from oij.spec.schedule import Family

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
NEG = np.iinfo(np.int64).min + 1
"""-inf as an int64 (below every timestamp and every bound)."""
POS = np.iinfo(np.int64).max
"""+inf as an int64 (no upper bound yet)."""
AGGREGATE_BUDGET = 4096
"""Schedules the aggregate search may try before it says *undetermined*."""
TOLERANCE = 1e-9
"""Relative tolerance on aggregate values, as ``oij check --got`` compares them."""


def _close(x: Any, y: Any, tol: float) -> bool:
    """Both null, equal, or within ``tol`` relative (``oij.spark.compare.close``)."""
    if x is None or y is None:
        return x is None and y is None
    return bool(x == y or abs(x - y) <= tol * max(abs(x), abs(y)))


@dataclass
class TupleColumns:
    """The tuples in input order as columns: ``is_base``, ``ids``, ``ts``, ``key`` (int codes into ``keys``)
    and ``value``."""

    is_base: Bools
    ids: I64
    ts: I64
    key: I64
    keys: list[Key]
    value: npt.NDArray[np.float64]

    @staticmethod
    def of(tuples: Sequence[StreamTuple]) -> TupleColumns:
        """Columns of ``tuples`` (input order kept)."""
        codes: dict[tuple[str, Key], int] = {}
        keys: list[Key] = []
        kc = np.empty(len(tuples), np.int64)
        for j, t in enumerate(tuples):
            k = (type(t.key).__name__, t.key)
            c = codes.get(k)
            if c is None:
                c = codes[k] = len(keys)
                keys.append(t.key)
            kc[j] = c
        return TupleColumns(
            np.fromiter((t.side == BASE for t in tuples), np.bool_, len(tuples)),
            np.fromiter((t.id for t in tuples), np.int64, len(tuples)),
            np.fromiter((t.ts for t in tuples), np.int64, len(tuples)), kc, keys,
            np.fromiter((t.value for t in tuples), np.float64, len(tuples)))

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class Witness:
    """Why no admissible schedule explains the output: ``kind`` (``row``: a row no schedule gives;
    ``duplicate``; ``missing``: a pair of two tuples on time under every admissible schedule; ``order``: two tuples
    whose treatments no monotone W allows; ``bound``: a tuple listed late that the eager bound keeps on time;
    ``aggregate``: an aggregate row no schedule gives), the tuples (input positions) and a sentence."""

    kind: str
    positions: list[int]
    text: str
    row: dict[str, Any] = field(default_factory=dict)


@dataclass
class Judgement:
    """The verdict and what the judge inferred.  ``w_max`` is the loosest admissible schedule (the highest W at
    every tuple, the most tuples late), ``w_tight`` the tightest that explains the output (only the tuples the
    output forces late are late); both None when no schedule explains it."""

    admissible: bool
    undetermined: bool = False
    witnesses: list[Witness] = field(default_factory=list)
    w_max: I64 | None = None
    w_tight: I64 | None = None
    eager: I64 | None = None
    stats: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------- the bounds
def eager_bounds(c: TupleColumns, q: Query, p: Profile, f: Family,
                 file_watermarks: I64 | None = None) -> I64:
    """:func:`oij.spec.schedule.eager_bounds` as columns (NEG for -inf)."""
    n = len(c)
    if q.lateness is None:
        assert file_watermarks is not None
        e = np.maximum(file_watermarks.astype(np.int64), NEG)
    else:
        d = q.lateness + p.lateness_shift

        def excl_prefix_max(mask: Bools) -> I64:
            m = np.where(mask, c.ts, NEG)
            acc = np.maximum.accumulate(m) if n else m
            out = np.empty(n, np.int64)
            if n:
                out[0] = NEG
                out[1:] = acc[:-1]
            return out

        mb, mp = excl_prefix_max(c.is_base), excl_prefix_max(~c.is_base)
        own = np.where(c.is_base, mb, mp)
        if f.order == "arrival":
            m = np.maximum(mb, mp) if p.side_combine == "global" else \
                np.minimum(mb, mp) if p.side_combine == "min" else own
        elif p.side_combine == "global":
            all_b = c.ts[c.is_base].max() if c.is_base.any() else NEG
            all_p = c.ts[~c.is_base].max() if (~c.is_base).any() else NEG
            m = np.maximum(own, np.where(c.is_base, all_p, all_b))
        else:
            m = own
        e = np.where(m == NEG, NEG, m - d)
    if f.floor is not None:
        e = np.maximum(e, f.floor)
    return e.astype(np.int64)


def lag_floors(e: I64, f: Family) -> I64:
    """:func:`oij.spec.schedule.lag_floor` of every tuple."""
    lo = np.full(len(e), NEG if f.floor is None else f.floor, np.int64)
    if f.lag_time is not None:
        lo = np.maximum(lo, np.where(e == NEG, NEG, e - f.lag_time))
    if f.lag_tuples is not None and f.lag_tuples < len(e):
        lo[f.lag_tuples:] = np.maximum(lo[f.lag_tuples:], e[:len(e) - f.lag_tuples])
    return lo


def chain_ids(c: TupleColumns, f: Family) -> I64:
    """A dense chain number per tuple (:func:`oij.spec.schedule.chain_of`)."""
    side = (~c.is_base).astype(np.int64)
    if f.order == "arrival":
        return np.zeros(len(c), np.int64)
    if f.order == "input":
        return side
    if f.order == "instance":
        assert f.instances is not None
        inst = np.array([f.instances(k) for k in c.keys], np.int64)
        return inst[c.key] * 2 + side if len(c) else side
    return c.key * 2 + side


def chain_cummax(v: I64, chain: I64, reverse: bool = False) -> I64:
    r"""The running maximum of ``v`` along each chain in input order (``reverse``: from the end of the chain,
    i.e. the suffix maximum).  :math:`O(n \log n)`: values ranked, each chain offset above the one before, one
    ``np.maximum.accumulate``."""
    n = len(v)
    if n == 0:
        return v.copy()
    pos = np.arange(n)
    order = np.lexsort(((-pos if reverse else pos), chain))
    vals, inv = np.unique(v[order], return_inverse=True)
    cs = chain[order]
    _, cdense = np.unique(cs, return_inverse=True)
    m = len(vals)
    acc = np.maximum.accumulate(cdense.astype(np.int64) * m + inv)
    out = np.empty(n, np.int64)
    out[order] = vals[acc - cdense.astype(np.int64) * m]
    return out


def as_spec_schedule(w: I64) -> list[int]:
    """A schedule as :mod:`oij.spec.schedule` writes it (``NO_WATERMARK`` for -inf)."""
    return [NO_WATERMARK if x <= NEG else int(x) for x in w]


def late_threshold(c: TupleColumns, p: Profile) -> I64:
    """The lowest W under which each tuple is late: ts + 1 (``lt``) or ts (``le``)."""
    return c.ts + (0 if p.late_rule == "le" else 1)


def is_late_at(c: TupleColumns, w: I64, p: Profile) -> Bools:
    """Each tuple's treatment under schedule ``w``: late iff W reaches :func:`late_threshold`."""
    return w >= late_threshold(c, p)


# ------------------------------------------------------------------------------------------------ the output
@dataclass
class OutputColumns:
    """An output as columns: pairs (``pair_base``, ``pair_probe``; ``pair_null`` marks a left join's null row,
    whose ``pair_probe`` cell means nothing), aggregate rows, late ids."""

    pair_base: I64
    pair_probe: I64
    pair_null: Bools
    agg_base: I64
    agg_count: I64
    agg_value: list[Any]
    late: I64

    @staticmethod
    def of(r: Results) -> OutputColumns:
        """Columns of ``r``."""
        return OutputColumns(
            np.array([a for a, _ in r.pairs], np.int64), np.array([0 if b is None else b for _, b in r.pairs],
                                                                  np.int64),
            np.array([b is None for _, b in r.pairs], np.bool_),
            np.array([a for a, _, _ in r.aggregates], np.int64), np.array([n for _, n, _ in r.aggregates], np.int64),
            [v for _, _, v in r.aggregates], np.array(r.late, np.int64))


def _positions(c: TupleColumns) -> Callable[[I64], I64]:
    order = np.argsort(c.ids, kind="stable")
    sids = c.ids[order]

    def pos(ids: I64) -> I64:
        i = np.searchsorted(sids, ids)
        i = np.minimum(i, max(len(sids) - 1, 0))
        ok = (sids[i] == ids) if len(sids) else np.zeros(len(ids), np.bool_)
        return np.where(ok, order[i] if len(sids) else -1, -1)

    return pos


def _w(x: Any) -> str:
    """A watermark for a sentence: -inf below every timestamp."""
    return "-inf" if x <= NEG else str(int(x))


def _dups(x: I64) -> I64:
    u, counts = np.unique(x, return_counts=True)
    return u[counts > 1]


class _Judge:
    """One judgement (:func:`judge`): the bounds, the witnesses, the schedules."""

    def __init__(self, c: TupleColumns, q: Query, p: Profile, f: Family, got: OutputColumns,
                 file_watermarks: I64 | None, first: int, tol: float = TOLERANCE) -> None:
        self.c, self.q, self.p, self.f, self.got, self.first, self.tol = c, q, p, f, got, first, tol
        self.n = len(c)
        self.pos = _positions(c)
        self.lo, self.hi = lower_offset(q), upper_offset(q)
        self.e = eager_bounds(c, q, p, f, file_watermarks)
        self.chain = chain_ids(c, f)
        self.thr = late_threshold(c, p)
        self.judge_late = len(got.late) > 0
        self.witnesses: list[Witness] = []

    # --- step 1: rows no schedule gives
    def _row_witness(self, kind: str, positions: list[int], text: str, row: dict[str, Any]) -> None:
        if len(self.witnesses) < self.first:
            self.witnesses.append(Witness(kind, positions, text, row))

    def rows(self) -> tuple[Bools, I64, I64]:
        """Checks every row against the input; returns the tuples the rows keep on time and the pairs' positions
        (base, probe; -1 for a null probe)."""
        c, g = self.c, self.got
        on = np.zeros(self.n, np.bool_)
        null = g.pair_null
        pb, pp = self.pos(g.pair_base), self.pos(g.pair_probe)
        pp = np.where(null, -1, pp)
        if len(g.pair_base) and self.q.aggregate is not None:
            self._row_witness("row", [], "a pair row in the output of an aggregate query", {"kind": "pair"})
        bad_base = (pb < 0) | ~c.is_base[np.maximum(pb, 0)]
        bad_probe = ~null & ((pp < 0) | c.is_base[np.maximum(pp, 0)])
        bad_null = null & (self.q.join != "left")
        ok = ~(bad_base | bad_probe | bad_null)
        b, r = np.maximum(pb, 0), np.maximum(pp, 0)
        d = c.ts[r] - c.ts[b]
        nomatch = ok & ~null & ((c.key[b] != c.key[r]) | (d < self.lo) | (d > self.hi))
        for i in np.flatnonzero(~ok | nomatch)[:self.first]:
            a_id, b_id = int(g.pair_base[i]), (None if null[i] else int(g.pair_probe[i]))
            why = ("no base tuple has this id" if bad_base[i] else "no probe tuple has this id" if bad_probe[i]
                   else "a null row in an inner join" if bad_null[i] else
                   "the two tuples have different keys" if c.key[b[i]] != c.key[r[i]] else
                   f"the probe is outside the base's window (b.ts - a.ts = {int(d[i])}, window "
                   f"[{self.lo}, {self.hi}])")
            self._row_witness("row", [int(x) for x in (pb[i], pp[i]) if x >= 0],
                              f"pair ({a_id}, {b_id}): no schedule gives it: {why}",
                              {"kind": "pair", "base": a_id, "probe": b_id})
        good = ok & ~nomatch
        code = np.where(null, -1, pp) + 1 + pb * (self.n + 1)
        for dcode in _dups(code[good])[:self.first]:
            i = int(np.flatnonzero(good & (code == dcode))[0])
            a_id, b_id = int(g.pair_base[i]), (None if null[i] else int(g.pair_probe[i]))
            self._row_witness("duplicate", [int(pb[i])] + ([int(pp[i])] if not null[i] else []),
                              f"pair ({a_id}, {b_id}) appears {int((code[good] == dcode).sum())} times; every "
                              "schedule gives it at most once", {"kind": "pair", "base": a_id, "probe": b_id})
        both = np.intersect1d(pb[good & null], pb[good & ~null])
        for x in both[:self.first]:
            self._row_witness("row", [int(x)], f"base {int(c.ids[x])} has a null row and pairs",
                              {"kind": "pair", "base": int(c.ids[x]), "probe": None})
        on[pb[good]] = True
        on[pp[good & ~null]] = True
        ab = self.pos(g.agg_base)
        bad_agg = (ab < 0) | ~c.is_base[np.maximum(ab, 0)]
        if len(g.agg_base) and self.q.aggregate is None:
            self._row_witness("row", [], "an aggregate row in the output of a pairs query", {"kind": "aggregate"})
        for i in np.flatnonzero(bad_agg)[:self.first]:
            self._row_witness("row", [], f"aggregate row of {int(g.agg_base[i])}: no base tuple has this id",
                              {"kind": "aggregate", "base": int(g.agg_base[i])})
        for x in _dups(ab[~bad_agg])[:self.first]:
            self._row_witness("duplicate", [int(x)], f"base {int(c.ids[x])} has several aggregate rows",
                              {"kind": "aggregate", "base": int(c.ids[x])})
        on[ab[~bad_agg]] = True
        self.on = on
        lp = self.pos(g.late)
        for i in np.flatnonzero(lp < 0)[:self.first]:
            self._row_witness("row", [], f"late id {int(g.late[i])}: no tuple has this id",
                              {"kind": "late", "id": int(g.late[i])})
        for x in _dups(lp[lp >= 0])[:self.first]:
            self._row_witness("duplicate", [int(x)], f"late id {int(c.ids[x])} is listed more than once",
                              {"kind": "late", "id": int(c.ids[x])})
        self.listed_late = np.zeros(self.n, np.bool_)
        self.listed_late[lp[lp >= 0]] = True
        for x in np.flatnonzero(self.listed_late & on)[:self.first]:
            self._row_witness("row", [int(x)], f"tuple {int(c.ids[x])} is listed late and appears in a row",
                              {"kind": "late", "id": int(c.ids[x])})
        return on, pb, pp

    # --- step 2: bounds and the two extreme schedules
    def bounds(self, on: Bools) -> tuple[I64, I64]:
        """Upper bounds U (eager bound, on-time tuples) and lower bounds L (floor, lag, listed late)."""
        u = self.e.copy()
        keep = on | (~self.listed_late if self.judge_late else np.zeros(self.n, np.bool_))
        u = np.where(keep, np.minimum(u, self.thr - 1), u)
        low = lag_floors(self.e, self.f)
        low = np.where(self.listed_late, np.maximum(low, self.thr), low)
        return u, low

    def order_witness(self, u: I64, low: I64, w_max: I64, w_min: I64) -> None:
        """The first tuple where the lowest schedule exceeds the highest: the lower bound's tuple and the upper
        bound's tuple of the same chain."""
        bad = np.flatnonzero(w_min > w_max)
        j = int(bad[0])
        ch = np.flatnonzero(self.chain == self.chain[j])
        before = ch[ch <= j]
        after = ch[ch >= j]
        i = int(before[np.flatnonzero(low[before] == w_min[j])[0]])
        k = int(after[np.flatnonzero(u[after] == w_max[j])[0]])
        c = self.c
        why_i = "listed late" if self.listed_late[i] else "the lag bound"
        why_k = (f"the eager bound E = {_w(self.e[k])}" if u[k] == self.e[k] else
                 f"on time (in a row, or not listed late): W <= {int(self.thr[k]) - 1}")
        if i == k and self.listed_late[i]:
            self.witnesses.append(Witness(
                "bound", [i], f"tuple {int(c.ids[i])} (ts {int(c.ts[i])}) is listed late, but no admissible W "
                f"reaches {int(self.thr[i])} at its arrival (the eager bound there is {_w(self.e[i])})",
                {"kind": "late", "id": int(c.ids[i])}))
            return
        self.witnesses.append(Witness(
            "order", sorted({i, k}), f"tuple {int(c.ids[i])} (ts {int(c.ts[i])}, input position {i}) needs "
            f"W >= {int(low[i])} ({why_i}), but tuple {int(c.ids[k])} (ts {int(c.ts[k])}, position {k}, "
            f"at or after it in the same chain) needs W <= {int(u[k])} ({why_k}): no monotone W allows both",
            {"kind": "late", "id": int(c.ids[i])}))

    # --- step 3: the result under a schedule
    def pairs_under(self, on_time: Bools) -> tuple[I64, I64]:
        """The positions (base, probe) of every pair of on-time tuples."""
        c = self.c
        a = np.flatnonzero(on_time & c.is_base)
        b = np.flatnonzero(on_time & ~c.is_base)
        return compute_pair_columns(a, c.key[a], c.ts[a], b, c.key[b], c.ts[b], self.lo, self.hi)

    def aggregates_under(self, on_time: Bools) -> Results:
        """The aggregate rows over the on-time tuples (the reference oracle on them, nothing late)."""
        from dataclasses import replace

        from oij.reference.oracle import run_events
        from oij.spec.model import End

        c = self.c
        q0 = replace(self.q, lateness=None, channels=1)
        evs = [StreamTuple(BASE if c.is_base[j] else "probe", int(c.ids[j]), int(c.ts[j]), c.keys[c.key[j]],
                           float(c.value[j])) for j in np.flatnonzero(on_time)]
        return run_events([*evs, End()], q0)

    def aggregates_match(self, on_time: Bools) -> list[int]:
        """The positions of the bases whose aggregate row under ``on_time`` differs from the output's."""
        want = {a: (n, v) for a, n, v in self.aggregates_under(on_time).aggregates}
        got = {int(a): (int(n), v) for a, n, v in zip(self.got.agg_base, self.got.agg_count, self.got.agg_value,
                                                     strict=True)}
        bad = [a for a in want.keys() | got.keys()
               if a not in want or a not in got or want[a][0] != got[a][0]
               or not _close(want[a][1], got[a][1], self.tol)]
        return sorted(int(x) for x in self.pos(np.array(bad, np.int64)))


def judge(c: TupleColumns, q: Query, p: Profile, f: Family, got: Results | OutputColumns,
          file_watermarks: I64 | None = None, first: int = 10) -> Judgement:
    """Decide whether some schedule of family ``f`` explains ``got`` (module docstring); the schedules it inferred
    and a report of what it saw (``stats``)."""
    g = got if isinstance(got, OutputColumns) else OutputColumns.of(got)
    if q.cond:
        raise ValueError("judging up to schedule does not support a joining condition (cond)")
    if not p.end_flush and (q.aggregate is not None or q.join == "left"):
        raise ValueError(f"profile {p.name}: rows that appear only at eviction (no flush at the end) with an "
                         "aggregate or a left join are not judged up to schedule")
    j = _Judge(c, q, p, f, g, file_watermarks, first)
    on, pb, pp = j.rows()
    if j.witnesses:
        return Judgement(False, witnesses=j.witnesses, eager=j.e)
    u, low = j.bounds(on)
    w_max = chain_cummax(-u, j.chain, reverse=True) * -1
    w_min = chain_cummax(low, j.chain)
    if (w_min > w_max).any():
        j.order_witness(u, low, w_max, w_min)
        return Judgement(False, witnesses=j.witnesses, eager=j.e, w_max=None)
    late = is_late_at(c, w_max, p)
    res = _explain_rows(j, late, pb, pp, w_max, w_min)
    return res


def judge_under(c: TupleColumns, q: Query, p: Profile, ws: I64, got: Results | OutputColumns,
                first: int = 10) -> Judgement:
    """Whether the one schedule ``ws`` (a recorded one: W at each tuple, NEG for -inf) gives ``got``: the family
    of that schedule alone, every W both the upper and the lower bound.  A row whose tuple ``ws`` makes late, a
    late id it keeps on time (when ``got`` lists late ids), a missing pair: each a witness."""
    g = got if isinstance(got, OutputColumns) else OutputColumns.of(got)
    j = _Judge(c, q, p, Family("arrival"), g, None, first)
    j.e = ws.astype(np.int64)
    on, pb, pp = j.rows()
    if j.witnesses:
        return Judgement(False, witnesses=j.witnesses, eager=j.e)
    late = is_late_at(c, j.e, p)
    wit = [Witness("order", [int(x)], f"tuple {int(c.ids[x])} (ts {int(c.ts[x])}) is in a row, but the recorded W "
                   f"{_w(j.e[x])} makes it late", {"kind": "pair"}) for x in np.flatnonzero(late & on)[:first]]
    if j.judge_late:
        wit += [Witness("late", [int(x)], f"tuple {int(c.ids[x])}: {'late' if late[x] else 'on time'} under the "
                        f"recorded W {_w(j.e[x])}, but the output says otherwise", {"kind": "late"})
                for x in np.flatnonzero(late != j.listed_late)[:first]]
    if wit:
        return Judgement(False, witnesses=wit[:first], eager=j.e)
    return _explain_rows(j, late, pb, pp, j.e, j.e)


def _pair_codes(n: int, b: I64, r: I64) -> I64:
    return b * (n + 1) + r + 1


def _explain_rows(j: _Judge, late: Bools, pb: I64, pp: I64, w_max: I64, w_min: I64) -> Judgement:
    c, g, n = j.c, j.got, j.n
    on_time = ~late
    forced = j.listed_late.copy()
    missing_w: list[Witness] = []
    if j.q.aggregate is None:
        rb, rp = j.pairs_under(on_time)
        want = _pair_codes(n, rb, rp)
        null = g.pair_null
        have = _pair_codes(n, pb[~null], pp[~null])
        miss = np.setdiff1d(want, have)
        for code in miss[:j.first]:
            b, r = int(code // (n + 1)), int(code % (n + 1)) - 1
            missing_w.append(_missing_witness(j, b, r, w_max))
        if j.q.join == "left":
            matched = np.zeros(n, np.bool_)
            matched[rb] = True
            want_null = np.flatnonzero(on_time & c.is_base & ~matched)
            have_null = pb[null]
            for x in np.setdiff1d(want_null, have_null)[:j.first]:
                missing_w.append(Witness("missing", [int(x)], f"base {int(c.ids[x])} is on time under every "
                                         "admissible schedule and meets no on-time probe, yet its null row is "
                                         "absent", {"kind": "pair", "base": int(c.ids[x]), "probe": None}))
        # forced late: late under W* with an on-time partner whose pair is absent (a partner that would be on time)
        ab = np.flatnonzero(c.is_base)
        ap = np.flatnonzero(~c.is_base)
        xb, xp = compute_pair_columns(ab, c.key[ab], c.ts[ab], ap, c.key[ap], c.ts[ap], j.lo, j.hi)
        absent = ~np.isin(_pair_codes(n, xb, xp), have)
        one_late = absent & (late[xb] != late[xp])
        forced[xb[one_late & late[xb]]] = True
        forced[xp[one_late & late[xp]]] = True
        if j.q.join == "left":  # a late base of a left join: late because its rows are absent
            forced |= late & c.is_base & ~np.isin(np.arange(n), pb)
        # an absent pair both of whose tuples W* makes late needs one of them late: when the forced tuples leave
        # both on time, the later-arriving one is forced (it raises the fewest W along its chain)
        both = absent & late[xb] & late[xp]
        if both.any():
            w_t = chain_cummax(np.maximum(lag_floors(j.e, j.f), np.where(forced, j.thr, NEG)), j.chain)
            late_t = is_late_at(c, w_t, j.p)
            open_ = both & ~late_t[xb] & ~late_t[xp]
            forced[np.maximum(xb[open_], xp[open_])] = True
        if missing_w:
            return Judgement(False, witnesses=missing_w, eager=j.e, w_max=w_max)
        stats_extra: dict[str, Any] = {"rows_checked": len(g.pair_base), "pairs_under_w_max": len(want)}
    else:
        # aggregate rows are not monotone in the late set: the tightest explaining schedule reported is the one
        # that keeps late every tuple the explaining schedule found makes late (no tuple called undetermined)
        forced |= late
        bad = j.aggregates_match(on_time)
        stats_extra = {"rows_checked": len(g.agg_base)}
        if bad:
            found = search_aggregates(j, w_max, w_min, late)
            if found is None or isinstance(found, int):
                text = (f"aggregate row of base {int(c.ids[bad[0]])}: no admissible schedule gives the output's "
                        "rows" if found is None else
                        f"the search for a schedule that gives the aggregate rows stopped after {found} schedules "
                        "(undetermined)")
                return Judgement(False, undetermined=isinstance(found, int),
                                 witnesses=[Witness("aggregate", bad[:1], text,
                                                    {"kind": "aggregate", "base": int(c.ids[bad[0]])})],
                                 eager=j.e, w_max=w_max)
            w_max, late = found
            forced = late.copy()
    w_tight = chain_cummax(np.maximum(lag_floors(j.e, j.f), np.where(forced, j.thr, NEG)), j.chain)
    return Judgement(True, eager=j.e, w_max=w_max, w_tight=w_tight,
                     stats={**_stats(j, w_max, w_tight, late, forced), **stats_extra})


def _missing_witness(j: _Judge, b: int, r: int, w_max: I64) -> Witness:
    c = j.c

    def why(x: int) -> str:
        if j.e[x] < j.thr[x]:
            return f"not late even under the eager bound E = {_w(j.e[x])}"
        return f"kept on time by a row of itself or of a later tuple of its chain (W <= {int(w_max[x])})"

    text = (f"pair ({int(c.ids[b])}, {int(c.ids[r])}) is absent, but both tuples are on time under every "
            f"admissible schedule: base ts {int(c.ts[b])}, {why(b)}; probe ts {int(c.ts[r])}, {why(r)}")
    if j.p.purge == "flink-timers" and (c.ts[r] == c.ts[b] + max(j.hi, 0) or c.ts[b] == c.ts[r] - min(j.lo, 0)):
        text += ("; the pair is at the edge of Flink's cleanup timer: Flink loses it when the later tuple arrives "
                 "with ts = W after the timer fired (docs/findings.rst), an edge this family does not include")
    return Witness("missing", [b, r], text, {"kind": "pair", "base": int(c.ids[b]), "probe": int(c.ids[r])})


def search_aggregates(j: _Judge, w_max: I64, w_min: I64, late: Bools) -> tuple[I64, Bools] | int | None:
    """A schedule that gives the output's aggregate rows: the highest one under extra upper bounds that keep a
    subset S of the *flexible* probes on time (late under W*, on time under W^min); every admissible schedule's
    treatment is one such subset's (the highest schedule keeping exactly its on-time flexible probes on time
    makes the others late, as W* does).  None when no subset works; the number tried when the budget ran out."""
    c = j.c
    flex = np.flatnonzero(late & ~is_late_at(c, w_min, j.p) & ~c.is_base)
    u0, _ = j.bounds(j.on)
    tried = 0

    def attempt(keep: list[int]) -> tuple[I64, Bools] | None:
        u = u0.copy()
        if keep:
            ks = np.array(keep, np.int64)
            u[ks] = np.minimum(u[ks], j.thr[ks] - 1)
        w = chain_cummax(-u, j.chain, reverse=True) * -1
        if (w_min > w).any():
            return None
        lt = is_late_at(c, w, j.p)
        return (w, lt) if not j.aggregates_match(~lt) else None

    # subsets by size: the smallest change from W* first
    from itertools import combinations

    for size in range(1, len(flex) + 1):
        for keep in combinations([int(x) for x in flex], size):
            tried += 1
            if tried > AGGREGATE_BUDGET:
                return tried - 1
            r = attempt(list(keep))
            if r is not None:
                return r
    return None


def _quantiles(x: npt.NDArray[Any]) -> dict[str, float]:
    if len(x) == 0:
        return {}
    qs = np.quantile(x, [0.5, 0.9, 0.99, 1.0])
    return {"p50": float(qs[0]), "p90": float(qs[1]), "p99": float(qs[2]), "max": float(qs[3])}


def _stats(j: _Judge, w_max: I64, w_tight: I64, late_max: Bools, forced: Bools) -> dict[str, Any]:
    c, e = j.c, j.e
    late_eager = is_late_at(c, e, j.p)
    late_tight = is_late_at(c, w_tight, j.p)
    finite = (e > NEG) & (w_max > NEG)
    lag_time = (e - w_max)[finite]
    # lag in tuples: how far back in input order the eager bound was last at or below W*
    em = np.maximum.accumulate(e) if len(e) else e
    last_at = np.searchsorted(em, w_max, side="right") - 1
    lag_pos = np.maximum(np.arange(len(e)) - last_at, 0)[finite]
    return {
        "tuples": int(j.n),
        "family": j.f.order,
        "late_under_eager_bound": int(late_eager.sum()),
        "late_under_loosest": int(late_max.sum()),
        "late_under_tightest": int(late_tight.sum()),
        "forced_late": int(forced.sum()),
        "touched": int((late_eager != late_tight).sum()),
        "undetermined": int((late_max & ~late_tight).sum()),
        "lag_time_loosest": _quantiles(lag_time),
        "lag_positions_loosest": _quantiles(lag_pos),
        "w_moves_loosest": int((np.diff(w_max) != 0).sum()) if j.f.order == "arrival" and len(w_max) else None,
    }


__all__ = [
    "AGGREGATE_BUDGET",
    "Judgement",
    "OutputColumns",
    "TupleColumns",
    "Witness",
    "as_spec_schedule",
    "chain_cummax",
    "chain_ids",
    "eager_bounds",
    "is_late_at",
    "judge",
    "judge_under",
    "lag_floors",
    "late_threshold",
    "search_aggregates",
]
