"""``oij bench schedule --spark-tuples N`` (:func:`oij.bench.schedule.spark_judge_cost`): at a tiny size, the
judge on Spark runs as one ``oij check`` process and its time, memory and verdict are recorded; negative control:
the same hook on an input that is not there records the failure (exit 2, no verdict)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oij.bench import schedule as bs
from oij.cli import main

pytestmark = pytest.mark.spark


def test_the_spark_cost_hook_records_a_whole_check_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got = bs.spark_judge_cost(str(tmp_path), 400, seed=2, master="local[1]")
    assert got["exit"] == 0 and got["ran_on"] == "spark" and got["admissible"] is True, got
    assert got["stats"]["tuples"] == 400 and got["wall_s"] > 0 and got["cpu_s"] > 0 and got["peak_rss_bytes"] > 0
    assert "--seq-limit 0 --master local[1]" in got["command"]
    text = bs.format_table({"rows": [], "spark_cost": got})
    assert "the judge on Spark (local[1]) at 400 tuples" in text and "admissible" in text
    # negative control: the check process fails (its events are gone), and the hook says so
    orig = bs.timed_rss

    def gone(cmd: list[str]) -> tuple[float, float, int, int]:
        os.remove(cmd[4])  # the events file the check would read
        return orig(cmd)

    monkeypatch.setattr(bs, "timed_rss", gone)
    (tmp_path / "b").mkdir()
    bad = bs.spark_judge_cost(str(tmp_path / "b"), 50, seed=2, master="local[1]")
    assert bad["exit"] == 2 and bad["admissible"] is None, bad


@pytest.mark.parametrize("flags", [["--spark-tuples", "-1"], ["--events", "-1"], ["--big", "-2"], ["--repeat", "0"],
                                   ["--engines", "spark,flonk"]])
def test_bad_flags_of_bench_schedule_are_one_line_and_exit_2(flags: list[str], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before any job starts: one line naming the flag, exit 2, nothing written."""
    out = tmp_path / "s.json"
    assert main(["bench", "schedule", *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flags[0] in err[0], err
    assert not out.exists()
