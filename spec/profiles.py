r"""Semantic profiles: the deliberate differences of real systems, as named parameters of the specification.

The canonical semantics (:mod:`spec.stream`) is one point in a small space.
Real systems choose other points on purpose; a :class:`Profile` names one, and
:func:`compute_profile_result` computes the result of a complete stream under
it, by simulating an operator step by step.  Under :data:`spec.profiles.CANONICAL` it equals
:func:`spec.stream.compute_stream_result` (tested against the oracle).

The parameters, with E the arrival sequence, :math:`W_k` the watermark after
the first k events (computed as in :mod:`spec.watermark`, with the combination
below), and event j (1-based) the current one:

* ``late_rule``: a tuple x is late iff :math:`x.ts < W` (``"lt"``, canonical;
  Flink, WindFlow) or :math:`x.ts \le W` (``"le"``, Spark).
* ``channel_combine`` (watermark mode): :math:`W = \min_c m_c` (``"min"``,
  canonical; Flink's two-input operator) or :math:`\max_c m_c` (``"max"``).
* ``side_combine`` (lateness mode): :math:`W = \max_{x} x.ts - l` over both
  inputs (``"global"``, canonical; Scale-OIJ) or
  :math:`\min(\max_{a} a.ts - l, \max_{b} b.ts - l)` per input (``"min"``, Spark's
  default ``multipleWatermarkPolicy``; Flink's min over its two inputs); or
  each tuple judged against its own input's watermark alone,
  :math:`W_X = \max_{x \in X \text{ before}} x.ts - l` for a tuple of input X
  (``"own"``, Pathway's ``cutoff``, applied to each table before the join).  An
  input with no tuple yet has :math:`-\infty`.
* ``lateness_shift`` (lateness mode): :math:`W = \max x.ts - l - \mathit{shift}`;
  canonical 0; Flink's ``BoundedOutOfOrdernessWatermarks(l)`` emits
  :math:`\max ts - l - 1` (shift 1).
* ``lag`` (micro-batch cadence): event j is judged late against
  :math:`W_{j-1-lag}` and state is evicted after event j with
  :math:`W_{j-lag}` (:math:`W_i = -\infty` for :math:`i \le 0`).  Canonical:
  0 (the watermark advances per event).  Spark with one event per
  micro-batch: 1 (the watermark computed at the end of batch i filters late
  rows in batch i+2 and evicts state in batch i+1).
* ``late_tuples``: a late tuple is reported and never joins (``"report"``,
  canonical); dropped silently (``"drop"``, Spark, Flink DataStream without
  side outputs); or still probes the other side's stored tuples and emits
  those pairs, without being stored or reported (``"join"``); or is not a
  notion at all (``"ignore"``, Flink SQL): every tuple probes the stored
  tuples, and it is stored iff it can still meet a later tuple of the other
  side, :math:`W < hi(a)` for a base and :math:`W < b.ts - \ell'` for a probe
  (W before the event); ``purge`` then decides when it goes; or revised
  (``"revise"``, Pathway without a cutoff): no tuple is ever late or
  dropped, every tuple joins every tuple of the other side whenever it
  arrives, and the result after all revisions is the batch join of all
  tuples, :math:`\{(a, b) : a \in A, b \in B, match(a, b)\}`.
* ``purge``: a stored base a is dropped when :math:`W > hi(a)` and a probe b
  when :math:`W > b.ts - \ell'` (``"exact"``, canonical: exactly when nothing
  later can match it); ``"early"`` drops each one tick sooner
  (:math:`W \ge hi(a)`, :math:`W \ge b.ts - \ell'`); ``"flink-timers"`` drops
  a base when :math:`W \ge a.ts + \max(u', 0)` and a probe when
  :math:`W \ge b.ts - \min(\ell', 0)` (Flink DataStream's cleanup timers,
  which fire at :math:`W \ge` the timer); ``"lazy-own"`` (Pathway's
  ``cutoff``) forgets a stored tuple x of input X by its own timestamp, not
  by its window, and only when a later on-time tuple of X arrives: at that
  arrival x is dropped iff :math:`x.ts \le W_X`, W_X the input's watermark
  before it (a base can go while its window is still open).
* ``retract_on_purge``: when a stored tuple is dropped, the pairs it is part
  of and its (a, null) row are taken back (Pathway's
  ``keep_results=False``); canonical: False, rows once emitted stay.
* ``end_flush``: at the end of the stream every pending aggregate and
  (a, null) row is emitted (canonical) or not (Spark: a row appears only at
  eviction, and no batch follows the last one).

A base's aggregate and its (a, null) row are emitted when it is dropped
(final), over the probes it met while stored or on arrival.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from spec.aggregate import compute_aggregate
from spec.batch import Results, compute_pairs
from spec.match import is_match, lower_offset, upper_offset
from spec.model import BASE, NO_WATERMARK, End, Event, Query, StreamTuple, Watermark


@dataclass(frozen=True)
class Profile:
    """A point in the space of OIJ semantics; see the module docstring for each parameter."""

    name: str
    system: str
    summary: str
    late_rule: Literal["lt", "le"] = "lt"
    channel_combine: Literal["min", "max"] = "min"
    side_combine: Literal["global", "min", "own"] = "global"
    lateness_shift: int = 0
    lag: int = 0
    late_tuples: Literal["report", "drop", "join", "ignore", "revise"] = "report"
    purge: Literal["exact", "early", "flink-timers", "lazy-own"] = "exact"
    end_flush: bool = True
    retract_on_purge: bool = False

    def differences(self) -> list[str]:
        """The parameters where this profile differs from :data:`spec.profiles.CANONICAL`, as ``name=value`` strings."""
        out = []
        for f in ("late_rule", "channel_combine", "side_combine", "lateness_shift", "lag", "late_tuples", "purge",
                  "end_flush", "retract_on_purge"):
            if getattr(self, f) != getattr(CANONICAL, f):
                out.append(f"{f}={getattr(self, f)}")
        return out


CANONICAL = Profile("canonical", "this specification (WindFlow, PPOIJ, Scale-OIJ)",
                    "late iff ts < W, W = min over channels (or max ts - l over both inputs), per-event cadence, "
                    "late tuples reported, state kept until W passes it, pending rows flushed at the end")
"""This specification's semantics as a profile: every parameter at its default."""

PROFILES: dict[str, Profile] = {p.name: p for p in [
    CANONICAL,
    Profile("spark-ss", "Spark Structured Streaming stream-stream join, one event per micro-batch",
            "late iff ts <= W, W = min of per-input watermarks, micro-batch cadence (late filter one batch "
            "behind), late rows dropped silently, no flush at the end",
            late_rule="le", side_combine="min", lag=1, late_tuples="drop", end_flush=False),
    Profile("spark-ss-max", "Spark Structured Streaming with spark.sql.streaming.multipleWatermarkPolicy=max",
            "as spark-ss, but W = max of the per-input watermarks",
            late_rule="le", side_combine="global", lag=1, late_tuples="drop", end_flush=False),
    Profile("flink-datastream", "Flink DataStream intervalJoin with both late side outputs (PyFlink 2.3, measured "
            "with oij adapter flink-ds)",
            "W = min of per-input watermarks (in lateness mode Flink's bounded out-of-orderness, max ts - l - 1); "
            "late tuples go to the side outputs; state freed by cleanup timers",
            side_combine="min", lateness_shift=1, purge="flink-timers"),
    Profile("flink-sql", "Flink SQL interval join (PyFlink 2.3, measured with oij adapter flink-sql)",
            "W = min of per-input watermarks; no late rows: every row probes the other side's state and is "
            "stored iff W < the last watermark it can still match at; nothing reported late",
            side_combine="min", late_tuples="ignore"),
    Profile("pathway", "Pathway interval_join without a behavior (an incremental engine that revises)",
            "nothing is late and nothing is dropped: the result, after revisions, is the batch join of all tuples",
            late_tuples="revise"),
    Profile("pathway-cutoff", "Pathway interval_join with common_behavior(cutoff=l)",
            "a tuple is ignored iff ts <= (max ts of its own input before it) - l; a stored tuple is forgotten by "
            "its own ts, when the next on-time tuple of its input arrives; results stay",
            late_rule="le", side_combine="own", late_tuples="drop", purge="lazy-own"),
    Profile("pathway-forget", "Pathway interval_join with common_behavior(cutoff=l, keep_results=False)",
            "as pathway-cutoff, and the rows of a forgotten tuple are taken back",
            late_rule="le", side_combine="own", late_tuples="drop", purge="lazy-own", retract_on_purge=True),
    Profile("late-le", "a late rule with <= (Spark's)", "late iff ts <= W", late_rule="le"),
    Profile("watermark-max", "watermarks combined with max over channels",
            "W = max over channels instead of min", channel_combine="max"),
    Profile("lateness-per-input", "lateness watermark per input, min over the inputs (Spark, Flink)",
            "W = min(max base ts, max probe ts) - l", side_combine="min"),
    Profile("micro-batch", "watermark one event behind (a micro-batch cadence)",
            "late filter and eviction use the watermark of one event before", lag=1),
    Profile("late-silent", "late tuples dropped without a late line", "late tuples not reported",
            late_tuples="drop"),
    Profile("late-joined", "late tuples still join unexpired state (Flink SQL)",
            "late tuples probe stored state and emit pairs, not stored, not reported", late_tuples="join"),
    Profile("purge-early", "state dropped one tick early", "a stored tuple is dropped when W reaches it, "
            "not when W passes it", purge="early"),
    Profile("no-end-flush", "pending rows not flushed at the end", "aggregate and (a, null) rows appear only "
            "when the watermark finalises them", end_flush=False),
]}
"""Every named profile, canonical first."""


def get_profile(name: str) -> Profile:
    """The profile called ``name``; KeyError lists the known names."""
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown profile {name!r}; known: {', '.join(PROFILES)}") from None


def custom_profile(**params: Any) -> Profile:
    """A profile with the given parameters on top of :data:`spec.profiles.CANONICAL` (name ``custom``)."""
    return replace(CANONICAL, name="custom", system="custom", summary="custom", **params)


def is_late_under(t: StreamTuple, w: int, p: Profile) -> bool:
    r"""True iff ``t`` is late under watermark ``w`` and profile ``p``: :math:`t.ts < W` or :math:`t.ts \le W`."""
    return t.ts <= w if p.late_rule == "le" else t.ts < w


def combine_watermark(channel_max: Sequence[int], side_max: dict[str, int], q: Query, p: Profile) -> int:
    r"""W from the per-channel maxima (watermark mode) or the per-input maximal timestamps (lateness mode)."""
    if q.lateness is None:
        return max(channel_max) if p.channel_combine == "max" else min(channel_max)
    m = min(side_max.values()) if p.side_combine == "min" else max(side_max.values())
    return NO_WATERMARK if m == NO_WATERMARK else m - q.lateness - p.lateness_shift


def state_edge(t: StreamTuple, q: Query) -> int:
    r"""The last watermark at which ``t`` can still meet a later tuple: :math:`hi(a)` or :math:`b.ts - \ell'`."""
    return t.ts + upper_offset(q) if t.side == BASE else t.ts - lower_offset(q)


def is_droppable(t: StreamTuple, w: int, q: Query, p: Profile) -> bool:
    r"""True iff stored tuple ``t`` is dropped under watermark ``w`` (``purge``; see the module docstring)."""
    lo, hi = lower_offset(q), upper_offset(q)
    if p.purge == "flink-timers":
        edge = t.ts + max(hi, 0) if t.side == BASE else t.ts - min(lo, 0)
    else:
        edge = state_edge(t, q)
    return w > edge if p.purge == "exact" else w >= edge


def compute_profile_result(events: Sequence[Event], q: Query, p: Profile = CANONICAL) -> Results:
    """The result of a complete stream under profile ``p`` (canonical order).

    Requires: ``events`` valid for ``q`` (ids unique), ending with End or not.
    Quadratic and step by step on purpose: this is a definition.
    """
    channel_max = [NO_WATERMARK] * q.channels
    side_max = {"base": NO_WATERMARK, "probe": NO_WATERMARK}
    history = [NO_WATERMARK]  # history[k] = W after the first k events
    stored: list[StreamTuple] = []
    met: dict[int, list[float]] = {}  # stored base id -> values of the probes it met
    res = Results()

    def w_at(k: int) -> int:
        return history[k] if k > 0 else NO_WATERMARK

    def final_row(a: StreamTuple) -> None:
        values = met.pop(a.id)
        if q.aggregate is not None:
            res.aggregates.append((a.id, *compute_aggregate(values, q.aggregate)))
        elif q.join == "left" and not values:
            res.pairs.append((a.id, None))

    def meet(a: StreamTuple, b: StreamTuple) -> None:
        if q.aggregate is None:
            res.pairs.append((a.id, b.id))
        if a.id in met:
            met[a.id].append(b.value)

    held: list[StreamTuple] | None = None  # what is stored when End arrives

    def own_w(side: str, j: int) -> int:  # W_X of input ``side`` before event j (side_combine="own")
        if q.lateness is None:
            return w_at(j - 1 - p.lag)
        m = side_max[side]
        return NO_WATERMARK if m == NO_WATERMARK else m - q.lateness - p.lateness_shift

    for j, e in enumerate(events, 1):
        if isinstance(e, End):
            held = list(stored)
            if p.end_flush:
                for a in stored:
                    if a.side == BASE:
                        final_row(a)
            stored = []
            break
        if isinstance(e, Watermark):
            channel_max[e.channel] = max(channel_max[e.channel], e.ts)
        else:
            w_before = own_w(e.side, j) if p.side_combine == "own" else w_at(j - 1 - p.lag)
            late = p.late_tuples not in ("ignore", "revise") and is_late_under(e, w_before, p)
            if late and p.late_tuples == "report":
                res.late.append(e.id)
            side_max[e.side] = max(side_max[e.side], e.ts)
            if not late or p.late_tuples == "join":
                if e.side == BASE:
                    met[e.id] = []
                for x in stored:
                    if x.side != e.side:
                        a, b = (e, x) if e.side == BASE else (x, e)
                        if is_match(a, b, q):
                            meet(a, b)
                if p.late_tuples == "ignore":
                    store_it = w_at(j - 1 - p.lag) < state_edge(e, q)
                else:
                    store_it = p.late_tuples == "revise" or not late
                if store_it:
                    stored.append(e)
                elif e.side == BASE:  # joined, never stored: its row (if any) is final now
                    final_row(e)
                if p.purge == "lazy-own" and not late:  # forget the input's own tuples at or below W_X
                    for x in [x for x in stored if x.side == e.side and x is not e and x.ts <= w_before]:
                        stored.remove(x)
                        if x.side == BASE:
                            final_row(x)
        history.append(combine_watermark(channel_max, side_max, q, p))
        if p.late_tuples == "revise" or p.purge == "lazy-own":
            continue  # nothing is dropped by W
        w_evict = w_at(j - p.lag)
        keep: list[StreamTuple] = []
        for x in stored:
            if is_droppable(x, w_evict, q, p):
                if x.side == BASE:
                    final_row(x)
            else:
                keep.append(x)
        stored = keep
    if p.retract_on_purge:  # the rows of forgotten tuples taken back: the join of the tuples still held
        return compute_join_of(stored if held is None else held, q)
    return res.canonical()


def compute_join_of(tuples: Sequence[StreamTuple], q: Query) -> Results:
    r"""The batch result of ``q`` over ``tuples`` (no W, nothing late): the pairs
    :math:`\{(a, b) : match(a, b)\}`, (a, null) for an unmatched base of a left join, and the aggregate of
    every base over the probes it matches."""
    bases = [t for t in tuples if t.side == BASE]
    probes = [t for t in tuples if t.side != BASE]
    if q.aggregate is None:
        return Results(compute_pairs(bases, probes, q))
    return Results(aggregates=[(a.id, *compute_aggregate([b.value for b in probes if is_match(a, b, q)],
                                                         q.aggregate)) for a in bases]).canonical()


__all__ = [
    "CANONICAL",
    "PROFILES",
    "Profile",
    "combine_watermark",
    "compute_join_of",
    "compute_profile_result",
    "custom_profile",
    "get_profile",
    "is_droppable",
    "is_late_under",
    "state_edge",
]
