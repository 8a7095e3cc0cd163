"""Running ``oij conform`` against one mutant: the unmutated target's recording, the mutant's temporary copy, its
replay, judging the replay, the real run, the long cases of ``--state-bound``, and the bug shapes."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oij.bench.kitpower.mutants import Mutant, Target, mutant_source
from oij.errors import UsageError

_MIN = re.compile(r"minimal case of (\d+) events")
_FOUND = re.compile(r"^found by: (.*)$", re.M)
_KIND = re.compile(r"semantics \((\w+);")


@dataclass
class Recording:
    """The unmutated target's run under ``oij conform`` at its defaults: its cases and answers (``dir``), the
    lines of the target file they ran, and each line's statement (first, last line)."""

    dir: Path
    ran: set[int]
    statements: dict[int, tuple[int, int]]
    seconds: float  # the unmutated replay's time; a mutant's replay gets 5x that (20 s at least)
    report: str = ""  # what oij conform printed for the recorded run (its verdict, features, situations, edges)

    def reaches(self, line: int) -> bool:
        """True iff some line of the innermost statement holding ``line`` ran (a mutant anywhere else cannot
        change an answer: the kit's run with it is the recorded one)."""
        first, last = self.statements.get(line, (line, line))
        return any(x in self.ran for x in range(first, last + 1))


def record(target: Target, repo: Path, into: Path, timeout: float, extra: tuple[str, ...] = ()) -> Recording:
    """Run the unmutated target under ``oij conform`` at its defaults (plus ``extra`` options) through
    ``mutrun record``, then replay it once with line tracing (see oij/bench/mutrun.py).  The recorder runs once
    per case, as a script on the standard library alone (``-I -S``: no site, no ``oij`` package import; measured:
    31 ms of CPU a start with its child against 53 ms for ``python -m oij.bench.mutrun``)."""
    import ast

    from oij.bench import mutrun as _mutrun

    rec = into / f"rec-{target.name}{'-deep' if extra else ''}"
    m = Mutant(target.name, "none", 0, 0, "")
    wrapped = Target(target.name, target.path, target.package,
                     (sys.executable, "-I", "-S", _mutrun.__file__, "record", str(rec), "--", *target.command),
                     target.features)
    report: list[str] = []
    run_mutant(m, wrapped, repo, timeout, source=False, extra=extra, output=report)
    if m.verdict != "survived":
        raise UsageError(f"kit-power: the unmutated {target.name} does not conform ({m.verdict}): {m.tail}")
    t0 = time.perf_counter()
    with mutant_dir(target, repo, None) as (_, file, cmd):
        p = subprocess.run([sys.executable, "-m", "oij.bench.mutrun", "replay", f"--lines={file}", str(rec),
                            "--", *cmd], capture_output=True, text=True, timeout=timeout, check=False)
    if p.returncode != 0:
        raise UsageError(f"kit-power: replaying the unmutated {target.name} failed: {p.stdout}{p.stderr}")
    statements: dict[int, tuple[int, int]] = {}
    for node in ast.walk(ast.parse((repo / target.path).read_text())):
        if isinstance(node, ast.stmt):
            first, last = node.lineno, node.end_lineno or node.lineno
            for x in range(first, last + 1):
                old = statements.get(x)
                if old is None or last - first < old[1] - old[0]:
                    statements[x] = (first, last)
    ran = {int(x) for x in (rec / "lines").read_text().split()}
    return Recording(rec, ran, statements, time.perf_counter() - t0, "".join(report))


@contextlib.contextmanager
def mutant_dir(target: Target, repo: Path, code: str | None) -> Iterator[tuple[Path, Path, list[str]]]:
    """A temporary directory holding the target (mutated if ``code``): (lib folder, target file, command)."""
    with tempfile.TemporaryDirectory(prefix="oij-mutant-") as d:
        lib = Path(d) / "lib"  # not the working directory: ``python -m oij.cli`` puts that first on sys.path
        if target.package is not None:
            copy = lib.joinpath(*target.package.split("."))
            shutil.copytree(repo / Path(target.path).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
            mutant_file = copy / Path(target.path).name  # the command imports it (--prefer {tmp}); the kit's
            # judge, in ``oij conform``'s own process, never sees it
        else:
            lib.mkdir()
            mutant_file = lib / Path(target.path).name
            shutil.copy(repo / target.path, mutant_file)
        if code is not None:
            mutant_file.write_text(code)
        cmd = [x.format(python=sys.executable, mutant=mutant_file, repo=repo, tmp=lib) for x in target.command]
        yield lib, mutant_file, cmd


def run_mutant(m: Mutant, target: Target, repo: Path, timeout: float, source: bool = True,
               rec: Recording | None = None, extra: tuple[str, ...] = (), judge: bool = False,
               output: list[str] | None = None) -> Mutant:
    """Run ``oij conform`` at its defaults on one mutant (in a temporary directory) and record its verdict.
    ``source=False``: run ``target.command`` as it is (no mutant).  With ``rec``: a mutant on a line the
    recorded run never reached survives without a run ("unreached"), and one whose in-process replay of the
    recorded cases gives every recorded answer survives without the 480 process starts of a real run
    ("replayed"); any other mutant gets the real run, unless ``judge``: then the replay's differences are
    judged as ``oij conform`` judges that case (:func:`judge_replay`), and only an undecided mutant gets the
    real run.  ``output``: the real run's whole output is appended to it."""
    code = mutant_source(m, (repo / target.path).read_text()) if source else ""
    if code is None:
        m.verdict = "no-op"
        return m
    if rec is not None and source:
        if not rec.reaches(m.line_no):
            m.verdict, m.kind = "survived", "unreached"
            return m
        t0 = time.perf_counter()
        with mutant_dir(target, repo, code) as (lib, _, cmd):
            diffs = lib.parent / "diffs"
            diffs.mkdir()
            opts = [f"--diffs={diffs}", f"--case-timeout={CASE_TIMEOUT:g}"] if judge else []
            try:
                r = subprocess.run([sys.executable, "-m", "oij.bench.mutrun", "replay", *opts, str(rec.dir),
                                    "--", *cmd], capture_output=True, text=True, check=False,
                                   cwd=tempfile.gettempdir(),
                                   timeout=timeout if judge else min(timeout, max(20.0, 5 * rec.seconds)))
                same = r.returncode == 0
                if judge and r.returncode == 1 and judge_replay(m, rec, diffs, cmd, target.features):
                    m.seconds = round(time.perf_counter() - t0, 3)
                    return m
            except subprocess.TimeoutExpired:
                same = False
        if same:
            m.verdict, m.kind = "survived", "replayed"
            m.seconds = round(time.perf_counter() - t0, 3)
            return m
    with mutant_dir(target, repo, code if source else None) as (lib, _, cmd):
        tmp = lib.parent
        env = dict(os.environ)
        # -j 1: the vectors and small-scope cases one at a time too (two at a time by default), so that a
        # recording (mutrun record numbers the cases as they come) holds them in the order the kit judges them
        argv = [sys.executable, "-m", "oij.cli", "conform", "-j", "1", "--features", target.features,
                "--replay-out", str(tmp / "fail.jsonl"), *extra, "--", *cmd]
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp, env=env,
                             start_new_session=True, text=True)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            out = ""
            m.verdict = "timeout"
        finally:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        m.seconds = round(time.perf_counter() - t0, 3)
    if output is not None:
        output.append(out)
    if m.verdict == "timeout":
        return m
    if p.returncode == 1:
        m.verdict = "killed"
        mm, fb, kd = _MIN.search(out), _FOUND.search(out), _KIND.search(out)
        m.replay_events = int(mm.group(1)) if mm else None
        m.found_by = fb.group(1) if fb else ""
        m.kind = kd.group(1) if kd else ""
    elif p.returncode == 0:
        m.verdict = "survived"
        m.tail = "\n".join(out.splitlines()[:2])
    else:
        m.verdict = "error"
        m.tail = "\n".join(out.strip().splitlines()[-5:])
    return m


def state_bound(m: Mutant, target: Target, repo: Path, events: int, timeout: float) -> None:
    """Run a surviving mutant on the long cases of ``oij conform --state-bound`` (:func:`oij.testing._state.
    check_state`); killed there if its state grows with the stream or its output on them is wrong."""
    from oij.testing._case import parse_features
    from oij.testing._state import check_state

    code = mutant_source(m, (repo / target.path).read_text())
    t0 = time.perf_counter()
    with mutant_dir(target, repo, code) as (_, _, cmd):
        report = check_state(cmd, parse_features(target.features), events=events, timeout=timeout)
    m.seconds = round(m.seconds + time.perf_counter() - t0, 3)
    if not report.ok:
        bad = next(r for r in report.runs if r.problem is not None)
        m.verdict, m.found_by, m.decided = "killed", f"state-bound {bad.name}", "state-bound"
        m.kind = "state" if bad.problem and "grows" in bad.problem else (bad.problem or "").split(":", 1)[0]
        m.tail = bad.line().strip()


STATE_TIMEOUT = 120.0
"""Seconds a survivor gets per long case of ``--state-bound`` (a correct target takes 1-5 s on this machine; a
mutant that holds every tuple and walks it on every move of W is quadratic and hangs)."""


CASE_TIMEOUT = 10.0  # oij conform's --timeout default: a case that runs longer in-process hangs as a command too


def judge_replay(m: Mutant, rec: Recording, diffs: Path, cmd: list[str], features: str) -> bool:
    """Decide a mutant from its replay's differences (``_mutrun replay --diffs``), as ``oij conform`` at its
    defaults would: it sends the recorded cases in order, the same ones as long as every answer passes, so the
    first differing answer that its judge rejects is where the real run fails, and the mutant is killed there.

    Each rejected answer is confirmed by running that case once through the mutant as a fresh command
    (``run_command``, the kit's own runner and timeout), so that no state the replay's one process carries
    between cases can decide a kill.  Sets ``m`` (killed, kind, found_by, decided="replay") and returns True;
    False when undecided (every differing answer passed): the real run decides."""
    from oij.spec.profiles import CANONICAL
    from oij.testing._case import Case, case_features, parse_features
    from oij.testing._protocol import ProtocolError, parse_output
    from oij.testing._runner import Outcome, judge, run_command
    from oij.testing._vectors import interleaved

    feats = parse_features(features)
    names = sorted(rec.dir.glob("*.in"))
    vectors = [f"vector {v.feature}/{v.name}" for v in interleaved() if case_features(v.case) <= feats]
    found = sorted(diffs.iterdir())
    for f in found:
        i = int(f.stem)
        case = Case.from_jsonl(names[i].read_text(), str(names[i]))
        if f.suffix == ".got":
            try:
                outcome = Outcome(parse_output(f.read_bytes()))
            except ProtocolError as e:
                outcome = Outcome(None, f"protocol error: {e}")
            if judge(case, outcome, CANONICAL, feats) is None:
                continue  # a different answer the kit accepts (another order, a float's last digit)
        fresh = judge(case, run_command(cmd, case.to_jsonl(), CASE_TIMEOUT), CANONICAL, feats)
        if fresh is None:
            return False  # the replay and a fresh run disagree: let the real run decide
        m.verdict, m.kind, m.decided = "killed", fresh.kind, "replay"
        m.found_by = vectors[i] if i < len(vectors) else f"search, case {i - len(vectors) + 1}"
        return True
    return False


SHAPES = "tests/impls/accum_bugs.py"


def run_shapes(repo: Path, timeout: float) -> list[dict[str, Any]]:
    """``oij conform`` at its defaults on each bug shape of accum_bugs.py, one after the other (timed alone)."""
    listing = subprocess.run([sys.executable, str(repo / SHAPES), "--list"], capture_output=True, text=True,
                             check=True, timeout=60).stdout
    out = []
    for row in listing.splitlines():
        name, doc = row.split("\t", 1)
        m = Mutant("shapes", name, 0, 0, doc)
        shape = Target("shapes", SHAPES, None, ("{python}", str(repo / SHAPES), name), "all")
        run_mutant(m, shape, repo, timeout, source=False)
        print(f"  shape {name:<28} {m.verdict:<8} {m.seconds:6.1f}s  replay {m.replay_events}  found by: {m.found_by}",
              flush=True)
        out.append({"bug": name, "description": doc, "verdict": m.verdict, "seconds": m.seconds,
                    "replay_events": m.replay_events, "found_by": m.found_by})
    return out
