"""The command line of the engines' restart drives: every misuse is one line on stderr and exit code 2, before
any engine starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

CASE = '{"type":"query","lower":0,"upper":1,"lateness":0}\n{"type":"end"}\n'


def _oij(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("OIJ_")} | (env or {})
    return subprocess.run([sys.executable, "-m", "oij.cli", *args], input=CASE, capture_output=True, text=True,
                          env=full, cwd=cwd, timeout=100)


@pytest.mark.parametrize(("args", "env", "says"), [
    (("adapter", "spark-ss", "--restart-protocol"), {}, "OIJ_STATE_DIR"),
    (("adapter", "flink-sql", "--restart-protocol"), {"OIJ_STATE_DIR": "."}, "does not speak the restart protocol"),
    (("adapter", "spark-ss", "-o", "sink=append"), {}, "goes with --restart-protocol"),
    (("adapter", "spark-ss", "--restart-protocol", "-o", "nope"), {"OIJ_STATE_DIR": "."}, "KEY=VALUE"),
    (("adapter", "spark-ss", "--restart-protocol", "-o", "sink=x"), {"OIJ_STATE_DIR": "."}, "one of idempotent"),
    (("adapter", "spark-ss", "--restart-protocol", "-o", "nope=1"), {"OIJ_STATE_DIR": "."}, "restart options"),
    (("adapter", "spark-ss", "--restart-protocol"), {"OIJ_STATE_DIR": ".", "OIJ_CHECKPOINT": "3"},
     "holds no saved state"),
    (("conform", "--restarts", "1", "--adapter", "flink-sql"), {}, "does not speak the restart protocol"),
    (("conform", "--restarts", "1", "-o", "sink=append", "--", "cat"), {}, "goes with --adapter"),
    (("conform", "--restarts", "1", "--adapter", "spark-ss", "--session"), {}, "not with"),
    (("bench", "recovery", "--only", "nope"), {}, "unknown subject"),
])
def test_misuse_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], env: dict[str, str], says: str) -> None:
    env = {k: (str(tmp_path) if v == "." else v) for k, v in env.items()}
    r = _oij(*args, env=env, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [x for x in r.stderr.splitlines() if x.strip() and "Picked up JAVA_TOOL_OPTIONS" not in x]
    assert len(lines) == 1 and says in lines[0], r.stderr
    assert r.stdout == ""
    assert not any(p.name.endswith(".json") for p in tmp_path.iterdir())  # nothing measured, nothing written


def test_the_restart_adapters_are_listed_where_one_is_refused(tmp_path: Path) -> None:
    r = _oij("adapter", "pathway-cutoff", "--restart-protocol", env={"OIJ_STATE_DIR": str(tmp_path)})
    assert r.returncode == 2 and "spark-ss" in r.stderr and "flink-ds" in r.stderr and "pathway" in r.stderr
