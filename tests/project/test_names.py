"""One name per thing (issue 66): the collectors are named once, in :data:`oij.parallel.config.COLLECTORS`."""

from __future__ import annotations

import pytest
from oij.parallel.config import COLLECTOR_ALIASES, COLLECTORS
from oij.proofs.model import COLLECTORS as MODEL_COLLECTORS

from oij.cli import build_parser


def test_the_model_checker_names_the_engines_collectors_as_they_do() -> None:
    """The model's collectors are the engines' (their naive negative control aside) plus its own fixed variant:
    it once said ``round-robin`` where the runtime said ``rr``."""
    assert set(MODEL_COLLECTORS) - {"fixed-round-robin"} == set(COLLECTORS) - {"naive"}
    assert not set(COLLECTOR_ALIASES) & (set(COLLECTORS) | set(MODEL_COLLECTORS))


@pytest.mark.parametrize(("given", "meant"), [("round-robin", "round-robin"), ("rr", "round-robin"),
                                              ("standard", "standard"), ("auto", "auto")])
def test_oij_run_takes_each_collector_name_and_the_old_spelling(given: str, meant: str) -> None:
    args = build_parser("run").parse_args(["run", "w.jsonl", "--collector", given])
    assert args.collector == meant


def test_oij_run_refuses_an_unknown_collector(capsys: pytest.CaptureFixture[str]) -> None:
    """Negative control: a name that is neither a collector nor an alias is refused, exit code 2."""
    with pytest.raises(SystemExit) as e:
        build_parser("run").parse_args(["run", "w.jsonl", "--collector", "round"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_check_salting_threshold_has_its_own_name(capsys: pytest.CaptureFixture[str]) -> None:
    """``--theta`` is HP's split threshold in ``oij run``; in ``oij check`` Spark's salting threshold is
    ``--salt-theta``, the old spelling still parsed but not shown.  Negative control: ``oij run`` keeps
    ``--theta``."""
    from oij.cli import build_parser

    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["check", "--help"])
    help_text = capsys.readouterr().out
    assert "--salt-theta" in help_text and "--theta" not in help_text.replace("--salt-theta", "")
    assert parser.parse_args(["check", "--theta", "1.5"]).theta == 1.5
    assert parser.parse_args(["check", "--salt-theta", "1.7"]).theta == 1.7
    assert parser.parse_args(["check"]).theta == 1.2
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--help"])
    assert "--theta" in capsys.readouterr().out
