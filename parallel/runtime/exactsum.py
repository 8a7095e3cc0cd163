r"""Exact sums across replicas: the sum part of a partial row, and its one rounding at the sink.

The specification rounds once: :math:`\mathrm{sum} = \mathrm{fl}(\sum V)`, :math:`\mathrm{avg} =
\mathrm{fl}(\sum V / n)` with the exact real sum (:mod:`oij.spec.aggregate`).  A base's matches may be split
over several replicas (DP, HP) and arrive in several batches, so every partial sum travels exactly and the sink
rounds the total once.  A partial row carries its sum in two fields of :data:`~oij.parallel.runtime.ring.RESULT`:

* ``si`` (int64): the sum of the *common* values -- multiples of :math:`2^{-10}` below :math:`2^{30}` in
  magnitude (every integer-valued workload, every test value) -- in units of :math:`2^{-10}`; integer adds,
  exact while the total stays below :math:`2^{62}` (:func:`add_units` keeps it so);
* ``s`` (float64) plus any :data:`PIECE` records for the same base: the exact sum of every other value, as
  doubles whose exact sum it is (:func:`pieces`), the pieces sent before the row on the same ring.

Data flow::

    replica: matched values --split_units--> int64 units (common) --add_units--> si (per base)
                                         \-> any other value --scaled()--> Python int per base (2**-1074 units)
             row emitted: si, s = pieces[0], then PIECE records for pieces[1:] (before the row, same ring)
    sink:    every partial row and piece of a base --> T = si * 2**1064 + sum(scaled(s)) + ... (Python int)
             --> sum = to_float(T), avg = to_float(T, n): one rounding, as the oracle

The exact total also makes a sum independent of which replica saw which match, and of arrival order.

Creates no process and no shared memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from oij.parallel.runtime.ring import RESULT
from oij.reference.exact import SHIFT, scaled, to_float

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

UNIT_BITS = 10
r"""Common values are integers in units of :math:`2^{-10}`."""

LIMIT = float(1 << 30)
r"""Common values are below :math:`2^{30}` in magnitude: one is below :math:`2^{40}` units."""

SPILL = 1 << 21
r"""A stored base whose count reaches :math:`2^{21}` moves its ``si`` to the exact Python sum before the next add
(then :math:`|si| < 2^{21} \cdot 2^{40} = 2^{61}`, and one batch adds less than :math:`2^{61}`)."""

SMALL = 1 << 13
r"""Fewer adds than this, each below :math:`2^{40}`, stay below :math:`2^{53}` (:func:`add_units`)."""

PAIR, ROW, PIECE = 0, 1, 2
"""The ``kind`` of a result record: a pair, a partial row, a piece of a partial row's exact sum."""

DBL_MAX = float(np.finfo(np.float64).max)
"""The largest finite double."""


def split_units(v: F64) -> tuple[I64, npt.NDArray[np.bool_]]:
    r"""``(units, odd)``: :math:`v_i \cdot 2^{10}` as int64 where :math:`v_i` is common (0 elsewhere), and the mask
    of the other values.  O(n), vectorised."""
    inside = np.abs(v) < LIMIT
    x = np.where(inside, v, 0.0) * float(1 << UNIT_BITS)  # exact: a power of two
    odd = ~(inside & (x == np.rint(x)))
    units = np.where(odd, 0.0, x).astype(np.int64)
    return units, odd


def add_units(si: I64, qi: I64, units: I64) -> bool:
    r"""``si[qi[j]] += units[j]`` for every j, in place; False (and ``si`` unchanged) when the batch's
    :math:`\sum |units|` reaches :math:`2^{61}`, which the caller then adds exactly (:func:`add_exact`).

    Below that bound every increment is exact; when every partial sum stays below :math:`2^{53}` the float
    ``bincount`` is exact too and faster than ``np.add.at`` where ``si`` is not much longer than ``qi``.
    O(len(qi)), plus O(len(si)) when ``bincount`` is used."""
    if not len(qi):
        return True
    small = len(qi) < SMALL  # then every partial sum is below 2**53 without looking
    tot = 0.0 if small else float(np.abs(units).astype(np.float64).sum())
    if tot >= float(1 << 61):
        return False
    if (small or tot < float(1 << 53)) and 4 * len(qi) >= len(si):
        si += np.bincount(qi, weights=units.astype(np.float64), minlength=len(si)).astype(np.int64)
    else:  # few adds into many rows (a probe batch into a stored tier), or past 2**53
        np.add.at(si, qi, units)
    return True


def add_exact(big: dict[int, int], ids: I64, vals: F64) -> None:
    r"""``big[ids[j]] += scaled(vals[j])`` (units of :math:`2^{-1074}`, exact).  O(n) Python steps: only for the
    values that are not common."""
    for i, x in zip(ids.tolist(), vals.tolist(), strict=True):
        big[i] = big.get(i, 0) + scaled(x)


def pieces(t: int) -> list[float]:
    r"""Finite doubles :math:`c_1, \dots, c_k` with :math:`\sum_j c_j = t \cdot 2^{-1074}` exactly (``[]`` for 0).

    Each step takes the nearest double to the rest (at most :data:`DBL_MAX` in magnitude) and subtracts it
    exactly; a rounded step leaves less than half an ulp, so a total of a few hundred bits takes a handful of
    pieces (one beyond :data:`DBL_MAX` takes one per :data:`DBL_MAX` of it).  O(k) big-integer steps."""
    out: list[float] = []
    while t:
        c = to_float(t)
        if c in (float("inf"), float("-inf")):
            c = DBL_MAX if t > 0 else -DBL_MAX
        out.append(c)
        t -= scaled(c)
    return out


def piece_records(big: dict[int, int], ids: I64) -> tuple[F64, npt.NDArray[Any]]:
    """For the rows of bases ``ids`` about to be emitted: their ``s`` (the first piece of each base's exact sum in
    ``big``, 0.0 if none; the entries are removed) and the :data:`PIECE` records of the other pieces."""
    s = np.zeros(len(ids))
    if not big:
        return s, np.empty(0, dtype=RESULT)
    extra: list[tuple[int, float]] = []
    for j, i in enumerate(ids.tolist()):
        t = big.pop(i, 0)
        if t:
            p = pieces(t)
            s[j] = p[0]
            extra.extend((i, c) for c in p[1:])
    r = np.zeros(len(extra), dtype=RESULT)
    if extra:
        r["a"] = [i for i, _ in extra]
        r["b"] = -1
        r["s"] = [c for _, c in extra]
        r["kind"] = PIECE
    return s, r


def spill(si: I64, n: I64, ids: I64, rows: I64, big: dict[int, int]) -> None:
    r"""Move ``si`` of every row of ``rows`` whose count reached :data:`SPILL` into ``big`` (exact), so the next
    add to it cannot overflow int64.  O(len(rows)) vectorised, plus one Python step per spilled row."""
    if not len(rows) or int(n[rows].max()) < SPILL:
        return
    hot = np.unique(rows[(n[rows] >= SPILL) & (si[rows] != 0)])
    for j in hot.tolist():
        i = int(ids[j])
        big[i] = big.get(i, 0) + (int(si[j]) << (SHIFT - UNIT_BITS))
    si[hot] = 0


def total(si: int, s: float, extra: int = 0) -> int:
    r"""A row's exact sum in units of :math:`2^{-1074}`: :math:`si \cdot 2^{-10} + s + extra \cdot 2^{-1074}`."""
    return (si << (SHIFT - UNIT_BITS)) + (scaled(s) if s else 0) + extra


def round_sum(si: int, s: float, extra: int, n: int, mean: bool) -> float:
    r""":math:`\mathrm{fl}(T)` or :math:`\mathrm{fl}(T / n)` of the row's exact sum :math:`T`, rounded once
    (:math:`\pm\infty` beyond the double range).  O(1) for a common row (``s`` and ``extra`` 0: Python's
    int division is correctly rounded), O(bits) otherwise."""
    if not s and not extra:
        return si / ((n if mean else 1) << UNIT_BITS) + 0.0
    return to_float(total(si, s, extra), n if mean else 1)
