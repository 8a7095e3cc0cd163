"""``oij.testing.conform``: the library call behind ``oij conform`` (the command only parses its arguments).

The same verdicts as the command: a correct implementation conforms (exit 0, its report written to ``out``),
a planted bug does not (exit 1, the minimal case written to ``replay_out``); the mode-dependent defaults are
the ones the command documents; options that do not go together are a UsageError.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oij.errors import UsageError
from oij.testing import ConformAdapter, ConformOptions, conform
from tests.forking import forked_commands

TOY = Path(__file__).parent.parent / "impls" / "toy_oij.py"


def test_conform_passes_a_correct_implementation_and_fails_a_planted_bug(tmp_path: Path) -> None:
    good, bad = io.StringIO(), io.StringIO()
    base = ConformOptions(max_examples=5, no_vectors=True, replay_out=str(tmp_path / "fail.jsonl"))
    # a process per case, forked (tests/forking.py): the kit's searches with a real interpreter per case are
    # kit-power's (tests/bench/test_kit_power.py) and `oij conform` as a command (tests/testing/test_conform.py)
    with forked_commands():
        assert conform(ConformOptions(**{**base.__dict__, "cmd": (sys.executable, str(TOY))}), good) == 0
        rc = conform(ConformOptions(**{**base.__dict__, "cmd": ("--", sys.executable, str(TOY), "upper-off-by-one"),
                                       "max_examples": 200}), bad)
    assert good.getvalue().startswith("conforms: ")
    assert rc == 1 and "does NOT conform" in bad.getvalue()
    assert (tmp_path / "fail.jsonl").read_text().startswith('{"type":"query"')


def test_the_defaults_depend_on_the_mode() -> None:
    plain = ConformOptions(cmd=("x",)).with_defaults()
    assert (plain.timeout, plain.rest, plain.max_examples, plain.small_scope) == (10.0, 1.0, 200, "cover")
    assert plain.fixed_jobs == min(2, os.cpu_count() or 1) and plain.shrink_budget is None  # (60 s: restarts)
    session = ConformOptions(cmd=("x",), session=True).with_defaults()
    assert (session.small_scope, session.fixed_jobs) == (2, 1)
    assert ConformOptions(cmd=("x",), jobs=1, fixed_jobs=1).with_defaults().fixed_jobs == 1  # -j 1: one at a time
    assert ConformOptions(cmd=("x",), restarts=2).with_defaults().max_examples == 20
    slow = ConformOptions(adapter="flink-ds", restarts=2).with_defaults()
    assert (slow.timeout, slow.rest) == (300.0, 30.0)
    assert ConformOptions(cmd=("x",), timeout=3.0).with_defaults().timeout == 3.0  # a given value stays


def test_options_that_do_not_go_together_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no command under test"):
        conform(ConformOptions(), io.StringIO())
    with pytest.raises(UsageError, match="--max-examples"):
        conform(ConformOptions(cmd=("x",), max_examples=0), io.StringIO())


def _recording_adapter(opened: list[str]) -> ConformAdapter:
    """An adapter whose system records each start (and runs no case)."""

    @contextlib.contextmanager
    def start() -> Iterator[Any]:
        opened.append("started")
        yield lambda *a, **k: None

    return ConformAdapter("recorder", frozenset(), "canonical", start, lambda options: ["true"])


@pytest.mark.parametrize(("change", "message"), [({"session": True}, "--session is for a command"),
                                                 ({"jobs": 2}, "-j must be 1")])
def test_an_adapter_with_options_it_cannot_take_is_refused_before_its_system_starts(change: dict[str, Any],
                                                                                     message: str) -> None:
    """``--adapter`` with ``--session`` or ``-j 2`` is a UsageError, raised before the adapter's system (a JVM for
    flink-ds) is started; the same adapter without them is started (the control that the recorder records)."""
    opened: list[str] = []
    with pytest.raises(UsageError, match=message):
        conform(ConformOptions(adapter="recorder", max_examples=1, no_vectors=True, **change), io.StringIO(),
                _recording_adapter(opened))
    assert opened == []
    with contextlib.suppress(Exception):
        conform(ConformOptions(adapter="recorder", max_examples=1, no_vectors=True), io.StringIO(),
                _recording_adapter(opened))
    assert opened == ["started"]
