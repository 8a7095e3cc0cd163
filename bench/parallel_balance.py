"""Load-balance factor of KP, DP and HP on ppoij-skewed (s = 0.35), 8 replicas, 5..1000 keys (PPOIJ Fig. 12).

Counted, not timed: the load of a replica is the number of tuples it stores
(its share of the state), which the engines count exactly; the numbers do
not depend on the hardware.  Writes bench/results/parallel_balance.json.

    python bench/parallel_balance.py [--events N] [--replicas 8]
"""

from __future__ import annotations

import argparse
import json
import os

from oij.workloads import generate_blocks, resolve, with_overrides
from parallel.patterns.engine import epoch_size, run_chunks
from parallel.runtime.driver import JobOptions, Runtime
from parallel.runtime.emitter import chunks_from_blocks

KEYS = (5, 10, 25, 50, 100, 250, 500, 1000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--replicas", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "parallel_balance.json"))
    a = ap.parse_args()
    rows = []
    with Runtime(a.replicas) as rt:
        for k in KEYS:
            p = with_overrides(resolve("ppoij-skewed"), {"keys": k})
            for pattern in ("kp", "dp", "hp"):
                opt = JobOptions(pattern, replicas=a.replicas, batch=32, calibration=a.events // 100, sync_map=True)
                q, blocks = generate_blocks(p, a.events, 1)
                chunks = list(chunks_from_blocks(blocks, epoch_size(opt)))
                _, m = run_chunks(pattern, q, chunks, a.events, opt, rt)
                row = {"keys": k, "pattern": pattern, "load_balance_factor": m["load_balance_factor"],
                       "unbalancedness": m["unbalancedness"], "avg_splitting_degree": m["avg_splitting_degree"],
                       "broadcast_degree": m["broadcast_degree"],
                       "throughput_tuples_per_s": m["throughput_tuples_per_s"]}
                rows.append(row)
                print(json.dumps(row))
    with open(a.out, "w") as f:
        json.dump({"preset": "ppoij-skewed", "events": a.events, "replicas": a.replicas,
                   "note": "HP loads count the whole run, including the first 1% (calibration) routed as KP",
                   "rows": rows},
                  f, indent=1)


if __name__ == "__main__":
    main()
