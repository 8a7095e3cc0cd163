"""Throughput and memory of the reference oracle: ``oij bench oracle`` (``oracle_bench``; a benchmark, never a
test).

Method (docs/reference.rst has the write-up):

* *operator alone*: the workload's events are generated into a list first;
  the clock (process CPU time, best and median of ``--repeat`` runs, because
  this machine is shared) covers only the oracle's ``on_*`` calls, with the
  emitted pairs drained every 2^16 events;
* *end to end*: the workload is written to an oij-jsonl file, then
  ``oij join FILE -o /dev/null`` is timed in-process (in arrival order and in
  the canonical order: the block path of :mod:`oij.reference.block_oracle`, and the
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

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Any

from oij.errors import UsageError
from oij.io.atomic import write_text
from oij.options import option


@dataclass
class OracleBenchOptions:
    """The options of ``oij bench oracle``, each with its flag, help and default (:mod:`oij.options`)."""

    preset: str = option("scale-oij-default", help="workload preset (default scale-oij-default)")
    events: int = option(1_000_000, help="tuples for the throughput runs")
    repeat: int = option(3, help="runs of the operator-alone measurement")
    memory_sizes: str = option("100000,1000000,10000000", help="comma-separated stream lengths for peak memory")
    seed: int = option(1)
    out: str = option("oracle.json", help="where the raw numbers go (default ./oracle.json)")
    quick: bool = option(False, help="20,000 tuples, one run, one memory size (CI smoke)")


def out_file(out: str, name: str) -> str:
    """``--out`` may name a file or a directory (then ``DIR/NAME.json``, like every other experiment)."""
    return os.path.join(out, f"{name}.json") if os.path.isdir(out) or out.endswith(os.sep) else out


def workload(preset: str) -> Any:
    """The preset's parameters in pairs mode (no aggregate); :class:`UsageError` for an unknown preset."""
    from oij.workloads import PRESETS, ParamError, resolve

    try:
        p = resolve(preset)
    except (ParamError, KeyError) as e:
        raise UsageError(f"--preset: {e}; known: {', '.join(sorted(PRESETS))}") from None
    return replace(p, aggregate=None)  # the oracle benchmark is in pairs mode


def operator_alone(preset: str, events: int, seed: int, repeat: int) -> dict[str, Any]:
    """The oracle's ``on_*`` calls alone on a generated list of events: process CPU time of ``repeat`` runs."""
    from oij.reference.oracle import Oracle
    from oij.spec.model import StreamTuple, Watermark
    from oij.workloads import generate

    q, it = generate(workload(preset), events, seed)
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


def _join(argv: list[str]) -> int:
    """``oij join PATH -o OUT [--order arrival]`` in this process (:func:`oij.pipelines.join.join_file`)."""
    from oij.pipelines.join import JoinOptions, join_file

    path, _, out, *rest = argv
    return join_file(JoinOptions(file=path, output=out, no_progress=True,
                                 order="arrival" if rest[-2:] == ["--order", "arrival"] else "canonical"))


def end_to_end(preset: str, events: int, seed: int) -> dict[str, Any]:
    """``oij join`` from an oij-jsonl file (both orders, both paths) next to a bare loop that only decodes it."""
    import json as stdjson

    import orjson

    from oij.workloads import write_workload

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "w.jsonl")
        write_workload(path, workload(preset), events, seed)
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
        rc = _join([path, "-o", os.devnull, "--no-progress", "--order", "arrival"])
        t_join_arrival = time.process_time() - t0
        t0 = time.process_time()
        rc2 = _join([path, "-o", os.devnull, "--no-progress"])
        t_join_canonical = time.process_time() - t0
        old = os.environ.get("OIJ_JOIN_PATH")
        os.environ["OIJ_JOIN_PATH"] = "event"
        try:
            t0 = time.process_time()
            rc3 = _join([path, "-o", os.devnull, "--no-progress"])
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


def memory_probe(preset: str, events: int, seed: int) -> dict[str, Any]:
    """Stream ``events`` tuples through the oracle, draining output; return peak RSS and state.

    Peak RSS is VmHWM of /proc/self/status: unlike ``ru_maxrss``, it belongs to
    this process's own address space and does not inherit the parent's peak
    across fork+exec.
    """
    from oij.proctree import self_peak_kib
    from oij.reference.oracle import Oracle
    from oij.spec.model import StreamTuple, Watermark
    from oij.workloads import generate

    q, it = generate(workload(preset), events, seed)
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
        "max_rss_mib": self_peak_kib() / 1024,
        "stored_peak_sampled": peak_state,
        "pairs": pairs,
        "wall_s": time.perf_counter() - t0,
    }


def oracle_bench(args: OracleBenchOptions) -> dict[str, Any]:
    """Run the benchmark (progress on stderr) and write its raw numbers to ``args.out``; they are returned too."""
    if args.quick:
        args.events, args.repeat, args.memory_sizes = 20_000, 1, "20000"
    args.out = out_file(args.out, "oracle")
    if args.events < 1 or args.repeat < 1:
        raise UsageError("--events and --repeat must be >= 1")
    try:
        sizes = [int(x) for x in args.memory_sizes.split(",") if x]
    except ValueError:
        raise UsageError(f"--memory-sizes: not a list of integers: {args.memory_sizes!r}") from None
    workload(args.preset)
    out: dict[str, Any] = {
        "benchmark": "oracle",
        "preset": args.preset,
        "seed": args.seed,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "command": "oij bench oracle " + " ".join(sys.argv[3:]),
    }
    from oij.bench.results import capture

    out["provenance"] = capture(out["command"], os.path.dirname(os.path.abspath(__file__)))
    print(f"operator alone on {args.preset}, {args.events:,} tuples, best of {args.repeat} ...", file=sys.stderr)
    out["operator_alone"] = operator_alone(args.preset, args.events, args.seed, args.repeat)
    print(f"  {out['operator_alone']['events_per_s_best']:,.0f} events/s", file=sys.stderr)
    print("end to end from oij-jsonl ...", file=sys.stderr)
    out["end_to_end"] = end_to_end(args.preset, args.events, args.seed)
    print(f"  ratio to a bare orjson parse loop: {out['end_to_end']['ratio_vs_orjson_parse']:.2f}", file=sys.stderr)
    out["memory"] = []
    for n in sizes:
        print(f"peak memory at {n:,} tuples ...", file=sys.stderr)
        code = (
            "import json, sys; from oij.bench.oracle import memory_probe; "
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
    return out


__all__ = ["OracleBenchOptions", "end_to_end", "memory_probe", "operator_alone", "oracle_bench", "out_file",
           "workload"]
