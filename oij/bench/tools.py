"""Experiments on the project's own tools: workload generation and the Spark oracle.

``generate``: ``oij generate`` in a fresh process per run (wall time, CPU
time and peak RSS of that process, from ``os.wait4`` through
:func:`oij.bench.usage.run_own_usage`, so that the peak is the process's own), to Parquet and to
oij-jsonl, next to rows and bytes written (counted).

``spark``: judging an output at scale.  For each size (the peers workload as
Parquet) and master (``local[1]``, ``local[2]``, a standalone cluster of two
one-core workers started from pyspark's scripts, :mod:`oij.spark.cluster`):
``oij join`` plus a one-machine comparison of its output (GNU sort of both
outputs, then cmp), and ``oij check --got`` of that output on Spark, each a
fresh process, with the per-step breakdown of its report (Spark's task
metrics).  Sizes: 2x10^5, 2x10^6 and 10^7 tuples; ``--full`` adds 10^8 on the
cluster.  Then, on ``local[2]`` at 10^7 tuples (``planted_tuples``), one
difference planted into a copy of that output per cell (``plant``): a pair
dropped, a pair duplicated, one extra late id (a joined base), and one
aggregate value off by 2e-9 relative (on the same workload with sums); each
row says whether the check found exactly that difference and listed its
replay case, and the check's wall time.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from oij.bench.experiment import Cell, Context, Experiment, Row, by_size, register
from oij.bench.usage import run_own_usage


def _gen_cells(size: str) -> list[Cell]:
    n = by_size(size, 20_000, 1_000_000, 10_000_000)
    return [{"preset": p, "format": f, "events": n} for p in ("scale-oij-default", "ppoij-skewed")
            for f in ("parquet", "jsonl")]


def _generate(cell: Cell, ctx: Context) -> Row:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"w.{cell['format']}")
        cmd = [sys.executable, "-m", "oij.cli", "generate", cell["preset"], "-n", str(cell["events"]), "-s", "0",
               "-o", path, "--no-progress"]
        u = run_own_usage(cmd, stdout=subprocess.DEVNULL, capture_stderr=True)
        if u.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {u.returncode}: {u.stderr.strip()}")
        m = re.search(r"wrote (\d+) tuples, (\d+) watermarks \((\d+) events\)", u.stderr)
        rows = int(m.group(3)) if m else 0
        return {"wall_s": round(u.wall_s, 3), "cpu_s": round(u.cpu_s, 3),
                "peak_rss_mib": round(u.peak_rss_kib / 1024, 1), "rows_written": rows,
                "bytes": os.path.getsize(path), "rows_per_s": round(rows / u.wall_s)}


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
    sizes = by_size(size, (20_000,), (200_000, 2_000_000, 10_000_000), (200_000, 2_000_000, 10_000_000, 100_000_000))
    masters = by_size(size, ("local[2]",), ("local[1]", "local[2]", "standalone-2"),
                      ("local[1]", "local[2]", "standalone-2"))
    cells: list[Cell] = [{"tuples": n, "master": m} for m in masters for n in sizes
                         if not (n >= 100_000_000 and m != "standalone-2")]
    planted = by_size(size, 20_000, 10_000_000, 10_000_000)
    # the planted differences on local[2] (their own key, so that no selector of the plain cells picks them);
    # the standalone cells last: the cluster is started once, by the first of them, and its JVMs then stay up
    return ([c for c in cells if c["master"] != "standalone-2"]
            + [{"plant": p, "planted_tuples": planted, "master": "local[2]"}
               for p in by_size(size, QUICK_PLANTS, PLANTS, PLANTS)]
            + [c for c in cells if c["master"] == "standalone-2"])


PLANTS = ("missing-pair", "duplicate-pair", "extra-late", "wrong-aggregate")
"""The differences planted into a copy of ``oij join``'s output (the last on the workload with sums)."""
QUICK_PLANTS = ("missing-pair",)
"""The plants of the quick size (the tests' run): each plant is a whole ``oij check`` process on Spark (about 30
CPU-seconds, the sums' workload a second ``oij generate`` and ``oij join`` besides); the four kinds are found at
small size by ``tests/spark/test_spark_fingerprint.py`` and planted by ``tests/bench/test_bench_experiments.py``."""


SPARK_WORKLOAD = {"rate": 100_000.0, "delay_max": 500, "lateness": 500, "lower": -1000, "upper": 0, "aggregate": None,
                  "keys": 100, "key_dist": "uniform"}
"""The peers workload (``oij bench peers``, issue 14): 100 uniform keys, window [-1000, 0], delays <= 500,
lateness 500; about one pair per two tuples."""


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float, str]:
    """Run ``cmd``: (wall s, CPU s of it and the children it waited for, its peak RSS in MiB, stderr); raises
    on a non-zero exit."""
    u = run_own_usage(cmd, env=env, stdout=subprocess.DEVNULL, capture_stderr=True)
    if u.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {u.returncode}: {u.stderr.strip()[-500:]}")
    return u.wall_s, u.cpu_s, u.peak_rss_kib / 1024, u.stderr


def _one_machine(path: str, d: str) -> dict[str, Any]:
    """``oij join`` of the workload, then the one-machine comparison of its output with the judged one (here
    the same file): both sorted by GNU sort, then cmp.  Wall seconds of each part and the pairs counted."""
    join = os.path.join(d, "join.jsonl")
    env = {**os.environ, "LC_ALL": "C"}
    j_wall, j_cpu, j_rss, _ = _timed([sys.executable, "-m", "oij.cli", "join", path, "-o", join])
    t0 = time.perf_counter()
    for src, dst in ((join, os.path.join(d, "a.sorted")), (join, os.path.join(d, "b.sorted"))):
        subprocess.run(["sort", "-S", "25%", "-T", d, "-o", dst, src], check=True, env=env)
    same = subprocess.run(["cmp", "-s", os.path.join(d, "a.sorted"), os.path.join(d, "b.sorted")]).returncode == 0
    cmp_wall = time.perf_counter() - t0
    for name in ("a.sorted", "b.sorted"):
        os.remove(os.path.join(d, name))
    with open(join, "rb") as fh:
        rows = sum(1 for _ in fh)
    return {"join_s": round(j_wall, 2), "join_cpu_s": round(j_cpu, 2), "join_peak_rss_mib": round(j_rss, 1),
            "compare_s": round(cmp_wall, 2), "one_machine_s": round(j_wall + cmp_wall, 2), "pairs": rows,
            "one_machine_same": same, "join_out": join}


def _cluster(ctx: Context) -> str:
    if "cluster" not in ctx.cache:
        from oij.spark.cluster import standalone

        cm = standalone(workers=2, cores=1, memory="6g")
        ctx.cache["cluster"] = cm.__enter__()
        def stop() -> None:
            cm.__exit__(None, None, None)

        ctx.closers.append(stop)
    url: str = ctx.cache["cluster"]
    return url


def _spark(cell: Cell, ctx: Context) -> Row:
    """One size on one master: ``oij join`` plus a sorted diff on one machine (once per size), and ``oij check
    --got`` of that output on Spark in a fresh process (its JVM start included), with the step breakdown of
    its report; a planted cell: :func:`_planted`."""
    import json

    from oij.workloads import resolve, with_overrides, write_workload

    if "plant" in cell:
        return _planted(cell, ctx)
    d = _spark_dir(ctx)
    n = cell["tuples"]
    path = os.path.join(d, f"w-{n}.parquet")
    if not os.path.exists(path):
        write_workload(path, with_overrides(resolve("scale-oij-default"), SPARK_WORKLOAD), n, 1, fmt="parquet")
    key = f"one-machine-{n}"
    if key not in ctx.cache:
        sub = os.path.join(d, f"one-{n}")
        os.makedirs(sub, exist_ok=True)
        ctx.cache[key] = _one_machine(path, sub)
    one = ctx.cache[key]
    master = _cluster(ctx) if cell["master"] == "standalone-2" else cell["master"]
    out = os.path.join(d, "check")
    cmd = [sys.executable, "-m", "oij.cli", "check", path, "--got", f"me={one['join_out']}", "--seq-limit", "0",
           "--master", master, "--out", out, "--no-progress"]
    if cell["master"] == "standalone-2":
        cmd += ["--driver-memory", "2g"]
    wall, _, rss, _ = _timed(cmd)
    with open(os.path.join(out, "report.json")) as f:
        rep = json.load(f)
    steps = rep.get("spark_steps", [])
    me = next(r for r in rep["engines"] if r["engine"] == "me")
    by = {s["step"]: s for s in steps}
    oracle_s = sum(by[k]["wall_s"] for k in ("reading events", "validating events",
                                             "arrival watermarks and late marking",
                                             "validating events, watermarks and late marking",
                                             "range join, aggregation and writing results") if k in by)
    shutil.rmtree(out, ignore_errors=True)
    return {
        "check_s": round(wall, 2), "check_over_one_machine": round(wall / one["one_machine_s"], 2),
        "agrees": bool(rep["all_agree"]), "spark_start_s": rep.get("spark_start_s"),
        "oracle_s": round(oracle_s, 2), "oracle_tuples_per_s": round(n / oracle_s) if oracle_s else None,
        "got_read_by": me["metrics"].get("read_by"), "got_rows": me["metrics"].get("rows"),
        "driver_python_peak_rss_mib": round(rss, 1),
        **{k: v for k, v in one.items() if k != "join_out"},
        "plan": rep.get("spark_plan"),
        "steps": [{k: s[k] for k in ("step", "wall_s", "task_s", "cpu_s", "tasks", "input_rows", "shuffle_read_bytes",
                                     "shuffle_write_bytes", "spill_bytes", "output_rows")} for s in steps],
    }


def _spark_dir(ctx: Context) -> str:
    """The run's scratch directory (workloads, outputs; removed at the end)."""
    if "dir" not in ctx.cache:
        ctx.cache["dir"] = tempfile.TemporaryDirectory(prefix="oij-bench-spark-")
        ctx.closers.append(ctx.cache["dir"].cleanup)
    d: str = ctx.cache["dir"].name
    return d


def _target(src: str, want: Any) -> tuple[int, int, dict[str, Any]]:
    """The first line past the middle of the oij-jsonl result file ``src`` whose row satisfies ``want``:
    (its first byte, one past its newline, the row)."""
    import json

    with open(src, "rb") as fh:
        fh.seek(os.path.getsize(src) // 2)
        at = fh.tell() + len(fh.readline())  # the rest of the line the middle falls in
        for line in iter(fh.readline, b""):
            row = json.loads(line)
            if want(row):
                return at, at + len(line), row
            at += len(line)
    raise RuntimeError(f"{src}: no row to plant a difference into past the middle")


def _copy(fin: Any, fout: Any, n: int) -> None:
    while n > 0:
        block = fin.read(min(n, 1 << 22))
        if not block:
            break
        fout.write(block)
        n -= len(block)


def plant(src: str, dst: str, how: str) -> dict[str, Any]:
    """Copy the oij-jsonl result file ``src`` (ending in a newline) to ``dst`` with one difference ``how`` (one
    of :data:`PLANTS`) planted past its middle; the difference ``oij check`` must report (kind, issue and the
    row's ids)."""
    import json

    size = os.path.getsize(src)
    if how == "wrong-aggregate":
        a, b, row = _target(src, lambda r: r["type"] == "aggregate" and r.get("value") not in (None, 0, 0.0))
        row["value"] = row["value"] * (1 + 2e-9)  # twice the tolerance of 1e-9 relative
        middle = json.dumps(row, separators=(",", ":")).encode() + b"\n"
        want = {"kind": "aggregate", "issue": "wrong", "base": row["base"]}
    else:
        a, b, row = _target(src, lambda r: r["type"] == "pair" and r.get("probe") is not None)
        with open(src, "rb") as fh:
            fh.seek(a)
            line = fh.read(b - a)
        if how == "missing-pair":
            middle, want = b"", {"kind": "pair", "issue": "missing", "base": row["base"], "probe": row["probe"]}
        elif how == "duplicate-pair":
            middle, want = line + line, {"kind": "pair", "issue": "extra", "base": row["base"], "probe": row["probe"]}
        elif how == "extra-late":  # a joined base is on time: its id as late is one extra late id
            a = b = size
            middle, want = b'{"type":"late","id":%d}\n' % row["base"], {"kind": "late", "issue": "extra",
                                                                           "id": row["base"]}
        else:
            raise ValueError(f"unknown plant {how!r}")
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        _copy(fin, fout, a)
        fout.write(middle)
        fin.seek(b)
        _copy(fin, fout, size - b)
    return want


def _planted(cell: Cell, ctx: Context) -> Row:
    """``oij check --got`` of a copy of ``oij join``'s output with one planted difference: its wall time, whether
    it reported exactly that difference (and nothing else), and whether it listed one replay case for it."""
    import json

    from oij.workloads import resolve, with_overrides, write_workload

    d = _spark_dir(ctx)
    n, how = cell["planted_tuples"], cell["plant"]
    agg = how == "wrong-aggregate"
    path = os.path.join(d, f"w-{n}{'-sum' if agg else ''}.parquet")
    if not os.path.exists(path):
        over = {**SPARK_WORKLOAD, "aggregate": "sum"} if agg else SPARK_WORKLOAD
        write_workload(path, with_overrides(resolve("scale-oij-default"), over), n, 1, fmt="parquet")
    joined = os.path.join(d, f"join-{n}{'-sum' if agg else ''}.jsonl")
    if not agg and f"one-machine-{n}" in ctx.cache:  # the plain cells' output of this size
        joined = ctx.cache[f"one-machine-{n}"]["join_out"]
    elif not os.path.exists(joined):
        _timed([sys.executable, "-m", "oij.cli", "join", path, "-o", joined])
    got = os.path.join(d, "planted.jsonl")
    want = plant(joined, got, how)
    out = os.path.join(d, "check-planted")
    cmd = [sys.executable, "-m", "oij.cli", "check", path, "--got", f"me={got}", "--seq-limit", "0",
           "--master", cell["master"], "--out", out, "--no-progress"]
    wall, _, rss, _ = _timed(cmd)
    try:
        with open(os.path.join(out, "report.json")) as f:
            rep = json.load(f)
        me = next(r for r in rep["engines"] if r["engine"] == "me")
        diffs = me.get("differences") or []
        issue = {"missing": (1, 0, 0), "extra": (0, 1, 0), "wrong": (0, 0, 1)}[want["issue"]]
        found = ((me.get("missing"), me.get("extra"), me.get("wrong")) == issue and len(diffs) == 1
                 and all(diffs[0].get(k) == v for k, v in want.items()))
        cases = rep.get("replays", {}).get("me", [])
        listed = len(cases) == 1 and os.path.isfile(cases[0].get("file", ""))
        by = {s["step"]: s for s in rep.get("spark_steps", [])}
        load = by.get("loading --got me", {})
    finally:
        shutil.rmtree(out, ignore_errors=True)
        os.remove(got)
    return {"check_s": round(wall, 2), "found": found, "replay_listed": listed, "planted": want,
            "agrees": bool(rep["all_agree"]), "got_rows": me["metrics"].get("rows"),
            "got_load_s": load.get("wall_s"), "got_load_task_s": load.get("task_s"),
            "driver_python_peak_rss_mib": round(rss, 1)}


def _plot_spark(result: dict[str, Any], fig: Any) -> None:
    from oij.bench.papers import _lines

    rows = [r for r in result["rows"] if "plant" not in r]  # the planted cells: a table, not a curve
    a, b = fig.subplots(1, 2)
    _lines(a, rows, "tuples", "check_s", "master", {}, label="oij check --got, ")
    one = sorted({(r["tuples"], r["one_machine_s"]) for r in rows})
    a.plot([x for x, _ in one], [y for _, y in one], "k--", label="oij join + sort + cmp (one machine)")
    a.set_yscale("log")
    a.legend(fontsize=6)
    a.set_title("judging an output: wall time", fontsize=9)
    _lines(b, rows, "tuples", "oracle_tuples_per_s", "master", {})
    b.set_title("the Spark oracle alone: tuples/s", fontsize=9)


register(Experiment("spark", "Spark at scale", "oij check --got on Spark against oij join plus a sorted diff, by "
                    "input size and master (local[1], local[2], a standalone cluster of two workers)",
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

    from oij.parallel.runtime.emitter import chunks_from_events
    from oij.parallel.runtime.ring import tuple_dtype
    from oij.parallel.runtime.store import JoinState
    from oij.spec.match import lower_offset, upper_offset

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
    from oij.reference.oracle import Oracle

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
