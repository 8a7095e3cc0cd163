"""Shared by the test modules: one pool of replica processes per module, leak checks, the xdist groups that keep
one Spark JVM, one PyFlink gateway, one kit-power recording, one bare install and one docs build per run (and a
guard for the first two), and the tests' JVM options."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from oij.parallel.runtime.pool import Runtime

from . import jvm_archive
from .procs import alive, segments

# Every JVM the tests start (the Spark sessions and clusters, PyFlink's gateway, the Flink and Spark programs the
# adapters run) lives seconds to minutes and is judged on its output, never on its speed: C1 only and the serial
# collector start it with a fraction of the CPU that C2 and G1 warm up with (a 1,000-event `oij check` on Spark:
# 32 CPU-seconds with the defaults, 17 with these), and the test command is short of CPU on two cores.  Each JVM
# says "Picked up JAVA_TOOL_OPTIONS" on stderr.  A value already in the environment is kept.
os.environ.setdefault("JAVA_TOOL_OPTIONS", jvm_archive.JVM_OPTS)
# Every Spark JVM the tests start (the session below, and those of the commands and adapters they run) computes
# frames of a few hundred rows: there, compiling each query's Java code (whole-stage codegen, then Janino) costs
# more than interpreting its expressions.  Spark's own suites run both modes and hold them to the same answers;
# `oij check` keeps codegen (the bare-install test runs it so, on Spark's defaults).  Measured on
# tests/spark/test_spark.py alone: 58 CPU-seconds of the session's JVM with codegen, 43 without.
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--conf spark.sql.codegen.wholeStage=false "
                      "--conf spark.sql.codegen.factoryMode=NO_CODEGEN pyspark-shell")


def _group(item: pytest.Item) -> str | None:
    """The pytest-xdist group of a test (``--dist loadgroup`` keeps a group on one worker), or None.

    * ``spark-session``: every test that runs Spark in its own process: on the session-scoped ``spark``
      fixture, or marked ``spark_session`` (test_check_got.py's, which take it through
      ``request.getfixturevalue`` or run ``oij check`` in-process).  One worker starts one JVM for all of them;
      on two workers each started its own, and CPU is what the test command is short of.
    * ``flink-gateway``: the tests marked ``flink_gateway``, which drive Flink SQL through PyFlink in their own
      process (test_flink_adapter.py): PyFlink's gateway JVM lives until the process exits, so one per run.
    * ``kit-power``: the tests on the session-scoped accum recording (kit-power's recording: a process pair per
      case), recorded once instead of once per worker.
    * ``bare-install`` and ``docs-build``: the tests on test_bare_install.py's ``bare`` environment (a fresh venv
      and ``pip install .``: one to two minutes) and on test_docs_offline.py's ``built`` site (a Sphinx build:
      half a minute), module-scoped fixtures that a module spread over both workers built once on each; so is
      ``bench-quick``, on test_bench_experiments.py's ``quick_results`` (every experiment's quick run but Spark's,
      half a minute), kept out of ``spark-session`` so that it runs beside it.
    """
    names = getattr(item, "fixturenames", ())
    if "spark" in names or item.get_closest_marker("spark_session") is not None:
        return "spark-session"
    if item.get_closest_marker("flink_gateway") is not None:
        return "flink-gateway"
    if "accum_recording" in names:
        return "kit-power"
    for fixture, group in MODULE_BUILDS.items():
        if fixture in names:
            return group
    return None


MODULE_BUILDS = {"bare": "bare-install", "built": "docs-build", "quick_results": "bench-quick"}
"""Expensive module-scoped fixtures, by name, and the xdist group that keeps their tests on one worker."""


def pytest_configure(config: pytest.Config) -> None:
    """The controller (or a run without workers) starts building the Spark and Flink JVMs' class archives
    (tests/jvm_archive.py) that are missing; the tests start meanwhile."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        jvm_archive.start_building()


def pytest_unconfigure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        jvm_archive.stop_building()


@pytest.fixture(autouse=True)
def jvm_class_archive(request: pytest.FixtureRequest) -> None:
    """Every test: the JVMs it starts map the class archive for it once that exists (tests/jvm_archive.py:
    Flink's under tests/flink/, Spark's elsewhere)."""
    jvm_archive.use_when_ready(str(request.node.path))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks (it appends the group to each node id)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):  # -p no:xdist: no groups, and no xdist_group mark to know
        return
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True)
def jvms_stay_in_their_groups(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test outside the ``spark-session`` group may not start Spark's JVM in the worker's process, nor one
    outside ``flink-gateway`` PyFlink's: it would start a second JVM on the other worker (mark it
    ``spark_session`` or take the ``spark`` fixture; mark it ``flink_gateway``)."""
    started = jvms_started()
    yield
    problem = jvm_escape(request.node, started)
    if problem is not None:
        pytest.fail(problem)


def jvm_escape(item: pytest.Item, started_before: dict[str, bool]) -> str | None:
    """Why ``item`` (run just now) broke the grouping, or None: it started a group's JVM and is not in it."""
    for group, up in jvms_started().items():
        if up and not started_before[group] and _group(item) != group:
            mark = group.replace("-", "_")
            return (f"this test started a JVM in-process outside the {group} group: mark it "
                    f"@pytest.mark.{mark} (tests/conftest.py)")
    return None


def jvms_started() -> dict[str, bool]:
    """Per group, whether its JVM runs in this process: pyspark's gateway (it stays set after the session
    stops) and PyFlink's (it lives until the process exits)."""
    pyspark = sys.modules.get("pyspark")
    pyflink_gateway = sys.modules.get("pyflink.java_gateway")
    return {
        "spark-session": pyspark is not None and getattr(pyspark.SparkContext, "_gateway", None) is not None,
        "flink-gateway": pyflink_gateway is not None and getattr(pyflink_gateway, "_gateway", None) is not None,
    }


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
