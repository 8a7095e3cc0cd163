"""Another system's output read by Spark itself: the fast path of ``oij check --got`` at any size.

:func:`oij.testing._got.read_got` is the definition: it reads oij-jsonl result lines, CSV or Parquet row by row
in Python, names the first bad row (file, row, field) and writes the rows as the engine's partition of the
results dataset.  At 10^7 rows that costs minutes on the driver, so :func:`read_got_spark` first lets Spark read
the file on its executors (JSON lines with an explicit all-string schema, CSV with a header, Parquet with its
own types), converts every row to the result layout and, in the same pass, computes the rows' fingerprints
(:mod:`oij.spark.fingerprint`; or writes the partition when every row is to be kept), while an ``observe``
counts the rows it cannot vouch for.  The rows are written later only if the output differs from the
reference (:func:`oij.spark.compare.compare_frames`).  A row is vouched for only where the conversion is certainly
the one ``read_got`` makes:

* integers as plain decimal text of at most 18 digits (JSON numbers, or the text of strings and CSV cells), or
  Parquet integer columns of at most 64 signed bits;
* values as JSON-number text or Parquet floats and integers (both sides then round the same decimal text, or
  the same integer, to the nearest double);
* a kind of ``pair``, ``aggregate`` or ``late`` read as ``read_got`` reads it;
* JSON lines that are one flat object (``{`` ... ``}`` with no other brace, so nothing can trail it), with no
  replacement character (bytes that are not UTF-8) and no surrogate escape; CSV files with no quote character,
  no byte-order mark and a header without repeats; Parquet files (not partitioned directories).

Anything else -- an error, or valid input in a shape outside these rules (``3.0`` as an id, a quoted CSV
cell) -- makes the function remove what it wrote and return None, and the caller reads the file with
``read_got``, which raises the precise error or converts the rare shape.  So the fast path never accepts what
the definition rejects and never converts differently; it only declines.

JSON lines are first parsed by pyarrow on the executors, in byte ranges (:mod:`oij.spark.gotparse`, with the
rules of :func:`oij.testing._schedule.fast_got_table`), and fingerprinted in the same Python workers; only a
file one of whose ranges declines is read with ``from_json`` as below.  The executors read the file at its
absolute path (on a cluster it must be on storage they all see, as the events file must).

Data flow::

    PATH.jsonl --byte ranges: pyarrow.json, rules, numpy hashes (mapInArrow)--> fingerprints per bucket
         + the same parse as a lazy frame of rows (remembered) --(a range declines)--> the path below
    PATH --spark.read (text+from_json | csv | parquet)--> rows --convert + flag--> observe(rows, bad)
         --> fingerprints per bucket (or, kept: OUT/results/engine=NAME/, Parquet, RESULT_SCHEMA)
         then: bad == 0 ? rows (the lazy frame remembered with its fingerprints) : (rm -r, None)

Files: the partition directory ``out_dir`` (written by Spark when kept, else by the comparison when the output
differs; removed here when the fast path declines).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from oij.spark.compare import write_rows

KINDS = ("pair", "aggregate", "late")
FIELDS = ("kind", "base", "probe", "count", "value", "id")
_INT = r"^-?[0-9]{1,18}$"
_NUM = r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
_FLAT = r"^\s*\{[^{}]*\}\s*$"
_BLANK = r"^\s*$"


def _source(cols: dict[str, str], f: str) -> str:
    return cols.get(f, f)


def _int_text(c: Any) -> tuple[Any, Any]:
    """(the bigint of a text column, True where it is neither null nor plain decimal of at most 18 digits)."""
    from pyspark.sql import functions as F

    ok = c.rlike(_INT)
    return F.when(ok, c.cast("long")), c.isNotNull() & ~F.coalesce(ok, F.lit(False))


def _value_text(c: Any) -> tuple[Any, Any]:
    """(the double of a text column or null, True where it is neither null nor JSON-number text that converts
    as Python's float() does: a bare integer of more than 18 digits is declined)."""
    from pyspark.sql import functions as F

    ok = c.rlike(_NUM) & ~(c.rlike(r"^-?[0-9]+$") & (F.length(F.regexp_replace(c, "-", "")) > 18))
    return F.when(ok, c.cast("double")), c.isNotNull() & ~F.coalesce(ok, F.lit(False))


def _convert(kind: Any, fields: dict[str, tuple[Any, Any]], extra_bad: Any) -> Any:
    """The result columns (kind, base, probe, count, value, id) and ``_bad``: a row is bad when its kind is not
    one of :data:`KINDS`, or a field its kind needs is missing or not vouched for."""
    from pyspark.sql import functions as F

    base, base_bad = fields["base"]
    probe, probe_bad = fields["probe"]
    count, count_bad = fields["count"]
    value, value_bad = fields["value"]
    id_, id_bad = fields["id"]
    is_pair, is_agg, is_late = (F.coalesce(kind == k, F.lit(False)) for k in KINDS)
    bad = (
        ~(is_pair | is_agg | is_late)
        | (is_pair & (base_bad | base.isNull() | probe_bad))
        | (is_agg & (base_bad | base.isNull() | count_bad | count.isNull() | (count < 0) | value_bad))
        | (is_late & (id_bad | id_.isNull()))
        | extra_bad
    )
    null_l, null_d = F.lit(None).cast("long"), F.lit(None).cast("double")
    return [
        kind.alias("kind"),
        F.when(is_pair | is_agg, base).otherwise(null_l).alias("base"),
        F.when(is_pair, probe).otherwise(null_l).alias("probe"),
        F.when(is_agg, count).otherwise(null_l).alias("count"),
        F.when(is_agg, value).otherwise(null_d).alias("value"),
        F.when(is_late, id_).otherwise(null_l).alias("id"),
        F.coalesce(bad, F.lit(True)).alias("_bad"),
    ]


def _jsonl(spark: Any, path: str, cols: dict[str, str]) -> Any | None:
    """JSON lines in one scan of the text: each line's shape rules, then Spark's JSON parser (``from_json``)
    with typed integer columns (a float, a string or an integer past 64 bits there is a corrupt record:
    declined) and the value as text (its rule above).  Whether a line names the kind column is a property of
    the file for ``read_got`` (it then reads every row's kind from it): a row that names it takes it, one that
    does not takes ``type``, and the column ``_names_kind`` lets :func:`read_got_spark` decline a file whose
    lines disagree (``read_got`` would find a row without its kind)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    kind_src = _source(cols, "kind")
    types: dict[str, Any] = {}
    for f in FIELDS:
        t = StringType() if f in ("kind", "value") else LongType()
        if types.setdefault(_source(cols, f), t) != t:
            return None  # one column read as two fields of different types: only read_got says what that means
    if "type" not in cols.values():
        types.setdefault("type", StringType())
    line = F.col("value")
    shape = (~line.rlike(_FLAT) | line.contains("\ufffd") | line.rlike(r"\\[uU][dD][89a-fA-F]"))
    text = spark.read.text(os.path.abspath(path), lineSep="\n").where(~line.rlike(_BLANK))
    schema = StructType([StructField(n, t) for n, t in types.items()] + [StructField("_corrupt", StringType())])
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt", "allowSingleQuotes": "false",
            "allowNonNumericNumbers": "false", "allowNumericLeadingZeros": "false"}
    names_kind = line.contains(f'"{kind_src}"')
    df = text.select(F.from_json(line, schema, opts).alias("_j"), shape.alias("_shape"),
                     names_kind.alias("_names_kind"))
    col = {n: F.col(f"_j.`{n}`") for n in types}
    other = col["type"] if "type" in types and "type" not in cols.values() else F.lit(None).cast("string")
    # a line naming the kind column takes it (null: inferred, which Spark declines)
    kind = F.when(F.col("_names_kind"), col[kind_src]).otherwise(other)

    def typed(f: str) -> tuple[Any, Any]:
        c = col[_source(cols, f)]
        return _value_text(c) if f == "value" else (c, F.lit(False))

    fields = {f: typed(f) for f in ("base", "probe", "count", "value", "id")}
    bad = F.col("_j._corrupt").isNotNull() | F.col("_shape")
    return df.select(*_convert(kind, fields, bad), "_names_kind")


def _inferred_kind(present: set[str], cols: dict[str, str]) -> str | None:
    """read_got's kind for a row without one, from the fields its file has (CSV, Parquet: the columns)."""
    for kind, f in (("pair", "probe"), ("aggregate", "count"), ("late", "id")):
        if _source(cols, f) in present:
            return kind
    return None


def _kind_of_columns(present: set[str], cols: dict[str, str], cell: Any = None) -> Any:
    """read_got's kind where presence is per column (CSV, Parquet): the kind column if there is one, else
    ``type`` (unless another field is read from it), and where that is null the kind inferred from the columns.
    ``cell(name)`` reads a column (default: as a string)."""
    from pyspark.sql import functions as F

    def as_string(name: str) -> Any:
        return F.col(f"`{name}`").cast("string")

    read = cell or as_string
    kind_src = _source(cols, "kind")
    if kind_src in present:
        kind = read(kind_src)
    elif "type" in present and "type" not in cols.values():
        kind = read("type")
    else:
        kind = F.lit(None).cast("string")
    return F.coalesce(kind, F.lit(_inferred_kind(present, cols)))


def _csv(spark: Any, path: str, cols: dict[str, str]) -> Any | None:
    from pyspark.sql import functions as F

    with open(path, "rb") as f:
        head = f.readline()
    if head.startswith(b"\xef\xbb\xbf") or b'"' in head:
        return None
    header = head.decode("utf-8", "replace").rstrip("\r\n").split(",")
    if len(set(header)) != len(header) or any(not h for h in header):
        return None
    text = spark.read.text(os.path.abspath(path), lineSep="\n")
    # a quote anywhere, or a line of spaces only, is read differently by Python's csv module: decline
    guard = text.where(F.col("value").contains('"') | (F.col("value").rlike(_BLANK) & (F.length("value") > 0))
                       ).limit(1).collect()
    if guard:
        return None
    df = (spark.read.option("header", "true").option("inferSchema", "false").option("mode", "PERMISSIVE")
          .option("enforceSchema", "false").option("escape", '"').option("multiLine", "false")
          .csv(os.path.abspath(path)))
    if list(df.columns) != header:
        return None
    present = set(header)

    def cell(name: str) -> Any:
        if name not in present:
            return F.lit(None).cast("string")
        c = F.col(f"`{name}`")
        return F.when(c.isin("null", "NULL") | (c == ""), F.lit(None).cast("string")).otherwise(c)

    kind = _kind_of_columns(present, cols, cell)
    fields = {f: (_value_text if f == "value" else _int_text)(cell(_source(cols, f)))
              for f in ("base", "probe", "count", "value", "id")}
    return df.select(*_convert(kind, fields, F.lit(False)))


def _parquet(spark: Any, path: str, cols: dict[str, str]) -> Any | None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    if os.path.isdir(path):
        return None
    try:
        sch = pq.read_schema(path)
    except (OSError, pa.ArrowInvalid):
        return None
    ints = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32())
    present = set(sch.names)
    if len(present) != len(sch.names):
        return None
    df = spark.read.parquet(os.path.abspath(path))

    def num(f: str) -> tuple[Any, Any]:
        name = _source(cols, f)
        if name not in present:
            return F.lit(None).cast("long"), F.lit(False)
        t = sch.field(name).type
        c = F.col(f"`{name}`")
        if f == "value" and (t in ints or t in (pa.float32(), pa.float64())):
            return c.cast("double"), F.lit(False)
        if f != "value" and t in ints:
            return c.cast("long"), F.lit(False)
        return F.lit(None).cast("long"), c.isNotNull()  # another type: only read_got knows what it makes of it

    kind_src = _source(cols, "kind")
    for k in (kind_src, "type"):
        if k in present and sch.field(k).type not in (pa.string(), pa.large_string()):
            return None
    kind = _kind_of_columns(present, cols)
    fields = {f: num(f) for f in ("base", "probe", "count", "value", "id")}
    return df.select(*_convert(kind, fields, F.lit(False)))


def read_got_spark(spark: Any, path: str, cols: dict[str, str], results_dir: str, name: str,
                   keep: bool | None = None, reader: str = "auto", range_bytes: int | None = None) -> int | None:
    """Read the output at ``path`` with Spark into the ``name`` partition of ``results_dir``; the number of rows,
    or None when a row is outside the rules of the module docstring (nothing is then left in the partition, and
    the caller reads the file with :func:`oij.testing._got.read_got`).

    Unless ``keep`` (None: :func:`oij.spark.fingerprint.keep_results`, the environment), no row is written here:
    the pass that parses and vouches for the rows also computes their fingerprints (a partial aggregation, a
    few thousand rows to the driver), and the rows are remembered as a lazy frame
    (:func:`oij.spark.fingerprint.register`) that :func:`oij.spark.compare.compare_frames` writes only when
    the output differs from the reference (:func:`oij.spark.compare.write_remembered`).

    JSON lines are first parsed column-wise by pyarrow on the executors (:mod:`oij.spark.gotparse`, byte
    ranges of ``range_bytes``); where a range cannot vouch for its lines, the whole file is read again by
    Spark's ``from_json`` as below.  ``reader``: ``auto`` (that order), ``arrow`` (the pyarrow parse only:
    None where it declines) or ``spark`` (``from_json`` only), the last two for the tests.
    """
    if reader not in ("auto", "arrow", "spark"):
        raise ValueError(f"reader must be auto, arrow or spark, not {reader!r}")
    if os.path.isdir(path) or path.endswith(".parquet"):
        return None if reader == "arrow" else _take(_parquet(spark, path, cols), results_dir, name, keep)
    if path.endswith(".csv"):
        return None if reader == "arrow" else _take(_csv(spark, path, cols), results_dir, name, keep)
    if reader != "spark":
        n = _arrow(spark, path, cols, results_dir, name, keep, range_bytes)
        if n is not None or reader == "arrow":
            return n
    return _take(_jsonl(spark, path, cols), results_dir, name, keep)


def _arrow(spark: Any, path: str, cols: dict[str, str], results_dir: str, name: str, keep: bool | None,
           range_bytes: int | None) -> int | None:
    """JSON lines parsed by pyarrow on the executors (:mod:`oij.spark.gotparse`): fingerprinted in the workers
    (only partial sums per range reach the JVM) and remembered as a lazy frame, or written when kept; the number
    of rows, or None (nothing left behind) when a range declines."""
    from oij.spark import fingerprint as fp
    from oij.spark import gotparse
    from oij.spark.compare import _typed, engine_dir

    if fp.keep_results() if keep is None else keep:
        return _take(gotparse.arrow_rows(spark, path, cols, range_bytes), results_dir, name, True)
    fp.unregister(results_dir, name)
    shutil.rmtree(engine_dir(results_dir, name), ignore_errors=True)
    prints = gotparse.arrow_prints(spark, path, cols, range_bytes)
    rows = gotparse.arrow_rows(spark, path, cols, range_bytes)
    if prints is None or rows is None:
        return None
    fp.register(results_dir, name, rows.drop("_bad").select(*_typed()), prints)
    return sum(v[0] for v in prints.values())


def _take(rows: Any | None, results_dir: str, name: str, keep: bool | None) -> int | None:
    """Vouch for ``rows`` (converted, with ``_bad``) in one pass that also fingerprints them (or writes them when
    kept); the number of rows, or None (nothing left behind) when a row is bad."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from oij.spark import fingerprint as fp
    from oij.spark.compare import _typed, engine_dir

    if rows is None:
        return None
    seen = Observation("got")
    mixed = F.sum(F.col("_names_kind").cast("long")) if "_names_kind" in rows.columns else F.lit(0)
    counted = rows.observe(seen, F.count(F.lit(1)).alias("rows"), F.sum(F.col("_bad").cast("long")).alias("bad"),
                           mixed.alias("names_kind"))
    out = engine_dir(results_dir, name)
    fp.unregister(results_dir, name)
    shutil.rmtree(out, ignore_errors=True)
    extra = [c for c in ("_names_kind", "_bad") if c in rows.columns]
    if fp.keep_results() if keep is None else keep:
        write_rows(counted.drop(*extra), results_dir, name)
        prints = None
    else:
        prints = fp.fingerprint(counted.select(*_typed()), cells=True)
    got = seen.get
    n_rows, n_kind = int(got.get("rows") or 0), int(got.get("names_kind") or 0)
    if int(got.get("bad") or 0) > 0 or 0 < n_kind < n_rows:
        shutil.rmtree(out, ignore_errors=True)
        return None
    if prints is not None:
        fp.register(results_dir, name, rows.drop(*extra).select(*_typed()), prints)
    return n_rows


__all__ = ["read_got_spark"]
