r"""Streaming semantics over an arrival sequence of events.

Let :math:`E = e_1 \dots e_n` be the arrival sequence and :math:`W_i` the
watermark in force at the arrival of :math:`e_i` (:mod:`oij.spec.watermark`).

* :math:`\mathit{late}(E) = \{x.id \mid e_i = x \text{ a tuple}, x.ts < W_i\}`.
* The result is the batch result (:mod:`oij.spec.batch`) over the non-late
  tuples, plus the late ids.

*When* a result may be emitted (the contract every operator in this project,
and every implementation under conformance test, must keep):

* a pair :math:`(a, b)` is emitted when the second of a, b arrives (eager);
* a base tuple's aggregate row, and the :math:`(a, \mathrm{null})` row of a
  left join, is emitted exactly once, when it becomes *final*: when
  :math:`W > hi(a)` (no non-late probe can still fall into its window, see
  :func:`is_final`) or at the end of the stream — never before, so there is
  no spurious unmatched row;
* a late tuple is reported when it arrives.

:func:`compute_emitted` states this as a function of a prefix of E: what an
operator must have emitted after reading exactly that prefix.
"""

from __future__ import annotations

from collections.abc import Sequence

from oij.spec.batch import Pair, Results, compute_aggregates, compute_pairs, pair_order
from oij.spec.match import is_match, window_hi
from oij.spec.model import BASE, PROBE, End, Event, Query, StreamTuple
from oij.spec.watermark import arrival_watermarks, is_late, watermark_after


def is_final(a: StreamTuple, w: int, q: Query) -> bool:
    r"""True iff no non-late probe can still join ``a`` under watermark W: :math:`W > hi(a)`.

    A later non-late probe b has :math:`b.ts \ge W > hi(a)`, so it cannot match.
    Conversely if :math:`W \le hi(a)` a probe at ts = hi(a) would be on time and match.
    """
    return w > window_hi(a.ts, q)


def compute_late(events: Sequence[Event], q: Query) -> list[int]:
    """Ids of the late tuples, sorted."""
    ws = arrival_watermarks(events, q)
    return sorted(e.id for e, w in zip(events, ws, strict=False) if isinstance(e, StreamTuple) and is_late(e, w))


def on_time_tuples(events: Sequence[Event], q: Query) -> list[StreamTuple]:
    """The non-late tuples, in arrival order."""
    ws = arrival_watermarks(events, q)
    return [e for e, w in zip(events, ws, strict=False) if isinstance(e, StreamTuple) and not is_late(e, w)]


def compute_stream_result(events: Sequence[Event], q: Query) -> Results:
    """The whole result of a complete stream: batch semantics over the non-late tuples, and the late ids."""
    tuples = on_time_tuples(events, q)
    bases = [t for t in tuples if t.side == BASE]
    probes = [t for t in tuples if t.side == PROBE]
    res = Results(late=compute_late(events, q))
    if q.aggregate is None:
        res.pairs = compute_pairs(bases, probes, q)
    else:
        res.aggregates = compute_aggregates(bases, probes, q)
    return res


def compute_emitted(prefix: Sequence[Event], q: Query) -> Results:
    """What an operator must have emitted after reading exactly ``prefix`` (canonical order).

    * every pair of non-late tuples in the prefix (pairs mode);
    * the aggregate row of every non-late base that is final under the W after
      the prefix, or of every base if the prefix ends with End;
    * for a left join, (a.id, None) for every final base with no match so far
      (final means no match can come any more);
    * every late id.
    """
    ended = bool(prefix) and isinstance(prefix[-1], End)
    w = watermark_after(prefix, q)
    tuples = on_time_tuples(prefix, q)
    bases = [t for t in tuples if t.side == BASE]
    probes = [t for t in tuples if t.side == PROBE]
    final = [a for a in bases if ended or is_final(a, w, q)]
    res = Results(late=compute_late(prefix, q))
    if q.aggregate is not None:
        res.aggregates = compute_aggregates(final, probes, q)
        return res
    pairs: list[Pair] = [(a.id, b.id) for a in bases for b in probes if is_match(a, b, q)]
    if q.join == "left":
        matched = {p[0] for p in pairs}
        pairs += [(a.id, None) for a in final if a.id not in matched]
    res.pairs = sorted(pairs, key=pair_order)
    return res


__all__ = [
    "compute_emitted",
    "compute_late",
    "compute_pairs",
    "compute_stream_result",
    "is_final",
    "on_time_tuples",
]
