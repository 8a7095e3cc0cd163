"""Helpers for the tests that start replica processes: leak checks and engine options over a shared pool."""

from __future__ import annotations

import os
from typing import Any

from oij.parallel.registry import EngineOptions
from oij.parallel.runtime.pool import Runtime


def segments() -> set[str]:
    """This process's oij segments in /dev/shm (the runtime names them ``oij-<pid>-...``)."""
    return {n for n in os.listdir("/dev/shm") if n.startswith(f"oij-{os.getpid()}-")}


SHM_PREFIXES = ("oij-", "sem.mp-", "psm_", "mp-")
"""What processes of this project leave in /dev/shm when they leak: the runtime's segments (``oij-``),
multiprocessing's semaphores (``sem.mp-``, a ``Lock`` or a ``Queue``), and unnamed ``SharedMemory`` blocks
(``psm_``) and those of older Pythons (``mp-``)."""


def shm_entries() -> set[str]:
    """The entries of /dev/shm that :data:`SHM_PREFIXES` names."""
    return {n for n in os.listdir("/dev/shm") if n.startswith(SHM_PREFIXES)}


def shm_left(before: set[str], grace: float = 10.0) -> set[str]:
    """The entries of /dev/shm (:func:`shm_entries`) that were not there ``before`` and are still there after
    ``grace`` seconds: a process that ends hands its semaphores to its resource tracker, which unlinks them a
    moment later."""
    import time

    deadline = time.monotonic() + grace
    while True:
        left = shm_entries() - before
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)


def alive(pid: int) -> bool:
    """True iff process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def opts(rt: Runtime, replicas: int, batch: int, emitters: int, **extra: Any) -> EngineOptions:
    """Engine options that run on the shared pool ``rt``."""
    return EngineOptions(replicas=replicas, batch=batch, emitters=emitters, runtime=rt, settings=extra)
