"""Events as Spark DataFrames: the event frame, the Parquet fast path, and the converter for other sources.

The *event frame* has one row per event, in the columns of oij's Parquet
format plus the arrival position::

    pos long        arrival position, 0-based (row r of a file has pos r - 1)
    type string     tuple | watermark | end
    side string     base | probe (tuples)
    id long, ts long
    key long|string int keys as int64, str keys as strings; a stream that mixes
                    both uses tagged strings "i:<int>" / "s:<str>" so that 1 != "1"
    value double, channel int
    fields.<name>   double, one per named field the query's cond reads (null: absent)

Sources:

* an oij Parquet file is read by Spark directly (:func:`read_parquet_events`);
  the arrival position is Spark's ``_metadata.row_index``, so no Python touches
  the rows; its schema is checked with pyarrow first and its rows by one
  Spark aggregation (:func:`validate_events`), with the errors of the
  sequential reader (file, row, field);
* in-memory events (:func:`events_frame`) become an Arrow table;
* any event iterator (oij-jsonl, a generated workload) is written to a
  Parquet file in this layout by :func:`materialize`, which also keeps the
  events in memory while they are few enough for the sequential oracle.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from oij.io.errors import InputError
from oij.io.jsonlwrite import format_query
from oij.io.keys import tag_key
from oij.io.parquet import COLUMNS, FIELD_PREFIX, META_KEY, dataset_files, event_row, field_names, parquet_query
from oij.spec.model import TS_LIMIT, Event, Query, StreamTuple

KEYS_META = b"oij.keys"

_INT_TYPES = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32())
_EXPECTED: dict[str, str] = {
    "type": "string",
    "side": "string",
    "id": "integer",
    "ts": "integer",
    "key": "int64 or string",
    "value": "double",
    "channel": "integer",
}


def key_mode(keys: Iterable[object]) -> str:
    """``"int"`` if every key is an int, ``"str"`` if every key is a str, else ``"tagged"``."""
    has_int = has_str = False
    for k in keys:
        if type(k) is int:
            has_int = True
        else:
            has_str = True
        if has_int and has_str:
            return "tagged"
    return "str" if has_str else "int"


def _key_array(keys: list[Any], mode: str) -> pa.Array:
    if mode == "int":
        return pa.array(keys, pa.int64())
    if mode == "str":
        return pa.array(keys, pa.string())
    return pa.array([None if k is None else tag_key(k) for k in keys], pa.string())


def events_table(events: Iterable[Event], start: int = 0, mode: str | None = None,
                 fields: tuple[str, ...] = ()) -> pa.Table:
    """An Arrow table of ``events`` in the event-frame layout, positions from ``start``, with ``fields``.

    ``mode`` is the key encoding (:func:`key_mode` of the tuples' keys when None).
    """
    names = (*COLUMNS, *(FIELD_PREFIX + f for f in fields))
    cols: dict[str, list[Any]] = {n: [] for n in ("pos", *names)}
    pos = start
    for e in events:
        cols["pos"].append(pos)
        pos += 1
        for name, v in zip(names, event_row(e, fields, strict=False), strict=True):
            cols[name].append(v)
    if mode is None:
        mode = key_mode(k for k in cols["key"] if k is not None)
    return pa.table(
        {
            "pos": pa.array(cols["pos"], pa.int64()),
            "type": pa.array(cols["type"], pa.string()),
            "side": pa.array(cols["side"], pa.string()),
            "id": pa.array(cols["id"], pa.int64()),
            "ts": pa.array(cols["ts"], pa.int64()),
            "key": _key_array(cols["key"], mode),
            "value": pa.array(cols["value"], pa.float64()),
            "channel": pa.array(cols["channel"], pa.int32()),
            **{FIELD_PREFIX + f: pa.array(cols[FIELD_PREFIX + f], pa.float64()) for f in fields},
        }
    )


def events_frame(spark: Any, events: Sequence[Event], q: Query | None = None) -> Any:
    """The event frame of in-memory events (already valid, e.g. from ``oij.io.open_events``)."""
    return spark.createDataFrame(events_table(events, fields=field_names(q) if q is not None else ()))


def materialize(
    q: Query, events: Iterable[Event], path: str, keep_limit: int, chunk: int = 1 << 16
) -> tuple[list[Event] | None, int]:
    """Write ``events`` to ``path`` (Parquet, event-frame layout with the query in its metadata).

    Returns ``(events, n)``: the events as a list if there are at most
    ``keep_limit`` of them (else None, and memory stays bounded by ``chunk``),
    and their number.  The key column is int64 or string when the stream has
    one key type and kept in memory, tagged strings otherwise.
    """
    meta = {META_KEY: format_query(q).encode()}
    kept: list[Event] = []
    writer: pq.ParquetWriter | None = None
    buf: list[Event] = []
    n = 0

    def flush() -> None:
        nonlocal writer, buf
        if not buf:
            return
        t = events_table(buf, n - len(buf), "tagged", field_names(q))
        if writer is None:
            writer = pq.ParquetWriter(path, t.schema.with_metadata({**meta, KEYS_META: b"tagged"}), compression="zstd")
        writer.write_table(t)
        buf = []

    streaming = False
    for e in events:
        n += 1
        if not streaming and n <= keep_limit:
            kept.append(e)
            continue
        if not streaming:  # too many to keep: stream from here on
            streaming = True
            buf, kept = kept, []
        buf.append(e)
        if len(buf) >= chunk:
            flush()
    if not streaming:
        mode = key_mode(e.key for e in kept if isinstance(e, StreamTuple))
        t = events_table(kept, 0, mode, field_names(q))
        pq.write_table(t.replace_schema_metadata({**meta, KEYS_META: mode.encode()}), path, compression="zstd")
        return kept, n
    flush()  # streaming: at least one event is buffered, so the writer exists now
    assert writer is not None
    writer.close()
    return None, n


def check_schema(path: str) -> pa.Schema:
    """The schema of an oij Parquet file, or of a dataset (a directory: every file checked, all alike)."""
    if not os.path.exists(path):
        raise InputError(path, 0, "file", "No such file or directory")
    files = dataset_files(path)
    first = _check_file_schema(files[0])
    for f in files[1:]:
        sch = _check_file_schema(f)
        for field in sch:
            if field.name in first.names and first.field(field.name).type != field.type:
                raise InputError(f, 0, field.name, f"schema mismatch: {field.type} here, "
                                 f"{first.field(field.name).type} in {files[0]}")
        if set(sch.names) != set(first.names):
            odd = sorted(set(sch.names) ^ set(first.names))[0]
            raise InputError(f, 0, odd, f"schema mismatch: the files of {path} have different columns")
    return first


def _check_file_schema(path: str) -> pa.Schema:
    try:
        sch = pq.read_schema(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise InputError(path, 0, "file", f"not a readable Parquet file ({e})") from None
    for name in ("type", "ts"):
        if name not in sch.names:
            raise InputError(path, 0, name, "missing column")
    for f in sch:
        want = _EXPECTED.get(f.name)
        if want is None or f.name == "pos":
            continue
        t = f.type
        ok = (
            (want == "string" and t in (pa.string(), pa.large_string()))
            or (want == "integer" and t in _INT_TYPES)
            or (want == "double" and t in (pa.float64(), pa.float32()))
            or (want == "int64 or string" and t in (pa.int64(), pa.string(), pa.large_string()))
        )
        if not ok:
            raise InputError(path, 0, f.name, f"schema mismatch: column must be {want}, got {t}")
    return sch


class RowPlace:
    """Where global position ``pos`` (0-based over a dataset's files in order) lies: a file and its 1-based row.

    Built from the footers alone; :meth:`locate` is O(log files).
    """

    def __init__(self, path: str) -> None:
        self.files = dataset_files(path)
        self.starts: list[int] = []
        n = 0
        for f in self.files:
            self.starts.append(n)
            n += pq.ParquetFile(f).metadata.num_rows
        self.rows = n

    def locate(self, pos: int) -> tuple[str, int]:
        """The file holding position ``pos`` and the row there (1-based); past the end: the last file."""
        import bisect

        i = max(0, bisect.bisect_right(self.starts, pos) - 1)
        return self.files[i], pos - self.starts[i] + 1


def fit_partitions(spark: Any) -> None:
    """Partitions that fit the cluster: about four per core for a file scan (each a run of row groups) and for
    a shuffle, unless the session was started with its own settings.  Spark's defaults make one scan partition
    per core at most and none smaller than 4 MiB (a 50 MB input is two tasks, and a stage cannot balance its
    cores), and 200 shuffle partitions whatever the cluster (hundreds of tiny tasks on two cores)."""
    conf = spark.conf
    launched = spark.sparkContext.getConf()
    per = str(4 * int(spark.sparkContext.defaultParallelism))
    if not launched.contains("spark.sql.files.minPartitionNum"):
        conf.set("spark.sql.files.minPartitionNum", per)
    if not launched.contains("spark.sql.files.openCostInBytes"):
        conf.set("spark.sql.files.openCostInBytes", str(1 << 20))
    if not launched.contains("spark.sql.shuffle.partitions"):
        conf.set("spark.sql.shuffle.partitions", per)


ROWS_PER_SHUFFLE_PARTITION = 1 << 20
"""About how many rows one shuffle partition of the oracle's join may hold: its hash table of probes must fit an
executor's share of memory (Spark's default executor has 1 GiB)."""


def fit_shuffle_to(spark: Any, rows: int) -> int:
    """Raise the session's shuffle partitions so that ``rows`` rows make none larger than
    ``ROWS_PER_SHUFFLE_PARTITION`` (adaptive execution coalesces the small ones again); never lower them.
    Four per core (:func:`fit_partitions`) is 8 partitions on two cores: at 10^8 tuples a join partition's hash
    table would hold 6 million probes and fail to build.  Returns the partitions now set."""
    cur = int(spark.conf.get("spark.sql.shuffle.partitions"))
    want = -(-rows // ROWS_PER_SHUFFLE_PARTITION)
    if want > cur:
        spark.conf.set("spark.sql.shuffle.partitions", str(want))
        return want
    return cur


def read_parquet_events(spark: Any, path: str, q: Query | None = None) -> tuple[Query, Any]:
    """The query and the event frame of an oij Parquet file, read by Spark (no Python per row).

    The query is ``q`` if given, else the one stored in the file.  The
    schema is checked here; the rows by :func:`validate_events`.
    """
    from pyspark.sql import functions as F

    sch = check_schema(path)
    stored = parquet_query(path)
    fit_partitions(spark)
    query = q if q is not None else stored
    if query is None:
        raise InputError(path, 0, "query", "no query in the file's metadata: give --lower and --upper")
    names = set(sch.names)
    if os.path.isdir(path):
        # a dataset: Spark reads every file; the arrival position is the file's start (files in name order)
        # plus the row's index inside it, joined from a small table of starts
        place = RowPlace(path)
        starts = spark.createDataFrame([(os.path.basename(f), s) for f, s in zip(place.files, place.starts,
                                                                                  strict=True)],
                                       "file_name string, start long")
        df = spark.read.parquet(*(os.path.abspath(f) for f in place.files))
        df = (df.select("*", F.col("_metadata.file_name").alias("file_name"),
                        F.col("_metadata.row_index").alias("row_index"))
              .join(F.broadcast(starts), "file_name"))
        pos = (F.col("start") + F.col("row_index")).alias("pos")
    else:
        df = spark.read.parquet(os.path.abspath(path))
        pos = F.col("_metadata.row_index").alias("pos")

    def col(name: str, typ: str) -> Any:
        return F.col(name).cast(typ) if name in names else F.lit(None).cast(typ)

    key_t = "string" if "key" in names and sch.field("key").type != pa.int64() else "long"
    frame = df.select(
        pos,
        col("type", "string").alias("type"),
        col("side", "string").alias("side"),
        col("id", "long").alias("id"),
        col("ts", "long").alias("ts"),
        col("key", key_t).alias("key"),
        col("value", "double").alias("value"),
        col("channel", "int").alias("channel"),
        *((F.col(f"`{FIELD_PREFIX}{f}`") if FIELD_PREFIX + f in names else F.lit(None)).cast("double")
          .alias(FIELD_PREFIX + f) for f in field_names(query)),
    )
    return query, frame


def _repeats(batches: Any) -> Any:
    """mapInArrow: an id of one hash partition that occurs more than once, if any (numpy's sort, no hash
    table)."""
    import numpy as np
    import pyarrow as pa

    parts = [b.column("id").to_numpy() for b in batches if b.num_rows]
    if parts:
        ids = np.sort(np.concatenate(parts))
        twice = ids[1:][ids[1:] == ids[:-1]]
        if len(twice):  # one is enough: the caller then finds the first row in arrival order
            yield pa.RecordBatch.from_arrays([pa.array(twice[:1], pa.int64())], names=["id"])


def _any_repeated(ids: Any) -> bool:
    """Whether a frame of (non-null) ids holds one twice: one shuffle of the ids by hash, then each partition
    sorted in numpy (Spark's groupBy would build a hash table of every id to find that none repeats)."""
    parts = max(1, 2 * int(ids.sparkSession.sparkContext.defaultParallelism))
    # collect, not limit(1): a limit runs the partitions in growing waves, each a job of its own
    return bool(ids.repartition(parts, "id").mapInArrow(_repeats, "id long").collect())


def event_rules(q: Query) -> list[tuple[str, str, Any]]:
    """The per-row rules of a valid event stream under ``q`` as (field, message, Spark condition true on a row
    breaking it): unknown type, side, missing id/ts/key, ts beyond 2^62, value not finite, channel out of
    range, a watermark in lateness mode, and the fields the query's cond reads.  The rows after the end row and
    a missing end row are judged from the end row's position (:func:`row_errors`); a repeated id is a property
    of the whole stream (:func:`first_duplicate`)."""
    from pyspark.sql import functions as F

    t = F.col("type")
    is_tuple = t == "tuple"
    is_wm = t == "watermark"
    chan = F.coalesce(F.col("channel"), F.lit(0))
    bad_chan = (chan < 0) | (chan >= q.channels)
    val = F.coalesce(F.col("value"), F.lit(0.0))
    known_type = F.coalesce(t.isin("tuple", "watermark", "end"), F.lit(False))
    known_side = F.coalesce(F.col("side").isin("base", "probe"), F.lit(False))
    rules: list[tuple[str, str, Any]] = [
        ("type", "unknown type (tuple, watermark or end)", ~known_type),
        ("side", "must be 'base' or 'probe'", is_tuple & ~known_side),
        ("id", "must be an integer", is_tuple & F.col("id").isNull()),
        ("ts", "must be an integer", (is_tuple | is_wm) & F.col("ts").isNull()),
        ("ts", "out of range: |ts| must be <= 2^62", (is_tuple | is_wm) & (F.abs(F.col("ts")) > TS_LIMIT)),
        ("key", "must be an integer or a string", is_tuple & F.col("key").isNull()),
        ("value", "must be finite", is_tuple & (F.isnan(val) | (F.abs(val) == float("inf")))),
        ("channel", f"must be an integer in [0, {q.channels})", (is_tuple | is_wm) & bad_chan),
    ]
    if q.lateness is not None:
        rules.append(("type", "watermark events are not allowed when the query sets lateness", is_wm))
    for c in q.cond:
        for side, name in (("base", c.left), ("probe", c.right)):
            if name == "ts":
                bad = F.abs(F.col("ts")) > (1 << 53)
                rules.append(("ts", "out of range for cond: |ts| must be <= 2^53",
                              is_tuple & (F.col("side") == side) & bad))
            elif name != "value":
                v = F.col(f"`{FIELD_PREFIX}{name}`")
                bad = v.isNull() | F.isnan(v) | (F.abs(v) == float("inf"))
                rules.append((FIELD_PREFIX + name, "missing or not finite: the query's cond reads it",
                              is_tuple & (F.col("side") == side) & bad))
    return rules


def rule_aggregates(rules: Sequence[tuple[str, str, Any]]) -> list[Any]:
    """Aggregates over event rows: ``r<i>`` the first position breaking rule i (null: none), ``n`` the rows,
    ``end`` the first end row's position.  Per group they combine by min, sum and min."""
    from pyspark.sql import functions as F

    aggs = [F.min(F.when(cond, F.col("pos"))).alias(f"r{i}") for i, (_, _, cond) in enumerate(rules)]
    return [*aggs, F.count(F.lit(1)).alias("n"), F.min(F.when(F.col("type") == "end", F.col("pos"))).alias("end")]


def row_errors(rules: Sequence[tuple[str, str, Any]], firsts: Sequence[int | None], n: int,
               end: int | None) -> list[tuple[int, str, str]]:
    """(position, field, message) of each rule's first breaking row (``firsts``, from :func:`rule_aggregates`),
    and of a missing end row or a row after it, for a stream of ``n`` rows whose first end row is at ``end``."""
    found = [(int(at), field, msg) for (field, msg, _), at in zip(rules, firsts, strict=True) if at is not None]
    if end is None:
        found.append((n, "type", "missing the last row of type 'end'"))
    elif end != n - 1:
        found.append((end + 1, "type", "nothing may follow the end row"))
    return found


def first_duplicate(frame: Any) -> tuple[int, str, str] | None:
    """(position, "id", message) of the first tuple whose id an earlier tuple of ``frame`` used, or None: an
    aggregation of the ids seen twice, then a join back (only run when a repeat is known or suspected)."""
    from pyspark.sql import functions as F

    ids = frame.where((F.col("type") == "tuple") & F.col("id").isNotNull()).select("id", "pos")
    twice = ids.groupBy("id").agg(F.count(F.lit(1)).alias("c"), F.min("pos").alias("first")).where("c > 1")
    dup = ids.join(twice, "id").where(F.col("pos") > F.col("first")).orderBy("pos").limit(1).collect()
    return (int(dup[0]["pos"]), "id", f"duplicate id {dup[0]['id']}") if dup else None


def raise_first(found: Sequence[tuple[int, str, str]], path: str) -> None:
    """Raise the earliest of ``found`` (position, field, message) as :class:`~oij.io.errors.InputError` naming
    the file and its row (1-based, as the Parquet reader does); of a dataset, its file.  Nothing found: return."""
    if not found:
        return
    pos, field, msg = min(found)
    if os.path.isdir(path):  # name the file of the dataset and its row
        where, row = RowPlace(path).locate(pos)
        raise InputError(where, row, field, msg)
    raise InputError(path, pos + 1, field, msg)


def validate_events(frame: Any, q: Query, path: str) -> int:
    """Check every row of an event frame as the sequential readers do; return the number of events.

    One aggregation finds the first row breaking each rule (:func:`event_rules`, :func:`row_errors`) and one
    more whether any id is used twice (a shuffle of the ids alone; only then :func:`first_duplicate` finds the
    first duplicate); the earliest is raised (:func:`raise_first`).  :func:`oij.spark.oracle.scan_events` does
    the same inside the oracle's own scans, without the shuffle when the ids allow.
    """
    from pyspark.sql import functions as F

    rules = event_rules(q)
    row = frame.agg(*rule_aggregates(rules)).collect()[0]
    n = int(row["n"])
    found = row_errors(rules, [row[f"r{i}"] for i in range(len(rules))], n,
                       None if row["end"] is None else int(row["end"]))
    ids = frame.where((F.col("type") == "tuple") & F.col("id").isNotNull()).select("id")
    if _any_repeated(ids):
        dup = first_duplicate(frame)
        if dup is not None:
            found.append(dup)
    raise_first(found, path)
    return n


__all__ = [
    "event_rules",
    "events_frame",
    "events_table",
    "first_duplicate",
    "fit_partitions",
    "fit_shuffle_to",
    "key_mode",
    "materialize",
    "raise_first",
    "read_parquet_events",
    "row_errors",
    "rule_aggregates",
    "tag_key",
    "validate_events",
]
