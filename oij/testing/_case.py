"""A conformance case (one query and its arrival sequence), its oij-jsonl form and the features it uses.

No Hypothesis here: the commands that only read or print cases (``oij
explain``, ``oij vectors``, ``oij check``) import this module, not the
generator (:mod:`oij.testing._cases`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from oij.io.jsonlread import read_jsonl
from oij.io.jsonlwrite import write_events
from oij.spec.model import (
    AGGREGATES,
    TS_LIMIT,
    AggregateKind,
    End,
    Event,
    Query,
    StreamTuple,
    Watermark,
)
from oij.testing._features import DEFAULT_FEATURES, FEATURES

Impl = Sequence[str] | Callable[[Query, Sequence[Event]], Any]
"""An implementation under test: a command (argv) or a callable ``(query, events) -> Results | lines``."""

KINDS: tuple[AggregateKind, ...] = AGGREGATES
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
    """``full``: every field written; ``minimal``: every optional field that has its default value left out;
    ``mixed:N``: each optional field at its default, line by line, left out or written explicitly (as drawn by
    the number N); ``explicit``: every optional field written, those the writer leaves out included.  The
    format allows them all, and an implementation must read them the same.  Any of these may be followed by
    ``|``-separated features of the text (``encode`` in this module): ``int`` (integral values and fields written as
    integers), ``float`` (fields written as floats), ``order:N`` (keys in a drawn order on each line),
    ``space:N`` (whitespace the format allows, line by line)."""
    raw: str | None = field(default=None, compare=False, repr=False)
    """The exact text the case was read from (``oij conform --replay``): sent as it is instead of an encoding."""

    def to_jsonl(self) -> str:
        """The case as an oij-jsonl v1 input: its :attr:`raw` text if it has one, else in its :attr:`encoding`."""
        if self.raw is not None:
            return self.raw
        buf = io.StringIO()
        write_events(self.query, self.events, buf)
        return encode(buf.getvalue(), self.encoding)

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


def mixed_jsonl(text: str, seed: int) -> str:
    """``text`` (oij-jsonl) with each optional field at its default value, line by line, left out or written
    explicitly: bit ``i`` of a per-line hash of ``seed`` decides the line's ``i``-th optional field.  Every
    combination the format allows appears across seeds, a channel-less watermark under ``channels > 1`` included.
    ``seed`` -1: every optional field written.  ``cond`` and ``fields`` (format 1.1) are never added: the case
    stays one a format-1.0 reader takes."""
    out = []
    for n, line in enumerate(text.splitlines()):
        obj = orjson.loads(line)
        dflt = DEFAULTS.get(obj["type"], {})
        bits = (seed * 0x9E3779B1 + n * 0x85EBCA77) >> 7 if seed >= 0 else 0xFF << 8
        kept = {}
        for k, v in obj.items():
            if k in dflt and v == dflt[k] and type(v) is type(dflt[k]):
                i = list(dflt).index(k)
                if (bits >> i) & 1:
                    continue
            kept[k] = v
        for i, (k, v) in enumerate(dflt.items()):  # a default the writer left out, written explicitly
            if k not in kept and k not in obj and k not in ("cond", "fields") and (bits >> (i + 8)) & 1:
                kept[k] = v
        out.append(orjson.dumps(kept).decode() + "\n")
    return "".join(out)


def encode(text: str, encoding: str) -> str:
    """``text`` (oij-jsonl as :func:`oij.io.jsonlwrite.write_events` writes it) in ``encoding`` (see
    :attr:`Case.encoding`): the base (``full``, ``minimal``, ``mixed:N``, ``explicit``), then each ``|`` feature
    in turn.  Every result reads back as the same case."""
    base, *features = encoding.split("|")
    if base.startswith("mixed:"):
        text = mixed_jsonl(text, int(base[6:]))
    elif base == "explicit":
        text = mixed_jsonl(text, -1)
    elif base == "minimal":
        text = minimal_jsonl(text)
    elif base != "full":
        raise ValueError(f"unknown encoding {encoding!r}")
    for feat in features:
        name, _, arg = feat.partition(":")
        if name == "int":
            text = _numbers_jsonl(text, integers=True)
        elif name == "float":
            text = _numbers_jsonl(text, integers=False)
        elif name == "order":
            text = order_jsonl(text, int(arg))
        elif name == "space":
            text = space_jsonl(text, int(arg))
        else:
            raise ValueError(f"unknown encoding feature {feat!r} in {encoding!r}")
    return text


def _line_bits(seed: int, n: int) -> int:
    """Bits drawn for line ``n`` of a case from ``seed`` (a multiplicative hash: cheap, deterministic)."""
    return ((seed * 0x9E3779B1 + n * 0x85EBCA77) & 0xFFFFFFFFFFFF) >> 7


def _as_int(v: Any) -> Any:
    """An integral float (not -0.0, at most 2^53 in magnitude: exact in every reader) as an int."""
    if type(v) is float and v.is_integer() and abs(v) <= 1 << 53 and not (v == 0.0 and str(v).startswith("-")):
        return int(v)
    return v


def _numbers_jsonl(text: str, integers: bool) -> str:
    """``text`` with every integral ``value`` and ``fields`` number written as a JSON integer (``integers``), or
    every ``fields`` number as a float (``3000.0``).  The format reads ``3`` and ``3.0`` alike."""
    out = []
    for line in text.splitlines():
        obj = json.loads(line)
        if obj.get("type") == "tuple":
            if integers and "value" in obj:
                obj["value"] = _as_int(obj["value"])
            if isinstance(obj.get("fields"), dict):
                obj["fields"] = {k: _as_int(v) if integers else float(v) for k, v in obj["fields"].items()}
        out.append(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    return "".join(out)


def order_jsonl(text: str, seed: int) -> str:
    """``text`` with the keys of each line's object (nested ones too) in an order drawn from ``seed`` and the
    line number, ``"type"`` included: JSON objects are unordered, and a reader that expects ``"type"`` first or
    the writer's order is wrong."""
    import random

    def shuffled(obj: Any, rng: random.Random) -> Any:
        if not isinstance(obj, dict):
            return obj
        keys = list(obj)
        rng.shuffle(keys)
        return {k: shuffled(obj[k], rng) for k in keys}

    out = []
    for n, line in enumerate(text.splitlines()):
        obj = json.loads(line)
        out.append(json.dumps(shuffled(obj, random.Random(_line_bits(seed, n))), ensure_ascii=False,
                              separators=(",", ":")) + "\n")
    return "".join(out)


SPACE_STYLES = ("compact", "after", "around", "tabs", "crlf", "padded")
"""The whitespace of :func:`space_jsonl`, one per line: none; a space after each ``:`` and ``,``; spaces around
every token; a tab before and after the object; a CRLF line end; spaces before and after the object and a CRLF
line end.  docs/format.rst allows them all."""


def space_jsonl(text: str, seed: int) -> str:
    """``text`` with each line in one of :data:`SPACE_STYLES` (drawn from ``seed`` and the line number): the
    same objects, other whitespace."""
    out = []
    for n, line in enumerate(text.splitlines()):
        obj = json.loads(line)
        style = SPACE_STYLES[_line_bits(seed, n) % len(SPACE_STYLES)]
        if style == "compact":
            out.append(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
        elif style == "after":
            out.append(json.dumps(obj, ensure_ascii=False) + "\n")
        elif style == "around":
            out.append(_spaced(obj) + "\n")
        elif style == "tabs":
            out.append("\t" + json.dumps(obj, ensure_ascii=False) + "\t\n")
        elif style == "crlf":
            out.append(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\r\n")
        else:
            out.append("  " + json.dumps(obj, ensure_ascii=False, separators=(" ,", " : ")) + " \r\n")
    return "".join(out)


def _spaced(obj: Any) -> str:
    if isinstance(obj, dict):
        return "{ " + " , ".join(f"{json.dumps(k, ensure_ascii=False)} : {_spaced(v)}" for k, v in obj.items()) + " }"
    if isinstance(obj, list):
        return "[ " + " , ".join(_spaced(v) for v in obj) + " ]"
    return json.dumps(obj, ensure_ascii=False)


REPR_EDGES = (1 << 31, 1 << 32, 1 << 53, 1 << 63)
"""The magnitudes where other languages and systems change how they hold an integer: a C or Java ``int``, an
unsigned 32-bit one, a double's exact integers, an ``int64``."""


def near_repr_edge(x: int, reach: int = 64) -> bool:
    """Whether the integer ``x`` lies within ``reach`` of +/-2^31, 2^32, 2^53 or the int64 edge (or beyond 2^53)."""
    ax = abs(x)
    return ax > (1 << 53) or any(abs(ax - e) <= reach for e in REPR_EDGES)


def text_twins(k1: str, k2: str) -> bool:
    """Different string keys that a case-insensitive, normalizing or trimming comparison confuses."""
    import unicodedata

    if k1 == k2:
        return False
    return (k1.casefold() == k2.casefold() or unicodedata.normalize("NFC", k1) == unicodedata.normalize("NFC", k2)
            or k1.rstrip() == k2.rstrip())


REPR_VALUES = (1234567890123456.7, -1234567890123456.0, 0.30000000000000004, -0.0, 5e-324, -5e-324,
               2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308)
"""Tuple values of the representation model: 17 significant digits (with a partner whose exact sum keeps the
last digits: 0.75), a sum of 0.1 and 0.2, negative zero, the smallest subnormal, the smallest normal, the largest
finite double."""


def has_repr_value(v: float) -> bool:
    """A value of :data:`REPR_VALUES`' kinds: -0.0, subnormal, the largest double, or 17 significant digits."""
    import math

    if v == 0.0:
        return math.copysign(1.0, v) < 0
    return abs(v) < 2.2250738585072014e-308 * 2 or abs(v) > 1e308 or len(repr(abs(v)).replace(".", "")
                                                                      .lstrip("0").split("e")[0]) >= 17


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
    if any(abs(x) > TS_LIMIT // 2 for x in (q.lower, q.upper, q.lateness or 0)):
        out.add("extreme-ts")
    marks: dict[int, int] = {}
    strs: set[str] = set()
    for e in case.events:
        if isinstance(e, Watermark):
            if e.channel in marks and e.ts < marks[e.channel]:
                out.add("regressions")
            marks[e.channel] = max(marks.get(e.channel, e.ts), e.ts)
        elif isinstance(e, StreamTuple):
            if isinstance(e.key, str):
                out.add("mixed-keys")
                if any(text_twins(e.key, k) for k in strs):
                    out.add("representation")
                strs.add(e.key)
            elif near_repr_edge(e.key):
                out.add("representation")
            if e.ts < 0:
                out.add("negative-ts")
            if abs(e.ts) > TS_LIMIT // 2:
                out.add("extreme-ts")
            elif near_repr_edge(e.ts) or near_repr_edge(e.id) or has_repr_value(e.value):
                out.add("representation")
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


