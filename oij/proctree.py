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


__all__ = ["TreePeaks", "descendants", "kib", "measure", "record_rss", "self_peak_kib", "tree_rss"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
