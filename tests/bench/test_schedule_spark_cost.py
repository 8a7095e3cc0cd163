"""``oij bench schedule``'s flags.  Its Spark cost hook (``--spark-tuples N``,
:func:`oij.bench.schedule.spark_judge_cost`) is tested in tests/bench/test_bench_experiments.py
(``test_the_spark_cost_hook_records_a_whole_check_process``), where its ``oij check`` runs on the same helper
JVM as ``oij bench spark``'s."""

from __future__ import annotations

from pathlib import Path

import pytest

from oij.cli import main

pytestmark = pytest.mark.spark


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
