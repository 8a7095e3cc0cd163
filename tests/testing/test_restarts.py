"""Exactly-once across crashes: oij.spec.recovery's verdict and the kit's restart mode (oij/testing/_restarts.py).

The restart mode runs real processes and kills them with SIGKILL; the negative controls
(tests/impls/restart_bugs.py) must each be found with a replay of a few events, and the correct mode must pass.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oij.spec.model import End, Query, StreamTuple, Watermark
from oij.spec.recovery import Checkpoint, committed, is_valid_checkpoint, judge_committed, restart_point

import oij.testing._restarts as restarts
from oij.testing._case import Case
from oij.testing._restarts import KillPoint, check_restarts, plan_json, read_plan, restart_search, run_plan
from tests.forking import BUGS, REAL_RESTART_CASES, ROOT, SHARED_N, forking, shared_restart_cases

pytestmark = pytest.mark.timeout(300)


def _cmd(mode: str) -> list[str]:
    return [sys.executable, str(BUGS), mode]


@pytest.fixture
def forked() -> Iterator[None]:
    with forking():
        yield


# ------------------------------------------------------------------------------------------------ spec

def test_committed_is_what_precedes_the_last_checkpoint() -> None:
    o = ["a", Checkpoint(1), "b", Checkpoint(2), "c"]
    assert committed(o, completed=False) == ["a", "b"]
    assert committed(o, completed=True) == ["a", "b", "c"]
    assert committed(["a", "b"], completed=False) == []
    assert restart_point(o, 0) == 2 and restart_point(["a"], 5) == 5
    assert is_valid_checkpoint(3, 2, 3) and not is_valid_checkpoint(1, 2, 3) and not is_valid_checkpoint(4, 2, 3)


@given(st.lists(st.integers(0, 5), max_size=12), st.data())
def test_any_split_at_checkpoints_is_exactly_once(rows: list[int], data: st.DataObject) -> None:
    """Incarnations that each commit a consecutive piece of R (and print provisional rows after their last
    checkpoint, which the next one prints again) are exactly once."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=4)))
    bounds = [0, *cuts, len(rows)]
    outputs = []
    for i in range(len(bounds) - 1):
        piece = rows[bounds[i]:bounds[i + 1]]
        extra = rows[bounds[i + 1]:bounds[i + 1] + 2]  # provisional: lost with the crash
        last = i == len(bounds) - 2
        outputs.append([*piece] if last else [*piece, Checkpoint(i + 1), *extra])
    v = judge_committed(rows, outputs)
    assert v.exactly_once and v.kind == "exactly-once"


def test_verdict_kinds_negative_controls() -> None:
    r = ["a", "b"]
    assert judge_committed(r, [["a", Checkpoint(1)], ["b"]]).kind == "exactly-once"
    v = judge_committed(r, [["a", Checkpoint(1)], ["a", "b"]])
    assert (v.kind, v.duplicated) == ("at-least-once", ["a"])
    v = judge_committed(r, [["a", Checkpoint(1), "b"], []])
    assert (v.kind, v.lost) == ("lossy", ["b"])
    v = judge_committed(r, [["a", Checkpoint(1)], ["c", "b"]])
    assert (v.kind, v.unexpected) == ("wrong", ["c"])
    assert judge_committed(r, [["a", "b"]], last_completed=False).lost == ["a", "b"]


# ----------------------------------------------------------------------------------------- the kit

CASE = Case(Query(-5, 0), (StreamTuple("probe", 1, 8, "k"), StreamTuple("base", 2, 10, "k"),
                           StreamTuple("probe", 3, 9, "k"), Watermark(12), StreamTuple("base", 4, 12, "k"), End()))


def test_correct_recovery_is_exactly_once_under_every_plan() -> None:
    n, failure = check_restarts(_cmd("correct"), CASE, restarts=2)
    assert failure is None, failure.report() if failure else ""
    assert n >= 5  # kills at a checkpoint, mid-output and between events


@pytest.mark.parametrize(("mode", "kinds"), [("checkpoint-before-emit", {"lossy"}), ("reemit-after-restore",
                                                                                      {"at-least-once"})])
def test_negative_controls_found_with_a_short_replay(mode: str, kinds: set[str], forked: None) -> None:
    """A checkpoint taken before the rows it covers are out loses them (lossy); rows emitted again after a restore
    are duplicates (at-least-once).  (The third mode, ``no-restore``: the search of
    test_a_failing_restart_run_prints_its_first_failure_before_shrinking, which makes the same checks.)"""
    r = restart_search(_cmd(mode), max_examples=15)
    assert r.failure is not None, f"{mode} passed the restart mode"
    run = r.failure.run
    assert run.verdict is not None and run.verdict.kind in kinds
    assert len(run.case) <= 4, r.failure.report()
    assert "kill plan" in r.failure.report()


def test_a_kill_between_events_restarts_from_the_last_checkpoint() -> None:
    run = run_plan(_cmd("correct"), CASE, (KillPoint("fed", 2),))
    assert run.ok
    first, second = run.incarnations
    assert first.killed == KillPoint("fed", 2) and first.fed == 2
    assert Checkpoint(2) in first.output  # it was killed after its checkpoint at event 2 ...
    assert second.start == 2 and second.exit_code == 0  # ... so the next one restores it


def test_a_crash_that_is_not_a_kill_is_reported() -> None:
    run = run_plan([sys.executable, "-c", "import sys; sys.exit(3)"], CASE, ())
    assert run.problem is not None and "exit code 3" in run.problem


def test_a_checkpoint_ahead_of_the_input_is_a_protocol_error() -> None:
    liar = [sys.executable, "-c", "import sys; sys.stdin.readline(); print('{\"type\":\"checkpoint\",\"events\":99}')"]
    run = run_plan(liar, CASE, ())
    assert run.problem is not None and "protocol error" in run.problem


def test_kill_plan_round_trip_and_errors() -> None:
    plan = (KillPoint("fed", 3), KillPoint("checkpoint", 1))
    assert read_plan(plan_json(plan).decode()) == plan
    with pytest.raises(ValueError, match=r"plan\[0\]\[0\]: must be one of"):
        read_plan('[["bogus", 1]]')


def test_oij_join_state_passes_the_restart_mode() -> None:
    """``oij join - --state`` (the oracle behind the restart protocol) is exactly once under two kills in a row."""
    # its first case with an interpreter per incarnation (the choice of cases shared), then the four with forked ones
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(restarts, "restart_cases", shared_restart_cases)
        r = restart_search(["oij", "join", "-", "--state"], max_examples=1, restarts=2)
    assert r.failure is None, r.failure.report() if r.failure else ""
    assert r.cases == 1 and r.plans >= 2
    with forking():
        r = restart_search(["oij", "join", "-", "--state"], max_examples=4, restarts=2)
    assert r.failure is None, r.failure.report() if r.failure else ""
    assert r.cases == 4 and r.plans >= 8


def test_conform_restarts_cli_reports_and_replays(tmp_path: Path) -> None:
    """``oij conform --restarts`` as a command: the first failure printed before the verdict, a shrink budget of
    0 s stops the shrinking and says so (the shrinking itself: the tests of :func:`restart_search` here), the case
    and its kill plan written, and their replay failing again, and passing with the correct mode; usage errors
    exit 2 in one line.  (One search serves every check: each is a run of the same deterministic cases.)"""

    out = tmp_path / "f.jsonl"
    p = subprocess.run(["oij", "conform", "--restarts", "1", "--max-examples", "10", "--shrink-budget", "0",
                        "--replay-out", str(out), "--", *_cmd("no-restore")], capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "is NOT exactly once (lossy" in p.stdout and "lost (" in p.stdout
    first, verdict = p.stdout.index("first failure ("), p.stdout.index("is NOT exactly once")
    assert first < verdict and "stopped by its budget of 0 s" in p.stdout[verdict:], p.stdout
    plan = tmp_path / "f.plan.json"
    assert read_plan(plan.read_text())
    again = subprocess.run(["oij", "conform", "--replay", str(out), "--kill-plan", str(plan), "--restarts", "1",
                            "--", *_cmd("no-restore")], capture_output=True, text=True, timeout=120)
    assert again.returncode == 1 and "lossy" in again.stdout
    fixed = subprocess.run(["oij", "conform", "--replay", str(out), "--kill-plan", str(plan), "--restarts", "1",
                            "--", *_cmd("correct")], capture_output=True, text=True, timeout=120)
    assert fixed.returncode == 0 and "exactly once" in fixed.stdout
    bad = subprocess.run(["oij", "conform", "--restarts", "1", "--session", "--", *_cmd("correct")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    bad = subprocess.run(["oij", "conform", "--restarts", "1", "--shrink-budget", "-1", "--", *_cmd("correct")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--shrink-budget" in bad.stderr


# ------------------------------------------------------------------------- restarts that find lost state

LEFT = Case(Query(-2, 0, join="left"), (StreamTuple("base", 1, 10, "k"), StreamTuple("probe", 2, 9, "k"),
                                        Watermark(11), StreamTuple("base", 3, 12, "k"), Watermark(20), End()))
APART = Case(Query(-2, 0, channels=2), (StreamTuple("base", 1, 10, "k"), Watermark(15, 0), Watermark(5, 1),
                                        Watermark(15, 1), StreamTuple("probe", 2, 9, "k"), End()))


def test_the_state_chooses_kill_points() -> None:
    from oij.testing._restarts import state_moments

    m = state_moments(LEFT)
    assert m["matched"] == [2]  # base 1 matched probe 2 at event 2 and is final at event 3 (W = 11 > 10)
    assert m["w-moved"] == [3, 5]
    a = state_moments(APART)
    # apart once both channels have spoken (15 and 5), together again at event 4; the probe at 9 is then late
    assert a["channels-apart"] == [3] and a["late"] == [5]


def test_a_small_case_is_killed_between_every_two_events() -> None:
    from oij.testing._restarts import clean_run, plans

    clean = clean_run(_cmd("correct"), LEFT)
    fed = {p[0].n for p in plans(clean, len(LEFT), 1, LEFT) if p[0].kind == "fed"}
    assert fed == {1, 2, 3, 4, 5}


def test_restart_cases_cover_the_state_a_restart_can_lose() -> None:
    from oij.testing._cases import DEFAULT_FEATURES
    from oij.testing._restarts import restart_tags

    restart_cases = REAL_RESTART_CASES
    chosen = restart_cases(DEFAULT_FEATURES, SHARED_N)
    # deterministic (a failure replays): the same as a choice made apart, the one the searches here share (made
    # by another test on this worker, or here)
    assert chosen == shared_restart_cases(DEFAULT_FEATURES, SHARED_N)
    # the first n of a longer choice are the choice of n (what shared_restart_cases rests on; a pool of 100
    # draws the same way as one of 800, faster)
    longer = restart_cases(DEFAULT_FEATURES, SHARED_N, pool=100)
    assert all(restart_cases(DEFAULT_FEATURES, n, pool=100) == longer[:n] for n in (1, 6, 15))
    tags = set().union(*(restart_tags(c) for c in chosen))
    assert {"matched-then-w-moved-then-late", "channels-apart-2-then-w-moved-then-late",
            "channels-apart-3-then-w-moved-then-late", "cursor-then-w-moved", "join:left", "channels:3",
            "lateness"} <= tags, sorted(tags)


@pytest.mark.parametrize(("mode", "kinds"), [("forget-matched", {"wrong"}), ("min-watermark", {"wrong", "lossy"})])
def test_restart_bugs_of_lost_state_are_caught_at_the_defaults(mode: str, kinds: set[str], forked: None) -> None:
    """Issue 46's negative controls: a restore that forgets a left join's matched set, and one that keeps only
    the minimum watermark (every channel restored to W), each caught by ``oij conform --restarts 1`` at its
    defaults (20 cases), with a short replay."""
    r = restart_search(_cmd(mode))
    assert r.failure is not None, f"{mode} passed the restart mode at its defaults"
    run = r.failure.run
    # min-watermark: a tuple late by the lost channel's watermark is joined (wrong) or its late row lost (lossy)
    assert run.verdict is not None and run.verdict.kind in kinds, r.failure.report()
    assert len(run.case) <= 8, r.failure.report()


def test_state_drop_mutants_are_killed_and_an_equivalent_one_is_excused(tmp_path: Path) -> None:
    """``oij bench kit-power --restarts`` on two of its mutants, over the first 6 of the default run's cases (the
    whole list at the defaults is the benchmark's; the sixth is the first with a left join's matched base awaiting
    finality, whose loss a later move of W shows): a dropped matched set is killed, a dropped wake-up heap
    (which only delays finality) survives as equivalent with its argument; and a survivor that is not listed as
    equivalent (the correct mode) fails the run (negative control).  Its commands are real processes, not forked:
    forked from a worker of the full suite, both mutants' runs once ended at once on a problem (kind "error"),
    which neither a run of this file nor a real process shows."""
    import json

    from oij.bench import restartpower
    from oij.bench.restartpower import RESTART_BUGS, RestartMutant, restart_power

    real = restartpower.list_mutants
    # the verdict is the exit code alone: a killed mutant's failure is not shrunk here (``--no-shrink``; the
    # shrinking of a restart failure is the tests' above and below)
    few = ("--max-examples", "6", "--no-shrink")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(restartpower, "list_mutants",
                   lambda repo: [m for m in real(repo) if m.name in ("matched:drop", "wakeups:drop")])
        rc = restart_power(ROOT, 2, 300.0, str(tmp_path / "r.json"), None, extra=few)
        res = json.loads((tmp_path / "r.json").read_text())
        assert rc == 0, res["mutants"]
        verdicts = {m["name"]: m["verdict"] for m in res["mutants"]}
        assert verdicts == {"matched:drop": "killed", "wakeups:drop": "equivalent"}
        # (one case is enough for a survivor: the correct mode survives every case)
        mp.setattr(restartpower, "list_mutants", lambda repo: [RestartMutant("correct", RESTART_BUGS)])
        assert restart_power(ROOT, 1, 300.0, str(tmp_path / "r2.json"), None, extra=("--max-examples", "1")) == 1
        assert json.loads((tmp_path / "r2.json").read_text())["counts"]["survived"] == 1


# ------------------------------------------------------------------------- a verdict in bounded time (issue 65)

SHRINK_STARTS = "<shrinking starts>"


def printed_before_shrinking(log: list[str]) -> bool:
    """In ``log`` (what was printed, and :data:`SHRINK_STARTS` where shrinking began), a failure report with its
    kill plan and rows comes before shrinking starts."""
    printed = next((i for i, x in enumerate(log) if "kill plan:" in x and "verdict:" in x), None)
    starts = log.index(SHRINK_STARTS) if SHRINK_STARTS in log else len(log)
    return printed is not None and printed < starts


def test_a_failing_restart_run_prints_its_first_failure_before_shrinking(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          forked: None) -> None:
    import oij.testing._restarts as restarts

    log: list[str] = []
    real = restarts.shrink_within

    def spy(*args: Any, **kwargs: Any) -> restarts.Shrunk:
        log.append(SHRINK_STARTS)
        return real(*args, **kwargs)

    monkeypatch.setattr(restarts, "shrink_within", spy)
    replay = tmp_path / "f.jsonl"
    written: list[bool] = []

    def say_first(text: str) -> None:
        written.append(replay.exists() and (tmp_path / "f.plan.json").exists())
        log.append(text)

    rep = restarts.restart_conformance(_cmd("no-restore"), max_examples=10, replay_out=str(replay),
                                       say_first=say_first)
    assert printed_before_shrinking(log), log
    first = log[0]
    assert re.search(r"first failure \((lossy|wrong)\)", first) and "unshrunk" in first, first
    assert "lost (" in first or "unexpected (" in first, first
    assert written == [True]  # the case as found is on disk the moment it is printed
    sh = rep.search.shrunk
    assert sh is not None and not sh.cut and sh.runs >= 1
    assert "1-minimal" in rep.text() and "minimal case of" in rep.text()
    # a restart that forgets its state loses rows (lossy) or, with an aggregate, emits a base's row over too few
    # probes (wrong), on a short case once shrunk
    failure = rep.search.failure
    assert failure is not None and failure.run.verdict is not None
    assert failure.run.verdict.kind in {"lossy", "wrong"} and len(failure.run.case) <= 4, failure.report()
    assert "kill plan" in failure.report()
    # the negative control: the report printed once the search is over (before issue 65) comes after shrinking
    log.clear()
    late = restarts.restart_conformance(_cmd("no-restore"), max_examples=10, replay_out=str(replay),
                                        shrink_budget=0.0)
    log.append(late.text())
    assert not printed_before_shrinking(log), log
    # a budget of 0 s stops the shrinking before its first try, and the report says so
    assert late.search.shrunk is not None and late.search.shrunk.cut and late.search.shrunk.runs == 0
    assert "stopped by its budget of 0 s" in late.text() and "minimal case" not in late.text()
    assert late.search.failure is late.search.first
