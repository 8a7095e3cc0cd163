"""``oij.testing``: test your own interval-join implementation against the oracle (public API).

Six names, like ``hypothesis.strategies``:

* :func:`cases` -- a Hypothesis strategy of conformance cases (a query and its
  arrival sequence), restricted to the ``features`` your implementation claims;
* :class:`Case` -- one case: ``case.query``, ``case.events``, ``case.to_jsonl()``;
* :func:`assert_conforms` -- run your implementation (a Python callable or a
  command) on a case and raise an ``AssertionError`` whose message is the
  readable timeline of the case, expected against got;
* :func:`expected_output` -- what a case must produce under a semantic profile;
* :func:`judge_up_to_schedule` -- whether an engine's output is explained by *some* admissible watermark
  schedule (an engine that picks its own watermark timing, as Spark and Flink do);
* :data:`~oij.testing.FEATURES` and :data:`~oij.spec.profiles.PROFILES` -- the names ``features`` and ``profile``
  accept.

A pytest test of your own engine::

    from hypothesis import given
    from oij.testing import assert_conforms, cases

    @given(cases(features=["watermarks", "late-report"]))
    def test_my_join(case):
        assert_conforms(my_join, case, features=["watermarks", "late-report"])

where ``my_join(query, events)`` returns a :class:`oij.spec.batch.Results` or the
output lines of the oij-jsonl protocol.  Everything outside this module is
private and may change.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from oij.spec.batch import Results
from oij.spec.profiles import PROFILES, get_profile
from oij.testing._case import Case, Impl
from oij.testing._conform import ConformAdapter, ConformOptions, conform
from oij.testing._features import DEFAULT_FEATURES, FEATURES
from oij.testing._protocol import expected_output as _expected

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from oij.spec.model import Event, Query
    from oij.testing._schedule import ScheduleVerdict

__all__ = ["FEATURES", "PROFILES", "Case", "ConformAdapter", "ConformOptions", "ScheduleVerdict", "assert_conforms",
           "cases", "conform", "expected_output", "judge_up_to_schedule"]


def __getattr__(name: str) -> object:
    """``ScheduleVerdict`` on first use (its module imports numpy: ``oij explain`` starts without it)."""
    if name == "ScheduleVerdict":
        from oij.testing._schedule import ScheduleVerdict

        return ScheduleVerdict
    raise AttributeError(f"module 'oij.testing' has no attribute {name!r}")


def expected_output(case: Case, profile: str = "canonical") -> Results:
    """The result ``case`` must produce under the named profile (canonical order)."""
    return _expected(case, get_profile(profile))


def judge_up_to_schedule(events: Iterable[Event], query: Query, got: Results, *, profile: str = "canonical",
                         family: str = "auto", parallelism: int = 1, max_lag: str | None = None) -> ScheduleVerdict:
    """Whether some admissible watermark schedule explains ``got``, the output of an engine that chose its own
    watermark timing (Spark's micro-batches, Flink's periodic watermarks): ``verdict.admissible``, the schedules
    inferred (``verdict.judgement``), and on a rejection the witnesses (``verdict.lines()`` says it all).

    ``family``: ``auto`` (the strictest family sound for ``profile``), ``arrival``, ``input``, ``instance`` (with
    ``parallelism``, Flink's key groups) or ``key``; ``max_lag``: ``N`` tuples or ``Nts`` in ts units (default:
    unbounded).  Definitions: :mod:`oij.spec.schedule`; the judge: :mod:`oij.reference.schedule`.
    """
    from oij.testing._schedule import judge_up_to_schedule as _judge

    return _judge(events, query, got, profile=profile, family=family, parallelism=parallelism, max_lag=max_lag)


def cases(features: Iterable[str] | None = None, max_events: int = 14) -> SearchStrategy[Case]:
    """A Hypothesis strategy of conformance cases using only ``features`` (default: every feature but the opt-in
    ones); at most ``max_events`` events in the random layout.  Each case enables a random subset of the
    features (swarm testing) and is drawn by one of the scenarios that reach the core and the state edges.

    Hypothesis is imported here, on first use: the commands that only read cases (``oij explain``) start
    without it."""
    from oij.testing._cases import cases as _cases

    return _cases(features, max_events)


def assert_conforms(impl: Impl, case: Case, *, profile: str = "canonical", features: Iterable[str] | None = None,
                    timeout: float = 10.0) -> None:
    """Raise ``AssertionError`` (the message is the case's timeline, expected vs got) unless ``impl`` gets
    ``case`` right.

    ``impl`` is a callable ``(query, events) -> Results | Iterable[str]`` or a
    command (a list of strings) that reads the case on stdin and writes the
    output lines.  ``features`` lists what the implementation claims (default:
    all); without ``late-report`` late lines are not compared.  ``timeout``
    bounds a command's run in seconds.
    """
    from oij.testing._runner import judge, run_impl

    feats = DEFAULT_FEATURES if features is None else frozenset(features)
    failure = judge(case, run_impl(impl, case, timeout), get_profile(profile), feats)
    if failure is not None:
        raise AssertionError("\n" + failure.report)
