"""Hypothesis strategies for queries and arrival sequences with every corner the spec names.

Sequences have ties, negative and positive bounds, windows wholly in the past
or future, exclusive flags, several channels, watermark regressions, late
tuples at exactly W, huge and negative timestamps, int and str keys
(including 1 and "1"), and idle periods where one key sees no tuple while the
watermark moves on.
"""

from __future__ import annotations

from typing import cast

from hypothesis import strategies as st
from oij.spec.model import (
    AGGREGATES,
    BASE,
    COND_OPS,
    PROBE,
    TS_LIMIT,
    AggregateKind,
    Comparison,
    CondOp,
    End,
    Event,
    Query,
    Side,
    StreamTuple,
    Watermark,
)

KEYS: list[int | str] = [0, 1, "1", "a"]
VALUES = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 1e16, -1e16, 1e-300, 3.0]),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
)
ORIGINS = [0, -1000, TS_LIMIT - 400, -TS_LIMIT + 400]
FIELD_VALUES = [0.0, 1.0, -1.0, 2.5, 1e16, 1e16 + 2, -0.0]

COMPARISONS = st.builds(
    Comparison,
    st.sampled_from(["x", "y", "value", "ts"]),
    st.sampled_from(cast("list[CondOp]", COND_OPS)),
    st.sampled_from(["x", "y", "value", "ts"]),
    st.sampled_from([0.0, 0.0, 1.0, -1.0, 0.5, -3.0, float(1 << 53)]),
)
"""Comparisons over the fields x and y of :func:`event_lists` and over ts and value."""

EXACT_VALUES_COND = st.integers(-8, 8).map(lambda k: k / 4)
"""Values whose float sums are exact in any order (engines sum in batches), few enough for ties in a cond."""


@st.composite
def queries(draw: st.DrawFn, *, lateness: bool | None = None, aggregate: bool | None = None,
            cond: bool | None = None) -> Query:
    """A valid query with small bounds; ``lateness``/``aggregate``/``cond`` force the mode when not None."""
    lower = draw(st.integers(-12, 12))
    upper = lower + draw(st.integers(0, 14))
    use_lateness = draw(st.booleans()) if lateness is None else lateness
    kinds: list[AggregateKind] = list(AGGREGATES)
    agg: AggregateKind | None = None
    if aggregate is None:
        agg = draw(st.sampled_from([None, None, *kinds]))
    elif aggregate:
        agg = draw(st.sampled_from(kinds))
    return Query(
        lower=lower,
        upper=upper,
        lower_inclusive=draw(st.booleans()),
        upper_inclusive=draw(st.booleans()),
        aggregate=agg,
        join=draw(st.sampled_from(["inner", "left"])),
        channels=1 if use_lateness else draw(st.integers(1, 3)),
        lateness=draw(st.integers(0, 8)) if use_lateness else None,
        cond=tuple(draw(st.lists(COMPARISONS, min_size=1, max_size=2)))
        if (draw(st.integers(0, 2)) == 0 if cond is None else cond) else (),
    )


@st.composite
def event_lists(
    draw: st.DrawFn, q: Query, *, max_events: int = 40, values: st.SearchStrategy[float] = VALUES
) -> list[Event]:
    """An arrival sequence for ``q``, ending with End.

    A clock drifts forward; tuples are drawn around it (disorder), watermarks
    trail it (and sometimes regress), and a late tuple at exactly the last
    watermark is injected now and then.
    """
    reads_ts = any("ts" in (c.left, c.right) for c in q.cond)
    origin = draw(st.sampled_from(ORIGINS[:2] if reads_ts else ORIGINS))  # a cond reads ts only if |ts| <= 2^53
    n = draw(st.integers(0, max_events))
    clock = origin
    last_wm = origin - 10**6
    events: list[Event] = []
    next_id = draw(st.sampled_from([0, 1, -50, 10**12]))
    for _ in range(n):
        clock += draw(st.integers(0, 4))
        kind = draw(st.sampled_from(["base", "probe", "base", "probe", "wm", "late"]))
        if kind == "wm":
            if q.lateness is not None:
                continue
            ts = clock - draw(st.integers(-2, 12))
            events.append(Watermark(ts, draw(st.integers(0, q.channels - 1))))
            last_wm = max(last_wm, ts)
            continue
        side: Side = draw(st.sampled_from([BASE, PROBE])) if kind == "late" else (BASE if kind == "base" else PROBE)
        ts = last_wm if kind == "late" and last_wm > origin - 10**6 else clock - draw(st.integers(0, 10))
        ts = max(-TS_LIMIT, min(TS_LIMIT, ts))
        events.append(
            StreamTuple(
                side=side,
                id=next_id,
                ts=ts,
                key=draw(st.sampled_from(KEYS)),
                value=draw(values),
                channel=draw(st.integers(0, q.channels - 1)),
                fields=(("x", draw(st.sampled_from(FIELD_VALUES))), ("y", draw(st.sampled_from(FIELD_VALUES))))
                if q.cond else (),
            )
        )
        next_id += 1
    events.append(End())
    return events


@st.composite
def workloads(
    draw: st.DrawFn,
    *,
    lateness: bool | None = None,
    aggregate: bool | None = None,
    max_events: int = 40,
    values: st.SearchStrategy[float] = VALUES,
    cond: bool | None = None,
) -> tuple[Query, list[Event]]:
    """A query and an arrival sequence for it."""
    q = draw(queries(lateness=lateness, aggregate=aggregate, cond=cond))
    return q, draw(event_lists(q, max_events=max_events, values=values))
