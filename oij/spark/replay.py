"""Replay cases past ``--seq-limit``: the few tuples of each difference, with the W at their arrival, from Spark.

``oij check --got`` explains each of the first differences with a small case
(:func:`oij.testing._got.build_case`): the tuples that decide it, each after
a watermark line carrying the canonical W at its arrival in the whole stream.
When the stream is not in memory, those tuples and their W come from the
event frame: :func:`oij.spark.oracle.mark_late` gives every tuple its W (the
same prefix scan as the oracle's), one filter on the named ids collects the
tuples the differences name, and one range join finds the probes in the
window of each base whose aggregate differs.  Only these rows reach the
driver: at most the differences' ids plus the probes in their windows.

Data flow::

    event frame -> mark_late (W per tuple) -> filter id in ids          -> tuples named (collected)
                                           -> join (key, ts in window)  -> probes of differing aggregates (collected)
                  -> per difference: (pos, W, tuple) in arrival order -> build_case
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oij.io.keys import untag_key
from oij.io.parquet import FIELD_PREFIX
from oij.spark.oracle import _shift, mark_late
from oij.spec.match import is_match, lower_offset, upper_offset
from oij.spec.model import BASE, NO_WATERMARK, Query, StreamTuple

Picked = list[tuple[int, int, StreamTuple]]


def _tuple(r: Any, q: Query, tagged: bool) -> tuple[int, int, StreamTuple]:
    key = untag_key(r["key"]) if tagged else r["key"]
    names = sorted({n for c in q.cond for n in (c.left, c.right) if n not in ("ts", "value")})
    fields = tuple((n, float(r[FIELD_PREFIX + n])) for n in names if r[FIELD_PREFIX + n] is not None)
    t = StreamTuple(r["side"], int(r["id"]), int(r["ts"]), key, float(r["value"] or 0.0), 0, fields)
    w = NO_WATERMARK if r["W"] is None else int(r["W"])
    return int(r["pos"]), w, t


def case_ids(diff: dict[str, Any]) -> set[int]:
    """The ids a difference names (an aggregate's probes are found from its base)."""
    if diff["kind"] == "late":
        return {diff["id"]}
    return {x for x in (diff["base"], diff.get("probe")) if x is not None}


def replay_picks(spark: Any, frame: Any, q: Query, diffs: Sequence[dict[str, Any]],
                 tagged: bool) -> list[Picked]:
    """For each difference (``oij.spark.compare`` rows), the tuples that decide it as (position, W, tuple), in
    arrival order, as :func:`oij.testing._got.replay_case` picks them from events in memory.

    ``tagged``: the frame's keys are tagged strings (``i:1``, ``s:x``; a materialized oij-jsonl input).
    """
    from pyspark.sql import functions as F

    marked = mark_late(frame, q)
    ids = sorted(set().union(*(case_ids(d) for d in diffs))) if diffs else []
    rows = {int(r["id"]): _tuple(r, q, tagged) for r in marked.where(F.col("id").isin(ids)).collect()} if ids else {}
    window: dict[int, list[tuple[int, int, StreamTuple]]] = {}
    bases = sorted({d["base"] for d in diffs if d["kind"] == "aggregate" and d["base"] in rows})
    if bases:
        lo, hi = lower_offset(q), upper_offset(q)
        a = marked.where(F.col("id").isin(bases)).select(F.col("id").alias("a_id"), F.col("key").alias("a_key"),
                                                          F.col("ts").alias("a_ts"), F.col("side").alias("a_side"))
        cand = marked.join(F.broadcast(a), (F.col("key") == F.col("a_key")) & (F.col("side") != F.col("a_side"))
                           & F.expr(f"ts >= {_shift('a_ts', lo)} AND ts <= {_shift('a_ts', hi)}"))
        for r in cand.collect():
            pos, w, t = _tuple(r, q, tagged)
            base = rows[int(r["a_id"])][2]
            if t.side != BASE and is_match(base, t, q):
                window.setdefault(int(r["a_id"]), []).append((pos, w, t))
    out: list[Picked] = []
    for d in diffs:
        picked = [rows[i] for i in case_ids(d) if i in rows]
        if d["kind"] == "aggregate":
            picked += window.get(d["base"], [])
        out.append(sorted(picked, key=lambda x: x[0]))
    return out


__all__ = ["replay_picks"]
