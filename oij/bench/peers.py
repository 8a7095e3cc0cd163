"""oij's engines, the numpy floor, Flink and Spark on the same workload, the same pairs: ``oij bench peers``
(``peers_bench``).

Method (docs/results.rst has the write-up and the table):

* a workload is generated once per run (``--events`` tuples, 100 keys, uniform and Zipf-skewed; nothing
  late, so every system's exact result is the batch join) and written as oij-jsonl, Parquet and, for
  the JVM peers, a CSV of ``side,id,ts,key`` (oij's time units read as ms); writing them is not timed;
* every system is one process, timed by wall clock from start to exit, reading a file and writing its
  pairs to a file: ``oij join`` (its block path, :mod:`oij.reference.block_oracle`; and, on oij-jsonl, its event path
  too, ``OIJ_JOIN_PATH=event``: the oracle event by event), ``oij run`` for every pattern at 1 and 2
  replicas, the numpy floor
  (:mod:`oij.reference.batchjoin`: columnar read, sort + searchsorted, column-wise write), Flink's
  DataStream intervalJoin (Java, ``oij.flink.peers``) at parallelism 1 and 2, Flink SQL's interval join
  (PyFlink) and Spark Structured Streaming's stream-stream join (pyspark, ``local[2]``);
* repetitions are interleaved (every system once, then again), the median is reported;
* every system's pairs are compared, as a multiset, with ``oij join``'s: a system that differs is
  reported (``same`` false), never dropped;
* a peer that is not installed (no PyFlink, no JDK) is reported as skipped, with the reason.

The JSON (``--out``) holds the machine, every time, the pair counts and the goal ratios of issue 14;
``--docs DIR`` also writes ``peers-table.rst`` and ``peers.png``/``peers.svg`` there.

``python -m oij.bench.peers floor FILE OUT`` is the numpy floor's program (``floor``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from oij.errors import UsageError
from oij.io.atomic import write_text
from oij.options import option
from oij.parallel.config import PATTERNS

WORKLOADS = {
    "uniform": {"keys": 100, "key_dist": "uniform"},
    "zipf": {"keys": 100, "key_dist": "zipf", "skew": 1.0},
}
BASE = {"rate": 100_000.0, "delay_max": 500, "lateness": 500, "lower": -1000, "upper": 0, "aggregate": None}
"""Issue 14's workload: 10^6 + 10^6 tuples over 10^7 time units, delays in [0, 500], window [-1000, 0]."""

PEERS = ("flink-ds", "flink-sql", "spark-ss")
PART_ROWS = 40_000
"""Rows per micro-batch file for Spark.  One file of 2x10^6 rows is one micro-batch in which Spark keeps every
row of a key in its join state and compares each new row with all of them: 10^4 rows per key and side on
the bench's workload, so 2x10^10 comparisons (it ran for over 10 CPU minutes before we stopped it)."""


@dataclass
class System:
    name: str
    fmt: str  # jsonl | parquet | csv | csv-parts (a directory of CSV files, one per micro-batch)
    argv: list[str]  # with {IN} and {OUT} placeholders
    kind: str  # oij | floor | peer
    out_format: str  # jsonl | csv
    env: dict[str, str] = field(default_factory=dict)  # set in the system's environment


def _systems(quick: bool, lower: int, upper: int, lateness: int, cache: Path, skip: set[str]
             ) -> tuple[list[System], dict[str, str]]:
    from oij.flink.peers import datastream_command, flink_lib

    py = [sys.executable]
    out: list[System] = []
    skipped: dict[str, str] = {}
    reps = (2,) if quick else (1, 2)
    for fmt in ("jsonl", "parquet"):
        out.append(System(f"oij join [{fmt}]", fmt, [*py, "-m", "oij.cli", "join", "{IN}", "-o", "{OUT}"], "oij",
                          "jsonl"))
        if fmt == "jsonl":  # the same command on the oracle's event-by-event path (before issue 27)
            out.append(System("oij join event path [jsonl]", fmt,
                              [*py, "-m", "oij.cli", "join", "{IN}", "-o", "{OUT}"], "oij", "jsonl",
                              {"OIJ_JOIN_PATH": "event"}))
        for pat in PATTERNS:
            for r in reps if fmt == "jsonl" else (1, 2) if pat == "kp" and not quick else (2,):
                out.append(System(f"oij run {pat} x{r} [{fmt}]", fmt,
                                  [*py, "-m", "oij.cli", "run", "--pattern", pat, "--replicas", str(r), "{IN}",
                                   "-o", "{OUT}", "--metrics", "{METRICS}"], "oij", "jsonl"))
        if fmt == "jsonl":  # the event-at-a-time engine of before issue 36, for comparison
            out.append(System("oij run kp x2 --engine events [jsonl]", fmt,
                              [*py, "-m", "oij.cli", "run", "--pattern", "kp", "--replicas", "2", "--engine",
                               "events", "{IN}", "-o", "{OUT}", "--metrics", "{METRICS}"], "oij", "jsonl"))
        out.append(System(f"numpy floor [{fmt}]", fmt, [*py, "-m", "oij.bench.peers", "floor", "{IN}", "{OUT}"],
                          "floor", "jsonl"))
    bounds = [str(lower), str(upper), str(lateness)]
    ds = datastream_command(cache)
    if ds is None:
        skipped["flink-ds"] = "needs PyFlink (pip install 'oij[flink]') and a JDK (javac, java)"
    else:
        for par in reps:
            out.append(System(f"flink-ds x{par} [csv]", "csv", [*ds, "{IN}", "{OUT}", str(par), *bounds], "peer",
                              "csv"))
    if flink_lib() is None:
        skipped["flink-sql"] = "needs PyFlink (pip install 'oij[flink]')"
    else:
        out.append(System("flink-sql x2 [csv]", "csv", [*py, "-m", "oij.flink.peers", "sql", "{IN}", "{OUT}", "2",
                                                         *bounds], "peer", "csv"))
    if shutil.which("java") is None:
        skipped["spark-ss"] = "needs Java 17 (see the README)"
    else:
        out.append(System("spark-ss x2 [csv]", "csv-parts", [*py, "-m", "oij.spark.peers", "{IN}", "{OUT}", "2",
                                                               *bounds], "peer", "csv"))
    keep = [s for s in out if not any(s.name.startswith(k) for k in skip)]
    for k in skip:
        if k:
            skipped[k] = "--skip"
    return keep, skipped


# ---------------------------------------------------------------------- inputs and outputs


def write_inputs(d: Path, name: str, params: Any, events: int, seed: int) -> dict[str, Path]:
    """The workload as oij-jsonl, Parquet, CSV and CSV parts (Spark's micro-batches) in ``d``: format -> path."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    from oij.io.columnar import read_parquet_blocks
    from oij.workloads import write_workload

    paths = {"jsonl": d / f"{name}.jsonl", "parquet": d / f"{name}.parquet", "csv": d / f"{name}.csv"}
    write_workload(str(paths["jsonl"]), params, events, seed)
    write_workload(str(paths["parquet"]), params, events, seed)
    _q, blocks = read_parquet_blocks(str(paths["parquet"]))
    with pa.OSFile(str(paths["csv"]), "wb") as sink:
        w = None
        for b in blocks:
            t = b.kind == 0
            tb = pa.table({"side": b.side[t].astype(np.int64), "id": b.id[t], "ts": b.ts[t],
                           "key": np.asarray(b.key[t], dtype=np.int64)})
            if w is None:
                w = pcsv.CSVWriter(sink, tb.schema, write_options=pcsv.WriteOptions(include_header=False))
            w.write_table(tb)
        if w is not None:
            w.close()
    # Spark's file source takes one file per micro-batch: parts of at most PART_ROWS rows, mtimes in arrival
    # order, so that its watermark moves (and its state is evicted) between batches as in a stream
    parts = paths["csv-parts"] = d / f"{name}.parts"
    parts.mkdir()
    with paths["csv"].open("rb") as f:
        lines = f.readlines()
    now = time.time() - len(lines) // PART_ROWS - 10
    for i in range(0, max(len(lines), 1), PART_ROWS):
        part = parts / f"part-{i // PART_ROWS:05d}.csv"
        part.write_bytes(b"".join(lines[i: i + PART_ROWS]))
        os.utime(part, (now + i // PART_ROWS, now + i // PART_ROWS))
    return paths


def read_pairs(path: Path, fmt: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The (base, probe) columns of the pairs a system wrote (oij-jsonl result lines or CSV ``a,b``)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.json as pj

    if path.stat().st_size == 0:
        z = np.empty(0, np.int64)
        return z, z
    if fmt == "csv":
        tb = pcsv.read_csv(str(path), read_options=pcsv.ReadOptions(column_names=["a", "b"]),
                           convert_options=pcsv.ConvertOptions(column_types={"a": pa.int64(), "b": pa.int64()}))
        return tb["a"].to_numpy(), tb["b"].to_numpy()
    tb = pj.read_json(str(path), parse_options=pj.ParseOptions(explicit_schema=pa.schema(
        [("type", pa.string()), ("base", pa.int64()), ("probe", pa.int64()), ("id", pa.int64())])))
    pairs = tb.filter(pa.compute.equal(tb["type"], "pair"))
    return pairs["base"].to_numpy(zero_copy_only=False), pairs["probe"].to_numpy(zero_copy_only=False)


def digest(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> tuple[int, str]:
    """The number of pairs and a hash of them as a multiset (their sorted order)."""
    order = np.lexsort((b, a))
    h = hashlib.sha256(np.ascontiguousarray(a[order]).tobytes() + np.ascontiguousarray(b[order]).tobytes())
    return len(a), h.hexdigest()[:16]


def describe_machine() -> dict[str, Any]:
    """:func:`oij.bench.host.machine` and the Java the JVM peers run on."""
    from oij.bench.host import machine

    java = ""
    if shutil.which("java"):
        r = subprocess.run(["java", "-version"], capture_output=True, text=True)
        java = (r.stderr or r.stdout).splitlines()[0] if (r.stderr or r.stdout) else ""
    return {**machine(), "java": java}


# ---------------------------------------------------------------------- the experiment


@dataclass
class PeersOptions:
    """The options of ``oij bench peers``, each with its flag, help and default (:mod:`oij.options`)."""

    quick: bool = option(False, help="20,000 tuples, one repetition, 2 replicas only (CI smoke)")
    events: int = option(2_000_000, help="tuples per workload (default 2,000,000)")
    repeat: int = option(2, help="interleaved repetitions (median reported)")
    workloads: str = option(",".join(WORKLOADS), help=f"comma-separated: {', '.join(WORKLOADS)}")
    skip: str = option("", help="comma-separated system names to leave out (e.g. flink-sql)")
    seed: int = option(1)
    timeout: float = option(
        900.0, help="seconds a system may take per run; a slower one is reported as timed out (default 900)")
    out: str = option("peers.json", help="where the raw numbers go (default ./peers.json)")
    docs: str | None = option(None, help="also write peers-table.rst and peers.png/.svg to this directory")


def peers_bench(args: PeersOptions) -> dict[str, Any]:
    """Run every system on every workload (progress on stderr); write the result to ``args.out`` (and the table
    and plot to ``args.docs``) and return it (:func:`format_table` is its text)."""
    events = 20_000 if args.quick and args.events == 2_000_000 else args.events
    repeat = 1 if args.quick else args.repeat
    names = [w for w in args.workloads.split(",") if w]
    for w in names:
        if w not in WORKLOADS:
            raise UsageError(f"--workloads: unknown workload {w!r}; known: {', '.join(WORKLOADS)}")
    if events < 1 or repeat < 1:
        raise UsageError("--events and --repeat must be >= 1")
    skip = {s for s in args.skip.split(",") if s}
    from oij.bench.results import provenance

    result: dict[str, Any] = {"experiment": "peers", "events": events, "repeat": repeat, "quick": args.quick,
                              **provenance(sys.argv), "machine": describe_machine(), "workloads": {}}
    with tempfile.TemporaryDirectory(prefix="oij-peers-") as tmp:
        d = Path(tmp)
        for wname in names:
            params = params_for(wname)
            paths = write_inputs(d, wname, params, events, args.seed)
            systems, skipped = _systems(args.quick, params.lower, params.upper, params.lateness,
                                        Path(tempfile.gettempdir()) / "oij-flink-classes", skip)
            times: dict[str, list[float]] = {s.name: [] for s in systems}
            cpus: dict[str, list[float]] = {s.name: [] for s in systems}
            failures: dict[str, str] = {}
            for rep in range(repeat):
                for s in systems:
                    if s.name in failures:
                        continue
                    out = d / "out"
                    met = d / "metrics.json"
                    subst = {"{IN}": str(paths[s.fmt]), "{OUT}": str(out), "{METRICS}": str(met)}
                    argv = [subst.get(x, x) for x in s.argv]
                    t0, c0 = time.perf_counter(), children_cpu()
                    rc, err = run_timed(argv, args.timeout, s.env)
                    wall, cpu = time.perf_counter() - t0, children_cpu() - c0
                    print(f"[{wname} {rep + 1}/{repeat}] {s.name}: {wall:.2f} s" + ("" if rc == 0 else
                          f" FAILED ({err})"), file=sys.stderr)
                    if rc != 0:
                        failures[s.name] = err
                        continue
                    times[s.name].append(wall)
                    cpus[s.name].append(cpu)
                    if rep == 0:
                        a, b = read_pairs(out, s.out_format)
                        result.setdefault("_digests", {})[f"{wname}/{s.name}"] = digest(a, b)
                        if "{METRICS}" in s.argv and met.exists():
                            result.setdefault("_work", {})[f"{wname}/{s.name}"] = _work(json.loads(met.read_text()))
            result["workloads"][wname] = summarise(wname, params, systems, times, failures, skipped,
                                                     result.get("_digests", {}), events, cpus)
            for r in result["workloads"][wname]["rows"]:
                r["work"] = result.get("_work", {}).get(f"{wname}/{r['system']}")
    result.pop("_digests", None)
    result.pop("_work", None)
    result["goals"] = goals(result)
    write_text(args.out, json.dumps(result, indent=1) + "\n")
    if args.docs:
        render_docs(result, Path(args.docs))
    return result


def _work(m: dict[str, Any]) -> dict[str, Any]:
    """The counted work of an ``oij run`` (its ``--metrics``): per replica tuples received and window entries
    visited (the block engine) or received and comparisons (the event engine), and the load balance."""
    per = m.get("per_replica", [])
    return {"engine": m.get("engine", "events"), "load_balance_factor": m.get("load_balance_factor"),
            "received": [r.get("received") for r in per],
            "visited": [r.get("visited", r.get("comparisons")) for r in per],
            "replication": m.get("replication")}


def children_cpu() -> float:
    """User plus system CPU seconds of this process's reaped children and of the descendants they reaped: around
    one :func:`run_timed`, the CPU of the system's whole process tree (oij's helpers are joined by its runtime, a
    JVM by its launcher).  O(1)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_timed(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run one system in its own process group (``env`` added to its environment); (exit code, last stderr line
    or the timeout).

    On timeout the whole group is killed -- a JVM started by the system goes with it.
    """
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env={**os.environ, **env} if env else None)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return -1, f"timed out after {timeout:g} s"
    finally:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return p.returncode, (err.strip().splitlines() or ["?"])[-1][:300] if p.returncode else ""


def params_for(wname: str) -> Any:
    """The parameters of the workload ``wname`` (:data:`WORKLOADS`) on top of issue 14's :data:`BASE`."""
    from oij.workloads import resolve, with_overrides

    plain = replace(resolve("scale-oij-default"), description="", source="")
    return with_overrides(plain, {**BASE, **WORKLOADS[wname]})


def flink_available() -> bool:
    from oij.flink.peers import flink_lib

    return flink_lib() is not None


def summarise(wname: str, params: Any, systems: list[System], times: dict[str, list[float]],
               failures: dict[str, str], skipped: dict[str, str], digests: dict[str, tuple[int, str]],
               events: int, cpus: dict[str, list[float]] | None = None) -> dict[str, Any]:
    """One workload's rows (median time, median CPU seconds of the process tree, pairs, same as ``oij join
    [jsonl]``, ratio to the fastest peer whose pairs are the same), its parameters and skipped peers."""
    ref = digests.get(f"{wname}/oij join [jsonl]")
    rows: list[dict[str, Any]] = []
    for s in systems:
        ts = times.get(s.name, [])
        dg = digests.get(f"{wname}/{s.name}")
        med = statistics.median(ts) if ts else None
        cs = (cpus or {}).get(s.name, [])
        rows.append({"system": s.name, "kind": s.kind, "input": s.fmt, "times_s": ts, "median_s": med,
                     "cpu_s": cs, "cpu_median_s": statistics.median(cs) if cs else None,
                     "tuples_per_s": events / med if med else None, "pairs": dg[0] if dg else None,
                     "digest": dg[1] if dg else None, "same": (dg == ref) if dg and ref else None,
                     "failed": failures.get(s.name)})
    peers = [r["median_s"] for r in rows if r["kind"] == "peer" and r["median_s"] and r["same"]]
    fastest = min(peers) if peers else None
    for r in rows:
        r["vs_fastest_peer"] = fastest / r["median_s"] if fastest and r["median_s"] else None
    return {"params": {k: getattr(params, k) for k in ("keys", "key_dist", "skew", "rate", "delay_max", "lateness",
                                                       "lower", "upper")},
            "rows": rows, "skipped": skipped, "fastest_peer_s": fastest}


def _median(w: dict[str, Any], name: str) -> float | None:
    for r in w["rows"]:
        if r["system"] == name:
            m: float | None = r["median_s"]
            return m
    return None


def goals(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 36's goals as measured ratios (None where a system did not run): a ratio >= its target is met."""
    out: list[dict[str, Any]] = []

    def add(what: str, num: float | None, den: float | None, target: float, workload: str) -> None:
        ratio = num / den if num and den else None
        out.append({"goal": what, "workload": workload, "ratio": ratio, "target": target,
                    "met": None if ratio is None else ratio >= target})

    for wname, w in result["workloads"].items():
        for fmt in ("jsonl", "parquet"):
            join = _median(w, f"oij join [{fmt}]")
            pats = {p: _median(w, f"oij run {p} x2 [{fmt}]") for p in PATTERNS}
            for p, v in pats.items():
                add(f"oij join / {p} x2, {fmt} (every pattern faster than oij join)", join, v, 1.0, wname)
            best = min((v for v in pats.values() if v), default=None)
            add(f"oij join / best pattern x2, {fmt}", join, best, 1.5, wname)
            add(f"KP x1 / KP x2, {fmt}", _median(w, f"oij run kp x1 [{fmt}]"), pats["kp"], 1.5, wname)
            if wname == "zipf":
                add(f"KP x2 / HP x2, {fmt} (HP at least as fast as KP on Zipf keys)", pats["kp"], pats["hp"], 1.0,
                    wname)
        floor = _median(w, "numpy floor [jsonl]")
        join = _median(w, "oij join [jsonl]")
        add("numpy floor / oij join, jsonl (issue 27: oij join within 2x of the floor: >= 0.5)", floor, join, 0.5,
            wname)
        ds2 = _median(w, "flink-ds x2 [csv]")
        add("Flink DataStream x2 / oij join, jsonl", ds2, join, 1.0, wname)
    return out


def no_time(row: dict[str, Any]) -> str:
    """The wall-time cell of a system with no time: a lower bound if it timed out, else failed."""
    why = row.get("failed") or ""
    if why.startswith("timed out after "):
        return f"> {why.split()[3]} (timeout)"
    return "failed"


def format_table(result: dict[str, Any]) -> str:
    """The result as the text ``oij bench peers`` prints."""
    lines = []
    for wname, w in result["workloads"].items():
        lines.append(f"workload {wname} ({result['events']:,} tuples, median of {result['repeat']})")
        lines.append(f"{'system':<28}{'wall s':>9}{'CPU s':>8}{'tuples/s':>12}{'vs fastest peer':>17}"
                     f"{'pairs':>11}  same")
        for r in w["rows"]:
            med, cpu_s = r["median_s"], r.get("cpu_median_s")
            wall = f"{med:.2f}" if med else no_time(r)
            cpu = f"{cpu_s:.2f}" if cpu_s is not None else "-"
            tps = f"{r['tuples_per_s']:,.0f}" if med else "-"
            vs = f"{r['vs_fastest_peer']:.2f}x" if r["vs_fastest_peer"] else "-"
            pairs = f"{r['pairs']:,}" if r["pairs"] is not None else "-"
            same = "yes" if r["same"] else "NO" if r["same"] is False else "-"
            lines.append(f"{r['system']:<28}{wall:>9}{cpu:>8}{tps:>12}{vs:>17}{pairs:>11}  {same}")
        for k, why in w["skipped"].items():
            lines.append(f"{k:<28}skipped: {why}")
    lines.append("goals (ratio >= target):")
    for g in result["goals"]:
        ratio = "-" if g["ratio"] is None else f"{g['ratio']:.2f}"
        lines.append(f"  [{g['workload']}] {g['goal']}: {ratio} (target {g['target']:.2f}) "
                     f"{'met' if g['met'] else 'NOT met' if g['met'] is False else ''}")
    return "\n".join(lines)


def render_docs(result: dict[str, Any], d: Path) -> None:
    """``peers-table.rst`` (list tables) and ``peers.png``/``peers.svg`` (bars of the median wall times)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from oij.io.atomic import atomic_path

    d.mkdir(parents=True, exist_ok=True)
    m = result["machine"]
    rst = [f".. Generated by oij bench peers --docs; {result['events']:,} tuples, median of {result['repeat']}.", "",
           f"Measured at commit ``{result.get('commit', 'unknown')}`` on {result.get('date', 'an unknown date')} "
           f"by ``{result.get('command', 'oij bench peers')}``.", ""]
    rst.append(f"Machine: {m['cores']} cores ({m['cpu'] or 'unknown CPU'}), "
               f"{(m['memory_bytes'] or 0) / 2**30:.0f} GiB, Python {m['python']}, {m['java'] or 'no Java'}; "
               f"load average at the start {m['load_avg'][0]:.2f}.")
    rst.append("")
    for wname, w in result["workloads"].items():
        rst += [f".. list-table:: {wname} keys: {result['events']:,} tuples", "   :header-rows: 1", "",
                "   * - system", "     - wall s", "     - CPU s", "     - tuples/s", "     - vs fastest peer",
                "     - pairs", "     - same pairs"]
        for r in w["rows"]:
            med, cpu = r["median_s"], r.get("cpu_median_s")
            rst += [f"   * - {r['system']}", f"     - {med:.2f}" if med else f"     - {no_time(r)}",
                    f"     - {cpu:.2f}" if cpu is not None else "     - -",
                    f"     - {r['tuples_per_s']:,.0f}" if med else "     - -",
                    f"     - {r['vs_fastest_peer']:.2f}x" if r["vs_fastest_peer"] else "     - -",
                    f"     - {r['pairs']:,}" if r["pairs"] is not None else "     - -",
                    "     - yes" if r["same"] else ("     - **no**" if r["same"] is False else "     - -")]
        rst.append("")
    rst += [".. list-table:: goals of issue 36 (measured ratio, target)", "   :header-rows: 1", "",
            "   * - goal", "     - workload", "     - ratio", "     - target", "     - met"]
    for g in result["goals"]:
        rst += [f"   * - {g['goal']}", f"     - {g['workload']}",
                "     - -" if g["ratio"] is None else f"     - {g['ratio']:.2f}", f"     - {g['target']:.2f}",
                "     - yes" if g["met"] else ("     - **no**" if g["met"] is False else "     - -")]
    write_text(str(d / "peers-table.rst"), "\n".join(rst) + "\n")
    fig, axes = plt.subplots(1, len(result["workloads"]), figsize=(7 * len(result["workloads"]), 7), squeeze=False)
    for ax, (wname, w) in zip(axes[0], result["workloads"].items(), strict=True):
        rows = [r for r in w["rows"] if r["median_s"]]
        colors = {"oij": "tab:blue", "floor": "tab:green", "peer": "tab:orange"}
        ax.barh([r["system"] for r in rows], [r["median_s"] for r in rows], color=[colors[r["kind"]] for r in rows])
        ax.invert_yaxis()
        ax.set_xlabel("wall seconds, end to end (file in, pairs out)")
        ax.set_title(f"{wname} keys, {result['events']:,} tuples")
    fig.suptitle(f"oij bench peers on {m['cores']} cores ({m['cpu'] or 'unknown CPU'})", fontsize=9)
    fig.tight_layout()
    for ext in ("png", "svg"):
        with atomic_path(str(d / f"peers.{ext}")) as tmp:
            fig.savefig(tmp, format=ext, dpi=90)
    plt.close(fig)


# ---------------------------------------------------------------------- the numpy floor program


def floor(path: str, out: str) -> None:
    """Read ``path`` column-wise, join with :func:`oij.reference.batchjoin.compute_pair_columns`, write the pairs."""
    from oij.io import open_blocks
    from oij.io.atomic import atomic_text
    from oij.io.jsonlwrite import canonical_pair_order, write_pairs
    from oij.reference.batchjoin import compute_pair_columns
    from oij.spec.match import lower_offset, upper_offset

    q, blocks, f = open_blocks(path)
    try:
        bl = [b for b in blocks if len(b)]
    finally:
        if f is not None:
            f.close()
    kind = np.concatenate([b.kind for b in bl])
    t = kind == 0
    side = np.concatenate([b.side for b in bl])[t]
    ids = np.concatenate([np.asarray(b.id, np.int64) for b in bl])[t]
    ts = np.concatenate([b.ts for b in bl])[t]
    _, key = np.unique(np.concatenate([b.key for b in bl])[t], return_inverse=True)
    key = key.reshape(-1).astype(np.int64)
    isb = side == 0
    a, b = compute_pair_columns(ids[isb], key[isb], ts[isb], ids[~isb], key[~isb], ts[~isb], lower_offset(q),
                                upper_offset(q))
    null = np.zeros(len(a), np.bool_)
    order = canonical_pair_order(a, b, null)
    with atomic_text(out) as o:
        write_pairs(o, a[order], b[order], null[order])


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "floor":
        raise SystemExit("usage: python -m oij.bench.peers floor FILE OUT")
    floor(sys.argv[2], sys.argv[3])
