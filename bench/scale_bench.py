"""Scale-OIJ experiments: the shapes of Figs. 7/11, 13c, 16 and 14 with counted figures next to times.

Usage: ``python bench/scale_bench.py [--events N] [--out bench/results/scale.json] [--only fig7,fig13c,fig16,fig14]``

Every run is checked: ``key`` and ``scale`` must emit the same results on
the same stream (the differential tests compare both with the oracle).
Counted figures (visited entries, in-window entries, aggregation work,
tuples per joiner) do not depend on the machine; times do (2 shared cores
here: joiners > cores are time-sliced).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from typing import Any

from oij.workloads import generate_blocks, resolve, with_overrides
from parallel.runtime.driver import Runtime
from parallel.runtime.emitter import chunks_from_blocks
from parallel.shared.teamrun import TeamOptions, epoch_size, run_chunks


def one(rt: Runtime, pattern: str, preset: str, events: int, over: dict[str, Any],
        **kw: Any) -> tuple[Any, dict[str, Any]]:
    params = with_overrides(resolve(preset), over)
    q, blocks = generate_blocks(params, events, 1)
    opt = TeamOptions(pattern=pattern, replicas=kw.pop("replicas", 2), batch=256, **kw)
    chunks = list(chunks_from_blocks(blocks, epoch_size(opt)))
    res, m = run_chunks(pattern, q, chunks, events, opt, rt)
    keep = ("pattern", "wall_s", "throughput_tuples_per_s", "latency_ms", "effectiveness", "effectiveness_total",
            "lookups", "visited", "in_window", "search_steps", "agg_work", "agg_recompute_work", "agg_work_saved",
            "unbalancedness", "load_balance_factor", "reschedules", "team_size_mean", "team_size_max",
            "unbalancedness_over_time", "hazard_waits")
    out = {k: m[k] for k in keep if k in m}
    out["per_joiner_received"] = [s["received"] for s in m["per_replica"]]
    out["per_joiner_busy_s"] = [round(s.get("join_s", 0.0), 4) for s in m["per_replica"]]
    return res, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=40000)
    ap.add_argument("--out", default="bench/results/scale.json")
    ap.add_argument("--only", default="fig7,fig13c,fig16,fig14")
    a = ap.parse_args()
    only = set(a.only.split(","))
    report: dict[str, Any] = {"machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
                              "events": a.events, "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    with Runtime(4, "spawn") as rt:
        if "fig7" in only:  # Figs. 7 and 11: lateness
            rows = []
            for late in (100, 1000, 4000, 16000):
                over = {"lateness": late, "delay_max": late}
                rk, mk = one(rt, "key", "scale-oij-default", a.events, over)
                rs, ms = one(rt, "scale", "scale-oij-default", a.events, over)
                assert rk == rs
                rows.append({"lateness_us": late, "key": mk, "scale": ms})
                print("fig7", late, mk["effectiveness"], mk["throughput_tuples_per_s"], ms["throughput_tuples_per_s"])
            report["fig7_11_lateness"] = rows
        if "fig13c" in only:  # Fig. 13c: unbalancedness vs keys (4 joiners)
            rows = []
            for keys in (2, 5, 10, 100, 1000):
                over = {"keys": keys}
                rk, mk = one(rt, "key", "scale-oij-default", a.events, over, replicas=4)
                rs, ms = one(rt, "scale", "scale-oij-default", a.events, over, replicas=4, schedule_every=2048,
                             partitions=256)
                assert rk == rs
                rows.append({"keys": keys, "key": mk, "scale": ms})
                print("fig13c", keys, mk["unbalancedness"], ms["unbalancedness"], ms["team_size_mean"])
            report["fig13c_keys"] = rows
        if "fig16" in only:  # Fig. 16: window size, incremental vs recomputation
            rows = []
            for win in (1000, 4000, 16000, 64000):
                over = {"lower": -win}
                ri, mi = one(rt, "scale", "scale-oij-default", a.events, over, incremental=True)
                rr, mr = one(rt, "scale", "scale-oij-default", a.events, over, incremental=False)
                assert ri == rr
                rows.append({"window_us": win, "incremental": mi, "recompute": mr})
                print("fig16", win, mi["agg_work"], mr["agg_work"], mi["throughput_tuples_per_s"],
                      mr["throughput_tuples_per_s"])
            report["fig16_window"] = rows
        if "fig14" in only:  # Fig. 14: rotating hot keys, 4 joiners, loads over time
            n = max(a.events, 200000)
            over = {"hot_period": 20000}
            rk, mk = one(rt, "key", "scale-oij-rotating", n, over, replicas=4, sample_every=10000)
            rs, ms = one(rt, "scale", "scale-oij-rotating", n, over, replicas=4, sample_every=10000,
                         schedule_every=5000, partitions=1024)
            assert rk == rs
            report["fig14_rotating"] = {"events": n, "key": mk, "scale": ms}
            print("fig14", mk["unbalancedness_over_time"], ms["unbalancedness_over_time"])
    try:
        with open(a.out) as f:
            old = json.load(f)
    except (OSError, ValueError):
        old = {}
    old.update(report)
    report = old
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
