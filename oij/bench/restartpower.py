"""``oij bench kit-power --restarts``: the restart mode's power, measured with state-drop mutants.

Each mutant is the oracle as a restartable command that restores one component of its checkpoint wrongly
(``tests/impls/state_drop.py``: every channel's watermark, W, the stored bases and probes, a left join's
matched set, the aggregate cursors, the purge marks; each dropped or restored from one checkpoint earlier),
and beside them the recovery bugs of ``tests/impls/restart_bugs.py`` (rows after the checkpoint line, rows
printed again, no restore, a forgotten matched set, only the minimum watermark kept).  Each runs under
``oij conform --restarts 1`` at its defaults (20 generated cases, seed 0, every kill plan of
:func:`oij.testing._restarts.plans`); exit 1 is a kill.  A mutant listed as equivalent in the file
(``EQUIVALENT``, with its argument) that is killed makes the entry stale; any other survivor fails the run.

Data flow::

    state_drop.py --list, restart_bugs.MODES --> one `oij conform --restarts 1 -- python FILE NAME` each
      (subprocess, --jobs at once, its own session, killed with its group on --timeout)
      --> exit code, "minimal case of N events", verdict kind, "found in N cases" --> JSON (+ docs table)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from oij.io.atomic import write_text

STATE_DROP = "tests/impls/state_drop.py"
RESTART_BUGS = "tests/impls/restart_bugs.py"
RESTART_SHAPES = ("checkpoint-before-emit", "reemit-after-restore", "no-restore", "forget-matched",
                  "min-watermark")
"""The recovery bugs of restart_bugs.py (its ``correct`` mode must pass)."""

_MIN = re.compile(r"minimal case of (\d+) events, found in (\d+) cases")
_KIND = re.compile(r"is NOT exactly once \(([\w-]+)")


@dataclass
class RestartMutant:
    """One restartable command with a recovery bug, and its verdict under ``oij conform --restarts 1``."""

    name: str
    file: str
    equivalent: str = ""  # the file's argument that no output tells it apart ("" for none)
    verdict: str = ""  # killed | survived | equivalent | stale-equivalent | timeout | error
    kind: str = ""  # the verdict of the restart protocol: lossy, at-least-once, wrong, error
    seconds: float = 0.0
    replay_events: int | None = None
    cases: int | None = None
    tail: str = ""


def list_mutants(repo: Path) -> list[RestartMutant]:
    """The state-drop mutants (``state_drop.py --list``), then the recovery bugs of restart_bugs.py."""
    listing = subprocess.run([sys.executable, str(repo / STATE_DROP), "--list"], capture_output=True, text=True,
                             check=True, timeout=60).stdout
    out = []
    for row in listing.splitlines():
        name, _, why = row.partition("\t")
        out.append(RestartMutant(name, STATE_DROP, why))
    return out + [RestartMutant(n, RESTART_BUGS) for n in RESTART_SHAPES]


def run_one(m: RestartMutant, repo: Path, timeout: float, extra: tuple[str, ...] = ()) -> RestartMutant:
    """``oij conform --restarts 1`` at its defaults on ``m`` (in a temporary directory); sets its verdict."""
    with tempfile.TemporaryDirectory(prefix="oij-restart-power-") as tmp:
        argv = [sys.executable, "-m", "oij.cli", "conform", "--restarts", "1", "--replay-out",
                str(Path(tmp) / "fail.jsonl"), *extra, "--", sys.executable, str(repo / m.file), m.name]
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp, text=True,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            out, m.verdict = "", "timeout"
        finally:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        m.seconds = round(time.perf_counter() - t0, 2)
    if m.verdict == "timeout":
        return m
    if p.returncode == 1:
        m.verdict = "stale-equivalent" if m.equivalent else "killed"
        mm, kd = _MIN.search(out), _KIND.search(out)
        m.replay_events, m.cases = (int(mm.group(1)), int(mm.group(2))) if mm else (None, None)
        m.kind = kd.group(1) if kd else ""
    elif p.returncode == 0:
        m.verdict = "equivalent" if m.equivalent else "survived"
        m.tail = out.strip().splitlines()[-1] if out.strip() else ""
    else:
        m.verdict, m.tail = "error", "\n".join(out.strip().splitlines()[-5:])
    return m


def restart_power(repo: Path, jobs: int, timeout: float, out: str, docs: str | None,
                  table: str = "kit-power-restarts-table.rst", command: str = "",
                  extra: tuple[str, ...] = ()) -> int:
    """Run every mutant of :func:`list_mutants`, write the JSON to ``out`` (and the table to ``docs``), print
    the summary; 1 unless every mutant is killed or (with its argument) equivalent.  ``extra``: more options of
    ``oij conform`` (the tests' ``--max-examples``; the measurement runs at the defaults)."""
    from oij.bench.host import machine
    from oij.bench.results import capture

    mutants = list_mutants(repo)
    print(f"kit-power --restarts: {len(mutants)} restartable mutants; {jobs} at a time", flush=True)
    t0 = time.perf_counter()
    done: list[RestartMutant] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for m in pool.map(lambda x: run_one(x, repo, timeout, extra), mutants):
            done.append(m)
            print(f"  [{len(done):>3}/{len(mutants)}] {m.verdict:<10} {m.seconds:7.1f}s  {m.name:<24} "
                  f"{m.kind or ''} {'' if m.replay_events is None else f'replay {m.replay_events} events'}"
                  f"{'' if m.cases is None else f', case {m.cases}'}", flush=True)
    counts = {v: sum(1 for m in done if m.verdict == v)
              for v in ("killed", "equivalent", "survived", "stale-equivalent", "timeout", "error")}
    result: dict[str, Any] = {
        "command": command,
        "provenance": capture(command, repo),
        "machine": machine(),
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "counts": counts,
        "mutants": [asdict(m) for m in done],
    }
    write_text(out, json.dumps(result, indent=1) + "\n")
    if docs:
        Path(docs).mkdir(parents=True, exist_ok=True)
        write_text(str(Path(docs) / table), render_rst(result))
    print(", ".join(f"{k} {v}" for k, v in counts.items()))
    bad = counts["survived"] + counts["stale-equivalent"] + counts["timeout"] + counts["error"]
    return 1 if bad else 0


def render_rst(result: dict[str, Any]) -> str:
    """The table of ``oij bench kit-power --restarts`` for the docs."""
    m = result["machine"]
    rst = [".. Generated by oij bench kit-power --restarts --docs.", "",
           f"Measured on {m['cores']} cores, load average at the start {m['load_avg'][0]:.2f}; "
           f"{result['wall_seconds']:,.0f} s of wall time.", "",
           ".. list-table:: restartable mutants under ``oij conform --restarts 1`` at its defaults",
           "   :header-rows: 1", "", "   * - mutant", "     - verdict", "     - restart verdict",
           "     - replay events", "     - found in case", "     - seconds"]
    for x in result["mutants"]:
        rst += [f"   * - ``{x['name']}``", f"     - {x['verdict']}", f"     - {x['kind'] or '--'}",
                f"     - {'--' if x['replay_events'] is None else x['replay_events']}",
                f"     - {'--' if x['cases'] is None else x['cases']}", f"     - {x['seconds']:.1f}"]
    return "\n".join(rst) + "\n"
