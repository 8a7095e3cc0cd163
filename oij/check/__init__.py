"""``oij check``: every engine against the oracles, as a library function (``check``) returning a
:class:`CheckReport` that the command prints and tests inspect.

Modules of one concern: ``oij.check.options`` (the options), ``oij.check.steps`` (running the check),
``oij.check.report`` (the report and its rendering); this package only re-exports them.

Steps (each announced on stderr with its time, unless ``no_progress``):

1. the workload: ``file`` (oij-jsonl or Parquet), ``preset`` (:mod:`oij.workloads`), or with neither a small
   default workload;
2. the sequential oracle (:func:`oij.reference.oracle.run_events`) when the workload has at most ``seq_limit``
   events;
3. every chosen engine of :mod:`oij.parallel.registry` (default: all registered);
4. the Spark oracle (``spark``, the default; ``master`` for a cluster): the canonical result, or with
   ``profile`` that semantic profile's (``oij.spark.profiles``), at any size;
5. every output is written to ``OUT/results/engine=<name>/`` (one Parquet dataset partitioned by engine) and
   Spark compares each engine with the reference (the Spark oracle, or the sequential one without Spark);
6. ``OUT/report.json`` and ``OUT/report.md``; for ``got`` outputs (:mod:`oij.testing._got`), a replay case per
   listed difference (``OUT/replays/``) and the profiles that explain the differences
   (:mod:`oij.testing._attribute`).

The report's :attr:`CheckReport.all_agree` is True iff every engine (and the sequential oracle) agrees with the
reference (the command's exit code 0, else 1); a bad option or input raises
:class:`~oij.errors.UsageError` or :class:`~oij.io.errors.InputError` (exit code 2).

Files and processes: everything under ``out``; the replica processes of the engines (one pool, closed before
returning, also on error) and the Spark session (the process's own, left running for the next call).
"""

from __future__ import annotations

from oij.check.options import DEFAULT_EVENTS, DEFAULT_PRESET, SEQ_ORACLE, SPARK_ORACLE, CheckOptions
from oij.check.report import CheckReport, Row, markdown, table
from oij.check.steps import Progress, check, check_schedule

__all__ = ["DEFAULT_EVENTS", "DEFAULT_PRESET", "SEQ_ORACLE", "SPARK_ORACLE", "CheckOptions", "CheckReport", "Progress",
           "Row", "check", "check_schedule", "markdown", "table"]
