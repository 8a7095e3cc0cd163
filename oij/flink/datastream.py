"""Flink DataStream's ``intervalJoin`` as an implementation under test: one oij-jsonl case, paced tuple by tuple.

Data flow for one case::

    events --(a small text file: query line, then one line per tuple or watermark, keys as ints)--> CASE
    java OijDataStreamCase CASE PACE_MS  (oij/flink/java/OijDataStreamCase.java, compiled once with javac
      against pyflink/lib into a cache directory)
      --> "P base probe" lines (the join) and "L id" lines (both late side outputs) --> Results

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
the JVM is a child process, killed on timeout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from oij.io.adapt import Unsupported
from spec.batch import Results
from spec.model import BASE, Event, Query, StreamTuple, Watermark

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
    """``java -cp ... OijDataStreamCase``, compiling the class first if it is missing or older than its source."""
    from oij.flink.peers import flink_lib, java_command

    lib = flink_lib()
    if lib is None:
        raise Unsupported("the flink-ds adapter needs PyFlink: pip install 'oij[flink]'")
    if shutil.which("java") is None:
        raise Unsupported("the flink-ds adapter needs Java 17 on PATH")
    cache = cache or cache_dir()
    if not (cache / "OijDataStreamCase.class").exists() and shutil.which("javac") is None:
        raise Unsupported("the flink-ds adapter compiles a small Java class once: it needs a JDK (javac)")
    return java_command(JAVA_SOURCE, cache, lib)


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
        p = subprocess.run([*cmd, str(path), str(pace_ms)], capture_output=True, text=True, timeout=timeout,
                           check=False)
    if p.returncode != 0:
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"the Flink DataStream job failed (exit {p.returncode}): {tail}")
    res = Results()
    for line in p.stdout.splitlines():
        f = line.split()
        if f and f[0] == "P":
            res.pairs.append((int(f[1]), int(f[2])))
        elif f and f[0] == "L":
            res.late.append(int(f[1]))
    return res.canonical()


__all__ = ["FEATURES", "PACE_MS", "case_text", "check_supported", "command", "run_case"]
