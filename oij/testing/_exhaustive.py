"""Bounded-exhaustive small cases: every arrival sequence of up to three events over a tiny alphabet.

Random generation reaches a condition in proportion to how often its draws
line up; some conditions of an implementation's state need an exact order of
a few events (a base final on arrival, a purge between two bases, a probe at
the edge of both).  :func:`small_cases` enumerates them all instead, for a
few windows chosen to put every sign on each bound (``[-2, 0]``, ``[0, 0]``,
``[-3, -1]`` wholly past, ``[1, 3]`` wholly future), pairs (inner and left),
count and min, in watermark mode and in lateness mode (lateness 1):

* a tuple is a side, a time in {0, 1, 2} and a key in {1, 2} (key 2 only
  at time 1, so that a second key meets the first without doubling the
  alphabet); its value is ``1.5 * id - 3`` (distinct, of both signs);
* a watermark (watermark mode only) is at 1 or 2.

``oij bench kit-power --deep`` replays survivors against this corpus as well
as against more generated cases (docs/conformance.rst).  16,160 cases.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from oij.spec.model import AggregateKind, End, Event, JoinKind, Query, StreamTuple, Watermark
from oij.testing._case import Case

WINDOWS = ((-2, 0), (0, 0), (-3, -1), (1, 3))
"""Bounds of the exhaustive cases: the common ``[-X, 0]``, zero-width, wholly past, wholly future."""


def _queries() -> Iterator[Query]:
    aggs: tuple[AggregateKind | None, ...] = (None, "count", "min")
    joins: tuple[JoinKind, ...] = ("inner", "left")
    for (lower, upper), agg, join, lateness in itertools.product(WINDOWS, aggs, joins, (None, 1)):
        if agg is not None and join == "left":
            continue  # a left join changes nothing for an aggregate row
        yield Query(lower, upper, aggregate=agg, join=join, lateness=lateness)


def small_cases(max_events: int = 3) -> Iterator[Case]:
    """Every case of up to ``max_events`` events over the alphabet of the module docstring, per query."""
    tuples = [("base", ts, 1) for ts in range(3)] + [("probe", ts, 1) for ts in range(3)] + [
        ("base", 1, 2), ("probe", 1, 2)]
    marks = [1, 2]
    for q in _queries():
        alphabet: list[tuple[str, int, int] | int] = [*tuples, *(marks if q.lateness is None else [])]
        for n in range(1, max_events + 1):
            for seq in itertools.product(alphabet, repeat=n):
                events: list[Event] = []
                ids = 0
                for sym in seq:
                    if isinstance(sym, int):
                        events.append(Watermark(sym))
                    else:
                        ids += 1
                        side, ts, key = sym
                        events.append(StreamTuple("base" if side == "base" else "probe", ids, ts, key,
                                                  1.5 * ids - 3.0))
                events.append(End())
                yield Case(q, tuple(events), "exhaustive")
