"""Turn the raw benchmark numbers in bench/results/*.json into PNG plots in bench/plots/.

Usage: ``python bench/plot.py`` (needs matplotlib: ``pip install -e ".[bench]"``).
Each plot is drawn only if its results file exists; the script never measures
anything itself.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

RESULTS = Path(__file__).with_name("results")
PLOTS = Path(__file__).with_name("plots")


def _load(name: str) -> Any:
    path = RESULTS / name
    if not path.exists():
        print(f"skip {name}: not measured yet", file=sys.stderr)
        return None
    return json.loads(path.read_text())


def oracle_memory(d: Any) -> None:
    xs = [m["tuples"] for m in d["memory"]]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(xs, [m["max_rss_mib"] for m in d["memory"]], "o-", label="peak RSS (MiB)")
    ax.plot(xs, [m["stored_peak_sampled"] / 10 for m in d["memory"]], "s--", label="oracle state (tuples / 10)")
    ax.set_xscale("log")
    ax.set_xlabel("stream length (tuples)")
    ax.set_title(f"Oracle memory, {d['preset']}")
    ax.legend()
    _save(fig, "oracle_memory.png")


def parallel_balance(d: Any) -> None:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.2))
    for pattern in ("kp", "dp", "hp"):
        rows = [r for r in d["rows"] if r["pattern"] == pattern]
        keys = [r["keys"] for r in rows]
        a1.plot(keys, [r["load_balance_factor"] for r in rows], "o-", label=pattern)
        a2.plot(keys, [r["avg_splitting_degree"] for r in rows], "o-", label=pattern)
    for ax, title in ((a1, "load-balance factor (max/avg)"), (a2, "average splitting degree")):
        ax.set_xscale("log")
        ax.set_xlabel("keys")
        ax.set_title(title)
        ax.legend()
    fig.suptitle(f"{d['preset']}, {d['replicas']} replicas (counted; cf. PPOIJ Fig. 12)")
    _save(fig, "parallel_balance.png")


def scale_figures(d: Any) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    lat = d["fig7_11_lateness"]
    xs = [r["lateness_us"] for r in lat]
    for p in ("key", "scale"):
        axes[0].plot(xs, [r[p]["effectiveness"] for r in lat], "o-", label=p)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("lateness (us)")
    axes[0].set_title("effectiveness, Eq. 1 (Fig. 7/11)")
    keys = d["fig13c_keys"]
    xs = [r["keys"] for r in keys]
    for p in ("key", "scale"):
        axes[1].plot(xs, [r[p]["unbalancedness"] for r in keys], "o-", label=p)
    axes[1].set_xscale("log")
    axes[1].set_xlabel("keys")
    axes[1].set_title("unbalancedness, Eq. 2 (Fig. 13c)")
    win = d["fig16_window"]
    axes[2].plot([r["window_us"] for r in win], [r["incremental"]["agg_work_saved"] for r in win], "o-")
    axes[2].set_xscale("log")
    axes[2].set_xlabel("window (us)")
    axes[2].set_title("aggregation work saved (Fig. 16)")
    for ax in axes[:2]:
        ax.legend()
    _save(fig, "scaleoij.png")


def spark_scaling(d: Any) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.2))
    by: dict[str, list[tuple[int, float]]] = {}
    for r in d["scaling"]:
        by.setdefault(r["preset"], []).append((r["per_side"], r["wall_s"]))
    for preset, pts in by.items():
        pts.sort()
        ax.plot([p for p, _ in pts], [w for _, w in pts], "o-", label=preset)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tuples per side")
    ax.set_ylabel("seconds")
    ax.set_title("Spark oracle, local mode, 2 cores")
    ax.legend()
    _save(fig, "spark_scaling.png")


def _save(fig: Any, name: str) -> None:
    PLOTS.mkdir(exist_ok=True)
    fig.tight_layout()
    fig.savefig(PLOTS / name, dpi=110)
    plt.close(fig)
    print(f"wrote {PLOTS / name}")


def main() -> int:
    for name, draw in (
        ("oracle.json", oracle_memory),
        ("parallel_balance.json", parallel_balance),
        ("scale.json", scale_figures),
        ("spark.json", spark_scaling),
    ):
        d = _load(name)
        if d is not None:
            draw(d)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
