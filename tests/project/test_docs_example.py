"""The pytest example of docs/conformance.rst: testing one's own engine in five lines (here, the oracle)."""

from collections.abc import Sequence

from hypothesis import given
from oij.reference.oracle import run_events
from oij.spec.batch import Results
from oij.spec.model import Event, Query

from oij.testing import Case, assert_conforms, cases


def my_join(query: Query, events: Sequence[Event]) -> Results:  # your engine: Results, or output lines
    return run_events(events, query)


@given(cases(features=["watermarks", "late-report", "left"]))
def test_my_join(case: Case) -> None:
    assert_conforms(my_join, case, features=["watermarks", "late-report", "left"])
