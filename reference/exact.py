r"""Exact float sums in integer arithmetic (the reference's subtract-on-evict without drift).

Every finite double is :math:`m \cdot 2^{e}` with :math:`e \ge -1074`, so
:math:`v \cdot 2^{1074}` is an integer.  Sums and differences of these scaled
integers are exact, so adding a value and later subtracting it leaves no
rounding residue, and :func:`to_float` rounds the exact result once -- the same
number :func:`oij.spec.aggregate.compute_aggregate` computes with fractions.

The block path needs these integers for whole windows at once: when the values
allow it (:func:`int_scale`: one scale :math:`2^F` makes them all int64
integers with room to add), the same sums are int64 prefix sums and the same
single rounding is a double conversion (:func:`int_sums_to_float`,
:func:`int_means_to_float`); otherwise the Python integers above.
"""

from __future__ import annotations

from typing import Any

SHIFT = 1074


def scaled(v: float) -> int:
    r"""The exact integer :math:`v \cdot 2^{1074}`.  O(1) (a few hundred bits)."""
    n, d = v.as_integer_ratio()
    return n << (SHIFT + 1 - d.bit_length())


def to_float(total: int, count: int = 1) -> float:
    r"""Round :math:`total / (count \cdot 2^{1074})` once to the nearest double; :math:`\pm\infty` on overflow."""
    try:
        return total / (count << SHIFT) + 0.0
    except OverflowError:
        return float("inf") if total > 0 else float("-inf")



# ---------------------------------------------------------------------- the same numbers in int64, when they fit

INT_BITS = 53
r"""The scaled values :func:`int_scale` accepts are below :math:`2^{53}` in magnitude (exact as doubles too)."""

SUM_LIMIT = float(1 << 62)
r"""The sum of the scaled magnitudes :func:`int_scale` accepts: below :math:`2^{62}`, so no prefix sum overflows."""

MAX_SCALE = 900
r"""The largest :math:`F` of :func:`int_scale`: a nonzero window total :math:`T \cdot 2^{-F}` (:math:`|T| \ge 1`)
and a mean :math:`T / n \cdot 2^{-F}` (:math:`n < 2^{62}`) stay normal doubles, so scaling them is exact."""


def int_scale(values: Any) -> tuple[Any, int] | None:
    r"""The values as int64 :math:`x_i = v_i \cdot 2^F` for the smallest :math:`F \ge 0` that makes every one an
    integer, or None unless every value is finite, :math:`F \le` :data:`MAX_SCALE`, every :math:`|x_i| <
    2^{53}` and :math:`\sum_i |x_i| <` :data:`SUM_LIMIT`.  Then any window total :math:`T = \sum_{i \in w} x_i`
    is exact in int64 and :math:`T \cdot 2^{1074 - F}` is the :func:`scaled` total.  O(n), vectorised."""
    import numpy as np

    v = np.asarray(values, np.float64)
    if not len(v):
        return np.zeros(0, np.int64), 0
    if not bool(np.isfinite(v).all()):
        return None
    m, e = np.frexp(v)  # v = m 2^e, 1/2 <= |m| < 1 (m = e = 0 for 0)
    mant = np.ldexp(m, INT_BITS).astype(np.int64)  # |mant| < 2^53, v = mant 2^(e - 53)
    nz = mant != 0
    if not bool(nz.any()):
        return np.zeros(len(v), np.int64), 0
    low = mant[nz] & -mant[nz]  # the lowest set bit, a power of two <= 2^52
    tz = np.frexp(low.astype(np.float64))[1] - 1
    lowest = e[nz] - INT_BITS + tz  # the exponent of each value's lowest set bit
    f = max(0, -int(lowest.min()))
    if f > MAX_SCALE or int(e[nz].max()) + f > INT_BITS:  # |v| < 2^e: |x| < 2^(e + F) <= 2^53
        return None
    x = np.ldexp(v, f).astype(np.int64)  # integers below 2^53: exact
    if float(np.abs(x).astype(np.float64).sum()) >= SUM_LIMIT / 2:  # a float sum's error is far below 1/2
        return None
    return x, f


def int_sums_to_float(totals: Any, f: int) -> Any:
    r""":func:`to_float` of the totals :math:`T \cdot 2^{1074 - F}` (count 1), given int64 :math:`T` from
    :func:`int_scale`'s values: :math:`\mathrm{round}(T) \cdot 2^{-F}` -- the int64-to-double conversion rounds
    once to nearest, and the scaling by a power of two is exact in the normal range (:data:`MAX_SCALE`), so it is
    :math:`\mathrm{round}(T \cdot 2^{-F})`; ``+ 0.0`` as :func:`to_float`.  O(n)."""
    import numpy as np

    return np.ldexp(np.asarray(totals, np.int64).astype(np.float64), -f) + 0.0


def int_means_to_float(totals: Any, counts: Any, f: int) -> tuple[Any, Any]:
    r""":func:`to_float` of the totals :math:`T \cdot 2^{1074 - F}` over counts :math:`n \ge 1`, where it is
    vectorised: ``(means, done)``, ``done[i]`` iff :math:`|T_i| < 2^{53}` (then :math:`T_i` and :math:`n_i` are
    exact doubles, their IEEE quotient is :math:`\mathrm{round}(T_i / n_i)`, and scaling it by :math:`2^{-F}` is
    exact: :math:`\mathrm{round}(T_i 2^{-F} / n_i)`).  The caller rounds the other rows with :func:`to_float`
    (a double of :math:`T_i` would round twice).  O(n)."""
    import numpy as np

    t = np.asarray(totals, np.int64)
    done = np.abs(t) < (1 << INT_BITS)
    q = t.astype(np.float64) / np.asarray(counts, np.int64).astype(np.float64)
    return np.ldexp(q, -f) + 0.0, done
