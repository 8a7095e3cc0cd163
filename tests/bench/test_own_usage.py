"""``oij.bench.usage.run_own_usage``: the peak RSS the benches report is the command's own, not its parent's.

The negative control is the measurement the benches made before (``os.wait4`` on a child forked straight from a
large process): it reports at least the parent's resident size, for a command that uses a few MiB.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from oij.bench.usage import run_own_usage

MIB = 1024
HELD = 200  # MiB this test's process holds while it starts the commands


@pytest.fixture
def held() -> bytes:
    """``HELD`` MiB made resident (written, not only reserved) in this process."""
    return b"\x01" * (HELD * 1024 * 1024)


def test_a_small_command_started_from_a_large_process_reports_its_own_small_peak(held: bytes) -> None:
    assert len(held) == HELD * 1024 * 1024
    p = subprocess.Popen(["true"])
    _, _, ru = os.wait4(p.pid, 0)
    assert ru.ru_maxrss >= HELD * MIB, "the control: a direct child reports its parent's peak"
    u = run_own_usage(["true"])
    assert u.returncode == 0
    assert 0 < u.peak_rss_kib < 20 * MIB


def test_a_large_command_reports_its_peak_and_cpu(held: bytes) -> None:
    code = "b = b'\\x01' * (120 * 1024 * 1024); s = sum(range(3_000_000))"
    u = run_own_usage([sys.executable, "-c", code])
    assert u.returncode == 0
    assert 120 * MIB <= u.peak_rss_kib < HELD * MIB
    assert u.cpu_s > 0.02
    assert u.wall_s >= u.cpu_s * 0.5


@pytest.mark.parametrize(("argv", "code", "err"), [
    (["sh", "-c", "echo no >&2; exit 3"], 3, "no\n"),
    (["sh", "-c", "kill -9 $$"], -9, ""),
    (["/nonexistent/oij-command"], 127, "/nonexistent/oij-command: No such file or directory\n"),
])
def test_exit_codes_signals_and_stderr_pass_through(argv: list[str], code: int, err: str) -> None:
    u = run_own_usage(argv, capture_stderr=True)
    assert (u.returncode, u.stderr) == (code, err)


def test_a_long_stderr_does_not_block_the_run() -> None:
    u = run_own_usage(["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x >&2"], capture_stderr=True)
    assert (u.returncode, len(u.stderr)) == (0, 300_000)
