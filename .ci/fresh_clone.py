"""The test command's cost from a fresh clone, recorded (issue 66's budget: ``bash .ci/run`` under 10 minutes).

``python .ci/fresh_clone.py`` clones this repository at ``HEAD`` into a temporary folder, runs ``bash .ci/run``
there (its own virtual environment, install included) and appends one record to ``tests/ci-runs.json``: the
commit, the UTC start, the command, its exit status, the wall time, the CPU seconds of every process it started,
pytest's summary line, and a machine-speed probe taken just before and just after.  It exits with the command's
exit status.  Run it on an otherwise idle machine: the budget is about two idle cores.

How the CPU is counted (the record's ``method``):

* ``cgroup``: the command runs in a cgroup v1 ``cpuacct`` group of its own (root, ``/sys/fs/cgroup/cpuacct``),
  created and removed here, so every process counts, the JVMs that outlive their launcher too;
* ``rusage``: elsewhere, the children's rusage, which misses a process nobody waits for (an orphaned JVM).

The probe (:func:`probe`) is a fixed Python loop in a process of its own: between sessions this machine's speed
drifts by a third or more, and a figure means little without it.  ``--command`` runs something else than the
test command (the tests of this script), ``--out`` records elsewhere; ``--log FILE`` keeps the command's whole
output.

The timeline (``cgroup`` only, the record's ``timeline``): every second a thread reads the group's CPU and the
command lines of its processes.  ``busy`` is the cores in use in each window of ``window_s`` seconds (2.0: both
cores busy), ``phases`` the first and last second at which a process of each phase was seen (:data:`PHASES`),
so that where the run leaves a core idle shows, and in which phase.

Data flow: git clone (a temporary folder, removed at the end) -> the command in its group, sampled by a thread
-> one record -> the records file, rewritten whole (temporary file, fsync, rename).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "tests" / "ci-runs.json"
BUDGET_S = 600.0
"""Issue 66: the fresh-clone ``bash .ci/run`` under 10 minutes on an otherwise idle machine."""
CGROUPS = Path("/sys/fs/cgroup/cpuacct")
PROBE = "import time\nt = time.perf_counter()\nd = {}\nfor i in range(6_000_000):\n    d[i & 1023] = i\n" \
        "print(time.perf_counter() - t)\n"
"""The machine-speed probe: 6,000,000 dict stores in one Python process (about 0.5 s on this project's machine
on a fast day)."""

_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in ([\d.]+)s")


def probe() -> float:
    """Seconds the probe loop takes in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    return round(float(out), 3)


def pytest_summary(output: str) -> dict[str, Any] | None:
    """The last pytest summary line of ``output`` (``1 failed, 1,024 passed in 655.12s``) as its counts and
    seconds, or None when there is none."""
    found = None
    for line in output.splitlines():
        m = _SUMMARY.match(line.strip())
        if m is not None:
            found = m
    if found is None:
        return None
    counts = {}
    for part in found.group(1).split(", "):
        n, word = part.split(" ", 1)
        counts[word] = int(n)
    return {"line": found.group(0).strip("= "), "counts": counts, "seconds": float(found.group(2))}


def wait_empty(group: Path, timeout: float = 60.0) -> None:
    """Until no process is left in ``group`` (a JVM still writing at its exit), or ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and (group / "cgroup.procs").read_text().strip():
        time.sleep(0.5)


GRACE_S = 60.0
"""How long the processes a run leaves in its group may take to exit (a JVM still writing) before they are
killed."""


def cmdline(pid: str) -> str:
    """Process ``pid``'s command line, its arguments joined by spaces.  Raises OSError once it has exited."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def kill_left(group: Path) -> list[str]:
    """SIGKILL every process still in ``group``; their command lines (a run that leaves a process behind is a
    bug of the run: the caller says so)."""
    import signal

    left = []
    for pid in (group / "cgroup.procs").read_text().split():
        with contextlib.suppress(OSError):
            left.append(cmdline(pid)[:200])
            os.kill(int(pid), signal.SIGKILL)
    return left


@contextlib.contextmanager
def cpu_group(name: str) -> Iterator[Path | None]:
    """A cgroup v1 ``cpuacct`` group of its own (None where one cannot be made); removed afterwards, once the
    processes left in it have exited (up to :data:`GRACE_S`), or have been killed (each named on stderr)."""
    path = CGROUPS / name
    try:
        path.mkdir()
    except OSError:
        yield None
        return
    try:
        yield path
    finally:
        wait_empty(path, GRACE_S)
        for cmd in kill_left(path):
            print(f"fresh_clone: killed a process the run left behind: {cmd}", file=sys.stderr)
        wait_empty(path, 10.0)
        with contextlib.suppress(OSError):
            path.rmdir()


PHASES = {"pip": "pip install", "compileall": "-m compileall", "mypy": "typecheck.py", "sphinx": "sphinx-build",
          "pytest": "-m pytest", "pytest-workers": "exec(eval(sys.stdin.readline()))"}
"""The timeline's phases: a process whose command line holds the text is in the phase (pytest-xdist's workers
are ``python -c`` processes that run execnet's bootstrap, read from their stdin)."""


class Timeline:
    """Samples a cgroup every ``every`` seconds from a thread: its CPU, and which :data:`PHASES` have a process.

    Started with :meth:`start`, stopped with :meth:`stop`, which returns the record's ``timeline``."""

    def __init__(self, group: Path, window_s: float = 10.0, every: float = 1.0) -> None:
        self.group, self.window_s, self.every = group, window_s, every
        self.samples: list[tuple[float, float]] = []  # (seconds since the start, CPU-seconds of the group)
        self.seen: dict[str, list[float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread.start()

    def _sample(self) -> None:
        t = time.monotonic() - self._t0
        with contextlib.suppress(OSError, ValueError):
            self.samples.append((t, int((self.group / "cpuacct.usage").read_text()) / 1e9))
        with contextlib.suppress(OSError):
            pids = (self.group / "cgroup.procs").read_text().split()
            for pid in pids:
                with contextlib.suppress(OSError):
                    cmd = cmdline(pid)
                    for phase, text in PHASES.items():
                        if text in cmd:
                            first_last = self.seen.setdefault(phase, [t, t])
                            first_last[1] = t

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        self._sample()
        busy = []
        edge, last_t, last_cpu = self.window_s, 0.0, 0.0
        for t, cpu in self.samples:
            if t >= edge:
                busy.append(round((cpu - last_cpu) / (t - last_t), 2))
                last_t, last_cpu, edge = t, cpu, edge + self.window_s
        return {"window_s": self.window_s, "busy": busy,
                "phases": {k: [round(a, 1), round(b, 1)] for k, (a, b) in self.seen.items()}}


def measure(command: str, cwd: Path, log: Path | None = None) -> dict[str, Any]:
    """Run ``command`` (a shell line) in ``cwd`` and return its exit status, wall and CPU seconds, the method of
    counting and pytest's summary.  The environment is the caller's without an active virtual environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH")}
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                      if not p.startswith(venv))
    with cpu_group(f"oij-fresh-{os.getpid()}") as group, tempfile.TemporaryFile("w+") as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()

        def join_group() -> None:
            if group is not None:
                (group / "cgroup.procs").write_text(str(os.getpid()))

        timeline = Timeline(group) if group is not None else None
        if timeline is not None:
            timeline.start()
        rc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                            preexec_fn=join_group, check=False).returncode
        wall = time.monotonic() - start
        sampled = timeline.stop() if timeline is not None else None
        if group is not None:
            wait_empty(group, GRACE_S)  # the processes that outlive the command (a JVM at its exit) count too
            cpu, method = int((group / "cpuacct.usage").read_text()) / 1e9, "cgroup"
        else:
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            method = "rusage"
        out.seek(0)
        text = out.read()
    if log is not None:
        log.write_text(text)
    record = {"exit": rc, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "method": method,
              "pytest": pytest_summary(text)}
    if sampled is not None:
        record["timeline"] = sampled
    return record


def describe(repo: Path, rev: str) -> tuple[str, str]:
    """The full hash of ``rev`` and its short name.  Raises ValueError when ``repo`` is not a git repository
    or ``rev`` not one of its commits."""
    def git(*args: str) -> str:
        p = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
        if p.returncode != 0:
            why = p.stderr.strip().splitlines()
            raise ValueError(f"{repo}: no commit {rev!r}" + (f" ({why[-1]})" if why else ""))
        return p.stdout.strip()
    if not repo.is_dir():
        raise ValueError(f"{repo}: not a directory")
    return git("rev-parse", "--verify", "-q", f"{rev}^{{commit}}"), git("rev-parse", "--short", f"{rev}^{{commit}}")


def fresh_clone_run(repo: Path, rev: str, command: str, log: Path | None = None) -> dict[str, Any]:
    """Clone ``repo`` at ``rev`` into a temporary folder, run ``command`` there and return the record."""
    commit, short = describe(repo, rev)
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with tempfile.TemporaryDirectory(prefix="oij-fresh-") as tmp:
        clone = Path(tmp) / "oij"
        subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", commit], cwd=clone, check=True)
        speed_before = probe()
        result = measure(command, clone, log)
        speed_after = probe()
    return {"commit": commit, "short": short, "started": started, "command": command, **result,
            "probe_s": [speed_before, speed_after], "budget_s": BUDGET_S,
            "within_budget": result["exit"] == 0 and result["wall_s"] <= BUDGET_S}


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Add ``record`` to the JSON list in ``path`` (created if missing), the file rewritten whole
    (:func:`oij.io.atomic.atomic_text`: a temporary file beside it, fsync, rename)."""
    from oij.io.atomic import atomic_text

    records = json.loads(path.read_text()) if path.exists() else []
    records.append(record)
    with atomic_text(str(path)) as f:
        json.dump(records, f, indent=1)
        f.write("\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", default="HEAD", help="the commit to clone (default: HEAD)")
    ap.add_argument("--repo", type=Path, default=ROOT, help="the repository to clone (default: this one)")
    ap.add_argument("--command", default="bash .ci/run", help="what to run in the clone (default: bash .ci/run)")
    ap.add_argument("--out", type=Path, default=RECORDS, help=f"the records file (default: {RECORDS})")
    ap.add_argument("--log", type=Path, default=None, help="keep the command's whole output in this file")
    args = ap.parse_args(argv)
    if importlib.util.find_spec("oij") is None:  # append_record's writer: the record would be lost at the end
        print("fresh_clone: cannot record a run: no module named 'oij' (run it with the project's venv active)",
              file=sys.stderr)
        return 2
    try:
        describe(args.repo, args.rev)  # a bad --repo or --rev: one line and exit 2, before any clone
    except ValueError as e:
        print(f"fresh_clone: {e}", file=sys.stderr)
        return 2
    record = fresh_clone_run(args.repo, args.rev, args.command, args.log)
    append_record(args.out, record)
    summary = record["pytest"]["line"] if record["pytest"] else "no pytest summary"
    print(f"{record['short']}: exit {record['exit']}, {record['wall_s']:.0f} s wall "
          f"({record['wall_s'] / 60:.1f} min; budget {BUDGET_S / 60:.0f}), {record['cpu_s']:.0f} CPU-s "
          f"({record['method']}); {summary}; probe {record['probe_s'][0]} / {record['probe_s'][1]} s")
    return int(record["exit"])


if __name__ == "__main__":
    sys.exit(main())
