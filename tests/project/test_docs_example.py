"""The pytest example of docs/conformance.rst: testing one's own engine in five lines (here, the oracle)."""

from collections.abc import Sequence

from hypothesis import given

from oij.testing import Case, assert_conforms, cases
from reference.oracle import run_events
from spec.batch import Results
from spec.model import Event, Query


def my_join(query: Query, events: Sequence[Event]) -> Results:  # your engine: Results, or output lines
    return run_events(events, query)


@given(cases(features=["watermarks", "late-report", "left"]))
def test_my_join(case: Case) -> None:
    assert_conforms(my_join, case, features=["watermarks", "late-report", "left"])
