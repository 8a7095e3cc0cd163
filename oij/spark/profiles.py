r"""Every semantic profile of :mod:`oij.spec.profiles` in the Spark oracle, decided per tuple and per candidate pair.

:func:`oij.spec.profiles.compute_profile_result` simulates an operator event by
event.  Here the same result is a set computation: each tuple gets the
watermarks in force at its arrival from prefix maxima over the arrival
positions, each candidate pair is kept or not from the two tuples' columns
alone, and each base's row from its own columns and a few numbers of the whole
stream.  Data flow::

    event frame ──► prefix maxima (lagged history, own input) ──► H, Wl per tuple ──► late, probes, stored
                                                                                           │
    candidate pairs (same key, in window; oracle.join_pairs) ◄─────────────────────────────┘
        └─► kept iff the later tuple probes, the earlier was stored and is still held ──► pairs, aggregates

**Watermarks at arrival.**  Let :math:`h(k)` be the history of
:mod:`oij.spec.profiles` (W after the first k events, :math:`-\infty` for
:math:`k \le 0`) and p the 0-based arrival position of a tuple (it is event
:math:`j = p + 1`).

* :math:`H(p) = h(p - lag)`: the combination (``channel_combine``,
  ``side_combine``, ``lateness_shift``) of running maxima over the positions
  :math:`< p - lag`.  It is W before the event, and also the W with which
  state was last evicted before it (after event :math:`j - 1`, with
  :math:`h(j - 1 - lag)`).
* :math:`W_l(p)`: the W a tuple is judged late against: :math:`H(p)`, or with
  ``side_combine="own"`` in lateness mode the maximum timestamp of its own
  input at positions :math:`< p`, minus l and the shift (no lag).

Both are exclusive prefix maxima (:func:`oij.spark.oracle.prefix_max`).  The lag is a shift
of positions: the contribution of the event at position q is placed at order
:math:`2(q + lag) + 1` and a tuple at p asks at order 2p, so it sees exactly
the events with :math:`q < p - lag`.

**Per tuple.**  late iff the ``late_rule`` holds against :math:`W_l` (never
under ``ignore`` and ``revise``); it *probes* iff it is not late or
``late_tuples`` is join, ignore or revise; it is *stored* iff it is not late
(report, drop, join), always (revise), or iff :math:`H(p) <` its state edge
(ignore: :func:`oij.spec.profiles.state_edge`).

**Still held.**  W is nondecreasing, so a stored tuple y is still held at the
arrival of a later x iff it was not dropped by the last eviction before x:
:math:`\lnot dropped(y, H(pos(x)))` (:func:`oij.spec.profiles.is_droppable`).
Under ``purge="lazy-own"`` y is forgotten at the first later on-time tuple z
of its own input with :math:`y.ts \le W_l(z)`; :math:`W_l` is nondecreasing
along one input, so y is held at x iff the last on-time tuple z* of y's input
before x arrived no later than y, or :math:`y.ts > W_l(z^*)` (two more prefix
maxima per input: z*'s position and :math:`W_l(z^*)`).  Under ``revise``
nothing is dropped.

**Pairs.**  A matching pair (a, b), x the later of the two and y the earlier,
is emitted iff x probes, y was stored and y is still held at x.  (This is
when the step-by-step operator emits it: at x's arrival, y is in its state.)

**Rows of bases** (aggregates, and (a, null) of a left join): a base that
probes gets its row when it becomes final: at once if it was not stored; when
the stream's last eviction, with :math:`h(m - lag)` (m events before the end),
drops it, or lazy-own forgets it; at the end if ``end_flush`` and the stream
has an end event.  The row is over the pairs emitted with it.

**Taken back** (``retract_on_purge``): the result is the batch join
(:func:`oij.spec.batch.compute_batch`) of the tuples stored and not dropped
or forgotten by the end.

Tested against :func:`oij.spec.profiles.compute_profile_result` for every named
profile on Hypothesis workloads, with one wrong variant per parameter as
negative controls (tests/spark/test_spark_profiles.py).
"""

from __future__ import annotations

from typing import Any

from oij.io.parquet import FIELD_PREFIX
from oij.spark.oracle import (
    SparkOracleOptions,
    SparkResult,
    _cond_columns,
    _shift,
    aggregate_rows,
    join_pairs,
    pair_rows,
    prefix_max,
)
from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import Query
from oij.spec.profiles import CANONICAL, Profile

__all__ = ["STREAM", "spark_profile_oracle"]


def _hist_contributions(q: Query) -> list[tuple[str, str]]:
    """(column, SQL) of what each event adds to the history's running maxima: per channel or per input."""
    if q.lateness is None:
        return [(f"_h{c}", f"CASE WHEN type = 'watermark' AND coalesce(channel, 0) = {c} THEN ts END")
                for c in range(q.channels)]
    return [("_hb", "CASE WHEN type = 'tuple' AND side = 'base' THEN ts END"),
            ("_hp", "CASE WHEN type = 'tuple' AND side = 'probe' THEN ts END")]


def _combine(maxima: list[str], q: Query, p: Profile) -> str:
    """SQL of :func:`oij.spec.profiles.combine_watermark` over running-maximum columns (null is -inf)."""
    if q.lateness is None:
        if len(maxima) == 1:
            return maxima[0]
        if p.channel_combine == "max":
            return f"greatest({', '.join(maxima)})"
        nulls = " OR ".join(f"{m} IS NULL" for m in maxima)
        return f"CASE WHEN {nulls} THEN NULL ELSE least({', '.join(maxima)}) END"
    b, pr = maxima
    m = f"CASE WHEN {b} IS NULL OR {pr} IS NULL THEN NULL ELSE least({b}, {pr}) END" \
        if p.side_combine == "min" else f"greatest({b}, {pr})"
    return f"({m} - {q.lateness + p.lateness_shift})"


def _edge(side_ts: str, side: str, q: Query, timers: bool) -> str:
    """SQL of a tuple's state edge (:func:`oij.spec.profiles.state_edge`), or its Flink cleanup-timer edge."""
    lo, hi = lower_offset(q), upper_offset(q)
    if timers:
        lo, hi = min(lo, 0), max(hi, 0)
    return f"CASE WHEN {side} = 'base' THEN {_shift(side_ts, hi)} ELSE {_shift(side_ts, -lo)} END"


def _dropped(w: str, edge: str, p: Profile) -> str:
    """SQL of :func:`oij.spec.profiles.is_droppable` given the edge: false under W = -inf (null)."""
    op = ">" if p.purge == "exact" else ">="
    return f"coalesce({w} {op} {edge}, false)"


STREAM = "stream"
"""The optional column of an event frame that holds several independent streams (same query), each with its
own positions 0..n-1 and ids unique over the frame; without it the frame is one stream."""


def _arrival(frame: Any, q: Query, p: Profile, block: int) -> Any:
    """The tuples of ``frame`` with ``H`` and ``Wl`` (null: -inf); see the module docstring."""
    from pyspark.sql import functions as F

    hist = _hist_contributions(q)
    own = q.lateness is not None and p.side_combine == "own"
    names = [c for c, _ in hist]
    own_names = ["_ob", "_op"] if own and p.lag else []
    tuple_cols = [F.col(f"`{c}`") for c in frame.columns if c in ("pos", "side", "id", "ts", "key", "value")
                  or c.startswith(FIELD_PREFIX)]
    nulls = [F.lit(None).cast("long").alias(c) for c in (*names, *own_names)]
    asks = frame.where("type = 'tuple'").select(STREAM, *tuple_cols, F.expr("2 * pos").alias("_o"), *nulls)
    blank = [F.lit(None).cast(f.dataType).alias(f.name) for f in asks.schema.fields
             if f.name not in (STREAM, "_o", *names, *own_names)]
    # the contribution of the event at q sits at order 2 (q + lag) + 1, a tuple at p asks at 2 p: it sees q < p - lag
    rows = asks.unionByName(frame.select(STREAM, *blank, F.expr(f"2 * (pos + {p.lag}) + 1").alias("_o"),
                                         *[F.expr(sql).alias(c) for c, sql in hist],
                                         *[F.lit(None).cast("long").alias(c) for c in own_names]))
    if own_names:  # the own input's maxima without the lag (made only when lag > 0: orders stay unique)
        rows = rows.unionByName(frame.select(STREAM, *blank, F.expr("2 * pos + 1").alias("_o"),
                                             *[F.lit(None).cast("long").alias(c) for c in names],
                                             *[F.expr(sql).alias(c) for (_, sql), c in zip(hist, own_names,
                                                                                          strict=True)]))
    scanned = prefix_max(rows, "_o", [*names, *own_names], 2 * block, [STREAM]).where("_o % 2 = 0")
    h = _combine([f"_m_{c}" for c in names], q, p)
    if own:
        assert q.lateness is not None
        ob, op = (own_names or names)
        wl = f"(CASE WHEN side = 'base' THEN _m_{ob} ELSE _m_{op} END - {q.lateness + p.lateness_shift})"
    else:
        wl = h
    keep = [F.col(f"`{c}`") for c in asks.columns if c not in ("_o", *names, *own_names)]
    return scanned.select(*keep, F.expr(h).alias("H"), F.expr(wl).alias("Wl"))


def _flags(tuples: Any, q: Query, p: Profile) -> Any:
    """``late``, ``probes``, ``stored`` and the edges (``edge``: state; ``dedge``: what purge compares)."""
    from pyspark.sql import functions as F

    le = "<=" if p.late_rule == "le" else "<"
    late = "false" if p.late_tuples in ("ignore", "revise") else f"coalesce(ts {le} Wl, false)"
    t = tuples.withColumn("late", F.expr(late))
    t = t.withColumn("edge", F.expr(_edge("ts", "side", q, False)))
    t = t.withColumn("dedge", F.expr(_edge("ts", "side", q, p.purge == "flink-timers")))
    probes = "NOT late" if p.late_tuples in ("report", "drop") else "true"
    stored = {"revise": "true", "ignore": "coalesce(H < edge, true)"}.get(p.late_tuples, "NOT late")
    return t.withColumn("probes", F.expr(probes)).withColumn("stored", F.expr(stored))


_LAST = {f"_l{w}{s}": (side, "pos" if w == "p" else "Wl") for w in ("p", "w") for s, side in (("b", "base"),
                                                                                               ("p", "probe"))}


def _last_ontime(tuples: Any, block: int) -> Any:
    """Per tuple, the last on-time tuple of each input before it: its position (``_m__lp{b,p}``) and its
    ``Wl`` (``_m__lw{b,p}``); lazy-own's forgetting reads them."""
    from pyspark.sql import functions as F

    c = {k: F.when((F.col("side") == side) & ~F.col("late"), F.col(col)) for k, (side, col) in _LAST.items()}
    scanned = prefix_max(tuples.select("*", *[v.alias(k) for k, v in c.items()]), "pos", list(c), block, [STREAM])
    return scanned.drop(*c)


def _stream_end(frame: Any, tuples: Any, q: Query, p: Profile) -> Any:
    """One row per stream with what its base rows need: ``has_end`` (it has an end event), ``H_end``, the W of
    its last eviction, :math:`h(m - lag)` over its m events before the end, and under lazy-own the last on-time
    tuple of each input (``_e_lp{b,p}``, ``_e_lw{b,p}``)."""
    from pyspark.sql import functions as F

    hist = _hist_contributions(q)
    n = frame.groupBy(STREAM).agg(F.count(F.lit(1)).alias("_n"),
                                  F.min(F.when(F.col("type") == "end", F.col("pos"))).alias("_e"))
    m = F.coalesce(F.col("_e"), F.col("_n"))
    cut = frame.join(F.broadcast(n), STREAM).where(F.col("pos") < m - p.lag)
    mx = cut.groupBy(STREAM).agg(*[F.max(F.expr(sql)).alias(f"_x{c}") for c, sql in hist])
    out = n.join(mx, STREAM, "left").select(
        STREAM, F.col("_e").isNotNull().alias("has_end"),
        F.expr(_combine([f"_x{c}" for c, _ in hist], q, p)).alias("H_end"))
    if p.purge == "lazy-own":
        last = tuples.groupBy(STREAM).agg(*[F.max(F.when((F.col("side") == side) & ~F.col("late"), F.col(col)))
                                            .alias(f"_e{k}") for k, (side, col) in _LAST.items()])
        out = out.join(last, STREAM, "left")
    return out


def spark_profile_oracle(spark: Any, q: Query, frame: Any, p: Profile = CANONICAL,
                         opts: SparkOracleOptions | None = None, n_tuples: int = 0) -> SparkResult:
    """The result of the event frame under profile ``p``, as lazy frames: equals
    :func:`oij.spec.profiles.compute_profile_result` (collected in canonical order).

    ``n_tuples``: about how many tuples the frame holds, for the salting statistics' sample
    (:func:`oij.spark.oracle.join_pairs`; 0: unknown, every tuple is counted).

    Requires: the frame valid for ``q`` (:func:`oij.spark.frames.validate_events`), positions 0..n-1 (per
    :data:`STREAM` if the frame has that column).
    Cost: three prefix scans over the events (four under lazy-own), a per-stream aggregation, a scan of the
    input's tuples (or of a sample) for the salting statistics, and one range join of the tuples that take part
    (all of them under ignore/join/revise, the on-time ones otherwise).  Nothing is
    collected on the driver.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    opts = opts or SparkOracleOptions()
    if STREAM not in frame.columns:
        frame = frame.withColumn(STREAM, F.lit(0))
    tuples = _flags(_arrival(frame, q, p, opts.block), q, p)
    lazy = p.purge == "lazy-own" and p.late_tuples != "revise"
    if lazy:
        tuples = _last_ontime(tuples, opts.block)
    cached = tuples = tuples.persist(StorageLevel.MEMORY_AND_DISK)
    tuples = tuples.join(F.broadcast(_stream_end(frame, tuples, q, p)), STREAM)
    if lazy:  # forgotten by the end: the last on-time tuple of its input came after it, and at or above its ts
        gone = ("CASE WHEN side = 'base' THEN coalesce(_e_lpb > pos AND ts <= _e_lwb, false) "
                "ELSE coalesce(_e_lpp > pos AND ts <= _e_lwp, false) END")
    elif p.late_tuples == "revise":
        gone = "false"
    else:
        gone = _dropped("H_end", "dedge", p)
    tuples = tuples.withColumn("gone", F.expr(f"stored AND {gone}"))
    flush = "has_end" if p.end_flush else "false"
    tuples = tuples.withColumn("final", F.expr(f"probes AND (NOT stored OR gone OR {flush})"))

    def side(name: str, prefix: str, extra: list[Any]) -> Any:
        cols = ["pos", "H", "stored", "probes", "final", "gone", "dedge"] + (
            ["_m__lpb", "_m__lwb", "_m__lpp", "_m__lwp"] if lazy else [])
        return tuples.where(F.col("side") == name).select(
            F.col("id").alias(f"{prefix}_id"), F.col("ts").alias(f"{prefix}_ts"), "key", *extra,
            *[F.col(c).alias(f"{prefix}_{c.lstrip('_')}") for c in cols], *_cond_columns(q, name))

    plan: dict[str, Any] = {"profile": p.name}
    # the salting statistics from the input's tuples, not from the tuples that take part: a superset, whose group
    # sizes decide only the balance (never the result), counted in one scan of the input instead of a job that
    # runs the prefix scans above once more before the join
    every = frame.where("type = 'tuple'").select("side", "ts", "key")
    no_late = tuples.where("false").select("id")
    if p.retract_on_purge:  # the batch join of the tuples held at the end
        bases = side("base", "a", []).where("a_stored AND NOT a_gone")
        probes = side("probe", "b", [F.col("value").alias("b_value")]).where("b_stored AND NOT b_gone")
        joined = join_pairs(spark, bases, probes, q, opts, plan, tuples=n_tuples, both=every)
        if q.aggregate is None:
            return SparkResult(q, pair_rows(bases, joined, q), None, no_late, plan, [cached])
        return SparkResult(q, None, aggregate_rows(bases, joined, q), no_late, plan, [cached])
    late = tuples.where("late").select("id") if p.late_tuples == "report" else no_late
    bases = side("base", "a", []).where("a_probes OR a_stored")  # the tuples that take part
    probes = side("probe", "b", [F.col("value").alias("b_value")]).where("b_probes OR b_stored")
    keep = ["a_pos", "b_pos", "a_probes", "b_probes", "a_stored", "b_stored", "a_H", "b_H", "a_dedge", "b_dedge",
            "a_ts", "b_ts"] + (["a_m__lpp", "a_m__lwp", "b_m__lpb", "b_m__lwb"] if lazy else [])
    joined = join_pairs(spark, bases, probes, q, opts, plan, keep, tuples=n_tuples, both=every)
    if p.late_tuples == "revise":
        held_b = held_a = "true"
    elif lazy:  # y is held at x unless an on-time tuple of y's input after y, before x, forgot it
        held_b = "NOT coalesce(a_m__lpp > b_pos AND b_ts <= a_m__lwp, false)"
        held_a = "NOT coalesce(b_m__lpb > a_pos AND a_ts <= b_m__lwb, false)"
    else:
        held_b = f"NOT {_dropped('a_H', 'b_dedge', p)}"
        held_a = f"NOT {_dropped('b_H', 'a_dedge', p)}"
    kept = joined.where(f"(a_pos > b_pos AND a_probes AND b_stored AND {held_b}) OR "
                        f"(b_pos > a_pos AND b_probes AND a_stored AND {held_a})")
    with_row = bases.where("a_final")
    if q.aggregate is None:
        pairs = kept.select(F.col("a_id").alias("base"), F.col("b_id").alias("probe"))
        if q.join == "left":
            pairs = pairs.unionByName(pair_rows(with_row, kept, q).where("probe IS NULL"))
        return SparkResult(q, pairs, None, late, plan, [cached])
    return SparkResult(q, None, aggregate_rows(with_row, kept, q), late, plan, [cached])
