"""Starting Spark: the Java check, a quiet embedded or cluster session, and its defaults.

The same code runs embedded (``local[*]``, the default: pyspark starts its own
JVM, which needs Java 17) and on a cluster (``master="spark://host:7077"``,
``yarn``, ..., or under ``spark-submit``, which supplies the master itself).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from oij.io.errors import InputError
from oij.spark.handles import cache_lookups

JAVA_HELP = (
    "Spark needs Java 17: install it with `apt-get install openjdk-17-jre-headless` "
    "(or set JAVA_HOME to a Java 17 installation), or run with --no-spark"
)

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""


class SparkUnavailable(InputError):
    """Spark cannot start here (no Java, a Java that is too old, or a failed launch).  The CLI exits 2."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.path = "java"
        self.line = 0
        self.field = "java"
        self.message = message


def find_java() -> str:
    """The java executable Spark will use: ``$JAVA_HOME/bin/java`` if JAVA_HOME is set, else ``java`` on PATH.

    Raises :class:`SparkUnavailable` (with how to install Java 17) if there is none.
    """
    home = os.environ.get("JAVA_HOME")
    if home:
        exe = os.path.join(home, "bin", "java")
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise SparkUnavailable(f"JAVA_HOME={home} has no bin/java. {JAVA_HELP}")
        return exe
    found = shutil.which("java")
    if found is None:
        raise SparkUnavailable(f"Java not found (JAVA_HOME is not set and there is no `java` on PATH). {JAVA_HELP}")
    return found


def java_version(exe: str) -> int:
    """The major version of the Java at ``exe`` (``java -version``), e.g. 17.  Raises SparkUnavailable."""
    try:
        out = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SparkUnavailable(f"cannot run {exe} -version ({e}). {JAVA_HELP}") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if m is None:
        raise SparkUnavailable(f"cannot tell the version of {exe}. {JAVA_HELP}")
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def check_java() -> str:
    """Check that a Java >= 17 is available before Spark is started; return its path."""
    exe = find_java()
    v = java_version(exe)
    if v < 17:
        raise SparkUnavailable(f"{exe} is Java {v}; pyspark 4 needs Java 17 or newer. {JAVA_HELP}")
    return exe


def _log4j_file() -> str:
    path = os.path.join(tempfile.gettempdir(), f"oij-log4j2-{os.getuid()}.properties")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(_LOG4J)
        os.replace(tmp, path)
    return path


def spark_session(
    master: str | None = "local[*]",
    *,
    app_name: str = "oij",
    driver_memory: str = "4g",
    executor_memory: str | None = None,
    shuffle_partitions: int | None = None,
    conf: dict[str, Any] | None = None,
    tmp_dir: str | None = None,
) -> Any:
    """A SparkSession for oij: Java checked first, UI off, logging at ERROR, console progress bar off.

    ``master=None`` keeps whatever spark-submit configured (cluster runs);
    ``local[*]`` is pyspark's embedded mode.  ``shuffle_partitions`` defaults
    to four per core of a local master and Spark's own default otherwise
    (adaptive execution coalesces small partitions either way).  If a session
    already exists in this process it is returned unchanged (one JVM per
    process: the driver memory and master are fixed at the first call).  Either way its JVM handle keeps the
    classes and methods it looks up (:func:`oij.spark.handles.cache_lookups`).

    ``tmp_dir``: a directory for every file the session writes outside its output (Spark's ``spark.local.dir``:
    block manager, shuffle and pyspark's temporary directories; the JVMs' ``java.io.tmpdir``: extracted native
    libraries, artifacts).  Spark removes them at a normal stop, from a shutdown hook; a SIGKILLed driver leaves
    them, so a caller that can be killed passes a directory it empties itself.  ``None`` keeps /tmp.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        cache_lookups(active.sparkContext._jvm)
        return active
    check_java()
    # Python workers (the oracle's mapInArrow scans) run this interpreter, which has numpy and pyarrow, not
    # whatever `python3` comes first on PATH (pyspark's default)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master is not None and master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log_opt = f"-Dlog4j2.configurationFile=file:{_log4j_file()}"
    if tmp_dir is not None:
        log_opt += f' "-Djava.io.tmpdir={tmp_dir}"'  # quoted: Spark splits the options as a shell would
    b = SparkSession.builder.appName(app_name)
    if master is not None:
        b = b.master(master)
    settings: dict[str, Any] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": driver_memory,
        "spark.driver.extraJavaOptions": log_opt,
        "spark.executor.extraJavaOptions": log_opt,
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        # pyspark 4 records the Python call site of every Column function for error messages: two to four JVM
        # calls and a Python stack walk per F.col/F.expr, thousands per oracle plan; oij's errors name the file
        # and line of the input instead
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }
    if executor_memory is not None:
        settings["spark.executor.memory"] = executor_memory
    if tmp_dir is not None:
        settings["spark.local.dir"] = tmp_dir
    if shuffle_partitions is None and master is not None and master.startswith("local"):
        shuffle_partitions = 4 * (os.cpu_count() or 2)
    if shuffle_partitions is not None:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    settings.update(conf or {})
    for k, v in settings.items():
        b = b.config(k, v)
    try:
        spark = b.getOrCreate()
    except Exception as e:  # the JVM failed to launch: report it on one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SparkUnavailable(f"Spark failed to start ({first}). {JAVA_HELP}") from None
    spark.sparkContext.setLogLevel("ERROR")
    cache_lookups(spark.sparkContext._jvm)
    return spark
