"""Throughput and latency of the parallel patterns on this machine (timed; run on an idle machine).

Runs ``oij run --preset ...`` as subprocesses (each with its own replicas) and
collects their ``--metrics`` JSON into bench/results/parallel_throughput.json:

* KP with 1 and 2 replicas on scale-oij-default (batch 1024);
* DP and HP with 2 replicas on the same workload;
* p99 latency of KP with 2 replicas at half the measured peak rate (``--rate``).

    python bench/parallel_throughput.py [--events N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any


def run(args: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.json")
        subprocess.run([sys.executable, "-m", "oij.cli", "run", *args, "--no-output", "--metrics", path],
                       check=True, stderr=subprocess.DEVNULL)
        with open(path) as f:
            m: dict[str, Any] = json.load(f)
    m.pop("per_replica", None)
    print(json.dumps({k: m[k] for k in ("pattern", "replicas", "events", "wall_s", "throughput_tuples_per_s",
                                          "latency_ms", "load_balance_factor")}), flush=True)
    return m


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "parallel_throughput.json"))
    a = ap.parse_args()
    base = ["--preset", "scale-oij-default", "--events", str(a.events), "--batch", "1024"]
    rows = [run([*base, "--pattern", "kp", "--replicas", "1"]), run([*base, "--pattern", "kp", "--replicas", "2"]),
            run([*base, "--pattern", "dp", "--replicas", "2"]), run([*base, "--pattern", "hp", "--replicas", "2"])]
    peak = rows[1]["throughput_tuples_per_s"]
    half = run(["--preset", "scale-oij-default", "--events", str(a.events // 2), "--batch", "64", "--pattern", "kp",
                "--replicas", "2", "--rate", str(peak / 2)])
    half["rate"] = peak / 2
    with open(a.out, "w") as f:
        json.dump({"machine": f"{os.cpu_count()} cores", "runs": rows, "half_peak_latency": half}, f, indent=1)


if __name__ == "__main__":
    main()
