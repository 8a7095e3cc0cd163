"""``oij bench recovery``'s output file: an interrupted run leaves --out as it was and keeps its runs beside it.

The judging itself (real engines killed and restored) is tested in tests/{spark,flink,pathway}/*_restart.py;
here ``judge`` is replaced by a stand-in so that only the writing is exercised, in-process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oij.bench import recovery
from oij.bench.recovery import RecoveryOptions, measure


def _fake_judge(stop_at: str | None) -> Any:
    def judge(s: recovery.Subject, **_: Any) -> dict[str, Any]:
        if s.label == stop_at:
            raise KeyboardInterrupt
        return {"label": s.label, "verdict": "exactly-once", "cases": 1, "plans": 1, "wall_s": 0.0}

    return judge


def test_an_interrupted_run_keeps_the_old_target_and_its_runs_beside_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "recovery.json"
    out.write_text('{"old": true}\n')
    monkeypatch.setattr(recovery, "judge", _fake_judge("flink-ds"))
    with pytest.raises(KeyboardInterrupt):
        measure(RecoveryOptions(only="spark-ss,flink-ds", out=str(out)), progress=False)
    assert out.read_text() == '{"old": true}\n'
    kept = json.loads((tmp_path / "recovery.json.partial").read_text())
    assert [r["label"] for r in kept["runs"]] == ["spark-ss"]


def test_a_finished_run_replaces_the_target_and_removes_the_partial_file(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "recovery.json"
    out.write_text('{"old": true}\n')
    monkeypatch.setattr(recovery, "judge", _fake_judge(None))
    measure(RecoveryOptions(only="spark-ss,flink-ds", out=str(out)), progress=False)
    got = json.loads(out.read_text())
    assert [r["label"] for r in got["runs"]] == ["spark-ss", "flink-ds"] and got["provenance"]["command"]
    assert not (tmp_path / "recovery.json.partial").exists()
