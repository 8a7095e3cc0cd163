"""The experiments of PPOIJ (§5, Figs. 10-16) and of the Scale-OIJ study (Figs. 7-16), on this project's engines.

Each cell generates its workload in-process (:mod:`oij.workloads`, the
papers' presets with one parameter changed), runs one engine on a shared
replica pool and keeps the engine's metrics: times (throughput, latency)
and counted figures (comparisons, tuples stored per replica, load balance,
splitting degree, entries visited, aggregation work).  Every run's results
are also compared with the same cell's other engines where the experiment
runs several on one stream (they must be equal; a difference raises).

Sizes: ``quick`` (CI smoke: a few thousand tuples, 2 replicas), ``default``
(a few minutes), ``full`` (the figures in the docs; replicas beyond the 2
cores here are time-sliced, which the docs say next to each figure).
"""

from __future__ import annotations

from typing import Any

from oij.bench.experiment import Cell, Context, Experiment, Row, by_size, register
from oij.parallel.config import ROUTED_PATTERNS

SEC = 1_000_000  # the presets' time unit is the microsecond


# ------------------------------------------------------------------ PPOIJ: KP, DP, HP on the process engines

def _ppoij(cell: Cell, ctx: Context, *, cdf: bool = False) -> Row:
    from oij.parallel.config import epoch_size
    from oij.parallel.patterns.entry import run_chunks
    from oij.parallel.runtime.emitter import chunks_from_blocks
    from oij.parallel.runtime.pool import JobOptions
    from oij.workloads import generate_blocks, resolve, with_overrides

    preset = "ppoij-uniform" if cell["dist"] == "uniform" else "ppoij-skewed"
    over: dict[str, Any] = {"keys": cell["keys"], "lower": -cell["interval_s"] * SEC}
    params = with_overrides(resolve(preset), over)
    n = cell["events"]
    opt = JobOptions(cell["pattern"], replicas=cell["replicas"], batch=cell.get("batch", 32),
                     calibration=max(64, n // 100), sync_map=True)
    q, blocks = generate_blocks(params, n, 1)
    chunks = list(chunks_from_blocks(blocks, epoch_size(opt)))
    res, m = run_chunks(cell["pattern"], q, chunks, n, opt, ctx.runtime(cell["replicas"]), cdf_points=100 if cdf else 0)
    per = m["per_replica"]
    stored = [r["stored"] for r in per]
    row: Row = {
        "wall_s": round(m["wall_s"], 4), "throughput_tuples_per_s": round(m["throughput_tuples_per_s"]),
        "latency_ms_p50": m["latency_ms"]["p50"], "latency_ms_p95": m["latency_ms"]["p95"],
        "latency_ms_p99": m["latency_ms"]["p99"],
        "pairs": len(res.pairs), "comparisons": sum(r["comparisons"] for r in per),
        "comparisons_max_replica": max(r["comparisons"] for r in per),
        "stored_per_replica": stored, "received_per_replica": [r["received"] for r in per],
        "load_balance_factor": m["load_balance_factor"], "avg_splitting_degree": m.get("avg_splitting_degree"),
        "broadcast_degree": m.get("broadcast_degree"), "batches": m.get("batches"),
    }
    if cdf:
        row["latency_cdf"] = m.get("latency_cdf", [])
    return row


PATTERNS = ROUTED_PATTERNS


def _keys_cells(size: str) -> list[Cell]:
    keys = by_size(size, (1, 10), (1, 5, 10, 25, 50, 100), (1, 2, 5, 10, 25, 50, 100, 250))
    intervals = by_size(size, (10,), (10,), (10, 30))
    n = by_size(size, 3000, 40_000, 100_000)
    r = by_size(size, 2, 4, 8)
    return [{"dist": d, "interval_s": i, "keys": k, "pattern": p, "replicas": r, "events": n}
            for d in ("uniform", "skewed") for i in intervals for k in keys for p in PATTERNS]


def _lines(ax: Any, rows: list[Row], x: str, y: str, group: str, where: dict[str, Any], *, logx: bool = True,
           label: str | None = None) -> None:
    sel = [r for r in rows if all(r.get(k) == v for k, v in where.items())]
    for g in sorted({r[group] for r in sel}, key=str):
        pts = sorted((r[x], r[y]) for r in sel if r[group] == g and r[y] is not None)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", ms=3, label=f"{label or ''}{g}")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel(y.replace("_", " "))
    ax.legend(fontsize=7)


def _plot_keys(result: dict[str, Any], fig: Any) -> None:
    rows = result["rows"]
    i = min(r["interval_s"] for r in rows)
    axs = fig.subplots(1, 3)
    for ax, d in zip(axs[:2], ("uniform", "skewed"), strict=True):
        _lines(ax, rows, "keys", "throughput_tuples_per_s", "pattern", {"dist": d, "interval_s": i})
        ax.set_title(f"{d} keys, I={i} s: throughput", fontsize=9)
    _lines(axs[2], rows, "keys", "load_balance_factor", "pattern", {"dist": "skewed", "interval_s": i})
    axs[2].set_title("skewed: load balance (counted, 1 = even)", fontsize=9)


register(Experiment("ppoij-keys", "PPOIJ Fig. 10/11", "throughput of KP, DP, HP against the number of keys, "
                    "uniform and skewed (s=0.35)", _keys_cells, _ppoij, _plot_keys))


def _split_cells(size: str) -> list[Cell]:
    keys = by_size(size, (5, 50), (5, 10, 25, 50, 100, 250), (5, 10, 25, 50, 100, 250, 500, 1000))
    n = by_size(size, 3000, 40_000, 100_000)
    r = by_size(size, 2, 8, 8)
    return [{"dist": "skewed", "interval_s": 10, "keys": k, "pattern": p, "replicas": r, "events": n}
            for k in keys for p in PATTERNS]


def _plot_split(result: dict[str, Any], fig: Any) -> None:
    rows = result["rows"]
    a, b = fig.subplots(1, 2)
    _lines(a, [r for r in rows if r["pattern"] == "hp"], "keys", "avg_splitting_degree", "pattern", {})
    a.set_title("HP: average splitting degree (replicas per key)", fontsize=9)
    _lines(b, rows, "keys", "load_balance_factor", "pattern", {})
    b.set_title("load balance factor (max/mean stored, 1 = even)", fontsize=9)


register(Experiment("ppoij-split", "PPOIJ Fig. 12", "HP's splitting degree and every pattern's load balance "
                    "against the number of keys (skewed)", _split_cells, _ppoij, _plot_split))


def _replica_cells(size: str) -> list[Cell]:
    rs = by_size(size, (1, 2), (1, 2, 4), (1, 2, 4, 8))
    n = by_size(size, 3000, 40_000, 100_000)
    return [{"dist": "skewed", "interval_s": i, "keys": 50, "pattern": p, "replicas": r, "events": n}
            for i in by_size(size, (10,), (10,), (10, 30)) for r in rs for p in PATTERNS]


def _plot_replicas(result: dict[str, Any], fig: Any) -> None:
    rows = result["rows"]
    i = min(r["interval_s"] for r in rows)
    for r in rows:
        r["max_replica_share"] = r["comparisons_max_replica"] / max(1, r["comparisons"])
    a, b = fig.subplots(1, 2)
    _lines(a, rows, "replicas", "throughput_tuples_per_s", "pattern", {"interval_s": i}, logx=False)
    a.set_title(f"skewed, 50 keys, I={i} s: throughput", fontsize=9)
    _lines(b, rows, "replicas", "max_replica_share", "pattern", {"interval_s": i}, logx=False)
    b.set_title("share of the comparisons on the busiest replica (counted)", fontsize=9)


register(Experiment("ppoij-replicas", "PPOIJ Fig. 13", "scalability with the number of replicas (skewed, 50 keys)",
                    _replica_cells, _ppoij, _plot_replicas))


def _batch_cells(size: str) -> list[Cell]:
    bs = by_size(size, (1, 32), (1, 2, 8, 32, 128), (1, 2, 4, 8, 16, 32, 64, 128))
    n = by_size(size, 2000, 20_000, 60_000)
    r = by_size(size, 2, 4, 8)
    return [{"dist": d, "interval_s": 30, "keys": 50, "pattern": p, "replicas": r, "events": n, "batch": b}
            for d in ("uniform", "skewed") for b in bs for p in PATTERNS]


def _plot_batch(result: dict[str, Any], fig: Any) -> None:
    rows = result["rows"]
    axs = fig.subplots(1, 3)
    for ax, d in zip(axs[:2], ("uniform", "skewed"), strict=True):
        _lines(ax, rows, "batch", "throughput_tuples_per_s", "pattern", {"dist": d})
        ax.set_title(f"{d}: throughput against batch size", fontsize=9)
    _lines(axs[2], rows, "batch", "batches", "pattern", {"dist": "skewed"})
    axs[2].set_title("skewed: batches sent (counted)", fontsize=9)


register(Experiment("ppoij-batch", "PPOIJ Fig. 15", "throughput against the batch size b (I=30 s, 50 keys)",
                    _batch_cells, _ppoij, _plot_batch))


def _latency_cells(size: str) -> list[Cell]:
    n = by_size(size, 3000, 40_000, 100_000)
    r = by_size(size, 2, 4, 8)
    return [{"dist": d, "interval_s": 10, "keys": 50, "pattern": p, "replicas": r, "events": n}
            for d in ("uniform", "skewed") for p in PATTERNS]


def _latency(cell: Cell, ctx: Context) -> Row:
    return _ppoij(cell, ctx, cdf=True)


def _plot_latency(result: dict[str, Any], fig: Any) -> None:
    from matplotlib.ticker import NullFormatter

    rows = result["rows"]
    axs = fig.subplots(1, 2)
    for ax, d in zip(axs, ("uniform", "skewed"), strict=True):
        for r in rows:
            if r["dist"] == d and r["latency_cdf"]:
                ax.plot([v for _, v in r["latency_cdf"]], [p / 100 for p, _ in r["latency_cdf"]], label=r["pattern"])
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("latency (ms, from creation at the source to the sink)")
        ax.set_ylabel("CDF")
        ax.set_title(f"{d} keys, I=10 s", fontsize=9)
        ax.legend(fontsize=7)


register(Experiment("ppoij-latency", "PPOIJ Fig. 16", "latency CDF of KP, DP, HP, uniform and skewed",
                    _latency_cells, _latency, _plot_latency))


# ------------------------------------------------------------------ Scale-OIJ study: Key-OIJ and Scale-OIJ

def _team(cell: Cell, ctx: Context) -> Row:
    from oij.parallel.config import epoch_size
    from oij.parallel.runtime.emitter import chunks_from_blocks
    from oij.parallel.shared.teamrun import TeamOptions, run_chunks
    from oij.workloads import generate_blocks, resolve, with_overrides

    params = with_overrides(resolve(cell.get("preset", "scale-oij-default")), cell.get("over", {}))
    n = cell["events"]
    extra = dict(cell.get("options", {}))
    opt = TeamOptions(pattern=cell["pattern"], replicas=cell["replicas"], batch=256, epoch=1024, **extra)
    q, blocks = generate_blocks(params, n, 1)
    chunks = list(chunks_from_blocks(blocks, epoch_size(opt)))
    res, m = run_chunks(cell["pattern"], q, chunks, n, opt, ctx.runtime(cell["replicas"]))
    per = m["per_replica"]
    keep = ("effectiveness", "effectiveness_total", "lookups", "visited", "in_window", "agg_work",
            "agg_recompute_work", "agg_work_saved", "unbalancedness", "load_balance_factor", "team_size_mean",
            "unbalancedness_over_time")
    row: Row = {"wall_s": round(m["wall_s"], 4), "throughput_tuples_per_s": round(m["throughput_tuples_per_s"]),
                "rows_out": len(res.pairs) + len(res.aggregates),
                "received_per_joiner": [r["received"] for r in per]}
    row.update({k: m[k] for k in keep if k in m})
    if row.get("lookups"):
        row["visited_per_lookup"] = round(row["visited"] / row["lookups"], 2)
    return row


def _lateness_cells(size: str) -> list[Cell]:
    lates = by_size(size, (100, 4000), (100, 1000, 4000, 16000), (100, 1000, 4000, 16000, 64000))
    n = by_size(size, 3000, 40_000, 100_000)
    return [{"lateness_us": late, "over": {"lateness": late, "delay_max": late}, "pattern": p, "replicas": 2,
             "events": n} for late in lates for p in ("key", "scale")]


def _plot_lateness(result: dict[str, Any], fig: Any) -> None:
    rows = result["rows"]
    a, b = fig.subplots(1, 2)
    _lines(a, rows, "lateness_us", "throughput_tuples_per_s", "pattern", {})
    a.set_title("throughput against lateness", fontsize=9)
    _lines(b, rows, "lateness_us", "effectiveness", "pattern", {})
    b.set_title("effectiveness (Eq. 1: in-window / visited, counted)", fontsize=9)


register(Experiment("scale-lateness", "Scale-OIJ Fig. 7/11", "Key-OIJ's full scans against Scale-OIJ's index as "
                    "lateness grows: throughput and effectiveness", _lateness_cells, _team, _plot_lateness))


def _skeys_cells(size: str) -> list[Cell]:
    keys = by_size(size, (2, 100), (2, 5, 10, 100, 1000), (1, 2, 5, 10, 100, 1000, 10000))
    n = by_size(size, 3000, 40_000, 100_000)
    r = by_size(size, 2, 4, 4)
    return [{"keys": k, "over": {"keys": k}, "pattern": p, "replicas": r, "events": n,
             "options": {"schedule_every": 2048, "partitions": 256} if p == "scale" else {}}
            for k in keys for p in ("key", "scale")]


def _plot_skeys(result: dict[str, Any], fig: Any) -> None:
    rows = result["rows"]
    a, b = fig.subplots(1, 2)
    _lines(a, rows, "keys", "throughput_tuples_per_s", "pattern", {})
    a.set_title("throughput against the number of keys", fontsize=9)
    _lines(b, rows, "keys", "unbalancedness", "pattern", {})
    b.set_title("unbalancedness (Eq. 2, tuples per joiner, counted)", fontsize=9)


register(Experiment("scale-keys", "Scale-OIJ Fig. 8/13", "throughput and unbalancedness against the number of keys",
                    _skeys_cells, _team, _plot_skeys))


def _window_cells(size: str) -> list[Cell]:
    wins = by_size(size, (1000, 16000), (1000, 4000, 16000, 64000), (1000, 4000, 16000, 64000, 256000))
    n = by_size(size, 3000, 30_000, 80_000)
    return [{"window_us": w, "over": {"lower": -w}, "pattern": "scale", "replicas": 2, "events": n,
             "incremental": inc, "options": {"incremental": inc}}
            for w in wins for inc in (True, False)] + \
           [{"window_us": w, "over": {"lower": -w}, "pattern": "key", "replicas": 2, "events": n,
             "incremental": False} for w in wins]


def _plot_window(result: dict[str, Any], fig: Any) -> None:
    rows = result["rows"]
    for r in rows:
        r["engine"] = r["pattern"] + (" incremental" if r.get("incremental") else "")
    a, b = fig.subplots(1, 2)
    _lines(a, rows, "window_us", "throughput_tuples_per_s", "engine", {})
    a.set_title("throughput against window size (sum per base)", fontsize=9)
    _lines(b, rows, "window_us", "agg_work", "engine", {})
    b.set_title("aggregation work (values added or removed, counted)", fontsize=9)


register(Experiment("scale-window", "Scale-OIJ Fig. 9/16", "window size: Key-OIJ, Scale-OIJ recomputing, and "
                    "Scale-OIJ's incremental aggregation", _window_cells, _team, _plot_window))


def _rotating_cells(size: str) -> list[Cell]:
    n = by_size(size, 6000, 100_000, 200_000)
    period = by_size(size, 1000, 10_000, 20_000)
    r = by_size(size, 2, 4, 4)
    return [{"preset": "scale-oij-rotating", "over": {"hot_period": period}, "pattern": p, "replicas": r, "events": n,
             "options": {"sample_every": max(500, n // 20),
                         **({"schedule_every": max(500, n // 40), "partitions": 1024} if p == "scale" else {})}}
            for p in ("key", "scale")]


def _plot_rotating(result: dict[str, Any], fig: Any) -> None:
    ax = fig.subplots(1, 1)
    for r in result["rows"]:
        u = r.get("unbalancedness_over_time") or []
        ax.plot(range(len(u)), u, "o-", ms=3, label=r["pattern"])
    ax.set_xlabel("sample (every n/20 tuples)")
    ax.set_ylabel("unbalancedness of the joiners' recent load")
    ax.set_title("rotating hot keys: load imbalance over time (counted)", fontsize=9)
    ax.legend(fontsize=7)


register(Experiment("scale-rotating", "Scale-OIJ Fig. 14", "rotating hot keys: Key-OIJ's static hash against "
                    "Scale-OIJ's dynamic schedule, load over time", _rotating_cells, _team, _plot_rotating))
