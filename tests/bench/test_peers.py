"""``oij bench peers --quick``: every system that runs produces the oracle's pairs; no timing is asserted.

The smoke run covers oij join, the patterns, the numpy floor and every installed peer (Flink DataStream and
SQL need PyFlink and a JDK, Spark needs Java); a peer that is not installed must be reported as skipped.
Negative controls: the numpy floor with a window one unit too narrow is caught by the same-pairs check, and
a system whose pairs differ is reported as different and never taken as the fastest peer.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from oij.parallel.config import PATTERNS
from oij.reference.batchjoin import compute_pair_columns

from oij.bench import peers
from tests import jvm_archive

pytestmark = pytest.mark.timeout(600)


OIJ = [sys.executable, "-m", "oij.cli"]
FLOOR = [sys.executable, "-m", "oij.bench.peers", "floor"]


def test_quick_peers_run_agrees_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The run in this process, and oij's own systems as their in-process twins, where the run would start a
    process for each: ``oij join`` and ``oij run`` (14 of them) as :func:`oij.cli.main` on the same arguments and
    environment, the numpy floor (two) as :func:`oij.bench.peers.floor` (its ``__main__``): about 0.2
    CPU-seconds of interpreter and imports apiece (the replicas of ``oij run`` are still processes of their own).
    The peers (Flink DataStream, Flink SQL, Spark: JVMs) run as the run's processes (Flink SQL in this process
    would start PyFlink's gateway here, which no other test of the worker shares: the same JVM, and the
    ``flink-gateway`` group besides); :func:`test_a_system_that_runs_too_long_is_stopped_with_its_children` and
    :func:`test_the_cpu_of_a_system_counts_its_whole_process_tree` check ``run_timed`` itself.  Flink
    DataStream's program is the jar of the flink-ds adapter's cache (``oij.flink.datastream.cache_dir``: the same
    sources, compiled by the same ``flink_jar``; the run's own cache is a second copy under /tmp that a fresh
    machine compiles with javac again), and its JVM maps tests/jvm_archive.py's Flink class archive, which names
    that jar (measured on this program at 4,000 tuples: 3.6 CPU-seconds with it, 5.8 without)."""
    from oij.cli import main
    from oij.flink import peers as flink_peers
    from oij.flink.datastream import cache_dir

    real = peers.run_timed
    twins: list[str] = []
    real_ds = flink_peers.datastream_command
    monkeypatch.setattr(flink_peers, "datastream_command", lambda cache: real_ds(cache_dir()))
    archive = jvm_archive.flink_archive()
    flink_opts = ({"JAVA_TOOL_OPTIONS": f"{jvm_archive.JVM_OPTS} -XX:SharedArchiveFile={archive} {jvm_archive.QUIET}"}
                  if archive is not None and archive.exists()
                  and os.environ.get("JAVA_TOOL_OPTIONS", "").startswith(jvm_archive.JVM_OPTS) else {})

    def run_timed(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, str]:
        if argv[:len(FLOOR)] == FLOOR and not env:
            peers.floor(*argv[len(FLOOR):])  # raises if it fails: the test fails
            twins.append("floor")
            return 0, ""
        if argv[:1] == ["java"] and argv[-7:-6] == ["OijIntervalJoin"]:  # flink-ds: the Flink class archive
            twins.append("flink-ds")
            return real(argv, timeout, {**(env or {}), **flink_opts})
        if argv[:len(OIJ)] != OIJ:
            return real(argv, timeout, env)
        with pytest.MonkeyPatch.context() as mp:
            for k, v in (env or {}).items():
                mp.setenv(k, v)
            rc = main(argv[len(OIJ):])
        twins.append(" ".join(argv[len(OIJ):len(OIJ) + 1]))
        return rc, "" if rc == 0 else (capsys.readouterr().err.strip().splitlines() or ["?"])[-1][:300]

    monkeypatch.setattr(peers, "run_timed", run_timed)
    out = tmp_path / "peers.json"
    rc = main(["bench", "peers", "--quick", "--workloads", "uniform", "--events", "4000", "--out", str(out),
               "--docs", str(tmp_path / "docs")])
    assert rc == 0, capsys.readouterr().err[-2000:]
    assert twins.count("join") == 3 and twins.count("run") == 2 * len(PATTERNS) + 1, twins
    assert twins.count("floor") == 2, twins
    assert twins.count("flink-ds") == (1 if peers.flink_available() and shutil.which("javac") else 0), twins
    res = json.loads(out.read_text())
    w = res["workloads"]["uniform"]
    ran = {row["system"]: row for row in w["rows"]}
    assert "oij join [jsonl]" in ran and "numpy floor [parquet]" in ran
    assert {f"oij run {p} x2 [jsonl]" for p in PATTERNS} <= set(ran)
    for row in w["rows"]:
        assert row["failed"] is None, (row["system"], row["failed"])
        assert row["same"] is True, row["system"]
        assert row["pairs"] == ran["oij join [jsonl]"]["pairs"] > 0
    available = {"flink-ds": peers.flink_available() and shutil.which("javac") is not None,
                 "flink-sql": peers.flink_available(), "spark-ss": shutil.which("java") is not None}
    for name, ok in available.items():
        assert any(s.startswith(name) for s in ran) == ok, name
        assert (name in w["skipped"]) == (not ok), name
    assert (tmp_path / "docs" / "peers-table.rst").read_text().count("* - oij run") >= len(PATTERNS)
    assert (tmp_path / "docs" / "peers.png").stat().st_size > 1000
    assert {g["goal"] for g in res["goals"]}


def test_floor_is_the_batch_join() -> None:
    rng = np.random.default_rng(3)
    n = 300
    a_ts, b_ts = rng.integers(0, 200, n), rng.integers(0, 200, n)
    a_k, b_k = rng.integers(0, 4, n), rng.integers(0, 4, n)
    ids = np.arange(n, dtype=np.int64)
    a, b = compute_pair_columns(ids, a_k, a_ts, ids + n, b_k, b_ts, -10, 3)
    want = sorted((i, j + n) for i in range(n) for j in range(n)
                  if a_k[i] == b_k[j] and a_ts[i] - 10 <= b_ts[j] <= a_ts[i] + 3)
    assert sorted(zip(a.tolist(), b.tolist(), strict=True)) == want
    a2, b2 = compute_pair_columns(ids, a_k, a_ts, ids + n, b_k, b_ts, -9, 3)  # negative control: narrower
    assert sorted(zip(a2.tolist(), b2.tolist(), strict=True)) != want


def test_a_system_with_other_pairs_is_reported_and_not_the_fastest_peer() -> None:
    systems = [peers.System("oij join [jsonl]", "jsonl", [], "oij", "jsonl"),
               peers.System("flink-ds x2 [csv]", "csv", [], "peer", "csv"),
               peers.System("spark-ss x2 [csv]", "csv", [], "peer", "csv")]
    times = {"oij join [jsonl]": [2.0], "flink-ds x2 [csv]": [1.0], "spark-ss x2 [csv]": [4.0]}
    digests = {"u/oij join [jsonl]": (10, "aa"), "u/flink-ds x2 [csv]": (9, "bb"), "u/spark-ss x2 [csv]": (10, "aa")}
    w = peers.summarise("u", peers.params_for("uniform"), systems, times, {}, {}, digests, 100)
    same = {r["system"]: r["same"] for r in w["rows"]}
    assert same == {"oij join [jsonl]": True, "flink-ds x2 [csv]": False, "spark-ss x2 [csv]": True}
    assert w["fastest_peer_s"] == 4.0  # the faster Flink run gave other pairs: it does not count


def test_a_system_that_runs_too_long_is_stopped_with_its_children() -> None:
    """``--timeout``: the system and every process it started (a JVM, say) are killed, and the row says so."""
    import time

    from oij.bench.peers import no_time, run_timed
    from tests.procs import alive

    t0 = time.perf_counter()
    rc, why = run_timed(["bash", "-c", "sleep 60 & echo $! > /tmp/oij-peers-child; wait"], 1.0)
    assert rc == -1 and why == "timed out after 1 s"
    assert time.perf_counter() - t0 < 30
    with open("/tmp/oij-peers-child") as f:
        child = int(f.read())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)  # killed (a zombie left for init to reap counts as gone)
    assert no_time({"failed": why}) == "> 1 (timeout)"
    # negative control: a system that finishes in time is not touched
    assert run_timed(["true"], 5.0) == (0, "")
    assert no_time({"failed": "exit 3"}) == "failed"


def test_the_cpu_of_a_system_counts_its_whole_process_tree() -> None:
    """``children_cpu`` around ``run_timed``: a system that burns CPU in itself and in a child it waits for is
    charged for both; negative control: a system that sleeps as long is charged almost nothing."""
    from oij.bench.peers import children_cpu, run_timed

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    c0 = children_cpu()
    assert run_timed(["bash", "-c", f"python3 -c '{burn}' & python3 -c '{burn}'; wait"], 60.0) == (0, "")
    assert children_cpu() - c0 >= 0.55
    c0 = children_cpu()
    assert run_timed(["bash", "-c", "sleep 0.6 & sleep 0.6; wait"], 60.0) == (0, "")
    assert children_cpu() - c0 < 0.2
