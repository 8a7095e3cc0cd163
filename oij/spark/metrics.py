"""Where Spark's time goes: a per-step breakdown from Spark's own task metrics.

Each step of a Spark run (reading the events, validating them, the arrival watermarks and late marking, the range
join, writing the results, loading a ``--got`` output, the comparison) runs its Spark actions inside
:meth:`StageLog.step`, which puts them in a job group of their own.  When the step ends, the jobs of that group
give their stages, and each stage's metrics come from Spark's status store (the numbers the web UI shows: task
time, CPU time, rows and bytes read, shuffled and spilled); they are summed per step.

Data flow::

    step(name) -> sc.setJobGroup(group) -> actions run -> statusTracker().getJobIdsForGroup(group)
               -> the jobs' stage ids -> status store: lastStageAttempt(stage) -> one StepMetrics per step

Spark's lazy plans put several steps in one job when one action computes them all (the oracle's late marking,
range join and writing are one plan, computed by the write); the step that runs that action carries all of
their stages, and :attr:`StepMetrics.stages` lists each stage's own figures with Spark's name for it.

The status store is read through the JVM gateway (``SparkContext.statusStore``): Spark's internal API, stable
across 3.5 and 4.x.  Where it is not reachable (another Spark, Spark Connect) a step still gets its wall time
and job count, and ``metrics`` says ``"unavailable"``.  Nothing is created or freed here but the job group
property of the calling thread, cleared when the step ends.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

_GROUPS = itertools.count()

_FIGURES = (
    ("tasks", "numTasks"),
    ("input_rows", "inputRecords"),
    ("input_bytes", "inputBytes"),
    ("shuffle_read_rows", "shuffleReadRecords"),
    ("shuffle_read_bytes", "shuffleReadBytes"),
    ("shuffle_write_rows", "shuffleWriteRecords"),
    ("shuffle_write_bytes", "shuffleWriteBytes"),
    ("output_rows", "outputRecords"),
    ("output_bytes", "outputBytes"),
    ("result_bytes", "resultSize"),
)


@dataclass
class StepMetrics:
    """One step's wall time (seconds, measured around its actions) and the sums of its stages' metrics.

    ``task_s``: executor run time of every task (seconds; above ``wall_s`` when tasks ran in parallel);
    ``cpu_s``: their CPU time; ``spill_bytes``: memory plus disk bytes spilled; ``result_bytes``: the bytes the
    tasks returned to the driver (what it collects, per partition); the rest as Spark counts them.
    """

    step: str
    wall_s: float = 0.0
    jobs: int = 0
    tasks: int = 0
    task_s: float = 0.0
    cpu_s: float = 0.0
    input_rows: int = 0
    input_bytes: int = 0
    shuffle_read_rows: int = 0
    shuffle_read_bytes: int = 0
    shuffle_write_rows: int = 0
    shuffle_write_bytes: int = 0
    spill_bytes: int = 0
    output_rows: int = 0
    output_bytes: int = 0
    result_bytes: int = 0
    metrics: str = "spark"
    stages: list[dict[str, Any]] = field(default_factory=list)

    def add_stage(self, sd: Any) -> None:
        """Add the figures of one stage (a ``v1.StageData`` through the gateway)."""
        one: dict[str, Any] = {"stage": int(sd.stageId()), "name": str(sd.name())[:80]}
        for mine, theirs in _FIGURES:
            v = int(getattr(sd, theirs)())
            one[mine] = v
            setattr(self, mine, getattr(self, mine) + v)
        one["task_s"] = round(int(sd.executorRunTime()) / 1000, 3)
        one["cpu_s"] = round(int(sd.executorCpuTime()) / 1e9, 3)
        one["spill_bytes"] = int(sd.memoryBytesSpilled()) + int(sd.diskBytesSpilled())
        self.task_s = round(self.task_s + one["task_s"], 3)
        self.cpu_s = round(self.cpu_s + one["cpu_s"], 3)
        self.spill_bytes += one["spill_bytes"]
        self.stages.append(one)


class StageLog:
    """The steps of one Spark run, in order; :meth:`step` measures one.  O(stages) per step to read the store."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.steps: list[StepMetrics] = []
        self.started_s: float | None = None  # how long starting the session took, when the caller measured it

    @contextmanager
    def step(self, name: str) -> Iterator[StepMetrics]:
        """Run the block's Spark actions as step ``name``; its metrics are appended when the block ends (also
        when it raises)."""
        sc = self.spark.sparkContext
        group = f"oij-{next(_GROUPS)}"
        sc.setJobGroup(group, name)
        m = StepMetrics(name)
        t = time.perf_counter()
        try:
            yield m
        finally:
            m.wall_s = round(m.wall_s + time.perf_counter() - t, 3)
            sc.setLocalProperty("spark.jobGroup.id", None)
            sc.setLocalProperty("spark.job.description", None)
            self._collect(group, m)
            self.steps.append(m)

    def _collect(self, group: str, m: StepMetrics) -> None:
        sc = self.spark.sparkContext
        tracker = sc.statusTracker()
        jobs = list(tracker.getJobIdsForGroup(group))
        m.jobs = len(jobs)
        stage_ids: set[int] = set()
        for j in jobs:
            info = tracker.getJobInfo(j)
            if info is not None:
                stage_ids.update(int(s) for s in info.stageIds)
        try:
            store = sc._jsc.sc().statusStore()
        except Exception:  # no gateway to the JVM's status store: wall time and jobs only
            m.metrics = "unavailable"
            return
        for s in sorted(stage_ids):
            try:
                sd = store.lastStageAttempt(s)
            except Exception:  # a stage skipped (its shuffle output reused) has no attempt
                continue
            if str(sd.status()) == "SKIPPED":
                continue
            m.add_stage(sd)

    def rows(self) -> list[dict[str, Any]]:
        """The steps as dicts (``report.json``'s ``spark_steps``), less those that ran nothing."""
        return [asdict(s) for s in self.steps if s.jobs or s.wall_s >= 0.05]


def steps_table(rows: list[dict[str, Any]], tuples: int | None = None) -> list[str]:
    """Markdown lines of a step breakdown: wall, task time, rows read, shuffled and spilled per step, and what the
    driver received per task (its work per partition); a last row sums the steps.  With ``tuples`` (the
    workload's), a line after the table gives the bytes shuffled per tuple."""
    mib = 1 << 20
    out = ["| step | wall s | task s | jobs | stages | tasks | rows in | shuffle write MiB | shuffle read MiB | "
           "spill MiB | rows out | to driver KiB | to driver B/task |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def line(name: str, r: dict[str, Any], stages: int) -> str:
        res = int(r.get("result_bytes", 0) or 0)
        per_task = f"{res / r['tasks']:,.0f}" if r["tasks"] else "-"
        return (f"| {name} | {r['wall_s']:.1f} | {r['task_s']:.1f} | {r['jobs']} | {stages} | "
                f"{r['tasks']} | {r['input_rows']:,} | {r['shuffle_write_bytes'] / mib:.1f} | "
                f"{r['shuffle_read_bytes'] / mib:.1f} | {r['spill_bytes'] / mib:.1f} | {r['output_rows']:,} | "
                f"{res / 1024:,.1f} | {per_task} |")

    keys = ("wall_s", "task_s", "jobs", "tasks", "input_rows", "shuffle_write_bytes", "shuffle_read_bytes",
            "spill_bytes", "output_rows", "result_bytes")
    total: dict[str, Any] = {k: sum((r.get(k, 0) or 0) for r in rows) for k in keys}
    for r in rows:
        out.append(line(r["step"], r, len(r["stages"])))
    out.append(line("**all steps**", total, sum(len(r["stages"]) for r in rows)))
    if tuples:
        out += ["", f"Shuffled per tuple: {total['shuffle_write_bytes'] / tuples:.1f} bytes written, "
                    f"{total['shuffle_read_bytes'] / tuples:.1f} read ({tuples:,} tuples); to the driver: "
                    f"{total['result_bytes'] / max(total['tasks'], 1):,.0f} bytes per task on average."]
    return out


__all__ = ["StageLog", "StepMetrics", "steps_table"]
