"""One command's own wall time, CPU time and peak resident set, as the benches that time whole commands report them.

Data flow: the caller -> a launcher process (a bare interpreter) -> fork + exec of the command; the launcher
waits for it (``wait4``) and writes its status and usage on a pipe the caller reads.

Why a launcher: ``ru_maxrss`` of a child that ``wait4`` returns is not the child's own peak.  Linux keeps the
high-water mark of the address space a process had before ``exec``, and a forked child starts with a copy of its
parent's: ``/bin/true`` started straight from a Python holding 300 MB reports 314 MB, from a small one 14.  The
launcher's own small address space is the one copied, so the peak reported is the command's own, or the
launcher's (5 to 7 MiB) where the command stays below it.  (``oij.proctree`` samples ``VmHWM``, which is a
process's own too, for the memory benches.)

Processes: the caller creates the launcher (a session of its own) and waits for it; the launcher creates the
command and waits for it.  If the caller is interrupted, it kills the session (launcher and command) before the
exception passes on.  Linux only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import IO

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
    """Run ``argv`` to its end through the launcher (module docstring) and return its own wall time, CPU time
    (the command's and its waited-for children's) and peak RSS.

    ``stdout`` is passed to ``subprocess.Popen`` (``None``: this process's); ``capture_stderr`` reads the
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


__all__ = ["OwnUsage", "run_own_usage"]
