"""A real engine run as its users run it, judged up to schedule (``oij conform --adapter spark-ss|flink-ds
--as-run``).

The case-by-case kit drives an engine one tuple per step, so its watermark moves where the kit says.  Here the
engine runs its ordinary job on whole workloads (Spark: micro-batches of many rows, default trigger, no-data
batches on; Flink: periodic watermarks on a wall-clock timer, parallelism 1 and 2), and each output is judged up
to schedule (:mod:`oij.testing._schedule`) under the engine's profile and family.

Data flow::

    run i --(seeded draw of keys, lateness, window and its inclusivity, stragglers)--> a workload (oij generate)
          --oij.spark.userjob / oij.flink.userjob--> the engine's result lines
          --judge_columns (profile spark-ss or flink-datastream, family auto)--> ScheduleVerdict
    the first rejection: its witnesses and a replay case (OUT/replays), then the run stops

Files: one temporary directory per run, removed after it (the engines' own temporary files are theirs to
remove); the replay cases are written atomically into ``out``.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oij.errors import UsageError
from oij.testing._schedule import ScheduleVerdict, fast_output_columns, judge_columns, tuple_columns_from_file

ENGINES = {"spark-ss": "spark-ss", "flink-ds": "flink-datastream"}
"""The adapters that run as their users run them, and the profile each is judged under."""


@dataclass
class AsRunReport:
    """Every run's workload parameters, the engine's report and the verdict."""

    adapter: str
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def admissible(self) -> bool:
        return all(r["admissible"] for r in self.runs)

    def lines(self) -> list[str]:
        out = []
        for r in self.runs:
            out.append(f"run {r['run']}: {r['tuples']} tuples, {r['params']}, {r['engine']}: "
                       f"{'admissible' if r['admissible'] else 'REJECTED'} ({r['family']})")
            out += ["  " + x for x in r["verdict"][1:]]
            if r.get("replay"):
                out.append(f"  replay case: {r['replay']}")
        n = sum(1 for r in self.runs if r["admissible"])
        out.append(f"{self.adapter} as its users run it: {n} of {len(self.runs)} runs admissible up to schedule")
        return out


def draw_params(rng: random.Random) -> dict[str, Any]:
    """The workload of one run: keys, lateness, a window with random inclusivity, stragglers."""
    lower, upper = rng.choice([(-1000, 0), (-200, 300), (0, 500), (-500, -100)])
    lateness = rng.choice([50, 500])
    return {"keys": rng.choice([5, 50]), "lateness": lateness, "delay_max": lateness,
            "stragglers": rng.choice([0.03, 0.1]), "straggler_max": 3 * lateness, "rate": 200000.0,
            "lower": lower, "upper": upper, "lower_inclusive": rng.random() < 0.7,
            "upper_inclusive": rng.random() < 0.7}


def conform_as_run(adapter: str, *, runs: int = 3, events: int = 3000, seed: int = 0, out: str = ".",
                   files: int = 6, say: Callable[[str], None] | None = None) -> AsRunReport:
    """``runs`` workloads of ``events`` tuples through ``adapter``'s ordinary job, each judged up to schedule; stops
    at the first rejection (its replay case written into ``out/replays``)."""
    from oij.workloads import WorkloadParams, with_overrides, write_workload

    if adapter not in ENGINES:
        raise UsageError(f"--as-run: adapter {adapter!r} has no ordinary job; known: {', '.join(ENGINES)}")
    profile = ENGINES[adapter]
    rng = random.Random(seed)
    rep = AsRunReport(adapter)
    for i in range(runs):
        params = draw_params(rng)
        d = tempfile.mkdtemp(prefix="oij-asrun-")
        try:
            w = os.path.join(d, "w.jsonl")
            write_workload(w, with_overrides(WorkloadParams(), params), events, seed * 1000 + i)
            res = os.path.join(d, "out.jsonl")
            parallelism = 1
            if adapter == "spark-ss":
                from oij.spark.userjob import run_spark_user_job

                info = run_spark_user_job(w, res, files=files)
                engine = f"spark, {info['batches']} batches"
            else:
                from oij.flink.userjob import run_flink_user_job

                parallelism = 1 + i % 2
                info = run_flink_user_job(w, res, parallelism=parallelism)
                engine = f"flink x{parallelism}, {info['pairs']} pairs, {info['late']} late"
            q, cols, fw = tuple_columns_from_file(w)
            got = fast_output_columns(res)
            if got is None:  # the jobs write oij's own result lines; anything else is a bug of the job's writer
                raise RuntimeError(f"{adapter}: the job's output {res} is not plain oij-jsonl result lines")
            v: ScheduleVerdict = judge_columns(adapter, cols, q, got, profile, "auto", parallelism, None, fw)
            row: dict[str, Any] = {"run": i, "tuples": len(cols), "params": params, "engine": engine,
                                   "admissible": v.admissible, "family": v.family_text(), "verdict": v.lines(),
                                   "stats": v.judgement.stats}
            if not v.admissible:
                row["replay"] = _replay(v, cols, q, out, adapter, i)
            rep.runs.append(row)
            if say is not None:
                say(f"run {i}: {engine}: {'admissible' if v.admissible else 'REJECTED'}")
            if not v.admissible:
                break
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return rep


def _replay(v: ScheduleVerdict, cols: Any, q: Any, out: str, adapter: str, i: int) -> str | None:
    from oij.io.atomic import write_text
    from oij.testing._case import Case
    from oij.testing._got import build_case
    from oij.testing._schedule import replay_picks

    picks = replay_picks(v, cols)
    if not picks:
        return None
    small, evs = build_case(q, picks[0])
    path = os.path.join(out, "replays", f"{adapter}-as-run-{i}.jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_text(path, Case(small, tuple(evs)).to_jsonl())
    return path


__all__ = ["ENGINES", "AsRunReport", "conform_as_run", "draw_params"]
