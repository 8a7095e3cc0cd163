"""Flink SQL's interval join as an implementation under test: one oij-jsonl case, paced tuple by tuple.

Data flow for one case::

    events --(one JSON file per tuple, renamed into place one by one, PACE s apart)--> DIR/a/ or DIR/b/
    DIR/a --filesystem source, monitored every 50 ms, WATERMARK rt - L--+
    DIR/b --filesystem source, monitored every 50 ms, WATERMARK rt - L--+--interval join on key and range
          --> collect() iterator, read by a thread --> pair rows (base id, probe id or null) --> Results

Why paced files: PyFlink has no Python source that emits over time, and the
two inputs of the join are separate channels, so the arrival order across
them is whatever the scheduler makes of it unless the tuples are far apart in
wall-clock time.  Each tuple is renamed into its table's directory
``PACE`` seconds after the previous one (the directory is scanned every
50 ms, the periodic watermark is emitted every 10 ms), so it is read, joined
and followed by its watermark before the next one comes.  This makes the drive
deterministic in practice, not by construction: a machine stalled for longer
than the pace could reorder two tuples.  ``oij adapter flink-sql --repeat``
and the tests check that repeated runs agree.

Start and end are marked by *sync rows*: a base and a probe on a key no case
uses, echoed to the output by a ``UNION ALL`` beside the join.  The start rows
(timestamp far below the case's) prove both sources are read before the
first tuple is written; the end rows (far above) move both watermarks past
every window, as the end of a bounded stream does in Flink (its final
watermark), so pending left-join rows are emitted; the run ends once both end
rows are echoed and the output has been quiet for ``SETTLE`` seconds.
Sync rows are not reported.

Mapping: lateness mode only (``WATERMARK FOR rt AS rt - INTERVAL 'l' ms``,
per table: the join takes the minimum); timestamps shifted by ``SHIFT``
(Flink's row-time join treats a watermark <= 0 as 0); keys as tagged strings;
bounds with ``>=``/``>`` and ``<=``/``<``; ``join="left"`` as ``LEFT JOIN``.
Aggregates (adapter ``flink-sql-agg``): ``GROUP BY`` the base's id over the
``LEFT JOIN``, with ``COUNT(b.id)`` (the null row counts 0), ``SUM(b.v)``
with null as 0.0, ``MIN``, ``MAX``, avg as sum / count.  A non-windowed
``GROUP BY`` is an *updating* table: each new pair of a base replaces its row
(an ``-U``/``+U`` change); the drive consolidates the changelog and compares
the final row of each base (the revisions are counted, as Pathway's are).
Absent: watermark lines, channels, late reports (Flink SQL never reports late
rows), extreme timestamps.

Resources: ``run_case`` creates a temporary directory and removes it; the
streaming job is cancelled in a ``finally``; the reader thread ends when the
job's iterator closes.  The JVM (one per process, started by PyFlink at the
first TableEnvironment) lives until the process exits; it ends when its stdin
closes, removing its temporary files (the MiniCluster's folders, Flink's 24 MB
RPC jar) in its shutdown hooks, after this process has gone, where a kill or a
starved machine can cut them short.  So its ``java.io.tmpdir`` is a folder of
this process's (``gateway_tmp``, called by ``table_env``), removed at this
process's exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from oij.io.adapt import LATENESS_FEATURES, Unsupported, aggregate_row, check_lateness_case
from oij.io.keys import tag_key
from oij.spec.batch import Results
from oij.spec.model import BASE, Event, Query, StreamTuple

SHIFT = 10**12
"""Added to every timestamp (ms): the row-time join treats watermarks <= 0 as 0."""

TS_RANGE = 10**11
"""|ts| allowed by the adapter (the sync rows sit at SHIFT -/+ 2 * TS_RANGE)."""

PACE = 0.4
"""Seconds between two tuples of a case."""

SETTLE = 1.0
"""Seconds of quiet output after the end sync pair before the job is cancelled."""

STARTUP_TIMEOUT = 60.0
"""Seconds to wait for the start sync pair (the job being deployed and both sources read)."""

_LAST_REVISIONS: tuple[int, int] | None = None
"""(changes, rows taken back) of the last aggregate run's changelog, for :func:`revision_summary`."""

SYNC_KEY = "~oij-sync~"  # tagged case keys start with "i:" or "s:"
FEATURES = LATENESS_FEATURES


def check_supported(q: Query, events: Sequence[Event]) -> None:
    """Raise :class:`Unsupported` unless the case is within ``FEATURES`` or is a per-base aggregate."""
    check_lateness_case(q, events, TS_RANGE,
                        "Flink SQL watermarks come from the WATERMARK clause",
                        "the sync rows sit at SHIFT -/+ 2 * TS_RANGE")


_gateway_tmp: str | None = None


def gateway_tmp() -> str | None:
    """The ``java.io.tmpdir`` of the gateway JVM that PyFlink starts in this process: a temporary folder, made at
    the first call, before PyFlink starts the JVM (PyFlink passes ``JVM_ARGS`` on to it), and removed at this
    process's exit with whatever the JVM left there.  None when PyFlink's JVM runs already (the folder can no
    longer be chosen) or the folder's path has a space (``JVM_ARGS`` is split at spaces)."""
    global _gateway_tmp
    if _gateway_tmp is None:
        java_gateway = sys.modules.get("pyflink.java_gateway")
        if getattr(java_gateway, "_gateway", None) is not None:  # PyFlink's one gateway of the process
            return None
        d = tempfile.mkdtemp(prefix="oij-flink-gateway-")
        if " " in d:
            os.rmdir(d)
            return None
        import atexit

        atexit.register(shutil.rmtree, d, ignore_errors=True)
        os.environ["JVM_ARGS"] = f"{os.environ.get('JVM_ARGS', '')} -Djava.io.tmpdir={d}".strip()
        _gateway_tmp = d
    return _gateway_tmp


def table_env() -> Any:
    """A streaming TableEnvironment for the drive: parallelism 1, watermarks every 10 ms, no buffering; the gateway
    JVM's temporary files in :func:`gateway_tmp`."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    gateway_tmp()
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", "1")
    conf.set("pipeline.auto-watermark-interval", "10ms")
    conf.set("execution.buffer-timeout", "0ms")
    return env


def _interval(ms: int) -> str:
    sign = "+" if ms >= 0 else "-"
    return f"{sign} INTERVAL '{abs(ms) / 1000:.3f}' SECOND"


def join_sql(q: Query, a: str, b: str) -> str:
    """The SELECT of the interval join of tables ``a`` (base) and ``b`` (probe) for query ``q``."""
    lo_op = ">=" if q.lower_inclusive else ">"
    hi_op = "<=" if q.upper_inclusive else "<"
    how = "LEFT JOIN" if q.join == "left" or q.aggregate is not None else "JOIN"
    on = (f"FROM {a} {how} {b} ON {a}.k = {b}.k "
          f"AND {b}.rt {lo_op} {a}.rt {_interval(q.lower)} AND {b}.rt {hi_op} {a}.rt {_interval(q.upper)}")
    if q.aggregate is not None:  # an updating table: one row per base, replaced by every new pair
        return (f"SELECT {a}.id AS a_id, COUNT({b}.id) AS n, SUM({b}.v) AS s, MIN({b}.v) AS mn, MAX({b}.v) AS mx "
                f"{on} GROUP BY {a}.id")
    return f"SELECT {a}.id AS a_id, {b}.id AS b_id {on}"


class _Drive:
    """Files in, rows out: writes tuples into the two directories and collects rows in a thread."""

    def __init__(self, work: str) -> None:
        self.dirs = {"base": os.path.join(work, "a"), "probe": os.path.join(work, "b")}
        for d in self.dirs.values():
            os.mkdir(d)
        self.n = 0
        self.rows: list[tuple[int, int | None]] = []
        self.groups: dict[int, tuple[Any, ...]] = {}  # consolidated aggregate rows (a GROUP BY's changelog)
        self.changes = 0
        self.retractions = 0
        self.last_row = time.monotonic()
        self.error: BaseException | None = None
        self.lock = threading.Lock()

    def put(self, side: str, id_: int, ts: int, key: str, value: float = 0.0) -> None:
        d = self.dirs[side]
        tmp = os.path.join(d, f".e{self.n:06d}.json")  # hidden: the source skips it until the rename
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"id": id_, "k": key, "t": ts, "v": value}) + "\n")
        os.rename(tmp, os.path.join(d, f"e{self.n:06d}.json"))
        self.n += 1

    def read(self, it: Any) -> None:
        try:
            for r in it:
                with self.lock:
                    self.last_row = time.monotonic()
                    if len(r) == 2:  # a pair, or a sync row's echo
                        self.rows.append((int(r[0]), None if r[1] is None else int(r[1])))
                        continue
                    self.changes += 1
                    kind = r.get_row_kind().name
                    if r[1] is None:  # the echo of a sync row: COUNT is never null
                        self.rows.append((int(r[0]), None))
                    elif kind in ("INSERT", "UPDATE_AFTER"):
                        self.groups[int(r[0])] = tuple(r[1:])
                    else:  # UPDATE_BEFORE or DELETE: the row is taken back
                        self.retractions += 1
                        self.groups.pop(int(r[0]), None)
        except BaseException as e:  # the job was cancelled (normal end) or failed: kept for the caller
            self.error = e

    def wait_for(self, row: tuple[int, int | None], timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if row in self.rows:
                    return
            if self.error is not None:
                raise RuntimeError(f"the Flink job failed: {self.error}")
            time.sleep(0.02)
        raise TimeoutError(f"Flink produced no sync row {row} within {timeout:.0f} s")


def run_case(q: Query, events: Sequence[Event], pace: float = PACE) -> Results:
    """The pairs Flink SQL's interval join emits for the case, tuples paced ``pace`` seconds apart.

    Requires: ``check_supported(q, events)`` passes.  A new TableEnvironment
    per case (cheap once the JVM runs): reusing one across jobs fails in the
    planner (``NullPointerException: metadataHandlerProvider``).
    Emits no late lines (Flink SQL does not report late rows).
    Cost: about 5 s to deploy the job, ``pace`` s per tuple, 1-2 s to end.
    """
    global _LAST_REVISIONS
    check_supported(q, events)
    _LAST_REVISIONS = None
    tuples = [e for e in events if isinstance(e, StreamTuple)]
    ids = [t.id for t in tuples]
    sync = [max(ids, default=0) + i for i in (1, 2, 3, 4)]  # start base, start probe, end base, end probe
    work = tempfile.mkdtemp(prefix="oij-flink-sql-")
    tag = os.path.basename(work).replace("-", "_")
    names = {"base": f"A_{tag}", "probe": f"B_{tag}"}
    drive = _Drive(work)
    env = table_env()
    result: Any = None
    try:
        delay = f"INTERVAL '{(q.lateness or 0) / 1000:.3f}' SECOND"
        for side, name in names.items():
            env.execute_sql(
                f"CREATE TEMPORARY TABLE {name} (id BIGINT, k STRING, t BIGINT, v DOUBLE, "
                f"rt AS TO_TIMESTAMP_LTZ(t, 3), "
                f"WATERMARK FOR rt AS rt - {delay}) WITH ('connector' = 'filesystem', "
                f"'path' = 'file://{drive.dirs[side]}', 'format' = 'json', 'source.monitor-interval' = '50ms')")
        a, b = names["base"], names["probe"]
        nulls = ("CAST(NULL AS BIGINT) AS b_id" if q.aggregate is None else
                 "CAST(NULL AS BIGINT) AS n, CAST(NULL AS DOUBLE) AS s, CAST(NULL AS DOUBLE) AS mn, "
                 "CAST(NULL AS DOUBLE) AS mx")
        echo = " ".join(f"UNION ALL SELECT id AS a_id, {nulls} FROM {t} WHERE k = '{SYNC_KEY}'" for t in (a, b))
        result = env.sql_query(f"{join_sql(q, a, b)} {echo}").execute()
        it = result.collect()
        reader = threading.Thread(target=drive.read, args=(it,), daemon=True, name="oij-flink-reader")
        reader.start()
        low, high = SHIFT - 2 * TS_RANGE, SHIFT + 2 * TS_RANGE
        drive.put("base", sync[0], low, SYNC_KEY)
        drive.put("probe", sync[1], low, SYNC_KEY)
        drive.wait_for((sync[0], None), STARTUP_TIMEOUT)
        drive.wait_for((sync[1], None), STARTUP_TIMEOUT)
        for t in tuples:
            drive.put(t.side if t.side == BASE else "probe", t.id, t.ts + SHIFT, tag_key(t.key), t.value)
            time.sleep(pace)
        drive.put("base", sync[2], high, SYNC_KEY)
        drive.put("probe", sync[3], high, SYNC_KEY)
        drive.wait_for((sync[2], None), STARTUP_TIMEOUT)
        drive.wait_for((sync[3], None), STARTUP_TIMEOUT)
        while True:
            with drive.lock:
                quiet = time.monotonic() - drive.last_row
            if quiet >= SETTLE:
                break
            time.sleep(SETTLE - quiet)
        with drive.lock:
            rows = [r for r in drive.rows if r[0] not in sync]
            groups = dict(drive.groups)
            _LAST_REVISIONS = (drive.changes, drive.retractions)
        res = Results()
        if q.aggregate is None:
            res.pairs.extend(rows)
        else:
            res.aggregates.extend(aggregate_row(q.aggregate, a, int(g[0]), *g[1:]) for a, g in groups.items()
                                  if a not in sync)
        return res.canonical()
    finally:
        if result is not None:
            client = result.get_job_client()
            if client is not None:
                with contextlib.suppress(Exception):  # already finished or failed: nothing left to stop
                    client.cancel().result()
        for name in names.values():
            env.execute_sql(f"DROP TEMPORARY TABLE IF EXISTS {name}")
        shutil.rmtree(work, ignore_errors=True)


def revision_summary() -> str | None:
    """One line on the last aggregate run's changelog: how many changes, how many rows taken back (else None)."""
    if _LAST_REVISIONS is None:
        return None
    changes, back = _LAST_REVISIONS
    return f"flink-sql: {changes} changes of the GROUP BY, {back} rows taken back (replaced by the next)"


__all__ = ["FEATURES", "PACE", "SHIFT", "TS_RANGE", "Unsupported", "check_supported", "gateway_tmp", "join_sql",
           "revision_summary", "run_case", "table_env"]
