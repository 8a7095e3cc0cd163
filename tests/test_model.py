"""The model checker (proofs/model.py): every manifest verdict, the rediscovered PPOIJ examples, and the
negative control that removes the ordering rule from the engines' own collector."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oij.cli import main
from parallel.runtime.collector import RoundRobinCollector, StandardCollector
from proofs import model

pytestmark = pytest.mark.timeout(300)

MODELS = {m["name"]: m for m in model.manifest()}


@pytest.mark.parametrize("name", list(MODELS))
def test_every_model_gets_its_manifest_verdict(name: str) -> None:
    m = MODELS[name]
    res = model.check(model.design_from(m, "quick"))
    assert (sorted(c.verdict for c in res.counterexamples) or ["safe"]) == sorted(m["expect"])
    assert res.states > 100 and res.edges >= res.states - 1


def test_example_4_1_duplicates_are_rediscovered() -> None:
    d = model.design_from(MODELS["dp-standard"], "quick")
    cx = next(c for c in model.check(d).counterexamples if c.verdict == "unsafe: duplicate")
    assert len(cx.trace) <= 10
    emits = [(r, pairs) for kind, _e, r, _m, pairs in cx.steps if kind == "pull" and pairs]
    dup = cx.detail.split(": ", 1)[1]
    a, b = eval(dup)[0]
    both = {r for r, pairs in emits if f"(a{a},b{b})" in pairs}
    assert both == {0, 1}, cx.trace  # each replica emits the pair once: Fig. 8


def test_example_4_3_is_rediscovered_for_hp_with_a_fixed_round_robin() -> None:
    d = model.design_from(MODELS["hp-fixed-round-robin"], "quick")
    [cx] = model.check(d).counterexamples
    assert cx.verdict == "unsafe: missing" and len(cx.trace) <= 12
    text = model.format_trace(d, cx)
    assert "R0 pulls" in text and "R1 pulls" in text


def test_removing_the_rule_from_the_collector_breaks_the_manifest(monkeypatch: Any) -> None:
    # The model runs the engines' RoundRobinCollector.deliver; replace it by KP's standard policy.
    d = model.design_from(MODELS["dp-round-robin"], "quick")
    assert model.check(d).verdict == "safe"
    monkeypatch.setattr(RoundRobinCollector, "deliver", StandardCollector.deliver)
    res = model.check(d)
    assert "unsafe: duplicate" in res.verdict and "unsafe: missing" in res.verdict


def test_a_deadlock_is_reported(monkeypatch: Any) -> None:
    # A collector that never releases anything: every path ends with input left and no step enabled.
    def stuck(self: Any) -> list[Any]:
        return []

    d = model.design_from(MODELS["kp-standard"], "quick")
    monkeypatch.setattr(StandardCollector, "deliver", stuck)
    assert model.check(d).verdict == "deadlock"


def test_oij_prove_writes_traces_and_diagrams(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["prove", "--quick", "dp-standard", "late_rules_always_agree", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "2 of 2 verdicts as the manifest says" in out
    files = sorted(p.name for p in tmp_path.iterdir())
    assert "dp-standard--duplicate.png" in files and "dp-standard--duplicate.svg" in files
    assert "emits" in (tmp_path / "dp-standard--duplicate.txt").read_text()


def test_oij_prove_fails_when_a_verdict_differs(monkeypatch: Any, capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    monkeypatch.setattr(RoundRobinCollector, "deliver", StandardCollector.deliver)
    rc = main(["prove", "dp-round-robin", "--no-claims", "--out", str(tmp_path)])
    assert rc == 1
    assert "DIFFERS" in capsys.readouterr().out
