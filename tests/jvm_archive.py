"""A class-data-sharing archive for the Spark JVMs the tests start (Java 17's dynamic AppCDS).

A Spark driver spends most of its start loading and verifying about 13,000 classes.  Java can dump the classes a
run loaded into an archive (``-XX:ArchiveClassesAtExit``) that later JVMs with the same class path map instead
(``-XX:SharedArchiveFile``).  Measured on this machine: ``spark_session`` on ``local[2]``, ``range(10).count()``
and ``stop()`` took 11-12 CPU-seconds of the JVM without the archive, about 6 with it.

* :func:`start_building` (the pytest controller, at configure): when the archive for this Java and this pyspark
  is missing, a daemon thread builds it by one small Spark run, written under a temporary name and renamed, so
  that no JVM ever maps half an archive.  The tests start meanwhile.
* :func:`use_when_ready` (every worker, before each test): once the archive exists, ``JAVA_TOOL_OPTIONS`` names
  it, so every JVM started afterwards with Spark's class path maps it: the drivers ``spark-submit`` starts (the
  session's, and those of the commands and adapters the tests run), and a standalone cluster's master, worker
  and executors.  A JVM whose class path differs (Flink's, PyFlink's, the bare install's pyspark) finds that the
  archive does not match and runs as before, on the JDK's own archive; ``-Xlog:cds*=off`` keeps the JVM's
  notice of that off its stdout.

Only the tests use it: oij itself starts its JVMs as Spark and Flink configure them.  A ``JAVA_TOOL_OPTIONS``
of the caller's (other than tests/conftest.py's default) is kept as it is, without the archive.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

QUIET = "-Xlog:cds*=off"
"""The JVM's CDS messages (an archive that does not match, classes it skipped while dumping) off its stdout."""

JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""tests/conftest.py's default ``JAVA_TOOL_OPTIONS`` (it says why); the archive is added to it, to no other."""

_USER_OPTS = os.environ.get("JAVA_TOOL_OPTIONS", JVM_OPTS) != JVM_OPTS

_DUMP_RUN = """
from oij.spark.session import spark_session
s = spark_session("local[2]", driver_memory="1g", shuffle_partitions=2, conf={"spark.sql.adaptive.enabled": "false"})
a = s.createDataFrame([(i % 7, i, float(i)) for i in range(200)], "k long, id long, v double")
b = a.selectExpr("k", "id + 1 as id2", "v * 2 as w")
a.join(b, "k").groupBy("k").agg({"w": "sum", "id2": "max"}).orderBy("k").collect()
a.repartition(2).write.mode("overwrite").parquet(__import__("sys").argv[1])
s.read.parquet(__import__("sys").argv[1]).count()
s.stop()
"""


@functools.cache
def archive_path() -> Path:
    """Where the archive of this Java and this pyspark lives: in the virtual environment (``sys.prefix``),
    named by a digest of the java executable and pyspark's jar names."""
    import shutil

    import pyspark

    jars = sorted(os.listdir(Path(pyspark.__file__).parent / "jars"))
    java = os.path.realpath(shutil.which("java") or "java")
    digest = hashlib.sha256("\n".join([java, pyspark.__version__, *jars]).encode()).hexdigest()[:16]
    return Path(sys.prefix) / "oij-test-cds" / f"spark-{digest}.jsa"


_building: subprocess.Popen[bytes] | None = None


def _build(path: Path) -> None:
    global _building
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    env = dict(os.environ, JAVA_TOOL_OPTIONS=f"{JVM_OPTS} -XX:ArchiveClassesAtExit={tmp} {QUIET}")
    with tempfile.TemporaryDirectory(prefix="oij-cds-") as d:
        _building = subprocess.Popen([sys.executable, "-c", _DUMP_RUN, str(Path(d) / "t.parquet")], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        rc = _building.wait()
        _wait_group(_building.pid)  # the JVM writes the archive once its Python has gone: at its own exit
    if rc == 0 and tmp.exists():
        os.replace(tmp, path)  # whole or not at all: a JVM maps only a finished archive
    else:
        tmp.unlink(missing_ok=True)


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
    """Build the archive in a daemon thread when it is missing (the controller calls this once per run)."""
    if _USER_OPTS:
        return
    path = archive_path()
    if not path.exists():
        threading.Thread(target=_build, args=(path,), name="spark-cds", daemon=True).start()


def stop_building() -> None:
    """At the end of the run: a build still going is stopped, its whole process group (the Spark run and its
    JVM), so no JVM outlives the run; the next run builds the archive."""
    import signal

    p = _building
    if p is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        if p.poll() is None:
            p.wait()


_ready = False


def use_when_ready() -> None:
    """Once the archive exists, name it in ``JAVA_TOOL_OPTIONS`` (for every JVM started later).  O(1)."""
    global _ready
    if _ready or _USER_OPTS:
        return
    path = archive_path()
    if path.exists():
        os.environ["JAVA_TOOL_OPTIONS"] = f"{JVM_OPTS} -XX:SharedArchiveFile={path} {QUIET}"
        _ready = True
