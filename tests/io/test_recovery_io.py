"""The implementation's side of the restart protocol (oij/io/recovery.py): the ledger of checkpoint lines, the
idempotent write, the state directory's claim; each stateful step followed by ``_check()``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oij.errors import UsageError
from oij.io.recovery import Ledger, ProtocolOut, Restart, RestartRequest, write_once


def test_rewind_keeps_the_entry_the_kit_saw_and_drops_later_ones(tmp_path: Path) -> None:
    led = Ledger(str(tmp_path))
    for e, k in [(0, 1), (2, 3), (5, 4)]:
        led.record(e, k)
        led._check()
    assert Ledger(str(tmp_path)).entries == [(0, 1), (2, 3), (5, 4)]
    again = Ledger(str(tmp_path))
    assert again.rewind(3) == 2
    again._check()
    assert Ledger(str(tmp_path)).entries == [(0, 1), (2, 3)]  # rewritten: (5, 4)'s line never reached the kit
    assert again.rewind(0) is None and again.entries == []
    with pytest.raises(UsageError, match="no checkpoint at event 7"):
        Ledger(str(tmp_path)).rewind(7)


def test_a_torn_last_ledger_line_is_no_entry(tmp_path: Path) -> None:
    (tmp_path / "ledger").write_text("0 1\n3 ")
    led = Ledger(str(tmp_path))
    assert led.entries == [(0, 1)]
    led._check()


def test_protocol_out_records_before_it_prints_and_skips_a_repeated_count(tmp_path: Path) -> None:
    led = Ledger(str(tmp_path))
    buf = io.StringIO()
    out = ProtocolOut(buf, led)
    out.rows(['{"type":"pair","base":1,"probe":2}\n'])
    out.checkpoint(0, 1)
    out.checkpoint(1, 1)  # the same count again: not printed, not recorded
    out.checkpoint(2, 2)
    led._check()
    assert buf.getvalue().splitlines()[1:] == ['{"type":"checkpoint","events":1}', '{"type":"checkpoint","events":2}']
    assert led.entries == [(0, 1), (2, 2)]
    with pytest.raises(ValueError, match="after one at 2"):
        out.checkpoint(3, 1)


@settings(deadline=None)  # a temporary directory and file writes per example: 34 ms idle, 298 ms on a loaded machine
@given(st.lists(st.integers(0, 3), min_size=1, max_size=8), st.integers(0, 10))
def test_rewind_to_any_printed_count_names_its_epoch(steps: list[int], pick: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        led = Ledger(d)
        out = ProtocolOut(io.StringIO(), led)
        k = 0
        for e, dk in enumerate(steps):
            k += dk
            out.checkpoint(e, k)
            led._check()
        printed = dict((kk, ee) for ee, kk in reversed(led.entries))  # one entry per count
        assert len(printed) == len(led.entries)
        kk = sorted(printed)[pick % len(printed)]
        assert Ledger(d).rewind(kk) == printed[kk]


def test_write_once_writes_once(tmp_path: Path) -> None:
    path = str(tmp_path / "batch-1")
    assert write_once(path, b"a\n")
    assert not write_once(path, b"b\n")
    assert (tmp_path / "batch-1").read_bytes() == b"a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["batch-1"]  # no temporary file left


def test_the_environment_and_the_claim(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="OIJ_STATE_DIR"):
        Restart.from_environ({})
    with pytest.raises(UsageError, match="OIJ_CHECKPOINT"):
        Restart.from_environ({"OIJ_STATE_DIR": str(tmp_path), "OIJ_CHECKPOINT": "x"})
    r = Restart.from_environ({"OIJ_STATE_DIR": str(tmp_path), "OIJ_CHECKPOINT": "4", "OIJ_RESTART": "2"})
    assert (r.checkpoint, r.incarnation) == (4, 2)
    with pytest.raises(UsageError, match="holds no saved state"):  # a restart into an empty directory
        r.claim('{"type":"query","lower":0,"upper":1}')
    assert list(tmp_path.iterdir()) == []
    Restart(str(tmp_path), 0, 0).claim('{"type":"query","lower":0,"upper":1}')
    r.claim('{"type":"query","lower":0,"upper":1}\n')  # the same query: accepted
    with pytest.raises(UsageError, match="another query"):
        r.claim('{"type":"query","lower":0,"upper":2}')
    req = RestartRequest(r, {"sink": "append"}, None, io.BytesIO(), io.StringIO())
    assert req.option("sink", "idempotent", ["idempotent", "append"]) == "append"
    with pytest.raises(UsageError, match="one of idempotent"):
        req.option("sink", "x", ["idempotent"])
    with pytest.raises(UsageError, match="-o sink"):
        req.unknown_options(["other"])
