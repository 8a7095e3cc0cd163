"""Shared by the test modules: one pool of replica processes per module, leak checks, the xdist groups that keep
one Spark JVM, one PyFlink gateway, one kit-power recording, one bare install and one docs build per run (and a
guard for the first two), and the tests' JVM options."""

from __future__ import annotations

import gc
import os

# numpy's OpenBLAS starts a thread per core when numpy is imported, and they spin a while: about 0.06 CPU-seconds
# per process that imports numpy (20 `python -c "import numpy"`: 2.75 CPU-seconds, 1.47 with one thread).  Nothing
# in oij calls BLAS (no matrix products, no linear algebra), and the tests start hundreds of such processes (the
# workers, oij's commands, Spark's Python workers, the replicas): one thread, set before this file imports numpy,
# and inherited by every process the tests start.  A value already in the environment is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oij.parallel.runtime.pool import Runtime

from . import cpucost, jvm_archive
from .procs import alive, segments, shm_entries, shm_left

# Every JVM the tests start (the Spark sessions and clusters, PyFlink's gateway, the Flink and Spark programs the
# adapters run) lives seconds to minutes and is judged on its output, never on its speed: C1 only and the serial
# collector start it with a fraction of the CPU that C2 and G1 warm up with (a 1,000-event `oij check` on Spark:
# 32 CPU-seconds with the defaults, 17 with these), and the test command is short of CPU on two cores.  C1 alone
# also shrinks the code cache the JVM reserves from 240 MB to 48 MB, which Spark's long-lived session JVM fills:
# the JVM then flushes compiled methods, runs them interpreted and compiles them again.  The code cache is set back
# to 256 MB: the 98 tests of the two session JVMs, on two workers, took 375.1 CPU-seconds with 48 MB (of the JVMs'
# threads, the code cache's sweeper 17.2 and the compiler 33.5), 322.0 with 256 MB (0 and 17.6;
# tests/cost-history.md, session 27).  Each JVM says "Picked up JAVA_TOOL_OPTIONS" on stderr.  A value already in
# the environment is kept.
os.environ.setdefault("JAVA_TOOL_OPTIONS", jvm_archive.JVM_OPTS)
# Every Spark JVM the tests start (the session below, and those of the commands and adapters they run) computes
# frames of a few hundred rows: there, compiling each query's Java code (whole-stage codegen, then Janino) costs
# more than interpreting its expressions.  Spark's own suites run both modes and hold them to the same answers;
# `oij check` keeps codegen (the bare-install test runs it so, on Spark's defaults).  Measured on
# tests/spark/test_spark.py alone: 58 CPU-seconds of the session's JVM with codegen, 43 without.  And each sort or
# aggregation task takes its memory in pages that Spark sizes from the heap (32 MB for the session's 2 GB on two
# cores), on the heap and zeroed for a few hundred rows: the session's heap grew to its 2 GB, with a full
# collection every two to three seconds.  With 1 MB pages it stays under 400 MB, and the collector's thread takes
# half the CPU (the session groups' 98 tests on two workers: 11.9 and 12.2 CPU-seconds against 18.3 and 18.6);
# the tests' CPU in all is the same within the noise (325.9 and 342.8 against 322.0 and 327.8; tests/cost-history.md,
# session 27): kept for the memory, 1.6 GB less per session JVM.
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--conf spark.sql.codegen.wholeStage=false "
                      "--conf spark.sql.codegen.factoryMode=NO_CODEGEN --conf spark.buffer.pageSize=1m pyspark-shell")


def _group(item: pytest.Item) -> str | None:
    """The pytest-xdist group of a test (``--dist loadgroup`` keeps a group on one worker), or None.

    * ``spark-session``: every test that runs Spark in its own process: on the session-scoped ``spark``
      fixture, or marked ``spark_session`` (test_check_got.py's, which take it through
      ``request.getfixturevalue`` or run ``oij check`` in-process).  One worker starts one JVM for all of them
      (a JVM per worker would start one on every worker).  Until session 28 a third of them were a second group
      on a second JVM, to halve the longest chain; since the JVM's code cache stopped thrashing (session 27) one
      chain is short enough: the warm pytest line took 962.5 CPU-seconds and 504 s with one group, 1,018.7 and
      534 s with two, one run each, in turn (tests/cost-history.md, session 28).  xdist hands out the largest
      group first, so the chain starts with the run.
    * ``flink-gateway``: the tests marked ``flink_gateway``, which drive Flink SQL through PyFlink in their own
      process (test_flink_adapter.py): PyFlink's gateway JVM lives until the process exits, so one per run.
    * ``kit-power``: the tests on the session-scoped accum recording (kit-power's recording: a process pair per
      case), recorded once instead of once per worker.
    * ``bare-install`` and ``docs-build``: the tests on test_bare_install.py's ``bare`` environment (a fresh venv
      and ``pip install .``: one to two minutes) and on test_docs_offline.py's ``built`` site (a Sphinx build:
      half a minute), module-scoped fixtures that a module spread over both workers built once on each; so is
      ``bench-quick``, on test_bench_experiments.py's ``quick_results`` (every experiment's quick run but Spark's,
      half a minute), kept out of ``spark-session`` so that it runs beside it; so is ``flink-ds-session``, on
      test_flink_ds_adapter.py's ``answers`` (one flink-ds session JVM for the profile cases).
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


MODULE_BUILDS = {"bare": "bare-install", "built": "docs-build", "quick_results": "bench-quick",
                 "answers": "flink-ds-session"}
"""Expensive module-scoped fixtures, by name, and the xdist group that keeps their tests on one worker."""

def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-report", metavar="FILE", default=None,
                     help="write the CPU seconds of each test, with every process it starts, to FILE (JSON, "
                          "costliest first) and list the costliest (tests/cpucost.py)")


_METER = cpucost.Meter()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Under ``--cpu-report``: each test's CPU (setup, call, teardown), into this worker's part file."""
    path = item.config.getoption("cpu_report")
    if path is not None:
        _METER.start()
    yield
    if path is not None:
        cpu, wall = _METER.stop()
        cpucost.record(path, os.environ.get("PYTEST_XDIST_WORKER", "main"), item.nodeid, cpu, wall, _METER.method)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Under ``--cpu-report``, in the controller (or a run without workers): the parts merged, the costliest
    tests listed."""
    path = config.getoption("cpu_report")
    if path is None or os.environ.get("PYTEST_XDIST_WORKER") is not None:
        return
    import subprocess

    commit = subprocess.run(["git", "-C", str(config.rootpath), "describe", "--always", "--dirty", "--abbrev=40"],
                            capture_output=True, text=True, check=False).stdout.strip()  # -dirty: changed files
    rows = cpucost.merge(path, {"command": " ".join(config.invocation_params.args), "commit": commit})
    tr = terminalreporter
    tr.write_sep("=", f"CPU per test, with the processes it starts ({path})")
    tr.write_line(f"{sum(r['cpu_s'] for r in rows):.0f} CPU-seconds in {len(rows)} tests; the costliest:")
    for r in rows[:25]:
        tr.write_line(f"{r['cpu_s']:7.1f} s CPU {r['wall_s']:7.1f} s wall  {r['test']}")


def pytest_configure(config: pytest.Config) -> None:
    """The controller (or a run without workers) starts building the Spark and Flink JVMs' class archives
    (tests/jvm_archive.py) that are missing; the tests start meanwhile."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        jvm_archive.start_building()
        if config.getoption("cpu_report", None) is not None:
            cpucost.clear(config.getoption("cpu_report"))  # an interrupted run's parts


_SHM_AT_START: set[str] = set()


def pytest_sessionstart(session: pytest.Session) -> None:
    """The controller (or a run without workers) notes what /dev/shm holds before any test runs."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        _SHM_AT_START.update(shm_entries())


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Iterator[None]:
    """The controller, after every other plugin's end of the session (xdist's stops the workers): nothing the
    run created may stay in /dev/shm (a segment, a multiprocessing semaphore).  The per-test check
    (``no_leaked_segments``) sees only the runtime's segments of its own process; this one sees every process's,
    the killed and restarted ones too, and fails the run."""
    yield
    if os.environ.get("PYTEST_XDIST_WORKER") is not None:
        return
    left = shm_left(_SHM_AT_START)
    if left:
        session.config.get_terminal_writer().line(f"left in /dev/shm by this run: {sorted(left)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    _METER.close()  # (--cpu-report) this process back in its own cgroup, the worker's group removed
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        jvm_archive.stop_building()


@pytest.fixture(autouse=True)
def jvm_class_archive(request: pytest.FixtureRequest) -> None:
    """Every test: the JVMs it starts map the class archive for it once that exists (tests/jvm_archive.py:
    Flink's under tests/flink/, Spark's elsewhere)."""
    jvm_archive.use_when_ready(str(request.node.path))


ENGINE_MARKS = ("spark", "spark_session", "flink", "flink_gateway", "pathway")
"""The marks of the tests that run a real engine (a JVM, Pathway): each is also ``slow``."""

SLOW: dict[str, str] = {
    "tests/spark/": "a real Spark: the session's JVM, local clusters, streaming queries killed and restarted",
    "tests/flink/": "a real Flink: PyFlink's gateway JVM, DataStream jobs, restarts from checkpoints",
    "tests/pathway/": "a real Pathway: its engine per case, persistent storage, restarts",
    "tests/commands/test_bare_install.py": "a fresh virtual environment and `pip install .` (one to two minutes)",
    "tests/project/test_docs_offline.py": "a Sphinx build of the docs (half a minute)",
    "tests/project/test_architecture.py::test_the_suite_collects_without_xdist": "a second pytest collecting",
    "tests/bench/test_bench_experiments.py": "every experiment's quick run, the engines' and Spark's",
    "tests/bench/test_peers.py": "oij bench peers --quick: oij and the peer systems (a Flink JVM) on a workload",
    "tests/bench/test_kit_power.py": "kit-power: oij conform run on each of a sample of mutants, and its recording",
    "tests/proofs/test_model.py": "explicit-state model checking: every interleaving, of mutated engines too",
    "tests/testing/test_restarts.py": "implementations killed with SIGKILL and restarted, case after case",
    "tests/testing/test_kit_representation.py": "the generator driven to every representation edge; state-bound "
                                                "runs of long streams",
    "tests/testing/test_kit_regressions.py": "a default oij conform run per known bug shape",
    "tests/io/test_nothing_lost.py": "fuzzed files through every command; writers under signals and a full disk",
    # the differential tests with the most examples or the largest workloads (each 30 s or more of CPU on the
    # shared two-core machine under load, measured with --durations): the fast loop keeps the smaller ones
    "tests/reference/test_block_oracle.py::test_join_bytes_equal_the_event_path": "presets of 10^4-10^5 events",
    "tests/reference/test_block_oracle.py::test_vectors_verify_a_subset": "the kit's vectors through a command",
    "tests/reference/test_block_oracle.py::test_every_block_prefix_equals_the_oracle": "every prefix, every block",
    "tests/reference/test_block_oracle.py::test_fuzzed_files_give_the_event_paths_bytes_and_errors": "fuzzed files",
    "tests/reference/test_block_oracle.py::test_conformance_cases_equal_the_oracle": "the kit's generated cases",
    "tests/reference/test_block_oracle.py::test_conform_passes_the_command": "oij conform on a command",
    "tests/reference/test_oracle.py::test_negative_control_is_caught": "a mutant oracle per Hypothesis search",
    "tests/reference/test_oracle.py::test_oracle_equals_spec_after_every_event": "the spec rerun after every event",
    "tests/reference/test_oracle.py::test_purge_enabled_equals_purge_disabled": "Hypothesis, two oracles per case",
    "tests/reference/test_oracle.py::test_enough_lateness_means_nothing_late_and_batch_result": "Hypothesis",
    "tests/reference/test_oracle.py::test_incremental_aggregates_equal_recomputation": "Hypothesis",
    "tests/reference/test_oracle.py::test_complete_output_is_batch_over_on_time_tuples": "Hypothesis",
    "tests/reference/test_cond.py::test_the_cond_index_answers_exactly_what_filtering_answers": "Hypothesis",
    "tests/reference/test_cond.py::test_bad_fields_exit_2_with_one_line": "a command per bad field",
    "tests/reference/test_cond.py::test_every_engine_equals_the_oracle_with_a_cond": "every engine",
    "tests/reference/test_exact.py::test_the_block_path_switches_from_int64_to_python_integers": "Hypothesis",
    "tests/reference/test_stateful.py": "a state machine driving the spec, the oracle and every engine",
    "tests/testing/test_conform.py::test_the_projects_own_engines_conform_as_commands": "oij conform per engine",
    "tests/testing/test_conform.py::test_vectors_are_deterministic_and_verify": "every vector through a command",
    "tests/testing/test_conform.py::test_every_wrong_implementation_is_caught_with_a_small_case": "oij conform on "
                                                                                                 "each wrong one",
    "tests/testing/test_conform.py::test_the_fingerprint_names_the_profile_an_implementation_follows": "per profile",
    "tests/testing/test_conform.py::test_the_canonical_profile_equals_the_oracle": "Hypothesis",
    "tests/parallel/test_blocks_engine.py::test_files_read_in_pieces_give_the_oracles_bytes": "every piece size",
    "tests/parallel/test_scale.py::test_engines_equal_the_oracle": "Key-OIJ and Scale-OIJ on processes",
    "tests/io/test_blocks.py::test_the_template_reads_what_the_line_reader_reads": "Hypothesis, both readers",
    "tests/io/test_blocks.py::test_block_reader_reads_what_the_line_reader_reads": "Hypothesis, both readers",
    "tests/commands/test_restart_cli.py::test_misuse_is_one_line_and_exit_2": "a command per misuse",
    "tests/bench/test_results_status.py::test_this_repository_has_no_stale_result": "git diff and a syntax tree "
                                                                                   "per result's code",
    "tests/testing/test_conform_api.py::test_conform_passes_a_correct_implementation_and_fails_a_planted_bug":
        "two whole oij conform runs",
    "tests/testing/test_conform.py::test_cond_is_claimed_by_name": "oij conform with and without the cond feature",
    "tests/parallel/test_scale_swmr.py": "stress tests of the SWMR index under heavy writing",
    "tests/reference/test_schedule.py::test_each_mutant_of_the_judge_disagrees_with_the_brute_force":
        "a brute-force search per mutant of the judge",
}
"""The tests left out of the fast loop (``-m "not slow"``, tests/README.md), by path prefix (a folder, a file, or
a file and a test name), each with why it is slow."""


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The fast loop (``-m "not slow"`` exactly) does not even collect the folders and files :data:`SLOW` leaves
    out whole (Spark's, Flink's and Pathway's tests import their engines): every test there is slow, so the same
    tests run, and each worker spends less on collecting."""
    if config.getoption("markexpr", "") != "not slow":
        return None
    rel = collection_path.relative_to(config.rootpath).as_posix() if collection_path.is_relative_to(
        config.rootpath) else ""
    whole = [p.rstrip("/") for p in SLOW if "::" not in p]
    return True if rel and any(rel == p or rel.startswith(p + "/") for p in whole) else None


def is_slow(item: pytest.Item, root: str) -> bool:
    """Whether ``item`` is left out of the fast loop: it runs a real engine (:data:`ENGINE_MARKS`) or its path
    (relative to ``root``) starts with an entry of :data:`SLOW`."""
    if any(item.get_closest_marker(m) is not None for m in ENGINE_MARKS):
        return True
    rel = os.path.relpath(str(item.path), root).replace(os.sep, "/")
    node = rel + "::" + item.name
    return any(node.startswith(prefix) for prefix in SLOW)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks (it appends the group to each node id)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = str(config.rootpath)
    for item in items:  # before -m reads the marks (the mark plugin's hook runs after this one)
        if is_slow(item, root):
            item.add_marker(pytest.mark.slow)
    if not config.pluginmanager.hasplugin("xdist"):  # -p no:xdist: no groups, and no xdist_group mark to know
        return
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every object alive once the tests are collected (the modules of oij, numpy, Hypothesis, pytest; the test
    modules) moved out of reach of Python's cyclic collector: each full collection of a worker walked them all
    again, hundreds of times in a run.  The run's three workers spent 32 CPU-seconds in full collections (warm
    `.ci/run` pytest line, timed by ``gc.callbacks``); the fast loop's 6.9, and 2.6 and 3.8 with them frozen
    (tests/cost-history.md, session 27).  Garbage is collected first, so none is kept; what the tests create
    later is collected as before."""
    gc.collect()
    gc.freeze()


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
        if up and not started_before[group] and not (_group(item) or "").startswith(group):
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
