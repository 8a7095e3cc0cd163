r"""Watermarks and lateness: when a tuple is late, and the watermark at each arrival.

Watermark mode (PPOIJ [PPOIJ]_ §2.4.3, Flink, WindFlow).  With N channels, let
:math:`m_c` be the largest watermark seen so far on channel c
(:math:`-\infty` before any).  The effective watermark is

.. math:: W = \min_{0 \le c < N} m_c .

A regression on a channel (a watermark below :math:`m_c`) changes nothing.

Lateness mode (Scale-OIJ [Scale-OIJ]_ §II-B).  With a lateness bound l,
:math:`W = \max\{x.ts \mid x \text{ arrived so far}\} - l` (:math:`-\infty`
before any tuple).  Watermark events are not used.

In both modes a tuple x is *late* iff :math:`x.ts < W` for the W in force when
it arrives (before it is counted).  A late tuple is reported and never joins.
Flink and WindFlow use the same ``<``; Spark drops a row when
:math:`ts \le W`; this specification uses ``<``.

Claim (tested): in lateness mode, if :math:`l \ge` the stream's true maximum
disorder :math:`D = \max_{i<j} (x_i.ts - x_j.ts)` over arrival positions i<j,
no tuple is late, so the streaming result equals the batch result.
Proof: at the arrival of :math:`x_j`, :math:`W = \max_{i<j} x_i.ts - l \le
x_j.ts + D - l \le x_j.ts`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from oij.spec.model import NO_WATERMARK, End, Event, Query, StreamTuple, Watermark


def initial_channel_watermarks(q: Query) -> tuple[int, ...]:
    r"""The per-channel maxima before any event: :math:`(-\infty, \dots, -\infty)`, N entries."""
    return (NO_WATERMARK,) * q.channels


def on_watermark(ms: tuple[int, ...], w: Watermark) -> tuple[int, ...]:
    r"""The per-channel maxima after watermark ``w``: :math:`m_{w.channel} \leftarrow \max(m_{w.channel}, w.ts)`."""
    c = w.channel
    return (*ms[:c], max(ms[c], w.ts), *ms[c + 1:])


def effective_watermark(ms: Sequence[int]) -> int:
    r""":math:`W = \min_c m_c`."""
    return min(ms)


def lateness_watermark(max_ts: int, lateness: int) -> int:
    r""":math:`W = \max ts - l`, or :math:`-\infty` when no tuple was seen (``max_ts`` is -inf)."""
    return NO_WATERMARK if max_ts == NO_WATERMARK else max_ts - lateness


def is_late(t: StreamTuple, w: int) -> bool:
    r"""True iff ``t`` is late under watermark ``w``: :math:`t.ts < W`."""
    return t.ts < w


def arrival_watermarks(events: Iterable[Event], q: Query) -> list[int]:
    """W in force at the arrival of each event, before the event itself is applied.

    After an :class:`~oij.spec.model.End` no event may follow; the list has one entry per event.
    """
    ms = initial_channel_watermarks(q)
    max_ts = NO_WATERMARK
    out: list[int] = []
    for e in events:
        w = effective_watermark(ms) if q.lateness is None else lateness_watermark(max_ts, q.lateness)
        out.append(w)
        if isinstance(e, Watermark):
            ms = on_watermark(ms, e)
        elif isinstance(e, StreamTuple) and not is_late(e, w):
            max_ts = max(max_ts, e.ts)
        elif isinstance(e, End):
            pass
    return out


def watermark_after(events: Sequence[Event], q: Query) -> int:
    """W after all of ``events`` (the W the next event would see)."""
    return arrival_watermarks([*events, End()], q)[-1]
