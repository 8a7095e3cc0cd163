"""No silent regressions: every bug shape the kit has been shown to catch is still caught by a default run.

A default ``oij conform`` run is deterministic (seed 0): while an implementation answers as a correct one
would, the kit sends the same next case, so whether the run catches a shape is a property of the generator
and the vectors alone.  A change to either can thin out the cases that meet a shape (issue 46: a shape caught
one round was found only after 321 cases the next, and no test noticed).  Here every shape of
``tests/impls/accum_bugs.py`` runs through the kit's own :func:`oij.testing._runner.search` at the defaults
(200 cases, seed 0), once with the vectors and once on the generated cases alone (the shapes only the text
shows, ``TEXT_BUGS``, with the vectors), with the command run in
this process instead of a subprocess (the same text in, the same lines out), so the whole check is cheap.

Negative control: the check can fail -- with the generator restricted so that it can no longer meet a shape
(no aggregates drawn), the same harness reports that shape as missed.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections.abc import Callable, Sequence

import pytest

from oij.testing import Case
from oij.testing._features import DEFAULT_FEATURES
from oij.testing._protocol import ProtocolError, parse_output
from oij.testing._runner import Outcome, SearchResult, search
from tests.impls.accum_bugs import BUGS, SMALL_SCOPE_BUGS, TEXT_BUGS
from tests.impls.accum_oij import Join, main

SHAPES = sorted(BUGS)


IN_PROCESS = threading.Lock()
"""One in-process run at a time: the kit runs the vectors and the small-scope cases of a command two at a time
(threads), and a run here swaps the process's ``sys.stdin`` and ``sys.stdout``."""


def outcome_in_process(run_main: Callable[[], None], stdin: str) -> Outcome:
    """What :func:`oij.testing._runner.run_command` returns for an implementation whose ``main`` runs in this
    process: ``stdin`` as its standard input, its standard output parsed; a raise is its crash."""
    out = io.StringIO()
    with IN_PROCESS:
        old = sys.stdin
        sys.stdin = io.StringIO(stdin)
        try:
            with contextlib.redirect_stdout(out):
                run_main()
        except (Exception, SystemExit) as e:  # the implementation's fault, as a crash of the command would be
            return Outcome(None, f"crash: {type(e).__name__}: {e}")
        finally:
            sys.stdin = old
    try:
        return Outcome(parse_output(out.getvalue().encode()))
    except ProtocolError as e:
        return Outcome(None, f"protocol error: {e}")


def in_process(argv: Sequence[str], stdin: str, timeout: float) -> Outcome:
    """:func:`oij.testing._runner.run_command` for ``python accum_bugs.py BUG``, run in this process."""
    del timeout
    make: type[Join] = {**BUGS, **TEXT_BUGS, **SMALL_SCOPE_BUGS}.get(argv[-1], Join)
    return outcome_in_process(lambda: main(make), stdin)


def default_run(bug: str, vectors: bool, features: frozenset[str] = DEFAULT_FEATURES, small_scope: int = 0,
                small_cover: bool = False, max_examples: int = 200) -> SearchResult:
    """``oij conform [--no-vectors] -- python accum_bugs.py BUG`` at its defaults, the command in this process;
    without a small-scope stage unless given (``small_scope=2, small_cover=True`` is the per-case default since
    issue 65, ``small_scope=2`` the default with ``--session``)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("oij.testing._runner.run_command", in_process)
        return search(["python", "accum_bugs.py", bug], features=features, vectors=vectors, small_scope=small_scope,
                      small_cover=small_cover, max_examples=max_examples)


@pytest.mark.parametrize("bug", SHAPES)
def test_a_default_run_still_catches_every_known_shape(bug: str) -> None:
    with_vectors = default_run(bug, True)
    assert with_vectors.failure is not None, f"{bug}: no longer caught by a default oij conform run"
    assert len(with_vectors.failure.case) <= 6, with_vectors.failure.report
    search_only = default_run(bug, False)
    assert search_only.failure is not None, f"{bug}: no longer caught by the generated cases of a default run"
    assert search_only.found_by.startswith("search, case "), search_only.found_by
    assert len(search_only.failure.case) <= 6, search_only.failure.report


@pytest.mark.parametrize("bug", sorted(TEXT_BUGS))
def test_a_default_run_still_catches_every_shape_of_the_text(bug: str) -> None:
    # the vectors are what meets these shapes (TEXT_BUGS says why): a default run must still catch them
    res = default_run(bug, True)
    assert res.failure is not None, f"{bug}: no longer caught by a default oij conform run"
    assert res.found_by.startswith("vector representation/int-values-"), res.found_by


def test_the_correct_implementation_passes_in_process() -> None:
    res = default_run("correct", True)
    assert res.failure is None, res.failure.report if res.failure else ""
    assert res.generated == 200 and res.vectors > 0


def test_negative_control_a_generator_that_cannot_meet_a_shape_is_reported() -> None:
    # without exclusive bounds the swapped flags cannot show: the same harness must then say "not caught"
    res = default_run("probe-path-flags-swapped", False, DEFAULT_FEATURES - {"exclusive"})
    assert res.failure is None and res.generated == 200


SMALL_SCOPE_CATCHES = ("base-final-at-edge", "probe-dropped-at-edge", "probe-purge-sign-flipped",
                       "ties-probe-first-twice", "upper0-exclusive-base-path")
"""The shapes that the small-scope stage of up to 2 events meets alone (the others need exclusive bounds,
channels, or values and keys outside its alphabet)."""


def test_the_small_scope_stage_alone_catches_the_state_edge_shapes() -> None:
    """``--small-scope 2`` (the default with ``--session``), without the vectors and with one generated case:
    the shapes of the window's corners and the state edges are caught by it, the correct implementation passes
    all 1,408 cases."""
    def run(bug: str) -> SearchResult:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("oij.testing._runner.run_command", in_process)
            return search(["python", "accum_bugs.py", bug], vectors=False, max_examples=1, small_scope=2)

    for bug in SMALL_SCOPE_CATCHES:
        res = run(bug)
        assert res.failure is not None and res.found_by.startswith("small scope, case "), (bug, res.found_by)
        assert len(res.failure.case) <= 2, res.failure.report
    ok = run("correct")
    assert ok.failure is None and ok.small_scope == 1408


def test_small_scope_cases_are_one_per_symmetry_class() -> None:
    from oij.spec.model import End, Query, StreamTuple, Watermark

    from oij.testing._smallscope import canonical, small_scope_cases, small_scope_sizes

    q = Query(-2, 0)
    a = Case(q, (StreamTuple("base", 1, 7, 2), Watermark(8), StreamTuple("probe", 2, 7, 2), End()))
    b = Case(q, (StreamTuple("base", 1, 0, 1), Watermark(1), StreamTuple("probe", 2, 0, 1), End()))
    assert (canonical(a).query, canonical(a).events) == (canonical(b).query, canonical(b).events)
    assert canonical(a).encoding == "full|int"
    assert small_scope_sizes(DEFAULT_FEATURES, 2) == [(288, 80), (2624, 1328)]
    cases = small_scope_cases(DEFAULT_FEATURES, 2)
    assert len(cases) == 1408 and len({(c.query, c.events) for c in cases}) == 1408
    lateness_only = small_scope_cases(frozenset({"lateness", "late-report"}), 2)  # only what is claimed
    assert lateness_only and all(c.query.lateness is not None for c in lateness_only)


def test_small_scope_out_of_range_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from oij.cli import main as cli

    assert cli(["conform", "--small-scope", "4", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--small-scope" in err, err


def test_the_per_case_default_runs_the_small_scope_covering_array() -> None:
    from oij.testing._conform import ConformOptions

    o = ConformOptions(cmd=("x",)).with_defaults()
    assert o.small_scope == "cover"
    assert ConformOptions(cmd=("x",), session=True).with_defaults().small_scope == 2


@pytest.mark.parametrize("bug", sorted(SMALL_SCOPE_BUGS))
def test_shapes_only_the_small_scope_met_are_caught_by_the_per_case_default(bug: str) -> None:
    """Issue 65: these shapes passed the per-case default of before (the vectors, then 200 generated cases: the
    negative control, kept as a fact about the generator) and were caught only by ``--session``'s small scope;
    the per-case default's covering array catches them too, with the same small case."""
    before = default_run(bug, True)
    assert before.failure is None, f"{bug}: now met by the vectors or the generated cases ({before.found_by})"
    session = default_run(bug, True, small_scope=2)
    assert session.failure is not None and session.found_by.startswith("small scope, case "), session.found_by
    per_case = default_run(bug, True, small_scope=2, small_cover=True)
    assert per_case.failure is not None, f"{bug}: missed by the per-case default's covering array"
    assert per_case.found_by.startswith("small scope (covering array), case "), per_case.found_by
    assert len(per_case.failure.case) <= 2, per_case.failure.report


def test_the_covering_array_catches_the_small_scope_shapes_alone() -> None:
    """The shapes the whole small scope of up to 2 events catches alone, its covering array (about 160 cases of
    1,408) catches alone too; the correct implementation passes every case of it."""
    for bug in [*SMALL_SCOPE_CATCHES, *SMALL_SCOPE_BUGS]:
        res = default_run(bug, False, small_scope=2, small_cover=True, max_examples=1)
        assert res.failure is not None and res.found_by.startswith("small scope (covering array)"), (bug,
                                                                                                     res.found_by)
    ok = default_run("correct", False, small_scope=2, small_cover=True, max_examples=1)
    assert ok.failure is None and 100 <= ok.small_scope <= 250 and ok.small_scope_cover


def test_the_covering_array_covers_every_pair_of_factor_values() -> None:
    from oij.testing._smallscope import COVER_FACTORS, case_factors, small_scope_cases, small_scope_cover

    cover = small_scope_cover(DEFAULT_FEATURES)
    full = small_scope_cases(DEFAULT_FEATURES, 2)
    assert len(cover) < len(full) / 5

    def pairs(cases: list[Case]) -> set[tuple[object, ...]]:
        out: set[tuple[object, ...]] = set()
        for c in cases:
            f = case_factors(c)
            out |= {(a, b, f[a], f[b]) for a, b in COVER_FACTORS}
        return out

    from dataclasses import replace

    want = pairs([c for case in full for c in (case, replace(case, encoding="full"))])
    assert pairs(cover) == want
    assert pairs(cover[: len(cover) // 2]) != want  # the control: half of it leaves combinations uncovered


@pytest.mark.parametrize("features", ["all", "all,-aggregates,-channels"])
def test_the_covering_array_is_the_eager_greedy_choice(features: str) -> None:
    """Issue 65: the covering array is chosen lazily (a heap of counts that only fall), the same cases as
    recounting every case at each step (the eager greedy, below, the definition)."""
    from dataclasses import replace

    from oij.testing._case import parse_features
    from oij.testing._smallscope import COVER_FACTORS, case_factors, small_scope_cases, small_scope_cover

    feats = parse_features(features)
    pool = [c for case in small_scope_cases(feats, 2) for c in (case, replace(case, encoding="full"))]
    items = []
    for c in pool:
        f = case_factors(c)
        items.append({(a, b, f[a], f[b]) for a, b in COVER_FACTORS})
    left = set().union(*items)
    chosen: list[int] = []
    while left:
        best = max(range(len(pool)), key=lambda i: (len(items[i] & left), -i))
        chosen.append(best)
        left -= items[best]
    assert small_scope_cover(feats) == [pool[i] for i in sorted(chosen)]
