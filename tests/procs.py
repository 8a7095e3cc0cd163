"""Helpers for the tests that start replica processes: leak checks and engine options over a shared pool."""

from __future__ import annotations

import os
from typing import Any

from oij.parallel.registry import EngineOptions
from oij.parallel.runtime.pool import Runtime


def segments() -> set[str]:
    """This process's oij segments in /dev/shm (the runtime names them ``oij-<pid>-...``)."""
    return {n for n in os.listdir("/dev/shm") if n.startswith(f"oij-{os.getpid()}-")}


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
