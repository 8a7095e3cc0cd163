"""A Spark standalone cluster on this machine, started from pyspark's own scripts, for benchmarks and big runs.

``standalone(workers=2, cores=1, memory="4g")`` starts a master and ``workers`` workers with pyspark's
``bin/spark-class`` (the launcher every Spark script uses), all bound to 127.0.0.1 on free ports, waits until
every worker has registered, yields the master URL (``spark://127.0.0.1:PORT``) and stops them all on exit.

Data flow::

    standalone() -> spark-class ...Master (one JVM)  <- spark-class ...Worker x N (one JVM each)
                 -> yields spark://127.0.0.1:PORT     -> oij check --master URL (driver + one executor per worker)

Processes: the master and worker JVMs are children of the calling process, each in its own process group;
the context manager ends them (SIGTERM, then SIGKILL after 20 s) and removes their work directory, also when
the block raises.  The command line ``python -m oij.spark.cluster [WORKERS]`` starts one and prints its URL
until interrupted.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager


def spark_home() -> str:
    """The Spark installation inside the pyspark package (its ``bin/`` holds the launcher scripts)."""
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _workers_alive(ui_port: int) -> int:
    """How many ALIVE workers the master's status page lists (its JSON view); 0 while the page cannot be read or
    is not JSON yet (a master starting its UI has served an HTML page there: CI saw it, and the command died)."""
    import json

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            data = json.load(r)
    except (OSError, ValueError):
        return 0
    if not isinstance(data, dict):
        return 0
    return sum(1 for w in data.get("workers", []) if w.get("state") == "ALIVE")


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@contextmanager
def standalone(workers: int = 2, cores: int = 1, memory: str = "4g", timeout: float = 120.0) -> Iterator[str]:
    """A standalone cluster of ``workers`` workers with ``cores`` cores and ``memory`` each: its master URL."""
    from oij.spark.session import check_java

    check_java()
    cls = os.path.join(spark_home(), "bin", "spark-class")
    port, ui = _free_port(), _free_port()
    work = tempfile.mkdtemp(prefix="oij-cluster-")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON",
                                                                                         sys.executable),
           "SPARK_LOG_DIR": work, "SPARK_WORKER_DIR": work}
    procs: list[subprocess.Popen[bytes]] = []
    url = f"spark://127.0.0.1:{port}"
    try:
        commands = [("master", [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                                str(port), "--webui-port", str(ui)])]
        commands += [(f"worker-{i}", [cls, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                      "--cores", str(cores), "--memory", memory, "--webui-port", str(_free_port()),
                                      "--work-dir", os.path.join(work, f"w{i}")]) for i in range(workers)]
        for name, argv in commands:
            with open(os.path.join(work, f"{name}.log"), "wb") as log:  # the child keeps its own copy of the fd
                procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True))
        deadline = time.monotonic() + timeout
        while _workers_alive(ui) < workers:
            dead = [p for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                from pathlib import Path

                logs = "".join(Path(work, f).read_text(errors="replace")[-400:]
                               for f in sorted(os.listdir(work)) if f.endswith(".log"))
                raise RuntimeError(f"the standalone cluster did not start ({len(dead)} JVMs exited): {logs}")
            time.sleep(0.5)
        yield url
    finally:
        _stop(procs)
        shutil.rmtree(work, ignore_errors=True)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """``python -m oij.spark.cluster [WORKERS]``: start a cluster, print its URL, stop it on Ctrl-C or SIGTERM.

    SIGTERM (``kill``, and a shell's ``kill %1`` of the ``&`` job the docs show; a background job ignores
    SIGINT) is taken as Ctrl-C, so the JVMs, each in a process group of its own, are stopped too."""
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, _interrupted)
    announced = False
    try:  # around the print too: a stop that lands right after the URL is out is the normal end (exit 0)
        with standalone(int(args[0]) if args else 2) as url:
            announced = True
            print(url, flush=True)
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        return 0 if announced else 130  # stopped before the URL was out: as an interrupted command
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["spark_home", "standalone"]
