"""The model checkers (proofs/model.py, proofs/shared.py): every manifest verdict, the rediscovered PPOIJ
examples and Scale-OIJ hazards, and the negative controls that remove a rule from the engines' own code
(the collector's decision function, Scale-OIJ's readiness rule and eviction bound).

Each model of the manifest is explored once per module run at its quick bounds, with the engines' own code
(:func:`_checked`): the manifest's verdict, the rediscovered examples, the safe baselines of the negative controls
and ``oij prove``'s tables and drawings are all read from that one state space (the model checker is
deterministic: a second exploration of the same design finds the same states and counterexamples).  The
negative controls explore again, with the engine's rule removed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from oij.parallel.runtime.collector import RoundRobinCollector, StandardCollector
from oij.parallel.shared import scaleoij
from oij.proofs import model, shared
from oij.proofs.verdicts import Result

from oij.cli import main

pytestmark = pytest.mark.timeout(300)

MODELS = {m["name"]: m for m in model.manifest()}

_ENGINE_RULES = (RoundRobinCollector.deliver, StandardCollector.deliver, scaleoij.ready_mask,
                 scaleoij.eviction_bound)
_EXPLORED: dict[model.Design | shared.SharedDesign, Result] = {}
_CHECK_DESIGN = model.check_design


def _explored(d: model.Design | shared.SharedDesign) -> Result:
    """``model.check_design(d)`` with the engines' own rules, explored once per module run."""
    if d not in _EXPLORED:
        now = (RoundRobinCollector.deliver, StandardCollector.deliver, scaleoij.ready_mask, scaleoij.eviction_bound)
        assert now == _ENGINE_RULES, "a test patched an engine rule before reading the shared state space"
        _EXPLORED[d] = _CHECK_DESIGN(d)
    return _EXPLORED[d]


def _checked(name: str) -> tuple[Any, Result]:
    """The manifest model ``name`` at its quick bounds, and its (shared) result."""
    d = model.load_design(MODELS[name], "quick")
    return d, _explored(d)


@pytest.fixture
def prove_shares_the_state_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    """``oij prove`` in this process reads each model's result from the shared state spaces (its own code
    tabulates, compares and draws them)."""
    monkeypatch.setattr(model, "check_design", _explored)


@pytest.mark.parametrize("name", list(MODELS))
def test_every_model_gets_its_manifest_verdict(name: str) -> None:
    m = MODELS[name]
    _d, res = _checked(name)
    assert (sorted(c.verdict for c in res.counterexamples) or ["safe"]) == sorted(m["expect"])
    assert res.states > 100 and res.edges >= res.states - 1


def test_example_4_1_duplicates_are_rediscovered() -> None:
    _d, res = _checked("dp-standard")
    cx = next(c for c in res.counterexamples if c.verdict == "unsafe: duplicate")
    assert len(cx.trace) <= 10
    emits = [(r, pairs) for kind, _e, r, _m, pairs in cx.steps if kind == "pull" and pairs]
    dup = cx.detail.split(": ", 1)[1]
    a, b = eval(dup)[0]
    both = {r for r, pairs in emits if f"(a{a},b{b})" in pairs}
    assert both == {0, 1}, cx.trace  # each replica emits the pair once: Fig. 8


def test_example_4_3_is_rediscovered_for_hp_with_a_fixed_round_robin() -> None:
    d, res = _checked("hp-fixed-round-robin")
    [cx] = res.counterexamples
    assert cx.verdict == "unsafe: missing" and len(cx.trace) <= 12
    text = model.format_trace(d, cx)
    assert "R0 pulls" in text and "R1 pulls" in text


@pytest.fixture(scope="module")
def without_the_rule(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Result]:
    """``oij prove dp-round-robin`` (quick bounds, in this process) with the engines' RoundRobinCollector.deliver
    replaced by KP's standard policy: its exit code, its output, and the result it explored (once for both
    tests below; its counterexamples' diagrams are not drawn, the prove tests further down judge those)."""
    import contextlib
    import io

    _checked("dp-round-robin")  # the safe baseline, explored before the rule is removed
    seen: list[Result] = []
    real = model.check_design

    def recording(d: Any) -> Result:
        seen.append(real(d))
        return seen[-1]

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        mp.setattr(RoundRobinCollector, "deliver", StandardCollector.deliver)
        mp.setattr(model, "check_design", recording)
        mp.setattr(model, "draw_design", lambda *a, **k: None)  # the drawings are the tests' below, not these
        rc = main(["prove", "dp-round-robin", "--no-claims", "--out", str(tmp_path_factory.mktemp("prove"))])
    [res] = seen
    return rc, out.getvalue(), res


def test_removing_the_rule_from_the_collector_breaks_the_manifest(
        without_the_rule: tuple[int, str, Result]) -> None:
    # The model runs the engines' RoundRobinCollector.deliver; replace it by KP's standard policy.
    assert _checked("dp-round-robin")[1].verdict == "safe"
    res = without_the_rule[2]
    assert "unsafe: duplicate" in res.verdict and "unsafe: missing" in res.verdict


def test_a_deadlock_is_reported(monkeypatch: Any) -> None:
    # A collector that never releases anything: every path ends with input left and no step enabled.
    def stuck(self: Any) -> list[Any]:
        return []

    d = model.design_from(MODELS["kp-standard"], "quick")
    monkeypatch.setattr(StandardCollector, "deliver", stuck)
    assert model.check(d).verdict == "deadlock"


@pytest.mark.usefixtures("prove_shares_the_state_spaces")
def test_oij_prove_writes_traces_and_diagrams(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["prove", "--quick", "dp-standard", "late_rules_always_agree", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "2 of 2 verdicts as the manifest says" in out
    files = sorted(p.name for p in tmp_path.iterdir())
    assert "dp-standard--duplicate.png" in files and "dp-standard--duplicate.svg" in files
    assert "emits" in (tmp_path / "dp-standard--duplicate.txt").read_text()


def test_oij_prove_fails_when_a_verdict_differs(without_the_rule: tuple[int, str, Result]) -> None:
    rc, out, _res = without_the_rule
    assert rc == 1
    assert "DIFFERS" in out


# -- Scale-OIJ shared processing ---------------------------------------------------------------------


def _scale(name: str) -> tuple[shared.SharedDesign, Result]:
    d, res = _checked(name)
    assert isinstance(d, shared.SharedDesign)
    return d, res


def test_scale_hazard_is_a_teammate_that_has_not_inserted_yet() -> None:
    d, res = _scale("scale-self")
    [cx] = res.counterexamples
    text = shared.format_trace(d, cx)
    # the shortest path: the probe is routed to the other joiner and still in its channel when the base is read
    assert "routes b2(k0@0) to J1" in text and "J0 evaluates: a1(k0@0) reads I0,I1; emits nothing" in text
    assert not any(kind == "pull" and r == 1 for kind, _s, r, _l, _p in cx.steps), text


def test_scale_without_the_bound_and_with_both_sides_probing_duplicates() -> None:
    _d, res = _scale("scale-symmetric")
    [cx] = res.counterexamples
    assert cx.verdict == "unsafe: duplicate"
    assert sum(1 for kind, *_x, pairs in cx.steps if kind == "eval" and "(a1,b2)" in pairs) == 2


def test_removing_the_team_rule_from_the_engine_breaks_the_manifest(monkeypatch: Any) -> None:
    # The model calls the engine's ready_mask; make "team" behave as the "self" control.
    d, res = _scale("scale-evict-team")
    assert res.verdict == "safe"
    real = scaleoij.ready_mask

    def own_progress_only(rule: str, *args: Any) -> Any:
        return real("self" if rule == "team" else rule, *args)

    monkeypatch.setattr(scaleoij, "ready_mask", own_progress_only)
    assert shared.check(d).verdict == "unsafe: missing"


def test_evicting_below_the_own_bound_in_the_engine_breaks_the_manifest(monkeypatch: Any) -> None:
    d, res = _scale("scale-evict-team")
    assert res.verdict == "safe"
    real = scaleoij.eviction_bound

    def greedy(evals: Any, lo: int) -> int | None:
        return real([max(evals)], lo)  # the most advanced joiner's bound instead of the minimum

    monkeypatch.setattr(scaleoij, "eviction_bound", greedy)
    assert shared.check(d).verdict == "unsafe: missing"


def test_the_model_uses_the_engine_rule_the_engine_uses() -> None:
    import numpy as np

    ends = np.array([5, 5], np.int64)
    progs = np.array([9, 3], np.int64)
    masks = np.array([0b01, 0b11], np.int64)
    ready, held = scaleoij.ready_mask("team", ends, progs, 0, masks)
    assert ready.tolist() == [True, False] and held == 1
    assert scaleoij.ready_mask("self", ends, progs, 0, masks)[0].tolist() == [True, True]
    assert scaleoij.eviction_bound([4, 7], -1) == 3 and scaleoij.eviction_bound([scaleoij.NEG, 7], -1) is None


@pytest.mark.usefixtures("prove_shares_the_state_spaces")
def test_oij_prove_draws_the_scale_counterexample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["prove", "--quick", "scale-move", "spark_buckets_find_every_pair", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["scale-move--missing.png", "scale-move--missing.svg", "scale-move--missing.txt"]
    assert "publishes team(k0) = {J1}" in (tmp_path / "scale-move--missing.txt").read_text()
