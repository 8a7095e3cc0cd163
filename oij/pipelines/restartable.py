"""The oracle behind the restart protocol: ``oij join FILE --state [DIR]`` (:func:`join_with_state`).

Data flow::

    OIJ_CHECKPOINT=k (or the newest DIR/snap-K) -> Oracle.restore(DIR/snap-k)  (k = 0: a new Oracle)
    input: the query line, the events after k, the end line
        every --checkpoint-every events: rows out (flushed) -> DIR/snap-K written atomically (temp, fsync,
        rename, fsync of DIR) -> {"type":"checkpoint","events":K} out (flushed) -> older snapshots removed
    end: every remaining row out, exit 0

The rows come in emission order (a checkpoint commits what precedes it, so nothing may wait for a sort).
The state directory is the caller's: this module creates the snapshot files in it and removes each one once a
newer snapshot's checkpoint line is out; it never removes the directory.  A snapshot of another query is
refused (exit 2), so a directory cannot silently resume someone else's job.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import IO

from oij.errors import UsageError
from oij.io.jsonlread import read_jsonl
from oij.io.jsonlwrite import result_lines
from oij.reference.checkpoint import restore, snapshot
from oij.reference.oracle import Oracle
from oij.spec.batch import Results
from oij.spec.model import End

SNAPSHOT = re.compile(r"snap-(\d+)")


@dataclass
class StateOptions:
    """``--state`` (the directory, or None for ``$OIJ_STATE_DIR``) and ``--checkpoint-every``."""

    file: str = "-"
    state: str | None = None
    checkpoint_every: int = 1


def state_dir(given: str | None) -> str:
    """The state directory: ``given``, else ``$OIJ_STATE_DIR``; it must exist."""
    d = given or os.environ.get("OIJ_STATE_DIR", "")
    if not d:
        raise UsageError("--state: give a directory, or set OIJ_STATE_DIR (the restart protocol does)")
    if not os.path.isdir(d):
        raise UsageError(f"--state: {d}: not a directory")
    return d


def snapshots(d: str) -> list[int]:
    """The events counts of the snapshots in ``d``, ascending."""
    return sorted(int(m.group(1)) for name in os.listdir(d) if (m := SNAPSHOT.fullmatch(name)))


def restart_point(d: str) -> int:
    """Where to resume: ``$OIJ_CHECKPOINT`` (the restart protocol), else the newest snapshot in ``d``, else 0."""
    env = os.environ.get("OIJ_CHECKPOINT", "")
    if env:
        if not env.isdigit():
            raise UsageError(f"OIJ_CHECKPOINT: a count of events, got {env!r}")
        return int(env)
    found = snapshots(d)
    return found[-1] if found else 0


def save(d: str, k: int, data: bytes) -> None:
    """Write ``d/snap-k`` atomically and durably (temp file, fsync, rename, fsync of the directory)."""
    tmp = os.path.join(d, f".snap-{k}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(d, f"snap-{k}"))
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _rows(o: Oracle, out: IO[str]) -> None:
    out.writelines(result_lines(Results(o.pairs, o.aggregates, o.late)))
    o.pairs, o.aggregates, o.late = [], [], []


def join_with_state(args: StateOptions) -> int:
    """Run the oracle under the restart protocol (module docstring); 0 at the end of the input."""
    if args.checkpoint_every < 1:
        raise UsageError("--checkpoint-every: at least 1")
    d = state_dir(args.state)
    k = restart_point(d)
    stream = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115 -- closed below
    out = sys.stdout
    try:
        q, events = read_jsonl(stream, args.file)
        if k > 0:
            path = os.path.join(d, f"snap-{k}")
            if not os.path.exists(path):
                raise UsageError(f"--state: {d} has no snapshot at event {k}")
            with open(path, "rb") as f:
                o = restore(f.read())
            if o.q != q:
                raise UsageError(f"--state: {path} is the state of another query")
        else:
            o = Oracle(q)
        since = 0
        for e in events:
            o.on_event(e)
            if isinstance(e, End):
                break
            k += 1
            since += 1
            if since < args.checkpoint_every:
                continue
            since = 0
            _rows(o, out)
            out.flush()
            save(d, k, snapshot(o))
            out.write(f'{{"type":"checkpoint","events":{k}}}\n')
            out.flush()
            for old in snapshots(d):
                if old < k:
                    os.unlink(os.path.join(d, f"snap-{old}"))
        _rows(o, out)
        out.flush()
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    return 0
