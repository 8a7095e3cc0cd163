r"""Exact float sums in integer arithmetic (the reference's subtract-on-evict without drift).

Every finite double is :math:`m \cdot 2^{e}` with :math:`e \ge -1074`, so
:math:`v \cdot 2^{1074}` is an integer.  Sums and differences of these scaled
integers are exact, so adding a value and later subtracting it leaves no
rounding residue, and :func:`to_float` rounds the exact result once -- the same
number :func:`oij.spec.aggregate.compute_aggregate` computes with fractions.
"""

from __future__ import annotations

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

