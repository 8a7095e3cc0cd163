r"""The match predicate: when does a probe tuple fall into a base tuple's window.

Timestamps are integers, so an exclusive bound is the neighbouring inclusive
bound.  Every definition below works with the closed integer window

.. math::

   \mathit{lo}(a) = a.ts + lower + [\lnot lower\_inclusive], \qquad
   \mathit{hi}(a) = a.ts + upper - [\lnot upper\_inclusive]

where :math:`[P]` is 1 if P holds and 0 otherwise.  Then
:math:`b \text{ matches } a \iff a.key = b.key \land lo(a) \le b.ts \le hi(a)`.

With a joining condition (PPOIJ's ``cond``, [PPOIJ]_ Eq. 1) the predicate has a
third conjunct, :func:`is_cond_true`:
:math:`b \text{ matches } a \iff a.key = b.key \land lo(a) \le b.ts \le hi(a) \land cond(a, b)`.

The window may be empty (``lower == upper`` with an exclusive flag): then
nothing ever matches.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from oij.spec.model import Comparison, CondOp, Query, StreamTuple, field_value

COMPARE: dict[CondOp, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}
"""The six comparison operators of a :class:`~oij.spec.model.Comparison`, as functions."""


def lower_offset(q: Query) -> int:
    r"""The inclusive lower offset :math:`\ell' = lower + [\lnot lower\_inclusive]`."""
    return q.lower if q.lower_inclusive else q.lower + 1


def upper_offset(q: Query) -> int:
    r"""The inclusive upper offset :math:`u' = upper - [\lnot upper\_inclusive]`."""
    return q.upper if q.upper_inclusive else q.upper - 1


def window_lo(a_ts: int, q: Query) -> int:
    r"""The first probe timestamp in the window of a base tuple at ``a_ts``: :math:`a.ts + \ell'`."""
    return a_ts + lower_offset(q)


def window_hi(a_ts: int, q: Query) -> int:
    r"""The last probe timestamp in the window of a base tuple at ``a_ts``: :math:`a.ts + u'`."""
    return a_ts + upper_offset(q)


def is_window_empty(q: Query) -> bool:
    r"""True iff no probe can ever match: :math:`\ell' > u'`."""
    return lower_offset(q) > upper_offset(q)


def is_comparison_true(a: StreamTuple, b: StreamTuple, c: Comparison) -> bool:
    r"""True iff :math:`a.\mathit{left}\ op\ b.\mathit{right} + add` holds in exact (rational) arithmetic.

    Fields and the constant are doubles, so both sides are exact rationals and
    nothing is rounded before comparing: with ``a.x = b.y = 1e16`` and
    ``add = 1``, ``a.x < b.y + add`` is true, although in doubles
    ``1e16 + 1 == 1e16`` (the spacing of doubles there is 2).
    """
    x, y = field_value(a, c.left), field_value(b, c.right)
    if not c.add:  # doubles compare exactly; only a sum can round
        return bool(COMPARE[c.op](x, y))
    return bool(COMPARE[c.op](Fraction(x), Fraction(y) + Fraction(c.add)))


def is_cond_true(a: StreamTuple, b: StreamTuple, q: Query) -> bool:
    r"""The joining condition: :math:`cond(a, b) = \bigwedge_{c \in q.cond} a.c.left\ c.op\ b.c.right + c.add`.

    True for an empty cond.  Requires every field the cond reads
    (:func:`oij.spec.model.check_tuple`).
    """
    return all(is_comparison_true(a, b, c) for c in q.cond)


def is_window_match(a: StreamTuple, b: StreamTuple, q: Query) -> bool:
    r"""True iff ``b`` is a candidate of ``a`` (cond ignored): :math:`a.key = b.key \land lo(a) \le b.ts \le hi(a)`."""
    return type(a.key) is type(b.key) and a.key == b.key and window_lo(a.ts, q) <= b.ts <= window_hi(a.ts, q)


def is_match(a: StreamTuple, b: StreamTuple, q: Query) -> bool:
    r"""True iff probe ``b`` matches base ``a``: :math:`a.key = b.key \land lo(a) \le b.ts \le hi(a) \land cond(a, b)`.

    ``1`` and ``"1"`` are different keys: equality is Python's, on an int or a str.
    """
    return is_window_match(a, b, q) and (not q.cond or is_cond_true(a, b, q))
