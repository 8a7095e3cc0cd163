"""The restart mode of the kit: kill an implementation with SIGKILL, restart it, judge what it committed.

The restart protocol (docs/conformance.rst, "Crashes and restarts"; :mod:`oij.spec.recovery` defines the
verdict): the command starts with ``OIJ_STATE_DIR`` (a directory that survives its crashes, empty at the
first start), ``OIJ_CHECKPOINT=k`` (the events count of the last checkpoint line it printed, ``0`` at the
first start) and ``OIJ_RESTART=i`` (which incarnation this is).  It reads the query line, then the events
after event ``k``, then the end line.  After it has durably saved its state through event ``k`` it prints
``{"type":"checkpoint","events":k}``; the result lines it printed before that line are committed, those
after it provisional until its next checkpoint line (or its normal exit, which commits them all).

Data flow of one case::

    clean run (no kill) -> its checkpoint marks -> kill plans (each: one kill point per incarnation)
    for each plan: incarnation 0 .. n: Popen(CMD, env OIJ_STATE_DIR, OIJ_CHECKPOINT, OIJ_RESTART)
        feeder thread -> stdin (query, events k+1.., end)      reader -> lines; kill point -> SIGKILL
    committed rows of all incarnations --spec.recovery.judge_committed--> exactly-once, or the rows lost,
        duplicated and unexpected, with the timeline of kills

Every process is started in its own session and killed with its whole group; the state directory is a
temporary directory this module creates per plan and removes afterwards.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import orjson

from oij.spec.batch import Results
from oij.spec.profiles import CANONICAL, Profile
from oij.spec.recovery import Checkpoint, Line, RecoveryVerdict, is_valid_checkpoint, judge_committed, restart_point
from oij.testing._case import Case
from oij.testing._protocol import ProtocolError, all_rows, expected_output, parse_output, same_value
from oij.testing._schema import RESTART_TYPES, validate_line

KILL_KINDS = ("fed", "checkpoint", "row")
"""``fed``: give the incarnation the events through event ``n`` (absolute), wait until it prints a checkpoint
at ``n`` or later (or its output rests for ``quiet`` seconds), then kill it: between events, after a
checkpoint.  ``checkpoint``: kill it on reading its ``n``-th checkpoint line (at a checkpoint, rows after it
possibly written).  ``row``: kill it on reading its ``n``-th result row (mid-output)."""


@dataclass(frozen=True)
class KillPoint:
    """Where one incarnation is killed (see :data:`KILL_KINDS`)."""

    kind: str
    n: int

    def __str__(self) -> str:
        return {"fed": f"after event {self.n} (once it checkpoints at {self.n} or later, or its output rests)",
                "checkpoint": f"on its checkpoint line #{self.n}", "row": f"on its result row #{self.n}"}[self.kind]


@dataclass
class Incarnation:
    """One process of a run: where it started, what it was given, what it printed, how it ended."""

    start: int
    fed: int
    output: list[Line] = field(default_factory=list)
    killed: KillPoint | None = None
    kill_note: str = ""
    """How the kill came, as the report says it: for a ``fed`` kill, whether on a checkpoint line or at rest."""
    exit_code: int | None = None
    stderr: str = ""
    problem: str | None = None


@dataclass
class RestartRun:
    """A case run under one kill plan: the incarnations and the verdict (or the problem that stopped it)."""

    case: Case
    plan: tuple[KillPoint, ...]
    incarnations: list[Incarnation] = field(default_factory=list)
    verdict: RecoveryVerdict | None = None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None and self.verdict is not None and self.verdict.exactly_once

    def timeline(self) -> list[str]:
        """The run as text: per incarnation, where it started, what it committed, and where it was killed."""
        out = []
        for i, inc in enumerate(self.incarnations):
            marks = [x.events for x in inc.output if isinstance(x, Checkpoint)]
            rows = sum(1 for x in inc.output if not isinstance(x, Checkpoint))
            end = f"killed {inc.kill_note or inc.killed}" if inc.killed else f"exit {inc.exit_code}"
            given = f"given events {inc.start + 1}..{inc.fed}" if inc.fed > inc.start else "given no event"
            out.append(f"  incarnation {i}: restored at event {inc.start}, {given}, {rows} row(s), "
                       f"checkpoints at {marks or 'none'}; {end}")
        return out


def parse_line(line: str) -> Line | None:
    """One output line as a :class:`~oij.spec.recovery.Checkpoint` or a result row tuple (None for a blank line).
    Raises :class:`ProtocolError` for a line that is neither."""
    if not line.strip():
        return None
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise ProtocolError(f"output line is not JSON: {line[:200]!r}") from None
    if isinstance(obj, dict) and obj.get("type") == "checkpoint":
        errs = validate_line(obj, RESTART_TYPES)
        if errs:
            raise ProtocolError(f"a checkpoint line breaks the protocol ({errs[0]}): {line[:200]!r}")
        return Checkpoint(obj["events"])
    res = parse_output(line)
    if res.pairs:
        return ("pair", *res.pairs[0])
    if res.aggregates:
        return ("aggregate", *res.aggregates[0])
    return ("late", res.late[0])


def _rows_of(res: Results) -> list[Line]:
    return ([("pair", *p) for p in res.pairs] + [("aggregate", *a) for a in res.aggregates]
            + [("late", i) for i in res.late])


def _snap(rows: list[Line], expected: list[Line]) -> list[Line]:
    """Aggregate rows whose value equals an expected row's within the kit's tolerance take its exact tuple."""
    exp = [r for r in expected if isinstance(r, tuple) and r[0] == "aggregate"]
    out = []
    for r in rows:
        if isinstance(r, tuple) and r[0] == "aggregate" and r not in exp:
            r = next((e for e in exp if e[1:3] == r[1:3] and same_value(e[3], r[3])), r)
        out.append(r)
    return out


def _reader(stream: object, q: queue.Queue[bytes | None]) -> None:
    for line in iter(stream.readline, b""):  # type: ignore[attr-defined]
        q.put(line)
    q.put(None)


def run_incarnation(argv: Sequence[str], lines: Sequence[str], start: int, state_dir: str, index: int,
                    kill: KillPoint | None, timeout: float, quiet: float = 1.0) -> Incarnation:
    """Start ``argv`` as incarnation ``index`` from checkpoint ``start`` and feed it; kill it at ``kill`` (or
    let it run to its exit).  ``lines``: the case as oij-jsonl lines (query, events, end)."""
    n_events = len(lines) - 2
    last = n_events if kill is None or kill.kind != "fed" else min(kill.n, n_events)
    inc = Incarnation(start, max(start, last))
    env = {**os.environ, "OIJ_STATE_DIR": state_dir, "OIJ_CHECKPOINT": str(start), "OIJ_RESTART": str(index)}
    try:
        p = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env, start_new_session=True)
    except OSError as e:
        inc.problem = f"cannot start {argv[0]!r}: {e.strerror or e}"
        return inc
    feed = lines[0] + "".join(lines[1 + start:1 + last]) + (lines[-1] if last == n_events and (
        kill is None or kill.kind != "fed") else "")
    errbuf: list[bytes] = []

    def feeder() -> None:
        with contextlib.suppress(OSError):
            assert p.stdin is not None
            p.stdin.write(feed.encode())
            p.stdin.flush()
            if kill is None or kill.kind != "fed":
                p.stdin.close()

    q: queue.Queue[bytes | None] = queue.Queue()
    threads = [threading.Thread(target=feeder, daemon=True),
               threading.Thread(target=_reader, args=(p.stdout, q), daemon=True),
               threading.Thread(target=lambda: errbuf.append(p.stderr.read() if p.stderr else b""), daemon=True)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    rows = marks = 0
    killed = False
    try:
        while True:
            wait = quiet if kill is not None and kill.kind == "fed" else max(0.0, deadline - time.monotonic())
            try:
                raw = q.get(timeout=max(0.01, min(wait, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    inc.problem = f"hang: no exit within {timeout:g} s (killed)"
                    _kill(p)
                    break
                if kill is not None and kill.kind == "fed":  # its output rests: kill it between events
                    inc.killed, killed = kill, True
                    inc.kill_note = (f"after event {kill.n} (no checkpoint at event {kill.n} or later; its output "
                                     f"at rest for {quiet:g} s)")
                    _kill(p)
                continue
            if raw is None:
                break
            x = parse_line(raw.decode("utf-8", errors="replace"))
            if x is None:
                continue
            if isinstance(x, Checkpoint):
                if not is_valid_checkpoint(x.events, restart_point(inc.output, start), inc.fed):
                    inc.problem = (f"protocol error: checkpoint at event {x.events}, but it was given events "
                                   f"{start + 1}..{inc.fed} and checkpointed at {restart_point(inc.output, start)}")
                    _kill(p)
                    break
                marks += 1
            else:
                rows += 1
            inc.output.append(x)
            if killed or kill is None:
                continue
            if ((kill.kind == "checkpoint" and isinstance(x, Checkpoint) and marks == kill.n)
                    or (kill.kind == "row" and not isinstance(x, Checkpoint) and rows == kill.n)
                    or (kill.kind == "fed" and isinstance(x, Checkpoint) and x.events >= kill.n)):
                inc.killed, killed = kill, True
                inc.kill_note = (f"after event {kill.n}, on its checkpoint line at event {x.events}"
                                 if isinstance(x, Checkpoint) and kill.kind == "fed" else
                                 f"{kill} (at event {x.events})" if isinstance(x, Checkpoint) else str(kill))
                _kill(p)  # the rest of what it wrote before dying is still read
    except ProtocolError as e:
        inc.problem = f"protocol error: {e}"
        _kill(p)
    finally:
        if p.poll() is None and not killed and inc.problem is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
        if p.poll() is None:
            _kill(p)
        p.wait()
        for t in threads[1:]:
            t.join(timeout=5)
    inc.exit_code = p.returncode
    inc.stderr = b"".join(errbuf).decode("utf-8", errors="replace")
    if not killed and inc.problem is None and p.returncode != 0:
        tail = inc.stderr.strip().splitlines()[-1] if inc.stderr.strip() else "(no message)"
        inc.problem = f"crash: exit code {p.returncode}; stderr: {tail}"
    return inc


def _kill(p: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)


def run_plan(argv: Sequence[str], case: Case, plan: Sequence[KillPoint], profile: Profile = CANONICAL,
             timeout: float = 10.0, quiet: float = 1.0) -> RestartRun:
    """Run ``case`` killing incarnation ``i`` at ``plan[i]``, the last one left to finish; judge the committed
    rows of them all against ``profile``'s result."""
    lines = case.to_jsonl().splitlines(keepends=True)
    run = RestartRun(case, tuple(plan))
    state_dir = tempfile.mkdtemp(prefix="oij-restart-")
    try:
        start = 0
        for i, kill in enumerate([*plan, None]):
            inc = run_incarnation(argv, lines, start, state_dir, i, kill, timeout, quiet)
            run.incarnations.append(inc)
            if inc.problem is not None:
                run.problem = f"incarnation {i}: {inc.problem}"
                return run
            if kill is not None and inc.killed is None:
                # it finished before the kill point came: the run is over (nothing to restart)
                break
            start = restart_point(inc.output, start)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    expected = _rows_of(expected_output(case, profile))
    outputs = [_snap(list(inc.output), expected) for inc in run.incarnations]
    last_completed = run.incarnations[-1].killed is None
    run.verdict = judge_committed(expected, outputs, last_completed)
    return run


SMALL_CASE = 12
"""A case of at most this many events is killed between every two events (a ``fed`` kill point at each)."""


def state_moments(case: Case) -> dict[str, list[int]]:
    """The events after which the oracle's state holds what a restart loses most easily, by kind: ``matched``
    (a left join's base has matched and still awaits finality), ``channels-apart`` (every channel has a
    watermark, and they differ), ``pending-aggregate`` (a base of an aggregate awaits finality), ``w-moved``
    (the event moved W), ``cursor`` (an aggregate's running window holds probes and the next base of its key to
    be final slides it; ``cursor-moved``: and the event moved it), ``stored`` (tuples are held), ``late`` (the
    event was a late tuple).  The event numbers count from 1; the End is not an event here."""
    from oij.reference.oracle import Oracle
    from oij.spec.model import NO_WATERMARK, End

    o = Oracle(case.query)
    out: dict[str, list[int]] = {}
    cursors: list[tuple[int | str, int, int, int]] = []
    for n, e in enumerate((e for e in case.events if not isinstance(e, End)), 1):
        w, late = o.w, len(o.late)
        o.on_event(e)
        pending = [ks for ks in o.keys.values() if ks.bid]
        kinds = ["late"] if len(o.late) > late else []
        if o.left and any(aid in o.matched for ks in pending for aid in ks.bid):
            kinds.append("matched")
        if len(set(o.channel_max)) > 1 and min(o.channel_max) != NO_WATERMARK:
            kinds.append("channels-apart")  # every channel has spoken, and they differ
        if o.agg is not None and pending:
            kinds.append("pending-aggregate")
            live = [(ks.key, ks.cur_lo, ks.cur_hi, ks.cur_n) for ks in pending if ks.cur_n > 0
                    and ks.bts[0] + o.lo_off <= ks.cur_hi]  # the next row of the key slides the running aggregate
            if live:
                kinds.append("cursor")
                if live != cursors:
                    kinds.append("cursor-moved")
            cursors = live
        if o.w != w:
            kinds.append("w-moved")
        if o.stored:
            kinds.append("stored")
        for k in kinds:
            out.setdefault(k, []).append(n)
    return out


POOL = 800
"""Generated cases a restart search chooses its cases from (:func:`restart_cases`).  800 since the generator draws
several channels and left joins more often (issue 65): the first 400 cases no longer held one where a matched
tuple turns late after W moved (``matched-then-w-moved-then-late``)."""


def restart_tags(case: Case) -> frozenset[str]:
    """What a restart can lose in ``case``: each kind of :func:`state_moments` that occurs, each such kind
    followed later by a late tuple or a move of W (a restart that lost that state then shows it), W moved
    twice, and the query's shape (join, aggregate, several channels, mode, exclusive bounds)."""
    q = case.query
    m = state_moments(case)
    if "channels-apart" in m:  # which channel lags or leads matters: one tag per channel count
        m[f"channels-apart-{q.channels}"] = m.pop("channels-apart")
    tags = {f"moment:{k}" for k in m}
    for k, at in m.items():
        for after in ("late", "w-moved"):
            if k != after and any(n > at[0] for n in m.get(after, [])):
                tags.add(f"{k}-then-{after}")
        moved = [n for n in m.get("w-moved", []) if n > at[0]]
        if k not in ("late", "w-moved") and moved and any(n > moved[0] for n in m.get("late", [])):
            tags.add(f"{k}-then-w-moved-then-late")  # W moves after the state is there, then judges a tuple
    if len(m.get("w-moved", [])) > 1:
        tags.add("w-moved-twice")
    tags |= {f"join:{q.join}", f"aggregate:{q.aggregate}", f"channels:{q.channels}",
             "lateness" if q.lateness is not None else "watermarks"}
    if not (q.lower_inclusive and q.upper_inclusive):
        tags.add("exclusive")
    return frozenset(tags)


def restart_cases(features: frozenset[str], n: int, seed: int = 0, pool: int = POOL) -> list[Case]:
    """``n`` cases for the restart mode, chosen from the test vectors whose features are claimed and the first
    ``pool`` generated cases (``seed``) so that together they cover every :func:`restart_tags` they have: each
    next case the one that adds the most uncovered tags, a case small enough to be killed at every event
    (:data:`SMALL_CASE`) before any longer one (the shorter on a tie, then the earlier); once every tag is
    covered, they are covered again by other cases.  A restart bug shows only where the state it loses matters
    after the kill, so the cases are chosen by their state, not taken as Hypothesis first draws them (small and
    alike).  Deterministic; O(pool * events)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hyp_seed

    from oij.testing._cases import cases, same_draws_anywhere

    drawn: list[Case] = []

    @hyp_seed(seed)
    @settings(max_examples=pool, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(cases(features))
    def collect(case: Case) -> None:
        if case not in drawn:
            drawn.append(case)

    with same_draws_anywhere():
        collect()
    from oij.testing._case import case_features
    from oij.testing._vectors import interleaved

    vectors = [Case(v.case.query, v.case.events, f"vector {v.feature}/{v.name}", v.case.encoding)
               for v in interleaved() if case_features(v.case) <= features]
    tagged = [(restart_tags(c), c) for c in [*vectors, *drawn]]
    chosen: list[Case] = []
    covered: set[str] = set()
    while len(chosen) < n and tagged:
        best = max(range(len(tagged)), key=lambda i: (len(tagged[i][0] - covered) + (
            1000 if tagged[i][0] - covered and len(tagged[i][1]) <= SMALL_CASE else 0), -len(tagged[i][1]), -i))
        if not tagged[best][0] - covered:
            if not covered:
                break
            covered = set()  # every tag is covered: cover them again, with other cases
            continue
        tags, case = tagged.pop(best)
        covered |= tags
        chosen.append(case)
    chosen += [c for _, c in tagged[:max(0, n - len(chosen))]]
    return chosen


def plans(clean: Incarnation, n_events: int, restarts: int,
          case: Case | None = None) -> Iterator[tuple[KillPoint, ...]]:
    """Kill plans for a case whose clean run printed ``clean.output``: before, at and after each checkpoint,
    mid-output, and between events; each plan kills ``restarts`` incarnations in a row at points of the same
    kind (counted in each incarnation's own output, or in absolute events for ``fed``).  A case of at most
    :data:`SMALL_CASE` events is killed between every two events; with ``case``, a longer one also at the first
    and last moment of each kind of :func:`state_moments` (the state chooses where to kill)."""
    marks = [x.events for x in clean.output if isinstance(x, Checkpoint)]
    rows = sum(1 for x in clean.output if not isinstance(x, Checkpoint))
    fed = {1, max(1, n_events // 2), max(1, n_events - 1), *[m for m in marks[:3] if m >= 1]}
    if n_events <= SMALL_CASE:
        fed |= set(range(1, n_events + 1))
    elif case is not None:
        for kind, at in state_moments(case).items():
            if kind != "late":
                fed |= {at[0], at[-1]}
    points = [KillPoint("fed", k) for k in sorted(fed) if k <= n_events]  # deterministic first: replays repeat
    points.append(KillPoint("checkpoint", 1))
    if rows:
        points += [KillPoint("row", 1), KillPoint("row", max(1, (rows + 1) // 2))]
    seen: set[tuple[KillPoint, ...]] = set()
    for p in points:
        if p.kind == "fed":
            step = max(1, (n_events - p.n) // max(1, restarts))
            plan = tuple(KillPoint("fed", min(n_events, p.n + i * step)) for i in range(restarts))
        else:
            plan = (p,) * restarts
        if plan not in seen:
            seen.add(plan)
            yield plan


def clean_run(argv: Sequence[str], case: Case, timeout: float = 10.0) -> Incarnation:
    """The case run once with a fresh state directory and no kill."""
    state_dir = tempfile.mkdtemp(prefix="oij-restart-")
    try:
        return run_incarnation(argv, case.to_jsonl().splitlines(keepends=True), 0, state_dir, 0, None, timeout)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


@dataclass
class RestartFailure:
    """A case and kill plan whose committed rows are not exactly the result."""

    run: RestartRun

    def report(self, profile: Profile = CANONICAL) -> str:
        """The case as a timeline, the kill plan, each incarnation, and the rows lost, duplicated or unexpected."""
        from oij.testing._timeline import timeline

        r = self.run
        lines = [*timeline(r.case, profile), "", "kill plan: " + ", ".join(map(str, r.plan)), *r.timeline()]
        if r.problem:
            lines.append(f"problem: {r.problem}")
        elif r.verdict is not None:
            v = r.verdict
            lines.append(f"verdict: {v.kind}")
            for name, rows in (("lost", v.lost), ("duplicated", v.duplicated), ("unexpected", v.unexpected)):
                if rows:
                    lines.append(f"  {name} ({len(rows)}): " + "; ".join(row_text(x) for x in rows[:10]))
        return "\n".join(lines)


def row_text(x: Line) -> str:
    if isinstance(x, tuple) and x and x[0] in ("pair", "aggregate", "late"):
        res = Results()
        if x[0] == "pair":
            res.pairs.append((x[1], x[2]))
        elif x[0] == "aggregate":
            res.aggregates.append((x[1], x[2], x[3]))
        else:
            res.late.append(x[1])
        return all_rows(res)[0]
    return repr(x)


def check_restarts(argv: Sequence[str], case: Case, restarts: int = 1, profile: Profile = CANONICAL,
                   timeout: float = 10.0, quiet: float = 1.0) -> tuple[int, RestartFailure | None]:
    """Run ``case`` under every kill plan of :func:`plans`; the number of plans run and the first failure."""
    clean = clean_run(argv, case, timeout)
    if clean.problem is not None:
        run = RestartRun(case, ())
        run.incarnations.append(clean)
        run.problem = f"the run without a kill: {clean.problem}"
        return 0, RestartFailure(run)
    n = 0
    for plan in plans(clean, len(case), restarts, case):
        n += 1
        run = run_plan(argv, case, plan, profile, timeout, quiet)
        if not run.ok:
            return n, RestartFailure(run)
    return n, None


SHRINK_BUDGET = 60.0
"""Seconds a restart search spends shrinking its first failure by default (``oij conform --shrink-budget``): each
try is a run of the case under its kill plan, a second or more when a kill waits for the output to rest, so an
unbounded shrink of a long case can take many minutes after the failure is known."""


@dataclass
class Shrunk:
    """What :func:`shrink_within` did: the smallest failure it reached, its tries, its time, and whether the
    budget stopped it before the case was 1-minimal."""

    failure: RestartFailure
    runs: int = 0
    seconds: float = 0.0
    cut: bool = False


def shrink_within(argv: Sequence[str], failure: RestartFailure, profile: Profile = CANONICAL,
                  timeout: float = 10.0, quiet: float = 1.0, budget: float | None = None) -> Shrunk:
    """Delete events one at a time while the case still fails under the same plan (``fed`` kill points moved
    inside the shorter case); a smaller failing case, 1-minimal for the events it tried.  ``budget``: stop
    starting tries after that many seconds (``cut`` then says the case may not be minimal); None: no bound."""
    from oij.spec.model import End

    out = Shrunk(failure)
    t0 = time.monotonic()
    changed = True
    while changed:
        changed = False
        events = [e for e in out.failure.run.case.events if not isinstance(e, End)]
        for i in range(len(events)):
            if budget is not None and time.monotonic() - t0 >= budget:
                out.cut = True
                out.seconds = time.monotonic() - t0
                return out
            cand = Case(out.failure.run.case.query, (*events[:i], *events[i + 1:], End()), "shrunk",
                        out.failure.run.case.encoding)
            plan = tuple(KillPoint(k.kind, min(k.n, max(1, len(cand)))) if k.kind == "fed" else k
                         for k in out.failure.run.plan)
            run = run_plan(argv, cand, plan, profile, timeout, quiet)
            out.runs += 1
            if not run.ok and run.problem is None:
                out.failure, changed = RestartFailure(run), True
                break
    out.seconds = time.monotonic() - t0
    return out


def shrink(argv: Sequence[str], failure: RestartFailure, profile: Profile = CANONICAL,
           timeout: float = 10.0, quiet: float = 1.0) -> RestartFailure:
    """:func:`shrink_within` without a budget: the 1-minimal failing case."""
    return shrink_within(argv, failure, profile, timeout, quiet).failure


def plan_json(plan: Sequence[KillPoint]) -> bytes:
    """A kill plan as JSON (``[["fed", 3], ["checkpoint", 1]]``), for the replay's companion file."""
    return orjson.dumps([[k.kind, k.n] for k in plan])


def read_plan(text: str) -> tuple[KillPoint, ...]:
    """A kill plan written by :func:`plan_json`, valid under ``oij/schemas/killplan.schema.json`` (the schema is
    what is checked); raises ValueError naming the bad entry (``plan[1][0]: must be one of ...``)."""
    from oij.testing._schema import KILL_PLAN, errors, schema

    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e})") from None
    errs = errors(data, schema(KILL_PLAN), "plan")
    if errs:
        raise ValueError(f"{errs[0]} (a kill plan is a JSON list of [kind, n] with kind one of "
                         f"{', '.join(KILL_KINDS)} and n >= 1: oij/schemas/killplan.schema.json)")
    return tuple(KillPoint(kind, n) for kind, n in data)


@dataclass
class RestartSearchResult:
    """What a restart search ran and the first failure it found (shrunk)."""

    cases: int = 0
    plans: int = 0
    failure: RestartFailure | None = None
    seconds: float = 0.0
    first: RestartFailure | None = None
    """The failure as found, before shrinking."""
    shrunk: Shrunk | None = None
    """What shrinking did (None: it did not run)."""
    shrink_budget: float | None = None


def restart_search(argv: Sequence[str], *, features: frozenset[str] | None = None, profile: Profile = CANONICAL,
                   max_examples: int = 20, restarts: int = 1, seed: int = 0, timeout: float = 10.0,
                   quiet: float = 1.0, shrinking: bool = True, shrink_budget: float | None = None,
                   on_first: Callable[[RestartFailure, int], None] | None = None,
                   progress: Callable[[int, int, int], None] | None = None) -> RestartSearchResult:
    """Run up to ``max_examples`` generated cases, each under every kill plan of :func:`plans` with
    ``restarts`` kills in a row; stop at the first case whose committed rows are not exactly the result and
    shrink it within ``shrink_budget`` seconds (None, the default here: unbounded, as ``oij bench recovery``
    wants; ``oij conform --restarts`` gives :data:`SHRINK_BUDGET`).  ``on_first(failure, cases)`` is called with
    the failure as found, before any shrinking (the verdict is known then: ``oij conform`` prints it at once);
    ``progress(case, cases, runs)`` before each case."""
    from oij.testing._cases import DEFAULT_FEATURES

    feats = DEFAULT_FEATURES if features is None else features
    out = RestartSearchResult(shrink_budget=shrink_budget)
    t0 = time.monotonic()
    chosen = restart_cases(feats, max_examples, seed)
    for case in chosen:
        if progress is not None:
            progress(out.cases + 1, len(chosen), out.plans)
        out.cases += 1
        n, f = check_restarts(argv, case, restarts, profile, timeout, quiet)
        out.plans += n
        if f is not None:
            out.failure = out.first = f
            break
    if out.first is not None and on_first is not None:
        on_first(out.first, out.cases)
    if shrinking and out.first is not None and out.first.run.problem is None:
        out.shrunk = shrink_within(argv, out.first, profile, timeout, quiet, shrink_budget)
        out.failure = out.shrunk.failure
    out.seconds = time.monotonic() - t0
    return out


@dataclass
class RestartReport:
    """The outcome of ``oij conform --restarts``: what ran, and the failure with its replay files."""

    command: list[str]
    restarts: int
    profile: Profile
    search: RestartSearchResult
    replay: str | None = None
    plan_file: str | None = None

    @property
    def ok(self) -> bool:
        return self.search.failure is None

    def text(self) -> str:
        s, cmd = self.search, " ".join(self.command)
        if s.failure is None:
            return (f"exactly once: {s.cases} cases, each under its kill plans ({s.plans} runs, {self.restarts} "
                    f"kill(s) with SIGKILL and restart each), the committed rows of all incarnations equal the "
                    f"{self.profile.name} result ({s.seconds:.0f} s)")
        run = s.failure.run
        kind = run.verdict.kind if run.verdict is not None and run.problem is None else "error"
        sh = s.shrunk
        size = ("minimal case" if sh is not None and not sh.cut else "case")
        head = (f"oij conform --restarts: {cmd} is NOT exactly once ({kind}; {size} of {len(run.case)} "
                f"events, found in {s.cases} cases)")
        out = [head, self.shrink_text(), "", s.failure.report(self.profile)]
        if self.replay and self.plan_file:
            prof = "" if self.profile is CANONICAL else f"--profile {self.profile.name} "
            out += ["", f"replay: oij conform --replay {self.replay} --kill-plan {self.plan_file} "
                    f"--restarts {len(run.plan) or self.restarts} {prof}-- {cmd}"]
        return "\n".join(out)

    def shrink_text(self) -> str:
        """One line on the shrinking: how far it went, and whether its budget stopped it."""
        s = self.search
        sh, first = s.shrunk, s.first
        if first is None or first.run.problem is not None:
            return "not shrunk (the run stopped on a problem, not a verdict)"
        if sh is None:
            return f"not shrunk (--no-shrink): the case as found, {len(first.run.case)} events"
        went = (f"shrunk from {len(first.run.case)} to {len(sh.failure.run.case)} events in {sh.runs} runs "
                f"({sh.seconds:.1f} s)")
        if sh.cut:
            return (f"{went}; shrinking stopped by its budget of {s.shrink_budget:g} s: the case may not be minimal "
                    f"(--shrink-budget SECONDS to give it more)")
        return went + ", 1-minimal"

    def first_text(self, failure: RestartFailure, cases: int) -> str:
        """The failure as found, before shrinking: what ``oij conform --restarts`` prints the moment it knows."""
        run = failure.run
        kind = run.verdict.kind if run.verdict is not None and run.problem is None else "error"
        then = ("" if run.problem is not None else
                "\nshrinking it next " + (f"(within {self.search.shrink_budget:g} s, --shrink-budget)"
                                          if self.search.shrink_budget is not None else "(no budget)") + "...")
        files = (f"; written to {self.replay} and {self.plan_file}" if self.replay and self.plan_file else "")
        return (f"oij conform --restarts: first failure ({kind}), in case {cases}, as found ({len(run.case)} "
                f"events, unshrunk){files}\n\n{failure.report(self.profile)}{then}\n")


def restart_conformance(argv: Sequence[str], *, features: frozenset[str] | None = None,
                        profile: Profile = CANONICAL, max_examples: int = 20, restarts: int = 1, seed: int = 0,
                        timeout: float = 10.0, replay_out: str = "oij-conform-failure.jsonl", quiet: float = 1.0,
                        shrinking: bool = True, shrink_budget: float | None = SHRINK_BUDGET,
                        say_first: Callable[[str], None] | None = None,
                        progress: Callable[[int, int, int], None] | None = None) -> RestartReport:
    """``oij conform --restarts N -- CMD``: :func:`restart_search`; on a failure the case is written to
    ``replay_out`` and its kill plan beside it (``.plan.json``), both atomically: as found, the moment it is
    found (and ``say_first`` is given the report of it, before shrinking starts), then again once shrunk."""
    from oij.io.atomic import write_text

    plan_file = os.path.splitext(replay_out)[0] + ".plan.json"
    rep = RestartReport(list(argv), restarts, profile, RestartSearchResult(shrink_budget=shrink_budget))

    def write(f: RestartFailure) -> None:
        write_text(replay_out, f.run.case.to_jsonl())
        write_text(plan_file, plan_json(f.run.plan).decode() + "\n")
        rep.replay, rep.plan_file = replay_out, plan_file

    def first(f: RestartFailure, cases: int) -> None:
        write(f)
        if say_first is not None:
            say_first(rep.first_text(f, cases))

    rep.search = restart_search(argv, features=features, profile=profile, max_examples=max_examples,
                                restarts=restarts, seed=seed, timeout=timeout, quiet=quiet, shrinking=shrinking,
                                shrink_budget=shrink_budget, on_first=first, progress=progress)
    if rep.search.failure is not None:
        write(rep.search.failure)
    return rep


def replay_restarts(argv: Sequence[str], case: Case, plan: Sequence[KillPoint], profile: Profile = CANONICAL,
                    timeout: float = 10.0, quiet: float = 1.0) -> tuple[bool, str]:
    """One case under one kill plan (``oij conform --replay F --kill-plan P``): exactly once, and the report."""
    run = run_plan(argv, case, plan, profile, timeout, quiet)
    if run.ok:
        return True, f"exactly once on this case under the kill plan {', '.join(map(str, plan)) or '(none)'}"
    return False, RestartFailure(run).report(profile)
