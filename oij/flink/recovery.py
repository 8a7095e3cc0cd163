"""Flink DataStream's ``intervalJoin`` under the restart protocol: a real checkpoint, a real restore, a two-phase sink.

``oij adapter flink-ds --restart-protocol [-o KEY=VALUE ...]`` runs one incarnation (docs/recovery.rst); the kit
(``oij conform --restarts N --adapter flink-ds``) SIGKILLs it and starts the next one on the same
``$OIJ_STATE_DIR``.  What it prints is what Flink's sink committed, never the job's in-memory view.

Data flow of one incarnation::

    stdin: query, events k+1.., end
      |  (feeder thread: each event as a line of OijDataStreamCase's format, event j appended to
      v   STATE/input.log unless an earlier incarnation logged it already; fsynced; "E" at the end line)
    STATE/input.log --> java OijDataStreamRestart STATE PACE SINK FAIL_AFTER SAVEPOINT_EVERY (one JVM and
                        MiniCluster per incarnation, restored from the newest snapshot: the checkpoint in
                        STATE/ckpt or the savepoint in STATE/savepoints with the highest checkpoint id)
      replayable source (offset = events emitted, in operator state) -> the flink-ds job (same watermarks, same
      late side outputs) -> TwoPhaseCommitSinkFunction: on checkpoint c's completion, STATE/sink/<c>.txt =
      "K k_c" + the rows staged in c; the JVM prints "C c"
      |
      v  (this process: on "C c", every sink file after the last one printed, in checkpoint order)
    stdout: the rows of epoch c, then {"type":"checkpoint","events":k_c} (ledger entry "c k_c" fsynced first)

Epochs and ``k``: the epoch is Flink's checkpoint id ``c``; ``k_c`` is the source's offset in checkpoint ``c``
(the number of events it had emitted when it took its snapshot).  The source emits each event together with an
offset mark under the checkpoint lock, and the mark travels to the sink; barriers are aligned, so the sink has
seen exactly the marks through ``k_c`` when it seals checkpoint ``c``'s transaction, and the rows staged in it
are the rows the events through ``k_c`` caused that no earlier checkpoint holds.  A checkpoint whose ``k_c``
equals the previous line's prints its rows but no line (:meth:`ProtocolOut.checkpoint`): they stay provisional
until a larger ``k`` or the normal exit.

On a restart with ``OIJ_CHECKPOINT=k``, :meth:`Ledger.rewind` names the epoch ``e`` whose line said ``k``; the
rows of every sink file after ``e`` are printed again (the kit never saw them committed), and Flink restores
from its newest completed checkpoint (at least ``e``: a sink file exists only for a completed checkpoint).  A
checkpoint that completed but whose commit was not done when the JVM died is committed on the restore
(``recoverAndCommit``), and its "C" line follows.  The job's last epoch, sealed after the end of the data (the
sink's ``finishProcessing``), is committed as ``K k E``: a kill after the job finished, before this process
exited, leaves that file while Flink has removed the finished job's checkpoints, so the next incarnation
prints what the kit has not seen of the sink, logs the rest of its input, and exits 0 without a job (a job
started again would restore an older snapshot, or none, and commit the replayed events' rows again).

Options (``-o KEY=VALUE``): ``sink=two-phase`` (default) or ``sink=direct``, the negative control: a sink
without transactions, appending each row to ``STATE/sink/direct.log`` as it comes, which this process prints
as it grows, with a checkpoint line when a checkpoint completes (and the file position printed so far in
``STATE/direct-positions``; a restart prints the file again from the position of the last line the kit saw).
It is at-least-once: the rows of the events after the restored checkpoint were written before the kill and are
written again by the replay, and a reader of the file sees both; ``fail-after=K``: the source
throws once after event K (marker ``STATE/failed-once``) and Flink's restart strategy restores the job from its
last completed checkpoint inside the same MiniCluster; ``savepoint-every=K`` (K >= 1): after every K-th event
(its number a multiple of K) the source stops emitting and the JVM stops the job with a savepoint (Flink's
stop-with-savepoint, without drain: no final watermark), then submits the next job, restored from that
savepoint, to the same MiniCluster (the JVM starts its MiniCluster itself; a job id per job, the first one's
being the id without savepoints).

Savepoints and epochs: a savepoint takes the next id of the checkpoint counter (a job restored from a snapshot
continues its counter), so it is an epoch like a checkpoint: the synchronous savepoint seals the two-phase
sink's open transaction under its id, with the source's offset ``k`` (the event the source stopped at), and
its completion commits ``STATE/sink/<id>.txt`` before the job finishes.  The epochs printed increase across
the jobs of an incarnation and across incarnations.  A stopped job finishes, and Flink removes its
checkpoints then; a SIGKILL anywhere in the stop leaves the savepoint complete or not (a ``_metadata`` that
does not load is skipped), and the next incarnation restores the newest snapshot, committing the savepoint's
transaction there if the kill came before its commit.  As after any restore, the resumed job starts without a
watermark (Flink does not snapshot it): a tuple late in the whole stream may be judged on time after a resume.

Resources: everything lives in ``$OIJ_STATE_DIR``: this module creates ``head.txt``, ``keys.jsonl``,
``input.log``, ``direct-positions``, ``jvm-<i>.log`` (the JVM's stderr), ``tmp/`` (the JVM's
``java.io.tmpdir``, Flink's ``io.tmp.dirs``, ``web.tmpdir`` and ``web.upload.dir``, emptied at each start: a
killed JVM leaves its files there) and, with :mod:`oij.io.recovery`, ``query.json`` and ``ledger``; the JVM
creates ``ckpt/``, ``savepoints/``, ``sink/`` and ``failed-once``.  Nothing is removed except ``tmp/``: the kit
owns the directory.  The JVM is this process's child, in its process group (the kit kills the group); on any
error of this process it is killed and reaped.
The compiled class is in the jar of OijDataStreamCase (:func:`oij.flink.peers.flink_jar`, in
:func:`oij.flink.datastream.cache_dir`).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import orjson

from oij.errors import UsageError
from oij.io.adapt import Unsupported
from oij.io.errors import InputError
from oij.io.jsonlread import EventParser, line_events, read_query_line
from oij.io.jsonlwrite import result_lines
from oij.io.recovery import Ledger, ProtocolOut, Restart, RestartRequest, fsync_dir, write_once
from oij.spec.batch import Results
from oij.spec.model import BASE, End, Query, StreamTuple, Watermark

JAVA_SOURCE = Path(__file__).with_name("java") / "OijDataStreamRestart.java"
OPTIONS = ("sink", "fail-after", "savepoint-every")
SINKS = ("two-phase", "direct")


def command(cache: Path | None = None) -> list[str]:
    """``java -cp CACHE/oij-flink.jar:LIB/* OijDataStreamRestart``: the jar holds it with OijDataStreamCase,
    whose classes it reuses (built by :func:`oij.flink.datastream.command` when missing or older than a source).
    Raises :class:`Unsupported` without PyFlink, Java or (the first time) javac."""
    from oij.flink import datastream

    return [*datastream.command(cache)[:-1], "OijDataStreamRestart"]


def head_line(q: Query) -> str:
    """The case's head line in OijDataStreamCase's format (bounds, exclusivity, lateness or -1, channels)."""
    return (f"{q.lower} {q.upper} {int(not q.lower_inclusive)} {int(not q.upper_inclusive)} "
            f"{-1 if q.lateness is None else q.lateness} {q.channels}")


class InputLog:
    """``STATE/input.log`` (one line per event, then ``E``) and ``STATE/keys.jsonl`` (the keys' dense ints, one
    JSON ``[type, key]`` per line, line ``i`` being int ``i``): appended and fsynced, each event once however
    many incarnations are given it.  A torn last line (a kill mid-write) is cut off when the log is opened."""

    def __init__(self, env: Restart) -> None:
        self.path = env.path("input.log")
        self.keys_path = env.path("keys.jsonl")
        self.lines = _complete_lines(self.path)
        self.ended = bool(self.lines) and self.lines[-1] == "E"
        if self.ended:
            self.lines.pop()
        self.keys: dict[tuple[str, int | str], int] = {}
        for raw in _complete_lines(self.keys_path):
            typ, key = orjson.loads(raw)
            self.keys[(typ, key)] = len(self.keys)

    def _append(self, path: str, line: str) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def key(self, key: int | str) -> int:
        """The dense int of ``key`` (``1`` and ``"1"`` differ), logged before its first use."""
        k = (type(key).__name__, key)
        if k not in self.keys:
            self._append(self.keys_path, orjson.dumps([k[0], key]).decode())
            self.keys[k] = len(self.keys)
        return self.keys[k]

    def text(self, e: StreamTuple | Watermark) -> str:
        if isinstance(e, StreamTuple):
            return f"0 {0 if e.side == BASE else 1} {e.id} {e.ts} {self.key(e.key)}"
        return f"1 {e.channel} {e.ts}"

    def add(self, j: int, e: StreamTuple | Watermark) -> None:
        """Log event ``j`` (numbered from 1) unless it is there; :class:`UsageError` when the logged one differs
        (the directory holds another case) or ``j`` leaves a gap."""
        line = self.text(e)
        if j <= len(self.lines):
            if self.lines[j - 1] != line:
                raise UsageError(f"{self.path}: event {j} was logged as {self.lines[j - 1]!r}, now {line!r}")
            return
        if j != len(self.lines) + 1:
            raise UsageError(f"{self.path}: event {j} after {len(self.lines)} logged events")
        if self.ended:
            raise UsageError(f"{self.path}: event {j} after the logged end")
        self._append(self.path, line)
        self.lines.append(line)

    def end(self) -> None:
        if not self.ended:
            self._append(self.path, "E")
            self.ended = True


def _complete_lines(path: str) -> list[str]:
    """The lines of ``path`` that end with a newline (cutting off a torn last one); [] when it is missing."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        data = f.read()
    cut = data.rfind(b"\n") + 1
    if cut < len(data):
        with open(path, "r+b") as f:
            f.truncate(cut)
            f.flush()
            os.fsync(f.fileno())
    return data[:cut].decode().splitlines()


def row_line(text: str) -> str:
    """A sink row ("P base probe" or "L id") as a result line."""
    f = text.split()
    res = Results()
    if f[0] == "P":
        res.pairs.append((int(f[1]), int(f[2])))
    elif f[0] == "L":
        res.late.append(int(f[1]))
    else:
        raise ValueError(f"not a sink row: {text!r}")
    return next(result_lines(res))


def sink_finished(sink_dir: str) -> bool:
    """True iff the two-phase sink committed the job's last epoch: its newest file's offset line is "K k E"
    (sealed after the end of the data; the job finished, and Flink removed its checkpoints then)."""
    files = sink_files(sink_dir)
    if not files:
        return False
    with open(files[-1][1], encoding="utf-8") as f:
        return f.readline().split()[2:] == ["E"]


def sink_files(sink_dir: str) -> list[tuple[int, str]]:
    """The committed epochs of the two-phase sink: (checkpoint id, path), in checkpoint order."""
    if not os.path.isdir(sink_dir):
        return []
    out = []
    for name in os.listdir(sink_dir):
        stem, dot, ext = name.partition(".")
        if dot and ext == "txt" and stem.isdigit():
            out.append((int(stem), os.path.join(sink_dir, name)))
    return sorted(out)


class SinkPrinter:
    """Prints the two-phase sink's epochs after ``after`` (None: all) that it holds: rows, then the checkpoint."""

    def __init__(self, sink_dir: str, out: ProtocolOut, after: int | None) -> None:
        self.sink_dir = sink_dir
        self.out = out
        self.last = -1 if after is None else after

    def flush(self) -> None:
        for epoch, path in sink_files(self.sink_dir):
            if epoch <= self.last:
                continue
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
            head = lines[0].split() if lines else []
            if len(head) not in (2, 3) or head[0] != "K" or head[2:] not in ([], ["E"]):
                raise RuntimeError(f"{path}: a sink file without its offset line")
            self.out.rows(row_line(x) for x in lines[1:] if x.strip())
            self.out.checkpoint(epoch, int(head[1]))
            self.last = epoch


class DirectTail:
    """The direct sink's file ``STATE/sink/direct.log``, printed as it grows; at each checkpoint line the bytes
    printed so far are recorded (``STATE/direct-positions``, "EPOCH POSITION" lines, fsynced before the line),
    so that a restart prints again everything the file holds after the last line the kit saw."""

    def __init__(self, env: Restart, out: ProtocolOut, after: int | None) -> None:
        self.path = env.path("sink", "direct.log")
        self.positions_path = env.path("direct-positions")
        self.out = out
        positions = {}
        for line in _complete_lines(self.positions_path):
            e, pos = line.split()
            positions[int(e)] = int(pos)
        self.pos = 0 if after is None else positions[after]
        _complete_lines(self.path)  # a row torn by the kill is cut off before the JVM appends again

    def flush(self) -> None:
        """Print the complete rows the file gained since the last call."""
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb") as f:
            f.seek(self.pos)
            data = f.read()
        cut = data.rfind(b"\n") + 1
        self.out.rows(row_line(x) for x in data[:cut].decode().splitlines() if x.strip())
        self.pos += cut

    def checkpoint(self, epoch: int, k: int) -> None:
        self.flush()
        with open(self.positions_path, "a", encoding="utf-8") as f:
            f.write(f"{epoch} {self.pos}\n")
            f.flush()
            os.fsync(f.fileno())
        self.out.checkpoint(epoch, k)


def _events(stdin: IO[bytes], q: Query) -> Iterator[StreamTuple | Watermark | End]:
    for e in line_events(stdin, 1, EventParser(q, "<stdin>")):
        if isinstance(e, (StreamTuple, Watermark, End)):
            yield e


def _log_input(stdin: IO[bytes], q: Query, log: InputLog, after: int) -> None:
    """Log the events on ``stdin`` (numbered from ``after + 1``) and the end; :class:`InputError` without it."""
    j = after
    for e in _events(stdin, q):
        if isinstance(e, End):
            log.end()
            return
        j += 1
        log.add(j, e)
    raise InputError("<stdin>", j - after + 2, "type", 'missing the last line {"type":"end"}')


def _positive(req: RestartRequest, key: str) -> int:
    v = req.option(key, "0")
    if not v.isdigit():
        raise UsageError(f"-o {key}={v}: a count of events")
    return int(v)


def run_restart(req: RestartRequest) -> int:
    """One incarnation (module docstring); the exit code: 0 when the job finished after the end line."""
    from oij.flink.datastream import PACE_MS, check_supported

    req.unknown_options(OPTIONS)
    sink = req.option("sink", "two-phase", SINKS)
    fail_after = _positive(req, "fail-after")
    savepoint_every = _positive(req, "savepoint-every")
    if "savepoint-every" in req.options and savepoint_every == 0:
        raise UsageError("-o savepoint-every=0: a count of events, at least 1")
    env = req.env
    first = req.stdin.readline()
    q = read_query_line(io.BytesIO(first), "<stdin>")
    try:
        check_supported(q, [])
        cmd = command()
    except Unsupported as e:
        raise UsageError(str(e)) from None
    env.claim(first.decode())
    ledger = Ledger(env.state_dir)
    epoch = ledger.rewind(env.checkpoint)
    out = ProtocolOut(req.stdout, ledger)
    write_once(env.path("head.txt"), (head_line(q) + "\n").encode())
    log = InputLog(env)
    # what the sink holds after the last line the kit saw: printed again
    printer: SinkPrinter | DirectTail = (SinkPrinter(env.path("sink"), out, epoch) if sink == "two-phase"
                                         else DirectTail(env, out, epoch))
    printer.flush()
    if sink == "two-phase" and sink_finished(env.path("sink")):
        # killed after the job finished, before this process's exit: the sink committed the last epoch (printed
        # now if the kit had not seen it), and Flink removed the finished job's checkpoints, so a job started
        # again would restore an older snapshot (or none) and commit the replayed events' rows a second time
        _log_input(req.stdin, q, log, env.checkpoint)
        return 0
    tmp = env.path("tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # what killed JVMs left
    os.makedirs(tmp)
    fsync_dir(env.state_dir)
    argv = [cmd[0], f"-Djava.io.tmpdir={tmp}", "-XX:-UsePerfData", *cmd[1:], env.state_dir, str(PACE_MS), sink,
            str(fail_after), str(savepoint_every)]
    with open(env.path(f"jvm-{env.incarnation}.log"), "wb") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True)
    failure: list[BaseException] = []

    def feed() -> None:
        try:
            _log_input(req.stdin, q, log, env.checkpoint)
        except BaseException as e:  # reported by the main thread
            failure.append(e)
            proc.kill()

    feeder = threading.Thread(target=feed, name="oij-flink-feeder", daemon=True)
    try:
        feeder.start()
        assert proc.stdout is not None
        for line in proc.stdout:
            f = line.split()
            if not f:
                continue
            if f[0] == "C" and len(f) == 3 and isinstance(printer, DirectTail):
                printer.checkpoint(int(f[1]), int(f[2]))
            elif f[0] in ("C", "R"):
                printer.flush()
        rc = proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    if failure:
        raise failure[0]
    if rc != 0:
        sys.stderr.write(f"the Flink job's JVM exited with {rc}: {_tail(env.path(f'jvm-{env.incarnation}.log'))}\n")
        return 1
    printer.flush()
    if not log.ended:
        sys.stderr.write("the Flink job finished before the end of the input\n")
        return 1
    return 0


def _tail(path: str, n: int = 5) -> str:
    with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as f:
        return " | ".join(f.read().strip().splitlines()[-n:])
    return ""


__all__ = ["OPTIONS", "SINKS", "DirectTail", "InputLog", "SinkPrinter", "command", "head_line", "row_line",
           "run_restart", "sink_files", "sink_finished"]
