"""The parts of ``oij bench kit-power`` (:mod:`oij.bench.kitpower`) that run as their own processes: record a
kit run, replay it in-process.

Why: ``oij conform`` starts the implementation once per case (about 480
processes, 40-50 s for a command that survives), and most of a mutation run's
time goes to the survivors.  But ``oij conform`` at its defaults is
deterministic (seed 0): as long as an implementation answers every case as
the unmutated one did, the kit sends the same next case.  So:

* ``record DIR -- CMD ...``: the wrapper ``oij conform`` runs instead of CMD
  when the unmutated target is measured; it stores each case (stdin) and
  CMD's answer (stdout) as ``DIR/NNNNN.in`` / ``.out`` and passes the answer
  through.
* ``replay DIR -- python SCRIPT ARGS``: runs SCRIPT in this one process once
  per recorded case (``runpy``, stdin and stdout swapped), and exits 0 iff
  every answer is byte-identical to the recorded one, else 1 naming the first
  case that differs.
* ``replay --diffs=OUT [--case-timeout=S]``: the same, but an answer that
  differs is written to ``OUT/NNNNN.got`` and the replay goes on, up to
  three differences; a crash is written to ``OUT/NNNNN.crash`` and a case
  that runs longer than S seconds (``SIGALRM``) to ``OUT/NNNNN.hang``, and
  the replay stops there.  This process cannot judge them: it has imported
  the mutant's ``reference`` package, and the kit's judge imports the real
  one.  kit-power judges them in its own process (``run_mutant``).

A mutant whose replay exits 0 gets exactly the verdict ``oij conform`` would
give it (survived), without 480 process starts; for any other outcome,
kit-power either judges the differences as ``oij conform`` would at that case
(``--judge-in-replay``) or runs the real ``oij conform``.

Data flow::

    oij conform --(case on stdin)--> record --> CMD --(answer)--> record --> DIR/NNNNN.{in,out} + stdout
    replay: DIR/NNNNN.in --> SCRIPT.main (same process) --> answer == DIR/NNNNN.out ?

Processes and files: ``record`` runs CMD as a child and waits for it; it
writes only into DIR (which kit-power creates in a temporary directory and
removes).  ``replay`` starts no process.
"""

from __future__ import annotations

import io
import itertools
import os
import runpy
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any


def record(out_dir: str, cmd: list[str]) -> int:
    """Run CMD on this process's stdin, store the case and the answer, pass the answer through."""
    data = sys.stdin.buffer.read()
    p = subprocess.run(cmd, input=data, stdout=subprocess.PIPE, check=False)
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    for n in itertools.count():
        try:  # a unique number even if cases run concurrently
            fd = os.open(d / f"{n:05d}.in", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        (d / f"{n:05d}.out").write_bytes(p.stdout)
        break
    sys.stdout.buffer.write(p.stdout)
    return p.returncode


class _Hang(BaseException):
    """Raised by SIGALRM in a case that runs too long (a BaseException: the script's ``except Exception``
    must not swallow it)."""


MAX_DIFFS = 3  # differing answers written before a ``--diffs`` replay stops


def replay(in_dir: str, script: str, args: list[str], lines_of: str | None = None, diffs: str | None = None,
           case_timeout: float = 0.0) -> int:
    """Run ``script`` in-process on every recorded case; 0 iff every answer matches byte for byte.

    ``lines_of=FILE``: also write to ``in_dir/lines`` the line numbers of FILE that ran (kit-power's
    coverage: a mutant on a line no case runs cannot change an answer).  ``diffs=OUT``: write the differing
    answers, a crash or a hang to OUT (see the module docstring) and go on after a differing answer."""
    cases = sorted(Path(in_dir).glob("*.in"))
    sys.argv = [script, *args]
    ran: set[int] = set()
    if lines_of is not None:
        _trace_lines(os.path.realpath(lines_of), ran)
    if case_timeout > 0:
        def alarm(signum: int, frame: Any) -> None:
            raise _Hang

        signal.signal(signal.SIGALRM, alarm)
    found = 0
    for c in cases:
        expect = c.with_suffix(".out").read_bytes()
        stdin = io.TextIOWrapper(io.BytesIO(c.read_bytes()), encoding="utf-8")
        buf = io.BytesIO()
        stdout = io.TextIOWrapper(buf, encoding="utf-8", newline="")
        old_in, old_out = sys.stdin, sys.stdout
        sys.stdin, sys.stdout = stdin, stdout
        stop = ""
        try:
            if case_timeout > 0:
                signal.setitimer(signal.ITIMER_REAL, case_timeout)
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as e:
                if e.code not in (None, 0):
                    stop = f"crash: exit code {e.code}"
            stdout.flush()
        except _Hang:
            stop = f"hang: more than {case_timeout:g} s"
        except Exception as e:  # a crash is a difference
            stop = f"crash: {type(e).__name__}: {e}"
        finally:
            if case_timeout > 0:
                signal.setitimer(signal.ITIMER_REAL, 0)
            sys.stdin, sys.stdout = old_in, old_out
        if stop:
            print(f"{c.name}: {stop}")
            if diffs is not None:
                Path(diffs, c.stem + (".hang" if stop.startswith("hang") else ".crash")).write_text(stop + "\n")
            return 1
        if c is cases[0] and not _prefers_took(args):
            print("replay: the mutant's package was not the one imported (--prefer)")
            return 2
        if buf.getvalue() != expect:
            print(f"{c.name}: the answer differs")
            if diffs is None:
                return 1
            Path(diffs, c.stem + ".got").write_bytes(buf.getvalue())
            found += 1
            if found >= MAX_DIFFS:
                return 1
    if found:
        return 1
    if lines_of is not None:
        sys.settrace(None)
        (Path(in_dir) / "lines").write_text(" ".join(map(str, sorted(ran))) + "\n")
    print(f"{len(cases)} cases: every answer as recorded")
    return 0


def _trace_lines(path: str, ran: set[int]) -> None:
    """Record in ``ran`` every line of ``path`` that runs from now on (``sys.settrace``; this process only)."""
    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            ran.add(frame.f_lineno)
        return local

    seen: dict[str, bool] = {}  # a code object's file name -> whether it is ``path`` (one realpath per name)

    def call(frame: Any, event: str, arg: Any) -> Any:
        name = frame.f_code.co_filename
        here = seen.get(name)
        if here is None:
            here = seen[name] = os.path.realpath(name) == path
        if here:
            ran.add(frame.f_lineno)
            return local
        return None

    sys.settrace(call)


def _prefers_took(args: list[str]) -> bool:
    """After ``SCRIPT --prefer D``: every package of D that was imported came from D (else the replay would
    judge the unmutated code)."""
    if args[:1] != ["--prefer"] or len(args) < 2:
        return True
    d = Path(args[1]).resolve()
    for init in d.rglob("__init__.py"):  # each package of D, by its dotted name (D/oij/reference: oij.reference)
        mod = sys.modules.get(".".join(init.parent.relative_to(d).parts))
        if mod is not None and not Path(str(mod.__file__)).resolve().is_relative_to(d):
            return False
    return True


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "record" and argv[2] == "--":
        return record(argv[1], argv[3:])
    opts: dict[str, str] = {}
    while len(argv) >= 2 and argv[0] == "replay" and argv[1].startswith("--") and "=" in argv[1]:
        k, v = argv.pop(1)[2:].split("=", 1)
        opts[k] = v
    if len(argv) >= 5 and argv[0] == "replay" and argv[2] == "--" and set(opts) <= {"lines", "diffs", "case-timeout"}:
        return replay(argv[1], argv[4], argv[5:], opts.get("lines"), opts.get("diffs"),
                      float(opts.get("case-timeout", "0")))  # argv[3] is the interpreter of CMD: this one runs it
    print("usage: python -m oij.bench.mutrun record DIR -- CMD... | "
          "replay [--lines=FILE] [--diffs=OUT] [--case-timeout=S] DIR -- python SCRIPT ARGS...",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
