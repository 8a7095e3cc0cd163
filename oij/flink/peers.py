"""Flink as a peer in ``oij bench peers``: the SQL interval join (pure PyFlink) and the DataStream intervalJoin (Java).

Both read the bench's peers CSV (``side,id,ts,key`` per tuple, arrival order; times in ms, oij's units) and
write ``base,probe`` lines.  Event time is ``ts`` with a bounded out-of-orderness watermark of the query's
lateness, so on the bench's workloads (every delay <= lateness) nothing is late and the exact result is the
batch join, which the bench checks.

* SQL: one filesystem CSV table, joined with itself (``side = 0`` and ``side = 1``) on the key and
  ``p.rt BETWEEN b.rt + lower AND b.rt + upper`` -- the planner's event-time interval join.
* DataStream: ``OijIntervalJoin.java`` in ``java/`` beside this module, compiled with ``javac`` against
  PyFlink's own jars (``pyflink/lib``) into a jar in a cache directory the first time (:func:`flink_jar`, with
  the other Java programs there); PyFlink has no Python binding for ``KeyedStream.intervalJoin``.

Run as ``python -m oij.flink.peers sql CSV OUT PARALLELISM LOWER UPPER LATENESS``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

JAVA_SOURCE = Path(__file__).with_name("java") / "OijIntervalJoin.java"


def flink_lib() -> Path | None:
    """PyFlink's jar directory, or None if PyFlink is not installed."""
    try:
        import pyflink
    except ImportError:
        return None
    return Path(pyflink.__file__).parent / "lib"


def datastream_command(cache: Path) -> list[str] | None:
    """``java ... OijIntervalJoin`` (compiled into ``cache`` if needed), or None without PyFlink or a JDK."""
    lib = flink_lib()
    if lib is None or shutil.which("javac") is None or shutil.which("java") is None:
        return None
    return java_command(JAVA_SOURCE.stem, cache, lib)


JAR = "oij-flink.jar"
"""The cache's one jar: the classes of every Java program in oij/flink/java/."""


def jar_is_current(cache: Path) -> bool:
    """Whether ``cache/oij-flink.jar`` exists and is no older than any source of ``oij/flink/java/`` (else
    :func:`flink_jar` compiles it, which needs javac).  Two stat calls per source."""
    jar = cache / JAR
    sources = sorted(Path(__file__).with_name("java").glob("*.java"))
    return jar.exists() and jar.stat().st_mtime >= max(s.stat().st_mtime for s in sources)


def flink_jar(cache: Path, lib: Path) -> Path:
    """``cache/oij-flink.jar``: every Java program of ``oij/flink/java/`` compiled together with javac against
    the jars in ``lib``, when the jar is missing or older than one of the sources.

    The classes are compiled and packed aside in a temporary directory of ``cache``, the jar fsynced and renamed
    over the old one, so a concurrent or interrupted build never leaves half a jar.  A jar rather than a folder
    of classes: Java's class-data sharing (``-XX:SharedArchiveFile``, AppCDS) maps only classes loaded from jars,
    and a class folder on the class path turns it off for the whole JVM.  Requires: ``javac`` on PATH when the
    jar must be built.  Cost: one javac run (seconds) the first time, two stat calls per source afterwards.
    """
    import zipfile

    jar = cache / JAR
    if jar_is_current(cache):
        return jar
    sources = sorted(Path(__file__).with_name("java").glob("*.java"))
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        classes = Path(tmp) / "classes"
        subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{lib}/*", *map(str, sources)], check=True,
                       capture_output=True)
        packed = Path(tmp) / JAR
        with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(classes.rglob("*.class")):
                z.write(f, f.relative_to(classes).as_posix())
        with open(packed, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(packed, jar)
    return jar


def java_command(name: str, cache: Path, lib: Path) -> list[str]:
    """``java -cp CACHE/oij-flink.jar:LIB/* NAME``: the Java program ``NAME`` of oij/flink/java/, its jar built
    first if needed (:func:`flink_jar`)."""
    return ["java", "-cp", f"{flink_jar(cache, lib)}:{lib}/*", name]


def _interval(ms: int) -> str:
    sign = "-" if ms < 0 else "+"
    return f"{sign} INTERVAL '{abs(ms) / 1000:.3f}' SECOND"


def run_sql(csv: str, out: str, parallelism: int, lower: int, upper: int, lateness: int) -> None:
    """The SQL interval join over ``csv`` into ``out`` (module docstring)."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    from oij.flink.sql import gateway_tmp

    gateway_tmp()  # the gateway JVM's temporary files in a folder removed at this process's exit
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("parallelism.default", str(parallelism))
    t_env.execute_sql(
        "CREATE TABLE ev (side INT, id BIGINT, ts BIGINT, k BIGINT, rt AS TO_TIMESTAMP_LTZ(ts, 3), "
        f"WATERMARK FOR rt AS rt - INTERVAL '{lateness / 1000:.3f}' SECOND) "
        f"WITH ('connector' = 'filesystem', 'path' = 'file://{os.path.abspath(csv)}', 'format' = 'csv')"
    )
    # a filesystem sink, not TableResult.collect(): collect fetches rows one by one through py4j (measured:
    # 2.6 ms per row).  Its part files are committed at checkpoints; a bounded input ends with a final one.
    t_env.get_config().set("execution.checkpointing.interval", "1 s")
    sink = out + ".parts"
    t_env.execute_sql(
        f"CREATE TABLE pairs (a BIGINT, b BIGINT) WITH ('connector' = 'filesystem', "
        f"'path' = 'file://{os.path.abspath(sink)}', 'format' = 'csv')"
    )
    t_env.execute_sql(
        "INSERT INTO pairs SELECT b.id, p.id FROM ev AS b, ev AS p WHERE b.side = 0 AND p.side = 1 AND b.k = p.k "
        f"AND p.rt BETWEEN b.rt {_interval(lower)} AND b.rt {_interval(upper)}"
    ).wait()
    with open(out, "wb") as f:
        for part in sorted(Path(sink).rglob("*")):
            if part.is_file() and not part.name.startswith("."):
                f.write(part.read_bytes())
    shutil.rmtree(sink, ignore_errors=True)

if __name__ == "__main__":
    _, kind, csv_, out_, par, lo, hi, lat = sys.argv
    assert kind == "sql"
    run_sql(csv_, out_, int(par), int(lo), int(hi), int(lat))
