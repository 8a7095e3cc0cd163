"""The Pathway adapters (the ``oij[pathway]`` extra): real Pathway output is what its profiles predict.

Runs wherever Pathway is installed (``.ci/run`` installs the extra).  Each
hand-made case isolates one rule of Pathway's interval join (docs/findings.rst)
and is run through the real engine; where the case says so, the output must
differ from the canonical one and from the neighbouring profile (the negative
control).  Pathway's arrival order is imposed by ``__time__``, so there is no
pacing and no repeat.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings

pytest.importorskip("pathway")

from oij.spec.batch import compute_pairs
from oij.spec.model import BASE, End, Event, Query, StreamTuple
from oij.spec.profiles import compute_profile_result, get_profile

from oij.pathway.join import Behavior, run_case
from oij.testing import Case, cases, expected_output
from tests.budget import examples

pytestmark = [pytest.mark.pathway, pytest.mark.timeout(600)]


def b(i: int, ts: int, key: int | str = 1, value: float = 1.0) -> StreamTuple:
    return StreamTuple("base", i, ts, key, value)


def p(i: int, ts: int, key: int | str = 1, value: float = 1.0) -> StreamTuple:
    return StreamTuple("probe", i, ts, key, value)


L5 = Query(-10, 10, lateness=5)
# name -> (behavior, its profile, case, a profile it must differ from, or None: the next case is its control)
CASES: dict[str, tuple[Behavior, str, Case, str | None]] = {
    # no behavior: the probe far behind W still joins (canonically it is late)
    "exact-revises": ("none", "pathway", Case(Query(-2, 0, lateness=0), (b(1, 10), p(2, 30, 9), p(3, 9), End())),
                      "canonical"),
    # delay: rows wait, but nothing is dropped; the final result is the batch join again
    "delay-is-exact": ("delay", "pathway", Case(L5, (b(1, 10), b(2, 40, 9), b(3, 41, 9), p(4, 10), End())),
                       "pathway-cutoff"),
    # cutoff: a row is judged against its own table's maximum, not both: the probe at 12 is on time although
    # the base at 40 is far ahead (canonical W = 35 makes it late)
    "cutoff-own-table": ("cutoff", "pathway-cutoff", Case(L5, (b(1, 10), b(2, 40, 9), p(3, 12), End())),
                         "canonical"),
    # cutoff: ignored iff ts <= max - l (Spark's <=): the probe at 15 = 20 - 5 is ignored
    "cutoff-late-le": ("cutoff", "pathway-cutoff", Case(L5, (b(1, 14), p(2, 20, 9), p(3, 15), End())),
                       "pathway"),
    # cutoff: the base at 10 is forgotten only when the next base arrives; until then the probe at 10 joins it
    "cutoff-forgets-lazily": ("cutoff", "pathway-cutoff", Case(L5, (b(1, 10), b(2, 15, 9), p(3, 10), End())),
                              None),
    # ... and once the next base came, it is gone (the window [0, 20] was still open: not by its window)
    "cutoff-forgets-by-own-ts": ("cutoff", "pathway-cutoff",
                                 Case(L5, (b(1, 10), b(2, 15, 9), b(3, 15, 9), p(4, 10), End())), "pathway"),
    # keep_results=False: the pair of a forgotten row is taken back
    "forget-retracts": ("forget", "pathway-forget",
                        Case(L5, (b(1, 10), p(2, 10), b(3, 100, 9), b(4, 100, 9), End())), "pathway-cutoff"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_pathway_output_is_the_profiles(name: str) -> None:
    behavior, profile, case, other = CASES[name]
    got = run_case(case.query, list(case.events), behavior).results
    assert got.pairs == expected_output(case, profile).pairs, name
    if other is not None:
        assert expected_output(case, other).pairs != got.pairs, f"{name}: does not separate {profile} from {other}"
    else:
        assert got.pairs, f"{name}: the pair its control loses"


def test_left_join_rows_are_revised_not_lost() -> None:
    """The (a, null) row is emitted at the base's arrival and taken back when its match comes."""
    run = run_case(Query(-2, 0, join="left"), [b(1, 10), p(2, 9), End()])
    assert run.results.pairs == [(1, 2)]
    assert [r[2] for r in run.revisions] == [(1, None)]
    assert "1 (a, null) rows" in run.revision_summary()


def test_an_empty_window_joins_nothing_but_keeps_left_rows() -> None:
    q = Query(0, 0, lower_inclusive=False, join="left")
    assert run_case(q, [b(1, 10), p(2, 10), End()]).results.pairs == [(1, None)]


def test_pathway_float_sums_are_not_exact() -> None:
    """A finding, pinned: Pathway's float sum loses the value of a probe that replaces the base's unmatched row
    in the same batch (and overflows to nan).  If Pathway fixes it this test fails: move pathway-agg's finding."""
    case: list[Event] = [b(1, 10), p(2, 9, value=2.0), End()]
    q = Query(-2, 0, aggregate="sum")
    assert compute_profile_result(case, q, get_profile("pathway")).aggregates == [(1, 1, 2.0)]
    assert run_case(q, case).results.aggregates == [(1, 1, 0.0)]


@settings(max_examples=40, deadline=None)
@given(cases(frozenset({"left", "exclusive", "lateness", "watermarks", "mixed-keys", "negative-ts"})))
def test_the_pathway_profile_is_the_batch_join_of_every_tuple(case: Case) -> None:
    """The ``revise`` late rule, checked against the batch definition (no W at all)."""
    tuples = case.tuples
    want = compute_pairs([t for t in tuples if t.side == BASE], [t for t in tuples if t.side != BASE], case.query)
    assert expected_output(case, "pathway").pairs == want


CONFORM_EXAMPLES = examples(10, 40)
"""Generated cases of the passing ``oij conform`` run below (after its 79 small-scope cases, which it always runs)."""


def test_conform_passes_under_its_profile_and_fails_canonical(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``oij conform --adapter pathway`` (run in this process: Pathway runs in the process that runs the adapter
    either way) passes under its profile and fails under the canonical semantics (the negative control)."""
    from oij.cli import main

    assert main(["conform", "--adapter", "pathway", "--profile", "pathway", "--max-examples",
                 str(CONFORM_EXAMPLES), "--no-vectors"]) == 0
    ok = capsys.readouterr().out
    assert re.search(r"conforms: \d+ cases against the pathway semantics", ok), ok
    assert f"then {CONFORM_EXAMPLES} generated cases" in ok, ok
    assert main(["conform", "--adapter", "pathway", "--max-examples", "40", "--replay-out",
                 str(tmp_path / "r.jsonl")]) == 1
    bad = capsys.readouterr().out
    assert "does NOT conform to the canonical semantics" in bad
    assert "semantic fingerprint" in bad or "minimal case of" in bad


def test_the_adapter_command_reports_revisions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``oij adapter pathway FILE``, run in this process (its ``main``: Pathway runs in the process that runs the
    adapter either way, and a process of its own imports Pathway again; test_cutoff_needs_lateness and
    test_pathway_restart.py run the command as a process): the pair on stdout, the revision on stderr."""
    from oij.cli import main

    f = tmp_path / "c.jsonl"
    f.write_text('{"type": "query", "lower": -2, "upper": 0, "join": "left"}\n'
                 '{"type": "tuple", "side": "base", "id": 1, "ts": 10, "key": 1}\n'
                 '{"type": "tuple", "side": "probe", "id": 2, "ts": 9, "key": 1}\n{"type": "end"}\n')
    capsys.readouterr()
    rc = main(["adapter", "pathway", str(f)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out.strip().splitlines() == ['{"type":"pair","base":1,"probe":2}']
    assert "1 taken back later (1 (a, null) rows)" in err


def test_cutoff_needs_lateness() -> None:
    r = subprocess.run([sys.executable, "-m", "oij.cli", "adapter", "pathway-cutoff", "-"],
                       input='{"type": "query", "lower": -2, "upper": 0}\n{"type": "watermark", "ts": 3}\n'
                       '{"type": "end"}\n',
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2
    assert "only lateness mode" in r.stderr and "Traceback" not in r.stderr
