"""The conformance protocol: what an implementation's output must be, and how it is compared.

An implementation reads one oij-jsonl v1 case on stdin and writes its result
lines on stdout (pair, aggregate, late; any order).  Outputs compare as
multisets; aggregate values with a relative tolerance of 1e-9.  An unknown,
malformed or duplicated line is a protocol error that quotes the line.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from oij.reference.oracle import run_events
from oij.spec.aggregate import AggregateValue
from oij.spec.batch import AggregateRow, Pair, Results
from oij.spec.profiles import CANONICAL, Profile, compute_profile_result
from oij.testing._case import Case
from oij.testing._schema import OUTPUT_TYPES, validate_line

REL_TOL = 1e-9


class ProtocolError(Exception):
    """An output line that breaks the protocol; the message quotes it."""


def parse_output(text: str | bytes) -> Results:
    """Read an implementation's output.  Raises :class:`ProtocolError` on the first bad line."""
    raw = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    res = Results()
    seen: set[tuple[Any, ...]] = set()
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        quoted = line if len(line) <= 200 else line[:200] + "..."
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise ProtocolError(f"output line {n} is not JSON: {quoted!r}") from None
        errs = validate_line(obj, OUTPUT_TYPES)
        if errs:
            raise ProtocolError(f"output line {n} breaks the protocol ({errs[0]}): {quoted!r}")
        t = obj["type"]
        ident: tuple[Any, ...]
        if t == "pair":
            ident = ("pair", obj["base"], obj["probe"])
            res.pairs.append((obj["base"], obj["probe"]))
        elif t == "aggregate":
            ident = ("aggregate", obj["base"])
            v = obj["value"]
            res.aggregates.append((obj["base"], obj["count"], float(v) if isinstance(v, str) else v))
        else:
            ident = ("late", obj["id"])
            res.late.append(obj["id"])
        if ident in seen:
            raise ProtocolError(f"output line {n} is a duplicate: {quoted!r}")
        seen.add(ident)
    return res.canonical()


def expected_output(case: Case, profile: Profile = CANONICAL) -> Results:
    """What ``case`` must produce under ``profile`` (the oracle for the canonical one), canonical order."""
    if profile == CANONICAL:
        return run_events(case.events, case.query).canonical()
    return compute_profile_result(case.events, case.query, profile)


def restrict(res: Results, features: Iterable[str]) -> Results:
    """The part of a result that an implementation with ``features`` is held to (late lines need late-report)."""
    if "late-report" in set(features):
        return res
    return Results(res.pairs, res.aggregates, [])


def same_value(a: AggregateValue, b: AggregateValue) -> bool:
    """Aggregate values agree: both null, equal counts, or floats within relative tolerance 1e-9."""
    if a is None or b is None:
        return a is None and b is None
    fa, fb = float(a), float(b)
    if math.isinf(fa) or math.isinf(fb):
        return fa == fb
    return math.isclose(fa, fb, rel_tol=REL_TOL, abs_tol=0.0) or fa == fb


@dataclass
class Diff:
    """Rows expected but missing, rows got but not expected, and aggregate rows whose values differ."""

    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.missing or self.unexpected)


def row_text(kind: str, row: Any) -> str:
    """One result row as a short readable string."""
    if kind == "pair":
        return f"pair base={row[0]} probe={'null' if row[1] is None else row[1]}"
    if kind == "aggregate":
        return f"aggregate base={row[0]} count={row[1]} value={'null' if row[2] is None else row[2]}"
    return f"late id={row}"


def compare(expected: Results, got: Results) -> Diff:
    """The multiset difference of two results (aggregate values within :data:`REL_TOL`)."""
    d = Diff()
    for kind, e_rows, g_rows in (("pair", expected.pairs, got.pairs), ("late", expected.late, got.late)):
        ec, gc = Counter[Any](e_rows), Counter[Any](g_rows)
        d.missing += [row_text(kind, r) for r in sorted((ec - gc).elements(), key=str)]
        d.unexpected += [row_text(kind, r) for r in sorted((gc - ec).elements(), key=str)]
    left: list[AggregateRow] = list(got.aggregates)
    for r in expected.aggregates:
        match = next((g for g in left if g[0] == r[0] and g[1] == r[1] and same_value(g[2], r[2])), None)
        if match is None:
            d.missing.append(row_text("aggregate", r))
        else:
            left.remove(match)
    d.unexpected += [row_text("aggregate", r) for r in left]
    return d


def all_rows(res: Results) -> list[str]:
    """Every row of a result as text, in canonical order."""
    pairs: list[Pair] = res.pairs
    return ([row_text("pair", p) for p in pairs] + [row_text("aggregate", r) for r in res.aggregates]
            + [row_text("late", i) for i in res.late])
