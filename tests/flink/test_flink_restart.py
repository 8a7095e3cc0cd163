"""Flink DataStream's interval join under the restart protocol (``oij adapter flink-ds --restart-protocol``,
oij/flink/recovery.py): a JVM per incarnation, restored from Flink's own retained checkpoint, its two-phase sink's
commits printed; the kit (:mod:`oij.testing._restarts`) kills it with SIGKILL and judges what was committed.

The cases are small (a handful of events) and the plans few: each incarnation starts a JVM and a MiniCluster, so
one run kills several incarnations in turn (a kill of each kind) where a run per kill would start more JVMs.
The cases that pass under kills have a lateness no event comes near, because Flink does not checkpoint
watermarks (docs: the restored job starts at the bottom), which the kit finds on cases with late tuples.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

pytest.importorskip("pyflink")
if shutil.which("javac") is None:
    pytest.skip("the flink-ds restart protocol compiles its Java job with javac", allow_module_level=True)

from oij.spec.model import End, Query, StreamTuple
from oij.spec.profiles import get_profile
from oij.spec.recovery import Checkpoint, Line, committed, is_valid_checkpoint, judge_committed, restart_point

from oij.adapters import get_adapter, restart_command
from oij.testing import Case, expected_output
from oij.testing._restarts import (
    Incarnation,
    KillPoint,
    RestartFailure,
    RestartRun,
    parse_line,
    run_incarnation,
    run_plan,
)

pytestmark = [pytest.mark.flink, pytest.mark.timeout(240)]

PROFILE = get_profile("flink-datastream")
TIMEOUT = 120.0  # seconds per incarnation
REST = 30.0  # a fed kill waits for the checkpoint of the events fed, or this long
STOP_PAUSE_MS = 5000  # the JVM's hold on a commit sealed in a stop, in the test that kills inside one


def b(i: int, ts: int, key: int | str = 1) -> StreamTuple:
    return StreamTuple("base", i, ts, key, 1.0)


def p(i: int, ts: int, key: int | str = 1) -> StreamTuple:
    return StreamTuple("probe", i, ts, key, 1.0)


# three pairs over two keys (1 and "1" differ), nothing late: lateness 100 keeps every watermark far below
ON_TIME = Case(Query(-2, 2, lateness=100), (b(1, 5), p(2, 5), p(3, 6, "1"), b(4, 7, "1"), p(5, 4), End()))
# a pair per key and a late probe (W = max ts - 1 - 1 = 4 > 1): the late side output
WITH_LATE = Case(Query(-2, 2, lateness=1), (b(1, 5), p(2, 5), p(3, 6, "1"), b(4, 7, "1"), p(5, 1), End()))
# for savepoint-every=2 (a job stopped with a savepoint after events 2, 4 and 6, each resumed from it): base 4
# pairs with probe 2 of the state restored at 2 (and not with probe 3, key "1"); probe 5 is late in the whole
# stream (W = 6 - 1 - 1 = 4 > 1) but comes first after the resume at 4; probe 6 (on time) pairs with bases 1 and
# 4 of the state restored at 4
SAVEPOINTED = Case(Query(-2, 2, lateness=1), (b(1, 5), p(2, 5), p(3, 6, "1"), b(4, 6), p(5, 1), p(6, 5), End()))


def command(*options: str) -> list[str]:
    return restart_command(get_adapter("flink-ds"), options)


def rows_of(case: Case) -> Counter[object]:
    want = expected_output(case, PROFILE.name)
    return Counter([("pair", *x) for x in want.pairs] + [("late", x) for x in want.late])


def run(case: Case, plan: Sequence[KillPoint], *options: str) -> RestartRun:
    r = run_plan(command(*options), case, plan, PROFILE, TIMEOUT, REST)
    assert r.problem is None, RestartFailure(r).report(PROFILE)
    return r


def test_a_clean_run_commits_the_adapters_output(tmp_path: Path) -> None:
    """No kill: the checkpoint lines are in order and what the incarnation committed is exactly what the profile
    predicts, each row once: what the adapter outputs without the protocol (test_flink_ds_adapter.py's
    ``test_the_restart_cases_without_the_protocol``: its session's job per case, a JVM this module saves)."""
    lines = WITH_LATE.to_jsonl().splitlines(keepends=True)
    inc = run_incarnation(command(), lines, 0, str(tmp_path), 0, None, TIMEOUT)
    assert inc.problem is None and inc.exit_code == 0, inc.stderr[-2000:]
    marks = [x.events for x in inc.output if isinstance(x, Checkpoint)]
    assert marks and marks == sorted(set(marks)) and marks[-1] == len(WITH_LATE), marks  # ends at the last
    got = Counter(committed(inc.output, completed=True))
    assert got == rows_of(WITH_LATE) and ("late", 5) in got
    # the sink's files are Flink's checkpoints' commits, the last one holding the offset of the whole input and
    # sealed after the end of the data ("E"), the others not
    sink = sorted((tmp_path / "sink").glob("*.txt"))
    assert sink and sink[-1].read_text().splitlines()[0] == f"K {len(WITH_LATE)} E"
    assert all(not f.read_text().splitlines()[0].endswith(" E") for f in sink[:-1])
    # killed after the job finished, before the exit: the kit saw the first checkpoint line only.  Flink removed
    # the finished job's checkpoints; the next incarnation starts no job (no JVM log), prints the epochs the kit
    # did not see, and exits 0: every row once (a job started again would commit the replayed rows again)
    first = next(i for i, x in enumerate(inc.output) if isinstance(x, Checkpoint))
    seen = inc.output[:first + 1]
    start = restart_point(seen, 0)
    again = run_incarnation(command(), lines, start, str(tmp_path), 1, None, TIMEOUT)
    assert again.problem is None and again.exit_code == 0, again.stderr[-2000:]
    assert not (tmp_path / "jvm-1.log").exists()
    verdict = judge_committed(list(rows_of(WITH_LATE).elements()), [seen, again.output], True)
    assert verdict.exactly_once, verdict


def _short_of_the_end(state: Path, lines: Sequence[str], start: int, last: int, index: int, kill: KillPoint,
                      *options: str) -> Incarnation:
    """Incarnation ``index`` from checkpoint ``start``, killed as :func:`run_incarnation` kills it on a row or a
    checkpoint line, but given events ``start+1..last`` only, its input left open (no end line, as for a ``fed``
    kill): it cannot get past event ``last``, so the events after it are left to the next incarnation whatever
    the timing (given the rest, its first row could come with the checkpoint line of the whole case)."""
    inc = Incarnation(start, last)
    env = {**os.environ, "OIJ_STATE_DIR": str(state), "OIJ_CHECKPOINT": str(start), "OIJ_RESTART": str(index)}
    proc = subprocess.Popen(command(*options), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)

    def kill_it() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(TIMEOUT, kill_it)
    timer.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        with contextlib.suppress(OSError):
            proc.stdin.write((lines[0] + "".join(lines[1 + start:1 + last])).encode())
            proc.stdin.flush()
        for raw in proc.stdout:  # to its end: what it wrote before the kill is read
            x = parse_line(raw.decode("utf-8", errors="replace"))
            if x is None:
                continue
            if isinstance(x, Checkpoint):
                assert is_valid_checkpoint(x.events, restart_point(inc.output, start), last), (x, inc.output)
            inc.output.append(x)
            seen = sum(isinstance(y, Checkpoint) == (kill.kind == "checkpoint") for y in inc.output)
            if inc.killed is None and seen == kill.n:
                inc.killed, inc.kill_note = kill, f"{kill} (given events {start + 1}..{last} only)"
                kill_it()
    finally:
        timer.cancel()
        kill_it()
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        proc.wait()
    inc.exit_code = proc.returncode
    inc.stderr = proc.stderr.read().decode("utf-8", errors="replace") if proc.stderr is not None else ""
    if inc.killed is None:
        inc.problem = f"no kill {kill}: exit code {proc.returncode} (or no exit within {TIMEOUT:g} s)"
    return inc


def run_in(state: Path, case: Case, plan: Sequence[KillPoint], *options: str,
           short: Mapping[int, int] | None = None) -> RestartRun:
    """The kit's :func:`run_plan`, on the state directory ``state`` (kept: the JVMs' logs, the input log and the
    sink's files stay there to be read), the rows of every incarnation judged as it judges them; incarnation
    ``i`` in ``short`` is given the events through ``short[i]`` only (:func:`_short_of_the_end`)."""
    lines = case.to_jsonl().splitlines(keepends=True)
    r = RestartRun(case, tuple(plan))
    start = 0
    for i, kill in enumerate([*plan, None]):
        if kill is not None and short and i in short:
            inc = _short_of_the_end(state, lines, start, short[i], i, kill, *options)
        else:
            inc = run_incarnation(command(*options), lines, start, str(state), i, kill, TIMEOUT, REST)
        r.incarnations.append(inc)
        assert inc.problem is None, (i, inc.problem, inc.stderr[-2000:], r.timeline())
        if kill is not None and inc.killed is None:
            break  # it finished before its kill point came
        start = restart_point(inc.output, start)
    r.verdict = judge_committed(list(rows_of(case).elements()), [inc.output for inc in r.incarnations],
                                r.incarnations[-1].killed is None)
    return r


KILLS = (KillPoint("fed", 2), KillPoint("row", 1), KillPoint("checkpoint", 1))
"""The three kinds of kill in one run of four incarnations (each a JVM; a run per kind would start five).  Each
is sure to come, whatever the timing: the first incarnation is given events 1..2 only and checkpoints at 2; the
second is given events 3..4 only (:func:`_short_of_the_end`: given the rest, its first row could come with the
checkpoint line of the whole case, leaving the third nothing to do: a flaky run) and prints the row of event 4
once a checkpoint at 4 commits it; so the third restores at 4 at the latest, is given the events through 5 (not
the end line) and prints a checkpoint line at 5 at the latest.  Only the last is given the end line: a kill on
the final checkpoint's line can race the job's finish, when Flink discards the checkpoints it took (the drive
handles it since: the last epoch's sink file says "E" and the next incarnation starts no job,
:func:`test_a_clean_run_commits_the_adapters_output`; before, 2 of 3 loaded runs passed).
The run carries the in-engine failure too (fail-after=4: a run of its own started a
JVM): the source throws once, after event 4, in the second incarnation (the first to emit it), before its first
row (that of event 4 is committed only after the restore replays event 4)."""
SHORT = {1: 4, 2: 5}
"""The second incarnation (the row kill) is given the events through 4 only, the third through 5."""


def test_the_two_phase_sink_is_exactly_once_across_kills(tmp_path: Path) -> None:
    """One run on ON_TIME: incarnation 0 is given events 1..2 and killed once it has checkpointed them (between
    events); incarnation 1, at OIJ_CHECKPOINT=2, restores the newest retained checkpoint (its JVM says which),
    reprints the uncommitted epochs, fails once after event 4 (fail-after=4: Flink's restart strategy restores
    the job from its last completed checkpoint inside the same MiniCluster) and is killed on its first result
    row (mid-output; it was given events 3..4 only, so event 5 is left whatever the timing); incarnation 2,
    restored at 4 at the latest and given the events through 5, is killed on its first checkpoint line (the
    commit printed, the next incarnation resumes after it); incarnation 3 is given the end line and finishes.
    The rows all four committed are exactly the result, each once, and each event was logged once."""
    r = run_in(tmp_path, ON_TIME, KILLS, "fail-after=4", short=SHORT)
    assert [inc.killed for inc in r.incarnations] == [*KILLS, None], r.timeline()
    assert [inc.fed for inc in r.incarnations] == [2, 4, 5, 5] and r.incarnations[2].start < 5, r.timeline()
    assert r.verdict is not None and r.verdict.exactly_once, RestartFailure(r).report(PROFILE)
    # killed between events after its checkpoint at 2: the restart resumed there, from Flink's checkpoint
    assert r.incarnations[1].start == 2, r.timeline()
    log = (tmp_path / "jvm-1.log").read_text()
    assert "oij: restoring from" in log and "/chk-" in log, log[-2000:]
    assert r.incarnations[-1].exit_code == 0
    assert (tmp_path / "failed-once").read_text() == "failed after event 4\n"
    # each event logged once (the second incarnation was given events 3..4 only, the third 5, the last the end),
    # the keys as dense ints
    assert (tmp_path / "input.log").read_text().splitlines() == [
        "0 0 1 5 0", "0 1 2 5 0", "0 1 3 6 1", "0 0 4 7 1", "0 1 5 4 0", "E"]


def test_the_direct_sink_is_caught() -> None:
    """The negative control: rows written as they come are written again by the replay after the restore; the
    kit names the duplicates.  (A checkpoint completing between the row and the kill would hide them, so two
    tries.)"""
    verdicts = []
    for _ in range(2):
        r = run(ON_TIME, (KillPoint("row", 1),), "sink=direct")
        assert r.verdict is not None
        verdicts.append(r.verdict.kind)
        if r.verdict.duplicated:
            break
    assert "at-least-once" in verdicts, verdicts


@pytest.mark.parametrize("option", ["bogus=1", "sink=bogus", "fail-after=x", "savepoint-every=0"])
def test_unknown_options_are_refused(option: str, tmp_path: Path) -> None:
    env = {**os.environ, "OIJ_STATE_DIR": str(tmp_path), "OIJ_CHECKPOINT": "0", "OIJ_RESTART": "0"}
    p_ = subprocess.run([sys.executable, "-m", "oij.cli", "adapter", "flink-ds", "--restart-protocol", "-o", option],
                        input=ON_TIME.to_jsonl(), capture_output=True, text=True, env=env, timeout=60, check=False)
    assert p_.returncode != 0 and p_.stdout == ""
    assert option.split("=")[0] in p_.stderr, p_.stderr
    assert not (tmp_path / "input.log").exists()  # refused before anything was written


# -o savepoint-every=K: within one incarnation, Flink's stop-with-savepoint after every K-th event and a new job
# restored from the savepoint, in the same MiniCluster

SAVEPOINT_STOP = "oij: stop-with-savepoint of job"


def _restored(log: str) -> list[str]:
    """The snapshots a JVM's jobs were restored from, in order (its "oij: restoring from PATH" lines)."""
    return [x.split("oij: restoring from ", 1)[1].strip() for x in log.splitlines() if "oij: restoring from " in x]


def _sink_epochs(state: Path) -> list[tuple[int, int]]:
    """(checkpoint id, k) of every sink file, in id order."""
    files = sorted((state / "sink").glob("*.txt"))
    return [(int(f.stem), int(f.read_text().splitlines()[0].split()[1])) for f in files]


def test_savepoint_every_stops_resumes_and_forgets_the_watermark(tmp_path: Path) -> None:
    """savepoint-every=2, no kill, on SAVEPOINTED: the job is stopped with a savepoint after events 2, 4 and 6
    and resumed from it three times (the JVM's log says so), and the savepoints took their ids from the
    checkpoints' counter: each is a sink epoch whose k is the event it stopped at, and the epochs (the sink's file
    names) and the checkpoint lines increase.  What it committed is exactly the profile's rows but one, the
    pairs made with the state restored at 2 and at 4 included: the finding, measured: like a restore from a
    checkpoint, a job resumed from a savepoint starts with no watermark (Flink does not snapshot it), so the
    probe that is late in the whole stream (event 5, right after the savepoint at event 4) is judged on time by
    the resumed job: its late row is lost, and nothing else.  (Without savepoints the same JVM job outputs the
    late row: test_a_clean_run_commits_the_adapters_output.)  One run checks both (a run each started two
    JVMs)."""
    lines = SAVEPOINTED.to_jsonl().splitlines(keepends=True)
    inc = run_incarnation(command("savepoint-every=2"), lines, 0, str(tmp_path), 0, None, TIMEOUT)
    assert inc.problem is None and inc.exit_code == 0, inc.stderr[-2000:]
    marks = [x.events for x in inc.output if isinstance(x, Checkpoint)]
    assert marks == sorted(set(marks)) and marks[-1] == len(SAVEPOINTED), marks
    got = Counter(committed(inc.output, completed=True))
    want = rows_of(SAVEPOINTED)
    assert want - got == Counter([("late", 5)]) and not got - want, got
    assert {("pair", 4, 2), ("pair", 1, 6), ("pair", 4, 6)} <= set(got), got  # made after the restores
    log = (tmp_path / "jvm-0.log").read_text()
    stops = [x for x in log.splitlines() if SAVEPOINT_STOP in x]
    assert list(dict.fromkeys(x.rsplit(" ", 1)[1] for x in stops)) == ["2", "4", "6"], log[-3000:]  # tries repeat
    restored = _restored(log)
    assert len(restored) == 3 and all("/savepoints/savepoint-" in x for x in restored), log[-3000:]
    epochs = _sink_epochs(tmp_path)
    ids = [int(x.rsplit("(checkpoint id ", 1)[1].rstrip(")")) for x in log.splitlines() if "stopped with" in x]
    assert len(ids) == 3 and ids == sorted(set(ids)), log[-3000:]
    assert [k for e, k in epochs if e in ids] == [2, 4, 6], epochs  # the savepoints' epochs, their k the stop's
    assert [k for _, k in epochs] == sorted(k for _, k in epochs), epochs
    ledger = [tuple(map(int, x.split())) for x in (tmp_path / "ledger").read_text().splitlines()]
    assert ledger == sorted(set(ledger)) and [k for _, k in ledger] == marks, ledger


def _killed_in_a_stop(state: Path, lines: Sequence[str], start: int, index: int) -> list[Line]:
    """Incarnation ``index`` (savepoint-every=2) from checkpoint ``start``, given the rest of the case, SIGKILLed
    (its process group) the moment a new savepoint's _metadata exists: its stop is under way, the sink's commit of
    it held (the JVM's test hook holds a commit sealed in a stop for STOP_PAUSE_MS, and the stop waits for its
    commit, so the kill lands there however loaded the machine: without it the stop could finish first, about 2
    runs in 5 under load), the job not finished.  What it printed, parsed."""
    before = set(state.glob("savepoints/*/_metadata"))
    env = {**os.environ, "OIJ_STATE_DIR": str(state), "OIJ_CHECKPOINT": str(start), "OIJ_RESTART": str(index),
           "OIJ_FLINK_STOP_COMMIT_PAUSE_MS": str(STOP_PAUSE_MS)}
    proc = subprocess.Popen(command("savepoint-every=2"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        assert proc.stdin is not None
        proc.stdin.write((lines[0] + "".join(lines[1 + start:])).encode())
        proc.stdin.close()
        deadline = time.monotonic() + TIMEOUT
        while not set(state.glob("savepoints/*/_metadata")) - before:
            assert proc.poll() is None and time.monotonic() < deadline, "no savepoint"
            time.sleep(0.002)
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.stdout is not None
        out = proc.stdout.read().decode()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    log = (state / f"jvm-{index}.log").read_text()
    assert "#DONE" not in log and "stopped with" not in log, log[-3000:]  # killed inside the stop
    return [x for x in map(parse_line, out.splitlines(keepends=True)) if x is not None]


def _first_job_restored_from_a_savepoint(log: str) -> None:
    """The first job of a JVM is restored (its "restoring from" line comes before its "submitted" one), from a
    savepoint, or the JVM says it skipped one whose _metadata a kill tore (and took the snapshot before)."""
    first_job = next(x for x in log.splitlines() if "oij: restoring from " in x or "oij: job " in x)
    assert "oij: restoring from " in first_job, log[-3000:]
    assert "/savepoints/savepoint-" in first_job or "its _metadata does not load" in log, log[-3000:]


def test_savepoints_are_exactly_once_across_kills(tmp_path: Path) -> None:
    """Kills with savepoint-every=2, three kinds in one run of four incarnations on ON_TIME (a JVM each; a run
    for the kit's two kinds and one for the kill in a stop started five):

    0. the kit's fed 2: given events 1..2, killed once the savepoint at event 2 committed (its checkpoint line
       out);
    1. at OIJ_CHECKPOINT=2, restored from the newest snapshot (that savepoint, or a checkpoint of the job resumed
       from it before the kill came), given the rest: SIGKILL the moment the savepoint at event 4's _metadata
       exists, inside its stop (its commit held there by the JVM's test hook, :func:`_killed_in_a_stop`);
    2. restores the newest snapshot, that savepoint (or, if the kill tore its _metadata, the JVM says it skipped
       it and takes the snapshot before), commits what it held if it was not committed, and is killed by the kit
       on its first row, right after a commit printed it (if that row is one the savepoint's commit held, printed
       again before the JVM starts, the kill may come before the JVM restores: then incarnation 3's does);
    3. restores the newest snapshot and finishes.

    The rows all four committed are exactly the result, each once; the sink's epochs increase."""
    lines = ON_TIME.to_jsonl().splitlines(keepends=True)
    fed = run_incarnation(command("savepoint-every=2"), lines, 0, str(tmp_path), 0, KillPoint("fed", 2), TIMEOUT,
                          REST)
    assert fed.problem is None and fed.killed == KillPoint("fed", 2), (fed.kill_note, fed.stderr[-2000:])
    assert restart_point(fed.output, 0) == 2, fed.output
    stopped = _killed_in_a_stop(tmp_path, lines, 2, 1)
    assert _restored((tmp_path / "jvm-1.log").read_text())  # the savepoint at 2, or a checkpoint of the job after it
    k = restart_point(stopped, 2)
    row = run_incarnation(command("savepoint-every=2"), lines, k, str(tmp_path), 2, KillPoint("row", 1), TIMEOUT,
                          REST)
    assert row.problem is None and row.killed == KillPoint("row", 1), row.stderr[-2000:]
    last = run_incarnation(command("savepoint-every=2"), lines, restart_point(row.output, k), str(tmp_path), 3,
                           None, TIMEOUT)
    assert last.problem is None and last.exit_code == 0, last.stderr[-2000:]
    # the first JVM after the kill in the stop restores the savepoint: incarnation 2's, or, if its first row was
    # one the savepoint's commit held (printed again before its JVM starts) and the kill came before its JVM
    # said where it restored from, incarnation 3's (nothing ran in between)
    logs = [x.read_text() for x in (tmp_path / "jvm-2.log", tmp_path / "jvm-3.log") if x.exists()]
    _first_job_restored_from_a_savepoint(next(x for x in logs if "oij: restoring from " in x or "oij: job " in x))
    outputs = [fed.output, stopped, row.output, last.output]
    verdict = judge_committed(list(rows_of(ON_TIME).elements()), outputs, True)
    assert verdict.exactly_once, (verdict, outputs)
    got = sum((Counter(committed(x, completed=False)) for x in outputs[:-1]), Counter[object]())
    assert got + Counter(committed(last.output, completed=True)) == rows_of(ON_TIME), outputs
    assert [k for _, k in _sink_epochs(tmp_path)] == sorted(k for _, k in _sink_epochs(tmp_path))
