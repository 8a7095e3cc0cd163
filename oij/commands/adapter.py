"""``oij adapter NAME [FILE] [--session]``: a real stream processor as an implementation under test.

Reads one oij-jsonl case (FILE or stdin), runs it through the named system
and writes the result lines the system produced, so the command can stand
after ``--`` in ``oij conform`` and ``oij vectors verify``.  With ``--session``
(or ``OIJ_SESSION=1``) one process serves many cases, each answered with its
result lines and ``{"type":"end"}``.  The adapters, what they claim and the
session protocol are :mod:`oij.adapters`'.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import dataclass
from typing import IO

from oij.adapters import (
    ADAPTERS,
    END_LINE,
    Adapter,
    Runner,
    get_adapter,
    parse_options,
    read_case,
    restart_command,
    revisions,
    session_cases,
)
from oij.commands.common import options
from oij.errors import UsageError
from oij.io.errors import InputError
from oij.io.jsonlwrite import result_lines
from oij.io.recovery import Restart, RestartRequest
from oij.options import add_options, option


@dataclass
class AdapterFlags:
    """The arguments of ``oij adapter`` (:mod:`oij.options`): the adapter, the case, Spark's master, and the
    command's modes (``--features``, ``--session``, ``--restart-protocol`` with its ``-o`` options); kept here, not
    in :mod:`oij.adapters`, whose code the fresh ``conform-time.json`` measures."""

    name: str = option(positional=True, help="the adapter: " + ", ".join(ADAPTERS))
    file: str = option("-", positional=True, nargs="?", help="the case (default: stdin)")
    master: str | None = option(None, help="Spark master (default local[2])")
    features: bool = option(
        False, help="print the features this adapter implements (for oij conform --features) and exit")
    session: bool = option(
        False, help="serve many cases, one after another, in one process: after each case, its result lines and "
        '{"type":"end"}; until EOF (also OIJ_SESSION=1 in the environment)')
    restart_protocol: bool = option(
        False, help="run one incarnation under the restart protocol (docs/recovery.rst: OIJ_STATE_DIR, "
        "OIJ_CHECKPOINT): the engine restarted from its own checkpoint, its sink's committed rows and checkpoint "
        "lines printed; what oij conform --restarts N --adapter NAME runs")
    restart_options: list[str] = option(
        factory=list, flags=("-o", "--option"), action="append", metavar="KEY=VALUE",
        help="a restart option of the adapter (e.g. sink=append; docs/recovery.rst lists them)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "adapter",
        help="run one case through a real stream processor (Spark, Flink) and print its result lines",
        description="Read one oij-jsonl case and write the result lines the named system produces; use it as "
        "the command under test: oij conform --features=$(oij adapter spark-ss --features) -- oij adapter "
        "spark-ss. Adapters: " + ", ".join(ADAPTERS) + ".",
    )
    add_options(p, AdapterFlags)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    flags = options(AdapterFlags, args)
    adapter = get_adapter(flags.name)
    if flags.features:
        print(",".join(adapter.features))
        return 0
    path = "<stdin>" if flags.file == "-" else flags.file
    if flags.restart_protocol:
        return _run_restart(adapter, flags)
    if flags.restart_options:
        raise UsageError("-o KEY=VALUE goes with --restart-protocol")
    if flags.session or os.environ.get("OIJ_SESSION") == "1":
        return _run_session(adapter, flags, path)
    try:
        if flags.file == "-":
            text = sys.stdin.read()
        else:
            with open(flags.file, encoding="utf-8") as fh:
                text = fh.read()
    except OSError as e:
        raise InputError(path, 0, "file", e.strerror or str(e)) from None
    q, events = read_case(adapter, text, path)
    res = adapter.start(flags.master)(q, events)
    sys.stdout.writelines(result_lines(res.canonical()))
    _report(adapter)
    return 0


def _run_session(adapter: Adapter, flags: AdapterFlags, path: str) -> int:
    """Cases one after another from FILE or stdin, each answered with its result lines and the end line; the
    system started at the first case and stopped at EOF (or at the first case it cannot run: exit 2)."""
    with contextlib.ExitStack() as stack:
        if flags.file == "-":
            stream: IO[bytes] = sys.stdin.buffer
        else:
            try:
                stream = stack.enter_context(open(flags.file, "rb"))
            except OSError as e:
                raise InputError(path, 0, "file", e.strerror or str(e)) from None
        runner: Runner | None = None
        for n, text in enumerate(session_cases(stream), 1):
            q, events = read_case(adapter, text, f"{path} case {n}")
            if runner is None:
                runner = stack.enter_context(adapter.open_session(flags.master))
            res = runner(q, events)
            sys.stdout.writelines(result_lines(res.canonical()))
            sys.stdout.write(END_LINE)
            sys.stdout.flush()
            _report(adapter)
    return 0


def _run_restart(adapter: Adapter, flags: AdapterFlags) -> int:
    """One incarnation under the restart protocol, on stdin and stdout."""
    if flags.session or flags.file != "-":
        raise UsageError("--restart-protocol reads the case on stdin, one incarnation per process")
    if adapter.restart is None:
        restart_command(adapter)  # raises, naming the adapters that do
        return 2
    req = RestartRequest(Restart.from_environ(), parse_options(flags.restart_options), flags.master, sys.stdin.buffer,
                         sys.stdout)
    return adapter.restart(req)


def _report(adapter: Adapter) -> None:
    """After a case: what the system revised, on stderr."""
    for line in revisions(adapter):
        print(line, file=sys.stderr)
