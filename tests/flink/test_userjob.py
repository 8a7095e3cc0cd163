"""The ordinary Flink DataStream job (oij.flink.userjob, OijUserJob.java, ``oij userjob flink``): at parallelism 1
and 2, on the two seeded workloads ``oij conform --as-run`` draws (small, of issue 63's shape: the second is its
parameters but for the window), its pairs are a subset of the batch join of all tuples and its late ids are
tuples' ids; a pair outside the window planted in the output is caught by the same check (the negative control).
Flink's key-to-instance map, as the job reports it, is what every pair's instance shows and what
:func:`flink_key_instance` computes in Python.  Each job run is a JVM: the conform run's two jobs are the ones
these checks read (a job per check would start two more)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyflink")
if shutil.which("javac") is None:
    pytest.skip("the Flink user job compiles its Java class with javac", allow_module_level=True)

from oij.errors import UsageError
from oij.flink.userjob import flink_key_instance, run_flink_user_job
from tests.userjobs import batch_pairs, outside_window_pair, read_output, small_workload, violations

pytestmark = [pytest.mark.flink, pytest.mark.timeout(600)]


def explained_by_the_batch_join(tmp_path: Path, events: Path, out: Path, info: dict[str, Any],
                                parallelism: int) -> None:
    """The job's output ``out`` on ``events`` at ``parallelism`` (and what it reported, ``info``) is explained by
    the batch join, its key-to-instance map is Flink's, and it is judged right up to schedule; the negative
    controls are caught."""
    lines = out.read_bytes().splitlines(keepends=True)
    batch = batch_pairs(events)
    assert violations(lines, events, batch) == []
    pairs, late = read_output(lines)
    assert info["pairs"] == len(pairs) > 0.9 * len(batch) and info["late"] == len(late)
    assert info["key_type"] == "Long" and info["key_instance_agrees"]
    assert set(info["pairs_by_instance"]) == set(range(parallelism))
    assert {k: flink_key_instance(k, parallelism) for k in info["key_instance"]} == info["key_instance"]
    # negative controls: the check rejects a pair outside the window; the Python map is not the identity
    assert any("not in the batch join" in v for v in violations([*lines, outside_window_pair(events)], events,
                                                                batch))
    if parallelism == 2:
        assert {k: 1 - flink_key_instance(k, 2) for k in info["key_instance"]} != info["key_instance"]
    # judged up to schedule (flink-datastream: each input's order, or each instance's at parallelism 2): right;
    # with one lost pair of two tuples that stay in other rows: rejected, with that pair as the witness
    from oij.bench.schedule import plant
    from oij.cli import main
    from oij.io.jsonlread import parse_result_lines
    from oij.io.jsonlwrite import result_lines
    from oij.io.userjob import read_workload

    def judged(got: Path) -> int:
        return main(["check", str(events), "--got", f"flink={got}", "--schedule", "any", "--profile",
                     "flink-datastream", "--parallelism", str(parallelism), "--no-progress", "--out",
                     str(tmp_path / "chk")])

    assert judged(out) == 0
    q, tuples = read_workload(str(events))
    lost = tmp_path / "lost.jsonl"
    lost.write_text("".join(result_lines(plant("missing", parse_result_lines(lines), tuples, q.lateness or 0,
                                               q.upper))))
    assert judged(lost) == 1


def test_flink_user_job_from_the_command_line_without_side_outputs(tmp_path: Path) -> None:
    events = small_workload(tmp_path, 500)
    out = tmp_path / "flink.jsonl"
    p = subprocess.run([sys.executable, "-m", "oij.cli", "userjob", "flink", str(events), "-o", str(out),
                        "--no-late-side-outputs"], capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stderr
    assert "flink (parallelism 1)" in p.stderr
    lines = out.read_bytes().splitlines(keepends=True)
    assert violations(lines, events) == [] and read_output(lines)[1] == []


def test_flink_user_job_refuses_what_it_cannot_run(tmp_path: Path) -> None:
    events = tmp_path / "s.jsonl"
    events.write_text('{"type":"query","lower":-1,"upper":0,"lateness":5}\n'
                      '{"type":"tuple","side":"base","id":1,"ts":1,"key":"a"}\n{"type":"end"}\n')
    with pytest.raises(UsageError, match="int"):
        run_flink_user_job(str(events), str(tmp_path / "o.jsonl"))
    events.write_text('{"type":"query","lower":-1,"upper":0,"lateness":5,"join":"left"}\n{"type":"end"}\n')
    with pytest.raises(UsageError, match="inner join"):
        run_flink_user_job(str(events), str(tmp_path / "o.jsonl"))
    assert not (tmp_path / "o.jsonl").exists()


def test_conform_as_run_judges_flink_as_its_users_run_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``oij conform --adapter flink-ds --as-run``: two seeded workloads (parallelism 1, then 2) through the
    ordinary job, each admissible up to schedule, and each job's output explained by the batch join (above, on
    3000 events: fewer leave no pair far outside the window to plant).  Negative control: a job whose output
    loses one pair of two tuples that stay in other rows fails the run with a replay case (the output of the real
    job on the same workload, recorded in the first run, with the pair taken out: a job run less)."""
    import io

    from oij.bench.schedule import plant
    from oij.cli import main
    from oij.flink import userjob
    from oij.io.jsonlread import parse_result_lines
    from oij.io.jsonlwrite import result_lines
    from oij.io.userjob import read_workload

    args = ["conform", "--adapter", "flink-ds", "--as-run", "--runs", "2", "--run-events", "3000",
            "--replay-out", str(tmp_path / "fail.jsonl")]
    real = userjob.run_flink_user_job
    ran: dict[bytes, tuple[bytes, dict[str, Any]]] = {}  # workload's bytes -> the real job's output and info
    parallelisms: list[int] = []

    def recorded(events_path: str, out_path: str, **kw: Any) -> dict[str, Any]:
        info = real(events_path, out_path, **kw)
        ran[Path(events_path).read_bytes()] = (Path(out_path).read_bytes(), info)
        parallelisms.append(kw["parallelism"])
        return info

    monkeypatch.setattr(userjob, "run_flink_user_job", recorded)
    assert main(args) == 0
    assert "2 of 2 runs admissible" in capsys.readouterr().out
    assert len(ran) == 2 and parallelisms == [1, 2]
    # each job's output, read as the job at that parallelism wrote it
    for i, ((workload, (output, info)), parallelism) in enumerate(zip(ran.items(), parallelisms, strict=True)):
        d = tmp_path / f"run-{i}"
        d.mkdir()
        (d / "w.jsonl").write_bytes(workload)
        (d / "flink.jsonl").write_bytes(output)
        explained_by_the_batch_join(d, d / "w.jsonl", d / "flink.jsonl", info, parallelism)
    capsys.readouterr()  # what those checks printed (a rejection among it) is not the run's below

    def lossy(events_path: str, out_path: str, **kw: Any) -> dict[str, Any]:
        """The real job's output on this workload (the same seeded workloads as the run above: its output, not a
        second run of the job) with one pair lost."""
        out, info = ran[Path(events_path).read_bytes()]
        q, tuples = read_workload(events_path)
        got = parse_result_lines(io.BytesIO(out))
        Path(out_path).write_text("".join(result_lines(plant("missing", got, tuples, q.lateness or 0, q.upper))))
        return info

    monkeypatch.setattr(userjob, "run_flink_user_job", lossy)
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "REJECTED" in out and "witness (missing)" in out
    assert list((tmp_path / "replays").glob("flink-ds-as-run-*.jsonl"))
