"""Flink DataStream's ``intervalJoin`` as an implementation under test: oij-jsonl cases, paced tuple by tuple.

Data flow for one case (``run_case``: a JVM per case)::

    events --(a small text file: query line, then one line per tuple or watermark, keys as ints)--> CASE
    java OijDataStreamCase CASE PACE_MS  (oij/flink/java/OijDataStreamCase.java, compiled once with javac
      against pyflink/lib into a jar in a cache directory; it starts a MiniCluster for its one job)
      --> "P base probe" lines (the join) and "L id" lines (both late side outputs) --> Results

Data flow for many cases (``Session``: one JVM and one MiniCluster for all of them)::

    Session()          starts  java OijDataStreamCase --session PACE_MS  (stdin, stdout: pipes; stderr: a
                       temporary file, quoted when a case fails)
    Session.run_case   writes the case's lines (as above) and "#END" on the JVM's stdin; the JVM runs the case
                       as one job on its MiniCluster and writes the same "P"/"L" lines, then "#END"
                       (a failed job: "#ERROR message" before it; the session goes on)
    Session.close      closes the JVM's stdin: at EOF it stops its MiniCluster and exits 0 (waited for; killed
                       if it has not exited 30 s later).  A case past its timeout kills the JVM and ends the
                       session; so does the garbage collection of a Session never closed, or the interpreter's
                       exit.

Each case is its own Flink job, with its own operators, state and timers, so nothing carries over from one case
to the next; the session saves the JVM's start, its class loading and warm-up, and the MiniCluster's start.

PyFlink has no Python binding for ``KeyedStream.intervalJoin``, so the job is
a small Java program on PyFlink's own jars (a JDK is needed once, to compile
it).  Its one bounded source emits the events in arrival order, ``PACE_MS``
apart, and is split into the two inputs; so that each element reaches the
join before the next one is emitted, the drive is paced in wall-clock time
(deterministic in practice, not by construction, as for Flink SQL).  Each
input has its own watermarks: in lateness mode Flink's own
``BoundedOutOfOrdernessWatermarks(l)`` (``max ts - l - 1``), asked after every
element instead of every 200 ms; in watermark mode the case's watermark lines
as punctuated watermarks of the input of their channel (channel c to input
c mod 2; with one channel, both inputs).  Both late side outputs
(``sideOutputLeftLateData``, ``sideOutputRightLateData``) come back as late
lines.  The end of the bounded source is Flink's final watermark: every
cleanup timer fires and the job ends.

Mapping: bounds exact, with ``lowerBoundExclusive()`` / ``upperBoundExclusive()``;
keys as dense ints (``1`` and ``"1"`` differ); no left join (the DataStream
interval join is inner only), no aggregates, no joining conditions.

Resources: ``run_case`` writes the case to a temporary directory it removes;
the JVM is a child process, killed on timeout.  A ``Session`` owns its
JVM child, its stderr file and a temporary directory until ``close`` (or
``with Session() as s``), which removes them.  Each JVM's ``java.io.tmpdir``
is such a directory (``in_tmp``): a JVM killed on a timeout or at the
interpreter's exit leaves Flink's files (its RPC jar, 24 MB) there, and they
go with it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from oij.io.adapt import Unsupported
from oij.spec.batch import Results
from oij.spec.model import BASE, Event, Query, StreamTuple, Watermark

JAVA_SOURCE = Path(__file__).with_name("java") / "OijDataStreamCase.java"
PACE_MS = 30
"""Milliseconds between two events of a case."""

FEATURES = ("exclusive", "lateness", "watermarks", "channels", "regressions", "late-report", "mixed-keys",
            "negative-ts")


def check_supported(q: Query, events: Sequence[Event]) -> None:
    """Raise :class:`Unsupported` unless the case is within ``FEATURES``."""
    if q.aggregate is not None:
        raise Unsupported("per-base aggregates are not mapped (the DataStream interval join emits pairs)")
    if q.join == "left":
        raise Unsupported("Flink's DataStream interval join is an inner join")
    if q.cond:
        raise Unsupported("joining conditions are not mapped")


def cache_dir() -> Path:
    """Where the compiled class lives: ``$XDG_CACHE_HOME/oij/flink`` (default ``~/.cache/oij/flink``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "oij" / "flink"


def command(cache: Path | None = None) -> list[str]:
    """``java -cp ... OijDataStreamCase``, compiling oij/flink/java/ into the cache's jar first if it is missing or
    older than a source (:func:`oij.flink.peers.flink_jar`)."""
    from oij.flink.peers import flink_lib, jar_is_current, java_command

    lib = flink_lib()
    if lib is None:
        raise Unsupported("the flink-ds adapter needs PyFlink: pip install 'oij[flink]'")
    if shutil.which("java") is None:
        raise Unsupported("the flink-ds adapter needs Java 17 on PATH")
    cache = cache or cache_dir()
    if not jar_is_current(cache) and shutil.which("javac") is None:  # missing, or older than a source
        raise Unsupported("the flink-ds adapter compiles a small Java class once: it needs a JDK (javac)")
    return java_command(JAVA_SOURCE.stem, cache, lib)


def case_text(q: Query, events: Sequence[Event]) -> str:
    """The case in the Java program's format (see OijDataStreamCase.java)."""
    keys: dict[tuple[str, int | str], int] = {}
    lines = [f"{q.lower} {q.upper} {int(not q.lower_inclusive)} {int(not q.upper_inclusive)} "
             f"{-1 if q.lateness is None else q.lateness} {q.channels}"]
    for e in events:
        if isinstance(e, StreamTuple):
            k = keys.setdefault((type(e.key).__name__, e.key), len(keys))
            lines.append(f"0 {0 if e.side == BASE else 1} {e.id} {e.ts} {k}")
        elif isinstance(e, Watermark):
            lines.append(f"1 {e.channel} {e.ts}")
    return "\n".join(lines) + "\n"


def run_case(q: Query, events: Sequence[Event], pace_ms: int = PACE_MS, timeout: float = 600.0) -> Results:
    """The pairs and late ids Flink DataStream's interval join gives for the case.

    Requires: ``check_supported(q, events)`` passes.
    Cost: a JVM and a MiniCluster per case (about 5 s), plus ``pace_ms`` per event.
    """
    check_supported(q, events)
    cmd = command()
    with tempfile.TemporaryDirectory(prefix="oij-flink-ds-") as d:
        path = Path(d) / "case.txt"
        path.write_text(case_text(q, events))
        tmp = Path(d) / "tmp"
        tmp.mkdir()
        p = subprocess.run([*in_tmp(cmd, str(tmp)), str(path), str(pace_ms)], capture_output=True, text=True,
                           timeout=timeout, check=False)
    if p.returncode != 0:
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"the Flink DataStream job failed (exit {p.returncode}): {tail}")
    return _results(p.stdout.splitlines())


def _results(lines: Sequence[str]) -> Results:
    """The "P base probe" and "L id" lines of the Java program's output as Results (other lines ignored)."""
    res = Results()
    for line in lines:
        f = line.split()
        if f and f[0] == "P":
            res.pairs.append((int(f[1]), int(f[2])))
        elif f and f[0] == "L":
            res.late.append(int(f[1]))
    return res.canonical()


END = "#END"
"""The line after each case, both ways, in the Java program's session mode."""

CLOSE_WAIT = 30.0
"""Seconds :meth:`Session.close` waits for the JVM to exit after its stdin is closed, before killing it."""


def in_tmp(cmd: list[str], tmp: str) -> list[str]:
    """``cmd`` (``java ...``) with ``tmp`` as the JVM's ``java.io.tmpdir``, and so as the MiniCluster's
    ``io.tmp.dirs``, web upload and RPC jar directory: a JVM killed before its shutdown hooks ran leaves its files
    (about 24 MB) there, not in the system's temporary directory."""
    return [cmd[0], f"-Djava.io.tmpdir={tmp}", *cmd[1:]]


def _stop(proc: subprocess.Popen[str], wait: float, tmp: str | None = None) -> None:
    """End ``proc``: close its stdin (the session's EOF), wait up to ``wait`` seconds, kill it if still running,
    and reap it; then remove ``tmp``, its temporary directory.  Safe to call twice."""
    if proc.stdin is not None and not proc.stdin.closed:
        with contextlib.suppress(OSError):  # it has gone already: the pipe is broken
            proc.stdin.close()
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)


class Session:
    """One JVM (``OijDataStreamCase --session``) that runs many cases, each as its own Flink job on one
    MiniCluster (the module docstring); ``run_case`` per case, ``close`` at the end (or ``with Session() as s``).

    Requires: PyFlink and Java (and javac, the first time; :func:`command`).  Not thread-safe: one case at a time.
    """

    def __init__(self, pace_ms: int = PACE_MS) -> None:
        self._tmp = tempfile.mkdtemp(prefix="oij-flink-ds-")
        cmd = [*in_tmp(command(), self._tmp), "--session", str(pace_ms)]
        self._stderr: IO[bytes] = tempfile.TemporaryFile(prefix="oij-flink-ds-")  # noqa: SIM115 (closed by close)
        try:
            self._proc: subprocess.Popen[str] = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        except BaseException:
            self._stderr.close()
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        self._cmd = cmd
        # the child never outlives a Session that is dropped without close(), nor the interpreter
        self._finalizer = weakref.finalize(self, _stop, self._proc, 0.0, self._tmp)

    @property
    def pid(self) -> int:
        """The JVM's process id."""
        return self._proc.pid

    def run_case(self, q: Query, events: Sequence[Event], timeout: float = 600.0) -> Results:
        """The pairs and late ids Flink DataStream's interval join gives for the case, as ``run_case``.

        Raises RuntimeError if the job failed (the session goes on) or the JVM has exited (the session is over);
        ``subprocess.TimeoutExpired`` after ``timeout`` seconds, the JVM killed and the session over.
        Cost: ``pace_ms`` per event, plus the job's deployment on the running MiniCluster (a few tenths of a
        second), plus the JVM's start for the first case.
        """
        check_supported(q, events)
        proc = self._proc
        if proc.poll() is not None or proc.stdin is None or proc.stdout is None or proc.stdin.closed:
            raise RuntimeError(self._failure("the Flink DataStream session has ended"))
        expired = threading.Event()

        def kill() -> None:
            expired.set()
            proc.kill()

        timer = threading.Timer(timeout, kill)
        timer.daemon = True
        timer.start()
        try:
            lines = self._exchange(case_text(q, events))
        except BaseException:  # interrupted mid-case: where the JVM is in the protocol is unknown
            timer.cancel()
            self._end(0.0)
            raise
        timer.cancel()
        if lines is None:  # EOF: the JVM exited, or the timer killed it
            message = self._failure(f"the Flink DataStream session exited (exit {proc.wait()})")
            self._end(0.0)
            if expired.is_set():
                raise subprocess.TimeoutExpired(self._cmd, timeout)
            raise RuntimeError(message)
        errors = [line[len("#ERROR "):] for line in lines if line.startswith("#ERROR")]
        if errors:
            raise RuntimeError(f"the Flink DataStream job failed: {errors[0]}")
        return _results(lines)

    def _exchange(self, text: str) -> list[str] | None:
        """Write one case and its end line; the output lines before the JVM's end line, or None at EOF."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(text + END + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            return None  # the JVM has exited
        lines: list[str] = []
        for line in self._proc.stdout:
            if line.rstrip("\n") == END:
                return lines
            lines.append(line.rstrip("\n"))
        return None

    def _failure(self, what: str) -> str:
        """``what``, with the last three lines of the JVM's stderr."""
        try:
            self._stderr.seek(0)
            tail = " | ".join(self._stderr.read().decode(errors="replace").strip().splitlines()[-3:])
        except (OSError, ValueError):  # the file is closed already
            tail = ""
        return f"{what}: {tail}" if tail else what

    def close(self) -> None:
        """End the JVM (EOF on its stdin; killed after :data:`CLOSE_WAIT` s) and remove its stderr file.
        Idempotent."""
        self._end(CLOSE_WAIT)

    def _end(self, wait: float) -> None:
        """Stop the JVM (waiting ``wait`` s for it to exit by itself, then killing it) and remove the stderr file."""
        if self._finalizer.detach() is not None:
            _stop(self._proc, wait, self._tmp)
        self._stderr.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


__all__ = ["FEATURES", "PACE_MS", "Session", "case_text", "check_supported", "command", "in_tmp", "run_case"]
