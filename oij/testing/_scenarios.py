"""The scenarios of the conformance generator that aim at the core of an interval join and at its state edges.

:func:`oij.testing._cases.cases` draws a query, then one scenario:

``pairs``
    one to four base/probe pairs, the probe on a corner of the base's window
    (0, each bound, one tick inside and outside), each pair in a drawn
    arrival order, so that both trigger paths meet every bound and ties
    arrive both ways;
``edge``
    W placed exactly on a state edge (a probe's purge edge
    :math:`W = b.ts - \\ell'`, a base's finality edge :math:`W = hi(a)`, or a
    tuple's late edge), one tick before or after, then a tuple of the same
    key at the new W: a tuple dropped or finalised one tick early loses a
    row, one kept too long (or a late rule with ``<=``) gains one; or W past
    a probe's purge edge while a pending base still has it in its window
    (``held``: an aggregate must still count it);
``collide``
    keys that differ but agree under a small hash bucket, a modulus, a
    truncation, ``str()`` or a string prefix, inside each other's window;
``long``
    60 to 300 events over several keys from a seeded random walk, so that
    state lives through many purges (the kit's deletion pass shrinks it).

W is moved by watermarks on every channel (watermark mode) or by a tuple
``lateness`` ahead of the target (lateness mode); it never moves backwards,
so a target already passed leaves W where it is.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, cast

from hypothesis import strategies as st

from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import NO_WATERMARK, TS_LIMIT, End, Event, Query, Side, StreamTuple, Watermark
from oij.testing._case import REPR_EDGES, REPR_VALUES

VALUES = (0.0, 1.0, -2.5, 3.0, 0.5, 1e16, -1e16, 1e308, -1e308)
"""Tuple values: ties, halves, signs; 1e16 with -1e16, whose exact sum with a 1 is 1 (a float sum gives 0); and
1e308, two of which sum beyond the double range (written ``"inf"``)."""

INT_KEYS: tuple[int, ...] = (1, 2, 9, 17)
"""Integer keys of the random scenarios: 1 and 9 agree modulo 8, 1 and 17 modulo 16 (a small hash bucket)."""

COLLIDING: tuple[tuple[Any, Any], ...] = ((1, 9), (1, 17), (2, 10), (1, 3), (-1, -2), (0, 256))
"""Pairs of different int keys that a careless key comparison confuses: equal modulo 8, 16, 2 or 256, and -1/-2
(equal under CPython's ``hash``)."""

COLLIDING_REPR: tuple[tuple[Any, Any], ...] = ((1, 1 + (1 << 32)), (1 << 31, -(1 << 31)), ((1 << 53), (1 << 53) + 1),
                                              ((1 << 63) - 1, (1 << 63) - 2), (-(1 << 63), -(1 << 63) + 1),
                                              (7, 7 - (1 << 32)))
"""With ``representation``: int keys equal in 32 bits (truncated or wrapped) or through a double."""

COLLIDING_TEXT: tuple[tuple[Any, Any], ...] = (("K", "k"), ("key", "KEY"), ("Id", "iD"), ("k", "k "),
                                              ("\u00e9", "e\u0301"), ("Stra\u00dfe", "STRASSE"), ("01", 1), ("1.0", 1),
                                              (" 1", 1))
"""With ``representation`` and ``mixed-keys``: string keys equal under a case-insensitive collation, Unicode
normalization (NFC and NFD) or trimming, and numeric strings beside the number they spell."""

COLLIDING_STR: tuple[tuple[Any, Any], ...] = ((1, "1"), ("k", "k1"), ("1", 1), ("ab", "a"), ("k1", "k10"))
"""With ``mixed-keys``: keys that print alike, and string keys that are prefixes of each other."""


class Builder:
    """An arrival sequence under construction, knowing W after every event (ids 1, 2, ... in arrival order)."""

    def __init__(self, q: Query, features: frozenset[str]) -> None:
        self.q = q
        self.regressions = "regressions" in features
        self.events: list[Event] = []
        self.ids = 0
        self.marks = [NO_WATERMARK] * q.channels
        self.max_ts = NO_WATERMARK
        self.floor = -TS_LIMIT if "negative-ts" in features else 0
        self.value_pool: tuple[float, ...] = (0.0, *VALUES, *(REPR_VALUES if "representation" in features else ()))
        self.values = st.sampled_from(self.value_pool)  # 0.0 (the default a minimal encoding leaves out) often

    def w(self) -> int:
        """W in force now (the W the next event sees)."""
        if self.q.lateness is None:
            return min(self.marks)
        return NO_WATERMARK if self.max_ts == NO_WATERMARK else self.max_ts - self.q.lateness

    def tuple(self, side: str, ts: int, key: Any, value: float = 1.0, channel: int = 0) -> None:
        """Append a tuple (``ts`` clamped to the valid range, and at 0 without the ``negative-ts`` feature)."""
        ts = max(self.floor, min(TS_LIMIT, ts))
        self.ids += 1
        self.events.append(StreamTuple(cast(Side, side), self.ids, ts, key, value, channel % self.q.channels))
        if ts >= self.w():  # only on-time tuples move W in lateness mode
            self.max_ts = max(self.max_ts, ts)

    def watermark(self, ts: int, channel: int) -> None:
        """Append a watermark; without the ``regressions`` feature one below the channel's maximum is raised to it."""
        c = channel % self.q.channels
        ts = max(self.floor, min(TS_LIMIT, ts))
        if ts < self.marks[c] and not self.regressions:
            ts = self.marks[c]
        self.marks[c] = max(self.marks[c], ts)
        self.events.append(Watermark(ts, c))

    def set_w(self, draw: st.DrawFn, target: int, keys: Sequence[Any]) -> None:
        """Move W up to ``target`` (no-op if W is already there or past it)."""
        if self.w() >= target:
            return
        if self.q.lateness is None:
            order = draw(st.permutations(range(self.q.channels)))
            ahead = draw(st.sampled_from([0, 1, 3, 3])) if self.q.channels > 1 else 0
            if ahead:  # channel 0 first: until the others follow, W is below channel 0's mark
                order = [0, *(c for c in order if c != 0)]
            for c in order:  # channel 0 (the one a watermark without a channel field is on) may run ahead
                self.watermark(target + (ahead if c == 0 else 0), c)
        else:
            side = draw(st.sampled_from(["probe", "base"]))
            self.tuple(side, target + self.q.lateness, draw(st.sampled_from(keys)), 1.0)

    def done(self) -> list[Event]:
        """The events, End appended."""
        return [*self.events, End()]


def keys_for(features: frozenset[str]) -> list[Any]:
    """The main key first, then others; under ``representation`` and ``mixed-keys`` the second is the main one in
    upper case (a case-insensitive collation joins them)."""
    if "mixed-keys" in features:
        return ["k", "K", 1, "1"] if "representation" in features else [1, 2, "1"]
    return [1, 2]


def build(draw: st.DrawFn, scenario: str, q: Query, features: frozenset[str], origin: int) -> list[Event]:
    """The events of one case drawn by ``scenario`` (see the module docstring)."""
    b = Builder(q, features)
    keys = keys_for(features)
    if scenario == "pairs":
        _pairs(draw, b, keys, origin)
    elif scenario == "edge":
        _edge(draw, b, keys, origin)
    elif scenario == "collide":
        _collide(draw, b, features, origin)
    elif scenario == "long":
        _long(draw, b, keys, origin)
    elif scenario == "represent":
        _represent(draw, b, features, origin)
    elif scenario == "shifted":
        _shifted(draw, b, keys, origin)
    else:
        raise ValueError(f"unknown scenario {scenario!r}")
    return b.done()


def _corners(q: Query) -> list[int]:
    """Offsets b.ts - a.ts worth trying, 0 (a tie) first: each raw bound, one tick inside and outside."""
    out: list[int] = []
    for d in (0, q.lower, q.upper, q.lower - 1, q.upper + 1, q.lower + 1, q.upper - 1):
        if d not in out:
            out.append(d)
    return out


def _pairs(draw: st.DrawFn, b: Builder, keys: list[Any], origin: int) -> None:
    corners = _corners(b.q)
    for _ in range(draw(st.integers(1, 4))):
        a_ts = origin + draw(st.sampled_from([0, 1, 2, -1, 3, 5]))
        p_ts = a_ts + draw(st.sampled_from(corners))
        key = draw(st.sampled_from([keys[0], keys[0], keys[1]]))
        first, second = (("base", a_ts), ("probe", p_ts)) if draw(st.booleans()) else (("probe", p_ts), ("base", a_ts))
        b.tuple(first[0], first[1], key, draw(b.values), draw(st.integers(0, 2)))
        between = draw(st.sampled_from([None, None, None, -1, 0, 1]))
        if between is not None:
            b.set_w(draw, min(a_ts, p_ts) + between, keys)
        b.tuple(second[0], second[1], key, draw(b.values), draw(st.integers(0, 2)))


def _edge(draw: st.DrawFn, b: Builder, keys: list[Any], origin: int) -> None:
    q = b.q
    lo, hi = lower_offset(q), upper_offset(q)
    k = keys[0]
    for _ in range(draw(st.integers(0, 2))):  # state that was there before
        b.tuple(draw(st.sampled_from(["base", "probe"])), origin + draw(st.integers(-3, 3)),
                draw(st.sampled_from(keys)), draw(b.values))
    kind = draw(st.sampled_from(["probe-purge", "base-final", "late", "held"]))
    d = draw(st.sampled_from([0, -1, 1]))
    if kind == "probe-purge":  # a probe is needed while b.ts >= W + lo'
        p = origin + draw(st.sampled_from([0, lo, hi, -1, 1]))
        b.tuple("probe", p, k, draw(b.values))
        b.set_w(draw, p - lo + d, keys)
        b.tuple("base", b.w() + draw(st.sampled_from([0, 0, 1, -1])), k, draw(b.values))
    elif kind == "base-final":  # a base is final once W > hi(a)
        b.tuple("base", origin, k, draw(b.values))
        b.set_w(draw, origin + hi + d, keys)
        b.tuple("probe", b.w() + draw(st.sampled_from([0, 0, -1, 1])), k, draw(b.values))
    elif kind == "held":  # a probe past its purge edge that a pending base (W <= hi(a)) still has in its window
        c = draw(st.sampled_from(sorted({lo, hi, (lo + hi) // 2})))
        first, second = (("base", origin), ("probe", origin + c))
        if draw(st.booleans()):
            first, second = second, first
        b.tuple(first[0], first[1], k, draw(b.values))
        b.tuple(second[0], second[1], k, draw(b.values))
        b.set_w(draw, min(origin + c - lo + 1 + d, origin + hi), keys)
        b.tuple("probe", b.w() + draw(st.sampled_from([0, 1])), k, draw(b.values))
    else:  # late iff ts < W: a tuple at W and one tick below, each with a partner in its window
        if draw(st.booleans()):
            b.tuple("base", origin, k, draw(b.values))
            b.set_w(draw, origin + draw(st.sampled_from([hi, lo])), keys)
            b.tuple("probe", b.w() + draw(st.sampled_from([0, -1])), k, draw(b.values))
        else:
            b.tuple("probe", origin, k, draw(b.values))
            b.set_w(draw, origin - draw(st.sampled_from([hi, lo])), keys)
            b.tuple("base", b.w() + draw(st.sampled_from([0, -1])), k, draw(b.values))
    for _ in range(draw(st.integers(0, 2))):  # what follows the edge
        w = b.w()
        b.tuple(draw(st.sampled_from(["base", "probe"])), (origin if w == NO_WATERMARK else w)
                + draw(st.integers(-1, 3)), draw(st.sampled_from(keys)), draw(b.values))


def _collide(draw: st.DrawFn, b: Builder, features: frozenset[str], origin: int) -> None:
    pool = COLLIDING + (COLLIDING_STR if "mixed-keys" in features else ()) + (
        (COLLIDING_REPR + (COLLIDING_TEXT if "mixed-keys" in features else ())) if "representation" in features
        else ())
    k1, k2 = draw(st.sampled_from(pool))
    if draw(st.booleans()):
        k1, k2 = k2, k1
    corners = [d for d in _corners(b.q) if lower_offset(b.q) <= d <= upper_offset(b.q)] or [0]
    for i in range(draw(st.integers(1, 3))):
        a_ts = origin + i
        p_ts = a_ts + draw(st.sampled_from(corners))
        pk = draw(st.sampled_from([k2, k2, k1]))  # mostly the colliding key, sometimes a true match
        if draw(st.booleans()):
            b.tuple("base", a_ts, k1, draw(b.values))
            b.tuple("probe", p_ts, pk, draw(b.values))
        else:
            b.tuple("probe", p_ts, pk, draw(b.values))
            b.tuple("base", a_ts, k1, draw(b.values))


def _long(draw: st.DrawFn, b: Builder, keys: list[Any], origin: int) -> None:
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    q = b.q
    pool = [*keys, 9, 3, 4][: rng.randint(2, 5)]
    t = min(origin, TS_LIMIT - 1000)
    for _ in range(rng.randint(60, 300)):
        if q.lateness is None and rng.random() < 0.12:
            mark = t - rng.choice([0, 0, 1, 2, 3, 5, 8])
            if b.regressions and rng.random() < 0.1:
                mark -= 10
            b.watermark(mark, rng.randrange(q.channels))
            continue
        t += rng.choice([0, 0, 1, 1, 2, 3])
        ts = t - rng.choice([0, 0, 0, 1, 2, 3, 5, 9])
        key = pool[0] if rng.random() < 0.4 else rng.choice(pool)
        b.tuple(rng.choice(["base", "probe"]), ts, key, rng.choice(b.value_pool), rng.randrange(q.channels))


def _represent(draw: st.DrawFn, b: Builder, features: frozenset[str], origin: int) -> None:
    """Pairs whose keys, timestamps or values sit where other representations break (needs ``representation``;
    without it, the ``pairs`` scenario): two keys equal in 32 bits, through a double, case-folded, normalized or
    trimmed; a probe 2^32 (or 2^31) away from its base's window, equal to it in 32 bits; a base and a probe on both
    sides of 2^31, 2^32 or 2^53."""
    keys = keys_for(features)
    if "representation" not in features:
        _pairs(draw, b, keys, origin)
        return
    text = "mixed-keys" in features and draw(st.booleans())
    k1, k2 = draw(st.sampled_from(COLLIDING_TEXT if text else COLLIDING_REPR))
    if draw(st.booleans()):
        k1, k2 = k2, k1
    corners = _corners(b.q)
    floor = b.floor
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["twin-keys", "twin-keys", "alias-ts", "across"]))
        if how == "across":  # the window crosses an edge: a base just below it, a probe just above, or back
            edge = draw(st.sampled_from(REPR_EDGES[:3])) * draw(st.sampled_from([1, 1, -1] if floor < 0 else [1]))
            a_ts = edge + draw(st.sampled_from([-1, 0, -2, 1]))
        else:
            a_ts = origin + draw(st.sampled_from([0, 1, 2, -1]))
        p_ts = a_ts + draw(st.sampled_from(corners))
        pk = k2 if how == "twin-keys" else k1
        if how == "alias-ts":  # equal to a match modulo 2^32 (or 2^31): a wrapped 32-bit time joins it
            p_ts += draw(st.sampled_from([1 << 32, -(1 << 32), 1 << 31, -(1 << 31)]))
        first, second = (("base", a_ts, k1), ("probe", p_ts, pk))
        if draw(st.booleans()):
            first, second = second, first
        b.tuple(first[0], first[1], first[2], draw(b.values))
        if draw(st.sampled_from([False, False, True])):
            b.set_w(draw, min(a_ts, p_ts) + draw(st.sampled_from([-1, 0, 1])), [k1])
        b.tuple(second[0], second[1], second[2], draw(b.values))
        if draw(st.booleans()):  # a true partner too, so that an aggregate has several values
            b.tuple("probe", a_ts + draw(st.sampled_from(corners)), k1, draw(b.values))


def _shifted(draw: st.DrawFn, b: Builder, keys: list[Any], origin: int) -> None:
    """Two to four bases of one key, each with probes around its window (wholly in the past or the future: see
    ``SHIFTED_WINDOWS``), and W moved between the bases to a corner of the last base's window or near its ts.  A
    base can be final on arrival, its window start above W + lo' while the purge edge W + lo' lies below it: an
    incremental window that slides, evicts and restarts meets every order of those three."""
    q = b.q
    lo, hi = lower_offset(q), upper_offset(q)
    k = keys[0]
    t = origin
    offsets = [lo - 1, lo - 1, lo - 1, lo, hi, hi + 1, (lo + hi) // 2, -1, 0, 1]
    between = [d for d in (hi + 1, -1) if hi < d < 0]  # W in (hi(a), a.ts): final, window start above W + lo'
    targets = [*between, *between, lo - 1, lo, hi, hi + 1, 0, 1, -1]
    for i in range(draw(st.integers(2, 4))):
        if i == 0 and between and draw(st.booleans()):
            # the class that needs every step: a probe below the window, the base, W into (hi(a), a.ts) -- the
            # base final, its window start above the purge edge W + lo' -- and the next base's window overlapping
            b.tuple("probe", t + lo - 1, k, draw(b.values))
            b.tuple("base", t, k, draw(b.values))
            b.set_w(draw, t + draw(st.sampled_from(between)), keys)
            t += draw(st.integers(1, hi - lo)) if hi > lo else 1
            continue
        for _ in range(draw(st.sampled_from([1, 1, 0, 2]))):  # probes that arrive before the base
            b.tuple("probe", t + draw(st.sampled_from(offsets)), k, draw(b.values))
        b.tuple("base", t, k, draw(b.values))
        for _ in range(draw(st.sampled_from([0, 0, 1]))):  # and one after it
            b.tuple("probe", t + draw(st.sampled_from(offsets)), k, draw(b.values))
        if draw(st.sampled_from([True, True, False])):
            b.set_w(draw, t + draw(st.sampled_from(targets)), keys)
        t += draw(st.sampled_from([1, 1, 2, 3, 6]))
    if draw(st.booleans()):
        b.tuple("probe", t + draw(st.sampled_from(offsets)), k, draw(b.values))
