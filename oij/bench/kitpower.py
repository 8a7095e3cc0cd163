"""The conformance kit's power (``oij bench kit-power``), measured with mutants it was not built around.

Method (docs/conformance.rst, "How the kit checks itself", has the table):

* **Mutation tool: cosmic-ray** (``pip install 'oij[mutation]'``).  The test
  here is a *command* (``oij conform``) judged by its exit code, and
  cosmic-ray's unit of work is exactly that: one mutation, one test command.
  mutmut 3 runs a pytest suite in-process through trampolines and cannot take
  a command.  oij uses cosmic-ray's operators and its AST machinery
  (``cosmic_ray.plugins``, ``cosmic_ray.mutating.mutate_code``) to enumerate
  and apply every mutant, and runs them itself on copies in temporary
  directories, ``--jobs`` at a time: cosmic-ray's own ``exec`` rewrites the
  file in the working tree and runs one mutant at a time.
* **Operators**: every core operator of cosmic-ray, except that arithmetic is
  replaced only by arithmetic (``+ - * / // %``, not by bit operators or ``**``) and
  comparisons only by comparisons (not by ``is``, whose result on ints
  depends on CPython's small-int cache), and the two operators that need
  arguments (``VariableInserter``, ``VariableReplacer``).  No mutant is
  picked by hand.
* **Targets**: ``accum`` -- ``tests/impls/accum_oij.py``, an implementation
  written from docs/semantics.rst apart from reference/, run as
  ``python MUTANT``; ``sorted`` and ``bucket`` -- ``tests/impls/sorted_oij.py``
  (sorted indexes per key, bisect range queries, exact Fraction sums) and
  ``tests/impls/bucket_oij.py`` (fixed-width int64 arithmetic, time buckets,
  one timer heap, a 2^-1074 fixed-point sum), written from the docs alone by
  another author, claiming ``all,cond``; ``oracle`` -- ``reference/oracle.py`` itself, run as a
  command through ``tests/impls/oracle_cmd.py`` with a mutated copy of
  ``reference/`` imported first (``--prefer DIR``; the kit, in its own
  process, judges with the real one), claiming ``all,cond``.
* **Verdict** per mutant: ``oij conform`` at its defaults (200 cases, seed 0,
  the test vectors first): exit 1 killed, exit 0 survived; a survivor listed
  in the manifest ``tests/impls/mutants.toml`` with a one-line reason is
  *equivalent* (its entry names the original line, so a stale entry is
  reported, not trusted).

Data flow::

    target file --cosmic-ray operators--> (operator, occurrence) list --mutate_code--> mutant source
      --> temp dir (the file, or a copy of its package) --> oij conform -- CMD  (subprocess, --jobs at once)
      --> exit code, "minimal case of N events", "found by" --> manifest applied --> JSON (+ docs table)

Processes and files: each mutant runs in its own temporary directory, created
and removed by the thread that runs it; ``oij conform`` runs in its own
session and its whole process group is killed on ``--timeout`` or Ctrl-C.
The working tree is only read.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from oij.errors import UsageError
from oij.io.atomic import write_text

ARITH = frozenset({"Add", "Sub", "Mul", "Div", "FloorDiv", "Mod"})
ORDER = frozenset({"Eq", "NotEq", "Lt", "LtE", "Gt", "GtE"})


@dataclass(frozen=True)
class Target:
    """A file to mutate and the command that runs it under ``oij conform``."""

    name: str
    path: str  # relative to the repository
    package: str | None  # copy this package (its folder: path's) into {tmp}, laid out as installed
    # ({tmp}/oij/reference/...), and mutate the file inside the copy
    command: tuple[str, ...]  # {python}, {mutant}, {repo}, {tmp} are filled in
    features: str


TARGETS = {
    "accum": Target("accum", "tests/impls/accum_oij.py", None, ("{python}", "{mutant}"), "all"),
    "oracle": Target("oracle", "reference/oracle.py", "oij.reference",
                     ("{python}", "{repo}/tests/impls/oracle_cmd.py", "--prefer", "{tmp}"), "all,cond"),
    "sorted": Target("sorted", "tests/impls/sorted_oij.py", None, ("{python}", "{mutant}"), "all,cond"),
    "bucket": Target("bucket", "tests/impls/bucket_oij.py", None, ("{python}", "{mutant}"), "all,cond"),
}


@dataclass
class Mutant:
    """One mutant and, once run, its verdict."""

    target: str
    operator: str
    occurrence: int
    line_no: int
    line: str  # the original line, stripped
    mutated: str = ""  # the mutated line, stripped (set when the mutant is made)
    verdict: str = ""  # killed | survived | equivalent | timeout | error
    seconds: float = 0.0
    replay_events: int | None = None
    found_by: str = ""
    kind: str = ""  # mismatch, protocol, crash, hang
    decided: str = ""  # "replay": killed by the judged replay (no real run; no seconds or replay size)
    reason: str = ""  # for equivalent mutants: the manifest's reason
    tail: str = field(default="", repr=False)  # the last lines of the output of a survivor or error


@dataclass
class KitPowerOptions:
    """The options of ``oij bench kit-power`` (its ``--help`` says what each does); the defaults are its own."""

    targets: str = "accum,oracle"
    repo: str = "."
    manifest: str | None = None
    sample: str = "0"
    only: str = ""
    jobs: int = 2
    timeout: float = 600.0
    out: str = "kit-power.json"
    docs: str | None = None
    table: str = "kit-power-table.rst"
    rescore: str | None = None
    rerun: str | None = None
    no_replay: bool = False
    judge_in_replay: bool = False
    deep: str | None = None
    exhaustive: str | None = None
    deep_cases: int = 2000
    deep_out: str = "kit-power-gaps"
    state_bound: bool = False
    state_events: int = 100_000
    no_shapes: bool = False
    restarts: bool = False


def keep_operator(name: str) -> bool:
    """The operator set of the module docstring."""
    m = re.fullmatch(r"core/ReplaceBinaryOperator_(\w+)_(\w+)", name)
    if m:
        return m[1] in ARITH and m[2] in ARITH
    m = re.fullmatch(r"core/ReplaceComparisonOperator_(\w+)_(\w+)", name)
    if m:
        pair = {m[1], m[2]}
        return pair <= ORDER or pair == {"Is", "IsNot"} or pair == {"In", "NotIn"}
    return name not in ("core/VariableInserter", "core/VariableReplacer")


def _cosmic() -> tuple[Any, Any, Any, Any]:
    try:
        import cosmic_ray.plugins as plugins
        from cosmic_ray.ast import Visitor, get_ast
        from cosmic_ray.mutating import mutate_code
    except ImportError:
        raise UsageError("kit-power needs the mutation tool: pip install 'oij[mutation]' (cosmic-ray)") from None
    return plugins, Visitor, get_ast, mutate_code


def enumerate_mutants(target: Target, source: str) -> list[Mutant]:
    """Every mutant of ``source`` under the kept operators, in a fixed order (one parse, one walk per operator; the
    mutated source is made when the mutant runs, by :func:`mutant_source`).  Fresh :class:`Mutant` objects each
    call; the positions are found once per source text in a process (:func:`_positions`)."""
    lines = source.splitlines()
    return [Mutant(target.name, name, occ, row, lines[row - 1].strip()) for name, occ, row in _positions(source)]


@functools.lru_cache(maxsize=4)
def _positions(source: str) -> tuple[tuple[str, int, int], ...]:
    """(operator, occurrence, line number) of every mutant of ``source``, in :func:`enumerate_mutants`' order."""
    plugins, visitor_cls, get_ast, _ = _cosmic()

    class Count(visitor_cls):  # type: ignore[misc, valid-type]  # cosmic-ray ships no type hints
        def __init__(self, op: Any) -> None:
            self.op = op
            self.rows: list[int] = []

        def visit(self, node: Any) -> Any:
            self.rows += [node.start_pos[0]] * len(list(self.op.mutation_positions(node)))
            return node

    out: list[tuple[str, int, int]] = []
    tree = get_ast(source)  # one parse: a counting walk returns every node as it is, so the tree is unchanged
    for name in sorted(plugins.operator_names()):
        if not keep_operator(name):
            continue
        counter = Count(plugins.get_operator(name)())
        counter.walk(tree)
        out += [(name, occ, row) for occ, row in enumerate(counter.rows)]
    return tuple(out)


def mutant_source(m: Mutant, source: str) -> str | None:
    """The source of mutant ``m`` (None if the operator makes no change there); sets ``m.mutated``, the changed
    line."""
    plugins, _, _, mutate_code = _cosmic()
    code: str | None = mutate_code(source, plugins.get_operator(m.operator)(), m.occurrence)
    if code is None or code == source:
        return None
    old, new = source.splitlines(), code.splitlines()
    i = next((k for k, (x, y) in enumerate(zip(old, new, strict=False)) if x != y), min(len(old), len(new)) - 1)
    m.mutated = new[i].strip() if i < len(new) else ""
    return code


EVIDENCE_KINDS = ("unreached", "proven", "searched")
"""How an entry of the manifest was established: no command runs the line; an argument (its ``reason``) that no
input can tell the mutant apart, which a search then failed to refute; or a search alone (which generators, how
many cases).  Each entry's ``evidence`` starts with one of these words."""


def missing_evidence(manifest: dict[tuple[str, str, int], dict[str, Any]]) -> list[str]:
    """The entries whose ``evidence`` is absent or does not start with one of :data:`EVIDENCE_KINDS`."""
    return [f"{k[0]}:{k[1]}:{k[2]}" for k, e in manifest.items()
            if not str(e.get("evidence", "")).startswith(EVIDENCE_KINDS)]


def load_manifest(path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The equivalent mutants: (target, operator, occurrence) -> {line, mutated, reason, evidence}."""
    if not path.exists():
        return {}
    data = tomllib.loads(path.read_text())
    return {(e["target"], e["operator"], int(e["occurrence"])): e for e in data.get("equivalent", [])}


def load_unreached(path: Path, repo: Path) -> dict[str, dict[int, str]]:
    """The code a target's command cannot run (the manifest's ``[[unreached]]`` entries: a ``function`` of the
    target file, or ``lines`` by their text, each with a reason): target -> {line number: reason}."""
    import ast

    if not path.exists():
        return {}
    out: dict[str, dict[int, str]] = {}
    for e in tomllib.loads(path.read_text()).get("unreached", []):
        t = TARGETS.get(e["target"])
        if t is None or not (repo / t.path).is_file():
            continue
        source = (repo / t.path).read_text()
        rows = out.setdefault(t.name, {})
        reason = str(e["reason"])
        if "function" in e:
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == e["function"]:
                    # the body only: the def line itself runs when the class is made
                    for x in range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1):
                        rows[x] = reason
        texts = {str(x).strip() for x in e.get("lines", [])}
        for i, line in enumerate(source.splitlines(), 1):
            if line.strip() in texts:
                rows[i] = reason
    return out


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


def pick_evenly(items: list[Any], n: int) -> list[Any]:
    """``n`` items spread evenly over ``items`` (all of them when n is 0 or too large)."""
    if n <= 0 or n >= len(items):
        return items
    return [items[(i * len(items)) // n] for i in range(n)]


def summarize(mutants: list[Mutant]) -> dict[str, Any]:
    """Counts, seconds per kill and replay sizes of one target's mutants."""
    killed = [m for m in mutants if m.verdict == "killed"]
    secs = [m.seconds for m in killed if m.decided != "replay"]
    sizes = [m.replay_events for m in killed if m.replay_events is not None]
    count = {v: sum(1 for m in mutants if m.verdict == v)
             for v in ("killed", "equivalent", "survived", "timeout", "error")}
    return {
        "mutants": len(mutants), **count,
        "score": round(count["killed"] / max(1, len(mutants) - count["equivalent"]), 4),
        "seconds_per_kill_median": round(statistics.median(secs), 2) if secs else None,
        "seconds_per_kill_max": round(max(secs), 2) if secs else None,
        "kills_over_60s": sum(1 for s in secs if s > 60),
        "replay_events_median": statistics.median(sizes) if sizes else None,
        "replay_events_max": max(sizes) if sizes else None,
        "replays_over_6_events": sum(1 for s in sizes if s > 6),
        "found_by_vectors": sum(1 for m in killed if m.found_by.startswith("vector")),
        "found_by_search": sum(1 for m in killed if m.found_by.startswith("search")),
        "killed_in_replay": sum(1 for m in killed if m.decided == "replay"),
        "survived_unreached": sum(1 for m in mutants if m.verdict == "survived" and m.kind == "unreached"),
    }


def rescore(path: str, manifest: dict[tuple[str, str, int], dict[str, Any]]) -> dict[str, Any]:
    """An earlier result with the manifest applied again: a survivor listed (same line) is equivalent, an
    equivalent one no longer listed is a survivor; kills are kept as measured."""
    import json

    result: dict[str, Any] = json.loads(Path(path).read_text())
    for m in result["mutants"]:
        if m["verdict"] not in ("survived", "equivalent"):
            continue
        if m["verdict"] == "equivalent" and m.get("kind") == "unreached" and str(m.get("reason", "")).startswith(
                "never run by the command"):
            continue  # an [[unreached]] entry's verdict, not the [[equivalent]] table's
        e = manifest.get((m["target"], m["operator"], m["occurrence"]))
        if e is not None and e.get("line", "").strip() == m["line"]:
            m["verdict"], m["reason"] = "equivalent", str(e.get("reason", ""))
        else:
            m["verdict"], m["reason"] = "survived", ""
    result["entries_without_evidence"] = missing_evidence(manifest)
    names = list(result["targets"])
    result["targets"] = {n: summarize([Mutant(**{k: v for k, v in m.items()}) for m in result["mutants"]
                                       if m["target"] == n]) for n in names}
    return result


def rerun(path: str, repo: Path, jobs: int, timeout: float,
          manifest: dict[tuple[str, str, int], dict[str, Any]], replay: bool = True,
          judge: bool = False) -> dict[str, Any]:
    """An earlier result whose unkilled mutants ran again under the current kit (a kit only ever gets
    stronger between the two runs if the change only added cases, so the kills of the first run stand)."""
    import json

    result: dict[str, Any] = json.loads(Path(path).read_text())
    again = [i for i, m in enumerate(result["mutants"]) if m["verdict"] in ("survived", "timeout", "error")]
    print(f"kit-power: running {len(again)} mutants again", flush=True)
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        into = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="oij-kit-power-")))
        recs = ({n: record(TARGETS[n], repo, into, timeout) for n in
                 sorted({result["mutants"][i]["target"] for i in again})} if replay else {})

        def one(i: int) -> Mutant:
            d = result["mutants"][i]
            m = Mutant(d["target"], d["operator"], d["occurrence"], d["line_no"], d["line"])
            return run_mutant(m, TARGETS[m.target], repo, timeout, rec=recs.get(m.target), judge=judge)

        _rerun_all(result, again, one, jobs, manifest)
    result["rerun"] = {"mutants": len(again), "wall_seconds": round(time.perf_counter() - t0, 1),
                       "command": " ".join(sys.argv[1:])}
    result["targets"] = {n: summarize([Mutant(**m) for m in result["mutants"] if m["target"] == n])
                         for n in result["targets"]}
    return result


def _rerun_all(result: dict[str, Any], again: list[int], one: Any, jobs: int,
               manifest: dict[tuple[str, str, int], dict[str, Any]]) -> None:
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for i, m in zip(again, pool.map(one, again), strict=True):
            e = manifest.get((m.target, m.operator, m.occurrence))
            if m.verdict == "survived" and e is not None and e.get("line", "").strip() == m.line:
                m.verdict, m.reason = "equivalent", str(e.get("reason", ""))
            print(f"  again {m.verdict:<10} {m.seconds:7.1f}s  {m.target}:{m.operator}:{m.occurrence}  line "
                  f"{m.line_no}: {m.mutated}", flush=True)
            result["mutants"][i] = asdict(m)


_EXHAUSTIVE_CHILD = """
import os, pickle, sys
import oij
oij.__path__.insert(0, os.path.join(sys.argv[1], "oij"))  # oij.reference from the mutant's copy
import oij.reference
from oij.reference.oracle import run_events
assert oij.reference.__file__.startswith(sys.argv[1]), "the mutant's package was not imported"
with open(sys.argv[2], "rb") as f:
    corpus = pickle.load(f)
for n, (q, events, want) in enumerate(corpus):
    try:
        got = run_events(events, q).canonical()
    except Exception as e:
        print(f"{n}: crash: {type(e).__name__}: {e}")
        sys.exit(1)
    if got != want:
        print(f"{n}: the result differs")
        sys.exit(1)
print(f"{len(corpus)} cases: every result as the oracle's")
"""


def exhaustive_check(path: str, repo: Path, jobs: int, out_dir: Path) -> dict[str, Any]:
    """The oracle's survivors of an earlier result run on every small case of :func:`oij.testing._exhaustive.
    small_cases` (in a child process that imports the mutated ``reference`` and calls ``run_events``, no
    protocol, so 27,000 cases take seconds): a survivor whose results differ is a gap, its case saved to
    ``out_dir``.  Only the ``oracle`` target (the others are scripts of the protocol)."""
    import json
    import pickle

    from oij.reference.oracle import run_events
    from oij.testing._exhaustive import small_cases

    result: dict[str, Any] = json.loads(Path(path).read_text())
    todo = [m for m in result["mutants"] if m["target"] == "oracle" and m["verdict"] in ("survived", "equivalent")]
    out_dir.mkdir(parents=True, exist_ok=True)
    corpus = [(c.query, list(c.events), run_events(c.events, c.query).canonical()) for c in small_cases()]
    found: dict[str, Any] = {"cases": len(corpus), "survivors": len(todo), "told_apart": []}
    with tempfile.TemporaryDirectory(prefix="oij-kit-power-exhaustive-") as d:
        pick = Path(d) / "corpus.pickle"
        pick.write_bytes(pickle.dumps(corpus))
        t = TARGETS["oracle"]

        def one(d_: dict[str, Any]) -> tuple[dict[str, Any], str]:
            m = Mutant(d_["target"], d_["operator"], d_["occurrence"], d_["line_no"], d_["line"])
            code = mutant_source(m, (repo / t.path).read_text())
            with mutant_dir(t, repo, code) as (lib, _, _cmd):
                try:
                    r = subprocess.run([sys.executable, "-c", _EXHAUSTIVE_CHILD, str(lib), str(pick)],
                                       capture_output=True, text=True, check=False, cwd=d, timeout=600)
                except subprocess.TimeoutExpired:
                    return d_, "timeout"
            return d_, "" if r.returncode == 0 else (r.stdout.strip().splitlines() or [r.stderr.strip()])[-1]

        print(f"kit-power: {len(todo)} oracle survivors against {len(corpus)} small cases", flush=True)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for d_, why in pool.map(one, todo):
                if not why:
                    continue
                name = f"{d_['target']}:{d_['operator']}:{d_['occurrence']}"
                entry = {"mutant": name, "line_no": d_["line_no"], "line": d_["line"], "mutated": d_["mutated"],
                         "why": why}
                n = why.split(":", 1)[0]
                if n.isdigit():
                    q, events, _ = corpus[int(n)]
                    from oij.testing._case import Case

                    stem = name.replace("/", "_").replace(":", "_")
                    write_text(str(out_dir / f"{stem}.in.jsonl"), Case(q, tuple(events)).to_jsonl())
                    entry["case"] = str(out_dir / f"{stem}.in.jsonl")
                found["told_apart"].append(entry)
                print(f"  told apart: {name} line {d_['line_no']}: {d_['mutated']}  ({why})", flush=True)
    print(f"kit-power: {len(found['told_apart'])} of {len(todo)} oracle survivors told apart by "
          f"{len(corpus)} small cases")
    return found


def deep_check(path: str, repo: Path, cases: int, jobs: int, timeout: float, out_dir: Path) -> dict[str, Any]:
    """The survivors of an earlier result replayed against ``cases`` more generated cases (seed 1, no vectors):
    one those tell apart is not equivalent, but a gap of the kit; its first differing case and the unmutated
    answer are copied to ``out_dir`` (a vector to write).  Nothing is run through ``oij conform``."""
    import json

    result: dict[str, Any] = json.loads(Path(path).read_text())
    todo = [m for m in result["mutants"] if m["verdict"] == "survived" and m.get("kind") != "unreached"]
    out_dir.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {"cases": cases, "survivors": len(todo), "told_apart": []}
    with tempfile.TemporaryDirectory(prefix="oij-kit-power-deep-") as d:
        recs = {n: record(TARGETS[n], repo, Path(d), max(timeout, 3600.0),
                          ("--no-vectors", "--max-examples", str(cases), "--seed", "1"))
                for n in sorted({m["target"] for m in todo})}
        print(f"kit-power: {len(todo)} survivors against {cases} more cases", flush=True)

        def one(d_: dict[str, Any]) -> tuple[dict[str, Any], str]:
            m = Mutant(d_["target"], d_["operator"], d_["occurrence"], d_["line_no"], d_["line"])
            t = TARGETS[m.target]
            code = mutant_source(m, (repo / t.path).read_text())
            rec = recs[m.target]
            with mutant_dir(t, repo, code) as (_, _, cmd):
                try:
                    r = subprocess.run([sys.executable, "-m", "oij.bench.mutrun", "replay", str(rec.dir), "--",
                                        *cmd], capture_output=True, text=True, check=False,
                                       cwd=tempfile.gettempdir(), timeout=max(60.0, 5 * rec.seconds))
                    return d_, r.stdout.strip().splitlines()[-1] if r.returncode else ""
                except subprocess.TimeoutExpired:
                    return d_, "timeout"

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for d_, why in pool.map(one, todo):
                name = f"{d_['target']}:{d_['operator']}:{d_['occurrence']}"
                if not why:
                    continue
                entry = {"mutant": name, "line_no": d_["line_no"], "line": d_["line"], "mutated": d_["mutated"],
                         "why": why}
                case = why.split(":", 1)[0]
                src = recs[d_["target"]].dir / case
                if src.suffix == ".in" and src.exists():
                    stem = name.replace("/", "_").replace(":", "_")
                    shutil.copy(src, out_dir / f"{stem}.in.jsonl")
                    shutil.copy(src.with_suffix(".out"), out_dir / f"{stem}.expected.jsonl")
                    entry["case"] = str(out_dir / f"{stem}.in.jsonl")
                found["told_apart"].append(entry)
                print(f"  told apart: {name} line {d_['line_no']}: {d_['mutated']}  ({why})", flush=True)
    print(f"kit-power: {len(found['told_apart'])} of {len(todo)} survivors told apart by {cases} more cases")
    return found


def write_result(result: dict[str, Any], args: KitPowerOptions) -> int:
    """Write ``result`` to ``--out`` (and the table to ``--docs``), print its summary; 1 if any mutant was not
    killed or found equivalent, a manifest entry is stale or lacks evidence, or a bug shape survived."""
    import json

    write_text(args.out, json.dumps(result, indent=1) + "\n")
    print(render_text(result))
    if args.docs:
        Path(args.docs).mkdir(parents=True, exist_ok=True)
        write_text(str(Path(args.docs) / args.table), render_rst(result))
    bad = (any(s["survived"] or s["timeout"] or s["error"] for s in result["targets"].values())
           or result["stale_manifest_entries"] or result.get("entries_without_evidence")
           or any(x["verdict"] != "killed" for x in result.get("shapes", [])))
    return 1 if bad else 0


def kit_power(args: KitPowerOptions) -> int:
    """Run ``oij bench kit-power`` with ``args``: progress on stdout, the result to ``args.out`` (and
    ``args.docs``); the exit code."""
    repo = Path(args.repo).resolve()
    mpath = Path(args.manifest) if args.manifest else repo / "tests" / "impls" / "mutants.toml"
    if args.restarts:
        from oij.bench.restartpower import restart_power

        cmd = "oij bench kit-power " + " ".join(sys.argv[3:]) if sys.argv[1:3] == ["bench", "kit-power"] else ""
        return restart_power(repo, args.jobs, args.timeout, args.out, args.docs,
                             args.table if args.table != "kit-power-table.rst" else "kit-power-restarts-table.rst",
                             cmd)
    if args.rescore:
        return write_result(rescore(args.rescore, load_manifest(mpath)), args)
    if args.exhaustive:
        import json

        gaps = exhaustive_check(args.exhaustive, repo, args.jobs, Path(args.deep_out))
        write_text(str(Path(args.deep_out) / "exhaustive.json"), json.dumps(gaps, indent=1) + "\n")
        return 1 if gaps["told_apart"] else 0
    if args.deep:
        import json

        gaps = deep_check(args.deep, repo, args.deep_cases, args.jobs, args.timeout, Path(args.deep_out))
        write_text(str(Path(args.deep_out) / "gaps.json"), json.dumps(gaps, indent=1) + "\n")
        return 1 if gaps["told_apart"] else 0
    if args.rerun:
        return write_result(rerun(args.rerun, repo, args.jobs, args.timeout, load_manifest(mpath), not args.no_replay,
                           args.judge_in_replay),
                      args)
    names = [x.strip() for x in args.targets.split(",") if x.strip()]
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        raise UsageError(f"unknown target {unknown[0]!r}; known: {', '.join(TARGETS)}")
    try:
        sample = ({n: int(args.sample) for n in names} if "=" not in args.sample else
                  {k.strip(): int(v) for k, v in (x.split("=", 1) for x in args.sample.split(",") if x.strip())})
    except ValueError:
        raise UsageError(f"--sample: a number or TARGET=N,...; got {args.sample!r}") from None
    if args.jobs < 1 or args.timeout <= 0 or any(v < 0 for v in sample.values()):
        raise UsageError("--jobs must be >= 1, --timeout > 0, --sample >= 0")
    for n in names:
        if not (repo / TARGETS[n].path).is_file():
            raise UsageError(f"{repo / TARGETS[n].path}: not found (run from a checkout of oij, or give --repo)")
    manifest_path = Path(args.manifest) if args.manifest else repo / "tests" / "impls" / "mutants.toml"
    manifest = load_manifest(manifest_path)
    only = {tuple(x.split(":")) for x in args.only.split(",") if x.strip()}
    work: list[tuple[Mutant, Target]] = []
    stale: list[str] = []
    for n in names:
        t = TARGETS[n]
        found = enumerate_mutants(t, (repo / t.path).read_text())
        if only:
            found = [m for m in found if (m.target, m.operator, str(m.occurrence)) in only]
        for m in pick_evenly(found, sample.get(n, 0)):
            e = manifest.get((m.target, m.operator, m.occurrence))
            if e is not None and e.get("line", "").strip() != m.line:
                stale.append(f"{m.target}:{m.operator}:{m.occurrence} (manifest line {e.get('line')!r}, "
                             f"now {m.line!r})")
            work.append((m, t))
    print(f"kit-power: {len(work)} mutants of {', '.join(names)}; {args.jobs} at a time", flush=True)
    t0 = time.perf_counter()
    done: list[Mutant] = []
    into = Path(tempfile.mkdtemp(prefix="oij-kit-power-"))
    try:
        recs = {} if args.no_replay else {n: record(TARGETS[n], repo, into, args.timeout) for n in names}
        for n, r in recs.items():
            print(f"kit-power: {n}: recorded {len(list(r.dir.glob('*.in')))} cases of the unmutated run; they reach "
                  f"{len(r.ran)} lines of {TARGETS[n].path}", flush=True)
        return _run_work(args, repo, names, sample, work, stale, manifest, recs, done, t0)
    finally:
        shutil.rmtree(into, ignore_errors=True)


def _run_work(args: KitPowerOptions, repo: Path, names: list[str], sample: dict[str, int],
              work: list[tuple[Mutant, Target]], stale: list[str],
              manifest: dict[tuple[str, str, int], dict[str, Any]], recs: dict[str, Recording],
              done: list[Mutant], t0: float) -> int:
    unreached = load_unreached(Path(args.manifest) if args.manifest else repo / "tests" / "impls" / "mutants.toml",
                               repo)
    for n, rows in unreached.items():
        r = recs.get(n)
        ran = sorted(x for x in rows if r is not None and x in r.ran)
        if ran:  # the entry says the command cannot run these lines, and the recorded run did
            stale.append(f"{n}: [[unreached]] lines {ran[:5]} ran in the recorded run ({rows[ran[0]]})")
    from oij.bench.host import machine

    def one(item: tuple[Mutant, Target]) -> Mutant:
        m = run_mutant(item[0], item[1], repo, args.timeout, rec=recs.get(item[0].target),
                       judge=args.judge_in_replay)
        if args.state_bound and m.verdict == "survived":
            state_bound(m, item[1], repo, args.state_events, STATE_TIMEOUT)
        return m

    def report(m: Mutant) -> None:
        how = f" ({m.kind})" if m.verdict == "survived" and m.kind else ""
        print(f"  [{len(done):>4}/{len(work)}] {m.verdict:<8} {m.seconds:7.1f}s  {m.target}:{m.operator}:"
              f"{m.occurrence}  line {m.line_no}: {m.mutated}{how}", flush=True)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for m in pool.map(one, work):
            if m.verdict == "no-op":  # cosmic-ray counted a position it then could not change
                continue
            e = manifest.get((m.target, m.operator, m.occurrence))
            if m.verdict == "survived" and e is not None and e.get("line", "").strip() == m.line:
                m.verdict, m.reason = "equivalent", str(e.get("reason", ""))
            elif m.kind == "unreached" and m.line_no in unreached.get(m.target, {}):
                m.verdict, m.reason = "equivalent", "never run by the command: " + unreached[m.target][m.line_no]
            done.append(m)
            report(m)
    shapes = [] if args.no_shapes or args.only.strip() else run_shapes(repo, args.timeout)
    listed = {(m.target, m.operator, m.occurrence) for m in done}
    unused = [f"{k[0]}:{k[1]}:{k[2]}" for k in manifest if k in listed and
              next(m for m in done if (m.target, m.operator, m.occurrence) == k).verdict == "killed"]
    from oij.bench.results import capture

    cmd = "oij bench kit-power " + " ".join(sys.argv[3:]) if sys.argv[1:3] == ["bench", "kit-power"] else ""
    result: dict[str, Any] = {
        "command": cmd,
        "provenance": capture(cmd, repo),  # the commit of the targets (--repo); the date is the run's end
        "machine": machine(),
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "sample": {n: sample.get(n, 0) for n in names},
        "targets": {n: summarize([m for m in done if m.target == n]) for n in names},
        "shapes": shapes,
        "stale_manifest_entries": stale,
        "entries_without_evidence": missing_evidence(manifest),
        "manifest_entries_killed": unused,
        "mutants": [asdict(m) for m in done],
    }
    return write_result(result, args)


def render_text(result: dict[str, Any]) -> str:
    """The summary table and the survivors, as plain text."""
    lines = [f"{'target':<8} {'mutants':>7} {'killed':>6} {'equiv':>5} {'surv':>4} {'t/o':>3} {'err':>3} "
             f"{'score':>6} {'s/kill med':>10} {'max':>6} {'replay med':>10} {'max':>4}"]
    for n, s in result["targets"].items():
        lines.append(f"{n:<8} {s['mutants']:>7} {s['killed']:>6} {s['equivalent']:>5} {s['survived']:>4} "
                     f"{s['timeout']:>3} {s['error']:>3} {s['score']:>6.3f} {_num(s['seconds_per_kill_median']):>10} "
                     f"{_num(s['seconds_per_kill_max']):>6} {_num(s['replay_events_median']):>10} "
                     f"{_num(s['replay_events_max']):>4}")
    for m in result["mutants"]:
        if m["verdict"] in ("survived", "timeout", "error"):
            lines.append(f"{m['verdict'].upper()}: {m['target']}:{m['operator']}:{m['occurrence']} line "
                         f"{m['line_no']}: {m['line']}  ->  {m['mutated']}")
    lines += [f"shape {x['bug']}: {x['verdict']} in {x['seconds']:.1f} s, replay {x['replay_events']} events, "
              f"found by {x['found_by']}" for x in result.get("shapes", [])]
    lines += [f"STALE manifest entry: {s}" for s in result["stale_manifest_entries"]]
    lines += [f"manifest entry WITHOUT EVIDENCE: {s}" for s in result.get("entries_without_evidence", [])]
    return "\n".join(lines)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def _rst_text(s: str) -> str:
    """Plain text safe in reStructuredText (no substitutions, emphasis or roles)."""
    return re.sub(r"([|*`_\\])", r"\\\1", s)


def render_rst(result: dict[str, Any]) -> str:
    """``kit-power-table.rst``: the table, then the equivalent mutants and any survivor, for the docs."""
    m = result["machine"]
    rst = [f".. Generated by {result['command'] or 'oij bench kit-power'} --docs.", "",
           f"Measured on {m['cores']} cores ({m['cpu'] or 'unknown CPU'}), load average at the start "
           f"{m['load_avg'][0]:.2f}; {result['wall_seconds']:,.0f} s of wall time"
           + "".join(f"; ``{n}``: an evenly spread sample of {k} mutants" for n, k in result["sample"].items() if k)
           + (f"; then the {result['rerun']['mutants']} mutants it did not kill ran again under the kit as "
              f"committed ({result['rerun']['wall_seconds']:,.0f} s)" if result.get("rerun") else "")
           + ".", "",
           ".. list-table:: mutants of each target under ``oij conform`` at its defaults", "   :header-rows: 1", "",
           "   * - target", "     - mutants", "     - killed", "     - equivalent", "     - survived",
           "     - score", "     - s per kill (median / max)", "     - replay events (median / max)",
           "     - found by vectors / search"]
    for n, s in result["targets"].items():
        judged = s.get("killed_in_replay", 0)
        killed = f"{s['killed']} ({judged} judged in the replay)" if judged else f"{s['killed']}"
        rst += [f"   * - ``{n}``", f"     - {s['mutants']}", f"     - {killed}", f"     - {s['equivalent']}",
                f"     - {s['survived'] + s['timeout'] + s['error']}", f"     - {s['score']:.3f}",
                f"     - {_num(s['seconds_per_kill_median'])} / {_num(s['seconds_per_kill_max'])}",
                f"     - {_num(s['replay_events_median'])} / {_num(s['replay_events_max'])}",
                f"     - {s['found_by_vectors']} / {s['found_by_search']}"]
    rst.append("")
    if result.get("shapes"):
        rst += [".. list-table:: the eight bug shapes of ``tests/impls/accum_bugs.py`` under ``oij conform`` at its "
                "defaults", "   :header-rows: 1", "", "   * - bug", "     - caught", "     - seconds",
                "     - replay events", "     - found by"]
        for x in result["shapes"]:
            caught = "yes" if x["verdict"] == "killed" else "**no**"
            rst += [f"   * - ``{x['bug']}``: {_rst_text(x['description'])}", f"     - {caught}",
                    f"     - {x['seconds']:.1f}", f"     - {_num(x['replay_events'])}", f"     - {x['found_by']}"]
        rst.append("")
    odd = [x for x in result["mutants"] if x["verdict"] in ("survived", "timeout", "error")]
    rst += ["Survivors: " + ("none." if not odd else ""), ""]
    rst += [f"* ``{x['target']}`` line {x['line_no']} ({x['verdict']}): ``{x['line']}`` to ``{x['mutated']}``"
            for x in odd]
    eq = [x for x in result["mutants"] if x["verdict"] == "equivalent"]
    if eq:
        rst += ["", "Equivalent mutants (``tests/impls/mutants.toml``):", ""]
        rst += [f"* ``{x['target']}`` line {x['line_no']}: ``{x['line']}`` to ``{x['mutated']}`` -- "
                f"{_rst_text(x['reason'])}"
                for x in eq]
    return "\n".join(rst) + "\n"
