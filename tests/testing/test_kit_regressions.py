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
from collections.abc import Callable, Sequence

import pytest

from oij.testing import Case
from oij.testing._features import DEFAULT_FEATURES
from oij.testing._protocol import ProtocolError, parse_output
from oij.testing._runner import Outcome, SearchResult, search
from tests.impls.accum_bugs import BUGS, TEXT_BUGS
from tests.impls.accum_oij import Join, main

SHAPES = sorted(BUGS)


def outcome_in_process(run_main: Callable[[], None], stdin: str) -> Outcome:
    """What :func:`oij.testing._runner.run_command` returns for an implementation whose ``main`` runs in this
    process: ``stdin`` as its standard input, its standard output parsed; a raise is its crash."""
    out = io.StringIO()
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
    make: type[Join] = {**BUGS, **TEXT_BUGS}.get(argv[-1], Join)
    return outcome_in_process(lambda: main(make), stdin)


def default_run(bug: str, vectors: bool, features: frozenset[str] = DEFAULT_FEATURES) -> SearchResult:
    """``oij conform [--no-vectors] -- python accum_bugs.py BUG`` at its defaults, the command in this process."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("oij.testing._runner.run_command", in_process)
        return search(["python", "accum_bugs.py", bug], features=features, vectors=vectors)


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
