"""How long a default ``oij conform`` run takes: one process per case against one session for all cases.

Data flow::

    for each (implementation, mode): oij conform [--session] [-j J] -- CMD   (a child process, timed)
    for each adapter named:          oij conform --adapter NAME --profile P  (its own profile, one JVM)
        -> {impl, mode, jobs, wall_s, cpu_s (the tree's user+sys), cases, verdict}
    -> result {"runs": [...], "provenance": ...} written atomically to --out

The run is a child process so that its CPU time (and its children's: the implementation's processes)
is measured with ``RUSAGE_CHILDREN``.  Most of a per-case run is the implementation's start-up, paid once
per case; ``--session`` pays it once.  Timing is noisy on a shared machine: the load average at the start
of each run is recorded beside it.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oij.bench.results import capture

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Subject:
    """An implementation to time: a name, its command (empty for an adapter), whether it speaks the session
    protocol, and the arguments of ``oij conform`` that choose it (an adapter and the profile it follows)."""

    name: str
    argv: tuple[str, ...]
    session: bool
    chooses: tuple[str, ...] = ()


def subjects() -> list[Subject]:
    """The oracle's own command, and an implementation written apart from oij's code (it speaks the
    session protocol)."""
    return [Subject("oij join -", ("oij", "join", "-"), False),
            Subject("sorted_oij", (sys.executable, str(REPO / "tests" / "impls" / "sorted_oij.py")), True)]


def adapter_subject(name: str) -> Subject:
    """A real system through its adapter (``oij conform --adapter NAME``), judged against the profile the adapter
    names (at the canonical default it fails on its first differing case, which times nothing)."""
    from oij.adapters import ADAPTERS

    return Subject(f"adapter {name}", (), False, ("--adapter", name, "--profile", ADAPTERS[name].profile))


def time_conform(subject: Subject, mode: str, jobs: int = 1) -> dict[str, Any]:
    """Run ``oij conform`` at its defaults on ``subject`` (``mode`` ``per-case`` or ``session``); its wall
    and CPU seconds, cases and verdict line.  ``jobs`` 1 is the default itself, no ``-j`` (since issue 65 it runs
    a command's cases two at a time, the generated ones drawn first); another is ``-j N``."""
    argv = ["oij", "conform", *(["-j", str(jobs)] if jobs != 1 else [])] + (
        ["--session"] if mode == "session" else []) + [*subject.chooses]
    argv += ["--", *subject.argv] if subject.argv else []
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, check=False, cwd="/tmp")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    first = (p.stdout.splitlines() or [""])[0]
    m = re.search(r"(\d+) cases", first)
    return {"impl": subject.name, "mode": mode, "jobs": jobs, "argv": argv, "exit": p.returncode,
            "wall_s": round(wall, 2),
            "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2),
            "cases": int(m.group(1)) if m else None, "verdict": first, "load_avg_at_start": round(load, 2)}


def measure(out: str, *, jobs: tuple[int, ...] = (1, 2), adapters: tuple[str, ...] = ()) -> dict[str, Any]:
    """Time every subject per case (at each of ``jobs``) and, when it can, in a session, then each adapter of
    ``adapters`` at its defaults (one run: the adapter runs its cases in one system); write ``out``."""
    from oij.io.atomic import write_text

    prov = capture()
    runs = []
    for name in adapters:
        runs.append(time_conform(adapter_subject(name), "per-case"))
    for s in subjects():
        for j in jobs:
            run = time_conform(s, "per-case", j)
            runs.append(run if j == 1 else run | {"mode": f"per-case-j{j}"})
        if s.session:
            runs.append(time_conform(s, "session"))
    result = {"experiment": "conform-time", "provenance": prov, "runs": runs}
    write_text(out, json.dumps(result, indent=1) + "\n")
    return result
