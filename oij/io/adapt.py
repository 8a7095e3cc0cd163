"""What a real-system adapter (Spark, Flink) can express of an oij-jsonl case, and the check for it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oij.spec.aggregate import AggregateValue
from oij.spec.model import Event, Query, StreamTuple, Watermark

LATENESS_FEATURES = ("left", "exclusive", "lateness", "mixed-keys", "negative-ts")
"""The oij.testing features of a system that derives watermarks from event times and reports no late rows."""


def aggregate_row(kind: str, base: int, n: int, total: Any, mn: Any, mx: Any) -> tuple[int, int, AggregateValue]:
    """A system's group of base ``base`` -- its count of matched probes, the sum (null when none: 0.0), min and
    max of their values -- as the oij aggregate row ``(base, count, value)`` of ``kind``; avg is sum / count."""
    total_f = 0.0 if total is None else float(total) + 0.0
    if kind == "count":
        return base, n, n
    if kind == "sum":
        return base, n, total_f
    if n == 0:
        return base, 0, None
    if kind == "avg":
        return base, n, total_f / n
    return base, n, float(mn if kind == "min" else mx) + 0.0


class Unsupported(ValueError):
    """The case uses something the system cannot express (the message says what)."""


def check_lateness_case(q: Query, events: Sequence[Event], ts_range: int, watermarks: str, why_ts: str) -> None:
    """Raise :class:`Unsupported` unless the case is within :data:`LATENESS_FEATURES` and :math:`|ts| <` ``ts_range``.

    ``watermarks`` says where the system's watermarks come from; ``why_ts`` why
    the timestamp range is what it is (both end up in the message).  Per-base
    aggregates pass: both systems state them (their ``-agg`` adapters).
    """
    if q.lateness is None:
        raise Unsupported(f"{watermarks}: only lateness mode (\"lateness\" in the query) can be driven, "
                          "not watermark lines")
    for e in events:
        if isinstance(e, Watermark):
            raise Unsupported("watermark lines are not supported")
        if isinstance(e, StreamTuple) and abs(e.ts) >= ts_range:
            raise Unsupported(f"timestamp {e.ts} is outside +/-{ts_range} ({why_ts})")


__all__ = ["LATENESS_FEATURES", "Unsupported", "aggregate_row", "check_lateness_case"]
