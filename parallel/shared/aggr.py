r"""Window aggregation over timestamp-ordered runs: recomputation and incremental (subtract-on-evict, two stacks).

Used by Scale-OIJ (:mod:`oij.parallel.shared.scaleoij`) and, for the exact sums, by
Key-OIJ (:mod:`oij.parallel.shared.keyoij`).  Pure numpy; no process, no shared memory.

Setting.  A *run* holds entries sorted by (key, ts) with values ``v``.  A
batch of base tuples sorted by (key, ts) gives, per base ``i``, the index run
``[s_i, e_i)`` of its window in the run; because both the run and the bases
are sorted by (key, ts), ``s`` and ``e`` are non-decreasing over the batch --
consecutive windows of a key *slide* (Scale-OIJ Fig. 15).

Exactness.  The oracle's sums are exact (:mod:`oij.reference.exact`).  Sums
here are exact too: values that are multiples of :math:`2^{-10}` with
:math:`|v| < 2^{30}` are summed as int64 multiples of :math:`2^{-10}` (adding
and subtracting integers leaves no residue, so subtract-on-evict cannot
drift), and the int64 total is rounded once to float64; any other value
(e.g. 1e16 next to 1.0, or 1e-300) sends the windows of that run through the
exact scaled-integer path of the reference (:func:`exact_sums`), counted in
``fallback``.  Count, min and max are exact anyway.

Incremental methods (``incremental=True``):

* count/sum/avg -- subtract-on-evict: :math:`Agg_i = Agg_{i-1} \oplus
  (\text{entries entering}) \ominus (\text{entries leaving})`, the add and
  subtract terms taken from one running prefix over the covered part of the
  run, so every entry is read once (when it enters), not once per window.
* min/max (not invertible) -- the *two-stacks* method: the covered part of
  the run is cut at *flip points* :math:`f_0 < f_1 < \dots`; a window that
  starts before :math:`f_m` ends at or after it (and not after
  :math:`f_{m+1}`), so its minimum is the minimum of a suffix-minimum of
  :math:`[f_{m-1}, f_m)` and a prefix-minimum of :math:`[f_m, f_{m+1})`.  A
  new flip point is taken when a window starts at or after the current one
  (the front stack is empty): it is that window's end.  Every entry is read
  at most twice.

``work`` counts entries read by the aggregation (hardware independent);
recomputation reads :math:`\sum_i (e_i - s_i)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from oij.parallel.runtime.store import expand
from oij.reference.exact import scaled, to_float

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

SCALE = 1024.0
LIMIT = float(1 << 30)


def int_domain(v: F64) -> I64 | None:
    """``v * 2**10`` as exact int64 if every value is a multiple of 2**-10 below 2**30 in magnitude, else None."""
    if len(v) == 0:
        return np.empty(0, dtype=np.int64)
    x = v * SCALE
    if not (np.all(np.abs(v) < LIMIT) and np.all(x == np.rint(x))):
        return None
    return x.astype(np.int64)


def int_to_float(total: I64) -> F64:
    """Round exact int64 totals (units of 2**-10) once to float64."""
    out: F64 = total.astype(np.float64) / SCALE
    return out


def exact_sums(groups: I64, values: F64, m: int) -> list[int]:
    """Per group ``0..m-1``, the exact sum of its values as an integer scaled by 2**1074 (reference path)."""
    tot = [0] * m
    for g, x in zip(groups.tolist(), values.tolist(), strict=True):
        tot[g] += scaled(x)
    return tot


@dataclass
class Acc:
    """Per-base accumulators over several runs (one run after another); see ``finish``."""

    m: int
    kind: str | None  # count | sum | avg | min | max | None (pairs only)
    n: I64 = field(init=False)
    si: I64 = field(init=False)  # int64 sums in units of 2**-10
    big: dict[int, int] = field(default_factory=dict)  # base -> exact scaled-by-2**1074 extra sum (fallback)
    mn: F64 = field(init=False)
    mx: F64 = field(init=False)
    work: int = 0  # entries read by the aggregation
    recompute_work: int = 0  # entries recomputation would read
    fallback: int = 0  # windows summed on the exact reference path

    def __post_init__(self) -> None:
        self.n = np.zeros(self.m, dtype=np.int64)
        self.si = np.zeros(self.m, dtype=np.int64)
        self.mn = np.full(self.m, np.inf)
        self.mx = np.full(self.m, -np.inf)

    def add_run(self, v: F64, s: I64, e: I64, incremental: bool) -> None:
        """Fold the windows ``[s_i, e_i)`` of one run (``s``, ``e`` non-decreasing) into the accumulators."""
        cnt = e - s
        self.n += cnt
        tot = int(cnt.sum())
        self.recompute_work += tot
        if tot == 0 or self.kind in (None, "count"):
            return
        a, b = int(s[0]), int(e[-1])
        if self.kind in ("sum", "avg"):
            seg = v[a:b]
            vi = int_domain(seg)
            if vi is None:
                self._fallback(v, s, e)
                return
            if incremental:
                self.si += _subtract_on_evict(vi, s - a, e - a)
                self.work += b - a
            else:
                qi, ei = expand(s - a, e - a)
                self.si += _group_sum(vi[ei], qi, self.m)
                self.work += tot
        else:
            if incremental:
                lo_, hi_, w = _two_stacks(v, s, e, self.kind == "min")
                self.work += w
            else:
                qi, ei = expand(s, e)
                lo_ = np.full(self.m, np.inf)
                hi_ = np.full(self.m, -np.inf)
                if self.kind == "min":
                    np.minimum.at(lo_, qi, v[ei])
                else:
                    np.maximum.at(hi_, qi, v[ei])
                self.work += tot
            np.minimum(self.mn, lo_, out=self.mn)
            np.maximum(self.mx, hi_, out=self.mx)

    def add_values(self, qi: I64, vals: F64) -> None:
        """Fold individual (base index, value) matches (Key-OIJ's filtered scan)."""
        m = self.m
        self.n += np.bincount(qi, minlength=m)
        self.work += len(qi)
        self.recompute_work += len(qi)
        if self.kind in ("sum", "avg") and len(qi):
            vi = int_domain(vals)
            if vi is None:
                self.fallback += len(np.unique(qi))
                for g, t in enumerate(exact_sums(qi, vals, m)):
                    if t:
                        self.big[g] = self.big.get(g, 0) + t
            else:
                self.si += _group_sum(vi, qi, m)
        elif self.kind == "min":
            np.minimum.at(self.mn, qi, vals)
        elif self.kind == "max":
            np.maximum.at(self.mx, qi, vals)

    def _fallback(self, v: F64, s: I64, e: I64) -> None:
        qi, ei = expand(s, e)
        self.add_values_exact(qi, v[ei])
        self.work += len(ei)

    def add_values_exact(self, qi: I64, vals: F64) -> None:
        self.fallback += len(np.unique(qi))
        for g, t in enumerate(exact_sums(qi, vals, self.m)):
            if t:
                self.big[g] = self.big.get(g, 0) + t

    def sums(self) -> F64:
        """Per base, the exact sum rounded once to float64."""
        out = int_to_float(self.si)
        for g, t in self.big.items():
            out[g] = to_float(t + (int(self.si[g]) << (1074 - 10)))
        return out


def _group_sum(x: I64, qi: I64, m: int) -> I64:
    out = np.zeros(m, dtype=np.int64)
    np.add.at(out, qi, x)
    return out


def _subtract_on_evict(vi: I64, s: I64, e: I64) -> I64:
    """Window sums by Agg_i = Agg_{i-1} + entering - leaving (exact in int64); ``s``, ``e`` relative to ``vi``."""
    prefix = np.zeros(len(vi) + 1, dtype=np.int64)
    np.cumsum(vi, out=prefix[1:])  # every entry is read once: when it enters
    enter = prefix[e].copy()
    leave = prefix[s].copy()
    enter[1:] -= prefix[e[:-1]]
    leave[1:] -= prefix[s[:-1]]
    # Agg_0 = enter_0 - leave_0 (relative to an empty window at 0); then the chain
    out: I64 = np.cumsum(enter - leave)
    return out


def _two_stacks(v: F64, s: I64, e: I64, is_min: bool) -> tuple[F64, F64, int]:
    """Window min (or max) by flip points (module docstring); returns (mins, maxs, entries read)."""
    m = len(s)
    ident = np.inf if is_min else -np.inf
    acc: Any = np.minimum if is_min else np.maximum
    res = np.full(m, ident)
    flips: list[int] = []  # flip point of every phase
    firsts: list[int] = []  # the first window of every phase
    i = 0
    while i < m:
        f = int(e[i])
        flips.append(f)
        firsts.append(i)
        # the phase lasts while windows start before f (the front stack is not empty)
        i = max(int(np.searchsorted(s, f, "left")), i + 1)
    work = 0
    for k in range(len(firsts)):
        f = flips[k]
        a = firsts[k]
        b = firsts[k + 1] if k + 1 < len(firsts) else m
        ss, ee = s[a:b], e[a:b]
        lo = int(ss.min())
        back_end = int(ee.max())
        # suffix minima of [lo, f) (the front stack) and prefix minima of [f, back_end) (the back stack)
        front = acc.accumulate(v[lo:f][::-1])[::-1] if f > lo else np.empty(0)
        back = acc.accumulate(v[f:back_end]) if back_end > f else np.empty(0)
        work += (f - lo) + (back_end - f)
        r = np.full(b - a, ident)
        has_f = ss < f
        if has_f.any():
            r[has_f] = front[ss[has_f] - lo]
        has_b = ee > f
        if has_b.any():
            r[has_b] = acc(r[has_b], back[ee[has_b] - f - 1])
        empty = ss >= ee
        r[empty] = ident
        res[a:b] = r
    if is_min:
        return res, np.full(m, -np.inf), work
    return np.full(m, np.inf), res, work
