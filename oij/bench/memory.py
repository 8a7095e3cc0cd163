"""Peak memory of ``oij join`` and every pattern as the stream grows (flat = bounded): ``oij bench memory``
(``memory_bench``; the bounded-memory check of docs/reference.rst, a benchmark, never a test).

Each command runs as its own process on a generated workload, Parquet and/or oij-jsonl (``--formats``: the
jsonl reader once held every chunk of its input, which the Parquet runs could not show).
:func:`oij.proctree.measure` samples its process tree every 0.1 s: peak PSS summed over the tree (shared
memory counted once, in proportion), the main process's and the largest child's peak RSS.  The rows go to
``--out`` after every run (with :func:`oij.bench.results.provenance`); ``memory_table`` is the table printed at the end.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

from oij.bench.oracle import out_file
from oij.errors import UsageError
from oij.io.atomic import write_text
from oij.options import option
from oij.parallel.config import PATTERNS, REPLICAS
from oij.proctree import measure

COMMANDS = ("join", *PATTERNS)
"""What ``oij bench memory`` can measure: ``oij join`` and ``oij run --pattern P`` for every pattern."""


@dataclass
class MemoryBenchOptions:
    """The options of ``oij bench memory``, each with its flag, help and default (:mod:`oij.options`)."""

    presets: str = option("scale-oij-default,scale-oij-rotating",
                          help="comma-separated workload presets (default: 100 keys; 10K keys whose hot set rotates)")
    sizes: str = option("1000000,10000000", help="comma-separated stream lengths in tuples")
    commands: str = option(",".join(COMMANDS), help="join (oij join) and/or patterns (oij run --pattern P)")
    mode: str = option(
        "default", choices=["default", "streamed"],
        help="default: the commands' default flags, the canonical output written to a file (sorted runs spilled "
        "beside it); streamed: oij join --order arrival -o /dev/null, oij run --no-output")
    formats: str = option(
        "parquet", help="comma-separated input formats, parquet and/or jsonl (oij-jsonl as oij generate writes it)")
    replicas: int = option(REPLICAS)
    skip: str = option("", help="PRESET:COMMAND:SIZE triples to leave out (comma-separated)")
    seed: int = option(1)
    out: str = option("memory.json", help="where the raw numbers go (default ./memory.json)")
    quick: bool = option(False, help="20,000 tuples, join and kp only (CI smoke)")


def measure_tree(argv: list[str], every: float = 0.1) -> dict[str, Any]:
    """:func:`oij.proctree.measure` as a row: wall time, peak tree PSS, main and largest child peak RSS (MiB)."""
    peaks = asdict(measure(argv, every))
    del peaks["returncode"]
    return peaks


def memory_bench(args: MemoryBenchOptions) -> list[dict[str, Any]]:
    """Run the benchmark (progress on stderr), then write the rows to ``args.out``; the rows.  A measured command
    that fails raises :class:`oij.proctree.CommandFailed`, and ``args.out`` is left as it was."""
    if args.quick:
        args.presets, args.sizes, args.commands = "scale-oij-default", "20000", "join,kp"
    args.out = out_file(args.out, "memory")
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
    bad = [c for c in commands if c not in ("join", *PATTERNS)]
    if bad:
        raise UsageError(f"--commands: unknown {', '.join(bad)}; known: join, kp, dp, hp, key, scale")
    formats = [x for x in args.formats.split(",") if x]
    if not formats or any(f not in ("parquet", "jsonl") for f in formats):
        raise UsageError(f"--formats: parquet and/or jsonl, got {args.formats!r}")
    skip = {x for x in args.skip.split(",") if x}
    rows: list[dict[str, Any]] = []
    oij = [sys.executable, "-m", "oij.cli"]
    with tempfile.TemporaryDirectory() as d:
        for preset in presets:
            params = with_overrides(resolve(preset), {"aggregate": None})
            for n, fmt in ((n, fmt) for n in sizes for fmt in formats):
                path = os.path.join(d, f"{preset}-{n}.{fmt}")
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
                    print(f"{preset} {c} {n:,} tuples ({fmt}) ...", file=sys.stderr, flush=True)
                    m = measure_tree(argv)
                    lines = 0
                    if os.path.exists(out):
                        with open(out, "rb") as f:
                            lines = sum(buf.count(b"\n") for buf in iter(lambda: f.read(1 << 20), b""))
                        os.unlink(out)
                    row = {"preset": preset, "command": c, "tuples": n, "format": fmt, "mode": args.mode,
                           "output_lines": lines, **m}
                    print("  " + ", ".join(f"{k} {v:.1f}" for k, v in m.items()), file=sys.stderr, flush=True)
                    rows.append(row)
                os.unlink(path)
    from oij.bench.results import provenance

    write_text(args.out, json.dumps({"benchmark": "memory", **provenance(sys.argv), "mode": args.mode,
                                     "replicas": args.replicas, "machine": f"{os.cpu_count()} cores", "rows": rows},
                                    indent=1) + "\n")
    return rows


def memory_table(rows: list[dict[str, Any]]) -> str:
    """Peak PSS of the process tree per preset and command, by size, and the ratio largest / smallest size."""
    sizes = sorted({r["tuples"] for r in rows})
    head = ["preset", "command", *[f"{n:,} MiB" for n in sizes], "ratio"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = list(dict.fromkeys((r["preset"], r["command"], r.get("format", "parquet")) for r in rows))
    for preset, c, fmt in keys:
        by = {r["tuples"]: r["tree_pss_peak_mib"] for r in rows
              if (r["preset"], r["command"], r.get("format", "parquet")) == (preset, c, fmt)}
        cells = [f"{by[n]:.0f}" if n in by else "-" for n in sizes]
        ratio = f"{by[sizes[-1]] / by[sizes[0]]:.2f}" if sizes[0] in by and sizes[-1] in by else "-"
        lines.append(f"| {preset} | {c} ({fmt}) | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)


__all__ = ["MemoryBenchOptions", "measure_tree", "memory_bench", "memory_table"]
