r"""The match predicate: when does a probe tuple fall into a base tuple's window.

Timestamps are integers, so an exclusive bound is the neighbouring inclusive
bound.  Every definition below works with the closed integer window

.. math::

   \mathit{lo}(a) = a.ts + lower + [\lnot lower\_inclusive], \qquad
   \mathit{hi}(a) = a.ts + upper - [\lnot upper\_inclusive]

where :math:`[P]` is 1 if P holds and 0 otherwise.  Then
:math:`b \text{ matches } a \iff a.key = b.key \land lo(a) \le b.ts \le hi(a)`.

The window may be empty (``lower == upper`` with an exclusive flag): then
nothing ever matches.
"""

from __future__ import annotations

from spec.model import Query, StreamTuple


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


def is_match(a: StreamTuple, b: StreamTuple, q: Query) -> bool:
    r"""True iff probe ``b`` matches base ``a``: :math:`a.key = b.key \land lo(a) \le b.ts \le hi(a)`.

    ``1`` and ``"1"`` are different keys: equality is Python's, on an int or a str.
    """
    return (
        type(a.key) is type(b.key)
        and a.key == b.key
        and window_lo(a.ts, q) <= b.ts <= window_hi(a.ts, q)
    )
