"""The implementation's side of the restart protocol, for the adapters that drive a real engine under faults.

The protocol (docs/recovery.rst) asks an implementation for two things: resume from the state it saved through
event ``k = $OIJ_CHECKPOINT``, and print ``{"type":"checkpoint","events":k}`` only once that state is durable,
after the rows it commits.  A real engine has its own notion of both: a *commit epoch* (Spark's micro-batch id,
Flink's checkpoint id, a Pathway run's output) after which its sink's output is durable and its source position
is saved.  The adapters print the **sink's** committed output, never the engine's in-memory view, so the verdict
judges what a downstream reader of the sink would see.

Data flow of one incarnation of such an adapter::

    $OIJ_STATE_DIR/
        query.json      the case's query line, written at the first start; another query's directory is refused
        ledger          one line "EPOCH K" per checkpoint line printed, fsynced *before* the line is printed
        <engine's own>  input files, the engine's checkpoint, the sink's output
    stdin: query, events k+1.. --> engine --> sink (epoch e: rows) --> stdout: rows of e, checkpoint K_e

On a restart with ``OIJ_CHECKPOINT=k``, :meth:`Ledger.rewind` names the epoch whose checkpoint line said ``k``
(one entry per ``k``: a repeated ``k`` is not printed) and drops the entries after it (written, but their lines
never reached the kit).  The rows of every later epoch that the sink holds were printed after the last
checkpoint line the kit saw, or not at all: provisional in the kit's eyes, so the adapter prints them again.

Resources: everything lives in the caller's state directory; this module creates ``query.json``, ``ledger``
and the files of :func:`write_once` there and never removes the directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import IO

from oij.errors import UsageError

CHECKPOINT_LINE = '{{"type":"checkpoint","events":{k}}}\n'


@dataclass(frozen=True)
class Restart:
    """The restart protocol's environment: the state directory, the checkpoint ``k`` to resume from (0 at the
    first start) and which incarnation this is."""

    state_dir: str
    checkpoint: int
    incarnation: int

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Restart:
        """Read ``OIJ_STATE_DIR``, ``OIJ_CHECKPOINT`` and ``OIJ_RESTART``; :class:`UsageError` when the state
        directory is missing or a count is not a count."""
        env = os.environ if environ is None else environ
        d = env.get("OIJ_STATE_DIR", "")
        if not d or not os.path.isdir(d):
            raise UsageError("the restart protocol needs OIJ_STATE_DIR, an existing directory (oij conform "
                             f"--restarts sets it), got {d!r}")
        counts = []
        for name in ("OIJ_CHECKPOINT", "OIJ_RESTART"):
            v = env.get(name, "0") or "0"
            if not v.isdigit():
                raise UsageError(f"{name}: a count, got {v!r}")
            counts.append(int(v))
        return cls(d, counts[0], counts[1])

    def path(self, *parts: str) -> str:
        """A path inside the state directory."""
        return os.path.join(self.state_dir, *parts)

    def claim(self, query_line: str) -> None:
        """Record the case's query at the first start; refuse (:class:`UsageError`) a directory holding another
        query's state, so a job never silently resumes someone else's, and a restart into an empty one."""
        path = self.path("query.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                if f.read().strip() != query_line.strip():
                    raise UsageError(f"{self.state_dir} holds the state of another query")
            return
        if self.checkpoint > 0:
            raise UsageError(f"{self.state_dir} holds no saved state, yet OIJ_CHECKPOINT={self.checkpoint}")
        write_once(path, query_line.strip().encode() + b"\n")


def fsync_dir(d: str) -> None:
    """Make a rename or a new file in ``d`` durable."""
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_once(path: str, data: bytes) -> bool:
    """Create ``path`` with ``data`` atomically (temp file, fsync, rename, fsync of the directory) unless it
    exists; True when this call wrote it.  An idempotent write: what a sink keyed by its epoch needs."""
    if os.path.exists(path):
        return False
    d = os.path.dirname(path) or "."
    tmp = os.path.join(d, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(d)
    return True


class Ledger:
    """``STATE/ledger``: the checkpoint lines an adapter printed, as ``EPOCH K`` lines, each fsynced before its
    line goes out.  O(entries) to open, O(1) to record."""

    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, "ledger")
        self.entries: list[tuple[int, int]] = []
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and all(p.lstrip("-").isdigit() for p in parts):
                        self.entries.append((int(parts[0]), int(parts[1])))
                    # a torn last line (killed mid-write) is no entry: its checkpoint line never went out

    def _check(self) -> None:
        """Invariant: the events counts never decrease, and neither do the epochs."""
        for (e0, k0), (e1, k1) in zip(self.entries, self.entries[1:], strict=False):
            assert k0 <= k1 and e0 <= e1, (self.entries, "ledger out of order")

    def rewind(self, k: int) -> int | None:
        """Restart at ``OIJ_CHECKPOINT=k``: keep the entries through the one recorded with ``k`` (the later ones
        were recorded but their lines never reached the kit), rewrite the ledger atomically, and return that
        entry's epoch: the last epoch whose rows are committed.  None when ``k`` is 0 and nothing was recorded
        at 0.  Raises :class:`UsageError` for a ``k`` never recorded (a state directory from another run).
        O(entries)."""
        keep = [(e, kk) for e, kk in self.entries if kk <= k]
        if keep and keep[-1][1] == k:
            epoch: int | None = keep[-1][0]
        elif k == 0:
            epoch = None
        else:
            raise UsageError(f"{self.path}: no checkpoint at event {k} was recorded (OIJ_CHECKPOINT={k})")
        if keep != self.entries:
            tmp = self.path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.writelines(f"{e} {kk}\n" for e, kk in keep)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            fsync_dir(os.path.dirname(self.path) or ".")
            self.entries = keep
        return epoch

    def record(self, epoch: int, k: int) -> None:
        """Append ``EPOCH K`` and fsync it: call before printing the checkpoint line."""
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(f"{epoch} {k}\n")
            f.flush()
            os.fsync(f.fileno())
        self.entries.append((epoch, k))


class ProtocolOut:
    """Result lines and checkpoint lines on the protocol's output, flushed as they are written."""

    def __init__(self, out: IO[str], ledger: Ledger) -> None:
        """Requires: ``ledger`` rewound to the restart point (:meth:`Ledger.rewind`)."""
        self.out = out
        self.ledger = ledger
        self.last_k = ledger.entries[-1][1] if ledger.entries else 0

    def rows(self, lines: Iterable[str]) -> None:
        """Write result lines (each ends with a newline) and flush."""
        self.out.writelines(lines)
        self.out.flush()

    def checkpoint(self, epoch: int, k: int) -> None:
        """Commit what was written: record ``(epoch, k)`` in the ledger, then print the checkpoint line.
        Requires ``k`` at least the last checkpoint's count; a repeat of the same ``k`` is not printed
        (it would make :meth:`Ledger.rewind` ambiguous): its rows wait for the next larger ``k`` or the
        normal exit."""
        if k < self.last_k:
            raise ValueError(f"checkpoint at event {k} after one at {self.last_k}")
        if k == self.last_k and self.ledger.entries:
            return
        self.ledger.record(epoch, k)
        self.out.write(CHECKPOINT_LINE.format(k=k))
        self.out.flush()
        self.last_k = k




@dataclass(frozen=True)
class RestartRequest:
    """One incarnation of a restartable adapter: the protocol's environment, the adapter's options
    (``oij adapter NAME --restart-protocol -o KEY=VALUE``), the Spark master if any, and the streams."""

    env: Restart
    options: Mapping[str, str]
    master: str | None
    stdin: IO[bytes]
    stdout: IO[str]

    def option(self, key: str, default: str, allowed: Iterable[str] | None = None) -> str:
        """The option ``key`` (``default`` when not given); :class:`UsageError` when not among ``allowed``."""
        v = self.options.get(key, default)
        if allowed is not None and v not in (choices := list(allowed)):
            raise UsageError(f"-o {key}={v}: one of {', '.join(choices)}")
        return v

    def unknown_options(self, known: Iterable[str]) -> None:
        """Refuse (:class:`UsageError`) an option the adapter does not read, naming it."""
        extra = sorted(set(self.options) - set(known))
        if extra:
            raise UsageError(f"-o {extra[0]}: this adapter's restart options are {', '.join(sorted(known)) or 'none'}")


__all__ = ["CHECKPOINT_LINE", "Ledger", "ProtocolOut", "Restart", "RestartRequest", "fsync_dir", "write_once"]
