r"""Comparing outputs by fingerprints: per bucket of base ids, a count and six exact sums of 32-bit hashes.

``oij check`` on Spark compares an output with the oracle's result.  Comparing every row costs a shuffle of
both outputs (at 10^7 tuples, the larger part of the check's time), and it almost always finds nothing.  So
both sides are first reduced to a *fingerprint*: each row is given a bucket (its base id, or a late row's
id, modulo :data:`BUCKETS`) and a canonical encoding (:func:`encoding`), and per bucket Spark sums

* the number of rows, and
* the high and low 32-bit halves of three seeded ``xxhash64`` of the encoding: six sums of 32-bit values,
  each an exact integer (a 64-bit sum cannot overflow below 2^31 rows in a bucket).

The sums are additive, so each is a partial aggregation where the rows are produced (the oracle's join, the
scan of an output's partition): only a few thousand rows per task are shuffled, never the rows.  A bucket
whose fingerprints are equal on both sides has equal multisets of encoded rows (with the probability below);
only the buckets that differ are compared row by row by ``oij.spark.compare._diff_frame``, today's
comparison, so the differences, their order, the replay cases and the report are the same as without
fingerprints.  Addition, not XOR: a duplicated row adds its hash twice, a pair, a late id or a left join's
``(a, null)`` row missing once subtracts it once; no multiplicity cancels.

**Aggregate values.**  The comparison accepts a value within ``1e-9`` relative (:func:`oij.spark.compare.close`),
and Spark sums doubles in another order than the exact sum of the spec, so equal bits cannot be asked for.  The
encoding holds a *cell* of the value instead: its sign, ``e = floor(log2 |v|)`` and
``m = floor(|v| / 2^(e-31))``, used only when the cell's bounds ``lo = m s``, ``hi = (m + 1) s``
(``s = 2^(e-31)``, all computed by Spark in doubles) satisfy ``lo <= |v| < hi`` and
``hi - lo <= 5e-10 lo``, and ``2^-900 <= |v| <= 2^900``; any other value (zero, a subnormal, an infinity, NaN,
a rounding that broke the check) is encoded by its exact bits.  Two values in one cell therefore satisfy
``|x - y| < hi - lo <= 5e-10 min(|x|, |y|)`` (both tested against the same deterministic bounds), which the
tolerance accepts; so a fingerprint can never hide a value the comparison would call wrong.  Values in
neighbouring cells only cost a row-by-row look at their bucket.  With a tolerance below ``1e-9`` no cell
is used (exact bits only).  The reference (the Spark oracle) has one aggregate row per base, so equal
multisets of (base, count, cell) mean equal counts and close values base by base.

**The probability that a difference hides.**  Model each seeded hash as an independent uniform random
function.  Let two multisets of one bucket differ: some encoded row ``r0`` has multiplicity difference
``d != 0`` (``|d| < 2^31``).  For one of the six 32-bit sums to agree, ``d h(r0)`` must equal a value fixed by
the other rows: at most one of the 2^32 values of ``h(r0)``, probability ``<= 2^-32``.  The six are
independent (halves of independent uniform 64-bit values), so a bucket hides its difference with probability
``<= 2^-192``; over at most ``B = 4096 = 2^12`` buckets and ``E`` compared outputs, ``<= E 2^-180`` per run,
far below ``2^-100`` for any ``E < 2^80``.  xxhash64 is not a cryptographic hash: this bounds accidents (a
buggy engine), not an adversary who crafts outputs against Spark's public hash.

Data flow::

    result frame (oracle, lazy; or an engine's partition)
        --bucket, encoding, 3 x xxhash64 -> partial sums per bucket--> <= B rows to the driver (a dict)
    fingerprints of reference and engine --differ--> bucket set --> rows of those buckets only:
        the oracle's written to results/engine=spark-oracle/ (once, for every engine), then _diff_frame

Process state: ``_LAZY`` keeps, per results directory, the oracle frames that were fingerprinted instead of
written (:func:`register`), so that the comparison can compute their rows for the buckets that differ; with
``OIJ_KEEP_RESULTS=1`` in the environment (:func:`keep_results`) every row is written as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BUCKETS = 4096
"""Buckets of base ids (and late ids): ``pmod(id, BUCKETS)``."""

HASHES = 3
"""Seeded xxhash64 per row; each gives two 32-bit sums."""

CELL_BITS = 31
"""``m`` in ``[2^31, 2^32)``: a cell is at most ``2^-31`` (4.7e-10) of its value wide, within the ``5e-10`` of
the check."""

CELL_WIDTH = 5e-10
"""The largest relative width of a cell used: at most half the comparison's tolerance."""

MIN_TOLERANCE = 1e-9
"""Cells are used only when the comparison's relative tolerance is at least this."""




@dataclass(frozen=True)
class Remembered:
    """A result frame fingerprinted instead of written: the frame (lazy), its fingerprint, and whether that
    used value cells."""

    frame: Any
    fingerprint: dict[int, tuple[int, ...]]
    cells: bool = True


_LAZY: dict[str, dict[str, Remembered]] = {}


def keep_results() -> bool:
    """True when every row of the oracle is to be written to the results dataset (``OIJ_KEEP_RESULTS`` set to
    anything but empty or ``0``), as before fingerprints."""
    return os.environ.get("OIJ_KEEP_RESULTS", "") not in ("", "0")


def register(results_dir: str, engine: str, frame: Any, fp: dict[int, tuple[int, ...]],
             cells: bool = True) -> None:
    """Remember ``frame`` (lazy) and its fingerprint ``fp`` as ``engine``'s rows in ``results_dir``, in place of a
    written partition."""
    _LAZY.setdefault(os.path.abspath(results_dir), {})[engine] = Remembered(frame, fp, cells)


def unregister(results_dir: str, engine: str) -> None:
    """Forget a frame of :func:`register` (its partition is written, or it is replaced)."""
    _LAZY.get(os.path.abspath(results_dir), {}).pop(engine, None)


def remembered(results_dir: str) -> list[str]:
    """The engines remembered (:func:`register`) for ``results_dir``."""
    return list(_LAZY.get(os.path.abspath(results_dir), {}))


def registered(results_dir: str, engine: str) -> Remembered | None:
    """What was registered for ``engine`` in ``results_dir``, or None."""
    return _LAZY.get(os.path.abspath(results_dir), {}).get(engine)


def bucket_column() -> Any:
    """The bucket of a result row: its id for a late row, else its base, modulo :data:`BUCKETS` (nulls: 0)."""
    from pyspark.sql import functions as F

    key = F.when(F.col("kind") == "late", F.col("id")).otherwise(F.col("base"))
    return F.pmod(F.coalesce(key, F.lit(0)).cast("long"), F.lit(BUCKETS)).cast("int")


Env = dict[str, Any]
"""Column expressions by name, for the steps below."""

CELL = ("tag", "sign", "e", "m", "exact")
"""The parts of a value's cell (:func:`value_cell`), in the encoding's order."""


def _cell_steps() -> list[dict[str, Callable[[Env], Any]]]:
    """The value cell of the column ``v`` as steps: each names expressions of the names before it.  Composed
    into one expression by :func:`value_cell`; computed one projection per step by :func:`fingerprint_frame`,
    so that Spark plans and evaluates each part once (composed, ``ok`` is a tree holding ``e``, ``s``, ``m``,
    ``lo`` and ``hi``, copied into four parts and those into three hashes: about 2.8 CPU-seconds of Spark's
    planning and interpreting per fingerprint, against 0.3 without cells)."""
    from pyspark.sql import functions as F

    zero = F.lit(0).cast("long")
    return [
        # the cell is computed of 1.0 for a value outside the range (its cell is not used): a subnormal's s
        # would be 0, and ax / s an error under ANSI SQL (Spark 4's default)
        {"inside": lambda c: (c["v"].isNotNull() & ~F.isnan(c["v"]) & (F.abs(c["v"]) >= F.lit(2.0 ** -900))
                              & (F.abs(c["v"]) <= F.lit(2.0 ** 900)))},
        {"ax": lambda c: F.when(c["inside"], F.abs(c["v"])).otherwise(F.lit(1.0))},
        {"e": lambda c: F.floor(F.log2(c["ax"]))},
        {"s": lambda c: F.pow(F.lit(2.0), (c["e"] - CELL_BITS).cast("double"))},
        {"m": lambda c: F.floor(c["ax"] / c["s"])},
        {"lo": lambda c: c["m"].cast("double") * c["s"], "hi": lambda c: (c["m"] + 1).cast("double") * c["s"]},
        {"ok": lambda c: F.coalesce(c["inside"] & (c["ax"] >= c["lo"]) & (c["ax"] < c["hi"])
                                    & ((c["hi"] - c["lo"]) <= F.lit(CELL_WIDTH) * c["lo"]), F.lit(False))},
        {"tag": lambda c: F.when(c["v"].isNull(), F.lit(0)).when(c["ok"], F.lit(1)).otherwise(F.lit(2)).cast("long")},
        {"cell_tag": lambda c: c["tag"],
         "cell_sign": lambda c: F.when(c["ok"], F.signum(c["v"]).cast("long")).otherwise(zero),
         "cell_e": lambda c: F.when(c["ok"], c["e"].cast("long")).otherwise(zero),
         "cell_m": lambda c: F.when(c["ok"], c["m"].cast("long")).otherwise(zero),
         "cell_exact": lambda c: F.when(c["tag"] == 2, c["v"]).otherwise(F.lit(0.0))},
    ]


def value_cell(v: Any) -> tuple[Any, Any, Any, Any, Any]:
    """(tag, sign, e, m, exact) for the value column ``v``: tag 0 null, 1 a cell (sign, e, m: longs), 2 the
    exact double (``exact``; the other parts 0).  See the module docstring for why a cell cannot hide a
    difference the tolerance reports.  One expression (``_cell_steps`` composed)."""
    env: Env = {"v": v}
    for step in _cell_steps():
        env.update({name: f(env) for name, f in step.items()})
    tag, sign, e, m, exact = (env[f"cell_{p}"] for p in CELL)
    return tag, sign, e, m, exact


def _plain_columns() -> list[Any]:
    """The encoding's columns before the value: kind code, then each of base, probe, count, id as (value or 0,
    is-null)."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    code = (F.when(kind == "pair", 1).when(kind == "aggregate", 2).when(kind == "late", 3).otherwise(4)
            .cast("long"))
    other = F.when(code == 4, F.xxhash64(F.coalesce(kind, F.lit("\x00null")))).otherwise(F.lit(0).cast("long"))
    cols: list[Any] = [code, other]
    for c in ("base", "probe", "count", "id"):
        x = F.col(c).cast("long")
        cols += [F.coalesce(x, F.lit(0).cast("long")), x.isNull().cast("long")]
    return cols


def _exact_value(v: Any) -> list[Any]:
    """The value's part of the encoding without cells: (0 null or 2, its exact bits or 0.0)."""
    from pyspark.sql import functions as F

    return [F.when(v.isNull(), F.lit(0)).otherwise(F.lit(2)).cast("long"), F.coalesce(v, F.lit(0.0))]


def encoding(cells: bool = True) -> list[Any]:
    """The canonical encoding of a result row as non-null columns (one injective layout for every kind):
    kind code, then each of base, probe, count, id as (value or 0, is-null), then the value (its cell when
    ``cells``, else its exact bits).  One expression per column; :func:`fingerprint_frame` computes the same
    columns in steps."""
    from pyspark.sql import functions as F

    v = F.col("value").cast("double")
    return _plain_columns() + (list(value_cell(v)) if cells else _exact_value(v))


def fingerprint_frame(rows: Any, cells: bool = True) -> Any:
    """Per bucket (``bucket``): ``n`` rows and the sums ``s0`` .. ``s5`` (module docstring), one partial
    aggregation over ``rows`` (columns kind, base, probe, count, value, id).  The columns of :func:`encoding`,
    the value's cell computed one step a projection (``_cell_steps``), then the three hashes, then the
    sums: the same numbers as the composed expressions, each part planned and evaluated once."""
    from pyspark.sql import functions as F

    p = "__fp_"
    plain = [c.alias(f"{p}x{i}") for i, c in enumerate(_plain_columns())]
    frame = rows.select(bucket_column().alias("bucket"), *plain, F.col("value").cast("double").alias(f"{p}v"))
    names = [f"{p}x{i}" for i in range(len(plain))]
    env: Env = {"v": F.col(f"{p}v")}
    if cells:
        for step in _cell_steps():
            frame = frame.withColumns({f"{p}{name}": f(env) for name, f in step.items()})
            env.update({name: F.col(f"{p}{name}") for name in step})
        value = [env[f"cell_{part}"] for part in CELL]
    else:
        value = _exact_value(env["v"])
    frame = frame.select("bucket", *[F.col(n) for n in names], *[c.alias(f"{p}y{i}") for i, c in enumerate(value)])
    enc = [F.col(n) for n in names] + [F.col(f"{p}y{i}") for i in range(len(value))]
    frame = frame.select("bucket", *[F.xxhash64(F.lit(j).cast("long"), *enc).alias(f"{p}h{j}")
                                     for j in range(HASHES)])
    sums = []
    for j in range(HASHES):
        h = F.col(f"{p}h{j}")
        sums += [F.sum(F.shiftrightunsigned(h, 32)).alias(f"s{2 * j}"),
                 F.sum(h.bitwiseAND(F.lit(0xFFFFFFFF))).alias(f"s{2 * j + 1}")]
    return frame.groupBy("bucket").agg(F.count(F.lit(1)).alias("n"), *sums)


def fingerprint(rows: Any, cells: bool = True) -> dict[int, tuple[int, ...]]:
    """:func:`fingerprint_frame` collected: bucket -> (n, s0, ..., s5); buckets without rows are absent."""
    out: dict[int, tuple[int, ...]] = {}
    for r in fingerprint_frame(rows, cells).collect():
        out[int(r["bucket"])] = tuple(int(r[c] or 0) for c in ("n", *(f"s{i}" for i in range(2 * HASHES))))
    return out


def differing(a: dict[int, tuple[int, ...]], b: dict[int, tuple[int, ...]]) -> list[int]:
    """The buckets whose fingerprints differ (a bucket without rows on one side differs iff it has rows on the
    other), sorted."""
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def in_buckets(rows: Any, buckets: list[int]) -> Any:
    """The rows of ``rows`` whose bucket is one of ``buckets``."""
    from pyspark.sql import functions as F

    return rows.where(bucket_column().isin(buckets) if buckets else F.lit(False))


__all__ = [
    "BUCKETS",
    "Remembered",
    "bucket_column",
    "differing",
    "encoding",
    "fingerprint",
    "fingerprint_frame",
    "in_buckets",
    "keep_results",
    "register",
    "registered",
    "remembered",
    "unregister",
    "value_cell",
]
