"""Portable test vectors: a deterministic tree of small cases by feature, with expected outputs.

Layout of an exported tree::

    DIR/manifest.jsonl                 one line per case: {"case", "feature", "profile", "expected", "features",
                                       "description"}; "features": what an implementation must claim to be
                                       held to the case (the names of ``oij conform --features``)
    DIR/<feature>/<name>.in.jsonl      the input (oij-jsonl v1)
    DIR/<feature>/<name>.out.jsonl     the expected output, canonical order (profile canonical)
    DIR/profiles/<name>.<profile>.out.jsonl   the expected output under each named profile

Every case is built here from explicit events, and every expected output is
computed by the same code the tests use (:func:`oij.testing.expected_output`),
so re-exporting gives the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import orjson

from oij.io.atomic import write_text
from oij.io.jsonlwrite import result_lines
from oij.spec.model import (
    AGGREGATES,
    COND_OPS,
    TS_LIMIT,
    AggregateKind,
    Comparison,
    End,
    Event,
    Query,
    StreamTuple,
    Watermark,
)
from oij.spec.profiles import CANONICAL, PROFILES
from oij.testing._case import Case, case_features
from oij.testing._protocol import expected_output


@dataclass(frozen=True)
class Vector:
    """One exported case."""

    feature: str
    name: str
    description: str
    case: Case


def _t(side: str, i: int, ts: int, key: int | str = 1, value: float = 1.0, channel: int = 0) -> StreamTuple:
    return StreamTuple("base" if side == "b" else "probe", i, ts, key, value, channel)


def _tf(side: str, i: int, ts: int, x: float, y: float, key: int | str = 1, value: float = 1.0) -> StreamTuple:
    return _t(side, i, ts, key, value)._replace(fields=(("x", x), ("y", y)))


def _tx(side: str, i: int, ts: int, x: float) -> StreamTuple:
    return _t(side, i, ts, value=0.0)._replace(fields=(("x", x),))


def _two(q: Query, ax: float, by: float, order: str) -> Case:
    """A base at 10 (x = ax) and a probe at 9 (y = by), in ``order``."""
    if order == "base-first":
        return _case(q, _tf("b", 1, 10, ax, 0.0), _tf("p", 2, 9, 0.0, by))
    return _case(q, _tf("p", 1, 9, 0.0, by), _tf("b", 2, 10, ax, 0.0))


def _case(q: Query, *events: Event) -> Case:
    return Case(q, (*events, End()))


def vectors() -> Iterator[Vector]:
    """Every vector, in a fixed order."""
    # bounds: a base at 10 and a probe on each corner of its window, in both arrival orders
    for lower, upper in ((-3, 0), (0, 0), (2, 5), (-5, -2)):
        for li, ui in ((True, True), (False, True), (True, False), (False, False)):
            q = Query(lower, upper, li, ui)
            lo, hi = lower + (0 if li else 1), upper - (0 if ui else 1)
            for what, d in (("lower-1", lower - 1), ("lower", lower), ("lower+1", lower + 1),
                            ("upper-1", upper - 1), ("upper", upper), ("upper+1", upper + 1)):
                inside = lo <= d <= hi
                for order in ("base-first", "probe-first"):
                    a, b = _t("b", 1, 10), _t("p", 2, 10 + d)
                    flags = f"{'[' if li else '('}{lower},{upper}{']' if ui else ')'}"
                    yield Vector("bounds", f"w{lower}_{upper}_{int(li)}{int(ui)}_{what}_{order}",
                                 f"window a.ts + {flags}: a probe at a.ts{d:+d} ({what}) "
                                 f"{'matches' if inside else 'does not match'}, {order}",
                                 _case(q, *((a, b) if order == "base-first" else (b, a))))
    # watermarks
    q = Query(-2, 0)
    yield Vector("watermarks", "at-w", "a tuple exactly at W is on time (late iff ts < W)",
                 _case(q, _t("b", 1, 5), Watermark(5), _t("p", 2, 5)))
    yield Vector("watermarks", "below-w", "a tuple one tick below W is late and joins nothing",
                 _case(q, _t("b", 1, 5), Watermark(5), _t("p", 2, 4)))
    yield Vector("watermarks", "regression", "a watermark going backwards changes nothing",
                 _case(q, Watermark(5), Watermark(2), _t("p", 1, 3), _t("b", 2, 5)))
    yield Vector("watermarks", "purge-edge", "state is kept while W <= hi(a): a probe at ts = W = hi(a) still joins",
                 _case(Query(0, 3), _t("b", 1, 2), Watermark(5), _t("p", 2, 5)))
    # lateness mode
    for ell in (0, 3):
        ql = Query(-2, 0, lateness=ell)
        yield Vector("lateness", f"l{ell}-at-w", f"lateness {ell}: a tuple at W = max ts - {ell} is on time",
                     _case(ql, _t("b", 1, 10), _t("p", 2, 10 - ell)))
        yield Vector("lateness", f"l{ell}-below-w", f"lateness {ell}: a tuple one tick below W is late",
                     _case(ql, _t("b", 1, 10), _t("p", 2, 9 - ell)))
        yield Vector("lateness", f"l{ell}-probe-raises-w", f"lateness {ell}: a probe raises W for the bases too",
                     _case(ql, _t("p", 1, 20), _t("b", 2, 19 - ell), _t("b", 3, 20 - ell)))
    # channels
    qc = Query(-2, 0, channels=2)
    yield Vector("channels", "min-over-channels", "W is the minimum over channels: one channel alone moves nothing",
                 _case(qc, _t("b", 1, 5), Watermark(9, 0), _t("p", 2, 4, channel=1)))
    yield Vector("channels", "both-channels", "once both channels passed, a tuple below W is late",
                 _case(qc, _t("b", 1, 5), Watermark(9, 0), Watermark(9, 1), _t("p", 2, 4, channel=1)))
    yield Vector("channels", "three-channels-catch-up", "three channels apart (12, 8, 5: W = 5); the lowest "
                 "catches up (W = 8), then the middle one (W = 11): a probe at 7, then one at 10, each late by then",
                 _case(Query(-2, 0, channels=3), _t("b", 1, 10), Watermark(12, 0), Watermark(8, 1), Watermark(5, 2),
                       _t("p", 2, 9, channel=2), Watermark(11, 2), _t("p", 3, 7, channel=1), Watermark(12, 1),
                       _t("p", 4, 10), _t("p", 5, 11)))
    # state edges: W one tick before, on and after a probe's purge edge (b.ts - lo') and a base's finality edge
    # (hi(a)), then a tuple of the same key at W
    for lower, upper in ((-2, 0), (0, 2), (-3, -1), (1, 3)):
        q = Query(lower, upper)
        for d in (-1, 0, 1):
            step = {-1: "before", 0: "on", 1: "after"}[d]
            w = 10 - lower + d
            yield Vector("state-edges", f"w{lower}_{upper}_probe-purge-{step}",
                         f"window [{lower},{upper}]: a probe at 10 is needed while W <= {10 - lower}; W = {w}, then "
                         f"a base at W {'matches it' if d <= 0 else 'cannot match it'}",
                         _case(q, _t("p", 1, 10), Watermark(w), _t("b", 2, w)))
            w = 10 + upper + d
            yield Vector("state-edges", f"w{lower}_{upper}_base-final-{step}",
                         f"window [{lower},{upper}]: a base at 10 is final once W > {10 + upper}; W = {w}, then a "
                         f"probe at W {'matches it' if d <= 0 else 'cannot match it'}",
                         _case(q, _t("b", 1, 10), Watermark(w), _t("p", 2, w)))
    # keys
    for k1, k2, why in ((1, 9, "equal modulo 8"), (1, 17, "equal modulo 16"), (-1, -2, "equal under CPython's hash"),
                        (1, 1 + (1 << 32), "equal modulo 2^32")):
        yield Vector("keys", f"collide-{k1}-{k2}", f"keys {k1} and {k2} ({why}) are different keys",
                     _case(Query(-1, 1), _t("b", 1, 5, k1), _t("p", 2, 5, k2), _t("p", 3, 6, k1)))
    q = Query(-1, 1)
    yield Vector("keys", "int-vs-str", "key 1 and key \"1\" are different keys",
                 _case(q, _t("b", 1, 5, 1), _t("p", 2, 5, "1")))
    yield Vector("keys", "str-equal", "equal string keys join", _case(q, _t("b", 1, 5, "1"), _t("p", 2, 5, "1")))
    yield Vector("keys", "ties", "equal timestamps join once", _case(q, _t("b", 1, 5), _t("p", 2, 5)))
    # aggregates
    for kind in AGGREGATES:
        qa = Query(-3, 0, aggregate=kind)
        yield Vector("aggregates", f"{kind}-empty", f"{kind} over an empty window",
                     _case(qa, _t("b", 1, 10), _t("p", 2, 20)))
        yield Vector("aggregates", f"{kind}-exact", f"{kind} over 1e16, 1, -1e16 (an exact sum is 1)",
                     _case(qa, _t("p", 1, 8, value=1e16), _t("p", 2, 9, value=1.0), _t("p", 3, 10, value=-1e16),
                           _t("b", 4, 10)))
        yield Vector("aggregates", f"{kind}-expired", f"{kind} after the window slid past a probe (min/max stale?)",
                     _case(qa, _t("p", 1, 5, value=9.0), _t("b", 2, 6), _t("p", 3, 9, value=2.0), _t("b", 4, 12)))
        yield Vector("aggregates", f"{kind}-final-on-arrival",
                     f"{kind}: window [-3,-1] wholly in the past; W = 10 when the base at 10 arrives, so it is final "
                     "at once and its row reads the probes stored at 8 and 9",
                     _case(Query(-3, -1, aggregate=kind), _t("p", 1, 8, value=2.0), _t("p", 2, 9, value=5.0),
                           Watermark(10), _t("b", 3, 10)))
        v5 = -4.0 if kind == "min" else 9.0  # the probe the window slides past holds the extreme
        yield Vector("aggregates", f"{kind}-sliding", f"{kind}, window [-3,0]: probes at 5 ({v5}), 7 and 8, bases at "
                     "7, 8 and 10 all final at the end: the windows overlap, and the last no longer has the probe "
                     "at 5 (an incremental window must take it out)",
                     _case(qa, _t("p", 1, 5, value=v5), _t("p", 2, 7, value=1.0), _t("p", 3, 8, value=2.0),
                           _t("b", 4, 7), _t("b", 5, 8), _t("b", 6, 10)))
        yield Vector("aggregates", f"{kind}-sliding-purge", f"{kind}, window [-3,0]: probes at 5 ({v5}), 7 and 8, "
                     "bases at 7 and 10; W = 9 finalises the base at 7 and lets the probe at 5 go (W - 3 = 6 and "
                     "the base at 10 starts at 7) before the base at 10 is final",
                     _case(qa, _t("p", 1, 5, value=v5), _t("p", 2, 7, value=1.0), _t("p", 3, 8, value=2.0),
                           _t("b", 4, 7), _t("b", 5, 10), Watermark(9)))
        yield Vector("aggregates", f"{kind}-sliding-step-by-step", f"{kind}, window [-3,0]: probes at 5 ({v5}) to 9, "
                     "bases at 7, 8 and 9; W = 8, then 9, finalises the first two one at a time (the probe at 5 is "
                     "let go between them), the last at the end: each window overlaps the one before",
                     _case(qa, *(_t("p", i, 4 + i, value=v5 if i == 1 else float(i)) for i in range(1, 6)),
                           _t("b", 6, 7), _t("b", 7, 8), _t("b", 8, 9), Watermark(8), Watermark(9)))
        yield Vector("aggregates", f"{kind}-disjoint", f"{kind}, window [-1,0]: probes at 5, 6 ({v5}) and 7, bases "
                     "at 5 and 8 final at the end: the two windows [4,5] and [7,8] do not meet, and the probe at 6 "
                     "between them is in neither",
                     _case(Query(-1, 0, aggregate=kind), _t("p", 1, 5, value=1.0), _t("p", 2, 6, value=v5),
                           _t("p", 3, 7, value=2.0), _t("b", 4, 5), _t("b", 5, 8)))
        yield Vector("aggregates", f"{kind}-final-on-arrival-below", f"{kind}, window [-5,-3]: W = 10 when the base at "
                     "12 arrives, final at once (hi = 9); the probe at 6 is still stored (its edge is 11) but below "
                     "the window [7,9], the probe at 8 is in it",
                     _case(Query(-5, -3, aggregate=kind), _t("p", 1, 6, value=v5), _t("p", 2, 8, value=2.0),
                           Watermark(10), _t("b", 3, 12)))
        yield Vector("aggregates", f"{kind}-final-on-arrival-none", f"{kind}, window [-5,-3]: W = 10 when the base at "
                     "12 arrives, final at once; the key's only stored probe, at 10, is above its window [7,9]: "
                     "an empty window",
                     _case(Query(-5, -3, aggregate=kind), _t("p", 1, 10, value=v5), Watermark(10), _t("b", 2, 12)))
        yield Vector("aggregates", f"{kind}-held",
                     f"{kind}: window [-2,3]; W = 11 passes the probe at 8's purge edge (8 + 2 < 11) while the base "
                     "at 10 is still pending (hi = 13): its row must still count that probe",
                     _case(Query(-2, 3, aggregate=kind), _t("p", 1, 8, value=2.0), _t("b", 2, 10), Watermark(11),
                           _t("p", 3, 12, value=5.0), Watermark(14)))
    for kind in ("count", "sum", "min"):
        yield Vector("aggregates", f"{kind}-exclusive-empty-window", f"{kind}, window (0, 1) with both bounds "
                     "exclusive: no offset fits, yet every base gets its row (count 0, value null)",
                     _case(Query(0, 1, False, False, aggregate=kind), _t("b", 1, 5), _t("p", 2, 5), _t("p", 3, 6),
                           _t("b", 4, 6)))
    yield Vector("aggregates", "count-gap", "count, window [3,5] wholly in the future: at W = 15 the probe at 16 "
                 "is in no pending window and can be dropped, the probe at 14 is in the pending base's [13,15]",
                 _case(Query(3, 5, aggregate="count"), _t("b", 1, 10), _t("p", 2, 14), _t("p", 3, 16), Watermark(15),
                       Watermark(16)))
    for kind in ("sum", "avg"):
        for sign, name in ((1.0, "pos"), (-1.0, "neg")):
            qa = Query(-3, 0, aggregate=kind)
            yield Vector("aggregates", f"{kind}-overflow-{name}",
                         f"{kind} of two values {sign * 1e308:g}: " + ("beyond the double range, written "
                         f"{'inf' if sign > 0 else '-inf'}" if kind == "sum" else "exactly the value (a float sum "
                         "overflows first)"),
                         _case(qa, _t("p", 1, 9, value=sign * 1e308), _t("p", 2, 10, value=sign * 1e308),
                               _t("b", 3, 10)))
    # optional fields left out: their defaults apply (value 0.0, channel 0, inclusive bounds, one channel, inner)
    yield Vector("defaults", "value-omitted", "a probe without a value has value 0.0: the sum is 2.5, the min 0.0",
                 Case(Query(-1, 0, aggregate="sum"), (_t("p", 1, 4, value=0.0), _t("p", 2, 5, value=2.5),
                                                       _t("b", 3, 5), End()), encoding="minimal"))
    yield Vector("defaults", "min-value-omitted", "a probe without a value has value 0.0 (the min of 0.0 and 2.5)",
                 Case(Query(-1, 0, aggregate="min"), (_t("p", 1, 4, value=0.0), _t("p", 2, 5, value=2.5),
                                                       _t("b", 3, 5), End()), encoding="minimal"))
    yield Vector("defaults", "flags-channels-omitted", "without flags both bounds are inclusive; without channels "
                 "there is one, and a watermark without a channel is on channel 0",
                 Case(Query(-1, 0), (_t("b", 1, 5), _t("p", 2, 4), _t("p", 3, 5), Watermark(6), _t("p", 4, 5),
                                     End()), encoding="minimal"))
    yield Vector("defaults", "channel-omitted", "two channels: a watermark without a channel is on channel 0, so "
                 "after watermarks on both, W = 5 and a probe at 4 is late",
                 Case(Query(-2, 0, channels=2), (_t("b", 1, 5), Watermark(5, 0), Watermark(5, 1), _t("p", 2, 4),
                                                 End()), encoding="minimal"))
    # left joins
    q = Query(-2, 0, join="left")
    yield Vector("left-join", "unmatched-at-end", "an unmatched base gets (a, null) at the end",
                 _case(q, _t("b", 1, 5)))
    yield Vector("left-join", "unmatched-by-w", "an unmatched base gets (a, null) once W passes hi(a)",
                 _case(q, _t("b", 1, 5), Watermark(6)))
    yield Vector("left-join", "final-on-arrival", "a base whose window is already below W is final on arrival: "
                 "(a, null) at once, or its pairs with the stored probes",
                 _case(Query(-3, -1, join="left"), _t("p", 1, 8), Watermark(10), _t("b", 2, 10), _t("b", 3, 12)))
    yield Vector("left-join", "final-on-arrival-unmatched", "window [-3,-1], W = 10: the base at 10 of key 2 is "
                 "final on arrival with no probe of its key, so (a, null) at once; the inner join of the same "
                 "events has no row", _case(Query(-3, -1, join="left"), _t("p", 1, 8), Watermark(10),
                                            _t("b", 2, 10, 2), _t("b", 3, 10)))
    yield Vector("left-join", "inner-final-on-arrival-unmatched", "the same events as an inner join: no row at all "
                 "for the unmatched base", _case(Query(-3, -1), _t("p", 1, 8), Watermark(10), _t("b", 2, 10, 2),
                                                 _t("b", 3, 10)))
    yield Vector("left-join", "matched-later", "no (a, null) for a base whose match arrives before it is final",
                 _case(q, _t("b", 1, 5), Watermark(5), _t("p", 2, 5)))
    # joining conditions (format 1.1, opt-in: ``all,cond``): a.x < b.y
    xy = (Comparison("x", "<", "y"),)
    qxy, qleft = Query(-2, 0, cond=xy), Query(-2, 0, join="left", cond=xy)
    for order in ("base-first", "probe-first"):
        yield Vector("cond", f"pass-{order}", f"a.x < b.y holds (1 < 2), {order}: the pair joins",
                     _two(qxy, 1.0, 2.0, order))
        yield Vector("cond", f"fail-{order}", f"a.x < b.y fails (2 < 2), {order}: no pair", _two(qxy, 2.0, 2.0, order))
        yield Vector("cond", f"pass-float-typed-{order}", f"a.x < b.y holds (1.0 < 2.0, the fields written as "
                     f"floats), {order}: the pair joins", replace(_two(qxy, 1.0, 2.0, order), encoding="full|float"))
        yield Vector("cond", f"left-fail-{order}", f"left join whose only match fails the condition, {order}: "
                     "(a, null)", _two(qleft, 2.0, 2.0, order))
    yield Vector("cond", "some-pass-base-last", "three probes in the window, the base last: only those with "
                 "b.y > a.x = 1 join", _case(Query(-3, 0, cond=xy), _tf("p", 1, 8, 0.0, 2.0), _tf("p", 2, 9, 0.0, 1.0),
                                             _tf("p", 3, 10, 0.0, 5.0), _tf("b", 4, 10, 1.0, 0.0)))
    yield Vector("cond", "some-pass-base-first", "two bases, then a probe in both windows with b.y = 2: only the base "
                 "with a.x = 1 joins", _case(Query(-3, 0, cond=xy), _tf("b", 1, 10, 1.0, 0.0),
                                             _tf("b", 2, 11, 3.0, 0.0), _tf("p", 3, 10, 0.0, 2.0)))
    yield Vector("cond", "add", "a.ts <= b.ts + 1 with ts fields (a constant on the probe's side)",
                 _case(Query(-3, 3, cond=(Comparison("ts", "<=", "ts", 1.0),)), _t("b", 1, 10), _t("p", 2, 8),
                       _t("p", 3, 9), _t("p", 4, 12)))
    for join in ("inner", "left"):
        yield Vector("cond", f"{join}-final-on-arrival", f"{join} join, window [-3,-1], W = 10: two bases at 10 are "
                     "final on arrival; the probe at 8 (y = 2) passes a.x < b.y for x = 1, not for x = 5",
                     _case(Query(-3, -1, join=join, cond=xy), _tf("p", 1, 8, 0.0, 2.0), Watermark(10),
                           _tf("b", 2, 10, 5.0, 0.0), _tf("b", 3, 10, 1.0, 0.0)))
    for kind in ("count", "sum", "min"):
        qc = Query(-3, 0, aggregate=kind, cond=xy)
        yield Vector("cond", f"{kind}", f"{kind} over the probes of the window with b.y > a.x = 1 (values 2 and 7 "
                     "pass, 5 fails)", _case(qc, _tf("p", 1, 8, 0.0, 2.0, value=2.0),
                                            _tf("p", 2, 9, 0.0, 1.0, value=5.0), _tf("b", 3, 10, 1.0, 0.0),
                                            _tf("p", 4, 10, 0.0, 3.0, value=7.0)))
        yield Vector("cond", f"{kind}-final-on-arrival", f"{kind}: window [-3,-1], W = 10 when the base at 10 "
                     "arrives: final at once, its row counts only the stored probes that pass",
                     _case(Query(-3, -1, aggregate=kind, cond=xy),
                           _tf("p", 1, 8, 0.0, 2.0, value=2.0), _tf("p", 2, 9, 0.0, 1.0, value=5.0), Watermark(10),
                           _tf("b", 3, 10, 1.0, 0.0)))
    # how other languages and systems hold values
    yield from representation_vectors()
    # every comparison of a condition on each side of a tie (a.x OP b.y with x below, equal to and above y)
    names = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
    for op in COND_OPS:
        for rel, ax in (("below", 1.0), ("tie", 2.0), ("above", 3.0)):
            holds = {"<": ax < 2.0, "<=": ax <= 2.0, ">": ax > 2.0, ">=": ax >= 2.0, "==": ax == 2.0,
                     "!=": ax != 2.0}[op]
            yield Vector("cond", f"op-{names[op]}-{rel}", f"a.x {op} b.y with a.x = {ax:g}, b.y = 2: "
                         f"{'holds, the pair joins' if holds else 'fails, no pair'}",
                         _two(Query(-2, 0, cond=(Comparison("x", op, "y"),)), ax, 2.0, "base-first"))
    e53 = float(1 << 53)
    yield Vector("cond", "add-at-the-limit", "a.x <= b.y - 2^53 (an add at the format's limit, |add| <= 2^53): "
                 "fails for x = 1, y = 2; the pair does not join",
                 _two(Query(-2, 0, cond=(Comparison("x", "<=", "y", -e53),)), 1.0, 2.0, "base-first"))
    yield Vector("cond", "ts-at-the-limit", "a.ts <= b.ts with both at 2^53 (the largest ts a condition may read): "
                 "the pair joins", _case(Query(-1, 0, cond=(Comparison("ts", "<=", "ts"),)),
                                         _t("b", 1, 1 << 53), _t("p", 2, 1 << 53)))
    # Flink's own unit test of its interval join operator, as oij cases
    yield from flink_operator_vectors()
    # extreme timestamps, empty streams
    top = TS_LIMIT
    yield Vector("extreme", "near-max", "timestamps at 2^62 - 1",
                 _case(Query(-2, 0), _t("b", 1, top), _t("p", 2, top - 2)))
    yield Vector("extreme", "near-min", "timestamps at -(2^62 - 1)",
                 _case(Query(0, 2), _t("b", 1, -top), _t("p", 2, -top + 2)))
    yield Vector("extreme", "bounds-at-the-limit", "window [-(2^62 - 1), 2^62 - 1], the widest the format allows: "
                 "a base at 0 matches probes at both ends of the time range",
                 _case(Query(-top, top), _t("b", 1, 0), _t("p", 2, top), _t("p", 3, -top)))
    yield Vector("extreme", "window-at-the-top", "window [2^62 - 1, 2^62 - 1]: a base at 0 and a probe at "
                 "2^62 - 1 match", _case(Query(top, top), _t("b", 1, 0), _t("p", 2, top)))
    yield Vector("extreme", "window-at-the-bottom", "window [-(2^62 - 1), -(2^62 - 1)]: a probe at -(2^62 - 1) "
                 "matches a base at 0", _case(Query(-top, -top), _t("p", 1, -top), _t("b", 2, 0)))
    yield Vector("extreme", "lateness-at-the-limit", "lateness 2^62 - 1: W = max ts - (2^62 - 1); with a tuple "
                 "at 2^62 - 1, W = 0, a probe at -1 is late and one at 0 joins the base at 0",
                 _case(Query(-1, 0, lateness=top), _t("b", 1, 0), _t("p", 2, top), _t("p", 3, -1), _t("p", 4, 0)))
    yield Vector("extreme", "watermark-at-the-limits", "watermarks at -(2^62 - 1), then 2^62 - 1: the base at 0 "
                 "joins the probe at 0 before, and a probe at 2^62 - 2 after is late",
                 _case(Query(-1, 1), Watermark(-top), _t("b", 1, 0), _t("p", 2, 0), Watermark(top),
                       _t("p", 3, top - 1)))
    yield Vector("state-edges", "far-probe-stored-first", "window [-2, 0]: a probe 1000 ticks ahead arrives "
                 "first, then a probe at 9 and a base at 10: the far one must not hide the near one (state "
                 "kept in time buckets is read in any order)",
                 _case(Query(-2, 0), _t("p", 1, 1010), _t("p", 2, 9), _t("b", 3, 10), _t("p", 4, -1000),
                       _t("b", 5, 1010)))
    yield from found_by_mutants()
    yield from question_vectors()
    yield Vector("empty", "empty", "no tuple at all", _case(Query(-1, 1)))
    yield Vector("empty", "base-only", "bases only", _case(Query(-1, 1, join="left"), _t("b", 1, 3)))
    yield Vector("empty", "probe-only", "probes only", _case(Query(-1, 1), _t("p", 1, 3)))
    # profiles: cases that separate the named profiles from the canonical semantics
    ql = Query(-2, 0, lateness=0)
    yield Vector("profiles", "late-at-w", "a tuple exactly at W: on time under <, late under <=",
                 _case(ql, _t("b", 1, 5), _t("p", 2, 5), _t("p", 3, 4)))
    yield Vector("profiles", "per-input-w", "W from the max ts over both inputs, or the min of per-input W",
                 _case(ql, _t("p", 1, 10), _t("b", 2, 4), _t("b", 3, 12), _t("p", 4, 11)))
    yield Vector("profiles", "late-joins", "a late probe: reported (canonical), dropped, or joined (Flink SQL)",
                 _case(Query(-2, 0), _t("b", 1, 5), Watermark(6), _t("p", 2, 4)))
    yield Vector("profiles", "left-no-flush", "a pending (a, null) row at the end: flushed or not",
                 _case(Query(-2, 0, join="left", lateness=1), _t("b", 1, 5)))


FAST_LEFT = "L1 WL1 L2 WL2 L3 WL3 L4 WL4 R1 WR1 R2 WR2 R3 WR3 R4 WR4"
FAST_RIGHT = "R1 WR1 R2 WR2 R3 WR3 R4 WR4 L1 WL1 L2 WL2 L3 WL3 L4 WL4"

FLINK_OPERATOR_TESTS: tuple[tuple[str, int, int, bool, bool, str, str, tuple[int, ...], tuple[int, ...]], ...] = (
    # (scenario, lower, upper, lower inclusive, upper inclusive, operations, expected pairs "l-r ...",
    #  late left ts, late right ts); operations: L/R t = an element of the left (base) / right (probe) input
    # at time t, WL/WR t = a watermark of that input; "fast-left"/"fast-right" are the two orders the test
    # class runs its helper in.  Pairs are named by the timestamps of their elements.
    ("mirrors-1", 1, 3, True, False, "both", "1-2 1-3 2-3 2-4 3-4", (), ()),
    ("mirrors-2", -3, -1, False, True, "both", "2-1 3-1 3-2 4-2 4-3", (), ()),
    ("negative-inclusive-negative-inclusive", -2, -1, True, True, "both", "2-1 3-1 3-2 4-2 4-3", (), ()),
    ("negative-inclusive-positive-inclusive", -1, 1, True, True, "both",
     "1-1 1-2 2-1 2-2 2-3 3-2 3-3 3-4 4-3 4-4", (), ()),
    ("positive-inclusive-positive-inclusive", 1, 2, True, True, "both", "1-2 1-3 2-3 2-4 3-4", (), ()),
    ("negative-exclusive-negative-exclusive", -3, -1, False, False, "both", "3-1 4-2", (), ()),
    ("negative-exclusive-positive-exclusive", -1, 1, False, False, "both", "1-1 2-2 3-3 4-4", (), ()),
    ("positive-exclusive-positive-exclusive", 1, 3, False, False, "both", "1-3 2-4", (), ()),
    ("restore-from-snapshot", -1, 1, True, True, "L1 WL1 R1 WR1 L2 WL2 R2 WR2 L3 WL3 R3 WR3 L4 WL4 R4 WR4",
     "1-1 1-2 2-1 2-2 2-3 3-2 3-3 3-4 4-3 4-4", (), ()),
    ("discards-late-data", -1, 1, True, True, "L1 R1 L2 R2 L3 R3 WL3 WR3 L1 L4 R4 L5 R5",
     "1-1 1-2 2-1 2-2 2-3 3-2 3-3 3-4 4-3 4-4 4-5 5-4 5-5", (1,), ()),
    ("late-data", -1, 1, True, True, "L3 R3 WL3 WR3 L4 R4 L1 R2 L5 R5", "3-3 3-4 4-3 4-4 4-5 5-4 5-5", (1,), (2,)),
)
"""The scenarios of Flink's ``IntervalJoinOperatorTest`` (flink-streaming-java) that check the join's output,
translated: a left element is a base, a right one a probe, the two inputs' watermarks are channels 0 and 1."""


def flink_operator_case(lower: int, upper: int, li: bool, ui: bool, ops: str) -> Case:
    """The oij case of one operation string of :data:`FLINK_OPERATOR_TESTS` (ids 1, 2, ... in arrival order)."""
    events: list[Event] = []
    for op in ops.split():
        kind, t = op.rstrip("0123456789"), int(op.lstrip("LRW"))
        if kind in ("L", "R"):
            events.append(_t("b" if kind == "L" else "p", len([e for e in events if isinstance(e, StreamTuple)]) + 1,
                             t))
        else:
            events.append(Watermark(t, 0 if kind == "WL" else 1))
    return _case(Query(lower, upper, li, ui, channels=2), *events)


def flink_operator_vectors() -> Iterator[Vector]:
    """:data:`FLINK_OPERATOR_TESTS` as vectors (feature folder ``flink-operator``), each helper-driven scenario in
    both of the test's orders."""
    for name, lower, upper, li, ui, ops, pairs, _, _ in FLINK_OPERATOR_TESTS:
        orders = (("left-first", FAST_LEFT), ("right-first", FAST_RIGHT)) if ops == "both" else (("", ops),)
        for order, seq in orders:
            yield Vector("flink-operator", f"{name}-{order}" if order else name,
                         f"Flink IntervalJoinOperatorTest, {name}{f' ({order})' if order else ''}: Flink expects "
                         f"the pairs {pairs} (by timestamp)", flink_operator_case(lower, upper, li, ui, seq))


def _encoded_where(case: Case, want: Callable[[list[dict[str, object]]], bool]) -> Case:
    """``case`` in the first ``mixed:N`` encoding whose lines (as parsed JSON objects) satisfy ``want``."""
    for n in range(1 << 12):
        c = replace(case, encoding=f"mixed:{n}")
        if want([orjson.loads(x) for x in c.to_jsonl().splitlines()]):
            return c
    raise ValueError("no mixed encoding has the wanted lines")


def representation_vectors() -> Iterator[Vector]:
    """Values where other languages and systems change how they hold them (issue 37): 32-bit and double
    integers, case-folded, normalized or trimmed strings, doubles with 17 digits or at the range's ends, and
    optional fields omitted or written line by line."""
    e31, e32, e53, e63 = 1 << 31, 1 << 32, 1 << 53, 1 << 63
    q = Query(-2, 0)
    for name, edge in (("2^31", e31), ("2^32", e32)):
        for order in ("base-first", "probe-first"):
            a, b = _t("b", 1, edge), _t("p", 2, edge - 1)
            yield Vector("representation", f"ts-across-{name}-{order}", f"window [-2,0]: a base at {name} and a "
                         f"probe one tick below it match (in 32 bits the base's time wraps), {order}",
                         _case(q, *((a, b) if order == "base-first" else (b, a))))
    yield Vector("representation", "ts-across-minus-2^31", "window [-2,0]: a base at -2^31 + 1 and a probe at "
                 "-2^31 - 1 match (in 32 bits the probe's time wraps to 2^31 - 1)",
                 _case(q, _t("b", 1, -e31 + 1), _t("p", 2, -e31 - 1)))
    yield Vector("representation", "ts-2^53-in-doubles", "window [-1,0]: a base at 2^53 + 1 and a probe at 2^53 - 1 "
                 "are 2 apart and do not match (through doubles the base is at 2^53, 1 apart)",
                 _case(Query(-1, 0), _t("b", 1, e53 + 1), _t("p", 2, e53 - 1)))
    yield Vector("representation", "ts-alias-2^32", "window [-2,0]: a probe 2^32 after a base's window start does "
                 "not match it (truncated to 32 bits it does)",
                 _case(q, _t("b", 1, 10), _t("p", 2, 10 + e32), _t("p", 3, 9)))
    yield Vector("representation", "w-above-2^31", "a watermark at 2^31 + 5 makes a tuple at 10 late (a 32-bit W "
                 "wraps negative and lets it in)",
                 _case(q, _t("b", 1, e31 + 6), Watermark(e31 + 5), _t("p", 2, 10), _t("p", 3, e31 + 5)))
    yield Vector("representation", "lateness-across-2^32", "lateness 3: a probe at 2^32 + 1 moves W to 2^32 - 2; a "
                 "base at 2^32 - 2 is on time and matches it, a base at 2^32 - 3 is late",
                 _case(Query(0, 3, lateness=3), _t("p", 1, e32 + 1), _t("b", 2, e32 - 2), _t("b", 3, e32 - 3)))

    def ids(case: Case, first: int) -> Case:
        out, n = [], 0
        for ev in case.events:
            if isinstance(ev, StreamTuple):
                ev, n = ev._replace(id=first + n), n + 1
            out.append(ev)
        return Case(case.query, tuple(out), case.scenario, case.encoding)

    two = _case(Query(-2, 0), _t("b", 1, 5), _t("p", 2, 5), _t("p", 3, 4))
    for name, first in (("2^53", e53 + 1), ("int64-max", e63 - 3), ("int64-min", -e63), ("2^32", e32 - 1),
                        ("2^31", e31 - 1)):
        yield Vector("representation", f"ids-{name}", f"ids {first}, {first + 1}, {first + 2}: each written back "
                     "exactly (through a double the first two above 2^53 are one number; in 32 bits they wrap)",
                     ids(two, first))
    qa = Query(-1, 1)
    for name, k1, k2, why in (("case", "k", "K", "differ only by case (a SQL collation joins them)"),
                              ("case-word", "Key", "kEY", "differ only by case"),
                              ("nfc-nfd", "\u00e9", "e\u0301", "are NFC and NFD of one letter (code points differ)"),
                              ("trailing-space", "k", "k ", "differ by a trailing space (CHAR(n) pads, trims)"),
                              ("leading-zero", "01", 1, "are a numeric string and a number"),
                              ("decimal-string", "1.0", 1, "are a numeric string and a number"),
                              ("int-2^53", e53, e53 + 1, "are equal through a double"),
                              ("int64-edge", e63 - 1, e63 - 2, "are equal through a double"),
                              ("int-minus-2^31", -e31, e31, "are equal modulo 2^32")):
        yield Vector("representation", f"keys-{name}", f"keys {k1!r} and {k2!r} {why}: different keys, no pair; "
                     "each joins its own", _case(qa, _t("b", 1, 5, k1), _t("p", 2, 5, k2), _t("p", 3, 6, k1),
                                                 _t("b", 4, 6, k2)))
    big = 1234567890123456.7
    agg_kind: AggregateKind
    for agg_kind, vals, why in (("sum", (big, -1234567890123456.0), "17 significant digits: the exact sum is 0.75"),
                            ("sum", (5e-324, 5e-324), "two subnormals: 1e-323, not 0"),
                            ("avg", (1.7976931348623157e308, 1.7976931348623157e308),
                             "the largest double twice: the average is itself (a float sum overflows)"),
                            ("sum", (1.7976931348623157e308, -1.7976931348623157e308), "the largest double and its "
                             "negation: 0"),
                            ("min", (-0.0, 0.0), "negative zero and zero: a zero"),
                            ("max", (0.30000000000000004, 0.3), "0.30000000000000004 and 0.3: the first is larger"),
                            ("min", (2.2250738585072014e-308, 5e-324), "the smallest normal and the smallest "
                             "subnormal: the subnormal")):
        label = {0.75: "digits17"}.get(vals[0] + vals[1], "") or f"{vals[0]:.3g}-{vals[1]:.3g}"
        yield Vector("representation", f"value-{agg_kind}-{label}".replace("+", "").replace(".", "_"),
                     f"{agg_kind} of {vals[0]!r} and {vals[1]!r}: {why}",
                     _case(Query(-3, 0, aggregate=agg_kind), _t("p", 1, 8, value=vals[0]), _t("p", 2, 9, value=vals[1]),
                           _t("b", 3, 10)))
    # optional fields: a watermark without a channel is on channel 0, and only there
    qc = Query(-2, 0, channels=2)
    no_channel = _case(qc, _t("b", 1, 5), Watermark(9, 0), Watermark(3, 1), _t("p", 2, 4), Watermark(9, 1),
                       _t("p", 3, 5))
    yield Vector("representation", "channelless-watermark-two-channels", "two channels: a watermark line without "
                 "a channel field is on channel 0 only; with channel 1 at 3, W = 3 and the probe at 4 is on time",
                 replace(no_channel, encoding="minimal"))
    both = _case(qc, _t("b", 1, 5), Watermark(5, 0), Watermark(5, 1), Watermark(9, 0), _t("p", 2, 6),
                 Watermark(9, 1), _t("p", 3, 8))
    yield Vector("representation", "channel-0-omitted-and-explicit", "two channels: channel 0's watermarks once "
                 "without a channel field, once with \"channel\":0; both are channel 0 (W = 9 at the end, the "
                 "probe at 8 is late)",
                 _encoded_where(both, lambda ls: [("channel" in x) for x in ls if x["type"] == "watermark"][:3]
                                == [False, True, True]))
    every = _case(Query(-2, 0, aggregate="sum"), _t("p", 1, 4, value=0.0), _t("b", 2, 5), Watermark(5),
                  _t("p", 3, 5, value=2.0), _t("p", 4, 4))
    yield Vector("representation", "defaults-explicit", "every optional field written at its default "
                 "(join inner, lateness null, cond [], fields {}, value 0.0, channel 0)",
                 replace(every, encoding="explicit"))
    yield Vector("representation", "defaults-mixed", "optional fields at their defaults, some lines written, some "
                 "left out", _encoded_where(every, lambda ls: sum(len(x) for x in ls) in (30, 31, 32)))
    # integer-typed numbers: the format reads "value":3 as 3.0, and an implementation must too
    for agg_kind, vals, why in (("avg", (1.0, 2.0), "1.5 (an integer division gives 1)"),
                                ("avg", (-1.0, 2.0), "0.5 (an integer division gives 0)"),
                                ("avg", (-3.0, 0.0), "-1.5 (an integer division gives -1 or -2)"),
                                ("sum", (3.0, -1.0), "2"),
                                ("min", (3.0, -2.0), "-2"),
                                ("max", (0.0, 9007199254740992.0), "2^53, an integer a double holds exactly")):
        label = "_".join("2p53" if v == 1 << 53 else f"{int(v)}".replace("-", "m") for v in vals)
        yield Vector("representation", f"int-values-{agg_kind}-{label}",
                     f"{agg_kind} of values written as JSON integers ({int(vals[0])} and {int(vals[1])}, no decimal "
                     f"point): {why}",
                     replace(_case(Query(-3, 0, aggregate=agg_kind), _t("p", 1, 8, value=vals[0]),
                                   _t("p", 2, 9, value=vals[1]), _t("b", 3, 10)), encoding="full|int"))
    both_int = replace(every, encoding="minimal|int")
    yield Vector("representation", "int-values-minimal", "a sum over values written as integers, the value 0 left "
                 "out (its default), the others as \"value\":2", both_int)
    yield Vector("representation", "keys-reordered-spaced", "the same objects with their keys in another order "
                 "(\"type\" last on some lines) and other whitespace (spaces, tabs, CRLF line ends)",
                 _reordered(every))


def _reordered(case: Case) -> Case:
    """``case`` with keys in the first ``order:N`` that puts ``"type"`` away from the front of every line but the
    end line, and whitespace ``space:N`` of the same N."""
    for n in range(1000):
        c = replace(case, encoding=f"full|order:{n}|space:{n}")
        lines = [orjson.loads(x) for x in c.to_jsonl().splitlines()]
        if all(next(iter(x)) != "type" for x in lines[:-1]) and "\r" in c.to_jsonl() and "\t" in c.to_jsonl():
            return c
    raise ValueError("no order puts type away from the front")


MAX_DOUBLE = 1.7976931348623157e308
"""The largest finite double, :math:`(2^{53} - 1) \\cdot 2^{971}`; half an ulp above it is
:math:`2^{1024} - 2^{970}`."""


def question_vectors() -> Iterator[Vector]:
    """The answers of docs/format.rst's "Questions implementers ask" that a case can pin (issue 65): an inner
    join's aggregate row for a base whose window is empty, a sum at the edge of the double range, and integer
    values beyond :math:`2^{53}` (read as the nearest double: the limit is on fields only)."""
    q_sum = Query(-3, 0, aggregate="sum")
    kind: AggregateKind
    for kind, value in (("count", "0"), ("sum", "0.0"), ("avg", "null"), ("min", "null")):
        yield Vector("questions", f"inner-{kind}-empty-window", f"an inner join's {kind}: a base whose window holds "
                     f"no probe (the only probe is of another key) still gets its row, count 0, value {value}",
                     _case(Query(-3, 0, aggregate=kind), _t("p", 1, 9, key=2, value=5.0), _t("b", 2, 10)))
    half = 2.0 ** 970  # half an ulp of the largest double
    for name, extra, sign, why in (
            ("half-ulp", half, 1.0, "exactly half an ulp above the largest double: the tie rounds to even, "
             "2^1024, so \"inf\""),
            ("half-ulp-neg", half, -1.0, "the same below the smallest double: \"-inf\""),
            ("below-half-ulp", half - 2.0 ** 918, 1.0, "just under half an ulp above the largest double: it "
             "rounds to the largest double, finite"),
            ("quarter-ulp", 2.0 ** 969, 1.0, "a quarter ulp above the largest double: the largest double"),
            ("one-ulp", 2.0 ** 971, 1.0, "one ulp above the largest double: \"inf\"")):
        yield Vector("questions", f"sum-max-double-plus-{name}", f"sum of {sign * MAX_DOUBLE!r} and {sign * extra!r}: "
                     f"the exact sum rounded once to the nearest double; {why}",
                     _case(q_sum, _t("p", 1, 9, value=sign * MAX_DOUBLE), _t("p", 2, 10, value=sign * extra),
                           _t("b", 3, 10)))
    yield Vector("questions", "avg-max-double-plus-half-ulp", f"avg of {MAX_DOUBLE!r} and {half!r}: the exact "
                 "mean rounded once, finite (the exact sum would round to \"inf\", the mean does not)",
                 _case(Query(-3, 0, aggregate="avg"), _t("p", 1, 9, value=MAX_DOUBLE), _t("p", 2, 10, value=half),
                       _t("b", 3, 10)))
    e53 = float(1 << 53)
    for kind, other, why in (("sum", -e53, "0.0 (an implementation that keeps the integer gets 1)"),
                             ("max", 1.0, "9007199254740992.0")):
        case = replace(_case(Query(-3, 0, aggregate=kind), _t("p", 1, 9, value=e53), _t("p", 2, 10, value=other),
                             _t("b", 3, 10)), encoding="full|int")
        text = case.to_jsonl()
        assert text.count('"value":9007199254740992,') == 1
        yield Vector("questions", f"int-value-above-2^53-{kind}", f"{kind} of a value written as the JSON integer "
                     "9007199254740993 (2^53 + 1) and one of " + f"{other:g}: a value is a double, read as the nearest "
                     f"one (2^53), so the {kind} is {why}; the 2^53 limit is on fields, not values",
                     replace(case, raw=text.replace('"value":9007199254740992,', '"value":9007199254740993,')))


def found_by_mutants() -> Iterator[Vector]:
    """Cases that told apart oracle mutants the generated cases of a default run did not
    (``oij bench kit-power --deep``, then shrunk): each pins one situation of the oracle's code."""
    far = 1 << 62
    yield Vector("found-by-mutants", "min-left-lateness-at-zero", "min, left join, lateness 3: a base and a probe "
                 "both at ts 0 (the min is the probe's 0.0, not an initial value)",
                 _case(Query(-1, 0, aggregate="min", join="left", lateness=3), _t("b", 3, 0, value=-1e308),
                       _t("p", 5, 0, value=0.0)))
    yield Vector("found-by-mutants", "exclusive-window-probe-ahead-of-w", "(1, 3) exclusive, W = 30: the probe at 35 "
                 "is ahead of W and stays for the base at 33 that arrives after W moved",
                 _case(Query(1, 3, False, False, join="left"), _t("p", 45, 29, 2), _t("p", 52, 35, 2), Watermark(30),
                       _t("b", 53, 33, 2)))
    yield Vector("found-by-mutants", "cond-count-near-max-ts", "count with a condition x >= value + 1 near the top "
                 "of the timestamp range: the probe one tick after the base is in (-1, 7]",
                 _case(Query(-1, 7, False, True, aggregate="count", join="left",
                             cond=(Comparison("x", ">=", "value", 1.0),)),
                       _tf("p", 3, far - 61, 1.0000000000000002e16, 1e16, value=-1e16),
                       _tf("b", 4, far - 62, 1.0000000000000002e16, 1.0, value=1.0)))
    yield Vector("found-by-mutants", "point-window-two-channels-sum", "sum over the window [0, 0] with two "
                 "channels: the probe on channel 1 at the base's ts is summed (0.5)",
                 _case(Query(0, 0, aggregate="sum", channels=2), _t("p", 2, 12, value=0.5, channel=1),
                       _t("b", 5, 12, value=1e16)))
    yield Vector("found-by-mutants", "left-point-window-at-w", "left join, window [0, 0], W at the base's ts "
                 "before it arrives: the base is not final until its probe at the same ts has had its turn",
                 _case(Query(0, 0, join="left"), Watermark(-far + 62), _t("b", 4, -far + 62), _t("p", 6, -far + 62)))
    yield Vector("found-by-mutants", "max-base-at-w", "max, window [-2, 0], W = 105 before a base at 105: the "
                 "probe at 105 that follows still counts",
                 _case(Query(-2, 0, aggregate="max"), Watermark(105), _t("b", 90, 105, value=0.0),
                       _t("p", 91, 105, value=0.0)))
    yield Vector("found-by-mutants", "count-wake-after-purge", "count, [-2, 2]: two bases final at W = 32, then a "
                 "base at 40 whose probes arrive behind it (39, then 33), then W = 174",
                 _case(Query(-2, 2, aggregate="count"), _t("b", 6, 24, 9), _t("b", 10, 23, 9), Watermark(32),
                       _t("b", 17, 40, 9), _t("p", 19, 39, 9), _t("p", 20, 33, 9), Watermark(174)))
    yield Vector("found-by-mutants", "two-bases-one-probe-then-w", "[0, 1]: bases at 11 and 10, a probe at 10, "
                 "then W = 191: only the base at 10 joins",
                 _case(Query(0, 1), _t("b", 1, 11), _t("b", 2, 10), _t("p", 6, 10), Watermark(191)))
    yield Vector("found-by-mutants", "avg-left-two-bases-no-probe", "avg, left join, window (1, 1]: two bases near "
                 "the top of the range and no probe: two rows with count 0 and a null value",
                 _case(Query(1, 1, False, True, aggregate="avg", join="left"), _t("b", 112, far - 858),
                       _t("b", 170, far - 794)))
    yield Vector("found-by-mutants", "count-left-final-on-arrival-no-key", "count, left join, [-3, -1], W = 16 "
                 "before the first tuple of its key: the base at 16 is final on arrival, count 0",
                 _case(Query(-3, -1, aggregate="count", join="left"), Watermark(16), _t("b", 10, 16, 9)))
    yield Vector("found-by-mutants", "count-first-probe-of-key-at-w", "count, [5, 10], W = 10: a probe at 10, the "
                 "first tuple of its key, is on time and waits for bases (none comes): one empty output",
                 _case(Query(5, 10, aggregate="count"), Watermark(10), _t("p", 1, 10, value=0.0)))
    extremes: tuple[tuple[AggregateKind, tuple[float, float], str], ...] = (
        ("min", (1e308, 1.5e308), "a"), ("max", (1.5e308, 1e308), "a"), ("min", (2.5, 2.2), "b"),
        ("min", (2.2, 2.5), "c"))
    for kind, vals, order in extremes:
        yield Vector("found-by-mutants", f"{kind}-extreme-{order}", f"{kind} over two probes of values {vals[0]} and "
                     f"{vals[1]}, in that order (the extreme kept exactly: no overflow, no rounding)",
                     _case(Query(0, 5, aggregate=kind), _t("b", 1, 0, value=0.0), _t("p", 2, 1, value=vals[0]),
                           _t("p", 3, 2, value=vals[1])))
    for lo in (1, 2):
        yield Vector("found-by-mutants", f"count-point-window-{lo}-negative-ts", f"count, window [{lo}, {lo}] at "
                     f"negative timestamps: the base at {-9 - lo} is pending when W = -9 comes, and the probe at -9 "
                     "is in its window (kept, not dropped)",
                     _case(Query(lo, lo, aggregate="count"), _t("b", 1, -9 - lo, value=0.0), Watermark(-9),
                           _t("p", 2, -9, value=0.0)))
    yield Vector("found-by-mutants", "count-point-window-final-on-arrival", "count, window [-1, -1]: a probe at 5, "
                 "W = 6, then a base at 6, final on arrival: its one-point window holds the probe (count 1)",
                 _case(Query(-1, -1, aggregate="count"), _t("p", 1, 5, value=0.0), Watermark(6),
                       _t("b", 2, 6, value=0.0)))
    near = 1 << 61
    yield Vector("found-by-mutants", "count-cursor-near-2-61", "count, [0, 10], timestamps near 2^61 (beyond a "
                 "double's exact integers): the probe at 2^61 leaves the second base's window exactly",
                 _case(Query(0, 10, aggregate="count"), _t("b", 1, near - 9, value=0.0),
                       _t("b", 2, near + 1, value=0.0), _t("p", 3, near, value=0.0), _t("p", 4, near + 1, value=0.0),
                       Watermark(near + 2)))
    yield Vector("found-by-mutants", "min-cursor-keeps-the-window", "min, [0, 10]: bases at 0 and 5, probes at 5 "
                 "(1.0) and 6 (2.0), W = 11: moving to the second base keeps both probes (min 1.0)",
                 _case(Query(0, 10, aggregate="min"), _t("b", 1, 0, value=0.0), _t("b", 2, 5, value=0.0),
                       _t("p", 3, 5, value=1.0), _t("p", 4, 6, value=2.0), Watermark(11)))
    yield Vector("found-by-mutants", "min-cursor-moves-on", "min, [0, 10]: bases at 0 and 5, probes at 6 (1.0) and "
                 "12 (3.0), W = 11: the first base sees 1.0 only, the second both (min 1.0)",
                 _case(Query(0, 10, aggregate="min"), _t("b", 1, 0, value=0.0), _t("b", 2, 5, value=0.0),
                       _t("p", 3, 6, value=1.0), _t("p", 4, 12, value=3.0), Watermark(11)))
    yield Vector("found-by-mutants", "cond-inner-probes-then-base", "inner join, [0, 0], condition a.x == b.x: "
                 "probes at 0 (x = 1) and 5 (x = 2), W = 1, a base at 5 (x = 2): the probe at 5 joins (its "
                 "condition operands stay with it when the probe at 0 is purged)",
                 _case(Query(0, 0, cond=(Comparison("x", "==", "x", 0.0),)), _tx("p", 1, 0, 1.0),
                       _tx("p", 2, 5, 2.0), Watermark(1), _tx("b", 3, 5, 2.0)))
    yield Vector("found-by-mutants", "cond-inner-bases-then-probe", "inner join, [0, 2], condition a.x < b.y: "
                 "bases at 0 (x = 5) and 20 (x = 1), W = 10, a probe at 20 (y = 3): the base at 20 joins (its "
                 "condition operands stay with it when the base at 0 is purged)",
                 _case(Query(0, 2, cond=(Comparison("x", "<", "y"),)), _tf("b", 1, 0, 5.0, 0.0),
                       _tf("b", 2, 20, 1.0, 0.0), Watermark(10), _tf("p", 3, 20, 0.0, 3.0)))
    yield Vector("found-by-mutants", "count-gap-purge-before-a-far-base", "count, [1, 2]: bases at 0 and 10, a "
                 "probe at 1, W = 3: the probe is purged from the gap below the far base (no crash, counts 1 and 0)",
                 _case(Query(1, 2, aggregate="count"), _t("b", 1, 0), _t("b", 2, 10), _t("p", 3, 1), Watermark(3)))
    yield Vector("found-by-mutants", "count-gap-purge-keeps-the-next-probe", "count, [2, 3]: a base at 0, probes "
                 "at 4 and 5, W = 3, then a base at 3: the purge drops nothing the base at 3 needs (counts 0 and 1)",
                 _case(Query(2, 3, aggregate="count"), _t("b", 1, 0), _t("p", 2, 4), _t("p", 3, 5), Watermark(3),
                       _t("b", 4, 3)))
    yield Vector("found-by-mutants", "count-zero-lower-pending-base", "count, [0, 5]: a base and a probe at 10, "
                 "W = 11: the pending base beside stored probes, with a lower bound of 0",
                 _case(Query(0, 5, aggregate="count"), _t("b", 1, 10), _t("p", 2, 10), Watermark(11)))
    yield Vector("found-by-mutants", "count-lateness-gap-purge-from-the-front", "count, [2, 3], lateness 3: a base "
                 "at 0, probes at 4, 5, 6, then a base at 3: the purge at the front of the probes drops only the "
                 "probes below every window (counts 0 and 2)",
                 _case(Query(2, 3, aggregate="count", lateness=3), _t("b", 1, 0), _t("p", 2, 4), _t("p", 3, 5),
                       _t("p", 4, 6), _t("b", 5, 3)))
    yield Vector("found-by-mutants", "base-pending-at-w-equal-hi", "[-3, -1], W = 9: a base at 10 (hi = 9 = W) is "
                 "still pending, so a probe at 9 arriving after it joins",
                 _case(Query(-3, -1), _t("p", 1, 7), Watermark(9), _t("b", 2, 10), _t("p", 3, 9)))
    for agg in (None, "count"):
        yield Vector("found-by-mutants", f"future-probe-at-w-plus-lower-{agg or 'pairs'}", "[1, 3], W = 10: a probe at "
                     "11 (b.ts - lower = W) is still needed by a base at W, which arrives next",
                     _case(Query(1, 3, aggregate=agg), Watermark(10), _t("p", 1, 11), _t("b", 2, 10), Watermark(20)))
    yield Vector("found-by-mutants", "bases-out-of-order", "[0, 0]: bases at 5, 10, then 7, each met by a probe at "
                 "its own time: the stored bases stay in time order",
                 _case(Query(0, 0), _t("b", 1, 5), _t("b", 2, 10), _t("b", 3, 7), _t("p", 4, 7), _t("p", 5, 5),
                       _t("p", 6, 10)))
    yield Vector("found-by-mutants", "cond-count-final-on-arrival-below-window", "count, [-10, -8], a.x < b.y: probes "
                 "at 5 and 11 (y = 2), W = 13, a base at 20 (x = 1) final on arrival: its window [10, 12] holds only "
                 "the probe at 11; the one at 5, still stored, is below it",
                 _case(Query(-10, -8, aggregate="count", cond=(Comparison("x", "<", "y"),)), _tf("p", 1, 5, 0.0, 2.0),
                       _tf("p", 2, 11, 0.0, 2.0), Watermark(13), _tf("b", 3, 20, 1.0, 0.0)))
    yield Vector("found-by-mutants", "cond-count-pending-then-final-below-window", "count, [-10, -8], a.x < b.y: "
                 "probes at 5 and 11 (y = 2), a base at 20 (x = 1) pending, then W = 13 makes it final: its window "
                 "[10, 12] holds only the probe at 11, though the one at 5 is still stored",
                 _case(Query(-10, -8, aggregate="count", cond=(Comparison("x", "<", "y"),)), _tf("p", 1, 5, 0.0, 2.0),
                       _tf("p", 2, 11, 0.0, 2.0), _tf("b", 3, 20, 1.0, 0.0), Watermark(13)))
    yield Vector("found-by-mutants", "cond-count-after-a-purged-base", "count, [-3, 0], a.x < b.y: a base at 10 "
                 "(x = 5) final and dropped at W = 15, then a base at 20 (x = 1) and a probe at 19 (y = 2): the "
                 "second base's condition reads its own x (counts 0 and 1)",
                 _case(Query(-3, 0, aggregate="count", cond=(Comparison("x", "<", "y"),)), _tf("b", 1, 10, 5.0, 0.0),
                       Watermark(15), _tf("b", 2, 20, 1.0, 0.0), _tf("p", 3, 19, 0.0, 2.0)))
    yield Vector("found-by-mutants", "cond-count-after-a-purged-base-key-alive", "the same with a probe at 14 "
                 "(y = 0) that keeps the key's state alive across the purge: the second base still reads its own x",
                 _case(Query(-3, 0, aggregate="count", cond=(Comparison("x", "<", "y"),)), _tf("b", 1, 10, 5.0, 0.0),
                       _tf("p", 2, 14, 0.0, 0.0), Watermark(15), _tf("b", 3, 20, 1.0, 0.0),
                       _tf("p", 4, 19, 0.0, 2.0)))
    yield Vector("found-by-mutants", "channel-regression-then-other-channel", "two channels: channel 0 at 9, "
                 "channel 1 at 5, channel 0 back to 6 (ignored), channel 1 at 9: W = 9, so a probe at 7 is late",
                 _case(Query(-2, 0, channels=2), _t("b", 1, 8), Watermark(9, 0), Watermark(5, 1), Watermark(6, 0),
                       Watermark(9, 1), _t("p", 2, 7)))
    for kind in ("count", "sum", "min"):
        yield Vector("found-by-mutants", f"{kind}-final-window-above-purge-edge", f"{kind}, [-5, -3]: a probe at -3, "
                     "a base at 3, W = 2: the base is final (hi = 0 < 2) and its window [-2, 0] starts above the purge "
                     "edge W - 5 = -3, so the probe stays but is in no window read so far; a base at 5 reads [0, 2] "
                     "(counts 0 and 0: found by an independent audit of the equivalent mutants, issue 37)",
                     _case(Query(-5, -3, aggregate=kind), _t("p", 1, -3, value=4.0), _t("b", 2, 3), Watermark(2),
                           _t("b", 3, 5)))
    yield Vector("found-by-mutants", "count-probe-at-w-after-base", "count, [1, 3]: a base at 10, W = 12, then a "
                 "probe at 12 (on time: W is not above it) joins the base",
                 _case(Query(1, 3, aggregate="count"), _t("b", 1, 10), Watermark(12), _t("p", 2, 12)))


def interleaved() -> list[Vector]:
    """Every vector, the features taken in turn: the first of each feature, then the second of each, ..."""
    groups: dict[str, list[Vector]] = {}
    for v in vectors():
        groups.setdefault(v.feature, []).append(v)
    out: list[Vector] = []
    for i in range(max(len(g) for g in groups.values())):
        out += [g[i] for g in groups.values() if i < len(g)]
    return out


def expected_lines(case: Case, profile_name: str) -> str:
    return "".join(result_lines(expected_output(case, PROFILES[profile_name])))


def export(directory: str) -> int:
    """Write the tree under ``directory`` (created if missing); returns the number of cases."""
    manifest: list[str] = []
    n = 0
    for v in vectors():
        d = os.path.join(directory, v.feature)
        os.makedirs(d, exist_ok=True)
        write_text(os.path.join(d, f"{v.name}.in.jsonl"), v.case.to_jsonl())
        profiles = list(PROFILES) if v.feature == "profiles" else [CANONICAL.name]
        for p in profiles:
            suffix = "out" if p == CANONICAL.name else f"{p}.out"
            write_text(os.path.join(d, f"{v.name}.{suffix}.jsonl"), expected_lines(v.case, p))
            manifest.append(orjson.dumps({"case": f"{v.feature}/{v.name}", "feature": v.feature, "profile": p,
                                          "expected": f"{v.feature}/{v.name}.{suffix}.jsonl",
                                          "features": sorted(case_features(v.case)),
                                          "description": v.description}).decode())
        n += 1
    write_text(os.path.join(directory, "manifest.jsonl"), "".join(x + "\n" for x in manifest))
    return n
