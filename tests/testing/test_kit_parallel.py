"""Issue 65: the fixed cases (the vectors, the small scope's covering array) of a per-case run go two at a time by
default; a failure seen while another case ran beside it is run again alone before it is reported.

An implementation whose processes interfere (here: a marker file they share) fails only beside another: the
kit runs the failing case alone, finds it passes, names it (``SearchResult.interference``) and runs the rest
one at a time, so the verdict is the one of ``-j 1``.  Negative controls: the same implementation does fail
when its parallel outcomes are judged as they come (the marker works), and a real bug is still reported,
confirmed alone.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest
from oij.spec.profiles import CANONICAL

from oij.testing._case import Case
from oij.testing._features import DEFAULT_FEATURES
from oij.testing._runner import SearchResult, fixed_outcomes, judge, run_fixed, search
from oij.testing._smallscope import small_scope_cases
from tests.forking import forked_commands

IMPLS = Path(__file__).parent.parent / "impls"
SHARED = f"""
import io, os, runpy, sys, time
marker, data = sys.argv[1], sys.stdin.read()
busy = os.path.exists(marker)  # another process of this command is running
open(marker, "w").close()
time.sleep(0.4)
try:
    os.remove(marker)
except FileNotFoundError:
    pass
if busy:
    print("a line its neighbour's state spoiled")
else:
    sys.stdin = io.StringIO(data)
    runpy.run_path({str(IMPLS / "oracle_cmd.py")!r}, run_name="__main__")
"""


def _cases() -> list[Case]:
    return small_scope_cases(DEFAULT_FEATURES, 1)[:6]


def _shared(tmp_path: Path) -> list[str]:
    return [sys.executable, "-c", SHARED, str(tmp_path / "busy")]


def _run(impl: list[str], jobs: int) -> tuple[SearchResult, list[bool]]:
    """What the kit's callers see: each case judged, up to the first failure."""
    result = SearchResult()
    passed = []
    with contextlib.closing(run_fixed(impl, _cases(), 10.0, jobs, CANONICAL, DEFAULT_FEATURES, result)) as gen:
        for _, _, f in gen:
            passed.append(f is None)
            if f is not None:
                break
    return result, passed


def test_a_case_failing_only_beside_another_is_run_alone_and_the_rest_one_at_a_time(tmp_path: Path) -> None:
    result, passed = _run(_shared(tmp_path), 2)
    assert passed == [True] * 6 and result.interference.startswith("small-scope (case "), result.interference


def test_negative_control_its_outcomes_beside_each_other_fail(tmp_path: Path) -> None:
    pool, outcomes = fixed_outcomes(_shared(tmp_path), _cases(), 10.0, 2)
    assert pool is not None
    try:
        assert any(judge(c, o, CANONICAL, DEFAULT_FEATURES) is not None
                   for c, o in zip(_cases(), outcomes, strict=True))
    finally:
        pool.shutdown(wait=True)


def test_one_at_a_time_it_passes_and_nothing_is_named(tmp_path: Path) -> None:
    result, passed = _run(_shared(tmp_path), 1)
    assert passed == [True] * 6 and result.interference == ""


def test_a_real_bug_is_confirmed_alone_and_reported() -> None:
    wrong = [sys.executable, "-c", "import sys; sys.stdin.read(); print('not a result line')"]
    result, passed = _run(wrong, 2)
    assert passed == [False] and result.interference == ""


# -- the generated cases, two at a time ----------------------------------------------------------------------------

SORTED = [sys.executable, str(IMPLS / "sorted_oij.py")]
TOY = IMPLS / "toy_oij.py"


def _generated(impl: list[str], jobs: int, n: int) -> SearchResult:
    """The search, its command forked per case (tests/testing/test_restarts.py: a process each, as before, two at a
    time with ``jobs`` 2, without an interpreter start); the commands above start as processes."""
    with forked_commands():
        return search(impl, max_examples=n, seed=3, vectors=False, fixed_jobs=jobs)


def test_the_generated_cases_two_at_a_time_are_the_cases_one_at_a_time() -> None:
    """Until a failure the draws depend on the oracle's answers alone: drawn first, then run two at a time, they
    are the cases the search draws one at a time, counted the same."""
    two, one = _generated(SORTED, 2, 40), _generated(SORTED, 1, 40)
    assert two.failure is None and one.failure is None
    assert [c.to_jsonl() for c, _ in two.observations] == [c.to_jsonl() for c, _ in one.observations]
    assert (two.examples, two.generated, two.tags, two.edges) == (one.examples, one.generated, one.tags, one.edges)
    assert two.generated == 40 and not two.interference


@pytest.mark.parametrize("bug", ["late-le", "stale-minmax"])
def test_a_generated_failure_is_met_and_shrunk_as_one_at_a_time(bug: str) -> None:
    """A failure among the generated cases run two at a time: the search runs again one at a time (the answers
    before the failure reused), meets it at the same case and shrinks it to the same minimal case."""
    impl = [sys.executable, str(TOY), bug]
    two, one = _generated(impl, 2, 100), _generated(impl, 1, 100)
    assert one.failure is not None and two.failure is not None, bug
    assert two.found_by == one.found_by and two.found_by.startswith("search, case "), (two.found_by, one.found_by)
    assert two.failure.case.to_jsonl() == one.failure.case.to_jsonl()
    assert two.examples == one.examples


def test_generated_cases_that_interfere_run_one_at_a_time_and_are_named(tmp_path: Path) -> None:
    res = _generated(_shared(tmp_path), 2, 4)
    assert res.failure is None and res.generated == 4 and res.interference.startswith("generated "), res
