r"""Purge rules: which stored tuples an operator still needs.

A non-late tuple is *needed* after a prefix of the stream iff dropping it
could change what the operator emits later.  Let W be the watermark after
the prefix, :math:`\ell', u'` the inclusive offsets of :mod:`oij.spec.match`,
and :math:`\mathit{nonempty} \iff \ell' \le u'`.

Every future non-late tuple y has :math:`y.ts \ge W`.

**Base tuple a.**  A future probe b can match a iff some
:math:`b.ts \ge W` lies in :math:`[lo(a), hi(a)]`, i.e. iff
:math:`\mathit{nonempty} \land hi(a) \ge W`.  With a left join or an
aggregate, a is also needed until its final row is out, i.e. while
:math:`hi(a) \ge W` (:func:`oij.spec.stream.is_final` is false).

.. math::

   \mathit{needed}(a) = \begin{cases}
     \mathit{nonempty} \land hi(a) \ge W & \text{pairs mode, inner join} \\
     hi(a) \ge W & \text{otherwise}
   \end{cases}

**Probe tuple b.**  A future base a (:math:`a.ts \ge W`) can match b iff
some integer :math:`x \ge W` has :math:`x + \ell' \le b.ts \le x + u'`, i.e.
iff :math:`\mathit{nonempty} \land b.ts - \ell' \ge W`.  With an aggregate,
b is also needed while a stored, non-final base of the same key has b in its
window (its row is not out yet):

.. math::

   \mathit{needed}(b) = \mathit{nonempty} \land \big(b.ts \ge W + \ell'
      \lor (\mathit{aggregate} \land \exists a \in P:\ b \text{ matches } a)\big)

with P the non-late, non-final base tuples.  In pairs mode a pending base
needs no stored probe: its pairs were emitted when the later tuple arrived.

**A joining condition changes nothing here**: "matches" above is
:func:`oij.spec.match.is_window_match`, key and time only.  Whether a future tuple
satisfies cond with a stored one depends on the future tuple's fields, which
no operator can know, so the first disjunct of each rule is the same with a
cond.  Only the aggregate rule could be sharpened (a probe that fails cond for
every pending base is never read), and the spec deliberately does not: the
state an operator holds, and the bound on it, stay a function of keys, times
and W alone, identical with and without a cond.

After End nothing is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

from oij.spec.match import is_window_empty, is_window_match, lower_offset, window_hi
from oij.spec.model import BASE, End, Event, Query, StreamTuple
from oij.spec.stream import is_final, on_time_tuples
from oij.spec.watermark import watermark_after


def is_base_needed(a: StreamTuple, w: int, q: Query) -> bool:
    """``needed(a)`` under watermark ``w`` (see the module docstring)."""
    if q.aggregate is None and q.join == "inner" and is_window_empty(q):
        return False
    return window_hi(a.ts, q) >= w


def is_probe_needed(b: StreamTuple, w: int, pending: Sequence[StreamTuple], q: Query) -> bool:
    """``needed(b)`` under watermark ``w``, given the pending (non-final) base tuples."""
    if is_window_empty(q):
        return False
    if b.ts - lower_offset(q) >= w:
        return True
    return q.aggregate is not None and any(is_window_match(a, b, q) for a in pending)


def compute_needed(prefix: Sequence[Event], q: Query) -> set[tuple[str, int]]:
    """The (side, id) of every tuple an operator must still hold after ``prefix``."""
    if prefix and isinstance(prefix[-1], End):
        return set()
    w = watermark_after(prefix, q)
    tuples = on_time_tuples(prefix, q)
    pending = [t for t in tuples if t.side == BASE and not is_final(t, w, q)]
    out: set[tuple[str, int]] = set()
    for t in tuples:
        keep = is_base_needed(t, w, q) if t.side == BASE else is_probe_needed(t, w, pending, q)
        if keep:
            out.add((t.side, t.id))
    return out
