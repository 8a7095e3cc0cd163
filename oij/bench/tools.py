"""Experiments on the project's own tools: workload generation and the Spark oracle.

``generate``: ``oij generate`` in a fresh process per run (wall time, CPU
time and peak RSS of that process, from ``os.wait4``), to Parquet and to
oij-jsonl, next to rows and bytes written (counted).

``spark``: the Spark oracle (:mod:`oij.spark.oracle`) on Parquet workloads of
growing size, its whole plan executed into Spark's ``noop`` sink (every row
is computed, nothing is written), for each range-join method.  One
SparkSession (``local[*]``) per run, stopped at the end; in a process that
already has one (a test worker's), that one is used and left running.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any

from oij.bench import Cell, Context, Experiment, Row, by_size, register


def _gen_cells(size: str) -> list[Cell]:
    n = by_size(size, 20_000, 1_000_000, 10_000_000)
    return [{"preset": p, "format": f, "events": n} for p in ("scale-oij-default", "ppoij-skewed")
            for f in ("parquet", "jsonl")]


def _generate(cell: Cell, ctx: Context) -> Row:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"w.{cell['format']}")
        cmd = [sys.executable, "-m", "oij.cli", "generate", cell["preset"], "-n", str(cell["events"]), "-s", "0",
               "-o", path, "--no-progress"]
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err = p.stderr.read() if p.stderr else ""
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {err.strip()}")
        m = re.search(r"wrote (\d+) tuples, (\d+) watermarks \((\d+) events\)", err)
        rows = int(m.group(3)) if m else 0
        return {"wall_s": round(wall, 3), "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
                "peak_rss_mib": round(ru.ru_maxrss / 1024, 1), "rows_written": rows,
                "bytes": os.path.getsize(path), "rows_per_s": round(rows / wall)}


def _plot_gen(result: dict[str, Any], fig: Any) -> None:
    rows = result["rows"]
    a, b = fig.subplots(1, 2)
    labels = [f"{r['preset']}\n{r['format']}" for r in rows]
    a.bar(labels, [r["rows_per_s"] for r in rows])
    a.set_ylabel("rows written per second")
    a.tick_params(axis="x", labelsize=7)
    b.bar(labels, [r["bytes"] / max(1, r["rows_written"]) for r in rows])
    b.set_ylabel("bytes per row (counted)")
    b.tick_params(axis="x", labelsize=7)


register(Experiment("generate", "workloads", "oij generate: rows/s, CPU and peak memory, Parquet and oij-jsonl",
                    _gen_cells, _generate, _plot_gen))


def _spark_cells(size: str) -> list[Cell]:
    sizes = by_size(size, (1000,), (10_000, 100_000), (100_000, 1_000_000, 10_000_000))
    methods = by_size(size, ("salted",), ("plain", "bucketed", "salted"), ("plain", "bucketed", "salted"))
    return [{"preset": p, "per_side": n, "method": m} for p in ("scale-oij-default", "ppoij-skewed")
            for n in sizes for m in methods]


def _spark(cell: Cell, ctx: Context) -> Row:
    from oij.spark.frames import read_parquet_events
    from oij.spark.oracle import SparkOracleOptions, spark_oracle
    from oij.spark.session import spark_session
    from oij.workloads import PRESETS, write_workload

    if "spark" not in ctx.cache:
        from pyspark.sql import SparkSession

        borrowed = SparkSession.getActiveSession() is not None  # the caller's (one JVM per process): reused
        ctx.cache["spark"] = spark_session("local[*]", driver_memory="4g", app_name="oij-bench")
        if not borrowed:  # stop only a session made here; a borrowed one stays the caller's to stop
            ctx.closers.append(ctx.cache["spark"].stop)
        ctx.cache["dir"] = tempfile.TemporaryDirectory()
        ctx.closers.append(ctx.cache["dir"].cleanup)
    spark = ctx.cache["spark"]
    path = os.path.join(ctx.cache["dir"].name, f"{cell['preset']}-{cell['per_side']}.parquet")
    if not os.path.exists(path):
        write_workload(path, PRESETS[cell["preset"]], 2 * cell["per_side"], 1)
    t = time.perf_counter()
    q, frame = read_parquet_events(spark, path)
    res = spark_oracle(spark, q, frame, SparkOracleOptions(method=cell["method"]))
    res.frame().write.format("noop").mode("overwrite").save()
    wall = time.perf_counter() - t
    res.release()
    n = 2 * cell["per_side"]
    return {"wall_s": round(wall, 2), "tuples": n, "tuples_per_s": round(n / wall), "plan": res.plan}


def _plot_spark(result: dict[str, Any], fig: Any) -> None:
    from oij.bench.papers import _lines

    rows = result["rows"]
    axs = fig.subplots(1, 2)
    for ax, p in zip(axs, ("scale-oij-default", "ppoij-skewed"), strict=True):
        _lines(ax, rows, "per_side", "wall_s", "method", {"preset": p})
        ax.set_yscale("log")
        ax.set_title(f"Spark oracle on {p}", fontsize=9)


register(Experiment("spark", "Spark oracle", "the Spark oracle's time against input size, per range-join method",
                    _spark_cells, _spark, _plot_spark))


def _cond_cells(size: str) -> list[Cell]:
    n = by_size(size, 4_000, 20_000, 100_000)
    return [{"engine": e, "cond": c, "tuples": n} for e in ("oracle", "state", "state+index")
            for c in ("none", "100%", "1%") if not (e == "state+index" and c == "none")]


_CONDS: dict[str, dict[str, Any]] = {"none": {}, "100%": {"cond": "a.power<b.power+1000,a.cool>b.cool-1000"},
                                     "1%": {"cond": "a.power<b.power,a.cool>b.cool", "cond_selectivity": 0.01}}
"""SPO-Join's Q1 shape over fields in [0, 1000): always true (+/-1000), and tuned to 1 % of the candidates."""


def _cond_workload(cell: Cell) -> tuple[Any, list[Any]]:
    from oij.workloads import generate, resolve, with_overrides

    # one key, 1e6 tuples/s, a 2000 us window: about 1,000 candidates (500 per side) for every arriving tuple
    over: dict[str, Any] = {"keys": 1, "lower": -2000, "upper": 0, "lateness": 100, "aggregate": None,
                            **_CONDS[cell["cond"]]}
    q, it = generate(with_overrides(resolve("scale-oij-default"), over), cell["tuples"], 3)
    return q, list(it)


def _run_state(q: Any, events: list[Any], index: bool) -> tuple[float, int, int]:
    """One replica's JoinState in this process over the whole stream, batches of 256, W advanced after each:
    (seconds, pairs, entries walked)."""
    import numpy as np

    from parallel.runtime.emitter import chunks_from_events
    from parallel.runtime.ring import tuple_dtype
    from parallel.runtime.store import JoinState
    from spec.match import lower_offset, upper_offset

    recs_list = []
    for c in chunks_from_events(events, 256, q=q):
        recs = np.zeros(len(c), dtype=tuple_dtype(len(q.cond)))
        e = c.events
        for name, col in (("id", e.id), ("ts", e.ts), ("key", e.key), ("value", e.value), ("side", e.side)):
            recs[name] = col
        if c.ch is not None and c.cl is not None:
            recs["ch"], recs["cl"] = c.ch, c.cl
        recs_list.append(recs)
    js = JoinState(0, lower_offset(q), upper_offset(q), pairs=True, partial=False, cond=q.cond, cond_index=index)
    pairs = 0
    top = -(1 << 62)
    t = time.perf_counter()
    for recs in recs_list:
        pairs += sum(len(r) for r in js.process(recs))
        top = max(top, int(recs["ts"].max()))
        js.advance(top - q.lateness)
    return time.perf_counter() - t, pairs, js.probes.visited + js.bases.visited


def _cond(cell: Cell, ctx: Context) -> Row:
    from reference.oracle import Oracle

    q, events = _cond_workload(cell)
    best = float("inf")
    if cell["engine"] == "oracle":
        for _ in range(3):
            o = Oracle(q)
            t = time.perf_counter()
            for e in events:
                o.on_event(e)
            best = min(best, time.perf_counter() - t)
        inst = Oracle(q, instrument=True)
        for e in events:
            inst.on_event(e)
        pairs, visited = len(inst.pairs), inst.visited
    else:
        for _ in range(3):
            secs, pairs, visited = _run_state(q, events, cell["engine"] == "state+index")
            best = min(best, secs)
    window = ctx.cache.setdefault(f"window-{cell['cond']}-{cell['tuples']}", visited)
    return {"seconds": round(best, 4), "pairs": pairs, "visited": visited,
            "visited_per_tuple": round(visited / cell["tuples"], 1), "window_visits": window,
            "selectivity": round(pairs / max(1, window), 4)}


register(Experiment("cond", "PPOIJ Eq. 1 cond (SPO-Join Q1)", "a two-inequality cond at 100 and 1 percent selectivity "
                    "against none: the oracle, one replica's state filtering its window, and with the cond index",
                    _cond_cells, _cond, None))
