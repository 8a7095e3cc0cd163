"""Thirteen bug shapes of ordinary stream-join implementations, each a subclass of accum_oij's correct :class:`Join`.

``python tests/impls/accum_bugs.py BUG`` is a command of the conformance
protocol (``--list`` prints the bugs).  The bugs are the shapes issue 23 reported passing ``oij conform``
in independent implementations; ``tests/bench/test_kit_power.py`` requires every
one to be caught at the default settings with a replay of at most 6 events.
They live apart from accum_oij.py so that the file ``oij bench kit-power``
mutates has no bug switches.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, so that tests.impls imports
from tests.impls.accum_oij import Join, Tup, main


class TiesProbeFirstTwice(Join):
    """A pair with equal timestamps is emitted twice when the probe arrived first."""

    def on_base(self, a: Tup) -> None:
        super().on_base(a)
        for b in self.probes.get(a.key, []):
            if b.ts == a.ts and self.lo <= 0 <= self.hi:
                self.match(a, b)


class Upper0ExclusiveBasePath(Join):
    """An inclusive upper bound of 0 is treated as exclusive on the base-triggered search only."""

    def on_base(self, a: Tup) -> None:
        hi = -1 if self.upper == 0 and self.hi_incl else self.hi
        for b in self.probes.get(a.key, []):
            if a.ts + self.lo <= b.ts <= a.ts + hi:
                self.match(a, b)


class ProbePathFlagsSwapped(Join):
    """The probe-triggered search applies each inclusivity flag to the other bound."""

    def on_probe(self, b: Tup) -> None:
        lo = self.lower if self.hi_incl else self.lower + 1
        hi = self.upper if self.lo_incl else self.upper - 1
        for a in self.bases.get(b.key, []):
            if a.ts + lo <= b.ts <= a.ts + hi:
                self.match(a, b)


class ProbeDroppedAtEdge(Join):
    """A probe is dropped already when b.ts == W + lo (kept only while b.ts > W + lo)."""

    def keep_probe(self, b: Tup) -> bool:
        if b.ts == self.w + self.lo:
            return False
        return super().keep_probe(b)


class BaseFinalAtEdge(Join):
    """A base is final (its row out, its state dropped) already when W == hi(a)."""

    def is_final(self, a: Tup) -> bool:
        return self.w >= a.ts + self.hi


class ProbePurgeSignFlipped(Join):
    """The probe purge flips the sign of lower: probes are kept while b.ts >= W - lo."""

    def keep_probe(self, b: Tup) -> bool:
        if b.ts >= self.w - self.lo:
            return True
        return self.agg is not None and any(a.ts + self.lo <= b.ts <= a.ts + self.hi
                                            for a in self.bases.get(b.key, []))


class BasePurgeIgnoresUpper(Join):
    """A base is final once W > a.ts, ignoring a positive upper bound."""

    def is_final(self, a: Tup) -> bool:
        return self.w > a.ts + min(self.hi, 0)


class KeyHashBucket(Join):
    """Int keys are compared through a small hash bucket (hash(key) % 8), so key 1 joins key 9."""

    def key(self, k: int | str) -> tuple[str, int | str]:
        return ("int", hash(k) % 8) if isinstance(k, int) else super().key(k)


class NeverPurges(Join):
    """Exact, but it never drops a probe: its state grows with the stream (``oij conform --state-bound``)."""

    def keep_probe(self, b: Tup) -> bool:
        return True

    def on_watermark_change(self) -> None:  # only the bases: walking every kept probe would be quadratic
        for k in list(self.bases):
            pending = []
            for a in self.bases[k]:
                if self.is_final(a):
                    self.finalize(a)
                else:
                    pending.append(a)
            self.bases[k] = pending


class CompactLeak(Join):
    """Exact, and it purges its probes, but keeps a trace of each one it drops, packed into one int (id and ts):
    a leak of a few dozen bytes per tuple, which a bound on memory with a generous allowance misses."""

    def __init__(self, q: dict[str, Any]) -> None:
        super().__init__(q)
        self.trace: list[int] = []

    def keep_probe(self, b: Tup) -> bool:
        kept = super().keep_probe(b)
        if not kept:
            self.trace.append(b.id << 64 | (b.ts & 0xFFFFFFFFFFFFFFFF))
        return kept


def _wrap32(x: int) -> int:
    return (x + (1 << 31)) % (1 << 32) - (1 << 31)


class Int32Timestamps(Join):
    """Timestamps (and watermarks) held in a 32-bit int, as a C or Java ``int``: they wrap past 2^31."""

    def on_tuple(self, ev: dict[str, Any]) -> None:
        super().on_tuple({**ev, "ts": _wrap32(int(ev["ts"]))})

    def on_watermark(self, ev: dict[str, Any]) -> None:
        super().on_watermark({**ev, "ts": _wrap32(int(ev["ts"]))})


class IdsThroughDouble(Join):
    """Ids read through a double (a JavaScript number): above 2^53 they lose their last bits."""

    def on_tuple(self, ev: dict[str, Any]) -> None:
        super().on_tuple({**ev, "id": int(float(ev["id"]))})


class KeysCaseInsensitive(Join):
    """String keys compared case-insensitively, as under a SQL collation."""

    def key(self, k: int | str) -> tuple[str, int | str]:
        return ("str", k.lower()) if isinstance(k, str) else super().key(k)


class ChannellessWatermarkToAll(Join):
    """A watermark line without a ``channel`` field is applied to every channel."""

    def on_watermark(self, ev: dict[str, Any]) -> None:
        if "channel" in ev:
            super().on_watermark(ev)
            return
        for c in range(self.channels):
            super().on_watermark({**ev, "channel": c})


class IntValuesIntegerAvg(Join):
    """An average over values that were all written as JSON integers (``"value":1``, no decimal point) is taken in
    integer arithmetic, as Java's ``long / long`` or C's ``int / int``: 1 and 2 average to 1, where 1.0 and 2.0
    average to 1.5.  Right on every file the kit's float encoder writes."""

    def __init__(self, q: dict[str, Any]) -> None:
        super().__init__(q)
        self.all_int: dict[int, bool] = {}

    def match(self, a: Tup, b: Tup) -> None:
        self.all_int[a.id] = self.all_int.get(a.id, True) and type(b.value) is int
        super().match(a, b)

    def finalize(self, a: Tup) -> None:
        n = len(a.acc.probes)
        if self.agg == "avg" and n and self.all_int.get(a.id, False):
            self.emit({"type": "aggregate", "base": a.id, "count": n, "value": int(a.acc.total / n)})
            return
        super().finalize(a)


class MinSingleNegativeMagnitude(Join):
    """A min over a window of one probe whose value is negative is written as its magnitude (the one-element path
    of a min kept as a magnitude and a sign, the sign lost)."""

    def finalize(self, a: Tup) -> None:
        low = a.acc.low
        if self.agg == "min" and low is not None and low < 0 and len(a.acc.probes) == 1:
            self.emit({"type": "aggregate", "base": a.id, "count": 1, "value": -low})
            return
        super().finalize(a)


class CountEmptyNullPastWindowLateness(Join):
    """In lateness mode, with a window wholly in the past, a count over an empty window is written as null (the
    rule of avg, min and max) instead of 0."""

    def finalize(self, a: Tup) -> None:
        if self.agg == "count" and self.lateness is not None and self.hi < 0 and not a.acc.probes:
            self.emit({"type": "aggregate", "base": a.id, "count": 0, "value": None})
            return
        super().finalize(a)


BUGS: dict[str, type[Join]] = {
    "ties-probe-first-twice": TiesProbeFirstTwice,
    "upper0-exclusive-base-path": Upper0ExclusiveBasePath,
    "probe-path-flags-swapped": ProbePathFlagsSwapped,
    "probe-dropped-at-edge": ProbeDroppedAtEdge,
    "base-final-at-edge": BaseFinalAtEdge,
    "probe-purge-sign-flipped": ProbePurgeSignFlipped,
    "base-purge-ignores-upper": BasePurgeIgnoresUpper,
    "key-hash-bucket": KeyHashBucket,
    "int32-timestamps": Int32Timestamps,
    "ids-through-double": IdsThroughDouble,
    "keys-case-insensitive": KeysCaseInsensitive,
    "channelless-watermark-to-all": ChannellessWatermarkToAll,
}
TEXT_BUGS: dict[str, type[Join]] = {"int-values-integer-avg": IntValuesIntegerAvg}
"""Shapes that only the text of a case shows (issue 46: a number's JSON type): caught at the defaults by the
``representation/int-values-*`` vectors and by ``oij conform --replay`` of a file that has them; the 200
generated cases of a default run hold too few averages of two or more values to meet it alone."""
SMALL_SCOPE_BUGS: dict[str, type[Join]] = {"min-single-negative-magnitude": MinSingleNegativeMagnitude,
                                           "count-empty-null-past-window-lateness": CountEmptyNullPastWindowLateness}
"""Shapes (issue 65) that the vectors and the 200 generated cases of a default run at issue 65's start did not
meet, and the small-scope stage did (then on by default only with ``--session``): an aggregate over the small
domain of values and windows that stage enumerates.  The per-case default now runs its covering array
(``tests/testing/test_kit_regressions.py``)."""
STATE_BUGS: dict[str, type[Join]] = {"never-purges": NeverPurges, "compact-leak": CompactLeak, "correct": Join,
                                     "leaky-session": Join}
"""Not shapes of the per-case protocol: ``never-purges`` and ``compact-leak`` (exact answers, unbounded state:
caught by ``oij conform --state-bound`` only), ``correct`` (accum_oij itself, here so that it speaks the session
protocol too) and ``leaky-session`` (correct per case; under ``OIJ_SESSION=1`` it keeps the last case's probes)."""
"""The first eight are issue 23's shapes; the last four issue 37's (how other languages hold values)."""


def session_main(make: type[Join], leak: bool = False) -> None:
    """The session protocol (``OIJ_SESSION=1``): cases one after another, each answered, then the end line.
    ``leak``: the bug of a session that does not reset -- the next case starts with the last one's probes."""
    join: Join | None = None
    for line in sys.stdin:
        if not line.strip():
            continue
        ev = json.loads(line)
        if ev["type"] == "query":
            old, join = join, make(ev)
            if leak and old is not None:
                join.probes = old.probes
        elif join is None:
            sys.exit("the first line must be the query")
        elif ev["type"] == "tuple":
            join.on_tuple(ev)
        elif ev["type"] == "watermark":
            join.on_watermark(ev)
        elif ev["type"] == "end":
            join.on_end()
            sys.stdout.write('{"type":"end"}\n')
            sys.stdout.flush()


def _make(bug: str) -> type[Join]:
    known = {**BUGS, **TEXT_BUGS, **SMALL_SCOPE_BUGS, **STATE_BUGS}
    if bug not in known:
        sys.exit(f"unknown bug {bug!r}; known: {', '.join(known)}")
    return known[bug]


if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:  # for oij bench kit-power
        print("\n".join(f"{name}\t{' '.join((cls.__doc__ or '').split())}"
                        for name, cls in {**BUGS, **TEXT_BUGS}.items()))
        sys.exit(0)
    bug = sys.argv[1] if len(sys.argv) > 1 else ""
    cls: Any = _make(bug)
    if os.environ.get("OIJ_SESSION") == "1":
        session_main(cls, leak=bug == "leaky-session")
    else:
        main(cls)
