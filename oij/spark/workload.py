"""The built-in workload of ``oij check`` when no file and no preset is given (and the fallback without
:mod:`oij.workloads`): small, skewed, out of order, two watermark channels, a few stragglers that are late.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from oij.spec.model import End, Event, Query, StreamTuple, Watermark

BUILTIN = "builtin-small"


def builtin_workload(events: int = 20_000, seed: int = 1) -> tuple[Query, Iterator[Event]]:
    """A deterministic stream of about ``events`` events (tuples and watermarks) and its query.

    Query: window [ts - 1000, ts] (pairs, inner join), two channels.  Tuples:
    one every 10 time units, base or probe with equal probability, 50 int
    keys with a skewed distribution (key ``int(50 u^3)``, so key 0 holds
    about 37% of the tuples); each arrives after a random delay in [0, 500)
    time units, 0.5% after 3000 (stragglers, mostly late).  Each channel
    emits the watermark max ts - 600 of its own tuples every 100 of them.
    """
    rnd = random.Random(seed)
    q = Query(lower=-1000, upper=0, channels=2)
    n = max(1, events * 100 // 101)
    arrivals: list[tuple[float, StreamTuple]] = []
    for i in range(n):
        ts = 10 * i
        delay = 3000.0 if rnd.random() < 0.005 else rnd.random() * 500
        t = StreamTuple(
            "base" if rnd.random() < 0.5 else "probe",
            i,
            ts,
            int(50 * rnd.random() ** 3),
            float(rnd.randint(-1000, 1000)) / 8,
            rnd.randrange(2),
        )
        arrivals.append((ts + delay, t))
    arrivals.sort(key=lambda x: x[0])

    def gen() -> Iterator[Event]:
        seen = [0, 0]
        top = [-(1 << 62), -(1 << 62)]
        for _, t in arrivals:
            yield t
            c = t.channel
            seen[c] += 1
            top[c] = max(top[c], t.ts)
            if seen[c] % 100 == 0:
                yield Watermark(top[c] - 600, c)
        yield End()

    return q, gen()
