r"""The Spark oracle: the streaming semantics of :mod:`oij.spec` on DataFrames.

Input: an event frame (:mod:`oij.spark.frames`) and a query.  Output: the
result of :func:`oij.spec.stream.compute_stream_result` -- the batch join of
the non-late tuples plus the late ids -- as DataFrames.

**Watermark at arrival.**  The effective watermark in force at the arrival of
the event at position p is

* watermark mode: :math:`W_p = \min_c m_c(p)` with :math:`m_c(p)` the maximum
  watermark of channel c at positions < p (:math:`-\infty`, here null, if none);
* lateness mode: :math:`W_p = \max\{ts \text{ of tuples at positions} < p\} - l`.
  (The spec takes the max over *non-late* tuples only; a late tuple has
  :math:`ts < W \le \max` so including it changes nothing.)

Both are exclusive running maxima over the arrival order.  A file scan's
partitions are runs of consecutive positions (its row groups, in order), so
:func:`scan_events` (the oracle's) needs no shuffle and reads the events once:
one pass runs through each partition with numpy's running maximum over Arrow
batches from the partition's own start, validating on the way, and marks late
what the partition's prefix already makes late; the driver computes the maxima
before each run from one summary row per partition, and judges the few tuples
that only those maxima can make late (each partition keeps its candidates).
:func:`mark_late` gives every tuple its W (for replay cases) in two scans.  Where partitions
are not runs (several files packed into one), :func:`mark_late_windows`
computes the same with window functions as a two-level prefix scan over blocks
of ``block`` positions.  A tuple is late iff :math:`ts < W_p`.

**The shuffles the algorithm needs, and why** (``oij check``'s report counts
each step's shuffled bytes from Spark's task metrics):

* validating a file: the per-row rules are part of the one pass; each id used
  once is a property of the whole stream, decided
  from each partition's smallest and largest ids when ranges overlap only at
  their edges (:func:`ids_verdict`: ids numbered near arrival order), else by
  one shuffle of the ids alone;
* late marking: none (above);
* the range join: one shuffle of each side by (key, bucket): equal keys must
  meet, and the bucket bounds each meeting to a window's length;
* a left join's unmatched bases, or the aggregates: one more, of the pairs by
  base (a base's rows may come from every partition of the join);
* Alg. 1's group sizes: an aggregation of a sample of both sides (a few
  thousand rows shuffled), not of every row.

Nothing else: the late positions are cached (few: broadcast to the scans of
the late ids, the bases and the probes, each a columnar read of the input),
and no frame larger than the plan's statistics and one summary row per
partition reaches the driver.

**Range join without per-key cartesian products.**  With the closed window
:math:`[a.ts + \ell', a.ts + u']` of length :math:`L = u' - \ell' + 1`, time is
cut into buckets of width :math:`w = L`; a probe lies in bucket
:math:`\lfloor b.ts / w \rfloor` and a base's window covers at most two
buckets, :math:`\lfloor (a.ts+\ell')/w \rfloor .. \lfloor (a.ts+u')/w \rfloor`.
Each base row is replicated into the buckets its window covers and the join is
an equi-join on (key, bucket) followed by the exact range filter; since a
probe is in exactly one bucket every pair is found exactly once, and at least
half of the compared candidates are in the window on average.

**Hot groups.**  ``method="salted"`` additionally splits the base side of the
heaviest (key, bucket) groups into S(g) salts and replicates their probes
S(g) times, with S(g) from PPOIJ Alg. 1 (:mod:`oij.spark.salting`).
``method="plain"`` is Spark's own range join (equi-join on key + filter:
quadratic per key), kept for the benchmark.

**Aggregates.**  count/sum/min/max per base from the joined pairs, with the
empty windows of the spec (sum 0.0, avg/min/max null).  Spark adds doubles in
an unspecified order, so sum and avg agree with the exact spec to about 1e-9
relative (bit for bit when all partial sums are exact, e.g. values with few
significant bits); :mod:`oij.spark.compare` compares with that tolerance.

**Joining condition.**  ``q.cond`` is pushed into the join condition: every
comparison :math:`a.x\ op\ b.y + c` becomes a Spark SQL predicate on doubles
that is exact, with Knuth's TwoSum computed by Spark per probe,
:math:`s = y + c`, :math:`e = (y - (s - c)) + (c - (s - (s - c)))`, and
:math:`x\ op\ y + c \iff x\ op'\ s \lor (x = s \land 0\ op\ e)`
(:mod:`oij.reference.cond`).  IEEE doubles round the same in the JVM as in numpy,
so the predicate is bit-for-bit the one the oracle and the engines evaluate.

Arithmetic: ``ts + offset`` is computed in 64-bit integers when
:math:`|offset| \le 2^{61}` (no overflow: :math:`|ts| \le 2^{62}`) and in
decimals otherwise, so the result is exact for every valid input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from oij.io.parquet import FIELD_PREFIX
from oij.spark.salting import SPARK_THETA, split_degrees
from oij.spec.batch import Results
from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import Event, Query

Method = Literal["plain", "bucketed", "salted"]
METHODS: tuple[Method, ...] = ("plain", "bucketed", "salted")

SALT_FROM = 4096
"""The fewest tuples for which the salted join computes Alg. 1's statistics.  Below, the join is the bucketed one:
the statistics cost two Spark jobs (0.34 of the 0.58 CPU-seconds of the JVM that a warm oracle call on 30 events
takes), and they decide only how the work is balanced among replicas, never the result; with fewer than this many
tuples the whole join is one small task whatever its balance."""

_SAFE = 1 << 61
_MAX_WIDTH = 1 << 62

RESULT_COLUMNS = ("kind", "base", "probe", "count", "value", "id")
"""Columns of a result frame: kind in {pair, aggregate, late}; a late row has only ``id``."""


@dataclass(frozen=True)
class SparkOracleOptions:
    """How the Spark oracle joins.

    ``method``: plain | bucketed | salted.  ``replicas``: the N of Alg. 1
    (default: twice Spark's default parallelism); ``theta``: its balance
    threshold; ``max_split``: the largest S(g) (default N); ``heavy_groups``:
    how many of the heaviest groups Alg. 1 places individually (default 16 N).
    ``block``: rows per block of the watermark prefix scan's fallback.  ``width``: bucket
    width override (default the window length).  ``sample``: about how many tuples Alg. 1's group sizes
    are estimated from (a Bernoulli sample; all of them when there are fewer).  ``salt_from``: the salted join
    below this many tuples (when their number is known) is the bucketed one (:data:`SALT_FROM`).
    """

    method: Method = "salted"
    replicas: int | None = None
    theta: float = SPARK_THETA
    max_split: int | None = None
    heavy_groups: int | None = None
    block: int = 1 << 20
    width: int | None = None
    sample: int = 1 << 20
    salt_from: int = SALT_FROM


@dataclass
class SparkResult:
    """The oracle's output as lazy DataFrames, plus what the planner decided (``plan``)."""

    query: Query
    pairs: Any | None
    aggregates: Any | None
    late: Any
    plan: dict[str, Any] = field(default_factory=dict)
    cached: list[Any] = field(default_factory=list)

    def frame(self) -> Any:
        """All results in one frame with :data:`RESULT_COLUMNS` (the layout ``oij check`` stores)."""
        from pyspark.sql import functions as F

        null_l = F.lit(None).cast("long")
        null_d = F.lit(None).cast("double")
        parts = []
        if self.pairs is not None:
            parts.append(
                self.pairs.select(
                    F.lit("pair").alias("kind"), "base", "probe", null_l.alias("count"), null_d.alias("value"),
                    null_l.alias("id"),
                )
            )
        if self.aggregates is not None:
            parts.append(
                self.aggregates.select(
                    F.lit("aggregate").alias("kind"), "base", null_l.alias("probe"), "count", "value",
                    null_l.alias("id"),
                )
            )
        parts.append(
            self.late.select(
                F.lit("late").alias("kind"), null_l.alias("base"), null_l.alias("probe"), null_l.alias("count"),
                null_d.alias("value"), "id",
            )
        )
        out = parts[0]
        for p in parts[1:]:
            out = out.unionByName(p)
        return out

    def collect(self) -> Results:
        """The results in Python, canonical order (for tests and small runs)."""
        return frame_to_results(self.frame(), self.query)

    def release(self) -> None:
        """Drop the cached intermediate frames."""
        for df in self.cached:
            df.unpersist()
        self.cached.clear()


def frame_to_results(frame: Any, q: Query) -> Results:
    """Collect a result frame (:data:`RESULT_COLUMNS`) into :class:`~oij.spec.batch.Results`, canonical order."""
    res = Results()
    for r in frame.collect():
        k = r["kind"]
        if k == "pair":
            res.pairs.append((r["base"], r["probe"]))
        elif k == "aggregate":
            v = r["value"]
            value: float | int | None = None if v is None else (int(v) if q.aggregate == "count" else v + 0.0)
            res.aggregates.append((r["base"], r["count"], value))
        else:
            res.late.append(r["id"])
    return res.canonical()


def _shift(col: str, off: int) -> str:
    """SQL for ``col + off`` that cannot overflow for |col| <= 2^62."""
    if abs(off) <= _SAFE:
        return f"({col} + ({off}))"
    return f"(CAST({col} AS DECIMAL(22,0)) + ({off}))"


def _floor_div(e: str, w: int) -> str:
    """SQL for the floor of ``e / w`` (w > 0) in exact integer arithmetic."""
    return f"(CASE WHEN {e} >= 0 THEN ({e}) div {w} ELSE -((-({e}) - 1) div {w}) - 1 END)"


def prefix_max(rows: Any, order: str, cols: Sequence[str], block: int = 1 << 20, part: Sequence[str] = ()) -> Any:
    """``rows`` with a column ``_m_<c>`` per ``c`` in ``cols``: the maximum of ``c`` over the rows with a smaller
    ``order`` (null if none), an exclusive running maximum, separately per value of the ``part`` columns.

    A two-level prefix scan (see the module docstring): ``order`` values are cut into blocks of ``block``; one
    aggregation gives each block's maxima, a window over the (few) blocks the carry into each block, and a window
    partitioned by block the running maxima inside it.  ``order`` must be unique per row (per ``part``).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    part = list(part)
    f = rows.withColumn("_blk", F.expr(f"{order} div {int(block)}"))
    per_block = f.groupBy(*part, "_blk").agg(*[F.max(c).alias(f"_b_{c}") for c in cols])
    over_blocks = Window.partitionBy(*part).orderBy("_blk").rowsBetween(Window.unboundedPreceding, -1)
    carry = per_block.select(*part, "_blk", *[F.max(f"_b_{c}").over(over_blocks).alias(f"_p_{c}") for c in cols])
    in_block = Window.partitionBy(*part, "_blk").orderBy(order).rowsBetween(Window.unboundedPreceding, -1)
    g = f.select("*", *[F.max(c).over(in_block).alias(f"_i_{c}") for c in cols])
    g = g.join(F.broadcast(carry), [*part, "_blk"], "left")
    return g.select(*[F.col(f"`{c}`") for c in rows.columns],
                    *[F.greatest(F.col(f"_p_{c}"), F.col(f"_i_{c}")).alias(f"_m_{c}") for c in cols])


def _contributions(frame: Any, q: Query) -> list[Any]:
    """Per event, what it adds to each running maximum: channel c's watermark ts (watermark mode, one column
    per channel) or a tuple's ts (lateness mode, one column); null where it adds nothing."""
    from pyspark.sql import functions as F

    typ = F.col("type")
    if q.lateness is None:
        chan = F.coalesce(F.col("channel"), F.lit(0))
        return [F.when((typ == "watermark") & (chan == c), F.col("ts")) for c in range(q.channels)]
    return [F.when(typ == "tuple", F.col("ts"))]


def _watermark(ms: list[Any], q: Query) -> Any:
    """W from the exclusive running maxima ``ms`` (null = -inf): max - lateness, or the min over channels."""
    from pyspark.sql import functions as F

    if q.lateness is not None:
        return ms[0] - F.lit(q.lateness)
    if len(ms) == 1:
        return ms[0]
    any_null = ms[0].isNull()
    for m in ms[1:]:
        any_null = any_null | m.isNull()
    return F.when(any_null, F.lit(None).cast("long")).otherwise(F.least(*ms))


def _tuple_columns(g: Any) -> list[Any]:
    from pyspark.sql import functions as F

    fields = [F.col(f"`{c}`") for c in g.columns if c.startswith(FIELD_PREFIX)]
    return [F.col("pos"), F.col("side"), F.col("id"), F.col("ts"), F.col("key"), F.col("value"), *fields]


def mark_late_windows(frame: Any, q: Query, block: int = 1 << 20) -> Any:
    """:func:`mark_late` by window functions (:func:`prefix_max`): a shuffle of every row by block and a sort
    by position.  The fallback when the input's partitions are not runs of consecutive positions."""
    from pyspark.sql import functions as F

    contrib = _contributions(frame, q)
    n = len(contrib)
    f = frame.select("*", *[c.alias(f"_c{i}") for i, c in enumerate(contrib)])
    g = prefix_max(f, "pos", [f"_c{i}" for i in range(n)], block).where(F.col("type") == "tuple")
    w = _watermark([F.col(f"_m__c{i}") for i in range(n)], q)
    out = g.select(*_tuple_columns(g), w.alias("W"))
    return out.withColumn("late", F.coalesce(F.col("ts") < F.col("W"), F.lit(False)))


_NONE = -(1 << 63)
"""The running maximum of a channel with no contribution yet (-inf): below every ts (|ts| <= 2^62)."""


def _w_rows(n: int, lateness: int | None) -> Any:
    """A function ``arrive(batch, run)`` -> ``(w, none, ms)``: the watermark at each row's arrival in one Arrow
    batch of consecutive positions.  ``run`` holds the maximum of each contribution ``_c<c>`` over every earlier
    position (``_NONE``: none); ``arrive`` advances it past the batch, in place.  Per row, m_c is channel c's
    exclusive running maximum (the maximum before the row), W = m_0 - lateness or W = min_c m_c, ``none`` where
    W is -inf (``w`` then 0), ``ms`` the m_c, an array per channel.  Both scans call it; a closure, as
    :func:`_w_walk` is, so that Spark pickles it by value."""
    none_mark = _NONE

    def arrive(b: Any, run: Any) -> tuple[Any, Any, list[Any]]:
        import numpy as np

        ms = []
        for c in range(n):
            v = b.column(f"_c{c}").to_numpy()
            inc = np.maximum.accumulate(np.maximum(v, run[c]))
            exc = np.empty_like(inc)
            exc[0] = run[c]
            exc[1:] = inc[:-1]
            run[c] = inc[-1]
            ms.append(exc)
        if lateness is not None:
            none = ms[0] == none_mark
            return np.where(none, 0, ms[0] - lateness), none, ms
        low = np.minimum.reduce(ms) if n > 1 else ms[0]
        none = low == none_mark
        return np.where(none, 0, low), none, ms

    return arrive


def _w_walk(n: int, firsts: list[int], carries: list[list[int]], lateness: int | None) -> Any:
    """A function ``walk(batches)`` that yields ``(batch, w, none)`` for each non-empty Arrow batch of one
    partition: the watermark at each row's arrival (``none``: -inf, ``w`` then 0).  A partition holds consecutive
    positions ``firsts[i] ..``; ``carries[i]`` is the maximum of each contribution ``_c<c>`` over every earlier
    position (``_NONE``: none).  Shared by both scans; a closure, so that Spark pickles it by value (executors
    need only numpy, not oij)."""
    arrive = _w_rows(n, lateness)

    def walk(batches: Any) -> Any:
        import bisect

        import numpy as np

        run: Any = None
        expect = 0
        for b in batches:
            if b.num_rows == 0:
                continue
            pos = b.column("pos").to_numpy()
            if run is None:
                i = bisect.bisect_left(firsts, int(pos[0]))
                if i == len(firsts) or firsts[i] != int(pos[0]):
                    raise RuntimeError(f"oij: a partition starts at position {int(pos[0])}, which the first scan "
                                       "did not see start a partition (Spark changed the input's partitioning)")
                run = np.array(carries[i], dtype=np.int64)
                expect = int(pos[0])
            if not np.array_equal(pos, np.arange(expect, expect + len(pos), dtype=np.int64)):
                raise RuntimeError("oij: a partition's positions are not consecutive on the second scan")
            expect += len(pos)
            w, none, _ = arrive(b, run)
            yield b, w, none

    return walk


def _scan_partitions(n: int, firsts: list[int], carries: list[list[int]], lateness: int | None) -> Any:
    """The function :func:`mark_late` maps over each partition's Arrow batches (pickled by value: executors need
    only numpy and pyarrow): each tuple with its ``W`` and ``late`` (:func:`_w_walk`)."""
    walk = _w_walk(n, firsts, carries, lateness)

    def scan(batches: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        for b, w, none in walk(batches):
            ts = pc.fill_null(b.column("ts"), 0).to_numpy()
            late = ~none & (ts < w)
            keep = pc.equal(b.column("type"), "tuple")
            out = b.drop_columns(["type", *[f"_c{c}" for c in range(n)]])
            out = out.append_column("W", pa.array(w, pa.int64(), mask=none))
            out = out.append_column("late", pa.array(late, pa.bool_()))
            yield out.filter(keep)

    return scan


def mark_late(frame: Any, q: Query, block: int = 1 << 20) -> Any:
    """The tuples of ``frame`` with columns ``W`` (watermark at arrival, null = -inf) and ``late``.

    The running maxima of the module docstring without a shuffle: Spark's partitions of a Parquet scan are
    runs of consecutive positions (row groups of a file), so one aggregation per partition gives each run's
    first position, length and maxima (a few rows reach the driver), the driver turns them into the maxima
    before each run (an exclusive prefix over the runs), and a second scan runs through each partition in
    order with numpy's running maximum (``mapInArrow``: Arrow batches, no Python per row).  Each partition
    checks that it is the run the first scan saw (a file scan's partitions are planned the same way each time;
    a frame of rows from the driver is checkpointed first).  Partitions that are not runs of consecutive
    positions (several files packed into one) fall back to :func:`mark_late_windows`.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, LongType, StructField, StructType

    contrib = _contributions(frame, q)
    n = len(contrib)
    # pyspark's mapInArrow cannot name a column with a dot in it: the cond's fields pass as _f<j>
    fields = [c for c in frame.columns if c.startswith(FIELD_PREFIX)]
    f = frame.select(*[F.col(c) for c in frame.columns if c != "channel" and c not in fields],
                     *[F.col(f"`{c}`").alias(f"_f{j}") for j, c in enumerate(fields)],
                     *[F.coalesce(c, F.lit(_NONE)).alias(f"_c{i}") for i, c in enumerate(contrib)])
    if not frame.inputFiles():  # rows from the driver: pinned so that both scans see the same partitions
        f = f.localCheckpoint(eager=True)
    parts = (f.groupBy(F.spark_partition_id().alias("_p"))
             .agg(F.min("pos").alias("first"), F.max("pos").alias("last"), F.count(F.lit(1)).alias("rows"),
                  *[F.max(f"_c{i}").alias(f"m{i}") for i in range(n)])
             .collect())
    runs = sorted((int(r["first"]), int(r["last"]), int(r["rows"]), [int(r[f"m{i}"]) for i in range(n)])
                  for r in parts if r["rows"])
    if any(last - first + 1 != rows for first, last, rows, _ in runs):
        return mark_late_windows(frame, q, block)
    firsts, carries = [], []
    carry = [_NONE] * n
    for first, _, _, ms in runs:
        firsts.append(first)
        carries.append(list(carry))
        carry = [max(a, b) for a, b in zip(carry, ms, strict=True)]
    kept = [x for x in f.schema.fields if x.name not in ("type", *(f"_c{i}" for i in range(n)))]
    schema = StructType([*kept, StructField("W", LongType()), StructField("late", BooleanType(), False)])
    g = f.mapInArrow(_scan_partitions(n, firsts, carries, q.lateness), schema)
    back = [F.col(f"_f{j}").alias(c) for j, c in enumerate(fields)]
    return g.select("pos", "side", "id", "ts", "key", "value", *back, "W", "late")


_TAIL = 4096
"""How many of a partition's smallest and largest ids :func:`scan_events` brings to the driver."""


def _scan_runs(n: int, firsts: list[int], carries: list[list[int]], lateness: int | None, tail: int) -> Any:
    """The function :func:`scan_events` maps over each partition's Arrow batches (columns pos, _t, ts, id, _c<i>;
    pickled by value: executors need only numpy and pyarrow).  It yields one row per late tuple (its position)
    and then one summary row of the partition (pos null): its count of late tuples, its tuples' ids' minimum,
    maximum and number, an id it holds twice (or null) and its ``tail`` smallest and largest ids (all of them
    when it holds at most ``2 tail``)."""
    walk = _w_walk(n, firsts, carries, lateness)

    def scan(batches: Any) -> Any:
        import numpy as np
        import pyarrow as pa

        schema = pa.schema([("pos", pa.int64()), ("nlate", pa.int64()), ("lo", pa.int64()), ("hi", pa.int64()),
                            ("n", pa.int64()), ("dup", pa.int64()), ("tail", pa.list_(pa.int64()))])
        seen = False
        nlate = 0
        ids = []
        for b, w, none in walk(batches):
            seen = True
            pos = b.column("pos").to_numpy()
            t = b.column("_t").to_numpy(zero_copy_only=False)
            late = t & ~none & (b.column("ts").to_numpy() < w)
            ids.append(b.column("id").to_numpy()[t])
            k = int(np.count_nonzero(late))
            if k:
                nlate += k
                nulls = [pa.nulls(k, f.type) for f in list(schema)[1:]]
                yield pa.RecordBatch.from_arrays([pa.array(pos[late]), *nulls], schema=schema)
        if not seen:
            return
        all_ids = np.sort(np.concatenate(ids))
        twice = all_ids[1:][all_ids[1:] == all_ids[:-1]]
        m = len(all_ids)
        edge = all_ids if m <= 2 * tail else np.concatenate([all_ids[:tail], all_ids[-tail:]])
        yield pa.RecordBatch.from_pydict({
            "pos": [None], "nlate": [nlate], "lo": [int(all_ids[0]) if m else None],
            "hi": [int(all_ids[-1]) if m else None], "n": [m], "dup": [int(twice[0]) if len(twice) else None],
            "tail": [edge.tolist()]}, schema=schema)

    return scan


def _known_ids(p: Any, lo: int, hi: int, tail: int) -> set[int] | None:
    """The ids a partition's summary row ``p`` (no id twice) holds in [lo, hi], or None when its tails do not
    cover that range."""
    edge = p["tail"]
    if p["n"] <= 2 * tail:
        return {x for x in edge if lo <= x <= hi}
    small, large = edge[:tail], edge[tail:]
    if hi <= small[-1]:
        return {x for x in small if lo <= x}
    if lo >= large[0]:
        return {x for x in large if x <= hi}
    return None


def ids_verdict(parts: Sequence[Any], tail: int = _TAIL) -> bool | None:
    """From the partitions' summary rows (:func:`scan_events`): False when some id is used twice, True when
    none is, None when the summaries cannot tell (then a shuffle of the ids must).

    Each partition's ids are unique (its ``dup`` is null); two partitions can share an id only inside the
    intersection of their [lo, hi] ranges, and where that lies within the tails both brought, the driver
    compares them.  Arrival order keeps near-sorted ids (any generator that numbers tuples as it makes them)
    in runs whose ranges overlap their neighbours' only at the edges: no shuffle.  Partitions whose ranges
    overlap widely (ids in random order) make more than ``4 P`` overlapping pairs or ranges past the tails:
    None after at most that much work.
    """
    rows = [p for p in parts if p["n"]]
    if any(p["dup"] is not None for p in rows):
        return False
    rows.sort(key=lambda p: p["lo"])
    budget = 4 * len(rows)
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if b["lo"] > a["hi"]:
                break
            budget -= 1
            if budget < 0:
                return None
            lo, hi = b["lo"], min(a["hi"], b["hi"])
            ka, kb = _known_ids(a, lo, hi, tail), _known_ids(b, lo, hi, tail)
            if ka is None or kb is None:
                return None
            if ka & kb:
                return False
    return True


@dataclass(frozen=True)
class EventScan:
    """What :func:`scan_events` learned of an event frame: its events and tuples, the late tuples' positions (a
    frame of ``pos``, cached; None when no tuple is late) with their number, and, when asked for, a Bernoulli
    sample of the on-time tuples (a frame of side, ts, key) of fraction ``fraction`` for the salting statistics.
    ``cached``: the frames to unpersist when the oracle's result is no longer needed."""

    events: int
    tuples: int
    late: Any | None
    late_count: int
    sample: Any | None = None
    fraction: float = 0.0
    cached: tuple[Any, ...] = ()


_BROADCAST_LATE = 1 << 22
"""Up to this many late positions are broadcast to every task; more are joined by a shuffle."""

LATE_CANDIDATES = 4096
"""How many of a partition's tuples that are on time by the partition's own prefix (those of smallest ts) the
one pass keeps for the driver to judge with the carry from earlier partitions (:func:`scan_events`)."""

_MASK_BITS = 62
"""Rules per bit mask column of the one pass (a long each)."""

_SUMMARY, _LATE, _CANDIDATE, _SAMPLED = 0, 1, 2, 3
"""The kinds of rows the one pass yields."""


def _pass_schema(key_type: Any) -> Any:
    """The Spark schema of the rows :func:`_one_pass` yields (one layout for its four kinds of row)."""
    from pyspark.sql.types import ArrayType, BooleanType, IntegerType, LongType, StructField, StructType

    longs = ArrayType(LongType())
    cols: list[tuple[str, Any]] = [
        ("kind", IntegerType()), ("pos", LongType()), ("ts", LongType()), ("base", BooleanType()), ("key", key_type),
        ("ms", longs), ("first", LongType()), ("last", LongType()), ("rows", LongType()), ("tuples", LongType()),
        ("runs", BooleanType()), ("nlate", LongType()), ("lo", LongType()), ("hi", LongType()), ("n", LongType()),
        ("dup", LongType()), ("tail", longs), ("rules", longs), ("end", LongType()), ("ncand", LongType()),
        ("kth", LongType()),
    ]
    return StructType([StructField(name, t) for name, t in cols])


def _one_pass(n: int, lateness: int | None, rules: int, frac: float, tail: int, keep: int) -> Any:
    """The function :func:`scan_events` maps over each partition's Arrow batches (columns pos, _t, _e, ts, id,
    _base, key, _r<j>, _c<c>; pickled by value: executors need only numpy and pyarrow).

    In one run through the partition, in order: the first position breaking each of ``rules`` rules (bit i of
    the masks ``_r<j>``) and of the end row, whether the positions are consecutive, the running maximum of each
    contribution from the partition's own start (the carry from earlier partitions is not known yet) and with
    it each tuple's local W.  It yields a row per tuple late by that local W (late whatever the carry: W only
    grows with it), the ``keep`` tuples of smallest ts among the others with their local prefix maxima
    (candidates: only those the carry can make late), a Bernoulli sample of fraction ``frac`` of the others
    (seeded by the partition's first position), and one summary row: positions, rows, tuples, the maxima of
    each contribution, the ids' summary of :func:`ids_verdict`, the rules' first rows and the candidates'
    count and largest ts kept."""
    none_mark = _NONE
    arrive = _w_rows(n, lateness)

    def scan(batches: Any) -> Any:
        import numpy as np
        import pyarrow as pa

        schema: Any = None
        first: int | None = None
        expect = last = 0
        runs = True
        rows = tuples = nlate = ncand = 0
        run = np.full(n, none_mark, dtype=np.int64)
        firsts: list[int | None] = [None] * rules
        end: int | None = None
        ids: list[Any] = []
        kept: list[tuple[Any, Any, Any]] = []
        size = 0
        rng: Any = None

        def rows_of(kind: int, k: int, cols: dict[str, Any]) -> Any:
            arrays = [pa.array(np.full(k, kind, dtype=np.int32)),
                      *[cols[f.name] if f.name in cols else pa.nulls(k, f.type) for f in list(schema)[1:]]]
            return pa.RecordBatch.from_arrays(arrays, schema=schema)

        def smallest(parts: list[tuple[Any, Any, Any]]) -> tuple[Any, Any, Any]:
            pos = np.concatenate([p for p, _, _ in parts])
            ts = np.concatenate([t for _, t, _ in parts])
            ms = np.concatenate([m for _, _, m in parts])
            if len(ts) > keep:
                i = np.argpartition(ts, keep - 1)[:keep]
                pos, ts, ms = pos[i], ts[i], ms[i]
            return pos, ts, ms

        for b in batches:
            m = b.num_rows
            if m == 0:
                continue
            pos = b.column("pos").to_numpy()
            if schema is None:
                longs = pa.list_(pa.int64())
                schema = pa.schema([
                    ("kind", pa.int32()), ("pos", pa.int64()), ("ts", pa.int64()), ("base", pa.bool_()),
                    ("key", b.schema.field("key").type), ("ms", longs), ("first", pa.int64()), ("last", pa.int64()),
                    ("rows", pa.int64()), ("tuples", pa.int64()), ("runs", pa.bool_()), ("nlate", pa.int64()),
                    ("lo", pa.int64()), ("hi", pa.int64()), ("n", pa.int64()), ("dup", pa.int64()),
                    ("tail", longs), ("rules", longs), ("end", pa.int64()), ("ncand", pa.int64()),
                    ("kth", pa.int64())])
            if first is None:
                first = expect = int(pos[0])
                rng = np.random.default_rng(first)
            if runs and not np.array_equal(pos, np.arange(expect, expect + m, dtype=np.int64)):
                runs = False
            expect += m
            last = max(last, int(pos.max()))
            rows += m
            for j in range(-(-rules // _MASK_BITS)):
                mask = b.column(f"_r{j}").to_numpy()
                if not mask.any():
                    continue
                for i in range(j * _MASK_BITS, min(rules, (j + 1) * _MASK_BITS)):
                    hit = (mask & (1 << (i - j * _MASK_BITS))) != 0
                    if hit.any():
                        at = int(pos[hit].min())
                        was = firsts[i]
                        firsts[i] = at if was is None else min(at, was)
            e = b.column("_e").to_numpy(zero_copy_only=False)
            if e.any():
                at = int(pos[e].min())
                end = at if end is None else min(at, end)
            t = b.column("_t").to_numpy(zero_copy_only=False)
            ts = b.column("ts").to_numpy()
            tuples += int(np.count_nonzero(t))
            w, none, ms = arrive(b, run)
            late = t & ~none & (ts < w)
            k = int(np.count_nonzero(late))
            if k:
                nlate += k
                yield rows_of(_LATE, k, {"pos": pa.array(pos[late])})
            ids.append(b.column("id").to_numpy()[t])
            ontime = t & ~late
            c_i = np.flatnonzero(ontime)
            if len(c_i):
                ncand += len(c_i)
                kept.append((pos[c_i], ts[c_i], np.stack([x[c_i] for x in ms], axis=1)))
                size += len(c_i)
                if size > 2 * keep:
                    kept = [smallest(kept)]
                    size = len(kept[0][0])
            if frac > 0.0:
                pick = ontime if frac >= 1.0 else ontime & (rng.random(m) < frac)
                k = int(np.count_nonzero(pick))
                if k:
                    sel = pa.array(pick)
                    yield rows_of(_SAMPLED, k, {"ts": pa.array(ts[pick]), "base": b.column("_base").filter(sel),
                                                "key": b.column("key").filter(sel)})
        if first is None:
            return
        longs = pa.list_(pa.int64())
        kth = None
        if kept:
            c_pos, c_ts, c_ms = smallest(kept)
            k = len(c_pos)
            if ncand > k:
                kth = int(c_ts.max())
            offsets = pa.array(np.arange(0, k * n + 1, n, dtype=np.int32))
            yield rows_of(_CANDIDATE, k, {"pos": pa.array(c_pos), "ts": pa.array(c_ts),
                                          "first": pa.array(np.full(k, first, dtype=np.int64)),
                                          "ms": pa.ListArray.from_arrays(offsets, pa.array(c_ms.reshape(-1)))})
        all_ids = np.sort(np.concatenate(ids))
        twice = all_ids[1:][all_ids[1:] == all_ids[:-1]]
        m = len(all_ids)
        edge = all_ids if m <= 2 * tail else np.concatenate([all_ids[:tail], all_ids[-tail:]])
        one = {
            "first": [first], "last": [last], "rows": [rows], "tuples": [tuples], "runs": [runs], "nlate": [nlate],
            "lo": [int(all_ids[0]) if m else None], "hi": [int(all_ids[-1]) if m else None], "n": [m],
            "dup": [int(twice[0]) if len(twice) else None], "tail": [edge.tolist()], "ms": [run.tolist()],
            "rules": [firsts], "end": [end], "ncand": [ncand], "kth": [kth]}
        yield rows_of(_SUMMARY, 1, {name: pa.array(v, longs if name in ("tail", "ms", "rules") else
                                                   schema.field(name).type) for name, v in one.items()})

    return scan


def _rows_of(frame: Any) -> int:
    """How many rows ``frame`` holds: from the Parquet footers of its input files (no job), else counted."""
    import urllib.parse
    import urllib.request

    import pyarrow.parquet as pq

    files = frame.inputFiles()
    if files:
        try:
            return sum(pq.ParquetFile(urllib.request.url2pathname(urllib.parse.urlparse(f).path)).metadata.num_rows
                       for f in files)
        except (OSError, ValueError):
            pass
    return int(frame.count())


def carry_late(candidates: Any, carries: dict[int, list[int]], lateness: int | None) -> list[int]:
    """The positions of the candidate rows (pos, ts, first, ms) late once the carry ``carries[first]`` (the
    maxima of every earlier partition) joins each row's local prefix maxima ``ms`` (exact integers)."""
    late = []
    for r in candidates:
        ms = [max(a, b) for a, b in zip(carries[int(r["first"])], r["ms"], strict=True)]
        if lateness is not None:
            if ms[0] != _NONE and r["ts"] < ms[0] - lateness:
                late.append(int(r["pos"]))
        elif _NONE not in ms and r["ts"] < min(ms):
            late.append(int(r["pos"]))
    return late


def scan_events(frame: Any, q: Query, path: str | None = None, sample: int | None = None) -> EventScan | None:
    """Validate (when ``path`` names the input) and mark late the events of ``frame`` in one scan, no shuffle;
    None when the frame's partitions are not runs of consecutive positions (then :func:`mark_late_windows`).
    With ``sample``, also draw about that many on-time tuples for the salting statistics (``_salt``).

    One ``mapInArrow`` over the columns the checks and W need (``_one_pass``), its rows cached: every rule
    of :func:`oij.spark.frames.event_rules` is a bit of a mask computed by the JVM on the way, and each
    partition runs its own prefix maxima and marks the tuples late by them (the carry from earlier partitions
    can only raise W).  From the partitions' summary rows the driver raises the earliest error (with the exact
    duplicate check of :func:`oij.spark.frames.validate_events`: :func:`ids_verdict`, else a shuffle of the ids),
    then computes the carry into each partition.  A tuple late by the carry but not by its partition's prefix
    has ``ts < U`` with ``U`` the carry less the lateness (lateness mode) or its largest channel (watermark
    mode: below W at the tuple's arrival, the channel of the smallest local maximum bounds it), so only the
    candidates under ``U`` are collected and judged exactly on the driver -- few: a tuple under ``U`` is
    already late in lateness mode.  A partition that kept too few candidates to be sure (more than
    ``LATE_CANDIDATES`` of its tuples under ``U``) makes the late positions come from one more scan instead
    (``_scan_runs``, the running maxima with their carries).

    Requires ``frame`` in the event-frame layout.  Cost: one scan of the input (``4 + n + masks`` columns read
    into Python as Arrow), O(P * (2 tail + candidates)) rows cached and a summary row per partition to the
    driver for P partitions.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from oij.spark.frames import _any_repeated, event_rules, first_duplicate, raise_first, row_errors

    if not frame.inputFiles():  # rows from the driver: pinned so that a later scan sees the same partitions
        frame = frame.localCheckpoint(eager=True)
    contrib = _contributions(frame, q)
    n = len(contrib)
    rules = event_rules(q) if path is not None else []
    masks = []
    for j in range(0, len(rules), _MASK_BITS):
        bits = [F.when(cond, F.lit(1 << (i - j)).cast("long")).otherwise(F.lit(0).cast("long"))
                for i, (_, _, cond) in enumerate(rules[j:j + _MASK_BITS], start=j)]
        mask = bits[0]
        for x in bits[1:]:
            mask = mask.bitwiseOR(x)
        masks.append(mask.cast("long").alias(f"_r{j // _MASK_BITS}"))
    frac = 0.0 if sample is None else min(1.0, sample / max(1, _rows_of(frame)))
    is_tuple = F.coalesce(F.col("type") == "tuple", F.lit(False))
    narrow = frame.select("pos", is_tuple.alias("_t"), F.coalesce(F.col("type") == "end", F.lit(False)).alias("_e"),
                          F.coalesce(F.col("ts"), F.lit(0)).alias("ts"),
                          F.when(is_tuple, F.coalesce(F.col("id"), F.lit(0))).otherwise(F.lit(0)).alias("id"),
                          F.coalesce(F.col("side") == "base", F.lit(False)).alias("_base"), "key", *masks,
                          *[F.coalesce(c, F.lit(_NONE)).alias(f"_c{i}") for i, c in enumerate(contrib)])
    keep = LATE_CANDIDATES
    out = narrow.mapInArrow(_one_pass(n, q.lateness, len(rules), frac, _TAIL, keep),
                            _pass_schema(frame.schema["key"].dataType))
    out = out.persist(StorageLevel.MEMORY_AND_DISK)
    kind = F.col("kind")
    parts = out.where(kind == _SUMMARY).collect()
    events = sum(int(r["rows"]) for r in parts)
    if path is not None:
        ends = [int(r["end"]) for r in parts if r["end"] is not None]
        firsts_bad = [min((r["rules"][i] for r in parts if r["rules"][i] is not None), default=None)
                      for i in range(len(rules))]
        found = row_errors(rules, firsts_bad, events, min(ends) if ends else None)
        verdict = ids_verdict(parts) if not found else None
        if verdict is None:
            verdict = not _any_repeated(frame.where(is_tuple & F.col("id").isNotNull()).select("id"))
        if not verdict:
            dup = first_duplicate(frame)
            if dup is not None:
                found.append(dup)
        if found:
            out.unpersist()
            raise_first(found, path)
    runs = sorted((int(r["first"]), r) for r in parts)
    if any(not r["runs"] or int(r["last"]) - int(r["first"]) + 1 != int(r["rows"]) for _, r in runs):
        out.unpersist()
        return None
    firsts, carries, bounds = [], [], []
    carry = [_NONE] * n
    for first, r in runs:
        firsts.append(first)
        carries.append(list(carry))
        known = [c for c in carry if c != _NONE]
        if q.lateness is not None and carry[0] != _NONE:
            bounds.append((first, carry[0] - q.lateness, r["kth"]))
        elif q.lateness is None and known:
            bounds.append((first, max(known), r["kth"]))
        carry = [max(a, int(b)) for a, b in zip(carry, r["ms"], strict=True)]
    tuples = sum(int(r["tuples"]) for r in parts)
    late_count = sum(int(r["nlate"]) for r in parts)
    cached: list[Any] = [out]
    late = out.where(kind == _LATE).select("pos")
    if any(kth is not None and kth < u for _, u, kth in bounds):  # a partition kept too few candidates
        cols = ["pos", "_t", "ts", "id", *(f"_c{i}" for i in range(n))]
        again = narrow.select(*cols).mapInArrow(_scan_runs(n, firsts, carries, q.lateness, _TAIL), _runs_schema())
        late = again.where(F.col("pos").isNotNull()).select("pos").persist(StorageLevel.MEMORY_AND_DISK)
        late_count = late.count()
        cached.append(late)
    elif bounds:
        spark = frame.sparkSession
        under = spark.createDataFrame([(f, u) for f, u, _ in bounds], "first long, _u long")
        cands = (out.where(kind == _CANDIDATE).join(F.broadcast(under), "first").where(F.col("ts") < F.col("_u"))
                 .select("pos", "ts", "first", "ms").collect())
        extra = carry_late(cands, dict(zip(firsts, carries, strict=True)), q.lateness)
        if extra:
            late = late.unionByName(spark.createDataFrame([(p,) for p in extra], "pos long"))
            late_count += len(extra)
    sampled = None
    if sample is not None:
        sampled = out.where(kind == _SAMPLED).select(
            F.when(F.col("base"), F.lit("base")).otherwise(F.lit("probe")).alias("side"), "ts", "key")
    return EventScan(events, tuples, late if late_count else None, late_count, sampled, frac, tuple(cached))


def _runs_schema() -> Any:
    from pyspark.sql.types import ArrayType, LongType, StructField, StructType

    return StructType([StructField("pos", LongType()), StructField("nlate", LongType()),
                       StructField("lo", LongType()), StructField("hi", LongType()), StructField("n", LongType()),
                       StructField("dup", LongType()), StructField("tail", ArrayType(LongType()))])


def _bucket_sides(bases: Any, probes: Any, q: Query, width: int) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    lo, hi = lower_offset(q), upper_offset(q)
    first = _floor_div(_shift("a_ts", lo), width)
    last = _floor_div(_shift("a_ts", hi), width)
    a = bases.withColumn("bucket", F.explode(F.expr(f"sequence(CAST({first} AS BIGINT), CAST({last} AS BIGINT))")))
    b = probes.withColumn("bucket", F.expr(f"CAST({_floor_div('b_ts', width)} AS BIGINT)"))
    return a, b


def _range_filter(q: Query) -> Any:
    from pyspark.sql import functions as F

    lo, hi = lower_offset(q), upper_offset(q)
    return F.expr(f"b_ts >= {_shift('a_ts', lo)} AND b_ts <= {_shift('a_ts', hi)} AND {_cond_filter(q)}")


def _group_counts(a: Any, b: Any, both: Any, q: Query | None, width: int, frac: float,
                  drawn: bool = False) -> Any:
    """Each (key, bucket) group's count of bases ``na`` and of probes ``nb`` in a Bernoulli sample of
    fraction ``frac``: of ``both`` (columns side, ts, key: every tuple of both sides, or with ``drawn`` the
    sample itself) in one scan when given, else of each bucketed side ``a`` and ``b`` on its own (two scans)."""
    from pyspark.sql import functions as F

    if both is None or q is None:
        sa, sb = (a, b) if frac >= 1.0 else (a.sample(fraction=frac, seed=1), b.sample(fraction=frac, seed=2))
        ga = sa.groupBy("key", "bucket").agg(F.count(F.lit(1)).alias("na"))
        gb = sb.groupBy("key", "bucket").agg(F.count(F.lit(1)).alias("nb"))
        return ga.join(gb, ["key", "bucket"])
    s = both if frac >= 1.0 or drawn else both.sample(fraction=frac, seed=1)
    lo, hi = lower_offset(q), upper_offset(q)
    is_base = F.col("side") == "base"
    window = F.expr(f"sequence(CAST({_floor_div(_shift('ts', lo), width)} AS BIGINT), "
                    f"CAST({_floor_div(_shift('ts', hi), width)} AS BIGINT))")
    own = F.array(F.expr(f"CAST({_floor_div('ts', width)} AS BIGINT)"))
    rows = s.select("key", is_base.alias("_base"), F.explode(F.when(is_base, window).otherwise(own)).alias("bucket"))
    g = rows.groupBy("key", "bucket").agg(F.sum(F.col("_base").cast("long")).alias("na"),
                                          F.sum((~F.col("_base")).cast("long")).alias("nb"))
    return g.where((F.col("na") > 0) & (F.col("nb") > 0))


def _salt(spark: Any, a: Any, b: Any, opts: SparkOracleOptions, plan: dict[str, Any],
          tuples: int, both: Any = None, q: Query | None = None, width: int = 0,
          drawn: float | None = None) -> tuple[Any, Any, list[str]]:
    """Add a ``salt`` column: hot (key, bucket) groups split per PPOIJ Alg. 1.  Returns the sides and join keys.

    The group sizes come from a Bernoulli sample of about ``opts.sample`` of the ``tuples`` (each side's count
    scaled by the inverse fraction; :func:`_group_counts`): which groups are split decides only the balance,
    never the result, and a group heavy enough to matter has many rows in the sample.  The sample keeps the
    statistics from costing a shuffle of every row.  ``drawn``: ``both`` is already such a sample, of that
    fraction (:func:`scan_events` draws it in its pass).  One job lists the ``m`` heaviest groups (and one more);
    only when there are more than ``m`` does a second job sum the weight of the rest (with fewer, Alg. 1 sees
    every group itself and the rest weighs 0).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    n = opts.replicas or max(2, 2 * int(spark.sparkContext.defaultParallelism))
    m = opts.heavy_groups or 16 * n
    frac = min(1.0, opts.sample / max(1, tuples)) if drawn is None else drawn
    scale = 1.0 / (frac * frac)
    g = _group_counts(a, b, both, q, width, frac, drawn is not None).select(
        "key", "bucket", (F.col("na") * F.col("nb") * F.lit(scale)).cast("double").alias("w"))
    g = g.persist()
    try:
        top = g.orderBy(F.desc("w"), "key", "bucket").limit(m + 1).collect()
        if len(top) <= m:  # every group is in hand: nothing else weighs, and no second job is needed
            rest = 0.0
        else:
            top = top[:m]
            rest = max(0.0, float(g.agg(F.sum("w")).collect()[0][0] or 0.0) - sum(float(r["w"]) for r in top))
    finally:
        g.unpersist()
    plan["sampled_fraction"] = round(frac, 6)
    heavy = [float(r["w"]) for r in top]
    total = sum(heavy) + rest
    splits, balance = split_degrees(heavy, rest, n, opts.theta, opts.max_split)
    hot = [(r["key"], int(r["bucket"]), s) for r, s in zip(top, splits, strict=True) if s > 1]
    plan.update(
        replicas=n,
        theta=opts.theta,
        salted_groups=len(hot),
        max_salt=max((s for *_, s in hot), default=1),
        probe_copies=sum(s - 1 for *_, s in hot),
        load_balance_factor=balance,
        work_share_of_heaviest=(heavy[0] / total) if heavy and total else 0.0,
    )
    if not hot:
        return a.withColumn("salt", F.lit(0)), b.withColumn("salt", F.lit(0)), ["key", "bucket", "salt"]
    schema = StructType(
        [
            StructField("key", a.schema["key"].dataType),
            StructField("bucket", LongType()),
            StructField("s", IntegerType()),
        ]
    )
    hot_df = F.broadcast(spark.createDataFrame(hot, schema))
    a2 = a.join(hot_df, ["key", "bucket"], "left").withColumn(
        "salt", F.when(F.col("s").isNull(), F.lit(0)).otherwise(F.pmod(F.xxhash64("a_id"), F.col("s")).cast("int"))
    )
    b2 = b.join(hot_df, ["key", "bucket"], "left").withColumn(
        "salt", F.explode(F.sequence(F.lit(0), F.coalesce(F.col("s"), F.lit(1)) - 1))
    )
    return a2.drop("s"), b2.drop("s"), ["key", "bucket", "salt"]


def _operand(name: str) -> str:
    """The SQL double of a cond operand column of the event frame."""
    return "CAST(ts AS DOUBLE)" if name == "ts" else "value" if name == "value" else f"`{FIELD_PREFIX}{name}`"


def _cond_columns(q: Query, side: str) -> list[Any]:
    """The cond operand columns of one side: ``x<i>`` for bases, TwoSum ``s<i>``/``e<i>`` for probes."""
    from pyspark.sql import functions as F

    out = []
    for i, c in enumerate(q.cond):
        if side == "base":
            out.append(F.expr(_operand(c.left)).alias(f"x{i}"))
        else:
            y, add = _operand(c.right), repr(float(c.add))
            s = f"({y} + CAST({add} AS DOUBLE))"
            yy = f"({s} - CAST({add} AS DOUBLE))"
            cc = f"({s} - {yy})"
            out.append(F.expr(s).alias(f"s{i}"))
            out.append(F.expr(f"(({y} - {yy}) + (CAST({add} AS DOUBLE) - {cc}))").alias(f"e{i}"))
    return out


def _cond_filter(q: Query) -> str:
    """The cond as a Spark SQL predicate over (x<i>, s<i>, e<i>): exact, see the module docstring."""
    terms = []
    for i, c in enumerate(q.cond):
        x, s, e = f"x{i}", f"s{i}", f"e{i}"
        op = "=" if c.op == "==" else c.op
        if c.op in ("<", "<="):
            terms.append(f"({x} < {s} OR ({x} = {s} AND 0D {op} {e}))")
        elif c.op in (">", ">="):
            terms.append(f"({x} > {s} OR ({x} = {s} AND 0D {op} {e}))")
        elif c.op == "==":
            terms.append(f"({x} = {s} AND {e} = 0D)")
        else:
            terms.append(f"({x} != {s} OR {e} != 0D)")
    return " AND ".join(terms) if terms else "true"


def join_pairs(spark: Any, bases: Any, probes: Any, q: Query, opts: SparkOracleOptions, plan: dict[str, Any],
               keep: Sequence[str] = (), tuples: int = 0, both: Any = None, drawn: float | None = None) -> Any:
    """All matching pairs as a frame (a_id, b_id, b_value and the keep columns).

    ``bases`` has columns (a_id, a_ts, key), ``probes`` (b_id, b_ts, key, b_value); ``keep`` names more columns
    of either side to carry into the pairs; ``tuples`` is how many tuples both sides hold (for the salting
    sample; 0: unknown, every row); ``both``, if given, is every tuple of both sides (columns side, ts, key),
    for the salting sample to be drawn in one scan; with ``drawn``, ``both`` is that sample already, drawn with
    that fraction.  Salted with fewer known ``tuples`` than ``opts.salt_from``: bucketed, and ``plan["salting"]``
    says so.
    """
    out = ("a_id", "b_id", "b_value", *keep)
    lo, hi = lower_offset(q), upper_offset(q)
    plan["method"] = opts.method
    if lo > hi:
        plan["empty_window"] = True
        return bases.join(probes, "key").where("false").select(*out)
    if opts.method == "plain":
        return bases.join(probes, "key").where(_range_filter(q)).select(*out)
    width = opts.width or min(hi - lo + 1, _MAX_WIDTH)
    plan["bucket_width"] = width
    a, b = _bucket_sides(bases, probes, q, width)
    keys = ["key", "bucket"]
    if opts.method == "salted" and 0 < tuples < opts.salt_from:
        plan["salting"] = f"skipped: {tuples} tuples, fewer than {opts.salt_from}"
    elif opts.method == "salted":
        a, b, keys = _salt(spark, a, b, opts, plan, tuples, both, q, width, drawn)
    # a hash table of each partition's probes instead of sorting both sides (the join needs equal keys only)
    return a.join(b.hint("shuffle_hash"), keys).where(_range_filter(q)).select(*out)


def spark_oracle(spark: Any, q: Query, frame: Any, opts: SparkOracleOptions | None = None,
                 validate: str | None = None) -> SparkResult:
    """The Spark oracle over an event frame: late ids, then pairs or per-base aggregates of the on-time tuples.

    ``validate``: the input's path, to check every row on the way (:func:`scan_events`) and raise the first
    error as :func:`oij.spark.frames.validate_events` does.  The late ids, the bases and the probes are each
    read from the input again (the late positions joined in, broadcast when few); cached are the one pass's
    rows (late positions, candidates, the salting sample, summaries) or the window scan's result (partitions
    that are not runs).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from oij.spark.frames import fit_shuffle_to

    opts = opts or SparkOracleOptions()
    if opts.method not in METHODS:
        raise ValueError(f"unknown method {opts.method!r}; one of {', '.join(METHODS)}")
    scan = scan_events(frame, q, validate, sample=opts.sample if opts.method == "salted" else None)
    plan: dict[str, Any] = {}
    cached: list[Any] = []
    if scan is None:  # partitions that are not runs (the input validated): window functions over blocks
        marked = mark_late_windows(frame, q, opts.block)
    else:
        plan["late"] = scan.late_count
        cached.extend(scan.cached)
        rows = frame.where(F.col("type") == "tuple")
        if scan.late is None:
            marked = rows.withColumn("late", F.lit(False))
        else:
            flags = scan.late.withColumn("_late", F.lit(True))
            if scan.late_count <= _BROADCAST_LATE:
                flags = F.broadcast(flags)
            marked = rows.join(flags, "pos", "left").withColumn("late", F.coalesce(F.col("_late"), F.lit(False)))
    keep = ["side", "id", "ts", "key", "value", *(c for c in frame.columns if c.startswith(FIELD_PREFIX)), "late"]
    tuples = marked.select(*[F.col(f"`{c}`") for c in keep])
    if scan is None:  # the window scan's result: computed once, cached for the late ids, the bases and the probes
        tuples = tuples.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(tuples)
        plan["tuples"] = tuples.count()
    else:  # each reads the input again (a columnar scan of a few columns costs less than building a cache)
        plan["tuples"] = scan.tuples
    plan["shuffle_partitions"] = fit_shuffle_to(spark, plan["tuples"])
    late = tuples.where("late").select("id")
    ontime = tuples.where("NOT late")
    bases = ontime.where(F.col("side") == "base").select(
        F.col("id").alias("a_id"), F.col("ts").alias("a_ts"), "key", *_cond_columns(q, "base")
    )
    probes = ontime.where(F.col("side") == "probe").select(
        F.col("id").alias("b_id"), F.col("ts").alias("b_ts"), "key", F.col("value").alias("b_value"),
        *_cond_columns(q, "probe")
    )
    sample = scan.sample if scan is not None else None
    joined = join_pairs(spark, bases, probes, q, opts, plan, tuples=plan["tuples"],
                        both=sample if sample is not None else ontime.select("side", "ts", "key"),
                        drawn=scan.fraction if scan is not None and sample is not None else None)
    if q.aggregate is None:
        return SparkResult(q, pair_rows(bases, joined, q), None, late, plan, cached)
    return SparkResult(q, None, aggregate_rows(bases, joined, q), late, plan, cached)


def pair_rows(bases: Any, joined: Any, q: Query) -> Any:
    """The pair rows (base, probe) of ``joined`` (a_id, b_id, ...), and (a, null) for every base of ``bases``
    (a_id, ...) that has none when ``q`` is a left join."""
    from pyspark.sql import functions as F

    pairs = joined.select(F.col("a_id").alias("base"), F.col("b_id").alias("probe"))
    if q.join == "left":
        unmatched = bases.join(joined.select("a_id").distinct(), "a_id", "left_anti").select(
            F.col("a_id").alias("base"), F.lit(None).cast("long").alias("probe")
        )
        pairs = pairs.unionByName(unmatched)
    return pairs


def aggregate_rows(bases: Any, joined: Any, q: Query) -> Any:
    """One row (base, count, value) per base of ``bases`` (a_id, ...): ``q.aggregate`` over the values of its
    pairs in ``joined`` (a_id, b_value, ...), with the empty windows of the spec (sum 0.0, avg/min/max null)."""
    from pyspark.sql import functions as F

    per = joined.groupBy("a_id").agg(
        F.count(F.lit(1)).alias("n"), F.sum("b_value").alias("s"), F.min("b_value").alias("lo"),
        F.max("b_value").alias("hi"),
    )
    rows = bases.select("a_id").join(per, "a_id", "left")
    n = F.coalesce(F.col("n"), F.lit(0)).cast("long")
    kind = q.aggregate
    if kind == "count":
        v = n.cast("double")
    elif kind == "sum":
        v = F.coalesce(F.col("s"), F.lit(0.0))
    elif kind == "avg":
        v = F.col("s") / F.col("n")
    elif kind == "min":
        v = F.col("lo")
    else:
        v = F.col("hi")
    v = F.when(v == 0.0, F.lit(0.0)).otherwise(v)  # -0.0 is written as 0.0
    return rows.select(F.col("a_id").alias("base"), n.alias("count"), v.alias("value"))


def run_spark_oracle(
    spark: Any, q: Query, events: Sequence[Event], opts: SparkOracleOptions | None = None
) -> Results:
    """The Spark oracle over in-memory events, collected: must equal :func:`oij.reference.oracle.run_events`."""
    from oij.spark.frames import events_frame

    res = spark_oracle(spark, q, events_frame(spark, events, q), opts)
    try:
        return res.collect()
    finally:
        res.release()
