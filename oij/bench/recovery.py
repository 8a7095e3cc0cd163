"""Real engines under crashes and restores: ``oij bench recovery``, the measured verdict per engine and sink.

Data flow::

    for each subject (adapter, -o options):  restart_search(oij adapter NAME --restart-protocol -o ..., the
        adapter's features and profile, --max-examples cases, --restarts kills in a row)
        -> {verdict, cases, plans, seconds (per case, per plan), the minimal case (shrunk) with its kill plan,
            the rows lost / duplicated / unexpected, the timeline}
    -> after each subject: the runs so far, atomically, to --out + ".partial" (an interrupted run keeps them)
    -> at the end: the result {"runs": [...], "provenance": ...} atomically to --out; the partial file removed
       (so an interrupted or failed run leaves --out as it was)

Every incarnation is a process of its own (a JVM for Spark and Flink), killed with SIGKILL of its group by
the kit; the kit creates and removes the state directories.  Times are wall seconds on a shared 2-core
machine: the load average at each subject's start is recorded beside them, and the counted figures (cases,
plans, incarnations) stand next to them.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

from oij.adapters import get_adapter, restart_command
from oij.bench.results import capture
from oij.options import option
from oij.spec.profiles import get_profile
from oij.testing._restarts import RestartFailure, plan_json, restart_search, row_text


@dataclass(frozen=True)
class Subject:
    """An engine configuration to judge: the adapter, its restart options, and what it stands for."""

    label: str
    adapter: str
    options: tuple[str, ...]
    what: str


SUBJECTS = (
    Subject("spark-ss", "spark-ss", (), "Spark: file source, checkpoint location, foreachBatch sink written once "
            "per batch id"),
    Subject("spark-ss sink=append", "spark-ss", ("sink=append",), "Spark: foreachBatch appending every call "
            "(negative control)"),
    Subject("flink-ds", "flink-ds", (), "Flink DataStream: checkpointed replayable source, retained "
            "checkpoints, a two-phase sink committing on checkpoint completion"),
    Subject("flink-ds sink=direct", "flink-ds", ("sink=direct",), "Flink DataStream: a sink writing as rows "
            "come (negative control)"),
    Subject("flink-ds fail-after=2", "flink-ds", ("fail-after=2",), "Flink DataStream: an injected failure "
            "after the 2nd record, restarted from the last checkpoint inside the MiniCluster"),
    Subject("flink-ds savepoint-every=2", "flink-ds", ("savepoint-every=2",), "Flink DataStream: "
            "stop-with-savepoint after every 2 records and resume from the savepoint"),
    Subject("pathway", "pathway", (), "Pathway: persistence on a filesystem backend, one sink file per run, read "
            "together"),
    Subject("pathway persistence=off", "pathway", ("persistence=off",), "Pathway without persistence "
            "(negative control)"),
    Subject("pathway sink=single", "pathway", ("sink=single",), "Pathway: persistence, every run writing the same "
            "sink file"),
)


def judge(subject: Subject, *, max_examples: int, restarts: int, seed: int, timeout: float, quiet: float,
          shrinking: bool) -> dict[str, Any]:
    """Run the kit's restart mode on ``subject``; its verdict, counts, times and minimal failing case."""
    adapter = get_adapter(subject.adapter)
    cmd = restart_command(adapter, subject.options)
    profile = get_profile(adapter.profile)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    res = restart_search(cmd, features=frozenset(adapter.features), profile=profile, max_examples=max_examples,
                         restarts=restarts, seed=seed, timeout=timeout, quiet=quiet, shrinking=shrinking)
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {
        "label": subject.label, "adapter": subject.adapter, "options": list(subject.options), "what": subject.what,
        "profile": profile.name, "restarts": restarts, "max_examples": max_examples, "seed": seed,
        "command": "oij conform --restarts {} --adapter {}{} --max-examples {} --seed {}".format(
            restarts, subject.adapter, "".join(f" -o {o}" for o in subject.options), max_examples, seed),
        "cases": res.cases, "plans": res.plans, "wall_s": round(wall, 1),
        "search_s": round(res.seconds, 1),
        "s_per_case": round(res.seconds / res.cases, 1) if res.cases else None,
        "load_avg_at_start": round(load, 2),
    }
    f = res.failure
    if f is None:
        out["verdict"] = "exactly-once"
        return out
    out.update(_failure(f))
    return out


def _failure(f: RestartFailure) -> dict[str, Any]:
    run = f.run
    v = run.verdict
    kind = v.kind if v is not None and run.problem is None else "error"
    d: dict[str, Any] = {"verdict": kind, "problem": run.problem,
                         "minimal_case": run.case.to_jsonl(), "events": len(run.case),
                         "kill_plan": json.loads(plan_json(run.plan)), "timeline": run.timeline(),
                         "incarnations": len(run.incarnations)}
    if v is not None:
        for name, rows in (("lost", v.lost), ("duplicated", v.duplicated), ("unexpected", v.unexpected)):
            d[name] = len(rows)
            d[name + "_rows"] = [row_text(x) for x in rows]
    if run.problem is not None:
        d["stderr_tail"] = [inc.stderr[-1500:] for inc in run.incarnations if inc.stderr.strip()][-1:]
    return d


@dataclass
class RecoveryOptions:
    """The options of ``oij bench recovery``, each with its flag, help and default (:mod:`oij.options`)."""

    only: str = option("", help="comma-separated subject labels (default: all)")
    max_examples: int = option(3, help="generated cases per subject (default 3)")
    restarts: int = option(1, help="kills in a row per plan (default 1)")
    seed: int = option(0)
    timeout: float = option(300.0, help="seconds per incarnation (default 300)")
    shrinking: bool = option(True, flags=("--no-shrink",), help="report a failing case unshrunk")
    out: str = option("recovery.json", help="where the raw numbers go")


def measure(opts: RecoveryOptions, *, quiet: float = 30.0, progress: bool = True) -> dict[str, Any]:
    """Judge every subject (or those whose label is in ``opts.only``); after each one write the runs so far to
    ``opts.out + ".partial"`` (atomically), so an interrupted run keeps what it measured without replacing
    ``opts.out``; at the end write ``opts.out`` (atomically) and remove the partial file (:class:`ValueError`
    for an unknown label)."""
    from oij.io.atomic import write_text

    prov = capture()
    only = [x for x in opts.only.split(",") if x]
    chosen = [s for s in SUBJECTS if not only or s.label in only]
    unknown = set(only) - {s.label for s in SUBJECTS}
    if unknown:
        raise ValueError(f"unknown subject(s) {', '.join(sorted(unknown))}; known: "
                         + ", ".join(s.label for s in SUBJECTS))
    result: dict[str, Any] = {"experiment": "recovery", "provenance": prov, "runs": []}
    for s in chosen:
        r = judge(s, max_examples=opts.max_examples, restarts=opts.restarts, seed=opts.seed, timeout=opts.timeout,
                  quiet=quiet, shrinking=opts.shrinking)
        result["runs"].append(r)
        if opts.out != "-":
            write_text(opts.out + ".partial", json.dumps(result, indent=1) + "\n")
        if progress:
            print(f"{s.label:24s} {r['verdict']:14s} {r['cases']} cases, {r['plans']} plans, {r['wall_s']:.0f} s",
                  flush=True)
    write_text(opts.out, json.dumps(result, indent=1) + "\n")
    if opts.out != "-" and os.path.exists(opts.out + ".partial"):
        os.remove(opts.out + ".partial")
    return result


__all__ = ["SUBJECTS", "RecoveryOptions", "Subject", "judge", "measure"]
