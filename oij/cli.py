"""The ``oij`` command line.

Each command lives in its own module under :mod:`oij.commands` and exposes
``register(subparsers)``; the module list below is the whole registry.
Errors in the input exit with code 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

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
        rc: int = args.func(args)
        return rc
    except (InputError, UsageError) as e:
        print(f"oij: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 1
    except KeyboardInterrupt:
        print("oij: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
