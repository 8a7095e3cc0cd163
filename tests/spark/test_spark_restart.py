"""Spark Structured Streaming under crashes (oij/spark/recovery.py): the kit kills the driver with SIGKILL
during and between micro-batches, restarts it from its checkpoint location, and judges what the sink holds.

The default sink (written once per batch id) must be exactly once under the kill plans below; the negative
control (``-o sink=append``, which appends whatever a batch produces, also when the batch runs again after a
crash) must be found at-least-once, with the duplicated row named.  Each incarnation is a process with its own
JVM (about 10 s here), so the cases are small and the plans few.
"""

from __future__ import annotations

import itertools
import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from oij.spec.model import End, Query, StreamTuple
from oij.spec.profiles import get_profile
from oij.spec.recovery import Checkpoint

import oij.testing._restarts as kit_restarts
from oij.adapters import get_adapter, restart_command
from oij.testing import Case, expected_output
from oij.testing._restarts import KillPoint, parse_line, run_plan

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

SPARK = get_profile("spark-ss")
TIMEOUT = 240.0


def b(i: int, ts: int, key: int = 1) -> StreamTuple:
    return StreamTuple("base", i, ts, key, 1.0)


def p(i: int, ts: int, key: int = 1, v: float = 1.0) -> StreamTuple:
    return StreamTuple("probe", i, ts, key, v)


# five micro-batches, three pairs: the probe at 30 joins the base at 28 that comes after it, and the probe at 8
# (behind W = 25, late canonically) still joins the base at 10 in Spark (the watermark it is judged against is
# the one of two batches back): the spark-ss profile's rows, not the canonical ones
CASE = Case(Query(-5, 5, lateness=3), (b(1, 10), p(2, 12), p(3, 30), b(4, 28), p(5, 8), End()))


def _rows(case: Case) -> Counter[object]:
    res = expected_output(case, "spark-ss")
    return Counter([("pair", *x) for x in res.pairs])


def test_the_idempotent_sink_is_exactly_once_across_a_kill_mid_batch_then_one_between_batches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One run of three incarnations (each a JVM): the first killed on its first result row, inside a
    micro-batch; the second, restarted from the checkpoint, killed after its second event, between batches; the
    third finishes.  What the sink holds at the end is the profile's rows, each once (the case's spark-ss rows,
    with the pair (1, 5) that only Spark's lagged watermark keeps, not the canonical rows), and each micro-batch
    (one per event) was checkpointed once, by the incarnation that ran it.  (The same run answers what a clean run
    answered in a JVM of its own: the last incarnation runs from its checkpoint to the end unkilled.)

    What a killed driver leaves (its block manager, Spark's and pyspark's temporary directories) is in the
    state directory's ``tmp/``, not in /tmp, and the next incarnation removes it: the names ``tmp/`` held after
    each incarnation, read by a wrapper around the kit's incarnation runner."""
    assert ("pair", 1, 5) in _rows(CASE) and _rows(CASE) != Counter(("pair", *x) for x in expected_output(CASE).pairs)
    left: list[set[str]] = []
    run_one = kit_restarts.run_incarnation

    def run_and_list(argv: Any, lines: Any, start: int, state_dir: str, *rest: Any) -> Any:
        inc = run_one(argv, lines, start, state_dir, *rest)
        tmp = os.path.join(state_dir, "tmp")
        left.append(set(os.listdir(tmp)) if os.path.isdir(tmp) else set())
        return inc

    monkeypatch.setattr(kit_restarts, "run_incarnation", run_and_list)
    plan = (KillPoint("row", 1), KillPoint("fed", 2))
    run = run_plan(restart_command(get_adapter("spark-ss")), CASE, plan, SPARK, TIMEOUT, quiet=60.0)
    assert run.problem is None, run.problem
    assert run.verdict is not None and run.verdict.kind == "exactly-once", "\n".join(run.timeline())
    assert [inc.killed for inc in run.incarnations] == [*plan, None], "\n".join(run.timeline())
    marks = [x.events for inc in run.incarnations for x in inc.output if isinstance(x, Checkpoint)]
    assert marks == [1, 2, 3, 4, 5], "\n".join(run.timeline())
    assert run.incarnations[-1].exit_code == 0, "\n".join(run.timeline())
    assert len(left) == 3
    for killed, after in itertools.pairwise(left):
        assert any(n.startswith("blockmgr-") for n in killed), left  # the killed JVM wrote here, not in /tmp
        assert not killed & after, left  # and the next incarnation emptied it


# the negative control's case: CASE's first two tuples, whose pair is its first row (a micro-batch per tuple:
# after the kill, the restarted driver runs the killed batch again and nothing more; on CASE it ran three more
# batches that no assertion reads)
FIRST_ROW = Case(CASE.query, (*CASE.events[:2], End()))


def test_the_append_sink_is_caught_at_least_once() -> None:
    """Negative control: killed on its first row, inside the micro-batch's foreachBatch, before Spark commits
    the batch; Spark runs the batch again on restart and the append sink takes its rows twice."""
    assert _rows(FIRST_ROW) == Counter([("pair", 1, 2)])
    cmd = restart_command(get_adapter("spark-ss"), ["sink=append"])
    run = run_plan(cmd, FIRST_ROW, (KillPoint("row", 1),), SPARK, TIMEOUT, quiet=60.0)
    assert run.problem is None, run.problem
    assert run.verdict is not None and run.verdict.kind == "at-least-once", "\n".join(run.timeline())
    assert run.verdict.duplicated == [("pair", 1, 2)]


def test_a_state_directory_of_another_query_is_refused(tmp_path: Path) -> None:
    (tmp_path / "query.json").write_text('{"type":"query","lower":0,"upper":1}\n')
    cmd = restart_command(get_adapter("spark-ss"))
    r = subprocess.run(cmd, input=CASE.to_jsonl(), capture_output=True, text=True, timeout=120,
                       env={**os.environ, "OIJ_STATE_DIR": str(tmp_path), "OIJ_CHECKPOINT": "0"})
    assert r.returncode == 2
    assert "state of another query" in r.stderr and "Traceback" not in r.stderr
    assert parse_line(r.stdout) is None
