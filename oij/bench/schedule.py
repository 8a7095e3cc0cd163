"""``oij bench schedule``: real engines as their users run them, judged with a fixed schedule and up to schedule.

Data flow::

    oij generate (the issue's workload: 50 keys, window [-1000, 0], lateness 500, 3% stragglers) --> w.jsonl
    w.jsonl --run_spark_user_job (20 files a source, default trigger)--> spark.jsonl
            --run_flink_user_job (periodic watermarks, parallelism 1 and 2)--> flink-p1.jsonl, flink-p2.jsonl
    each output --compare_results with the canonical result, and with its profile's (simulated)--> missing, extra
                --judge up to schedule (the profile's default family)--> verdict, inferred schedules
                --four planted differences--> each verdict and witness kind
    w1m.jsonl (10^6 tuples) --oij join--> j.jsonl --oij check --got --no-spark, and --schedule any--> seconds each
    with --spark-tuples N: ws.parquet (N tuples) --oij join--> js.jsonl --oij check --schedule any --seq-limit 0
        --master M (the judge on Spark, oij.spark.schedule) --> wall and CPU seconds, peak RSS, the verdict

Every run is a fresh process or a call in this one, one after the other; nothing runs concurrently.  Files:
a temporary directory (removed at the end, also on failure) and the result file (written atomically).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from oij.bench.usage import run_own_usage
from oij.spec.batch import Results
from oij.spec.model import StreamTuple

ISSUE_PARAMS = {"keys": 50, "lateness": 500, "delay_max": 500, "stragglers": 0.03, "straggler_max": 1500,
                "rate": 200000.0}
"""The workload of issue 63: 50 uniform keys, window [-1000, 0], lateness 500, 3% stragglers up to 2,000 late."""

PLANTS = ("missing", "duplicate", "outside", "back")
"""The planted differences: a lost pair of two tuples both in other rows, a duplicated pair, a pair outside the
window, and a late treatment no monotone W allows (a tuple listed late, or its pairs removed, while a later tuple
of the same key and input, hence of its chain in every family, with a lower ts stays on time)."""


def plant(kind: str, got: Results, tuples: list[StreamTuple], lateness: int, upper: int,
          list_late: bool | None = None) -> Results:
    """``got`` with one planted difference of ``kind`` (:data:`PLANTS`); raises ValueError (or StopIteration) if
    the output offers no place for it.  ``list_late``: whether ``back`` lists its tuple late (default: iff the
    output has late rows)."""
    g = Results(list(got.pairs), list(got.aggregates), list(got.late))
    pos = {t.id: i for i, t in enumerate(tuples)}
    by_id = {t.id: t for t in tuples}
    count: dict[int, int] = {}
    for a, b in g.pairs:
        count[a] = count.get(a, 0) + 1
        if b is not None:
            count[b] = count.get(b, 0) + 1
    if kind == "missing":
        g.pairs.remove(next(p for p in g.pairs if p[1] is not None and count[p[0]] > 1 and count[p[1]] > 1))
    elif kind == "duplicate":
        g.pairs.append(g.pairs[len(g.pairs) // 2])
    elif kind == "outside":
        a = g.pairs[0][0]
        far = next(t for t in tuples if t.side == "probe" and t.key == by_id[a].key and t.ts > by_id[a].ts + upper)
        g.pairs.append((a, far.id))
    elif kind == "back":
        top = -(1 << 62)
        before = []
        for t in tuples:
            before.append(top)
            top = max(top, t.ts)
        x = next(t for t in tuples if t.id in count and t.ts < before[pos[t.id]] - lateness and any(
            u.id in count and u.side == t.side and u.key == t.key and u.ts < t.ts
            for u in tuples[pos[t.id] + 1:pos[t.id] + 400]))
        g.pairs = [p for p in g.pairs if x.id not in p]
        if bool(g.late) if list_late is None else list_late:
            g.late = sorted([*g.late, x.id])
    else:
        raise ValueError(f"unknown plant {kind!r}")
    return g.canonical()


def _read(path: str) -> Results:
    from oij.io.jsonlread import parse_result_lines

    with open(path, encoding="utf-8") as f:
        return parse_result_lines(f)


def _judged(name: str, w: str, out: str, tuples: list[StreamTuple], q: Any, events: list[Any],
            profile: str, parallelism: int, canonical: Results) -> dict[str, Any]:
    from oij.reference.schedule import TupleColumns
    from oij.spark.compare import compare_results
    from oij.spec.profiles import PROFILES, compute_profile_result
    from oij.testing._schedule import judge_columns

    got = _read(out)
    c = TupleColumns.of(tuples)
    row: dict[str, Any] = {"output": name, "pairs": len(got.pairs), "late": len(got.late), "profile": profile}
    for label, ref in (("canonical", canonical),
                       (profile, compute_profile_result(events, q, PROFILES[profile]).canonical())):
        cmp = compare_results(ref, got if got.late else Results(got.pairs, got.aggregates, list(ref.late)))
        cmp_all = compare_results(ref, got)
        row[f"fixed_{label}"] = {"missing": cmp_all.missing, "extra": cmp_all.extra,
                                 "missing_pairs_only": cmp.missing, "extra_pairs_only": cmp.extra}
    t = time.perf_counter()
    v = judge_columns(name, c, q, got, profile, "auto", parallelism)
    row["schedule"] = {**v.json(), "seconds": round(time.perf_counter() - t, 3)}
    row["plants"] = {}
    for kind in PLANTS:
        try:
            bad = plant(kind, got, tuples, q.lateness, q.upper)
        except (StopIteration, ValueError) as e:
            row["plants"][kind] = {"error": f"no place to plant: {e!r}"}
            continue
        pv = judge_columns(name, c, q, bad, profile, "auto", parallelism)
        row["plants"][kind] = {"admissible": pv.admissible,
                               "witness": pv.judgement.witnesses[0].kind if pv.judgement.witnesses else None,
                               "text": pv.judgement.witnesses[0].text if pv.judgement.witnesses else None}
    return row


def _timed(cmd: list[str]) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), p.returncode


def timed_rss(cmd: list[str]) -> tuple[float, float, int, int]:
    """Wall and CPU seconds, the exit code and the peak RSS in bytes of ``cmd`` (``wait4``'s through
    :func:`oij.bench.usage.run_own_usage`: the CPU of the process itself and the children it waited for, its own
    peak; Spark's JVM, which pyspark does not wait for, is in neither the CPU seconds nor the RSS: they are the
    driver Python's)."""
    u = run_own_usage(cmd, stdout=subprocess.DEVNULL, capture_stderr=True)
    return u.wall_s, u.cpu_s, u.returncode, u.peak_rss_kib * 1024


def spark_judge_cost(d: str, tuples: int, seed: int = 1, master: str = "local[2]") -> dict[str, Any]:
    """The judge up to schedule on Spark at ``tuples`` tuples (module docstring), as a whole ``oij check``
    process in ``d``: its wall seconds, the driver Python's CPU seconds and peak RSS (:func:`timed_rss`), exit
    code and verdict (admissible, stats)."""
    from oij.workloads import WorkloadParams, with_overrides, write_workload

    w = os.path.join(d, "ws.parquet")
    write_workload(w, with_overrides(WorkloadParams(), ISSUE_PARAMS), tuples, seed, fmt="parquet")
    j = os.path.join(d, "js.jsonl")
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "oij.cli", "join", w, "-o", j, "--no-progress"], check=True,
                   capture_output=True)
    join_s = time.perf_counter() - t
    out = os.path.join(d, "cspark")
    cmd = [sys.executable, "-m", "oij.cli", "check", w, "--got", f"me={j}", "--schedule", "any", "--seq-limit", "0",
           "--master", master, "--no-progress", "--out", out]
    wall, cpu, rc, rss = timed_rss(cmd)
    judged: dict[str, Any] = {}
    rep = os.path.join(out, "report.json")
    if os.path.exists(rep):
        with open(rep, encoding="utf-8") as fh:
            rows = [r for r in json.load(fh)["engines"] if r["engine"] == "me"]
        judged = rows[0]["metrics"]["judged"] if rows else {}
    return {"tuples": tuples, "master": master, "command": " ".join(["oij", *cmd[3:]]), "join_s": round(join_s, 3),
            "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_rss_bytes": rss, "exit": rc,
            "ran_on": judged.get("ran_on"), "admissible": judged.get("admissible"),
            "undetermined": judged.get("undetermined"), "judge_s": judged.get("seconds"),
            "stats": judged.get("stats")}


def run_schedule_bench(out: str, events: int = 30_000, big: int = 1_000_000, repeat: int = 3, seed: int = 1,
                       engines: tuple[str, ...] = ("spark", "flink-p1", "flink-p2"), spark_tuples: int = 0,
                       spark_master: str = "local[2]") -> dict[str, Any]:
    """Run the experiment (module docstring) and write its raw numbers to ``out``; returns them.
    ``spark_tuples``: also judge that many tuples on Spark (:func:`spark_judge_cost`; 0 leaves it out)."""
    from oij.bench.results import capture
    from oij.io.atomic import write_text
    from oij.io.userjob import read_workload
    from oij.reference.oracle import run_events
    from oij.workloads import WorkloadParams, with_overrides, write_workload

    d = tempfile.mkdtemp(prefix="oij-bench-schedule-")
    try:
        w = os.path.join(d, "w.jsonl")
        write_workload(w, with_overrides(WorkloadParams(), ISSUE_PARAMS), events, seed)
        _, tuples = read_workload(w)
        from oij.io import open_events

        q2, it, f = open_events(w)
        try:
            evs = list(it)
        finally:
            if f is not None:
                f.close()
        canonical = run_events(evs, q2).canonical()
        rows = []
        runs: dict[str, dict[str, Any]] = {}
        for e in engines:
            path = os.path.join(d, f"{e}.jsonl")
            if e == "spark":
                from oij.spark.userjob import run_spark_user_job

                info = run_spark_user_job(w, path, files=20)
                profile, par = "spark-ss", 1
            else:
                from oij.flink.userjob import run_flink_user_job

                par = int(e.rsplit("p", 1)[1])
                info = run_flink_user_job(w, path, parallelism=par)
                profile = "flink-datastream"
            runs[e] = {k: v for k, v in info.items() if k not in ("progress", "key_instance")}
            rows.append(_judged(e, w, path, tuples, q2, evs, profile, par, canonical))
        cost: dict[str, Any] = {}
        if big:
            wb = os.path.join(d, "w1m.jsonl")
            write_workload(wb, with_overrides(WorkloadParams(), ISSUE_PARAMS), big, seed)
            jb = os.path.join(d, "j.jsonl")
            subprocess.run([sys.executable, "-m", "oij.cli", "join", wb, "-o", jb, "--no-progress"], check=True,
                           capture_output=True)
            base = [sys.executable, "-m", "oij.cli", "check", wb, "--got", f"me={jb}", "--no-progress"]
            modes = {"fixed": [*base, "--no-spark", "--attribute", "none", "--out", os.path.join(d, "cf")],
                     "schedule": [*base, "--schedule", "any", "--out", os.path.join(d, "cs")]}
            times: dict[str, list[tuple[float, float, int]]] = {m: [] for m in modes}
            for _ in range(repeat):  # interleaved: fixed, schedule, fixed, schedule, ...
                for m, cmd in modes.items():
                    times[m].append(_timed(cmd))
            cost = {"tuples": big, "repeat": repeat, **{
                m: {"wall_s": [round(x[0], 3) for x in ts], "cpu_s": [round(x[1], 3) for x in ts],
                    "exit": [x[2] for x in ts], "median_wall_s": round(statistics.median(x[0] for x in ts), 3),
                    "median_cpu_s": round(statistics.median(x[1] for x in ts), 3)} for m, ts in times.items()}}
            cost["ratio_wall"] = round(cost["schedule"]["median_wall_s"] / cost["fixed"]["median_wall_s"], 3)
            cost["ratio_cpu"] = round(cost["schedule"]["median_cpu_s"] / cost["fixed"]["median_cpu_s"], 3)
        spark_cost = spark_judge_cost(d, spark_tuples, seed, spark_master) if spark_tuples else {}
        result = {"provenance": capture(), "workload": {"tuples": events, "seed": seed, "params": ISSUE_PARAMS,
                                                       "canonical_pairs": len(canonical.pairs),
                                                       "canonical_late": len(canonical.late)},
                  "runs": runs, "rows": rows, "cost": cost, **({"spark_cost": spark_cost} if spark_cost else {})}
        write_text(out, json.dumps(result, indent=2, default=str) + "\n")
        return result
    finally:
        shutil.rmtree(d, ignore_errors=True)


def format_table(res: dict[str, Any]) -> str:
    """The result as the issue's table: each output judged with a fixed schedule and up to schedule, the planted
    differences' verdicts, and the cost."""
    lines = ["| output | judged as | missing | extra | verdict |", "|---|---|---:|---:|---|"]
    for r in res["rows"]:
        for label in ("canonical", r["profile"]):
            x = r[f"fixed_{label}"]
            lines.append(f"| {r['output']} | `{label}` (fixed schedule) | {x['missing']} | {x['extra']} | "
                         f"{'agrees' if x['missing'] == x['extra'] == 0 else 'differs'} |")
        s = r["schedule"]
        lines.append(f"| {r['output']} | `--schedule any --profile {r['profile']}` ({s['family']}) | | | "
                     f"{'admissible' if s['admissible'] else 'rejected'} |")
    lines += ["", "| output | " + " | ".join(PLANTS) + " |", "|---|" + "---|" * len(PLANTS)]
    for r in res["rows"]:
        cells = [("found: " + str(p.get("witness")) if not p.get("admissible", True) else "MISSED")
                 if "error" not in p else "n/a" for p in (r["plants"][k] for k in PLANTS)]
        lines.append(f"| {r['output']} | " + " | ".join(cells) + " |")
    c = res.get("cost")
    if c:
        lines.append(f"\ncost at {c['tuples']:,} tuples (median of {c['repeat']}): fixed-schedule check "
                     f"{c['fixed']['median_wall_s']} s wall / {c['fixed']['median_cpu_s']} s CPU, up to schedule "
                     f"{c['schedule']['median_wall_s']} s / {c['schedule']['median_cpu_s']} s: ratio "
                     f"{c['ratio_wall']} wall, {c['ratio_cpu']} CPU")
    sc = res.get("spark_cost")
    if sc:
        lines.append(f"\nthe judge on Spark ({sc['master']}) at {sc['tuples']:,} tuples: {sc['wall_s']} s wall, "
                     f"{sc['cpu_s']} s CPU of the driver Python, its peak RSS {sc['peak_rss_bytes'] / 2**20:.0f} MiB; "
                     f"{'admissible' if sc['admissible'] else 'undetermined' if sc['undetermined'] else 'rejected'}"
                     f" (exit {sc['exit']})")
    return "\n".join(lines)


__all__ = [
    "ISSUE_PARAMS",
    "PLANTS",
    "format_table",
    "plant",
    "run_schedule_bench",
    "spark_judge_cost",
    "timed_rss",
]
