"""``oij run``'s options are declared twice, its parser (oij/commands/run.py) and ``RunOptions``
(oij/pipelines/run.py): the two must say the same (issue 66), and the engine defaults come from
:mod:`oij.parallel.config`, where they are declared once."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import pytest
from oij.parallel.config import BATCH, CALIBRATION, DECAY, REPLICAS, SCHEDULE_EVERY
from oij.parallel.runtime.pool import JobOptions
from oij.parallel.shared.teamrun import TeamOptions

from oij.cli import build_parser
from oij.pipelines.run import RunOptions


def command_parser(name: str) -> argparse.ArgumentParser:
    """The subparser of ``oij NAME``."""
    parser = build_parser(name)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[name]
    return found


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def differences(parser: argparse.ArgumentParser, cls: type[Any]) -> list[str]:
    """Where ``parser`` and the dataclass ``cls`` disagree: an option without a field or a field without an
    option, or a default that differs."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    out = [f"option --{d.replace('_', '-')} has no field in {cls.__name__}" for d in sorted(set(actions) - set(fields))]
    out += [f"field {n} of {cls.__name__} has no option" for n in sorted(set(fields) - set(actions))]
    for name in sorted(set(actions) & set(fields)):
        want, got = _default(fields[name]), actions[name].default
        if want != got:
            out.append(f"{name}: {cls.__name__} says {want!r}, the parser {got!r}")
    return out


def test_oij_run_parser_and_run_options_agree() -> None:
    assert differences(command_parser("run"), RunOptions) == []


@pytest.mark.parametrize(("dest", "value"), [("replicas", 3), ("decay", 0.25), ("collector", "standard")])
def test_a_changed_default_is_found(dest: str, value: Any) -> None:
    """Negative control: one default of the parser changed is reported, by name."""
    parser = command_parser("run")
    action = next(a for a in parser._actions if a.dest == dest)
    action.default = value
    assert [d for d in differences(parser, RunOptions) if d.startswith(f"{dest}:")] != []


def test_a_missing_option_is_found() -> None:
    """Negative control: an option the dataclass lacks, and a field the parser lacks."""
    parser = command_parser("run")
    parser.add_argument("--made-up", type=int, default=1)
    assert "option --made-up has no field in RunOptions" in differences(parser, RunOptions)

    @dataclasses.dataclass
    class Wider(RunOptions):
        extra: int = 0

    assert "field extra of Wider has no option" in differences(command_parser("run"), Wider)


def test_the_engine_defaults_are_the_configs() -> None:
    """The defaults typed in several places once (``replicas=2`` in 5, ``calibration=4096``, ``decay=0.5``,
    ``schedule_every=4096``, ``batch=32`` in 3 each) are :mod:`oij.parallel.config`'s."""
    assert (RunOptions.replicas, RunOptions.calibration, RunOptions.decay, RunOptions.schedule_every) == (
        REPLICAS, CALIBRATION, DECAY, SCHEDULE_EVERY)
    job, team = JobOptions(), TeamOptions()
    assert (job.replicas, job.batch, job.calibration) == (REPLICAS, BATCH, CALIBRATION)
    assert (team.replicas, team.batch, team.decay, team.schedule_every) == (REPLICAS, BATCH, DECAY, SCHEDULE_EVERY)
