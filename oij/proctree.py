"""The memory of a process and its descendants, read from Linux's ``/proc``: the one sampler of the project.

Used by ``oij conform --state-bound`` (``oij.testing._state``: the resident memory of the command's
tree after each chunk of a long case), by ``oij bench memory`` (:func:`measure`: peak PSS of the tree, peak
RSS of the main process and of its largest child) and, as a program, to record the peak memory of any
command::

    python -m oij.proctree OUT.json CMD [ARGS...]

which samples VmRSS of CMD's process and all its descendants every 0.5 s (for ``oij check``: the oij process
and the Spark JVM it starts) and writes the command, its exit code, its wall time, the main process's peak
RSS, the largest descendant's peak and the peak of their sum to OUT.json (atomically).  It was
``bench/rss_tree.py`` (used for ``bench/results/check-got-scale.json``).

Values a process no longer has (it ended between two reads) count as 0.  Linux only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import IO


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (``/proc/PID/task/*/children``; those that ended are left out)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                with contextlib.suppress(OSError, ValueError), open(f"/proc/{p}/task/{task}/children",
                                                                     encoding="ascii") as f:
                    todo += [int(c) for c in f.read().split()]
    return out


def kib(pid: int, field: str, name: str = "status") -> int:
    """The value of ``field`` (e.g. ``"VmRSS:"``, ``"VmHWM:"``; ``"Pss:"`` with ``name="smaps_rollup"``) in
    ``/proc/PID/NAME``, in KiB (0 where it cannot be read)."""
    with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{pid}/{name}", encoding="ascii",
                                                                    errors="replace") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def tree_rss(pid: int) -> int:
    """VmRSS in bytes of ``pid`` and its descendants, summed."""
    return sum(kib(p, "VmRSS:") for p in descendants(pid)) * 1024


def self_peak_kib() -> int:
    """VmHWM of this process in KiB: unlike ``ru_maxrss``, it belongs to this process's own address space and
    does not inherit the parent's peak across fork+exec."""
    peak = kib(os.getpid(), "VmHWM:")
    if not peak:
        raise RuntimeError("no VmHWM in /proc/self/status")
    return peak


_LAUNCHER = """
import os, sys
fd = int(sys.argv[1])
os.set_inheritable(fd, False)
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as e:
        os.write(2, f"{sys.argv[2]}: {e.strerror}\\n".encode())
    os._exit(127)
while True:
    try:
        _, status, ru = os.wait4(pid, 0)
        break
    except InterruptedError:
        pass
os.write(fd, f"{status} {ru.ru_utime!r} {ru.ru_stime!r} {ru.ru_maxrss}".encode())
os._exit(0)
"""
"""The launcher of :func:`run_own_usage`: a bare interpreter (``-I -S``, 5 to 7 MiB resident) that forks, execs
the command and reports ``wait4``'s status and usage of it on the file descriptor it is given."""


@dataclass(frozen=True)
class OwnUsage:
    """One command's run (:func:`run_own_usage`): wall seconds, CPU seconds of the command and the children it
    waited for, its own peak resident set in KiB, its exit code (``-N``: killed by signal N) and, when asked
    for, its standard error."""

    wall_s: float
    cpu_s: float
    peak_rss_kib: int
    returncode: int
    stderr: str = ""


def run_own_usage(argv: list[str], *, env: dict[str, str] | None = None, stdout: int | IO[bytes] | None = None,
                  capture_stderr: bool = False) -> OwnUsage:
    """Run ``argv`` to its end and return its own wall time, CPU time and peak RSS.

    ``ru_maxrss`` of a child that ``wait4`` returns is not the child's own peak: Linux keeps the high-water mark
    of the address space a process had before ``exec``, and a forked child starts with a copy of its parent's
    (``/bin/true`` started from a Python holding 300 MB reports 314 MB, from a small one 14).  So the command
    is started by a small launcher (``_LAUNCHER``), whose own small address space is the one copied: the peak
    reported is the command's own, or the launcher's (5 to 7 MiB) where the command stays below it.

    ``stdout`` is passed to :class:`subprocess.Popen` (``None``: this process's); ``capture_stderr`` reads the
    command's standard error into the result (else it is this process's).  The command runs in a session of its
    own; if this call is interrupted, the session is killed before the exception passes on.  Complexity: one
    extra interpreter start (about 10 ms).
    """
    r, w = os.pipe()
    t0 = time.perf_counter()
    try:
        p = subprocess.Popen([sys.executable, "-I", "-S", "-c", _LAUNCHER, str(w), *argv], env=env, stdout=stdout,
                             stderr=subprocess.PIPE if capture_stderr else None, pass_fds=(w,),
                             start_new_session=True)
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w)
    try:
        with os.fdopen(r, "rb") as f:
            err = p.stderr.read() if p.stderr is not None else b""
            report = f.read().decode()
        p.wait()
    except BaseException:
        with contextlib.suppress(OSError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise
    finally:
        if p.stderr is not None:
            p.stderr.close()
    wall = time.perf_counter() - t0
    if p.returncode != 0 or not report:
        raise RuntimeError(f"the launcher of {' '.join(argv)} exited with status {p.returncode}")
    status, utime, stime, maxrss = report.split()
    return OwnUsage(wall, float(utime) + float(stime), int(maxrss), os.waitstatus_to_exitcode(int(status)),
                    err.decode(errors="replace"))


@dataclass
class TreePeaks:
    """What :func:`measure` saw of one command's run (MiB)."""

    wall_s: float
    tree_pss_peak_mib: float  # the sum over the tree of PSS (shared memory counted once, in proportion)
    main_rss_peak_mib: float  # VmHWM of the command's own process
    child_rss_peak_mib: float  # the largest VmHWM of a descendant
    returncode: int = 0


class CommandFailed(RuntimeError):
    """A measured command exited with a non-zero status: the command, the status and its last line of stderr."""


def measure(argv: list[str], every: float = 0.1, *, stdout: int | IO[bytes] | None = subprocess.DEVNULL,
            check: bool = True) -> TreePeaks:
    """Run ``argv``; sample its process tree every ``every`` s: peak PSS summed over the tree, the main process's
    and the largest child's peak RSS.  ``check``: a non-zero exit raises ``CommandFailed`` with the last
    line of its stderr."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE if check else None, text=True)
    peak_sum = 0
    hwm: dict[int, int] = {}
    while p.poll() is None:
        total = 0
        for pid in descendants(p.pid):
            total += kib(pid, "Pss:", "smaps_rollup")
            hwm[pid] = max(hwm.get(pid, 0), kib(pid, "VmHWM:"))
        peak_sum = max(peak_sum, total)
        time.sleep(every)
    err = p.stderr.read() if p.stderr else ""
    if check and p.returncode != 0:
        last = (err.strip().splitlines() or ["(nothing on stderr)"])[-1]
        raise CommandFailed(f"{' '.join(argv)} exited with status {p.returncode}: {last}")
    kids = [v for k, v in hwm.items() if k != p.pid]
    return TreePeaks(time.perf_counter() - t0, peak_sum / 1024, hwm.get(p.pid, 0) / 1024,
                     max(kids, default=0) / 1024, p.returncode)


def record_rss(argv: list[str], every: float = 0.5) -> dict[str, object]:
    """Run ``argv`` (its output passes through) and sample VmRSS of its tree every ``every`` s: the command, its
    exit code, its wall time, the main process's peak, the largest descendant's peak and the peak of their sum
    (MiB, each process's value rounded down)."""
    t0 = time.time()
    proc = subprocess.Popen(argv)
    main_peak = child_peak = total_peak = 0
    while proc.poll() is None:
        r = {p: kib(p, "VmRSS:") // 1024 for p in descendants(proc.pid)}
        main_peak = max(main_peak, r.get(proc.pid, 0))
        child_peak = max(child_peak, max((v for p, v in r.items() if p != proc.pid), default=0))
        total_peak = max(total_peak, sum(r.values()))
        time.sleep(every)
    return {"cmd": argv, "rc": proc.returncode, "seconds": round(time.time() - t0, 1), "python_rss_mib": main_peak,
            "max_child_rss_mib": child_peak, "tree_rss_mib": total_peak}


def main(argv: list[str]) -> int:
    """``python -m oij.proctree OUT.json CMD [ARGS...]`` (the module docstring)."""
    if len(argv) < 2:
        print("usage: python -m oij.proctree OUT.json CMD [ARGS...]", file=sys.stderr)
        return 2
    out, cmd = argv[0], argv[1:]
    res = record_rss(cmd)
    tmp = f"{out}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out)
    print(res)
    return 0


__all__ = ["OwnUsage", "TreePeaks", "descendants", "kib", "measure", "record_rss", "run_own_usage", "self_peak_kib",
           "tree_rss"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
