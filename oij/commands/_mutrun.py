"""Helpers of ``oij bench kit-power`` that run as their own processes: record a kit run, replay it in-process.

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

A mutant whose replay exits 0 gets exactly the verdict ``oij conform`` would
give it (survived), without 480 process starts; any other outcome (a
difference, a crash, a hang) is decided by the real ``oij conform`` run.

Data flow::

    oij conform --(case on stdin)--> record --> CMD --(answer)--> record --> DIR/NNNNN.{in,out} + stdout
    replay: DIR/NNNNN.in --> SCRIPT.main (same process) --> answer == DIR/NNNNN.out ?

Processes and files: ``record`` runs CMD as a child and waits for it; it
writes only into DIR (which kit-power creates in a temporary directory and
removes).  ``replay`` starts no process.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import runpy
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


def replay(in_dir: str, script: str, args: list[str], lines_of: str | None = None) -> int:
    """Run ``script`` in-process on every recorded case; 0 iff every answer matches byte for byte.

    ``lines_of=FILE``: also write to ``in_dir/lines`` the line numbers of FILE that ran (kit-power's
    coverage: a mutant on a line no case runs cannot change an answer)."""
    cases = sorted(Path(in_dir).glob("*.in"))
    sys.argv = [script, *args]
    ran: set[int] = set()
    if lines_of is not None:
        _trace_lines(os.path.realpath(lines_of), ran)
    for c in cases:
        expect = c.with_suffix(".out").read_bytes()
        stdin = io.TextIOWrapper(io.BytesIO(c.read_bytes()), encoding="utf-8")
        buf = io.BytesIO()
        stdout = io.TextIOWrapper(buf, encoding="utf-8", newline="")
        old_in, old_out = sys.stdin, sys.stdout
        sys.stdin, sys.stdout = stdin, stdout
        try:
            with contextlib.suppress(SystemExit):
                runpy.run_path(script, run_name="__main__")
            stdout.flush()
        except Exception as e:  # a crash is a difference (the real run decides what kind)
            sys.stdin, sys.stdout = old_in, old_out
            print(f"{c.name}: {type(e).__name__}: {e}")
            return 1
        finally:
            sys.stdin, sys.stdout = old_in, old_out
        if c is cases[0] and not _prefers_took(args):
            print("replay: the mutant's package was not the one imported (--prefer)")
            return 2
        if buf.getvalue() != expect:
            print(f"{c.name}: the answer differs")
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

    def call(frame: Any, event: str, arg: Any) -> Any:
        if os.path.realpath(frame.f_code.co_filename) == path:
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
    for pkg in (x.name for x in d.iterdir() if x.is_dir()):
        mod = sys.modules.get(pkg)
        if mod is not None and not Path(str(mod.__file__)).resolve().is_relative_to(d):
            return False
    return True


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "record" and argv[2] == "--":
        return record(argv[1], argv[3:])
    lines_of = None
    if len(argv) >= 2 and argv[0] == "replay" and argv[1].startswith("--lines="):
        lines_of = argv.pop(1).split("=", 1)[1]
    if len(argv) >= 5 and argv[0] == "replay" and argv[2] == "--":
        return replay(argv[1], argv[4], argv[5:], lines_of)  # argv[3] is the interpreter of CMD: this one runs it
    print("usage: python -m oij.commands._mutrun record DIR -- CMD... | "
          "replay [--lines=FILE] DIR -- python SCRIPT ARGS...",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
