"""Fixtures shared by the test modules: one pool of replica processes per module, and leak checks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from parallel.runtime.driver import Runtime

from .procs import alive, segments


@pytest.fixture(scope="module")
def rt() -> Iterator[Runtime]:
    """Four replica processes (spawn) for the module; afterwards none may be alive and no segment left."""
    r = Runtime(4, "spawn")
    pids = r.pids()
    yield r
    r.close()
    assert not any(alive(p) for p in pids), "a replica process outlived its runtime"
    assert not segments(), f"leaked segments: {segments()}"


@pytest.fixture(autouse=True)
def no_leaked_segments() -> Iterator[None]:
    """Every test: no shared-memory segment it created may outlive it (the pool's abort word excepted)."""
    before = segments()
    yield
    leaked = {s for s in segments() - before if not s.endswith("-abort")}
    assert not leaked, f"leaked segments: {leaked}"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One SparkSession (local[2]) for the whole run: a JVM per process is all pyspark allows."""
    from oij.spark.session import spark_session

    s = spark_session(
        "local[2]",
        driver_memory="2g",
        shuffle_partitions=2,
        conf={"spark.sql.adaptive.enabled": "false", "spark.default.parallelism": "2"},
    )
    yield s
    s.stop()
