"""A case as a readable timeline: the events in arrival order with the watermark after each,
then the expected rows against the rows an implementation produced, the differing ones marked."""

from __future__ import annotations

from oij.spec.batch import Results
from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import NO_WATERMARK, End, Event, Query, StreamTuple, Watermark
from oij.spec.profiles import CANONICAL, Profile, combine_watermark, is_late_under
from oij.testing._case import Case
from oij.testing._protocol import Diff, all_rows


def describe_query(q: Query) -> str:
    """The query in one line."""
    lb = "[" if q.lower_inclusive else "("
    ub = "]" if q.upper_inclusive else ")"
    mode = f"lateness {q.lateness}" if q.lateness is not None else f"watermarks, {q.channels} channel(s)"
    what = f"aggregate {q.aggregate}" if q.aggregate else "pairs"
    cond = "".join(f", a.{c.left} {c.op} b.{c.right}" + (f" {'+' if c.add >= 0 else '-'} {_num(abs(c.add))}"
                                                          if c.add else "") for c in q.cond)
    return (f"window a.ts + {lb}{q.lower}, {q.upper}{ub} (inclusive offsets {lower_offset(q)}..{upper_offset(q)}), "
            f"{q.join} join, {what}, {mode}" + (f", cond{cond[1:]}" if cond else ""))


def _num(v: float) -> str:
    """A field or constant exactly: ``3`` for 3.0, the shortest round-trip repr otherwise."""
    return str(int(v)) if v.is_integer() and abs(v) <= 1 << 53 else repr(v)


def _w(w: int) -> str:
    return "-inf" if w == NO_WATERMARK else str(w)


def event_text(e: Event) -> str:
    """One event in a few words."""
    if isinstance(e, StreamTuple):
        key = repr(e.key) if isinstance(e.key, str) else str(e.key)
        extra = f" value={e.value}" if e.value else ""
        ch = f" ch={e.channel}" if e.channel else ""
        fields = "".join(f" {k}={_num(v)}" for k, v in e.fields)
        return f"{e.side:<5} id={e.id} ts={e.ts} key={key}{extra}{ch}{fields}"
    if isinstance(e, Watermark):
        ch = f" ch={e.channel}" if e.channel else ""
        return f"watermark ts={e.ts}{ch}"
    return "end"


def timeline(case: Case, profile: Profile = CANONICAL) -> list[str]:
    """The events with W after each (under ``profile``'s combination rule) and the late ones marked."""
    q = case.query
    lines = [f"query: {describe_query(q)}", f"  #  {'event':<42} W after"]
    ch = [NO_WATERMARK] * q.channels
    sides = {"base": NO_WATERMARK, "probe": NO_WATERMARK}
    w = NO_WATERMARK
    for i, e in enumerate(case.events, 1):
        note = ""
        if isinstance(e, StreamTuple):
            if is_late_under(e, w, profile):
                note = f"  late (ts {'<=' if profile.late_rule == 'le' else '<'} W={_w(w)})"
            sides[e.side] = max(sides[e.side], e.ts)
        elif isinstance(e, Watermark):
            ch[e.channel] = max(ch[e.channel], e.ts)
        if not isinstance(e, End):
            w = combine_watermark(ch, sides, q, profile)
        lines.append(f"{i:>3}  {event_text(e):<42} {_w(w) if not isinstance(e, End) else ''}{note}")
    return lines


def render(case: Case, expected: Results, got: Results | None, diff: Diff | None, *,
           profile: Profile = CANONICAL, problem: str | None = None) -> str:
    """The full report of one case: timeline, then expected vs got with the differing rows marked."""
    out = timeline(case, profile)
    out.append("")
    if problem:
        out.append(f"problem: {problem}")
    exp = all_rows(expected)
    out.append(f"expected ({profile.name}), {len(exp)} row(s):")
    bad_missing = set(diff.missing) if diff else set()
    out += [f"  {'-' if r in bad_missing else ' '} {r}" for r in exp] or ["    (nothing)"]
    if got is not None:
        rows = all_rows(got)
        bad_extra = set(diff.unexpected) if diff else set()
        out.append(f"got, {len(rows)} row(s):")
        out += [f"  {'+' if r in bad_extra else ' '} {r}" for r in rows] or ["    (nothing)"]
    if diff:
        out.append("marked: '-' expected but missing, '+' produced but not expected")
    return "\n".join(out)
