"""The run's /dev/shm check (``tests/conftest.py``'s ``pytest_sessionfinish``, :func:`tests.procs.shm_left`) finds
what a process really leaves there: a spawn-context ``Lock``'s semaphore and an unnamed ``SharedMemory`` block
whose process and resource tracker were killed (the negative controls), and nothing when the same process ends
normally.  Each child says the names it made, so the entries of tests running beside this one do not count."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import pytest

from tests.procs import SHM_PREFIXES, shm_entries, shm_left

CHILD = r"""
import os, signal, sys
import multiprocessing as mp
from multiprocessing import resource_tracker, shared_memory
lock = mp.get_context("spawn").Lock()
block = shared_memory.SharedMemory(create=True, size=64)
print("sem." + lock._semlock.name.lstrip("/"), block.name.lstrip("/"), flush=True)
if sys.argv[1] == "killed":
    os.kill(resource_tracker._resource_tracker._pid, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
block.close()
block.unlink()
"""


def _child(how: str) -> set[str]:
    p = subprocess.run([sys.executable, "-c", CHILD, how], capture_output=True, text=True, timeout=60, check=False)
    names = set(p.stdout.split())
    assert len(names) == 2 and all(n.startswith(SHM_PREFIXES) for n in names), (p.stdout, p.stderr)
    return names


@pytest.mark.timeout(120)
def test_a_killed_process_and_tracker_leave_entries_that_are_found() -> None:
    before = shm_entries()
    names = _child("killed")
    try:
        assert names <= shm_left(before, grace=1.0), "negative control: the leak is found"
    finally:
        for n in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"/dev/shm/{n}")
    assert not names & shm_left(before, grace=0.0)


@pytest.mark.timeout(120)
def test_a_process_that_ends_normally_leaves_nothing() -> None:
    before = shm_entries()
    names = _child("normal")
    assert not names & shm_left(before, grace=5.0)
