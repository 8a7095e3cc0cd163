""".ci/fresh_clone.py: the test command measured from a fresh clone, one record per run.

The real measure is ``bash .ci/run`` (about 12 minutes); here the script runs a few shell lines in a clone of a
small repository, which is what it does with the real one.  Negative controls: a failing command is recorded with
its exit status and fails the script, and a run over the budget is not within it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.loadfile import load_file

ROOT = Path(__file__).resolve().parents[2]
fc: Any = load_file("fresh_clone", ROOT / ".ci" / "fresh_clone.py")
BURN = "python3 -c 'import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass'"
"""A child that burns 0.3 CPU-seconds."""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    (r / "marker").write_text("from the commit\n")

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=r, check=True,
                       capture_output=True)
    git("init", "-q")
    git("add", "marker")
    git("commit", "-q", "-m", "one")
    return r


def test_a_run_in_the_clone_is_recorded(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command runs in the clone (it reads the committed file), its CPU is counted (a child burning CPU), and
    pytest's summary line is taken apart; the record lands in the records file beside an earlier one."""
    out = tmp_path / "runs.json"
    out.write_text('[{"earlier": true}]\n')
    cmd = f"cat marker && {BURN} && echo '3 passed, 1 skipped in 0.25s (0:00:00)'"
    assert fc.main(["--repo", str(repo), "--command", cmd, "--out", str(out), "--log", str(tmp_path / "log")]) == 0
    records = json.loads(out.read_text())
    assert records[0] == {"earlier": True} and len(records) == 2
    r = records[1]
    assert r["exit"] == 0 and r["command"] == cmd and r["cpu_s"] >= 0.3 and r["wall_s"] >= 0.3
    assert r["pytest"] == {"line": "3 passed, 1 skipped in 0.25s", "counts": {"passed": 3, "skipped": 1},
                           "seconds": 0.25}
    assert r["within_budget"] is True and len(r["probe_s"]) == 2 and all(p > 0 for p in r["probe_s"])
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert r["commit"] == head
    assert (tmp_path / "log").read_text().startswith("from the commit")
    assert "exit 0" in capsys.readouterr().out


def test_a_failing_command_fails_the_script_and_is_not_within_budget(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs.json"
    assert fc.main(["--repo", str(repo), "--command", "echo '1 failed, 2 passed in 1.0s'; exit 1",
                    "--out", str(out)]) == 1
    (r,) = json.loads(out.read_text())
    assert r["exit"] == 1 and r["within_budget"] is False
    assert r["pytest"]["counts"] == {"failed": 1, "passed": 2}


def test_the_budget_is_the_wall_time(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control of ``within_budget``: a passing run over the budget is not within it."""
    monkeypatch.setattr(fc, "BUDGET_S", 0.1)
    r = fc.fresh_clone_run(repo, "HEAD", "sleep 0.3")
    assert r["exit"] == 0 and r["wall_s"] >= 0.3 and r["within_budget"] is False and r["pytest"] is None


def test_the_summary_is_the_last_one() -> None:
    text = "12 passed in 1.00s\nnoise\n==== 1 error, 2 warnings in 2.50s ====\n1024 passed in 655.12s (0:10:55)\n"
    assert fc.pytest_summary(text)["counts"] == {"passed": 1024}
    assert fc.pytest_summary("no summary here\n") is None


def test_without_a_cgroup_the_childrens_rusage_counts(repo: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no group can be made (not root, no cgroup v1), the CPU is the children's rusage, and says so."""
    monkeypatch.setattr(fc, "CGROUPS", tmp_path / "no-such-hierarchy")
    r = fc.fresh_clone_run(repo, "HEAD", BURN)
    assert r["method"] == "rusage" and r["cpu_s"] >= 0.3


@pytest.mark.parametrize("args", [["--rev", "no-such-rev"], ["--repo", "no-such-dir"]])
def test_a_bad_rev_or_repo_is_one_line_and_exit_2(repo: Path, tmp_path: Path, args: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "runs.json"
    full = ["--repo", str(repo), *args] if args[0] == "--rev" else [args[0], str(tmp_path / args[1])]
    assert fc.main([*full, "--command", "true", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("fresh_clone: ") and "Traceback" not in err
    assert not out.exists()  # nothing recorded


def test_a_process_the_run_leaves_is_killed_and_named(tmp_path: Path) -> None:
    """A process a run leaves behind (an orphaned cluster, once) is killed and named.  The group is a folder with
    a ``cgroup.procs`` file, as a cgroup's reads, so this runs where no cgroup can be made; a process the file
    does not list is left alone (the negative control)."""
    listed = subprocess.Popen(["sleep", "300"], start_new_session=True)
    other = subprocess.Popen(["sleep", "301"], start_new_session=True)
    try:
        (tmp_path / "cgroup.procs").write_text(f"{listed.pid}\n")
        assert fc.kill_left(tmp_path) == ["sleep 300 "]
        assert listed.wait(timeout=10) == -9
        assert other.poll() is None
    finally:
        for p in (listed, other):
            p.kill()
            p.wait()


def test_the_timeline_gives_each_windows_cores_and_each_phases_span(tmp_path: Path) -> None:
    """The timeline reads the group's CPU and the command lines of its processes.  The group is a folder with the
    two files a cgroup has: its CPU counter, written here as 1.5 cores busy, and its process list, which holds a
    process whose command line says ``-m pytest``; a process in the phase but not in the list is not seen (the
    negative control), nor a phase nobody runs."""
    inside = subprocess.Popen(["python3", "-c", "import time; time.sleep(30)", "-m", "pytest"])
    outside = subprocess.Popen(["python3", "-c", "import time; time.sleep(30)", "sphinx-build"])
    try:
        (tmp_path / "cgroup.procs").write_text(f"{inside.pid}\n")
        (tmp_path / "cpuacct.usage").write_text("0")
        t = fc.Timeline(tmp_path, window_s=0.2, every=0.05)
        t.start()
        start = fc.time.monotonic()
        while (now := fc.time.monotonic() - start) < 1.0:
            (tmp_path / "cpuacct.usage").write_text(str(int(now * 1.5e9)))
            fc.time.sleep(0.01)
        r = t.stop()
    finally:
        for p in (inside, outside):
            p.kill()
            p.wait()
    assert r["window_s"] == 0.2 and len(r["busy"]) >= 3
    assert all(1.2 <= b <= 1.8 for b in r["busy"][:3]), r["busy"]
    assert set(r["phases"]) == {"pytest"}
    first, last = r["phases"]["pytest"]
    assert 0 <= first <= 0.3 and last >= 0.8


def test_without_oij_importable_the_script_refuses_before_running(repo: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Outside the venv the record could not be written at the end: one line, exit 2, and the command never runs
    (it would have made a file); with oij importable the same call runs it (the negative control)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "oij" else real(name, *a))
    marker = tmp_path / "ran"
    args = ["--repo", str(repo), "--command", f"touch {marker}", "--out", str(tmp_path / "runs.json")]
    assert fc.main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "venv" in err and not marker.exists()
    monkeypatch.setattr(importlib.util, "find_spec", real)
    assert fc.main(args) == 0 and marker.exists()
