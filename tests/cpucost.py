"""The CPU each test costs, with every process it starts: ``--cpu-report FILE`` (tests/conftest.py).

The test command is short of CPU, not of wall time: three workers share two cores, and a test that waits on a JVM
or a paced drive shows seconds in ``--durations`` while it costs little.  The budget needs the other figure: the
CPU seconds of the worker and of every process under it (JVMs, commands, replicas), counted per test:

* :class:`Cgroup` (where the machine lets the tests make a cgroup v1 ``cpuacct`` group, as root here): each
  worker moves itself into a group of its own at its first test, so every process it starts from then on is
  counted, whatever becomes of its parent (a JVM whose launcher exits is still counted); the group's
  ``cpuacct.usage`` is read around each test.  O(1).
* :func:`tree_cpu` (elsewhere): the CPU seconds of a process and of its live descendants, each with what its own
  reaped children used (``/proc/PID/stat``: utime, stime, cutime, cstime).  O(number of processes on the
  machine).  It misses a process that leaves the tree: PyFlink's gateway JVM under ``oij adapter flink-sql``
  (orphaned when the adapter exits) is 3 of the 26 CPU-seconds that a cgroup counts for
  ``tests/flink/test_flink_adapter.py``.
* :func:`record` (each worker, after each test): the difference across the test, one JSON line in the worker's
  part file ``FILE.WORKER``.
* :func:`merge` (the controller, at the end): the parts into ``FILE`` (written whole: temporary file, fsync,
  rename), the parts removed, and the costliest tests.

Either way it is a map of the cost, not an audit: a process a test leaves running (a session's JVM, a replica
pool) is charged to the tests that run while it works, session fixtures to the test that first asks for them;
the tree walk also counts twice the CPU a long-lived process had used before a test when it ends during the
test and its parent reaps it.  Linux only (``/proc``, ``/sys/fs/cgroup``); the report names the method.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children), or None when it has gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    fields = s.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces and parentheses
    return int(fields[1]), sum(int(x) for x in fields[11:15]) / TICK


def tree_cpu(root: int | None = None) -> float:
    """CPU seconds of process ``root`` (this one by default) and of every live descendant, with the children
    each has reaped: :math:`\\sum_{p \\in tree(root)} utime_p + stime_p + cutime_p + cstime_p`."""
    root = os.getpid() if root is None else root
    procs: dict[int, tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(name)
            if st is not None:
                procs[int(name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += procs.get(pid, (0, 0.0))[1]
        todo.extend(children.get(pid, ()))
    return total


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class Cgroup:
    """A cgroup v1 ``cpuacct`` group holding this process and everything it starts from :meth:`enter` on.

    :meth:`enter` makes the group (under this process's own) and moves this process into it, or returns False
    (no v1 ``cpuacct`` hierarchy, or no right to write it); :meth:`close` moves it, and whatever still runs in
    the group, back to the group it came from, and removes the group."""

    def __init__(self) -> None:
        self.dir: Path | None = None
        self._home: Path | None = None

    def enter(self) -> bool:
        try:
            own = next(line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                       if "cpuacct" in line.split(":", 2)[1].split(","))
            home = CPUACCT / own.strip().lstrip("/")
            d = home / f"oij-tests-{os.getpid()}"
            d.mkdir()
        except (OSError, StopIteration, IndexError):
            return False
        try:
            (d / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            d.rmdir()
            return False
        self.dir, self._home = d, home
        return True

    def usage(self) -> float:
        """CPU seconds of every process that has run in the group (``cpuacct.usage``, in ns)."""
        assert self.dir is not None
        return int((self.dir / "cpuacct.usage").read_text()) / 1e9

    def close(self) -> None:
        """This process, and any process still in the group (the run's last JVMs on their way out,
        multiprocessing's resource tracker, which ends with its worker), back in the home group; the group
        removed."""
        if self.dir is None or self._home is None:
            return
        for _ in range(5):
            try:
                pids = [os.getpid(), *(int(x) for x in (self.dir / "cgroup.procs").read_text().split())]
            except OSError:
                break
            for pid in pids:
                with contextlib.suppress(OSError):  # gone meanwhile
                    (self._home / "cgroup.procs").write_text(str(pid))
            try:
                self.dir.rmdir()
                break
            except OSError:
                time.sleep(0.1)  # a process forked meanwhile: move it too
        self.dir = None


class Meter:
    """One test's CPU and wall time: :meth:`start` before it, :meth:`stop` after it.  By the worker's cgroup
    where :class:`Cgroup` can make one (``method`` "cgroup"), else by :func:`tree_cpu` ("process tree")."""

    def __init__(self, cgroup: bool = True) -> None:
        self._cpu = 0.0
        self._t = 0.0
        self._group: Cgroup | None = None
        self._want_group = cgroup
        self.method = ""

    def _read(self) -> float:
        if not self.method:  # the first test: into a group of its own, if the machine allows
            group = Cgroup()
            if self._want_group and group.enter():
                self._group = group
            self.method = "cgroup" if self._group is not None else "process tree"
        return self._group.usage() if self._group is not None else tree_cpu()

    def start(self) -> None:
        self._cpu, self._t = self._read(), time.monotonic()

    def stop(self) -> tuple[float, float]:
        """(CPU seconds, wall seconds) since :meth:`start`."""
        return self._read() - self._cpu, time.monotonic() - self._t

    def close(self) -> None:
        if self._group is not None:
            self._group.close()


def part(path: str, worker: str) -> Path:
    """The part file of ``worker`` (``gw0``, ..., or ``main`` without xdist)."""
    return Path(f"{path}.{worker}")


def record(path: str, worker: str, nodeid: str, cpu: float, wall: float, method: str) -> None:
    """Append one test's line to ``worker``'s part file."""
    with open(part(path, worker), "a") as f:
        f.write(json.dumps({"test": nodeid, "worker": worker, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
                            "method": method}) + "\n")


def parts(path: str) -> list[Path]:
    """The part files of ``path`` that exist (``FILE.gw0``, ..., ``FILE.main``)."""
    target = Path(path)
    return sorted(p for p in target.parent.glob(target.name + ".*")
                  if p.name[len(target.name) + 1:] == "main" or p.name[len(target.name) + 1:].startswith("gw"))


def clear(path: str) -> None:
    """Remove the parts an interrupted earlier run left (the controller, before the workers start)."""
    for p in parts(path):
        p.unlink()


def merge(path: str, header: dict[str, Any]) -> list[dict[str, Any]]:
    """Every part of ``path`` into ``path`` itself (a JSON object: ``header``, then ``tests``, costliest first),
    written whole; the parts removed.  Returns the tests, costliest first."""
    target = Path(path)
    found = parts(path)
    rows: list[dict[str, Any]] = []
    for p in found:
        rows += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    rows.sort(key=lambda r: -float(r["cpu_s"]))
    methods = sorted({str(r.get("method", "")) for r in rows})
    doc = {**header, "methods": methods, "cpu_s": round(sum(float(r["cpu_s"]) for r in rows), 1), "tests": rows}
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    for p in found:
        p.unlink()
    return rows
