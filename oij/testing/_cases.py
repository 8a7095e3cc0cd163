"""Conformance cases: the Hypothesis strategy that reaches the corners, and the features a case exercises
(the case itself: :mod:`oij.testing._case`).

A case is drawn as a list of small *event specs* and then laid out in order
(:func:`layout`), so that Hypothesis shrinks by deleting whole events and by
moving numbers toward zero.  Timestamps sit on a grid near an origin (0, -20,
or near +/-2^62); a probe is moved off its grid point by a corner of the
window (on a bound, one tick inside or outside, or a tie), and so is a
watermark, so tuples land exactly on bounds, exactly at W, and W exactly on
a window's edge.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, cast

from hypothesis import strategies as st

from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import (
    COND_OPS,
    TS_LIMIT,
    AggregateKind,
    Comparison,
    CondOp,
    End,
    Event,
    JoinKind,
    Query,
    Side,
    StreamTuple,
    Watermark,
)
from oij.testing._case import (
    COND_ADDS,
    FIELD_VALUES,
    KINDS,
    REPR_EDGES,
    Case,
    case_features,
    minimal_jsonl,
    parse_features,
)
from oij.testing._features import DEFAULT_FEATURES, FEATURES, OPT_IN
from oij.testing._scenarios import INT_KEYS, VALUES, build

__all__ = ["COND_ADDS", "DEFAULT_FEATURES", "FEATURES", "FIELD_VALUES", "OPT_IN", "Case", "case_features", "cases",
           "exercised", "layout", "minimal_jsonl", "parse_features"]

_SPEC = st.tuples(
    st.sampled_from(["tuple", "tuple", "tuple", "watermark"]),
    st.sampled_from(["base", "probe"]),
    st.integers(0, 7),  # how: which corner of the window a probe sits on (see layout)
    st.sampled_from([0, 0, 0, 1, -1, 2, -2, 3, -3]),  # step on the time grid from the previous event
    st.sampled_from([0, 0, 0, 1, 2, 3]),  # key index
    st.integers(0, len(VALUES) - 1),
    st.integers(0, 2),  # channel
)

COMMON_WINDOWS = ((-2, 0), (0, 0), (-3, 0), (-1, 1), (0, 2), (1, 3), (-3, -1), (-2, 2), (-1, 0))
"""Bounds drawn before random ones: ``[-X, 0]`` (the most common interval join), zero-width, wholly past or
future, and windows straddling zero, so every sign of ``lower`` and ``upper`` appears often."""

SCENARIOS = ("pairs", "pairs", "edge", "edge", "edge", "random", "random", "collide", "long", "represent", "represent",
             "shifted", "shifted")
"""How a case is drawn, with its weight: matching pairs in both arrival orders; W placed on a state edge with
a tuple at it; the random event-spec layout of :func:`layout`; colliding keys; a long stream (60-300 events);
values at the edges of other languages' representations; a window wholly in the past or the future with W
moving between the bases of one key.  Hypothesis shrinks a scenario toward the first entry."""

SHIFTED_WINDOWS = ((-5, -3), (-6, -2), (-8, -3), (-4, -2), (-3, -1), (-4, -4), (1, 3), (2, 5), (3, 3), (1, 6))
"""The bounds of the ``shifted`` scenario: windows wholly in the past or the future."""

ID_EDGES = (1 << 31, 1 << 32, 1 << 53, 1 << 63, -(1 << 63), -(1 << 31))
"""The edges the ids of a case meet under ``representation``: a C ``int``, an unsigned 32-bit one, a double's
exact integers, the int64 edges.  The ids cross the first three (the first id is the edge less 3); they end at
the largest int64 or start at the smallest."""


def id_base(edge: int, tuples: int) -> int:
    """The id before the first (ids ``base + 1 .. base + tuples``) when the ids meet ``edge`` (see
    :data:`ID_EDGES`)."""
    if edge == 1 << 63:
        return edge - 1 - tuples
    if edge == -(1 << 63):
        return edge - 1
    return edge - 3


def swarm(draw: st.DrawFn, claimed: frozenset[str]) -> frozenset[str]:
    """A random subset of the claimed features (swarm testing), with at least one mode.

    A case that enables every corner at once dilutes the core: each case
    keeps each claimed feature with probability 1/2 (``late-report`` always:
    it changes what is compared, not what is drawn).  Shrinks toward no feature.
    """
    keep = {f for f in sorted(claimed) if f == "late-report" or draw(st.booleans())}
    modes = [m for m in ("watermarks", "lateness") if m in claimed]
    if not {"watermarks", "lateness"} & keep:
        keep.add(draw(st.sampled_from(modes)))
    return frozenset(keep)


def draw_query(draw: st.DrawFn, f: frozenset[str]) -> Query:
    """A query using only the features ``f``; common windows first, then random bounds."""
    modes = [m for m in ("watermarks", "lateness") if m in f]
    mode = draw(st.sampled_from(modes))
    lower, upper = draw(st.one_of(
        st.sampled_from(COMMON_WINDOWS),
        st.tuples(st.integers(-6, 3), st.integers(-3, 8)).map(lambda b: (b[0], max(b)))))
    excl = "exclusive" in f
    agg: AggregateKind | None = draw(st.sampled_from([None, *KINDS])) if "aggregates" in f else None
    join: JoinKind = draw(st.sampled_from(["inner", "left"])) if "left" in f else "inner"
    # the most frequent draw is two channels (issue 65: one case in 30 had several before): same draws, mapped
    channels = draw(st.integers(1, 3).map(lambda c: c % 3 + 1)) if "channels" in f and mode == "watermarks" else 1
    return Query(
        lower=lower,
        upper=upper,
        lower_inclusive=not (excl and draw(st.booleans())),
        upper_inclusive=not (excl and draw(st.booleans())),
        aggregate=agg,
        join=join,
        channels=channels,
        lateness=draw(st.integers(0, 6)) if mode == "lateness" else None,
    )


def draw_origin(draw: st.DrawFn, f: frozenset[str]) -> int:
    """Where the case's times start: 10, or 0 and -20 with negative timestamps, or near +/-2^62, as the features
    allow.  (Without ``negative-ts`` every time is clamped at 0: see :func:`layout`.)"""
    origins = [10]
    if "negative-ts" in f:
        origins += [0, -20]
    if "representation" in f:  # one tick below each edge, so that a window or a step crosses it
        origins += [e - 1 for e in REPR_EDGES[:3]]
        if "negative-ts" in f:
            origins += [-e + 1 for e in REPR_EDGES[:3]]
    if "extreme-ts" in f:
        origins += [TS_LIMIT - 60, -TS_LIMIT + 60] if "negative-ts" in f else [TS_LIMIT - 60]
    return draw(st.sampled_from(origins))


@st.composite
def cases(draw: st.DrawFn, features: Iterable[str] | None = None, max_events: int = 14) -> Case:
    """A conformance case using only ``features`` (default: every feature but the opt-in ones, ``OPT_IN``).

    Each case enables a random subset of the features (swarm testing) and is
    drawn by one of the scenarios of ``oij/testing/_scenarios.py``.
    """
    claimed = DEFAULT_FEATURES if features is None else frozenset(features)
    encoding = draw(st.sampled_from(["full", "minimal", "mixed", "mixed"]))
    if encoding == "mixed":
        encoding = f"mixed:{draw(st.integers(0, 2**16 - 1))}"
    case = _draw_case(draw, claimed, max_events)
    return replace(case, encoding=encoding + text_features(case))


@contextlib.contextmanager
def same_draws_anywhere() -> Iterator[None]:
    """While open, a seed draws the same cases in any process: Hypothesis's pool of *local constants* is empty.

    Hypothesis (6.131 on) now and then draws a number or string from the constants in the source of the
    *local* modules that ``sys.modules`` holds (neither the standard library's nor site-packages'), to reach the
    values the code under test compares with.  A search seeded alike then draws other cases wherever other
    local modules are imported: in oij's own editable install (oij's modules are local), in a process that
    imported more of them since its last search (the first choice of :func:`oij.testing._restarts.restart_cases`
    in a process differed from the second), in a user's test process (their modules).  The kit judges a
    system that runs apart from it, whose source Hypothesis never sees; its cases must replay from a seed and
    must be the same cases that ``oij conform`` installed from a wheel draws (where no oij module is local and
    the pool is empty).  So the kit's draws see the empty pool, as there.

    Reaches into ``hypothesis.internal`` (the only way: Hypothesis has no setting for it); with a Hypothesis
    that has no such pool, a no-op.  The cache of permitted constants is cleared on the way in and out, as
    Hypothesis clears it when the pool changes.  Not for threads that draw meanwhile (the kit draws in one).
    """
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:  # a Hypothesis before local constants
        yield
        return
    real = getattr(providers, "_get_local_constants", None)
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if real is None or cache is None:
        yield
        return
    empty = Constants()
    providers._get_local_constants = lambda: empty
    cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = real
        cache.clear()


def text_features(case: Case) -> str:
    """The ``|`` features of a generated case's encoding (:func:`oij.testing._case.encode`), chosen by a hash of
    the case rather than drawn, so that adding them left the stream of cases a default run sends as it was
    (every shape it caught is still met by the same cases): integral numbers written as JSON integers in half
    the cases (``"value":3``, which the format reads as 3.0), fields as floats in one in eight; keys in another
    order on each line and other whitespace, each in one case in four."""
    import hashlib

    h = int.from_bytes(hashlib.blake2b(repr((case.query, case.events)).encode(), digest_size=8).digest(), "big")
    out = ""
    if h & 1:
        out += "|int"
    elif h & 0b110 == 0b110:
        out += "|float"
    if (h >> 3) & 3 == 3:
        out += f"|order:{(h >> 8) & 0xFFFF}"
    if (h >> 5) & 3 == 3:
        out += f"|space:{(h >> 24) & 0xFFFF}"
    return out


def rebase_ids(events: Sequence[Event], base: int) -> list[Event]:
    """``events`` with the i-th tuple's id ``base + i`` (ids 1, 2, ... when ``base`` is 0)."""
    out: list[Event] = []
    n = 0
    for e in events:
        if isinstance(e, StreamTuple):
            n += 1
            e = e._replace(id=base + n)
        out.append(e)
    return out


def _draw_case(draw: st.DrawFn, claimed: frozenset[str], max_events: int) -> Case:
    f = swarm(draw, claimed)
    scenario = draw(st.sampled_from(SCENARIOS))
    q = draw_query(draw, f)
    if scenario == "shifted":
        lower, upper = draw(st.sampled_from(SHIFTED_WINDOWS))
        q = replace(q, lower=lower, upper=upper)
    origin = draw_origin(draw, f)
    case = _draw_layout(draw, scenario, q, f, origin, max_events)
    if "representation" in f and draw(st.booleans()):
        base = id_base(draw(st.sampled_from(ID_EDGES)), len(case.tuples))
        case = replace(case, events=tuple(rebase_ids(case.events, base)))
    return case


def _draw_layout(draw: st.DrawFn, scenario: str, q: Query, f: frozenset[str], origin: int,
                 max_events: int) -> Case:
    if scenario == "random":
        return _random_case(draw, q, f, origin, max_events)
    events = build(draw, scenario, q, f, origin)
    if "cond" in f:  # every scenario can carry a joining condition: fields drawn for its tuples
        q = _draw_cond(draw, q, origin)
        idx = st.integers(0, len(FIELD_VALUES) - 1)
        events = [e._replace(fields=(("x", FIELD_VALUES[draw(idx)]), ("y", FIELD_VALUES[draw(idx)])))
                  if isinstance(e, StreamTuple) else e for e in events]
    return Case(q, tuple(events), scenario)


def _draw_cond(draw: st.DrawFn, q: Query, origin: int) -> Query:
    """``q`` with a joining condition of one or two comparisons (three draws in four; else none)."""
    if draw(st.integers(0, 3)) == 0:
        return q
    names = ["x", "y", "value"] + (["ts"] if origin == 0 or origin == -20 else [])
    comparison = st.builds(Comparison, st.sampled_from(names), st.sampled_from(cast("list[CondOp]", COND_OPS)),
                           st.sampled_from(names), st.sampled_from(COND_ADDS))
    return replace(q, cond=tuple(draw(st.lists(comparison, min_size=1, max_size=2))))


def _random_case(draw: st.DrawFn, q: Query, f: frozenset[str], origin: int, max_events: int) -> Case:
    if "cond" in f:
        q = _draw_cond(draw, q, origin)
    keys: list[int | str] = [1, "1", 9, "k1"] if "mixed-keys" in f else list(INT_KEYS)
    if "representation" in f:  # a twin of the first key: equal in 32 bits, or (a string key) when case-folded
        keys.append("K1" if "mixed-keys" in f else 1 + (1 << 32))
    empty = draw(st.integers(0, 15)) == 0
    specs = [] if empty else draw(st.lists(_SPEC, min_size=1, max_size=max_events))
    fields = None
    if "cond" in f:
        idx = st.integers(0, len(FIELD_VALUES) - 1)
        fields = [(("x", FIELD_VALUES[i]), ("y", FIELD_VALUES[j]))
                  for i, j in draw(st.lists(st.tuples(idx, idx), min_size=len(specs), max_size=len(specs)))]
    return Case(q, tuple(layout(q, specs, origin, keys, "regressions" in f, fields,
                                0 if "negative-ts" not in f else -TS_LIMIT)), "random")


def layout(q: Query, specs: Sequence[tuple[str, str, int, int, int, int, int]], origin: int,
           keys: Sequence[int | str], regressions: bool,
           fields: Sequence[tuple[tuple[str, float], ...]] | None = None, floor: int = -TS_LIMIT) -> list[Event]:
    """Turn drawn event specs into an arrival sequence (ids 1, 2, ... in arrival order), ending with End.

    A spec's ``n`` is a step on a time grid that starts at ``origin``: the
    event's grid point is the previous event's plus ``n``.  A base sits on its
    grid point, a probe is moved by one of the window's corners (a bound, one
    tick inside, one tick outside, or 0: a tie), and a watermark by -1, 0 or
    +1.  So a base and a probe drawn with the same ``n`` meet exactly at a
    corner, and deleting an event moves no other: cases shrink well.
    ``fields[i]``, if given, are the named fields of the i-th spec's tuple.
    Every time is clamped to ``[floor, TS_LIMIT]``.
    """
    lo, hi = lower_offset(q), upper_offset(q)
    corners = (0, lo, lo - 1, lo + 1, hi, hi + 1, hi - 1, 0)
    out: list[Event] = []
    wmax: list[int | None] = [None] * q.channels
    ids = 0
    pos = origin
    for i, (kind, side, how, n, k, v, c) in enumerate(specs):
        pos = max(floor, min(TS_LIMIT, pos + n))
        channel = c % q.channels
        if kind == "watermark" and q.lateness is None:
            ts = max(floor, min(TS_LIMIT, pos + corners[how]))
            prev = wmax[channel]
            if prev is not None and ts < prev and not regressions:
                ts = prev
            wmax[channel] = ts if prev is None else max(prev, ts)
            out.append(Watermark(ts, channel))
            continue
        ts = pos + (corners[how] if side == "probe" else 0)
        ts = max(floor, min(TS_LIMIT, ts))
        ids += 1
        out.append(StreamTuple(cast("Side", side), ids, ts, keys[k % len(keys)], VALUES[v], channel,
                               fields[i] if fields is not None else ()))
    out.append(End())
    return out


def exercised(case: Case, expected: Any) -> set[str]:
    """Names of the situations ``case`` exercises (for the summary of a run); ``expected`` is its Results."""
    q = case.query
    lo, hi = lower_offset(q), upper_offset(q)
    tags: set[str] = set()
    ts = case.tuples
    bases = [t for t in ts if t.side == "base"]
    probes = [t for t in ts if t.side == "probe"]
    tags.add("lateness mode" if q.lateness is not None else "watermark mode")
    if q.aggregate is not None:
        tags.add(f"aggregate {q.aggregate}")
        if any(r[1] == 0 for r in expected.aggregates):
            tags.add("aggregate over an empty window")
    if q.join == "left":
        tags.add("left join")
        if any(p[1] is None for p in expected.pairs):
            tags.add("unmatched base (a, null)")
    if not (q.lower_inclusive and q.upper_inclusive):
        tags.add("exclusive bound")
    if q.channels > 1:
        tags.add("several channels")
    if q.cond:
        tags.add("joining condition")
    if upper_offset(q) < 0 or lower_offset(q) > 0:
        tags.add("window wholly in the past or future")
    if not ts:
        tags.add("empty stream")
    elif not probes:
        tags.add("base only")
    elif not bases:
        tags.add("probe only")
    if expected.late:
        tags.add("late tuple")
    if any(p[1] is not None for p in expected.pairs) or any(r[1] > 0 for r in expected.aggregates):
        tags.add("a base with matches")
    for a in bases:
        for b in probes:
            if type(a.key) is not type(b.key) and str(a.key) == str(b.key):
                tags.add("keys that print alike (1 and \"1\")")
            if a.key != b.key or type(a.key) is not type(b.key):
                continue
            d = b.ts - a.ts
            if d in (lo, hi):
                tags.add("tuple exactly on a bound")
            if d in (lo - 1, hi + 1):
                tags.add("tuple one tick outside a bound")
            if d == 0:
                tags.add("equal timestamps")
    if any(abs(t.ts) > TS_LIMIT // 2 for t in ts):
        tags.add("timestamps near 2^62")
    if any(t.ts < 0 for t in ts):
        tags.add("negative timestamps")
    seen: dict[int, int] = {}
    marks: set[int] = set()
    for e in case.events:
        if isinstance(e, Watermark):
            if e.channel in seen and e.ts < seen[e.channel]:
                tags.add("watermark regression")
            seen[e.channel] = max(seen.get(e.channel, e.ts), e.ts)
            marks.add(e.ts)
        elif isinstance(e, StreamTuple) and e.ts in marks:
            tags.add("tuple at a watermark's ts")
    return tags


SHARE_FLOOR = 0.10
"""The least share of a default run's generated cases each situation the claimed features allow must have
(:func:`shares`; issue 65: one case in 200 had several channels in the flink-ds default run)."""

SHARES: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("several channels", "several channels", frozenset({"channels", "watermarks"})),
    ("left join", "left join", frozenset({"left"})),
    ("aggregate", "aggregate ", frozenset({"aggregates"})),
    ("late tuple", "late tuple", frozenset({"late-report"})),
)
"""The situations whose share a run reports: (name, the tag of :func:`exercised` it counts, or the prefix of the
tags, and the features that allow it)."""


def shares(tags: Counter[str], generated: int, features: frozenset[str]) -> list[tuple[str, int, float, bool]]:
    """For each situation of :data:`SHARES` the claimed ``features`` allow: its name, how many of the ``generated``
    cases had it (``tags``: the counts of :func:`exercised` over them), its share, and whether that share is below
    :data:`SHARE_FLOOR`."""
    out = []
    for name, tag, needs in SHARES:
        if not needs <= features:
            continue
        n = (tags[tag] if not tag.endswith(" ") else
             sum(v for k, v in tags.items() if k.startswith(tag) and k != "aggregate over an empty window"))
        share = n / generated if generated else 0.0
        out.append((name, n, share, share < SHARE_FLOOR))
    return out
