"""A small case, explained: what the oracle does at every arrival, as text and as an SVG timeline.

:func:`explain` replays the events through the reference oracle one at a
time and records, for each arrival, the watermark W after it, whether the
tuple was late, the rows the oracle emitted *at that moment* and how many
tuples it still holds.  :func:`explain_text` prints that table;
:func:`explain_svg` draws it:

* top panel -- event time across, arrival order down: every tuple at its
  ts on the row of its arrival (base = square, probe = circle, late = red
  and hollow), W as a staircase line that moves right as arrivals go down
  (a tuple left of the line when it arrives is late), and on the right the
  rows emitted by that arrival;
* bottom panel -- one band per key: the base tuples, the window
  ``[ts + lower, ts + upper]`` of each as a bar, the probe tuples, and each
  emitted pair as a link from its base to its probe; a left join's null row
  is an empty circle, an aggregate is written beside its base.  Given the
  rows an implementation produced (``got``), rows it missed are drawn
  dashed red and rows it should not have produced dashed purple.

The drawing is plain SVG text written here (no plotting library), and the
same input always gives the same bytes, so a picture in the docs is a
reproducible artefact of a real run.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from oij.reference.oracle import Oracle
from oij.spec.batch import AggregateRow, Pair, Results
from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import NO_WATERMARK, TS_LIMIT, Event, Key, Query, StreamTuple, Watermark
from oij.testing._timeline import describe_query, event_text

MAX_EVENTS = 400
"""The largest input :func:`explain_svg` draws (a picture of more is unreadable)."""


@dataclass
class Step:
    """What one arrival did."""

    index: int  # 1-based position in the arrival sequence
    event: Event
    w: int  # the watermark after the event
    late: bool  # a tuple that was late on arrival (never joined)
    pairs: list[Pair] = field(default_factory=list)  # pairs emitted by this arrival
    rows: list[AggregateRow] = field(default_factory=list)  # aggregate rows emitted by this arrival
    held: int = 0  # tuples the oracle still holds afterwards


def explain(q: Query, events: Sequence[Event]) -> list[Step]:
    """Replay ``events`` through the oracle, one :class:`Step` per event.  O(n log n) plus the output."""
    o = Oracle(q)
    steps: list[Step] = []
    for i, e in enumerate(events, 1):
        np_, na, nl = len(o.pairs), len(o.aggregates), len(o.late)
        o.on_event(e)
        steps.append(Step(i, e, o.w, len(o.late) > nl, o.pairs[np_:], o.aggregates[na:], len(o.retained())))
    return steps


def results_of(steps: Sequence[Step]) -> Results:
    """Everything the steps emitted, in canonical order (equal to the oracle's whole result)."""
    return Results([p for s in steps for p in s.pairs], [r for s in steps for r in s.rows],
                   [s.event.id for s in steps if s.late and isinstance(s.event, StreamTuple)]).canonical()


def _w(w: int) -> str:
    return "-inf" if w == NO_WATERMARK else "+inf" if w >= TS_LIMIT else str(w)


def _pair(p: Pair) -> str:
    return f"(a{p[0]}, {'null' if p[1] is None else f'b{p[1]}'})"


def _row(r: AggregateRow) -> str:
    return f"a{r[0]}: n={r[1]} {_num(r[2])}"


def _num(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _event(e: Event) -> str:
    if isinstance(e, StreamTuple):
        return f"{('a' if e.side == 'base' else 'b') + str(e.id):<4} {event_text(e)}"
    return event_text(e)


def explain_text(q: Query, steps: Sequence[Step]) -> str:
    """The steps as a table: arrival, event, W after, late, what was emitted, tuples held."""
    out = [f"query: {describe_query(q)}", f"{'#':>3}  {'event':<44} {'W after':>8}  held  emitted"]
    for s in steps:
        what = [_pair(p) for p in s.pairs] + [_row(r) for r in s.rows]
        if s.late:
            what.insert(0, "LATE (ts < W): not joined, reported as late")
        out.append(f"{s.index:>3}  {_event(s.event):<44} {_w(s.w):>8}  {s.held:>4}  {', '.join(what)}")
    pairs = sum(len(s.pairs) for s in steps)
    rows = sum(len(s.rows) for s in steps)
    late = sum(s.late for s in steps)
    out.append(f"total: {pairs} pair(s), {rows} aggregate row(s), {late} late tuple(s)")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- drawing

BASE_C, PROBE_C, LATE_C, W_C, PAIR_C = "#1f5fa8", "#d9731a", "#c0262d", "#2b8a3e", "#555555"
MISS_C, EXTRA_C = "#c0262d", "#8e44ad"


def _key_order(k: Key) -> tuple[int, str]:
    return (0, f"{k:+021d}") if isinstance(k, int) else (1, k)


def _ticks(lo: float, hi: float, n: int = 8) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def _fmt(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


class _Svg:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, tag: str, **attrs: object) -> None:
        self.parts.append(f"<{tag} {_attrs(attrs)}/>")

    def text(self, x: float, y: float, s: str, **attrs: object) -> None:
        self.parts.append(f"<text {_attrs({'x': x, 'y': y, **attrs})}>{escape(s)}</text>")


def _attrs(attrs: dict[str, object]) -> str:
    return " ".join(f'{k.rstrip("_").replace("_", "-")}="{_fmt(v) if isinstance(v, float) else escape(str(v))}"'
                    for k, v in attrs.items())


def explain_svg(q: Query, steps: Sequence[Step], got: Results | None = None, title: str | None = None) -> str:
    """The two-panel timeline of ``steps`` (module docstring) as an SVG document.

    ``got``: rows an implementation produced, drawn against the oracle's.  O(n + pairs).
    """
    tuples = [s for s in steps if isinstance(s.event, StreamTuple)]
    lo_off, hi_off = lower_offset(q), upper_offset(q)
    xs: list[int] = []
    for s in tuples:
        assert isinstance(s.event, StreamTuple)
        xs.append(s.event.ts)
        if s.event.side == "base":
            xs += [s.event.ts + lo_off, s.event.ts + hi_off]
    xs += [s.w for s in steps if NO_WATERMARK != s.w < TS_LIMIT]
    xs += [s.event.ts for s in steps if isinstance(s.event, Watermark)]
    t0, t1 = (min(xs), max(xs)) if xs else (0, 1)
    span = max(1, t1 - t0)  # exact (ints): timestamps near 2^62 lose their differences as floats
    pad = max(1.0, span * 0.04)

    width, left, plot_w = 940, 64, 560
    row_h = 18 if len(steps) <= 60 else max(4, 1080 // len(steps))

    def x(t: float) -> float:
        return left + ((t - t0) + pad) / (span + 2 * pad) * plot_w

    svg = _Svg()
    y = 22
    svg.text(8, y, title or "oij explain", font_weight="bold", font_size=14)
    y += 18
    svg.text(8, y, describe_query(q), font_size=11, fill="#333")
    # ---- panel 1: arrival order vs event time
    y += 26
    svg.text(8, y, "Arrival order (down) against event time (across); W after each arrival", font_size=12,
             font_weight="bold")
    svg.text(left + plot_w + 16, y, "emitted by this arrival", font_size=11, fill="#333")
    top = y + 12
    bottom = top + row_h * len(steps)
    origin = 0 if abs(t0) < 10**9 else t0  # far from 0, ticks are offsets from t0 (exact)
    for rel in _ticks(t0 - origin - pad, t1 - origin + pad):
        t = origin + round(rel) if origin else rel
        svg.add("line", x1=x(t), y1=top, x2=x(t), y2=bottom, stroke="#eee")
        svg.text(x(t), bottom + 14, _fmt(rel) if not origin else f"t0{rel:+g}", font_size=10, text_anchor="middle",
                 fill="#555")
    svg.text(left + plot_w / 2, bottom + 28, "event time" + (f" (t0 = {t0})" if origin else ""), font_size=10,
             text_anchor="middle", fill="#555")
    pts: list[str] = []
    prev_w = NO_WATERMARK
    for s in steps:
        cy = top + row_h * (s.index - 0.5)
        if NO_WATERMARK != s.w < TS_LIMIT:
            if prev_w != NO_WATERMARK:
                pts.append(f"{_fmt(x(prev_w))},{_fmt(cy - row_h / 2)}")
            pts.append(f"{_fmt(x(s.w))},{_fmt(cy - row_h / 2)}")
            pts.append(f"{_fmt(x(s.w))},{_fmt(cy + row_h / 2)}")
        prev_w = s.w
        if row_h >= 12:
            svg.text(left - 8, cy + 4, str(s.index), font_size=10, text_anchor="end", fill="#777")
        e = s.event
        if isinstance(e, StreamTuple):
            _mark(svg, x(e.ts), cy, e, s.late, min(6.0, row_h / 3))
            if row_h >= 12:
                svg.text(x(e.ts) + 9, cy + 4, ("a" if e.side == "base" else "b") + str(e.id), font_size=10,
                         fill=LATE_C if s.late else "#222")
        elif isinstance(e, Watermark):
            svg.add("path", d=f"M{_fmt(x(e.ts))},{_fmt(cy - 5)} l-4,-5 h8 z", fill=W_C)
            if row_h >= 12:
                svg.text(x(e.ts) + 7, cy + 4, f"wm {e.ts}" + (f" ch{e.channel}" if e.channel else ""),
                         font_size=10, fill=W_C)
        else:
            svg.text(left + 4, cy + 4, "end", font_size=10, fill="#777")
        if row_h >= 12:
            what = [_pair(p) for p in s.pairs] + [_row(r) for r in s.rows]
            if s.late:
                what.insert(0, "late")
            if what:
                line = ", ".join(what)
                if len(line) > 46:
                    line = line[:43] + "..."
                svg.text(left + plot_w + 16, cy + 4, line, font_size=10, fill=LATE_C if s.late else "#222")
    if pts:
        svg.add("polyline", points=" ".join(pts), fill="none", stroke=W_C, stroke_width=2, stroke_dasharray="5,3")
        last = pts[-1].split(",")
        svg.text(float(last[0]) + 4, float(last[1]) + 12, "W", font_size=11, fill=W_C, font_weight="bold")
    y = bottom + 52

    # ---- panel 2: the join, per key
    svg.text(8, y, "The join, per key: windows of the base tuples, the probe tuples, and the pairs", font_size=12,
             font_weight="bold")
    y += 12
    keys = sorted({s.event.key for s in tuples if isinstance(s.event, StreamTuple)}, key=_key_order)
    emitted_pairs = [p for s in steps for p in s.pairs]
    emitted_rows = {r[0]: r for s in steps for r in s.rows}
    missing: list[Pair] = []
    extra: list[Pair] = []
    if got is not None:
        want_c, got_c = Counter(emitted_pairs), Counter(got.pairs)
        missing = list((want_c - got_c).elements())
        extra = list((got_c - want_c).elements())
        got_rows = {r[0]: r for r in got.aggregates}
    late_ids = {(s.event.side, s.event.id) for s in tuples if s.late and isinstance(s.event, StreamTuple)}
    for k in keys:
        bases = [s.event for s in tuples if isinstance(s.event, StreamTuple) and s.event.key == k
                 and s.event.side == "base"]
        probes = [s.event for s in tuples if isinstance(s.event, StreamTuple) and s.event.key == k
                  and s.event.side == "probe"]
        bases.sort(key=lambda t: (t.ts, t.id))
        y += 18
        svg.text(8, y + 4, f"key {k!r}" if isinstance(k, str) else f"key {k}", font_size=11, font_weight="bold")
        y += 8
        raise_ = max(Counter(a.ts for a in bases).values(), default=1) - 1
        base_y = y + 10 + 20 * raise_
        pos: dict[tuple[str, int], tuple[float, float]] = {}
        bar_top = base_y + 10
        for i, a in enumerate(bases):
            by = bar_top + i * 7
            late = ("base", a.id) in late_ids
            if lo_off <= hi_off:
                svg.add("rect", x=x(a.ts + lo_off), y=by, width=max(1.5, x(a.ts + hi_off) - x(a.ts + lo_off)),
                        height=4, fill="#ddd" if late else "#b7cde8")
        probe_y = bar_top + max(1, len(bases)) * 7 + 14
        level: dict[tuple[str, int], int] = {}
        for a in bases:  # tuples at the same ts are stacked
            n = level[("base", a.ts)] = level.get(("base", a.ts), -1) + 1
            pos[("base", a.id)] = (x(a.ts), base_y - 20 * n)
        probes.sort(key=lambda t: (t.ts, t.id))
        for b in probes:
            n = level[("probe", b.ts)] = level.get(("probe", b.ts), -1) + 1
            pos[("probe", b.id)] = (x(b.ts), probe_y + 26 * n)
        depth = max((v for (side, _), v in level.items() if side == "probe"), default=0)
        ids_here = {a.id for a in bases}

        for p in emitted_pairs:
            if p[0] in ids_here:
                _link(svg, pos, probe_y, p, PAIR_C, None)
        for p in missing:
            if p[0] in ids_here:
                _link(svg, pos, probe_y, p, MISS_C, "4,3")
        for p in extra:
            if p[0] in ids_here and (p[1] is None or ("probe", p[1]) in pos):
                _link(svg, pos, probe_y, p, EXTRA_C, "2,2")
        for a in bases:
            ax, ay = pos[("base", a.id)]
            _mark(svg, ax, ay, a, ("base", a.id) in late_ids, 6)
            svg.text(ax - 8, ay - 8, f"a{a.id}", font_size=10, text_anchor="middle")
            r = emitted_rows.get(a.id)
            if r is not None:
                label = f"n={r[1]} {q.aggregate}={_num(r[2])}"
                if got is not None and got_rows.get(a.id) != r:
                    g = got_rows.get(a.id)
                    label += f" (got {'nothing' if g is None else f'n={g[1]} {_num(g[2])}'})"
                svg.text(ax + 9, ay - 8, label, font_size=10,
                         fill=MISS_C if got is not None and got_rows.get(a.id) != r else "#222")
        for b in probes:
            bx, by_ = pos[("probe", b.id)]
            _mark(svg, bx, by_, b, ("probe", b.id) in late_ids, 6)
            svg.text(bx, by_ + 17, f"b{b.id}", font_size=10, text_anchor="middle")
        y = probe_y + 26 * depth + 22
    # ---- legend
    y += 20
    lx = 8.0
    for label, draw in (("base", "base"), ("probe", "probe"), ("late", "late"), ("window of a base", "bar"),
                        ("pair", "pair"), ("W", "w")):
        if draw == "base":
            svg.add("rect", x=lx, y=y - 9, width=10, height=10, fill=BASE_C)
        elif draw == "probe":
            svg.add("circle", cx=lx + 5, cy=y - 4, r=5, fill=PROBE_C)
        elif draw == "late":
            svg.add("circle", cx=lx + 5, cy=y - 4, r=5, fill="none", stroke=LATE_C, stroke_width=2)
        elif draw == "bar":
            svg.add("rect", x=lx, y=y - 6, width=14, height=4, fill="#b7cde8")
        elif draw == "pair":
            svg.add("line", x1=lx, y1=y - 4, x2=lx + 14, y2=y - 4, stroke=PAIR_C)
        else:
            svg.add("line", x1=lx, y1=y - 4, x2=lx + 14, y2=y - 4, stroke=W_C, stroke_width=2,
                    stroke_dasharray="5,3")
        svg.text(lx + 18, y, label, font_size=10)
        lx += 30 + 6.5 * len(label)
    if got is not None:
        for label, color, dash in (("missing (expected, not produced)", MISS_C, "4,3"),
                                   ("unexpected (produced, not expected)", EXTRA_C, "2,2")):
            svg.add("line", x1=lx, y1=y - 4, x2=lx + 14, y2=y - 4, stroke=color, stroke_width=1.5,
                    stroke_dasharray=dash)
            svg.text(lx + 18, y, label, font_size=10)
            lx += 30 + 6.0 * len(label)
    height = int(y + 14)
    # Scales to its container (a docs column, a browser window): the drawing is laid out in a width x height
    # user space (the viewBox) and shown as wide as the container, never wider than drawn; with no height
    # attribute the height follows from the viewBox's aspect ratio, so nothing is cut off or stretched.
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="100%" viewBox="0 0 {width} {height}" '
            f'style="max-width:{width}px;height:auto" font-family="sans-serif">')
    return "\n".join([head, f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>', *svg.parts,
                      "</svg>"]) + "\n"


def _link(svg: _Svg, pos: dict[tuple[str, int], tuple[float, float]], probe_y: float, p: Pair, color: str,
          dash: str | None) -> None:
    """A pair as a line from its base to its probe; a null row as an empty circle under the base."""
    style: dict[str, object] = {"stroke_dasharray": dash} if dash else {}
    ax, ay = pos[("base", p[0])]
    if p[1] is None:
        svg.add("circle", cx=ax, cy=probe_y, r=5, fill="none", stroke=color, stroke_width=1.5, **style)
        svg.add("line", x1=ax, y1=ay, x2=ax, y2=probe_y - 5, stroke=color, stroke_width=1, **style)
        return
    bx, by = pos.get(("probe", p[1]), (ax, probe_y))
    svg.add("line", x1=ax, y1=ay, x2=bx, y2=by, stroke=color, stroke_width=1.5 if dash else 1,
            opacity=1 if dash else 0.6, **style)


def _mark(svg: _Svg, cx: float, cy: float, t: StreamTuple, late: bool, r: float) -> None:
    color = LATE_C if late else (BASE_C if t.side == "base" else PROBE_C)
    fill = "white" if late else color
    if t.side == "base":
        svg.add("rect", x=cx - r, y=cy - r, width=2 * r, height=2 * r, fill=fill, stroke=color, stroke_width=1.5)
    else:
        svg.add("circle", cx=cx, cy=cy, r=r, fill=fill, stroke=color, stroke_width=1.5)
    if late:
        svg.add("path", d=f"M{_fmt(cx - r)},{_fmt(cy - r)} L{_fmt(cx + r)},{_fmt(cy + r)} "
                          f"M{_fmt(cx - r)},{_fmt(cy + r)} L{_fmt(cx + r)},{_fmt(cy - r)}",
                stroke=LATE_C, stroke_width=1.5)


__all__ = ["MAX_EVENTS", "Step", "explain", "explain_svg", "explain_text", "results_of"]


def read_output(path: str) -> Results:
    """The result lines of the file ``path`` (another implementation's output), as the kit parses them; a bad
    line is an :class:`~oij.io.errors.InputError` naming it."""
    import re

    from oij.io.errors import InputError
    from oij.testing._protocol import ProtocolError, parse_output

    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise InputError(path, 0, "file", e.strerror or str(e)) from None
    try:
        return parse_output(raw)
    except ProtocolError as e:
        m = re.match(r"output line (\d+) ", str(e))
        raise InputError(path, int(m.group(1)) if m else 0, "output", str(e)) from None
