"""What the kit's searches in the tests share: one choice of restart cases, and commands forked instead of started.

Used by tests/testing/test_restarts.py (its searches), test_conform.py, test_conform_api.py,
test_kit_parallel.py and test_kit_representation.py (their ``oij conform`` runs).
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import subprocess
import sys
import traceback
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import oij.testing._restarts as restarts
from oij.testing._case import Case

ROOT = Path(__file__).resolve().parents[1]
BUGS = ROOT / "tests" / "impls" / "restart_bugs.py"
STATE_DROP = ROOT / "tests" / "impls" / "state_drop.py"
TOY = ROOT / "tests" / "impls" / "toy_oij.py"
SORTED = ROOT / "tests" / "impls" / "sorted_oij.py"
ACCUM_BUGS = ROOT / "tests" / "impls" / "accum_bugs.py"


# ------------------------------------------------------------------- what the restart searches share
#
# A restart search costs two things besides the oracle's work: the choice of its cases (restart_cases: 800
# generated cases drawn and tagged, about 3 CPU-seconds, the same for every search at seed 0) and an interpreter
# start per incarnation (python and its imports, about 0.07 CPU-seconds, a few hundred per search).  The
# searches below share one choice and start their incarnations by fork(): each is still a process of its own,
# in its own session, fed through pipes and killed with SIGKILL by the kit (oij/testing/_restarts.py, unchanged),
# only without exec.  A sample runs as before, a real interpreter per incarnation: the kit's own commands
# (test_correct_recovery_is_exactly_once_under_every_plan, the single plans, `oij conform --restarts` as a
# command, one case of `oij join - --state`, and `oij bench kit-power --restarts` on the state-drop mutants: its
# `oij conform` runs and their mutants' incarnations).

REAL_RESTART_CASES = restarts.restart_cases
SHARED_N = 20  # the default run's count, the most any search here asks for


@functools.cache
def _chosen(features: frozenset[str]) -> list[Case]:
    return REAL_RESTART_CASES(features, SHARED_N)


def shared_restart_cases(features: frozenset[str], n: int, seed: int = 0, pool: int = restarts.POOL) -> list[Case]:
    """:func:`oij.testing._restarts.restart_cases`, the choice made once per process: its first ``n`` of
    :data:`SHARED_N` (the choice is greedy, case by case, so the first ``n`` of a longer choice are the choice of
    ``n``: test_restart_cases_cover_the_state_a_restart_can_lose checks it)."""
    if seed != 0 or pool != restarts.POOL or n > SHARED_N:
        return REAL_RESTART_CASES(features, n, seed, pool)
    return _chosen(features)[:n]


def _program(argv: Sequence[str]) -> Callable[[], int | None] | None:
    """The ``main`` that ``argv`` would run, for the commands the searches here (and test_conform.py's) start;
    None for any other."""
    from oij.cli import main

    args = [str(a) for a in argv]
    if args[:2] == [sys.executable, str(TOY)] and len(args) <= 3:
        from tests.impls import toy_oij

        bug = args[2] if len(args) == 3 else ""
        return lambda: toy_oij.main(bug)
    if args[:2] == [sys.executable, str(ACCUM_BUGS)]:  # as `python accum_bugs.py BUG` runs it (sys.argv set)
        import runpy

        def script() -> int:
            runpy.run_path(str(ACCUM_BUGS), run_name="__main__")
            return 0

        return script
    if args == [sys.executable, str(SORTED)]:
        from tests.impls import sorted_oij

        return sorted_oij.main
    if len(args) == 3 and args[0] == sys.executable and args[1] in (str(BUGS), str(STATE_DROP)):
        from tests.impls import restart_bugs, state_drop

        program = restart_bugs.main if args[1] == str(BUGS) else state_drop.main
        mode = args[2]
        return lambda: program(mode)
    if args[:2] == ["oij", "join"]:
        return lambda: main(args[1:])
    if args[:3] == [sys.executable, "-m", "oij.cli"]:  # oij bench kit-power --restarts: one `oij conform` each
        return lambda: main(args[3:])
    return None


def _exit_code(e: SystemExit) -> int:
    if e.code is None or isinstance(e.code, int):
        return e.code or 0
    print(e.code, file=sys.stderr)
    return 1


class Forked(subprocess.Popen[bytes]):
    """A :class:`subprocess.Popen` whose child runs ``program`` after fork() instead of exec: the same pipes,
    environment, working directory and session, its exit code the program's (a traceback and 1 on an exception,
    as an interpreter exits)."""

    def __init__(self, program: Callable[[], int | None], args: Sequence[str], **kwargs: Any) -> None:
        self._program = program
        super().__init__(list(args), **kwargs)

    def _execute_child(self, args: Any, executable: Any, preexec_fn: Any, close_fds: Any, pass_fds: Any,
                       cwd: Any, env: Any, startupinfo: Any, creationflags: Any, shell: Any, p2cread: int,
                       p2cwrite: int, c2pread: int, c2pwrite: int, errread: int, errwrite: int,
                       *rest: Any) -> None:
        start_new_session = rest[-2]
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code: int | None = 1
            try:
                if start_new_session:
                    os.setsid()
                for fd, std in ((p2cread, 0), (c2pwrite, 1), (errwrite, 2)):
                    if fd != -1:
                        os.dup2(fd, std)
                os.closerange(3, 1 << 16)  # the other children's pipes too (close_fds)
                if cwd is not None:
                    os.chdir(cwd)
                if env is not None:
                    os.environ.clear()
                    os.environ.update(env)
                sys.argv = [str(a) for a in args[1:]]
                sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
                sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
                sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                              line_buffering=True)
                code = self._program()
            except SystemExit as e:
                code = _exit_code(e)
            except BaseException:  # the child's traceback, as an interpreter prints it
                traceback.print_exc()
                code = 1
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code & 0xFF if isinstance(code, int) else 0)
        self.pid = pid
        self._child_created = True
        # the parent's ends of the child's pipes, closed as Popen's own _execute_child closes them: a private
        # method of CPython's subprocess (3.11+) that typeshed does not declare, hence the ignore
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # type: ignore[attr-defined]


def _popen(args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    program = _program(args)
    return subprocess.Popen(list(args), **kwargs) if program is None else Forked(program, args, **kwargs)


FORKING = types.SimpleNamespace(**{**vars(subprocess), "Popen": _popen})
"""A stand-in for the ``subprocess`` module of a module that starts commands: its Popen forks for the commands
:func:`_program` knows."""


@contextlib.contextmanager
def forking() -> Iterator[None]:
    """The searches within share the choice of cases and fork their incarnations (see above)."""
    from oij.bench import restartpower

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(restarts, "restart_cases", shared_restart_cases)
        mp.setattr(restarts, "subprocess", FORKING)
        mp.setattr(restartpower, "subprocess", FORKING)
        yield


@contextlib.contextmanager
def forked_commands() -> Iterator[None]:
    """The kit's commands (``oij.testing._runner.run_command``: a process per case) forked instead of started,
    for the commands :func:`_program` knows: test_conform.py's, test_conform_api.py's, test_kit_parallel.py's and
    test_kit_representation.py's runs."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("oij.testing._runner.subprocess", FORKING)
        yield
