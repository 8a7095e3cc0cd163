"""``oij bench oracle``: throughput and memory of the reference oracle (a benchmark, never a test).

Method (docs/reference.rst has the write-up):

* *operator alone*: the workload's events are generated into a list first;
  the clock (process CPU time, best and median of ``--repeat`` runs, because
  this machine is shared) covers only the oracle's ``on_*`` calls, with the
  emitted pairs drained every 2^16 events;
* *end to end*: the workload is written to an oij-jsonl file, then
  ``oij join FILE -o /dev/null`` is timed in-process (in arrival order and in
  the canonical order: the block path of :mod:`reference.blocks`, and the
  event path again with ``OIJ_JOIN_PATH=event``), next to a bare loop that
  only decodes the lines (orjson, the decoder the reader uses, and the
  standard library's json, for scale);
* *peak memory*: a fresh process per size streams the workload from the
  lazy generator through the oracle and reports its maximum resident set.

Counted figures (pairs, stored tuples, visited entries) come with the times,
because they do not depend on the machine.  Raw numbers go to
``--out`` (default ``./oracle.json``; the project keeps its own in ``bench/results/``);
``bench/plot.py`` draws them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from typing import Any

from oij.commands.common import UsageError
from oij.io.atomic import write_text


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench", help="benchmarks (raw numbers go to a JSON file: --out, default in .)")
    bsub = p.add_subparsers(dest="bench", metavar="BENCH")
    bsub.required = True
    o = bsub.add_parser("oracle", help="events/s and peak memory of the reference oracle")
    o.add_argument("--preset", default="scale-oij-default", help="workload preset (default scale-oij-default)")
    o.add_argument("--events", type=int, default=1_000_000, help="tuples for the throughput runs")
    o.add_argument("--repeat", type=int, default=3, help="runs of the operator-alone measurement")
    o.add_argument(
        "--memory-sizes", default="100000,1000000,10000000", help="comma-separated stream lengths for peak memory"
    )
    o.add_argument("--seed", type=int, default=1)
    o.add_argument("--out", default="oracle.json", help="where the raw numbers go (default ./oracle.json)")
    o.set_defaults(func=run_oracle)
    m = bsub.add_parser("memory", help="peak memory of oij join and every pattern as the stream grows (flat = bounded)")
    m.add_argument("--presets", default="scale-oij-default,scale-oij-rotating",
                   help="comma-separated workload presets (default: 100 keys; 10K keys whose hot set rotates)")
    m.add_argument("--sizes", default="1000000,10000000", help="comma-separated stream lengths in tuples")
    m.add_argument("--commands", default="join,kp,dp,hp,key,scale",
                   help="join (oij join) and/or patterns (oij run --pattern P)")
    m.add_argument("--mode", choices=["default", "streamed"], default="default",
                   help="default: the commands' default flags, the canonical output written to a file (sorted "
                   "runs spilled beside it); streamed: oij join --order arrival -o /dev/null, oij run --no-output")
    m.add_argument("--replicas", type=int, default=2)
    m.add_argument("--skip", default="", help="PRESET:COMMAND:SIZE triples to leave out (comma-separated)")
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--out", default="memory.json", help="where the raw numbers go (default ./memory.json)")
    m.set_defaults(func=run_memory)
    o.add_argument("--quick", action="store_true", help="20,000 tuples, one run, one memory size (CI smoke)")
    m.add_argument("--quick", action="store_true", help="20,000 tuples, join and kp only (CI smoke)")
    from oij.commands import peers

    peers.register(bsub)
    from oij.commands import kitpower

    kitpower.register(bsub)
    from oij.bench import experiments

    ls = bsub.add_parser("list", help="every experiment, with the figure it reproduces")
    ls.set_defaults(func=run_list)
    pl = bsub.add_parser("plot", help="redraw NAME.png and NAME.svg from every NAME.json in DIR")
    pl.add_argument("dir", help="a directory of raw results (oij bench EXPERIMENT --out DIR)")
    pl.add_argument("--to", default=None, help="where the plots go (default: DIR)")
    pl.set_defaults(func=run_plot)
    for e in experiments().values():
        x = bsub.add_parser(e.name, help=f"{e.figure}: {e.title}")
        size = x.add_mutually_exclusive_group()
        size.add_argument("--quick", dest="size", action="store_const", const="quick",
                          help="a few thousand tuples, 2 replicas (CI smoke)")
        size.add_argument("--full", dest="size", action="store_const", const="full",
                          help="the sizes of the docs' figures")
        x.add_argument("--out", default=".", help="directory for NAME.json and NAME.csv (default .)")
        x.add_argument("--plot", action="store_true", help="also draw NAME.png and NAME.svg into --out")
        x.add_argument("--no-progress", action="store_true", help="no progress bar")
        x.set_defaults(func=run_named, experiment=e.name, size="default")


OWN_FLAGS = {"oracle": "the reference oracle: events/s and peak memory", "memory": "peak memory as the stream grows",
             "peers": "oij against the numpy floor, Flink and Spark",
             "kit-power": "mutation score of oij conform on independent implementations (needs oij[mutation])"}


def _out_file(out: str, name: str) -> str:
    """``--out`` may name a file or a directory (then ``DIR/NAME.json``, like every other experiment)."""
    return os.path.join(out, f"{name}.json") if os.path.isdir(out) or out.endswith(os.sep) else out


def run_list(args: argparse.Namespace) -> int:
    from oij.bench import experiments

    print(f"{'experiment':<16} {'reproduces':<22} what")
    for e in experiments().values():
        print(f"{e.name:<16} {e.figure:<22} {e.title}")
    for name, what in OWN_FLAGS.items():
        print(f"{name:<16} {'this project':<22} {what} (own flags: oij bench {name} --help)")
    print("\nrun: oij bench NAME [--quick|--full] [--out DIR] [--plot]; redraw: oij bench plot DIR")
    return 0


def _need_matplotlib() -> None:
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError('plots need matplotlib: pip install -e ".[bench]"')


def run_plot(args: argparse.Namespace) -> int:
    from oij.bench import plot_dir

    _need_matplotlib()
    if not os.path.isdir(args.dir):
        raise UsageError(f"{args.dir}: not a directory")
    written = plot_dir(args.dir, args.to)
    if not written:
        raise UsageError(f"{args.dir}: no experiment results (NAME.json) to plot")
    for w in written:
        print(w)
    return 0


def run_named(args: argparse.Namespace) -> int:
    from oij.bench import experiments, plot_dir, run_experiment

    e = experiments()[args.experiment]
    if args.plot:
        _need_matplotlib()
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out {args.out}: not a directory")
    res = run_experiment(e, args.size, args.out, progress=not args.no_progress)
    print(f"{e.name} ({e.figure}, {args.size}): {len(res['rows'])} runs in {res['seconds']} s -> "
          f"{os.path.join(args.out, e.name)}.json/.csv")
    if args.plot:
        for w in plot_dir(args.out):
            if os.path.basename(w).startswith(e.name + "."):
                print(w)
    return 0


def _workload(preset: str) -> Any:
    from oij.workloads import PRESETS, ParamError, resolve

    try:
        p = resolve(preset)
    except (ParamError, KeyError) as e:
        raise UsageError(f"--preset: {e}; known: {', '.join(sorted(PRESETS))}") from None
    return replace(p, aggregate=None)  # the oracle benchmark is in pairs mode


def _operator_alone(preset: str, events: int, seed: int, repeat: int) -> dict[str, Any]:
    from oij.workloads import generate
    from reference.oracle import Oracle
    from spec.model import StreamTuple, Watermark

    q, it = generate(_workload(preset), events, seed)
    evs = list(it)
    times: list[float] = []
    pairs = 0
    peak_state = 0
    for _ in range(repeat):
        o = Oracle(q)
        on_tuple, on_watermark = o.on_tuple, o.on_watermark
        pairs = 0
        t0 = time.process_time()
        for n, e in enumerate(evs):
            if type(e) is StreamTuple:
                on_tuple(e)
            elif type(e) is Watermark:
                on_watermark(e)
            else:
                o.on_end()
            if n & 0xFFFF == 0:
                pairs += len(o.pairs)
                o.pairs.clear()
                peak_state = max(peak_state, o.stored)
        times.append(time.process_time() - t0)
        pairs += len(o.pairs)
    best = min(times)
    return {
        "events": len(evs),
        "tuples": events,
        "pairs": pairs,
        "late": len(o.late),
        "cpu_s": times,
        "events_per_s_best": len(evs) / best,
        "events_per_s_median": len(evs) / statistics.median(times),
        "stored_peak_sampled": peak_state,
    }


def _join_cli(argv: list[str]) -> int:
    """Run ``oij join ARGV`` in this process (commands may not import the CLI module above them)."""
    import argparse

    from oij.commands import join

    parser = argparse.ArgumentParser(prog="oij")
    join.register(parser.add_subparsers())
    args = parser.parse_args(["join", *argv])
    rc: int = args.func(args)
    return rc


def _end_to_end(preset: str, events: int, seed: int) -> dict[str, Any]:
    import json as stdjson

    import orjson

    from oij.workloads import write_workload

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "w.jsonl")
        write_workload(path, _workload(preset), events, seed)
        size = os.path.getsize(path)

        def bare(loads: Any) -> float:
            t0 = time.process_time()
            with open(path, "rb") as f:
                for line in f:
                    loads(line)
            return time.process_time() - t0

        t_orjson = min(bare(orjson.loads) for _ in range(2))
        t_std = bare(stdjson.loads)
        t0 = time.process_time()
        rc = _join_cli([path, "-o", os.devnull, "--no-progress", "--order", "arrival"])
        t_join_arrival = time.process_time() - t0
        t0 = time.process_time()
        rc2 = _join_cli([path, "-o", os.devnull, "--no-progress"])
        t_join_canonical = time.process_time() - t0
        old = os.environ.get("OIJ_JOIN_PATH")
        os.environ["OIJ_JOIN_PATH"] = "event"
        try:
            t0 = time.process_time()
            rc3 = _join_cli([path, "-o", os.devnull, "--no-progress"])
            t_join_event = time.process_time() - t0
        finally:
            if old is None:
                del os.environ["OIJ_JOIN_PATH"]
            else:
                os.environ["OIJ_JOIN_PATH"] = old
    if rc or rc2 or rc3:
        raise RuntimeError("oij join failed in the benchmark")
    return {
        "file_bytes": size,
        "bare_parse_orjson_s": t_orjson,
        "bare_parse_stdlib_json_s": t_std,
        "join_arrival_order_s": t_join_arrival,
        "join_canonical_order_s": t_join_canonical,
        "join_canonical_order_event_path_s": t_join_event,
        "block_path_speedup": t_join_event / t_join_canonical,
        "ratio_vs_orjson_parse": t_join_arrival / t_orjson,
        "ratio_vs_stdlib_json_parse": t_join_arrival / t_std,
    }


def _vm_hwm_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def memory_probe(preset: str, events: int, seed: int) -> dict[str, Any]:
    """Stream ``events`` tuples through the oracle, draining output; return peak RSS and state.

    Peak RSS is VmHWM of /proc/self/status: unlike ``ru_maxrss``, it belongs to
    this process's own address space and does not inherit the parent's peak
    across fork+exec.
    """

    from oij.workloads import generate
    from reference.oracle import Oracle
    from spec.model import StreamTuple, Watermark

    q, it = generate(_workload(preset), events, seed)
    o = Oracle(q)
    peak_state = 0
    pairs = 0
    t0 = time.perf_counter()
    for n, e in enumerate(it):
        if type(e) is StreamTuple:
            o.on_tuple(e)
        elif type(e) is Watermark:
            o.on_watermark(e)
        else:
            o.on_end()
        if n & 0x3FFF == 0:
            pairs += len(o.pairs)
            o.pairs.clear()
            o.late.clear()
            peak_state = max(peak_state, o.stored)
    pairs += len(o.pairs)
    return {
        "tuples": events,
        "max_rss_mib": _vm_hwm_kib() / 1024,
        "stored_peak_sampled": peak_state,
        "pairs": pairs,
        "wall_s": time.perf_counter() - t0,
    }


def run_oracle(args: argparse.Namespace) -> int:
    if args.quick:
        args.events, args.repeat, args.memory_sizes = 20_000, 1, "20000"
    args.out = _out_file(args.out, "oracle")
    if args.events < 1 or args.repeat < 1:
        raise UsageError("--events and --repeat must be >= 1")
    try:
        sizes = [int(x) for x in args.memory_sizes.split(",") if x]
    except ValueError:
        raise UsageError(f"--memory-sizes: not a list of integers: {args.memory_sizes!r}") from None
    _workload(args.preset)
    out: dict[str, Any] = {
        "benchmark": "oracle",
        "preset": args.preset,
        "seed": args.seed,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "command": "oij bench oracle " + " ".join(sys.argv[3:]),
    }
    print(f"operator alone on {args.preset}, {args.events:,} tuples, best of {args.repeat} ...", file=sys.stderr)
    out["operator_alone"] = _operator_alone(args.preset, args.events, args.seed, args.repeat)
    print(f"  {out['operator_alone']['events_per_s_best']:,.0f} events/s", file=sys.stderr)
    print("end to end from oij-jsonl ...", file=sys.stderr)
    out["end_to_end"] = _end_to_end(args.preset, args.events, args.seed)
    print(f"  ratio to a bare orjson parse loop: {out['end_to_end']['ratio_vs_orjson_parse']:.2f}", file=sys.stderr)
    out["memory"] = []
    for n in sizes:
        print(f"peak memory at {n:,} tuples ...", file=sys.stderr)
        code = (
            "import json, sys; from oij.commands.bench import memory_probe; "
            f"print(json.dumps(memory_probe({args.preset!r}, {n}, {args.seed})))"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"memory probe failed: {r.stderr.strip().splitlines()[-1:]}")
        m = json.loads(r.stdout)
        print(f"  {m['max_rss_mib']:.0f} MiB", file=sys.stderr)
        out["memory"].append(m)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    write_text(args.out, json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "memory"}, indent=2))
    print(f"raw numbers: {args.out}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------- memory


def _proc_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out = [root]
    i = 0
    while i < len(out):
        out += children.get(out[i], [])
        i += 1
    return out


def _kib(pid: int, field: str, name: str = "status") -> int:
    try:
        with open(f"/proc/{pid}/{name}") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def measure_tree(argv: list[str], every: float = 0.1) -> dict[str, Any]:
    """Run ``argv``; sample its process tree every ``every`` s: peak PSS summed over the tree (shared memory
    counted once, in proportion), the main process's and the largest child's peak RSS (VmHWM)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak_sum = 0
    hwm: dict[int, int] = {}
    while p.poll() is None:
        total = 0
        for pid in _proc_tree(p.pid):
            total += _kib(pid, "Pss:", "smaps_rollup")
            hwm[pid] = max(hwm.get(pid, 0), _kib(pid, "VmHWM:"))
        peak_sum = max(peak_sum, total)
        time.sleep(every)
    err = p.stderr.read() if p.stderr else ""
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {err.strip().splitlines()[-1:]}")
    kids = [v for k, v in hwm.items() if k != p.pid]
    return {"wall_s": time.perf_counter() - t0, "tree_pss_peak_mib": peak_sum / 1024,
            "main_rss_peak_mib": hwm.get(p.pid, 0) / 1024, "child_rss_peak_mib": max(kids, default=0) / 1024}


def run_memory(args: argparse.Namespace) -> int:
    """``oij bench memory``: the bounded-memory check of docs/reference.rst (a benchmark, never a test)."""
    if args.quick:
        args.presets, args.sizes, args.commands = "scale-oij-default", "20000", "join,kp"
    args.out = _out_file(args.out, "memory")
    from oij.workloads import PRESETS, resolve, with_overrides, write_workload

    presets = [x for x in args.presets.split(",") if x]
    unknown = [x for x in presets if x not in PRESETS]
    if unknown:
        raise UsageError(f"--presets: unknown {', '.join(unknown)}; known: {', '.join(PRESETS)}")
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x]
    except ValueError:
        raise UsageError(f"--sizes: not a list of integers: {args.sizes!r}") from None
    commands = [x for x in args.commands.split(",") if x]
    bad = [c for c in commands if c not in ("join", "kp", "dp", "hp", "key", "scale")]
    if bad:
        raise UsageError(f"--commands: unknown {', '.join(bad)}; known: join, kp, dp, hp, key, scale")
    skip = {x for x in args.skip.split(",") if x}
    rows: list[dict[str, Any]] = []
    oij = [sys.executable, "-m", "oij.cli"]
    with tempfile.TemporaryDirectory() as d:
        for preset in presets:
            params = with_overrides(resolve(preset), {"aggregate": None})
            for n in sizes:
                path = os.path.join(d, f"{preset}-{n}.parquet")
                write_workload(path, params, n, args.seed)
                for c in commands:
                    if f"{preset}:{c}:{n}" in skip:
                        continue
                    out = os.path.join(d, "out.jsonl")
                    if args.mode == "streamed":
                        argv = ([*oij, "join", path, "--order", "arrival", "-o", os.devnull, "--no-progress"]
                                if c == "join" else
                                [*oij, "run", path, "--pattern", c, "--replicas", str(args.replicas), "--no-output"])
                    else:
                        argv = ([*oij, "join", path, "-o", out, "--no-progress"] if c == "join" else
                                [*oij, "run", path, "--pattern", c, "--replicas", str(args.replicas), "-o", out])
                    print(f"{preset} {c} {n:,} tuples ...", file=sys.stderr, flush=True)
                    m = measure_tree(argv)
                    lines = 0
                    if os.path.exists(out):
                        with open(out, "rb") as f:
                            lines = sum(buf.count(b"\n") for buf in iter(lambda: f.read(1 << 20), b""))
                        os.unlink(out)
                    row = {"preset": preset, "command": c, "tuples": n, "mode": args.mode, "output_lines": lines, **m}
                    print("  " + ", ".join(f"{k} {v:.1f}" for k, v in m.items()), file=sys.stderr, flush=True)
                    rows.append(row)
                    from oij.bench import provenance

                    write_text(args.out, json.dumps({"benchmark": "memory", **provenance(sys.argv), "mode": args.mode,
                                                     "replicas": args.replicas,
                                                     "machine": f"{os.cpu_count()} cores", "rows": rows},
                                                    indent=1) + "\n")
                os.unlink(path)
    print(memory_table(rows))
    print(f"raw numbers: {args.out}", file=sys.stderr)
    return 0


def memory_table(rows: list[dict[str, Any]]) -> str:
    """Peak PSS of the process tree per preset and command, by size, and the ratio largest / smallest size."""
    sizes = sorted({r["tuples"] for r in rows})
    head = ["preset", "command", *[f"{n:,} MiB" for n in sizes], "ratio"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = list(dict.fromkeys((r["preset"], r["command"]) for r in rows))
    for preset, c in keys:
        by = {r["tuples"]: r["tree_pss_peak_mib"] for r in rows if r["preset"] == preset and r["command"] == c}
        cells = [f"{by[n]:.0f}" if n in by else "-" for n in sizes]
        ratio = f"{by[sizes[-1]] / by[sizes[0]]:.2f}" if sizes[0] in by and sizes[-1] in by else "-"
        lines.append(f"| {preset} | {c} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)
