r"""Per-base-tuple window aggregates (OpenMLDB ``WINDOW ... UNION ... ROWS_RANGE``).

For a base tuple ``a`` with window values :math:`V = [b.value \mid b \text{ matches } a]`
(a multiset, :math:`n = |V|`):

* count :math:`= n`
* sum :math:`= \mathrm{fl}(\sum V)`, and 0.0 for :math:`n = 0`
* avg :math:`= \mathrm{fl}(\sum V / n)`, null for :math:`n = 0`
* min :math:`= \min V`, max :math:`= \max V`, null for :math:`n = 0`

where :math:`\sum` is the *exact* real sum and :math:`\mathrm{fl}` rounds once
to the nearest double (ties to even), giving :math:`\pm\infty` when the exact
result is beyond the double range.  An exact sum makes the result independent
of the order in which values are added, so a streaming operator that adds and
subtracts (subtract-on-evict) must give bit-for-bit the same answer as a
recomputation.  A negative zero result is written as 0.0.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from oij.spec.model import AggregateKind

AggregateValue = float | int | None


def round_to_float(x: Fraction) -> float:
    r"""Round the exact rational ``x`` to the nearest double; :math:`\pm\infty` if it overflows."""
    try:
        return float(x) + 0.0
    except OverflowError:
        return float("inf") if x > 0 else float("-inf")


def compute_aggregate(values: Iterable[float], kind: AggregateKind) -> tuple[int, AggregateValue]:
    """Return ``(count, value)`` of aggregate ``kind`` over the multiset ``values``.

    ``value`` is the count itself for count; see the module docstring for the others.
    """
    vs = list(values)
    n = len(vs)
    if kind == "count":
        return n, n
    if kind == "sum":
        return n, round_to_float(sum((Fraction(v) for v in vs), Fraction(0)))
    if n == 0:
        return 0, None
    if kind == "avg":
        return n, round_to_float(sum((Fraction(v) for v in vs), Fraction(0)) / n)
    if kind == "min":
        return n, min(vs) + 0.0
    return n, max(vs) + 0.0
