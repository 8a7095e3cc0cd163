"""Running an implementation under test on cases, judging its output, searching and shrinking with Hypothesis,
and finding the semantic profile that explains a deviation.

An implementation is a command (argv list: it reads the case on stdin and
writes result lines on stdout) or a Python callable ``fn(query, events)``
returning a :class:`oij.spec.batch.Results` or an iterable of output lines.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, event, given, reporting, settings, target
from hypothesis import seed as hyp_seed
from hypothesis.errors import Flaky

from oij.io.jsonlwrite import result_lines
from oij.spec.batch import Results
from oij.spec.model import End, Event, Query, StreamTuple
from oij.spec.profiles import CANONICAL, PROFILES, Profile
from oij.testing._case import Impl
from oij.testing._cases import DEFAULT_FEATURES, Case, case_features, cases, exercised, same_draws_anywhere
from oij.testing._edges import compute_edges
from oij.testing._protocol import ProtocolError, compare, expected_output, parse_output, restrict
from oij.testing._timeline import render


@dataclass
class Outcome:
    """What one run of the implementation gave: its parsed output, or the problem that prevented it."""

    got: Results | None
    problem: str | None = None
    stderr: str = ""


@dataclass
class Failure:
    """A case the implementation gets wrong, with the report to print."""

    case: Case
    report: str
    kind: str  # mismatch, protocol, crash, hang
    got: Results | None = None  # what the implementation produced (restricted to its features), if it ran


@dataclass
class SearchResult:
    """The outcome of a search: cases run, features exercised, the minimal failure if any, the observations."""

    examples: int = 0
    tags: Counter[str] = field(default_factory=Counter)
    failure: Failure | None = None
    observations: list[tuple[Case, Results | None]] = field(default_factory=list)
    vectors: int = 0  # test vectors run before the search
    edges: Counter[str] = field(default_factory=Counter)  # rule edges (oij.testing._edges) hit by generated cases
    generated: int = 0  # generated cases that ran (the search, not the vectors or shrinking)
    found_by: str = ""  # "vector FEATURE/NAME", "small scope, case N" or "search, case N" when failure is set
    small_scope: int = 0  # small-scope cases that ran (oij.testing._smallscope)
    small_scope_cover: bool = False  # they were its covering array (the per-case default), not every case
    interference: str = ""  # the fixed case that failed beside another and passed alone ("" if none did)


def run_command(argv: Sequence[str], stdin: str, timeout: float) -> Outcome:
    """Run ``argv`` with ``stdin``; kill its whole process group on timeout.  Never raises for the command's faults."""
    try:
        p = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    except OSError as e:
        return Outcome(None, f"cannot start {argv[0]!r}: {e.strerror or e}")
    try:
        out, err = p.communicate(stdin.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return Outcome(None, f"hang: no exit within {timeout:g} s (killed)")
    finally:
        if p.poll() is None:  # an exception (Ctrl-C) while waiting: never leave the child behind
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    stderr = err.decode("utf-8", errors="replace")
    if p.returncode != 0:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "(no message)"
        return Outcome(None, f"crash: exit code {p.returncode}; stderr: {last}", stderr)
    try:
        return Outcome(parse_output(out), None, stderr)
    except ProtocolError as e:
        return Outcome(None, f"protocol error: {e}", stderr)


SESSION_END = '{"type":"end"}'
"""The separator line of the session protocol: the implementation writes it after each case's result lines."""


class Session:
    """A command under test started once for many cases: the session protocol (docs/conformance.rst).

    The command is started with ``OIJ_SESSION=1`` in its environment and
    gets the cases one after another on stdin, each a whole oij-jsonl case
    ending with its ``{"type":"end"}`` line.  After each case it writes that
    case's result lines, then the line ``{"type":"end"}``, and flushes; then
    it forgets everything and reads the next case.  At EOF it exits 0.  A
    case is judged exactly as in the per-case protocol.  When the command
    exits, breaks the protocol or does not finish a case within the
    timeout, that case fails (crash, hang) and the next case starts a
    fresh process.

    Processes: :meth:`run` starts the command in its own session (process
    group) when none is running; :meth:`close` (or leaving a ``with``
    block) closes its stdin, waits briefly, then kills the whole group.
    Its stderr goes to an unnamed temporary file (no pipe to fill).
    """

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._buf = b""
        self._err: Any = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _start(self) -> str | None:
        import tempfile

        self._err = tempfile.TemporaryFile()  # noqa: SIM115 -- open for the session's life; closed by close()
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                         start_new_session=True, env={**os.environ, "OIJ_SESSION": "1"})
        except OSError as e:
            return f"cannot start {self.argv[0]!r}: {e.strerror or e}"
        self.starts += 1
        self._buf = b""
        return None

    def _stderr_text(self) -> str:
        if self._err is None:
            return ""
        self._err.seek(0)
        text: str = self._err.read().decode("utf-8", errors="replace")
        return text

    def _kill(self) -> None:
        p, self.proc = self.proc, None
        if p is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            for f in (p.stdin, p.stdout):
                if f is not None:
                    with contextlib.suppress(OSError):
                        f.close()

    def run(self, case: Case, timeout: float) -> Outcome:
        """Send ``case`` to the running command (started if needed) and read its answer up to the end line."""
        import selectors
        import time

        if self.proc is None or self.proc.poll() is not None:
            self._kill()
            problem = self._start()
            if problem is not None:
                return Outcome(None, problem)
        p = self.proc
        assert p is not None and p.stdin is not None and p.stdout is not None
        text = case.to_jsonl()
        if not text.endswith("\n"):  # a replayed file's last line may lack its newline: the session needs one
            text += "\n"
        try:
            p.stdin.write(text.encode())
            p.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it exited: reported below with its exit code
        deadline = time.monotonic() + timeout
        lines: list[bytes] = []
        fd = p.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                while b"\n" in self._buf:
                    line, self._buf = self._buf.split(b"\n", 1)
                    if line.strip().replace(b" ", b"") == SESSION_END.encode():
                        try:
                            return Outcome(parse_output(b"\n".join(lines)), None, "")
                        except ProtocolError as e:  # the command is still in step: the session goes on
                            return Outcome(None, f"protocol error: {e}")
                    lines.append(line)
                left = deadline - time.monotonic()
                if left <= 0:
                    self._kill()
                    return Outcome(None, f"hang: no end line within {timeout:g} s (session killed)")
                if not sel.select(left):
                    continue
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    self._buf += chunk
                    continue
                code = p.wait()
                self._kill()
                err = self._stderr_text().strip()
                last = err.splitlines()[-1] if err else "(no message)"
                what = f"exit code {code}" if code else "exit code 0 before the end line"
                return Outcome(None, f"crash: {what}; stderr: {last}", err)

    def close(self) -> None:
        """End the session: close stdin, give the command 5 s to exit, then kill its process group."""
        p = self.proc
        if p is not None and p.stdin is not None:
            with contextlib.suppress(OSError):
                p.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(5.0)
        self._kill()
        if self._err is not None:
            self._err.close()
            self._err = None


def run_impl(impl: Impl | Session, case: Case, timeout: float) -> Outcome:
    """Run ``impl`` (a command, a callable, or a :class:`Session`) on ``case``."""
    if isinstance(impl, Session):
        return impl.run(case, timeout)
    if callable(impl):
        try:
            r = impl(case.query, list(case.events))
        except Exception as e:  # the implementation's fault: reported with the case
            return Outcome(None, f"crash: {type(e).__name__}: {e}")
        lines = "".join(result_lines(r)) if isinstance(r, Results) else "".join(
            x if x.endswith("\n") else x + "\n" for x in r)
        try:
            return Outcome(parse_output(lines))
        except ProtocolError as e:
            return Outcome(None, f"protocol error: {e}")
    return run_command(impl, case.to_jsonl(), timeout)


def judge(case: Case, outcome: Outcome, profile: Profile, features: Iterable[str],
          expected_full: Results | None = None) -> Failure | None:
    """None if the outcome is right for ``case`` under ``profile``; else the failure with its report.
    ``expected_full``: the case's expected output under ``profile``, if already computed."""
    expected = restrict(expected_output(case, profile) if expected_full is None else expected_full, features)
    if outcome.got is None:
        problem = outcome.problem or "no output"
        kind = problem.split(":", 1)[0]
        return Failure(case, render(case, expected, None, None, profile=profile, problem=problem), kind)
    got = restrict(outcome.got, features)
    diff = compare(expected, got)
    if not diff:
        return None
    return Failure(case, render(case, expected, got, diff, profile=profile), "mismatch", got)


class _Found(Exception):
    pass


def run_vectors(impl: Impl | Session, features: frozenset[str], profile: Profile, timeout: float,
                result: SearchResult, jobs: int = 1) -> Failure | None:
    """Run every test vector whose features ``impl`` claims (``oij vectors``: the fixed corpus); the first
    failure, shrunk, or None.  The folders are interleaved (the first vector of each, then the second, ...), so
    that a bug in any feature meets its vectors early.  With ``jobs > 1`` (and a command, not a session) up to
    ``jobs`` vectors run at once; they are judged in the same order, so the failure reported is the same."""
    from oij.testing._vectors import interleaved

    todo = [Case(v.case.query, v.case.events, f"vector {v.feature}/{v.name}", v.case.encoding, raw=v.case.raw)
            for v in interleaved() if case_features(v.case) <= features]
    with contextlib.closing(run_fixed(impl, todo, timeout, jobs, profile, features, result)) as judged:
        first = _first_vector_failure(judged, result)
    return None if first is None else minimize(impl, first, profile, features, timeout, result)


def _first_vector_failure(judged: Iterator[tuple[Case, Outcome, Failure | None]],
                          result: SearchResult) -> Failure | None:
    for case, outcome, f in judged:
        result.examples += 1
        result.vectors += 1
        result.observations.append((case, outcome.got))
        if f is not None:
            result.found_by = case.scenario
            return f
    return None


def run_small_scope(impl: Impl | Session, features: frozenset[str], profile: Profile, timeout: float,
                    result: SearchResult, k: int, cover: bool = False, jobs: int = 1) -> Failure | None:
    """Run every small-scope case of up to ``k`` events (:mod:`oij.testing._smallscope`) whose features ``impl``
    claims, or with ``cover`` only its pairwise covering array (``small_scope_cover`` of ``oij.testing._smallscope``:
    the per-case default); the first failure, shrunk, or None.  With ``jobs > 1`` (a command, not a session) up
    to ``jobs`` cases run at once, judged in order, so the failure reported is the same."""
    from oij.testing._smallscope import small_scope_cases, small_scope_cover

    todo = small_scope_cover(features, k) if cover else small_scope_cases(features, k)
    result.small_scope_cover = cover
    with contextlib.closing(run_fixed(impl, todo, timeout, jobs, profile, features, result)) as judged:
        for n, (case, outcome, f) in enumerate(judged, 1):
            result.examples += 1
            result.small_scope += 1
            result.observations.append((case, outcome.got))
            if f is not None:
                result.found_by = f"small scope{' (covering array)' if cover else ''}, case {n}"
                break
        else:
            return None
    return minimize(impl, f, profile, features, timeout, result)


def run_fixed(impl: Impl | Session, todo: list[Case], timeout: float, jobs: int, profile: Profile,
               features: frozenset[str], result: SearchResult,
               stage: str = "") -> Generator[tuple[Case, Outcome, Failure | None]]:
    """Each case of ``todo`` (a fixed list), its outcome and its failure (None: it passes), in order; up to
    ``jobs`` at a time for a command (one at a time otherwise, or once ``result.interference`` is set).

    A failure seen while others ran beside it is run again alone (the cases running are waited for, the
    others not started) and given as that run judges it: the verdict is the one of ``-j 1``.  When the case
    passes alone, the command's processes interfere (they share a file, a port, a fixed temporary name) or
    it is not deterministic: ``result.interference`` names the case and the rest of the list, and every later
    fixed list of the run, run one at a time.  Close the iterator when done (the pool is shut down)."""
    pool, outcomes = fixed_outcomes(impl, todo, timeout, 1 if result.interference else jobs)
    try:
        for n, (case, outcome) in enumerate(zip(todo, outcomes, strict=False)):
            f = judge(case, outcome, profile, features)
            if f is None or pool is None:
                yield case, outcome, f
                continue
            pool.shutdown(wait=True, cancel_futures=True)  # nothing else runs while the case runs alone
            pool = None
            outcome = run_impl(impl, case, timeout)
            f = judge(case, outcome, profile, features)
            if f is None:
                result.interference = f"{stage}{case.scenario} (case {n + 1} of {len(todo)})"
            yield case, outcome, f
            for later in todo[n + 1:]:
                outcome = run_impl(impl, later, timeout)
                yield later, outcome, judge(later, outcome, profile, features)
            return
    finally:
        if pool is not None:  # the cases after a failure are not run (those running are waited for)
            pool.shutdown(wait=True, cancel_futures=True)


def fixed_outcomes(impl: Impl | Session, todo: list[Case], timeout: float,
              jobs: int) -> tuple[ThreadPoolExecutor | None, Iterator[Outcome]]:
    """The outcomes of ``todo`` in order, up to ``jobs`` at a time for a command (one at a time otherwise), and
    the pool to shut down once they are no longer wanted."""
    if jobs > 1 and not isinstance(impl, Session) and not callable(impl):
        command = impl
        pool = ThreadPoolExecutor(max_workers=jobs)
        return pool, pool.map(lambda c: run_impl(command, c, timeout), todo)
    return None, (run_impl(impl, c, timeout) for c in todo)


def search(impl: Impl | Session, *, features: Iterable[str] | None = None, profile: Profile = CANONICAL,
           max_examples: int = 200, seed: int = 0, timeout: float = 10.0, vectors: bool = True,
           small_scope: int = 0, small_cover: bool = False, fixed_jobs: int = 1) -> SearchResult:
    """Run ``impl`` on the test vectors it can take (unless ``vectors`` is false), then on every small-scope
    case of up to ``small_scope`` events (with ``small_cover``, their covering array), then on up to
    ``max_examples`` generated cases; on a failure, shrink it to a minimal case.  ``fixed_jobs``: a command
    runs that many cases at a time, judged in order (:func:`run_fixed`): the vectors, the small-scope cases,
    and the generated cases, drawn first (:func:`_generated_beside`); a failure among these is searched
    again one at a time, so the verdict is the one of ``fixed_jobs`` 1."""
    feats = DEFAULT_FEATURES if features is None else frozenset(features)
    result = SearchResult()
    if vectors:
        result.failure = run_vectors(impl, feats, profile, timeout, result, jobs=fixed_jobs)
        if result.failure is not None:
            return result
    if small_scope > 0:
        result.failure = run_small_scope(impl, feats, profile, timeout, result, small_scope, small_cover,
                                         jobs=fixed_jobs)
        if result.failure is not None:
            return result
    answers: dict[str, Outcome] = {}  # a case's text -> its passing outcome, from the run beside others
    if (fixed_jobs > 1 and max_examples > 0 and not isinstance(impl, Session) and not callable(impl)
            and _generated_beside(impl, feats, profile, max_examples, seed, timeout, fixed_jobs, result, answers)):
        return result
    failures: list[Failure] = []

    def prop(case: Case) -> None:
        outcome = answers.get(case.to_jsonl()) if answers else None
        if outcome is None:
            outcome = run_impl(impl, case, timeout)
        result.examples += 1
        result.generated += 1
        result.observations.append((case, outcome.got))
        expected = expected_output(case, profile)
        _steer(case, expected)
        f = judge(case, outcome, profile, feats, expected)
        if f is not None:
            if not result.found_by:
                result.found_by = f"search, case {result.generated} ({case.scenario})"
            failures.append(f)
            raise _Found
        result.tags.update(exercised(case, expected))
        result.edges.update(compute_edges(case))

    try:
        _hypothesis(prop, feats, seed, max_examples)
    except (_Found, Flaky):
        pass
    except BaseException as e:  # Hypothesis wraps a flaky failure in an ExceptionGroup on newer versions
        if not failures or isinstance(e, KeyboardInterrupt):
            raise
    if failures:
        best = min(failures, key=lambda f: (len(f.case), len(f.report)))
        result.failure = minimize(impl, best, profile, feats, timeout, result)
    return result


def _steer(case: Case, expected: Results) -> None:
    """What the generated cases' search tells Hypothesis about a case: its scenario, and the rows it joins
    (a target to raise).  From the oracle's answer alone: until a failure, the cases drawn do not depend on
    the implementation's answers."""
    event(case.scenario)
    target(float(len(expected.pairs) + sum(r[1] for r in expected.aggregates)), label="rows joined")


def _hypothesis(body: Callable[[Case], None], feats: frozenset[str], seed: int, max_examples: int) -> None:
    """Call ``body`` on up to ``max_examples`` cases of :func:`oij.testing._cases.cases` drawn from ``seed``
    (each body calls :func:`_steer`); an exception of ``body`` ends the draws and is shrunk, then raised."""
    @hyp_seed(seed)
    @settings(max_examples=max_examples, database=None, deadline=None, derandomize=False,
              phases=[Phase.generate, Phase.target, Phase.shrink], suppress_health_check=list(HealthCheck),
              report_multiple_bugs=False, print_blob=False)
    @given(cases(feats))
    def prop(case: Case) -> None:
        body(case)

    with reporting.with_reporter(lambda _msg: None), same_draws_anywhere():
        prop()


def _generated_beside(impl: Impl, feats: frozenset[str], profile: Profile, max_examples: int, seed: int,
                      timeout: float, jobs: int, result: SearchResult, answers: dict[str, Outcome]) -> bool:
    """The generated cases of :func:`search`, ``jobs`` at a time: drawn first with the oracle's answers only
    (the same cases, in the same order, as the search draws while none fails), then run as a fixed list
    (:func:`run_fixed`).  True: every case passed, counted in ``result``.  False: one failed; ``answers``
    then holds the outcomes of those before it, which the search (run again, one case at a time, to meet
    the failure where ``jobs`` 1 meets it and shrink it) reuses instead of running them again."""
    drawn: list[tuple[Case, Results]] = []

    def draw(case: Case) -> None:
        expected = expected_output(case, profile)
        _steer(case, expected)
        drawn.append((case, expected))

    _hypothesis(draw, feats, seed, max_examples)
    trial = SearchResult(interference=result.interference)
    todo = [case for case, _ in drawn]
    with contextlib.closing(run_fixed(impl, todo, timeout, jobs, profile, feats, trial, "generated ")) as judged:
        for (case, outcome, f), (_, expected) in zip(judged, drawn, strict=False):
            if f is not None:
                break
            answers[case.to_jsonl()] = outcome
            trial.observations.append((case, outcome.got))
            trial.tags.update(exercised(case, expected))
            trial.edges.update(compute_edges(case))
        else:
            result.examples += len(todo)
            result.generated += len(todo)
            result.observations += trial.observations
            result.tags.update(trial.tags)
            result.edges.update(trial.edges)
            result.interference = trial.interference
            return True
    result.interference = trial.interference
    return False


def renumber(q: Query, events: Sequence[Event], encoding: str = "full") -> Case:
    """A case of ``events`` (End appended) with tuple ids 1, 2, ... in arrival order; ids that meet a
    representation edge (``|id| >= 2^31``: see :data:`oij.testing._cases.ID_EDGES`) are kept as they are."""
    out: list[Event] = []
    n = 0
    keep = any(abs(e.id) >= 1 << 31 for e in events if isinstance(e, StreamTuple))
    for e in events:
        if isinstance(e, StreamTuple) and not keep:
            n += 1
            e = e._replace(id=n)
        if not isinstance(e, End):
            out.append(e)
    return Case(q, (*out, End()), "shrunk", encoding)


def minimize(impl: Impl | Session, failure: Failure, profile: Profile, features: frozenset[str], timeout: float,
             result: SearchResult | None = None) -> Failure:
    """Delete events while the case still fails the same way (ids renumbered); a 1-minimal failing case.

    Hypothesis shrinks numbers well but cannot always delete an event of a
    case whose meaning depends on the others; this pass can.  It deletes
    runs of events, halving the run length down to single events (the
    chunks of delta debugging), so that a long stream of a few hundred
    events shrinks in O(n log n) runs when most of it does not matter, and
    at most O(n^2) runs otherwise.
    """
    q = failure.case.query
    events = [e for e in failure.case.events if not isinstance(e, End)]
    size = max(1, len(events) // 2)
    while True:
        i = 0
        while i < len(events):
            rest = events[:i] + events[i + size:]
            cand = renumber(q, rest, failure.case.encoding)
            outcome = run_impl(impl, cand, timeout)
            if result is not None:
                result.examples += 1
                result.observations.append((cand, outcome.got))
            f = judge(cand, outcome, profile, features)
            if f is not None and f.kind == failure.kind:
                events, failure = rest, f
            else:
                i += size
        if size == 1:
            return failure
        size = max(1, size // 2)


def _shard(args: tuple[Sequence[str], frozenset[str], Profile, int, int, float, bool]) -> SearchResult:
    argv, feats, profile, n, seed, timeout, session = args
    if not session:
        return search(argv, features=feats, profile=profile, max_examples=n, seed=seed, timeout=timeout,
                      vectors=False)
    with Session(argv) as s:
        return search(s, features=feats, profile=profile, max_examples=n, seed=seed, timeout=timeout,
                      vectors=False)


def search_parallel(impl: Sequence[str], *, features: Iterable[str] | None = None, profile: Profile = CANONICAL,
                    max_examples: int = 200, seed: int = 0, timeout: float = 10.0, jobs: int = 1,
                    vectors: bool = True, session: bool = False, small_scope: int = 0,
                    small_cover: bool = False) -> SearchResult:
    """:func:`search` split over ``jobs`` processes (seeds seed, seed+1, ...); the smallest failure wins.
    ``session``: each process runs the command as one :class:`Session` (the vectors too, in this process)."""
    feats = DEFAULT_FEATURES if features is None else frozenset(features)
    if jobs <= 1:
        if session:
            with Session(impl) as s:
                return search(s, features=feats, profile=profile, max_examples=max_examples, seed=seed,
                              timeout=timeout, vectors=vectors, small_scope=small_scope, small_cover=small_cover)
        return search(impl, features=feats, profile=profile, max_examples=max_examples, seed=seed, timeout=timeout,
                      vectors=vectors, small_scope=small_scope, small_cover=small_cover)
    out = SearchResult()
    if vectors:  # the fixed corpus first, in this process
        if session:
            with Session(impl) as s:
                out.failure = run_vectors(s, feats, profile, timeout, out)
        else:
            out.failure = run_vectors(impl, feats, profile, timeout, out, jobs=jobs)
    if out.failure is None and small_scope > 0:  # the small-scope stage, in this process
        if session:
            with Session(impl) as s:
                out.failure = run_small_scope(s, feats, profile, timeout, out, small_scope, small_cover)
        else:
            out.failure = run_small_scope(impl, feats, profile, timeout, out, small_scope, small_cover, jobs=jobs)
    if out.failure is not None:
        return out
    shares = [max_examples // jobs + (1 if i < max_examples % jobs else 0) for i in range(jobs)]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        parts = list(pool.map(_shard, [(list(impl), feats, profile, n, seed + i, timeout, session)
                                       for i, n in enumerate(shares) if n > 0]))
    for p in parts:
        out.examples += p.examples
        out.generated += p.generated
        out.tags.update(p.tags)
        out.edges.update(p.edges)
        out.observations += p.observations
    fails = [(p.failure, p.found_by) for p in parts if p.failure is not None]
    if fails:
        out.failure, out.found_by = min(fails, key=lambda ff: (len(ff[0].case), len(ff[0].report)))
    return out


@dataclass
class Fingerprint:
    """The profiles that explain every observed output, and the shortest case that separates the first one
    from the canonical semantics."""

    profiles: list[Profile]
    separating: Case | None

    def text(self) -> str:
        """The fingerprint as ``oij conform`` prints it after a failure."""
        if not self.profiles:
            return ("semantic fingerprint: no named profile explains every output -- a bug, not a semantic choice "
                    f"(checked {', '.join(p for p in PROFILES if p != 'canonical')})")
        best = self.profiles[0]
        others = (f" (also consistent: {', '.join(p.name for p in self.profiles[1:])})"
                  if len(self.profiles) > 1 else "")
        lines = [f"semantic fingerprint: behaves like {best.name}: {best.summary}{others}",
                 f"  differs from canonical in: {', '.join(best.differences())}  [{best.system}]"]
        if self.separating is not None:
            lines.append(f"  shortest case that separates {best.name} from canonical ({len(self.separating)} events):")
            lines.append("    " + self.separating.to_jsonl().rstrip("\n").replace("\n", "\n    "))
        return "\n".join(lines)


def fingerprint(observations: Sequence[tuple[Case, Results | None]], features: Iterable[str]) -> Fingerprint:
    """Which named profiles reproduce every observed output (none, if some run gave no valid output):
    :func:`oij.testing._attribute.attribute_observations` over the cases, with the kit's comparison."""
    from oij.testing._attribute import Observation, attribute_observations, kit_differences

    feats = frozenset(features)
    valid = [(c, g) for c, g in observations if g is not None]
    explaining: list[Profile] = []
    if valid and len(valid) == len(observations):  # a crash or protocol error is explained by no profile
        found = attribute_observations([Observation(c.query, c.events, expected_output(c, CANONICAL), {"impl": g})
                                        for c, g in valid], differences=kit_differences(feats), complete=False)
        explaining = [PROFILES[name] for name in found["impl"].explained_by]
    explaining.sort(key=lambda p: len(p.differences()))
    sep = None
    if explaining:
        p = explaining[0]
        diffs = [c for c, _ in valid
                 if compare(restrict(expected_output(c, p), feats), restrict(expected_output(c, CANONICAL), feats))]
        sep = min(diffs, key=len, default=None)
    return Fingerprint(explaining, sep)


def passes_fresh(cmd: Sequence[str], case: Case, profile: Profile, features: Iterable[str], timeout: float) -> bool:
    """``case`` judged alone, in a fresh :class:`Session` of ``cmd``: passes (a failure found in a session that
    depends on the cases before it)."""
    with Session(cmd) as s:
        return judge(case, s.run(case, timeout), profile, features) is None


def read_case_file(path: str) -> Case:
    """The case in the file ``path`` (``-``: stdin), read and validated by the reader every command shares
    (:class:`oij.io.errors.InputError`, one line naming the line and field, on bad input).  An oij-jsonl file
    keeps its own text in :attr:`Case.raw`, so that the implementation is sent the file's bytes, not the kit's
    encoding of them; a Parquet file (or dataset) has no such text and is sent in the kit's encoding."""
    import io
    import sys

    from oij.io import open_events
    from oij.io.errors import InputError
    from oij.io.jsonlread import read_jsonl

    if path != "-" and (os.path.isdir(path) or path.endswith(".parquet")):
        q, events, fh = open_events(path)
        try:
            return Case(q, tuple(events), "replay")
        finally:
            if fh is not None:
                fh.close()
    if path == "-":
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise InputError(path, 0, "file", e.strerror or str(e)) from None
        name = path
    q, events = read_jsonl(io.BytesIO(data), name)
    case = Case(q, tuple(events), "replay")
    return Case(case.query, case.events, "replay", raw=data.decode("utf-8"))  # valid UTF-8: the reader said so


def judge_file(path: str, impl: Impl | Session, profile: Profile, features: Iterable[str],
               timeout: float) -> tuple[Case, Failure | None]:
    """The case in the file ``path`` (``-``: stdin), run through ``impl`` and judged (``oij conform --replay``).
    A command is sent the file's own bytes after they were validated (:func:`read_case_file`); a Python
    callable gets the events read from them."""
    case = read_case_file(path)
    return case, judge(case, run_impl(impl, case, timeout), profile, features)
