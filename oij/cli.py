"""The ``oij`` command line.

Each command lives in its own module under :mod:`oij.commands` and exposes
``register(subparsers)``; the module list below is the whole registry.
Errors in the input exit with code 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType

from oij import __version__
from oij.commands.common import UsageError
from oij.io.errors import InputError

COMMAND_MODULES = (
    "oij.commands.join",
    "oij.commands.generate",
    "oij.commands.bench",
    "oij.commands.check",
    "oij.commands.run",
    "oij.commands.conform",
    "oij.commands.vectors",
    "oij.commands.adapter",
    "oij.commands.prove",
    "oij.commands.explain",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oij",
        description="Online interval join: executable specification, reference oracle and parallel engines.",
    )
    parser.add_argument("--version", action="version", version=f"oij {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    command: list[str] | None = None
    if "--" in words:  # everything after the first -- is a command under test (oij conform, oij vectors verify)
        i = words.index("--")
        words, command = words[:i], words[i + 1:]
    args = parser.parse_args(words)
    if command is not None:
        if not hasattr(args, "cmd"):
            parser.error(f"oij {args.command} takes no '-- CMD'")
        args.cmd = command
    try:
        with _sigterm_raises():
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
        print("oij: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("oij: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except OSError as e:  # a write-time error: full disk, read-only file system, I/O error
        where = f"{e.filename}: " if e.filename else ""
        print(f"oij: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1


class Terminated(BaseException):
    """SIGTERM, raised as an exception so that every ``finally`` runs (temp files, processes, segments)."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated()

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


if __name__ == "__main__":
    sys.exit(main())
