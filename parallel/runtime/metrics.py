r"""Metrics of a parallel run, as ``oij run --metrics`` writes them (JSON-serialisable).

Data flow: the driver's measurements (:func:`oij.parallel.runtime.execute.execute_job`),
the replicas' counters and the sink's latencies --> :func:`compute_metrics` --> dict.

Definitions (W_j is replica j's *load*: the tuples it stored, i.e. its share
of the state buffers, the quantity Alg. 1 balances and Scale-OIJ Eq. 3 counts):

* ``throughput_tuples_per_s`` = input tuples / ``wall_s`` (first batch sent
  to the last result received);
* ``latency_ms`` p50/p95/p99: from a result's creation at the source (the
  largest creation time of the tuples in it, PPOIJ §5) to its arrival at the
  driver's sink;
* ``load_balance_factor`` = :math:`\max_j W_j / \bar W` (PPOIJ Fig. 12; 1 is perfect);
* ``unbalancedness`` = :math:`\frac{1}{J \bar W}\sum_j |W_j - \bar W|`
  (Scale-OIJ Eq. 2; the paper prints the sum without the absolute value,
  which is always 0 -- its text calls it a standard deviation);
* ``avg_splitting_degree``: mean of :math:`|S(k)|` over the keys seen (KP 1, DP N);
  ``broadcast_degree``: replicas reached per input tuple;
* ``bytes_written`` (tuple records written into rings; a DP broadcast batch
  counts once), ``bytes_read`` (records read by collectors), ``result_bytes``.

Creates no process and no shared memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from oij.parallel.runtime.sink import Sink
from oij.spec.model import Query


def balance(loads: list[float]) -> tuple[float, float]:
    """(load-balance factor, unbalancedness) of per-replica loads."""
    arr = np.asarray(loads, dtype=np.float64)
    mu = float(arr.mean()) if len(arr) else 0.0
    if mu <= 0:
        return 1.0, 0.0
    return float(arr.max() / mu), float(np.abs(arr - mu).sum() / (len(arr) * mu))


def compute_metrics(pattern: str, q: Query, opt: Any, drive: dict[str, Any], sink: Sink, events: int,
                    cdf_points: int = 0) -> dict[str, Any]:
    rs = drive["replica_stats"]
    n = opt.replicas
    stored = [float(s["stored"]) for s in rs]
    lbf, unb = balance(stored)
    lbf_cmp, _ = balance([float(s["comparisons"]) for s in rs])
    lat = sink.latencies_ms()
    pct = {p: (float(np.percentile(lat, int(p[1:]))) if len(lat) else None) for p in ("p50", "p95", "p99")}
    if pattern == "kp":
        split = 1.0
    elif pattern == "dp":
        split = float(n)
    else:
        counts = drive["calibration_counts"]
        seen = [k for k, c in enumerate(counts) if c]
        key2r = drive["key2r"]
        degs = [len(key2r.get(k, [0])) for k in seen]
        split = float(np.mean(degs)) if degs else 1.0
    wall = drive["wall_s"]
    tuples = drive["tuples"]
    out: dict[str, Any] = {
        "pattern": pattern,
        "replicas": n,
        "emitters": opt.emitters,
        "batch": opt.batch,
        "collector": opt.collector,
        "events": events,
        "tuples": tuples,
        "late": sink.n_late,
        "wall_s": wall,
        "throughput_tuples_per_s": (events / wall) if wall > 0 else None,
        "latency_ms": pct,
        "latency_samples": len(lat),
        "results": sink.n_pairs + sink.n_rows,
        "load_balance_factor": lbf,
        "unbalancedness": unb,
        "load_balance_factor_comparisons": lbf_cmp,
        "avg_splitting_degree": split,
        "broadcast_degree": (drive["deliveries"] / tuples) if tuples else None,
        "bytes_written": drive["bytes_written"],
        "bytes_read": drive["bytes_read"],
        "result_bytes": drive["result_bytes"],
        "batches": drive["batches"],
        "epochs": drive["epochs"],
        "per_replica": [{k: v for k, v in s.items() if k != "trace"} for s in rs],
    }
    if pattern == "hp":
        out["theta"] = opt.theta
        out["max_split"] = opt.max_split or n
        out["map_applied_at_tuple"] = drive["map_applied_at"]
        out["split_keys"] = sum(1 for v in drive["key2r"].values() if len(v) > 1)
    if cdf_points and len(lat):
        qs = np.linspace(0, 100, cdf_points + 1)
        out["latency_cdf"] = [[float(p), float(v)] for p, v in zip(qs, np.percentile(lat, qs), strict=True)]
    return out
