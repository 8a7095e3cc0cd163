"""Flink's own unit test of its interval join operator (``IntervalJoinOperatorTest``), as oij vectors.

The scenarios of ``FLINK_OPERATOR_TESTS`` name pairs and late elements by
timestamp, as Flink's test does; here they are mapped to the ids of the oij
case, and the oracle (which writes the vectors' expected outputs) must give
exactly Flink's expectations.  Where Flink sets no late side output
(``discards-late-data``) it drops the late element silently while the
canonical semantics reports it: that scenario is compared on pairs only.
"""

from __future__ import annotations

import pytest
from oij.reference.oracle import run_events
from oij.spec.model import BASE, StreamTuple

from oij.testing._vectors import FAST_LEFT, FLINK_OPERATOR_TESTS, flink_operator_case, flink_operator_vectors


def _by_ts(case_events: tuple[object, ...]) -> dict[tuple[str, int], int]:
    """(side, ts) -> id of the first element with that timestamp on that side."""
    out: dict[tuple[str, int], int] = {}
    for e in case_events:
        if isinstance(e, StreamTuple):
            out.setdefault(("L" if e.side == BASE else "R", e.ts), e.id)
    return out


@pytest.mark.parametrize("scenario", FLINK_OPERATOR_TESTS, ids=[s[0] for s in FLINK_OPERATOR_TESTS])
def test_the_oracle_gives_flinks_expectations(scenario: tuple[object, ...]) -> None:
    name, lower, upper, li, ui, ops, pairs, late_l, late_r = scenario
    assert isinstance(ops, str) and isinstance(pairs, str)
    seq = FAST_LEFT if ops == "both" else ops
    case = flink_operator_case(int(str(lower)), int(str(upper)), bool(li), bool(ui), seq)
    ids = _by_ts(case.events)
    want = sorted((ids[("L", int(a))], ids[("R", int(b))]) for a, b in (p.split("-") for p in pairs.split()))
    res = run_events(case.events, case.query)
    assert sorted(p for p in res.pairs) == want, name
    if name != "discards-late-data":  # Flink's side outputs against the late lines
        assert isinstance(late_l, tuple) and isinstance(late_r, tuple)
        flink_late = [e.id for e in case.events if isinstance(e, StreamTuple)
                      and e.ts in (late_l if e.side == BASE else late_r)]
        assert sorted(res.late) == sorted(flink_late), name


def test_every_scenario_is_a_vector_and_a_wrong_bound_is_caught() -> None:
    vs = list(flink_operator_vectors())
    assert len(vs) == 19
    # negative control: the same operations with the upper bound made exclusive give other pairs than Flink's
    # expectation for [-1, 1], so the comparison above can fail
    inclusive = flink_operator_case(-1, 1, True, True, FAST_LEFT)
    exclusive = flink_operator_case(-1, 1, True, False, FAST_LEFT)
    assert (sorted(run_events(exclusive.events, exclusive.query).pairs)
            != sorted(run_events(inclusive.events, inclusive.query).pairs))
