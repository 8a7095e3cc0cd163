"""Class-data-sharing archives for the Spark and Flink JVMs the tests start (Java 17's dynamic AppCDS).

A JVM spends most of its start loading and verifying classes: about 13,000 for a Spark driver, thousands for a
Flink MiniCluster.  Java can dump the classes a run loaded into an archive (``-XX:ArchiveClassesAtExit``) that later
JVMs with the same class path map instead (``-XX:SharedArchiveFile``).  Measured on this machine:

* ``spark_session`` on ``local[2]``, ``range(10).count()`` and ``stop()``: 11-12 CPU-seconds of the JVM without
  the archive, about 6 with it;
* one case of the flink-ds adapter (``java -cp oij-flink.jar:pyflink/lib/* OijDataStreamCase``, a MiniCluster
  and a job): 3.1-3.2 CPU-seconds without, 2.0-2.1 with it.

* :func:`start_building` (the pytest controller, at configure): each archive that is missing for this Java and
  these jars is built by a daemon thread, one after the other, each by one small run, written under a temporary
  name and renamed, so that no JVM ever maps half an archive.  The tests start meanwhile.
* :func:`use_when_ready` (every worker, before each test): once the archive for the test exists,
  ``JAVA_TOOL_OPTIONS`` names it, so every JVM the test starts maps it: the Flink archive for the tests under
  tests/flink/ (the flink-ds adapter's and restart drive's JVMs), the Spark archive for every other test (the
  drivers ``spark-submit`` starts: the session's, those of the commands and adapters the tests run, and a
  standalone cluster's master, worker and executors).  A JVM whose class path differs (PyFlink's gateway, the
  bare install's pyspark) finds that the archive does not match and runs as before, on the JDK's own archive;
  ``-Xlog:cds*=off`` keeps the JVM's notice of that off its stdout.

Only the tests use them: oij itself starts its JVMs as Spark and Flink configure them.  A ``JAVA_TOOL_OPTIONS``
of the caller's (other than tests/conftest.py's default) is kept as it is, without an archive.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import subprocess
import sys
import threading
from pathlib import Path

QUIET = "-Xlog:cds*=off"
"""The JVM's CDS messages (an archive that does not match, classes it skipped while dumping) off its stdout."""

JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m"
"""tests/conftest.py's default ``JAVA_TOOL_OPTIONS`` (it says why); an archive is added to it, to no other."""

_USER_OPTS = os.environ.get("JAVA_TOOL_OPTIONS", JVM_OPTS) != JVM_OPTS

_SPARK_RUN = """
from oij.spark.session import spark_session
s = spark_session("local[2]", driver_memory="1g", shuffle_partitions=2, conf={"spark.sql.adaptive.enabled": "false"})
a = s.createDataFrame([(i % 7, i, float(i)) for i in range(200)], "k long, id long, v double")
b = a.selectExpr("k", "id + 1 as id2", "v * 2 as w")
a.join(b, "k").groupBy("k").agg({"w": "sum", "id2": "max"}).orderBy("k").collect()
a.repartition(2).write.mode("overwrite").parquet(__import__("sys").argv[1])
s.read.parquet(__import__("sys").argv[1]).count()
s.stop()
"""

_FLINK_RUN = """
from oij.flink.datastream import run_case
from oij.spec.model import End, Query, StreamTuple, Watermark
q = Query(lower=-5, upper=0, channels=2)
ev = [StreamTuple("probe", 1, 3, 1), StreamTuple("base", 2, 6, 1), Watermark(4, 0), Watermark(5, 1),
      StreamTuple("probe", 3, 2, 1), StreamTuple("base", 4, 8, 1), End()]
assert run_case(q, ev, pace_ms=5).pairs
"""


def _java() -> str:
    import shutil

    return os.path.realpath(shutil.which("java") or "java")


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    return None if spec is None or spec.origin is None else Path(spec.origin).parent


@functools.cache
def spark_archive() -> Path | None:
    """Where the archive of this Java and this pyspark lives: in the virtual environment (``sys.prefix``),
    named by a digest of the java executable and pyspark's jar names."""
    pyspark = _package_dir("pyspark")
    if pyspark is None:
        return None
    jars = sorted(os.listdir(pyspark / "jars"))
    digest = hashlib.sha256("\n".join([_java(), str(pyspark), *jars]).encode()).hexdigest()[:16]
    return Path(sys.prefix) / "oij-test-cds" / f"spark-{digest}.jsa"


def flink_archive() -> Path | None:
    """Where the archive of this Java, PyFlink's jars and the flink-ds jar (``oij.flink.peers.flink_jar``, in
    ``oij.flink.datastream.cache_dir()``) lives, or None while that jar is not built (the archive names the
    jar's size and time, as the JVM checks them).  Two stat calls."""
    pyflink = _package_dir("pyflink")
    if pyflink is None:
        return None
    from oij.flink.datastream import cache_dir
    from oij.flink.peers import JAR

    try:
        st = (cache_dir() / JAR).stat()
    except FileNotFoundError:
        return None
    jars = sorted(os.listdir(pyflink / "lib"))
    digest = hashlib.sha256("\n".join([_java(), str(pyflink), *jars, str(cache_dir()), str(st.st_size),
                                       str(st.st_mtime_ns)]).encode()).hexdigest()[:16]
    return Path(sys.prefix) / "oij-test-cds" / f"flink-{digest}.jsa"


_building: subprocess.Popen[bytes] | None = None
_stopped = False


def _dump(path: Path, run: str) -> None:
    """One run of ``run`` (Python source) whose JVM dumps its classes into ``path``."""
    global _building
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    env = dict(os.environ, JAVA_TOOL_OPTIONS=f"{JVM_OPTS} -XX:ArchiveClassesAtExit={tmp} {QUIET}")
    with tempfile.TemporaryDirectory(prefix="oij-cds-") as d:
        if _stopped:
            return
        _building = subprocess.Popen([sys.executable, "-c", run, str(Path(d) / "t.parquet")], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        rc = _building.wait()
        _wait_group(_building.pid)  # the JVM writes the archive once its Python has gone: at its own exit
    if rc == 0 and tmp.exists():
        os.replace(tmp, path)  # whole or not at all: a JVM maps only a finished archive
        prune(path)
    else:
        tmp.unlink(missing_ok=True)


def prune(kept: Path) -> list[Path]:
    """Remove the other archives of ``kept``'s kind (``spark-*.jsa`` or ``flink-*.jsa`` beside it): each new flink-ds
    jar (a fresh clone's sources are newer than the jar) or pyspark makes a new one, about 60 and 180 MB, and
    nothing maps the old ones again.  A JVM that still maps one keeps its pages (unlinking a mapped file on Linux
    leaves the mapping).  Returns the removed paths."""
    kind = kept.name.split("-", 1)[0]
    gone = []
    for old in kept.parent.glob(f"{kind}-*.jsa"):
        if old != kept:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
                gone.append(old)
    return gone


def _build_missing() -> None:
    spark = spark_archive()
    if spark is not None and not spark.exists():
        _dump(spark, _SPARK_RUN)
    if _package_dir("pyflink") is None:
        return
    from oij.flink.datastream import cache_dir
    from oij.flink.peers import flink_jar, flink_lib

    lib = flink_lib()
    if lib is None or _stopped:
        return
    try:
        flink_jar(cache_dir(), lib)  # the class path the archive is for (built here when missing: javac)
    except (OSError, subprocess.CalledProcessError):
        return  # no JDK: the flink-ds tests say so themselves
    flink = flink_archive()
    if flink is not None and not flink.exists():
        _dump(flink, _FLINK_RUN)


def _wait_group(pgid: int, timeout: float = 120.0) -> None:
    """Until no process of group ``pgid`` is left (or ``timeout`` seconds)."""
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)


def start_building() -> None:
    """Build the missing archives in a daemon thread (the controller calls this once per run)."""
    if _USER_OPTS:
        return
    threading.Thread(target=_build_missing, name="jvm-cds", daemon=True).start()


def stop_building() -> None:
    """At the end of the run: a build still going is stopped, its whole process group (the run and its JVM), so
    no JVM outlives the run, and no other starts; the next run builds what is missing."""
    import signal

    global _stopped
    _stopped = True
    p = _building
    if p is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        if p.poll() is None:
            p.wait()


_ready: dict[str, Path] = {}


def use_when_ready(test_path: str) -> None:
    """Name in ``JAVA_TOOL_OPTIONS`` the archive for the test at ``test_path`` (its file), once it exists (for
    every JVM the test starts), else none.  O(1) once both archives exist; a few stat calls before."""
    if _USER_OPTS:
        return
    which = "flink" if f"{os.sep}tests{os.sep}flink{os.sep}" in test_path else "spark"
    path = _ready.get(which)
    if path is None:
        found = spark_archive() if which == "spark" else flink_archive()
        if found is not None and found.exists():
            path = _ready[which] = found
    os.environ["JAVA_TOOL_OPTIONS"] = (JVM_OPTS if path is None
                                       else f"{JVM_OPTS} -XX:SharedArchiveFile={path} {QUIET}")
