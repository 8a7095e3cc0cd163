"""Benchmark: the Spark oracle's time vs input size, and plain vs bucketed vs bucketed+salted range join.

Usage::

    python bench/spark_bench.py scaling [--sizes 1e5,1e6,1e7] [--presets scale-oij-default,ppoij-skewed]
    python bench/spark_bench.py methods [--per-side 100000]
    (both write/merge bench/results/spark.json; --out to change)

Each workload is generated once with ``oij.workloads.write_workload`` to
Parquet (``--tmp`` dir; generation time recorded separately) and read by
Spark through the Parquet fast path.  The measured time covers the whole
oracle: reading, row validation excluded, watermark prefix scan, late
marking, the range join and the aggregation, executed in full with Spark's
``noop`` sink (every row is computed, nothing is written, so the disk does
not dominate).  Sizes are tuples *per side* (a workload of n per side has
2n tuples plus watermarks).  One SparkSession, ``local[*]``, driver memory 4g.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _generate(tmp: str, preset: Any, name: str, per_side: int, seed: int) -> tuple[str, float]:
    from oij.workloads import write_workload

    path = os.path.join(tmp, f"{name}-{per_side}.parquet")
    t = time.perf_counter()
    if not os.path.exists(path):
        write_workload(path, preset, 2 * per_side, seed)
    return path, time.perf_counter() - t


def _run(spark: Any, path: str, method: str, count_output: bool = False) -> dict[str, Any]:
    from oij.spark.frames import read_parquet_events
    from oij.spark.oracle import SparkOracleOptions, spark_oracle

    t = time.perf_counter()
    q, frame = read_parquet_events(spark, path)
    res = spark_oracle(spark, q, frame, SparkOracleOptions(method=cast(Any, method)))  # a name from METHODS
    out = res.frame()
    n_out = None
    if count_output or os.environ.get("OIJ_BENCH_COUNT"):
        n_out = out.groupBy("kind").count().collect()
    else:
        out.write.format("noop").mode("overwrite").save()
    wall = time.perf_counter() - t
    res.release()
    rec: dict[str, Any] = {"method": method, "wall_s": round(wall, 2), "plan": res.plan}
    if n_out is not None:
        rec["output_rows"] = {r["kind"]: r["count"] for r in n_out}
    return rec


def _session() -> Any:
    from oij.spark.session import spark_session

    return spark_session("local[*]", driver_memory="4g", app_name="oij-bench")


def _load(out: str) -> dict[str, Any]:
    if not os.path.exists(out):
        return {}
    with open(out) as f:
        data: dict[str, Any] = json.load(f)
    return data


def _save(out: str, key: str, value: Any) -> None:
    data = _load(out)
    data[key] = value
    data["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(data, f, indent=2)


def scaling(args: argparse.Namespace) -> None:
    """Spark oracle time (salted) per preset and size; stops a preset once a run exceeds --budget seconds."""
    from oij.workloads import PRESETS

    spark = _session()
    rows: list[dict[str, Any]] = []
    for name in args.presets.split(","):
        for size in [int(float(s)) for s in args.sizes.split(",")]:
            path, gen_s = _generate(args.tmp, PRESETS[name], name, size, args.seed)
            print(f"{name} {size}/side: generated in {gen_s:.1f}s", file=sys.stderr, flush=True)
            rec = _run(spark, path, args.method)
            rec.update(preset=name, per_side=size, tuples=2 * size, generate_s=round(gen_s, 2),
                       file_mb=round(os.path.getsize(path) / 2**20, 1))
            rec["tuples_per_s"] = round(2 * size / rec["wall_s"])
            print(json.dumps(rec), file=sys.stderr, flush=True)
            rows.append(rec)
            _save(args.out, "scaling", rows)
            if not args.keep:
                os.remove(path)
            if rec["wall_s"] > args.budget:
                break


def methods(args: argparse.Namespace) -> None:
    """plain vs bucketed vs salted on ppoij-skewed, and on a skewed large-window aggregate variant."""
    from oij.workloads import PRESETS, with_overrides

    spark = _session()
    base = PRESETS["ppoij-skewed"]
    cases = [
        ("ppoij-skewed", base, args.per_side),
        # the window covers the whole stream: few buckets per key, so the hot key is one huge join group
        ("ppoij-skewed-wide-count", with_overrides(base, {"lower": -(10**12), "aggregate": "count"}),
         args.wide_per_side),
    ]
    wanted = args.cases.split(",")
    warm, _ = _generate(args.tmp, base, "warmup", 20_000, args.seed)
    _run(spark, warm, "salted")  # JIT and first-job costs are not charged to the first method measured
    rows = [r for r in _load(args.out).get("methods", []) if r["workload"] not in wanted]
    for name, params, size in cases:
        if name not in wanted:
            continue
        path, _ = _generate(args.tmp, params, name, size, args.seed)
        for m in args.methods.split(","):
            rec = _run(spark, path, m)
            rec.update(workload=name, per_side=size, tuples=2 * size)
            print(json.dumps(rec), file=sys.stderr, flush=True)
            rows.append(rec)
            _save(args.out, "methods", rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["scaling", "methods"])
    p.add_argument("--sizes", default="1e5,1e6,1e7", help="tuples per side")
    p.add_argument("--presets", default="scale-oij-default,ppoij-skewed")
    p.add_argument("--method", default="salted")
    p.add_argument("--methods", default="plain,bucketed,salted")
    p.add_argument("--per-side", type=int, default=100_000)
    p.add_argument("--wide-per-side", type=int, default=20_000)
    p.add_argument("--cases", default="ppoij-skewed,ppoij-skewed-wide-count", help="methods: which workloads")
    p.add_argument("--budget", type=float, default=900.0, help="skip larger sizes after a run this long (s)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tmp", default="/tmp/oij-spark-bench")
    p.add_argument("--keep", action="store_true", help="keep the generated Parquet files")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "spark.json"))
    args = p.parse_args()
    os.makedirs(args.tmp, exist_ok=True)
    scaling(args) if args.what == "scaling" else methods(args)


if __name__ == "__main__":
    main()
