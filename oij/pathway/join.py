"""Pathway's interval join as an implementation under test: one oij-jsonl case, arrival order imposed exactly.

Data flow for one case::

    events --(event i of the case gets __time__ = 2 (i + 1); Pathway wants even times)--> two pandas frames
      --> pw.debug.table_from_pandas (A: bases, B: probes; columns rid, ts, key, value)
      --> A.interval_join[_left](B, A.ts, B.ts, interval(lo', hi'), A.key == B.key[, behavior])
      --> select (base id, probe id) or groupby(base id).reduce(count, sum, min, max)
      --> pw.io.subscribe: every change (time, +1/-1, row) --> consolidated final rows + the revisions

Why this drive is exact: Pathway is a dataflow engine over timestamped
batches; a row of a table built with a ``__time__`` column enters the
computation at that processing time, and rows of both tables with distinct
times are processed in time order.  So the arrival order of the case is
imposed by construction, with no pacing and no wall clock (unlike the Flink
adapters).  Pathway revises its output when a later row changes it (a left
join's (a, null) row is retracted when a match arrives); the comparison uses
the consolidated final result, and the retractions are reported apart
(``Run``).

Mapping:

* window: bounds made inclusive on integer times (``lower + 1`` for an
  exclusive lower bound, ``upper - 1`` for an exclusive upper one); an empty
  window (lower' > upper', which ``pw.temporal.interval`` refuses) joins
  nothing: the probes get a key no base has, so the left join still gives
  (a, null) for every base;
* keys: tagged strings (``i:1`` and ``s:1`` differ);
* behaviors: ``none`` (exact: profile ``pathway``), ``cutoff`` =
  ``common_behavior(cutoff=lateness)`` (profile ``pathway-cutoff``),
  ``forget`` = ``common_behavior(cutoff=lateness, keep_results=False)``
  (profile ``pathway-forget``), ``delay`` = ``common_behavior(delay=lateness)``
  (the final result is exact again: profile ``pathway``);
* aggregates (adapter ``pathway-agg``): the left interval join grouped by base
  with Pathway's reducers: count of the non-null probe values, ``sum`` of the
  values with null as 0.0, ``min``, ``max``; avg = sum / count;
* watermark lines and ``lateness`` without a behavior: ignored (nothing is late
  in Pathway without a cutoff; no late lines).

Resources: one Pathway graph per case, cleared after the run (``G.clear()``);
Pathway keeps a few engine threads per process (they do not grow with runs)
and starts no process.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from oij.io.adapt import Unsupported, aggregate_row
from oij.io.keys import tag_key
from oij.spec.batch import Results
from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import BASE, Event, Query, StreamTuple

Behavior = Literal["none", "cutoff", "forget", "delay"]
NO_KEY = "~none~"  # tagged case keys start with "i:" or "s:"


@dataclass
class Run:
    """The consolidated result of one case and Pathway's revisions: rows it emitted and later took back."""

    results: Results
    revisions: list[tuple[int, int, tuple[Any, ...]]] = field(default_factory=list)  # (time, -1, row) retractions
    changes: int = 0

    def revision_summary(self) -> str:
        """One line: how many rows were taken back, by kind."""
        kinds: Counter[str] = Counter()
        for _, _, row in self.revisions:
            if len(row) == 2:
                kinds["(a, null) rows" if row[1] is None else "pairs"] += 1
            else:
                kinds["aggregate rows"] += 1
        if not kinds:
            return f"pathway: {self.changes} changes, no revision"
        what = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        return f"pathway: {self.changes} changes, {len(self.revisions)} taken back later ({what})"


def check_supported(q: Query, events: Sequence[Event], behavior: Behavior) -> None:
    """Raise :class:`Unsupported` unless the case can be run with ``behavior``."""
    if behavior != "none" and q.lateness is None:
        raise Unsupported(f"the {behavior} behavior is Pathway's common_behavior over event time with the query's "
                          "lateness: only lateness mode can be driven, not watermark lines")
    if q.cond:
        raise Unsupported("joining conditions are not mapped")


def _behavior(pw: Any, q: Query, behavior: Behavior) -> dict[str, Any]:
    lateness = q.lateness or 0
    if behavior == "cutoff":
        return {"behavior": pw.temporal.common_behavior(cutoff=lateness)}
    if behavior == "forget":
        return {"behavior": pw.temporal.common_behavior(cutoff=lateness, keep_results=False)}
    if behavior == "delay":
        return {"behavior": pw.temporal.common_behavior(delay=lateness)}
    return {}  # behavior=None is refused by Pathway: leave the argument out


def run_case(q: Query, events: Sequence[Event], behavior: Behavior = "none") -> Run:
    """Run the case through Pathway's interval join; the consolidated result and the revisions.

    Requires: ``check_supported(q, events, behavior)`` passes.
    Cost: about 0.1-0.3 s per small case once Pathway is imported (1.5-2.5 s).
    """
    import pandas as pd
    import pathway as pw
    from pathway.internals.parse_graph import G

    check_supported(q, events, behavior)
    logging.getLogger("pathway_engine").setLevel(logging.WARNING)
    lo, hi = lower_offset(q), upper_offset(q)
    empty = lo > hi
    rows: dict[str, list[tuple[int, int, str, float, int, int]]] = {"base": [], "probe": []}
    for i, e in enumerate(events):
        if isinstance(e, StreamTuple):
            side = "base" if e.side == BASE else "probe"
            key = NO_KEY if empty and side == "probe" else tag_key(e.key)
            rows[side].append((e.id, e.ts, key, float(e.value), 2 * (i + 1), 1))

    class Ev(pw.Schema):
        rid: int
        ts: int
        key: str
        value: float

    def table(r: list[tuple[int, int, str, float, int, int]]) -> Any:
        df = pd.DataFrame(r, columns=["rid", "ts", "key", "value", "__time__", "__diff__"]).astype(
            {"rid": "int64", "ts": "int64", "key": "object", "value": "float64", "__time__": "int64",
             "__diff__": "int64"})
        return pw.debug.table_from_pandas(df, schema=Ev)

    a, b = table(rows["base"]), table(rows["probe"])
    window = pw.temporal.interval(lo, lo if empty else hi)
    left = q.join == "left" or q.aggregate is not None
    join = a.interval_join_left if left else a.interval_join
    j = join(b, a.ts, b.ts, window, a.key == b.key, **_behavior(pw, q, behavior))
    if q.aggregate is None:
        out = j.select(bid=a.rid, pid=b.rid)
        cols = ["bid", "pid"]
    else:
        pairs = j.select(bid=a.rid, pv=b.value)
        out = pairs.groupby(pairs.bid).reduce(
            pairs.bid,
            n=pw.reducers.sum(pw.if_else(pairs.pv.is_none(), 0, 1)),
            s=pw.reducers.sum(pw.coalesce(pairs.pv, 0.0)),
            mn=pw.reducers.min(pairs.pv),
            mx=pw.reducers.max(pairs.pv),
        )
        cols = ["bid", "n", "s", "mn", "mx"]
    changes: list[tuple[int, int, tuple[Any, ...]]] = []

    def on_change(key: Any, row: dict[str, Any], time: int, is_addition: bool) -> None:
        changes.append((time, 1 if is_addition else -1, tuple(row[c] for c in cols)))

    try:
        pw.io.subscribe(out, on_change=on_change)
        pw.run(monitoring_level=pw.MonitoringLevel.NONE, default_logging=False)
    finally:
        G.clear()
    final: Counter[tuple[Any, ...]] = Counter()
    for _, d, r in changes:
        final[r] += d
    if any(n < 0 for n in final.values()):
        raise RuntimeError(f"Pathway's update stream took back rows it never emitted: {final}")
    res = Results()
    for r, n in final.items():
        for _ in range(n):
            if q.aggregate is None:
                res.pairs.append((int(r[0]), None if r[1] is None else int(r[1])))
            else:
                res.aggregates.append(aggregate_row(str(q.aggregate), int(r[0]), int(r[1]), *r[2:]))
    global _LAST
    _LAST = Run(res.canonical(), [c for c in changes if c[1] < 0], len(changes))
    return _LAST


_LAST: Run | None = None


def last_run() -> Run | None:
    """The :class:`Run` of the last case run in this process (``oij adapter`` prints its revisions)."""
    return _LAST


__all__ = ["Behavior", "Run", "check_supported", "last_run", "run_case"]
