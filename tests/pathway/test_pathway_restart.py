"""Pathway under crashes (oij/pathway/recovery.py): its interval join restarted on its persistent storage, judged
exactly by the kit's restart mode.

The adapter prints no checkpoint line (Pathway's free version gives no hook saying when its state through an
input is persisted) and, in the incarnation that reads the end line, the consolidated sink of every
incarnation.  These tests run the real engine: the clean run gives the ``pathway`` adapter's result, SIGKILLs
between events and mid-output leave the consolidated sink exact (measured: exactly-once), and the two negative
controls are caught: without persistence a restart writes every row again (at-least-once), and a sink file
shared by the incarnations is truncated by Pathway's writer at each start (lossy).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pathway")

from oij.spec.batch import Results
from oij.spec.model import End, Query, StreamTuple
from oij.spec.profiles import get_profile

from oij.adapters import get_adapter, restart_command
from oij.pathway.join import run_case
from oij.pathway.recovery import read_sink
from oij.testing._case import Case
from oij.testing._protocol import expected_output
from oij.testing._restarts import KillPoint, RestartRun, clean_run, run_plan

pytestmark = [pytest.mark.pathway, pytest.mark.timeout(240)]

PROFILE = get_profile("pathway")
QUIET = 10.0  # a fed kill comes once the output has rested this long: Pathway (started in 2-5 s) has the events
TIMEOUT = 120.0



def rows_of(res: Results) -> list[object]:
    """A result as the kit's restart mode counts its rows (pairs and late lines; no aggregates here)."""
    return [("pair", *p) for p in res.pairs] + [("late", i) for i in res.late]

def b(i: int, ts: int, key: int = 1) -> StreamTuple:
    return StreamTuple("base", i, ts, key, 1.0)


def p(i: int, ts: int, key: int = 1) -> StreamTuple:
    return StreamTuple("probe", i, ts, key, 1.0)


# a left join that revises: base 1's (1, null) row is taken back when probe 2 comes; base 3 never matches;
# probe 4 joins base 1 late (Pathway has no cutoff)
LEFT = Case(Query(-2, 2, join="left"), (b(1, 10), p(2, 11), b(3, 20), p(4, 9), End()))
# an inner join whose first pair exists after event 2: a kill after it leaves a row in the first sink file
INNER = Case(Query(-3, 3), (b(1, 10), p(2, 11), b(3, 12), p(4, 30, 2), End()))


def _cmd(*options: str) -> list[str]:
    return restart_command(get_adapter("pathway"), options)


def _plan(case: Case, *plan: KillPoint, options: tuple[str, ...] = ()) -> RestartRun:
    return run_plan(_cmd(*options), case, plan, PROFILE, TIMEOUT, QUIET)


def test_read_sink_consolidates_as_a_downstream_reader() -> None:
    with tempfile.TemporaryDirectory() as d:
        one, two = Path(d, "0000.jsonl"), Path(d, "0001.jsonl")
        one.write_text('{"kind":"pair","a":1,"b":null,"diff":1,"time":2}\n'
                       '{"kind":"seen","a":2,"b":2,"diff":1,"time":2}\n'
                       '{"kind":"pair","a":1,"b":null,"diff":-1,"time":4}\n'
                       '{"kind":"pair","a":1,"b":2,"diff":1,"time":4}\n')
        two.write_text('{"kind":"pair","a":1,"b":2,"diff":1,"time":6}\n'
                       '{"kind":"seen","a":3,"b":5,"diff":1,"time":6}\n'
                       '{"kind":"pair","a":7,"b":8,"di')  # torn: never read
        pairs, count, seen = read_sink([str(one), str(two), str(Path(d, "absent.jsonl"))])
    assert +pairs == Counter({(1, 2): 2})  # written twice: a duplicate for the reader
    assert pairs[(1, None)] == 0
    assert (count, seen) == (3, 5)


@pytest.mark.parametrize("case", [LEFT, INNER], ids=["left", "inner"])
def test_clean_run_is_the_adapters_result(case: Case) -> None:
    inc = clean_run(_cmd(), case, TIMEOUT)
    assert inc.problem is None, inc.stderr
    assert inc.exit_code == 0
    assert not any(not isinstance(x, tuple) for x in inc.output)  # no checkpoint line: none is promised
    got = Counter(inc.output)
    assert got == Counter(rows_of(expected_output(case, PROFILE)))
    assert got == Counter(rows_of(run_case(case.query, list(case.events)).results))


KILLS = (KillPoint("fed", 2), KillPoint("row", 1))
"""Two kinds of kill in one run of three incarnations (a run per kind would start four processes, each importing
Pathway): the first is given events 1..2 and killed at rest; the second, given the rest, reads the end line and
prints the consolidated sink, and is killed on its first row."""


def test_kills_between_events_and_mid_output_are_exactly_once() -> None:
    """Measured: with persistence, a SIGKILL after event 2 (output at rest), and one while the next incarnation
    prints its result, commit exactly the result of the left join that revises (its (1, null) row taken back
    before the first kill)."""
    run = _plan(LEFT, *KILLS)
    assert run.problem is None, run.problem
    assert [inc.killed for inc in run.incarnations] == [*KILLS, None], run.timeline()  # both kills happened
    assert run.verdict is not None and run.verdict.kind == "exactly-once", run.verdict


def test_without_persistence_the_rows_come_twice() -> None:
    """The negative control: a restart without persistence reads every event again and writes every row
    again into its sink, so the rows of the killed incarnation are duplicated."""
    run = _plan(INNER, KillPoint("fed", 2), options=("persistence=off",))
    assert run.problem is None, run.problem
    assert run.verdict is not None and run.verdict.kind == "at-least-once"
    assert run.verdict.duplicated == [("pair", 1, 2)]


def test_one_shared_sink_file_is_truncated_at_restart() -> None:
    """Pathway's file writer recreates its file at each start while the persisted run only writes what comes
    after its frontier: rows written before the crash vanish from a shared file (lossy)."""
    run = _plan(INNER, KillPoint("fed", 2), options=("sink=single",))
    assert run.problem is None, run.problem
    assert run.verdict is not None and run.verdict.kind == "lossy"
    assert run.verdict.lost == [("pair", 1, 2)]


def test_unknown_option_and_a_checkpoint_are_refused() -> None:
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, OIJ_STATE_DIR=d, OIJ_CHECKPOINT="0", OIJ_RESTART="0")
        r = subprocess.run(_cmd("colour=red"), input=INNER.to_jsonl(), capture_output=True, text=True, env=env,
                           timeout=60)
        assert r.returncode == 2 and "colour" in r.stderr
        env["OIJ_CHECKPOINT"] = "2"
        r = subprocess.run(_cmd(), input=INNER.to_jsonl(), capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 2 and "no checkpoint line" in r.stderr
        assert r.stdout == ""
