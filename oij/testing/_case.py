"""A conformance case (one query and its arrival sequence), its oij-jsonl form and the features it uses.

No Hypothesis here: the commands that only read or print cases (``oij
explain``, ``oij vectors``, ``oij check``) import this module, not the
generator (:mod:`oij.testing._cases`).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from oij.io.jsonl import read_jsonl, write_events
from spec.model import (
    TS_LIMIT,
    AggregateKind,
    End,
    Event,
    Query,
    StreamTuple,
    Watermark,
)

Impl = Sequence[str] | Callable[[Query, Sequence[Event]], Any]
"""An implementation under test: a command (argv) or a callable ``(query, events) -> Results | lines``."""

FEATURES: dict[str, str] = {
    "left": "left joins: (a, null) rows for bases that match nothing",
    "aggregates": "per-base aggregates (count, sum, avg, min, max)",
    "channels": "more than one upstream channel, W = min over channels",
    "exclusive": "exclusive window bounds",
    "watermarks": "watermark mode: watermark lines",
    "lateness": "lateness mode: W = max ts - lateness, no watermark lines",
    "late-report": "late tuples reported as late lines (absent: late lines are not compared)",
    "regressions": "watermarks that go backwards on a channel",
    "mixed-keys": "int and str keys that print alike (1 and \"1\")",
    "extreme-ts": "timestamps near +/-2^62",
    "negative-ts": "negative timestamps",
    "cond": "a joining condition: comparisons of named fields, ts and value (format 1.1; opt-in: all,cond)",
}
"""Every feature a case can exercise; ``oij conform --features`` restricts generation to a subset."""

OPT_IN = frozenset({"cond"})
"""Features that ``all`` and the default leave out: format 1.1 additions an implementation of format 1.0 cannot know.
Claim them by name (``--features all,cond``)."""

DEFAULT_FEATURES = frozenset(FEATURES) - OPT_IN
"""The features of ``all``: every feature of format 1.0."""

KINDS: tuple[AggregateKind, ...] = ("count", "sum", "avg", "min", "max")
FIELD_VALUES = (0.0, 1.0, -1.0, 2.0, 0.5, 1e16, 1e16 + 2)
"""Values of the named fields x and y: ties, halves, and a pair where ``b.y + 1`` rounds in doubles."""
COND_ADDS = (0.0, 0.0, 1.0, -1.0, 0.5, 2.0)


@dataclass(frozen=True)
class Case:
    """A query and its arrival sequence (ending with End)."""

    query: Query
    events: tuple[Event, ...]
    scenario: str = field(default="", compare=False)
    """How the case was made (a scenario of ``SCENARIOS``, ``vector NAME``, ``shrunk``); not part of its
    meaning."""
    encoding: str = field(default="full", compare=False)
    """``full``: every field written; ``minimal``: every optional field that has its default value left out (the
    format allows both, and an implementation must read both the same)."""

    def to_jsonl(self) -> str:
        """The case as an oij-jsonl v1 input, in its :attr:`encoding`."""
        buf = io.StringIO()
        write_events(self.query, self.events, buf)
        return buf.getvalue() if self.encoding == "full" else minimal_jsonl(buf.getvalue())

    @staticmethod
    def from_jsonl(text: str, path: str = "<case>") -> Case:
        """Read a case (raises ``oij.io.errors.InputError``, one line naming the line and field, on bad input)."""
        q, events = read_jsonl(io.BytesIO(text.encode()), path)
        return Case(q, tuple(events))

    @property
    def tuples(self) -> list[StreamTuple]:
        """The tuples, in arrival order."""
        return [e for e in self.events if isinstance(e, StreamTuple)]

    def __len__(self) -> int:
        """Events, the End excluded."""
        return sum(1 for e in self.events if not isinstance(e, End))


DEFAULTS: dict[str, dict[str, Any]] = {
    "query": {"lower_inclusive": True, "upper_inclusive": True, "aggregate": None, "join": "inner", "channels": 1,
              "lateness": None, "cond": []},
    "tuple": {"value": 0.0, "channel": 0, "fields": {}},
    "watermark": {"channel": 0},
}
"""The optional fields of oij-jsonl v1 and 1.1 and their defaults (docs/format.rst)."""


def minimal_jsonl(text: str) -> str:
    """``text`` (oij-jsonl) with every optional field that has its default value left out."""
    out = []
    for line in text.splitlines():
        obj = orjson.loads(line)
        dflt = DEFAULTS.get(obj["type"], {})
        kept = {k: v for k, v in obj.items()
                if k not in dflt or v != dflt[k] or type(v) is not type(dflt[k])}
        out.append(orjson.dumps(kept).decode() + "\n")
    return "".join(out)


def case_features(case: Case) -> frozenset[str]:
    """The features of :data:`FEATURES` that ``case`` needs an implementation to have (``late-report`` aside)."""
    q = case.query
    out: set[str] = {"lateness" if q.lateness is not None else "watermarks"}
    if q.join == "left":
        out.add("left")
    if q.aggregate is not None:
        out.add("aggregates")
    if q.channels > 1:
        out.add("channels")
    if not (q.lower_inclusive and q.upper_inclusive):
        out.add("exclusive")
    if q.cond:
        out.add("cond")
    marks: dict[int, int] = {}
    for e in case.events:
        if isinstance(e, Watermark):
            if e.channel in marks and e.ts < marks[e.channel]:
                out.add("regressions")
            marks[e.channel] = max(marks.get(e.channel, e.ts), e.ts)
        elif isinstance(e, StreamTuple):
            if isinstance(e.key, str):
                out.add("mixed-keys")
            if e.ts < 0:
                out.add("negative-ts")
            if abs(e.ts) > TS_LIMIT // 2:
                out.add("extreme-ts")
    return frozenset(out)


def parse_features(text: str | None) -> frozenset[str]:
    """``None``/``all``: every feature but the opt-in ones (:data:`OPT_IN`); ``a,b``: just those; ``-a,-b`` or
    ``all,-a``: all but those; ``all,cond``: all and cond.

    Raises ValueError naming an unknown feature.
    """
    if text is None or text.strip() in ("", "all"):
        return DEFAULT_FEATURES
    items = [x.strip() for x in text.split(",") if x.strip()]
    out = set(DEFAULT_FEATURES) if items[0] == "all" or items[0].startswith("-") else set()
    for it in items:
        if it == "all":
            continue
        name = it[1:] if it.startswith("-") else it
        if name not in FEATURES:
            raise ValueError(f"unknown feature {name!r}; known: {', '.join(FEATURES)}")
        if it.startswith("-"):
            out.discard(name)
        else:
            out.add(name)
    if not {"watermarks", "lateness"} & out:
        raise ValueError("features need at least one of watermarks, lateness")
    return frozenset(out)


