"""``--cpu-report`` (tests/cpucost.py): a test's CPU counts its processes' too, and no one else's; the cgroup
counts a process that left the tree, which the tree walk misses."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests import cpucost

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def _burn_here(seconds: float) -> None:
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass


def test_a_child_reaped_during_the_test_is_counted() -> None:
    m = cpucost.Meter(cgroup=False)
    m.start()
    subprocess.run([sys.executable, "-c", BURN.format(s=0.4)], check=True)
    cpu, wall = m.stop()
    assert cpu >= 0.35 and wall >= cpu * 0.5, (cpu, wall)
    assert m.method == "process tree"


def test_the_cgroup_counts_an_orphan_that_the_tree_walk_misses(tmp_path: Path) -> None:
    """A launcher (a shell that stays) starts a shell that starts a burner of 0.4 s in the background and exits
    at once, so the burner is orphaned out of the launcher's tree: the worker's cgroup counts it; the tree walk
    of the launcher does not (the negative control, and why the cgroup comes first).  (The walk is rooted at
    the launcher, not at this process, which may be building a class archive meanwhile: tests/jvm_archive.py.)"""
    group = cpucost.Cgroup()
    if not group.enter():  # (not this project's machine, where the tests run as root) the fallback is used
        m = cpucost.Meter()
        m.start()
        assert m.method == "process tree"
        return
    try:
        done = tmp_path / "done"
        burn = BURN.format(s=0.4) + f"open({str(done)!r}, 'w').close()\n"
        c0 = group.usage()
        launcher = subprocess.Popen(["sh", "-c", f"sh -c '\"{sys.executable}\" -c \"$0\" &' \"$0\"; sleep 30", burn])
        try:
            t0 = cpucost.tree_cpu(launcher.pid)
            deadline = time.monotonic() + 30
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)  # its exit
            assert done.exists()
            assert group.usage() - c0 >= 0.35
            assert cpucost.tree_cpu(launcher.pid) - t0 < 0.3
        finally:
            launcher.kill()
            launcher.wait()
    finally:
        d = group.dir
        sleeper = subprocess.Popen(["sleep", "30"])  # still running in the group when it is closed
        try:
            group.close()
            assert d is not None and not d.exists(), "the group is left behind"
        finally:
            sleeper.kill()
            sleeper.wait()


def test_a_live_child_is_counted_and_a_process_outside_the_tree_is_not() -> None:
    child = subprocess.Popen([sys.executable, "-c", BURN.format(s=0.4) + "time.sleep(30)\n"])
    try:
        before = cpucost.tree_cpu(child.pid)
        deadline = time.monotonic() + 20
        while cpucost.tree_cpu(child.pid) - before < 0.35 and time.monotonic() < deadline:
            time.sleep(0.05)
        of_child = cpucost.tree_cpu(child.pid) - before
        assert of_child >= 0.35, of_child  # the child's CPU while it lives (before it is reaped)
        # the negative control: this process's CPU is not in the child's tree
        outside = cpucost.tree_cpu(child.pid)
        _burn_here(0.3)
        assert cpucost.tree_cpu(child.pid) - outside < 0.1
    finally:
        child.kill()
        child.wait()


def test_the_parts_merge_into_one_file_costliest_first(tmp_path: Path) -> None:
    path = str(tmp_path / "cpu.json")
    cpucost.record(path, "gw5", "stale", 9.0, 9.0, "cgroup")  # an interrupted run's part
    cpucost.clear(path)
    (tmp_path / "cpu.json.bak").write_text("not a part")
    cpucost.record(path, "gw0", "a", 1.0, 2.0, "cgroup")
    cpucost.record(path, "gw1", "b", 3.0, 1.0, "cgroup")
    cpucost.record(path, "gw0", "c", 2.0, 2.0, "process tree")
    rows = cpucost.merge(path, {"commit": "x"})
    assert [r["test"] for r in rows] == ["b", "c", "a"]
    doc = json.loads(Path(path).read_text())
    assert doc["commit"] == "x" and doc["cpu_s"] == 6.0 and doc["tests"] == rows
    assert doc["methods"] == ["cgroup", "process tree"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu.json", "cpu.json.bak"]  # the parts are gone
