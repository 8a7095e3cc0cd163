r"""The joining condition in doubles, exactly: :func:`oij.spec.match.is_cond_true` without fractions.

A comparison :math:`a.x\ op\ b.y + c` needs the sum :math:`y + c`, which a
double may round (``1e16 + 1 == 1e16``).  Knuth's TwoSum gives it without
loss as two doubles, :math:`y + c = s + e` exactly, with :math:`s = \mathrm{fl}(y + c)`
(:func:`split_sum`).  Then, for doubles x and s:

* if :math:`x < s` then :math:`x < y + c`: x is at most the double below s, and
  :math:`y + c` is nearer to s than that double (s is the nearest double);
* symmetrically if :math:`x > s`;
* if :math:`x = s` then :math:`x - (y + c) = -e`, so :math:`x\ op\ y + c \iff 0\ op\ e`.

So :math:`x\ op\ y + c \iff (x, 0)\ op\ (s, e)` compared lexicographically
(:func:`compare_split`), which is what Python does for tuples.  With
:math:`|c| \le 2^{53}` (:data:`oij.spec.model.FIELD_LIMIT`) the sum never
overflows to infinity, so TwoSum is exact for every finite y.

A tuple's *operands* are computed once, when it arrives: for a base the x of
every comparison, for a probe the (s, e) of every comparison.  When a
comparison adds nothing, e = 0 and s = y, and the oracle keeps plain floats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from oij.spec.match import COMPARE
from oij.spec.model import BASE, Comparison, CondOp, End, Event, Query, StreamTuple, field_value

F64 = npt.NDArray[np.float64]


def split_sum(y: float, c: float) -> tuple[float, float]:
    r"""TwoSum: ``(s, e)`` with :math:`s = \mathrm{fl}(y + c)` and :math:`s + e = y + c` exactly.  O(1)."""
    s = y + c
    yy = s - c
    cc = s - yy
    return s, (y - yy) + (c - cc)


def split_sum_array(y: F64, c: float) -> tuple[F64, F64]:
    """:func:`split_sum` over an array (elementwise, the same six operations)."""
    s = y + c
    yy = s - c
    cc = s - yy
    return s, (y - yy) + (c - cc)


def compare_split(x: Any, op: CondOp, s: Any, e: Any) -> Any:
    r"""``x op s + e`` for doubles (or float64 arrays, elementwise), exactly, given (s, e) from :func:`split_sum`."""
    if op == "<" or op == "<=":
        return (x < s) | ((x == s) & COMPARE[op](0.0, e))
    if op == ">" or op == ">=":
        return (x > s) | ((x == s) & COMPARE[op](0.0, e))
    if op == "==":
        return (x == s) & (e == 0.0)
    return (x != s) | (e != 0.0)


def operand(t: StreamTuple, c: Comparison) -> tuple[float, float]:
    """The tuple's operand of comparison ``c`` as a pair: a base's ``(x, 0.0)``, a probe's ``(s, e)`` =
    :func:`split_sum` (y, add).  Pairs compare lexicographically as the reals they stand for.  O(1)."""
    if t.side == BASE:
        return field_value(t, c.left), 0.0
    return split_sum(field_value(t, c.right), c.add)


def operands(t: StreamTuple, q: Query) -> list[Any]:
    """The tuple's operand for every comparison of ``q.cond``, in the form :class:`oij.reference.oracle.Oracle` keeps.

    :func:`operand`, or its first element alone when the comparison adds nothing (then the second is 0).
    Comparing a base's and a probe's with the comparison's Python operator is
    :func:`oij.spec.match.is_comparison_true`.  O(len(cond)).
    """
    return [operand(t, c) if c.add else operand(t, c)[0] for c in q.cond]


def operand_matrix(is_base: npt.NDArray[np.bool_], column: Callable[[str], F64], q: Query) -> tuple[F64, F64]:
    """The operands of n rows as two (n, len(cond)) arrays: a base's (x, 0), any other row's (s, e) of
    :func:`split_sum_array`.  ``column(name)`` is the n values of field ``name`` (``ts`` and ``value`` included;
    anything for rows that are not tuples).  O(n len(cond)), vectorised."""
    n = len(is_base)
    hi = np.zeros((n, len(q.cond)))
    lo = np.zeros((n, len(q.cond)))
    for i, c in enumerate(q.cond):
        s, e = split_sum_array(column(c.right), c.add)
        hi[:, i] = np.where(is_base, column(c.left), s)
        lo[:, i] = np.where(is_base, 0.0, e)
    return hi, lo


def operand_rows(events: list[Event], q: Query) -> tuple[F64, F64]:
    """:func:`operand_matrix` of events (End skipped; zeros for a watermark's fields).  O(n len(cond))."""
    evs = [e for e in events if type(e) is not End]
    tuples = [e if type(e) is StreamTuple else None for e in evs]
    names = {n for c in q.cond for n in (c.left, c.right)}
    cols = {n: np.array([0.0 if t is None else field_value(t, n) for t in tuples]) for n in names}
    is_base = np.array([t is not None and t.side == BASE for t in tuples], dtype=np.bool_)
    return operand_matrix(is_base, cols.__getitem__, q)


def operand_columns(recs: npt.NDArray[Any], cond: tuple[Comparison, ...]) -> dict[str, npt.NDArray[Any]]:
    """The ``ch``/``cl`` operand columns of tuple records, to store beside them (none without a cond)."""
    return {"ch": recs["ch"], "cl": recs["cl"]} if cond else {}


def cond_mask(cond: tuple[Comparison, ...], a_x: F64, b_s: F64, b_e: F64) -> npt.NDArray[np.bool_]:
    """Row-wise cond over aligned operand rows: a's x (n, k) against b's (s, e) (n, k).  O(n len(cond))."""
    m = np.ones(len(a_x), dtype=np.bool_)
    for i, c in enumerate(cond):
        m &= compare_split(a_x[:, i], c.op, b_s[:, i], b_e[:, i])
    return m
