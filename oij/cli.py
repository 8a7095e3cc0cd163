"""The ``oij`` command line.

Each command lives in its own module under :mod:`oij.commands` and exposes
``register(subparsers)``; the table below is the whole registry, and only the
module of the command being run is imported (``oij join`` starts without
numpy, pyarrow or Spark).
Errors in the input exit with code 2 and one line on stderr, never a traceback.

Signals (``entry``, the console script and ``python -m oij.cli``): SIGINT and
SIGTERM end a run with one line on stderr and exit code 130 or 143 at every
moment after this module is imported: while the command's modules load, while
it works (as ``KeyboardInterrupt`` / :class:`Terminated`, so that every
``finally`` removes its temporary files, processes and shared memory), and
after it has finished, when its output is already committed, through the
``atexit`` functions (a handler that writes the line and leaves with
``os._exit``: no exception can surface in a destructor or an ``atexit``
function as "Exception ignored").  From the last ``atexit`` function on, while
the interpreter tears itself down (when it would put back the default
actions), both are ignored: the process ends within milliseconds with the
run's own exit code.  Only a signal during Python's own start-up, before this
module runs (20-40 ms), meets Python's defaults.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType

from oij import __version__

COMMANDS = {  # command -> the module that registers it (imported only when needed: a quick start)
    "join": "oij.commands.join",
    "generate": "oij.commands.generate",
    "bench": "oij.commands.bench",
    "check": "oij.commands.check",
    "run": "oij.commands.run",
    "conform": "oij.commands.conform",
    "vectors": "oij.commands.vectors",
    "adapter": "oij.commands.adapter",
    "prove": "oij.commands.prove",
    "explain": "oij.commands.explain",
    "userjob": "oij.commands.userjob",
}
COMMAND_MODULES = tuple(COMMANDS.values())


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``only`` (a command name), just that command's subparser (its module alone is
    imported, so ``oij join`` does not pay for numpy, pyarrow or Spark)."""
    parser = argparse.ArgumentParser(
        prog="oij",
        description="Online interval join: executable specification, reference oracle and parallel engines.",
    )
    parser.add_argument("--version", action="version", version=f"oij {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(module).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``oij`` command; its exit code."""
    from oij.commands.common import UsageError
    from oij.io.errors import InputError

    try:
        with _sigterm_raises():
            words = list(sys.argv[1:] if argv is None else argv)
            parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
            command: list[str] | None = None
            if "--" in words:  # everything after the first -- is a command under test (conform, vectors verify)
                i = words.index("--")
                words, command = words[:i], words[i + 1:]
            args = parser.parse_args(words)
            if command is not None:
                if not hasattr(args, "cmd"):
                    parser.error(f"oij {args.command} takes no '-- CMD'")
                args.cmd = command
            rc: int = args.func(args)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return rc
    except (InputError, UsageError) as e:
        print(f"oij: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `oij join big.jsonl | head`: the reader has gone; end quietly, as a tool killed by SIGPIPE would.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt:
        _remove_leftovers()
        print("oij: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        _remove_leftovers()
        print("oij: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except OSError as e:  # a write-time error: full disk, read-only file system, I/O error
        where = f"{e.filename}: " if e.filename else ""
        print(f"oij: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1


def _remove_leftovers() -> None:
    """After a signal unwound the run: the temporary files and run directories whose cleanup it cut short
    (:func:`oij.io.atomic.remove_leftovers`; nothing was named if that module was never imported)."""
    atomic = sys.modules.get("oij.io.atomic")
    if atomic is not None:
        atomic.remove_leftovers()


class Terminated(BaseException):
    """SIGTERM, raised as an exception so that every ``finally`` runs (temp files, processes, segments)."""


_PENDING: list[int] = []  # a signal that came while the interpreter could not take an exception (below)
RETRY_S = 0.005


def _cannot_raise_here(frame: FrameType | None) -> bool:
    """True iff an exception raised in ``frame`` could not reach oij's handlers: the import machinery (a module
    lock's weakref callback prints "Exception ignored" and drops it), a finalizer (``__del__``), or a section
    that must not be cut (:func:`oij.io.atomic.signals_deferred`: a child process being started)."""
    # never import in a handler (it may run inside an import); not imported yet, or half: no such section is open
    deferred = getattr(sys.modules.get("oij.io.atomic"), "signals_are_deferred", None)
    if deferred is not None and deferred():
        return True
    depth = 0
    while frame is not None and depth < 64:
        code = frame.f_code
        if code.co_filename.startswith("<frozen importlib") or code.co_name == "__del__":
            return True
        frame = frame.f_back
        depth += 1
    return False


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGINT and SIGTERM while oij works: ``KeyboardInterrupt`` / :class:`Terminated`, so that every ``finally``
    runs -- unless the interpreter is where an exception would be swallowed (:func:`_cannot_raise_here`): then
    the signal is kept and taken again RETRY_S later (SIGALRM), once out of there."""
    if _cannot_raise_here(frame):
        _PENDING[:] = [signum]
        signal.setitimer(signal.ITIMER_REAL, RETRY_S)
        return
    _PENDING.clear()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated()


def _retry(signum: int, frame: FrameType | None) -> None:
    if _PENDING:
        _interrupt(_PENDING[0], frame)


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGINT and SIGTERM raise (:func:`_interrupt`) inside the block; the old handlers come back after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, h) for s, h in ((signal.SIGINT, _interrupt), (signal.SIGTERM, _interrupt),
                                                (signal.SIGALRM, _retry))}
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, h in old.items():
            signal.signal(s, h)


def entry() -> None:
    """The console script ``oij``: :func:`main`, with SIGINT and SIGTERM handled from the first line of the
    run to the last moment of the interpreter (the module docstring)."""
    rc = 1
    atexit.register(_ignore_signals)  # registered first, so it runs last of the atexit functions
    try:
        for s, h in ((signal.SIGALRM, _retry), (signal.SIGINT, _interrupt), (signal.SIGTERM, _interrupt)):
            signal.signal(s, h)  # main() installs the same for its block and puts these back after it
        rc = main()
        _after_the_run()  # from here on, a signal writes its line and leaves (no exception to escape)
    except KeyboardInterrupt:  # in the instant between main's return and the line above
        _ended(signal.SIGINT, 130)
    except Terminated:
        _ended(signal.SIGTERM, 143)
    sys.exit(rc)


def _ended(signum: int, rc: int) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"oij: {'interrupted' if signum == signal.SIGINT else 'terminated'}\n".encode())
    os._exit(rc)


def _ignore_signals() -> None:
    """The interpreter's teardown: it would reset a Python handler to the default action (killed by the
    signal, no line), but keeps SIG_IGN."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _after_the_run() -> None:
    """From here to the end of the process, SIGINT and SIGTERM write one line and leave at once: the run's
    work is done (its output committed or its error reported), and nothing may raise during shutdown."""
    def late(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):
            sys.stdout.flush()
        with contextlib.suppress(OSError):
            os.write(2, f"oij: {'interrupted' if signum == signal.SIGINT else 'terminated'} after the run had "
                     "ended (its output, if any, is complete)\n".encode())
        os._exit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, late)
        signal.signal(signal.SIGTERM, late)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        if _PENDING:  # a signal deferred out of an import or a finalizer, not yet taken
            late(_PENDING[0], None)


if __name__ == "__main__":
    entry()
