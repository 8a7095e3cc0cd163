"""An ordinary Flink DataStream interval join over an oij-jsonl workload, written as its users write it.

Unlike :mod:`oij.flink.datastream` (oij's adapter: one source paced 30 ms a tuple, a watermark after every
element), this job runs Flink its ordinary way: each input read from its own file as fast as Flink reads it,
Flink's periodic bounded-out-of-orderness watermark every 200 ms of wall clock, at parallelism 1 or more.  Which
tuples are late then depends on read speed and timing: its output is what a judge "up to schedule" (issue 63)
must accept.

Data flow (one JVM per run)::

    EVENTS (oij-jsonl, lateness mode) --tuples in arrival order, split by side-->
      WORK/base.txt, WORK/probe.txt      ("id ts key" a line, each in its input's arrival order)
    java OijUserJob WORK/base.txt WORK/probe.txt WORK/out.txt P lower upper lowerExcl upperExcl L lateSide
      (oij/flink/java/OijUserJob.java, compiled once with javac against pyflink/lib into the cache's jar with
      the other Java programs: oij.flink.peers.flink_jar)
      FileSource(base.txt) -> parse -> forBoundedOutOfOrderness(L ms), timestamps = ts -> keyBy(key: Long) --+
      FileSource(probe.txt) -> ...                                                                       --+
        -> intervalJoin.between(lower, upper) [exclusive bounds] [late side outputs], parallelism P
        -> executeAndCollect -> WORK/out.txt  ("P a b key subtask", "L id", "K key instance" lines)
    WORK/out.txt --pairs and late ids, sorted canonically--> OUT (atomic: temp, fsync, rename)

Mapping: the Java key type is ``Long`` (``keyBy(e -> e[2], Types.LONG)``): the workload's keys must be ints
(UsageError otherwise), so ``key.hashCode()`` is ``Long.hashCode(key)`` = ``(int)(key ^ (key >>> 32))``, and
the key goes to instance ``KeyGroupRangeAssignment.assignKeyToParallelOperator(key, 128, P)`` (max parallelism
128, Flink's default for P <= 128).  The returned ``key_instance`` is that map as Flink computed it, and
``key_instance_agrees`` whether every pair came from the instance the map names (the subtask that emitted it);
:func:`flink_key_instance` computes the same map in Python.
Bounds are exact (``lowerBoundExclusive`` / ``upperBoundExclusive``); the DataStream interval join is inner only
(``join: left`` is refused), no aggregates, no joining conditions.  Without ``late_side_outputs`` the side
outputs are not set and late tuples vanish silently.

Resources: :func:`run_flink_user_job` creates a temporary directory (``oij-flink-userjob-*`` in the system's
temp dir: the two input files and the JVM's output) and removes it before returning, also on failure; the JVM is
a child process (``subprocess.run``), waited for, and killed if it runs past ``timeout``.  The jar is built once
in oij's cache directory (``oij.flink.datastream.cache_dir``) and kept.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from oij.errors import UsageError
from oij.io.atomic import atomic_text
from oij.io.jsonlwrite import canonical_pair_order, result_lines, write_pairs
from oij.io.userjob import read_workload
from oij.spec.batch import Results
from oij.spec.model import BASE
from oij.spec.schedule import key_group

JAVA_CLASS = "OijUserJob"
"""The Java program (oij/flink/java/OijUserJob.java)."""


def command() -> list[str]:
    """``java -cp JAR:LIB/* OijUserJob``, compiling oij/flink/java/ into the cache's jar first if needed.

    Raises UsageError without PyFlink, without java, or when the jar must be built and there is no javac."""
    from oij.flink.datastream import cache_dir
    from oij.flink.peers import flink_lib, jar_is_current, java_command

    lib = flink_lib()
    if lib is None:
        raise UsageError("the Flink user job needs PyFlink: pip install 'oij[flink]'")
    if shutil.which("java") is None:
        raise UsageError("the Flink user job needs Java 17 on PATH")
    cache = cache_dir()
    if not jar_is_current(cache) and shutil.which("javac") is None:
        raise UsageError("the Flink user job compiles a small Java class once: it needs a JDK (javac)")
    return java_command(JAVA_CLASS, cache, lib)


def flink_key_instance(key: int, parallelism: int, max_parallelism: int = 128) -> int:
    """The join instance Flink sends a ``Long`` key to: ``KeyGroupRangeAssignment.assignKeyToParallelOperator``,
    i.e. key group ``murmurHash(Long.hashCode(key)) % max_parallelism``, then ``group * parallelism //
    max_parallelism``.  Pure Python; checked against Flink's own map by tests/flink/test_userjob.py."""
    return key_group(key, max_parallelism) * parallelism // max_parallelism


def run_flink_user_job(events_path: str, out_path: str, *, parallelism: int = 1, late_side_outputs: bool = True,
                       timeout: float = 3600.0) -> dict[str, Any]:
    """Run the ordinary Flink job (module docstring) on ``events_path``; write its pairs and late ids (both side
    outputs) to ``out_path`` as oij-jsonl result lines in canonical order.

    Returns ``{"pairs", "late", "tuples", "parallelism", "seconds", "seconds_total", "key_type",
    "max_parallelism", "key_instance", "key_instance_agrees", "pairs_by_instance"}``: the counts, the JVM's wall
    time (start to exit) and the whole call's, ``"Long"``, 128, the key -> join instance map (keys as ints),
    whether every pair came from its key's instance, and the pairs each instance emitted.

    Requires: a lateness-mode workload with int keys and an inner join (else UsageError); PyFlink, Java 17 (and
    javac the first time).  Raises RuntimeError if the job fails, ``subprocess.TimeoutExpired`` after
    ``timeout`` seconds (the JVM killed).
    """
    if parallelism < 1:
        raise UsageError(f"parallelism must be at least 1, got {parallelism}")
    begin = time.perf_counter()
    q, tuples = read_workload(events_path)
    if q.join == "left":
        raise UsageError("Flink's DataStream interval join is an inner join: no join: left")
    if any(type(t.key) is not int for t in tuples):
        raise UsageError(f"{events_path}: the Flink user job keys by Long: every key must be an int")
    assert q.lateness is not None  # read_workload checked it
    cmd = command()
    with tempfile.TemporaryDirectory(prefix="oij-flink-userjob-") as d:
        files = {side: Path(d) / f"{side}.txt" for side in ("base", "probe")}
        with open(files["base"], "w", encoding="ascii") as fb, open(files["probe"], "w", encoding="ascii") as fp:
            for t in tuples:
                (fb if t.side == BASE else fp).write(f"{t.id} {t.ts} {t.key}\n")
        out = Path(d) / "out.txt"
        args = [str(files["base"]), str(files["probe"]), str(out), str(parallelism), str(q.lower), str(q.upper),
                str(int(not q.lower_inclusive)), str(int(not q.upper_inclusive)), str(q.lateness),
                str(int(late_side_outputs))]
        started = time.perf_counter()
        p = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, check=False)
        seconds = time.perf_counter() - started
        if p.returncode != 0:
            tail = " | ".join(p.stderr.strip().splitlines()[-3:])
            raise RuntimeError(f"the Flink user job failed (exit {p.returncode}): {tail}")
        info = _write_output(out, out_path)
    return {**info, "tuples": len(tuples), "parallelism": parallelism, "seconds": round(seconds, 3),
            "seconds_total": round(time.perf_counter() - begin, 3), "key_type": "Long", "max_parallelism": 128}


def _write_output(raw: Path, out_path: str) -> dict[str, Any]:
    """Read the JVM's lines (``P``, ``L``, ``K``), write the result lines to ``out_path`` atomically; the counts
    and the key map."""
    import numpy as np

    a: list[int] = []
    b: list[int] = []
    late: list[int] = []
    key_instance: dict[int, int] = {}
    by_instance: dict[int, int] = {}
    seen: dict[int, set[int]] = {}
    with open(raw, encoding="ascii") as fh:
        for line in fh:
            f = line.split()
            if not f:
                continue
            if f[0] == "P":
                a.append(int(f[1]))
                b.append(int(f[2]))
                sub = int(f[4])
                by_instance[sub] = by_instance.get(sub, 0) + 1
                seen.setdefault(int(f[3]), set()).add(sub)
            elif f[0] == "L":
                late.append(int(f[1]))
            elif f[0] == "K":
                key_instance[int(f[1])] = int(f[2])
    aa, bb = np.array(a, np.int64), np.array(b, np.int64)
    null = np.zeros(len(aa), np.bool_)
    order = canonical_pair_order(aa, bb, null)
    with atomic_text(out_path) as out:
        write_pairs(out, aa[order], bb[order], null[order])
        out.writelines(result_lines(Results(late=sorted(late))))
    agrees = all(subs == {key_instance.get(k)} for k, subs in seen.items())
    return {"pairs": len(a), "late": len(late), "key_instance": key_instance, "key_instance_agrees": agrees,
            "pairs_by_instance": dict(sorted(by_instance.items()))}


__all__ = ["JAVA_CLASS", "command", "flink_key_instance", "run_flink_user_job"]
