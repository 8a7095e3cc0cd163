r"""Semantic profiles: the deliberate differences of real systems, as named parameters of the specification.

The canonical semantics (:mod:`oij.spec.stream`) is one point in a small space.
Real systems choose other points on purpose; a :class:`Profile` names one, and
:func:`compute_profile_result` computes the result of a complete stream under
it, by simulating an operator step by step.  Under :data:`oij.spec.profiles.CANONICAL` it equals
:func:`oij.spec.stream.compute_stream_result` (tested against the oracle).

The parameters, with E the arrival sequence, :math:`W_k` the watermark after
the first k events (computed as in :mod:`oij.spec.watermark`, with the combination
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

A profile fixes the *rules*; the *schedule* (when W moves) is the input's.  An
engine run as its users run it picks its own schedule, and
:mod:`oij.spec.schedule` judges its output up to schedule under a profile's
rules.  For ``spark-ss`` so run: many rows per micro-batch, every row of batch
b judged against one W (the ``batchWatermarkMs`` of batch b - 1, computed at
the end of batch b - 2; batch b's own evicts its state), W starting at 0 (a
row with :math:`ts \le 0` ms is dropped from the first batch on), one delay
per input and the minimum across inputs, no-data micro-batches on by default
(they move W after the data ends), and eviction at :math:`ts \le W` for an
event-time equi-join key but :math:`ts \le W - 1` ms for a range condition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from oij.spec.aggregate import compute_aggregate
from oij.spec.batch import Results, compute_batch
from oij.spec.match import is_match, lower_offset, upper_offset
from oij.spec.model import BASE, NO_WATERMARK, PROBE, End, Event, Query, StreamTuple, Watermark


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
        """The parameters where this profile differs from :data:`oij.spec.profiles.CANONICAL`, as ``name=value``
        strings."""
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
    """A profile with the given parameters on top of :data:`oij.spec.profiles.CANONICAL` (name ``custom``)."""
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


@dataclass
class ProfileState:
    r"""The simulated operator of :func:`compute_profile_result` after some events.

    ``channel_max[c]``: the largest watermark of channel c; ``side_max[X]``: the largest ts of input X;
    ``history[k]``: W after the first k events (``history[0]`` is :math:`-\infty`); ``stored``: the tuples
    held; ``met[a]``: the values of the probes stored base a has met; ``held``: what was stored when End
    arrived (None before); ``res``: the rows emitted so far.
    """

    channel_max: list[int]
    side_max: dict[str, int]
    history: list[int] = field(default_factory=lambda: [NO_WATERMARK])
    stored: list[StreamTuple] = field(default_factory=list)
    met: dict[int, list[float]] = field(default_factory=dict)
    held: list[StreamTuple] | None = None
    res: Results = field(default_factory=Results)


def initial_profile_state(q: Query) -> ProfileState:
    r"""No event yet: every maximum and W are :math:`-\infty`, nothing stored or emitted."""
    return ProfileState([NO_WATERMARK] * q.channels, {BASE: NO_WATERMARK, PROBE: NO_WATERMARK})


def history_watermark(s: ProfileState, k: int) -> int:
    r""":math:`W_k`, W after the first k events; :math:`-\infty` for :math:`k \le 0` (the ``lag`` reaches back
    before the stream)."""
    return s.history[k] if k > 0 else NO_WATERMARK


def watermark_before(s: ProfileState, side: str, j: int, q: Query, p: Profile) -> int:
    r"""The W that judges a tuple of input ``side`` arriving as event j: :math:`W_{j-1-lag}`, or under
    ``side_combine="own"`` in lateness mode its own input's :math:`\max_{x \in X} x.ts - l - shift`."""
    if p.side_combine != "own" or q.lateness is None:
        return history_watermark(s, j - 1 - p.lag)
    m = s.side_max[side]
    return NO_WATERMARK if m == NO_WATERMARK else m - q.lateness - p.lateness_shift


def emit_final_row(s: ProfileState, a: StreamTuple, q: Query) -> None:
    """Base ``a`` is final: emit its aggregate over the values it met, or its (a, null) row of a left join if it
    met none.  Requires: ``a`` in ``met``.  Changes: removes it from ``met``."""
    values = s.met.pop(a.id)
    if q.aggregate is not None:
        s.res.aggregates.append((a.id, *compute_aggregate(values, q.aggregate)))
    elif q.join == "left" and not values:
        s.res.pairs.append((a.id, None))


def probe_stored(s: ProfileState, e: StreamTuple, q: Query) -> None:
    """Tuple ``e`` meets every stored tuple of the other input it matches: emits the pair (a, b) of a join, and
    records b's value for base a while a awaits its final row."""
    for x in s.stored:
        if x.side != e.side:
            a, b = (e, x) if e.side == BASE else (x, e)
            if is_match(a, b, q):
                if q.aggregate is None:
                    s.res.pairs.append((a.id, b.id))
                if a.id in s.met:
                    s.met[a.id].append(b.value)


def is_stored_under(e: StreamTuple, late: bool, s: ProfileState, j: int, q: Query, p: Profile) -> bool:
    r"""Whether tuple ``e`` (event j, ``late`` or not) is stored: every tuple under ``"revise"``; under
    ``"ignore"`` iff it can still meet a later tuple, :math:`W_{j-1-lag} <` :func:`state_edge`; else iff on time."""
    if p.late_tuples == "ignore":
        return history_watermark(s, j - 1 - p.lag) < state_edge(e, q)
    return p.late_tuples == "revise" or not late


def on_profile_tuple(s: ProfileState, e: StreamTuple, j: int, q: Query, p: Profile) -> None:
    """Event j is tuple ``e``.  Judges it late against :func:`watermark_before` (``late_tuples`` decides what
    that means: reported, dropped, joined only, or no notion), lets it probe the stored tuples
    (:func:`probe_stored`), stores it (:func:`is_stored_under`) or else emits a base's final row now, and under
    ``lazy-own`` forgets its input's old tuples.  Changes ``side_max``."""
    w_before = watermark_before(s, e.side, j, q, p)
    late = p.late_tuples not in ("ignore", "revise") and is_late_under(e, w_before, p)
    if late and p.late_tuples == "report":
        s.res.late.append(e.id)
    s.side_max[e.side] = max(s.side_max[e.side], e.ts)
    if late and p.late_tuples != "join":
        return
    if e.side == BASE:
        s.met[e.id] = []
    probe_stored(s, e, q)
    if is_stored_under(e, late, s, j, q, p):
        s.stored.append(e)
    elif e.side == BASE:  # joined, never stored: its row (if any) is final now
        emit_final_row(s, e, q)
    if p.purge == "lazy-own" and not late:
        for x in [x for x in s.stored if x.side == e.side and x is not e and x.ts <= w_before]:
            s.stored.remove(x)
            if x.side == BASE:
                emit_final_row(s, x, q)


def evict_after(s: ProfileState, j: int, q: Query, p: Profile) -> None:
    """After event j, drop every stored tuple :func:`is_droppable` under :math:`W_{j-lag}`, emitting each
    dropped base's final row.  Nothing is dropped by W under ``"revise"`` or ``"lazy-own"``."""
    if p.late_tuples == "revise" or p.purge == "lazy-own":
        return
    w_evict = history_watermark(s, j - p.lag)
    keep: list[StreamTuple] = []
    for x in s.stored:
        if is_droppable(x, w_evict, q, p):
            if x.side == BASE:
                emit_final_row(s, x, q)
        else:
            keep.append(x)
    s.stored = keep


def on_profile_end(s: ProfileState, q: Query, p: Profile) -> None:
    """End: remember what is stored (``held``); with ``end_flush`` emit every stored base's final row; nothing
    stays stored."""
    s.held = list(s.stored)
    if p.end_flush:
        for a in s.stored:
            if a.side == BASE:
                emit_final_row(s, a, q)
    s.stored = []


def compute_profile_result(events: Sequence[Event], q: Query, p: Profile = CANONICAL) -> Results:
    """The result of a complete stream under profile ``p`` (canonical order): the operator simulated event by
    event (:func:`on_profile_tuple`, a watermark raising its channel's maximum, :func:`on_profile_end`), W
    recomputed after each (:func:`combine_watermark`) and state evicted (:func:`evict_after`).  With
    ``retract_on_purge`` the rows of forgotten tuples are taken back: the result is the batch join
    (:func:`oij.spec.batch.compute_batch`) of the tuples still held.

    Requires: ``events`` valid for ``q`` (ids unique), ending with End or not.
    Quadratic and step by step on purpose: this is a definition.
    """
    s = initial_profile_state(q)
    for j, e in enumerate(events, 1):
        if isinstance(e, End):
            on_profile_end(s, q, p)
            break
        if isinstance(e, Watermark):
            s.channel_max[e.channel] = max(s.channel_max[e.channel], e.ts)
        else:
            on_profile_tuple(s, e, j, q, p)
        s.history.append(combine_watermark(s.channel_max, s.side_max, q, p))
        evict_after(s, j, q, p)
    if p.retract_on_purge:
        return compute_batch(s.stored if s.held is None else s.held, q).canonical()
    return s.res.canonical()


__all__ = [
    "CANONICAL",
    "PROFILES",
    "Profile",
    "ProfileState",
    "combine_watermark",
    "compute_profile_result",
    "custom_profile",
    "emit_final_row",
    "evict_after",
    "get_profile",
    "history_watermark",
    "initial_profile_state",
    "is_droppable",
    "is_late_under",
    "is_stored_under",
    "on_profile_end",
    "on_profile_tuple",
    "probe_stored",
    "state_edge",
    "watermark_before",
]
