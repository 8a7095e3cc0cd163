"""Benchmark: workload generation speed and peak memory, to Parquet and to oij-jsonl.

Usage::

    python bench/generate.py [--events 10000000] [--preset scale-oij-default] [--seed 0]
                             [--out bench/results/generate.json]

Each measurement runs ``oij generate PRESET -n EVENTS -o FILE --no-progress``
in a fresh process under ``/usr/bin/time -v`` (wall time, CPU time, peak
RSS) and also measures an in-process "generate only" pass (blocks, no
output) for reference.  Runs are sequential (the machine is shared).
Events/s counts every row written (tuples + watermarks + end); tuples/s
counts tuples only; events_per_cpu_s divides by user + system CPU time,
which is less sensitive to other load on the machine.  Each measurement is
repeated ``--repeat`` times and the fastest run is kept (all wall times are
recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _grab(pattern: str, text: str) -> str:
    """The first group of ``pattern`` in ``text`` (the output of /usr/bin/time -v)."""
    m = re.search(pattern, text)
    if m is None:
        raise RuntimeError(f"no match for {pattern!r} in:\n{text}")
    return m.group(1)


def run_cli(preset: str, events: int, seed: int, path: str) -> dict[str, float | int | str]:
    cmd = ["oij", "generate", preset, "-n", str(events), "-s", str(seed), "-o", path, "--no-progress"]
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    m = re.search(r"wrote (\d+) tuples, (\d+) watermarks \((\d+) events\)", r.stderr)
    assert m, r.stderr
    rss = int(_grab(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr))
    user = float(_grab(r"User time \(seconds\): ([\d.]+)", r.stderr))
    sys_ = float(_grab(r"System time \(seconds\): ([\d.]+)", r.stderr))
    rows = int(m.group(3))
    return {
        "command": " ".join(cmd),
        "tuples": int(m.group(1)),
        "watermarks": int(m.group(2)),
        "events": rows,
        "wall_s": round(wall, 3),
        "cpu_s": round(user + sys_, 3),
        "events_per_s": round(rows / wall),
        "tuples_per_s": round(int(m.group(1)) / wall),
        "events_per_cpu_s": round(rows / (user + sys_)),
        "peak_rss_mib": round(rss / 1024, 1),
        "bytes": os.path.getsize(path),
    }


def generate_only(preset: str, events: int, seed: int) -> dict[str, float | int]:
    from oij.workloads import generate_blocks

    t0 = time.perf_counter()
    _, blocks = generate_blocks(preset, events, seed)
    rows = sum(len(b) for b in blocks)
    wall = time.perf_counter() - t0
    return {"events": rows, "wall_s": round(wall, 3), "events_per_s": round(rows / wall)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--preset", default="scale-oij-default,ppoij-skewed", help="comma-separated presets")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench/results/generate.json")
    ap.add_argument("--repeat", type=int, default=2, help="runs per measurement; the fastest (wall) is kept")
    ap.add_argument("--dir", default=None, help="where to write the generated files (default: a temp dir)")
    a = ap.parse_args()
    res: dict[str, object] = {
        "events_requested": a.events,
        "seed": a.seed,
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "load_avg_before": os.getloadavg(),
        },
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "command": " ".join(["python", *sys.argv]),
    }
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        for preset in a.preset.split(","):
            r: dict[str, object] = {"generate_only": generate_only(preset, a.events, a.seed)}
            print(preset, "generate only:", r["generate_only"], flush=True)
            for ext in ("parquet", "jsonl"):
                path = str(Path(d) / f"bench.{ext}")
                runs = [run_cli(preset, a.events, a.seed, path) for _ in range(a.repeat)]
                best = min(runs, key=lambda x: float(x["wall_s"]))
                best["all_wall_s"] = ", ".join(str(x["wall_s"]) for x in runs)
                r[ext] = best
                print(preset, f"{ext}:", r[ext], flush=True)
                os.unlink(path)
            res[preset] = r
    machine = res["machine"]
    assert isinstance(machine, dict)
    machine["load_avg_after"] = os.getloadavg()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
