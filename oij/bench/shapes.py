"""``oij join`` on valid oij-jsonl written by other tools, against the I/O floor: ``oij bench shapes`` and
``oij bench floor`` (``shapes_bench``, ``floor``).

oij's own writer gives one shape (:func:`oij.io.jsonlwrite.format_event`); a user's file may be any valid
oij-jsonl.  :func:`write_shape` rewrites an oij-jsonl file, event by event, in one of :data:`SHAPES`.  On the
benchmark's workload (issue 14's: 100 uniform keys, window [-1000, 0], lateness 500, pairs; no value is
read and, with a lateness, no channel) every shape holds the same join: ``oij join`` must write the same
bytes from each, and the benchmark checks that it does.

Method:

* the workload is generated once (``--events`` tuples) as oij-jsonl and Parquet, then rewritten in every
  shape; writing them is not timed;
* for every input, ``oij join INPUT -o OUT`` (a process, wall clock from start to exit) and the floor
  (:func:`floor`, in its own process, timed inside it): pyarrow's reader of the file -- ``pyarrow.json.read_json``
  of its event lines, or ``pyarrow.parquet.read_table`` -- plus writing the result's bytes (already in memory)
  to a file and syncing it, as ``oij join``'s atomic output does;
* repetitions are interleaved (every input's join and floor, then again); medians are reported, with the
  ratios the issue's targets are stated in (``oij join`` at most 2x the floor from oij-jsonl, 3x from
  Parquet: benchmarks, never tests); beside them the CPU seconds of both (every thread), whose ratio moves
  less on a machine others share.

Starts one process per measurement (each ends before the next starts); writes its files atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from oij.errors import UsageError
from oij.io.atomic import atomic_binary, write_text
from oij.options import option

SHAPES: dict[str, str] = {
    "oij": "oij's own writer (compact, fixed field order): the template path",
    "issue": "compact JSON, no channel field, the query line with spaces (issue 47's file)",
    "dumps": "Python's json.dumps with its default separators (', ' and ': ')",
    "shuffled": "every line's fields in a random order (seeded), compact",
    "no-optional": "no value and no channel field on any line",
    "string-keys": 'keys as strings ("k17")',
    "crlf": "CRLF line ends",
    "exponents": "values written with exponents (7.4e1)",
    "bom": "a UTF-8 byte order mark before the query line",
}
"""Every shape's name and what it changes."""


def _compact(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj)


def _exponent(v: float) -> str:
    """A float in exponent notation that reads back as the same double (17 significant digits at most)."""
    for digits in range(1, 18):
        text = f"{v:.{digits - 1}e}"
        if float(text) == v:
            return text
    return f"{v:.16e}"  # pragma: no cover - 17 digits always round-trip


def _lines(shape: str, rng: random.Random) -> tuple[Callable[[dict[str, Any]], bytes], Callable[[dict[str, Any]],
                                                                                                  bytes], bytes]:
    """For ``shape``: the query line's writer, an event line's writer, and the line end."""
    if shape == "dumps":
        return (lambda o: json.dumps(o).encode()), (lambda o: json.dumps(o).encode()), b"\n"
    if shape == "issue":
        def event(o: dict[str, Any]) -> bytes:
            o.pop("channel", None)
            return _compact(o)
        return (lambda o: json.dumps(o).encode()), event, b"\n"
    if shape == "shuffled":
        def shuffled(o: dict[str, Any]) -> bytes:
            keys = list(o)
            rng.shuffle(keys)
            return _compact({k: o[k] for k in keys})
        return shuffled, shuffled, b"\n"
    if shape == "no-optional":
        def bare(o: dict[str, Any]) -> bytes:
            o.pop("value", None)
            o.pop("channel", None)
            return _compact(o)
        return _compact, bare, b"\n"
    if shape == "string-keys":
        def strkey(o: dict[str, Any]) -> bytes:
            if "key" in o:
                o["key"] = f"k{o['key']}"
            return _compact(o)
        return _compact, strkey, b"\n"
    if shape == "crlf":
        return _compact, _compact, b"\r\n"
    if shape == "exponents":
        def exp(o: dict[str, Any]) -> bytes:
            if "value" not in o:
                return _compact(o)
            text = _exponent(float(o["value"])).encode()
            o["value"] = "\0"  # a placeholder, replaced in place: the field keeps its position
            return _compact(o).replace(b'"\\u0000"', text, 1)
        return _compact, exp, b"\n"
    if shape in ("oij", "bom"):
        return _compact, _compact, b"\n"
    raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")


def shape_lines(src: Iterator[bytes], shape: str, seed: int = 0) -> Iterator[bytes]:
    """The lines of oij-jsonl ``src`` (the query line first) rewritten in ``shape``, each with its line end."""
    rng = random.Random(seed)
    query, event, eol = _lines(shape, rng)
    first = True
    for raw in src:
        if not raw.strip():
            continue
        if shape == "oij":
            yield raw.rstrip(b"\r\n") + eol
            continue
        obj = orjson.loads(raw)
        if first:
            line = query(obj)
            if shape == "bom":
                line = b"\xef\xbb\xbf" + line
            first = False
        else:
            line = event(obj)
        yield line + eol


def write_shape(src: str, dst: str, shape: str, seed: int = 0) -> None:
    """Rewrite the oij-jsonl file ``src`` as ``dst`` in ``shape`` (module docstring), atomically.  O(lines)."""
    with open(src, "rb") as f, atomic_binary(dst) as out:
        buf: list[bytes] = []
        for line in shape_lines(f, shape, seed):
            buf.append(line)
            if len(buf) >= 1 << 14:
                out.write(b"".join(buf))
                buf = []
        out.write(b"".join(buf))


# ---------------------------------------------------------------------- the floor


def floor(path: str, result: str) -> dict[str, float]:
    """The I/O floor of joining ``path`` into ``result``'s bytes, in seconds: pyarrow's reader of the input
    (the oij-jsonl file's event lines with ``pyarrow.json.read_json``, every core; a ``.parquet`` file with
    ``pyarrow.parquet.read_table``) and writing ``result``'s bytes (read before the clock starts) to a new file
    beside it, synced; wall seconds, and CPU seconds of every thread (``floor_cpu_s``).  The imports are not
    timed.  O(input + output)."""
    import pyarrow as pa

    with open(result, "rb") as f:
        out_bytes = f.read()
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        c0, t0 = time.process_time(), time.perf_counter()
        tb = pq.read_table(path)
    else:
        import pyarrow.json as pj

        with open(path, "rb") as f:
            f.readline()  # the query line: another schema
            body = f.read()
        c0, t0 = time.process_time(), time.perf_counter()
        tb = pj.read_json(pa.BufferReader(body), read_options=pj.ReadOptions(block_size=1 << 20))
    c1, t1 = time.process_time(), time.perf_counter()
    rows = tb.num_rows
    del tb
    target = os.path.join(os.path.dirname(os.path.abspath(result)), ".floor-" + os.path.basename(result))
    c2, t2 = time.process_time(), time.perf_counter()
    with atomic_binary(target) as f:
        f.write(out_bytes)
    c3, t3 = time.process_time(), time.perf_counter()
    os.unlink(target)
    return {"read_s": t1 - t0, "write_s": t3 - t2, "floor_s": (t1 - t0) + (t3 - t2),
            "floor_cpu_s": (c1 - c0) + (c3 - c2), "rows": float(rows)}


# ---------------------------------------------------------------------- the benchmark


@dataclass
class ShapesOptions:
    """The options of ``oij bench shapes``, each with its flag, help and default (:mod:`oij.options`)."""

    events: int = option(2_000_000, help="tuples (default 2,000,000)")
    repeat: int = option(3, help="interleaved repetitions (median reported)")
    shapes: str = option(",".join(SHAPES), help="comma-separated shapes (default: all of them)")
    parquet: bool = option(True, flags=("--no-parquet",), help="leave the Parquet input out")
    seed: int = option(1)
    timeout: float = option(900.0, help="seconds a run may take (default 900)")
    out: str = option("shapes.json", help="where the raw numbers go (default ./shapes.json)")
    quick: bool = option(False, help="20,000 tuples, one repetition (CI smoke)")


def _timed(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Run ``argv`` to its end; its wall seconds, its CPU seconds (user + system, threads included) and its
    stdout (raises on failure)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise RuntimeError(f"{' '.join(argv)} exited with {p.returncode}: {p.stderr.strip()[-300:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), p.stdout


def _digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def shapes_bench(args: ShapesOptions) -> dict[str, Any]:
    """Run the benchmark (module docstring; progress on stderr); write the result to ``args.out`` and return
    it (:func:`format_table` is its text)."""
    from oij.bench.oracle import out_file
    from oij.bench.peers import describe_machine, params_for
    from oij.bench.results import provenance
    from oij.workloads import write_workload

    events = 20_000 if args.quick and args.events == 2_000_000 else args.events
    repeat = 1 if args.quick else args.repeat
    names = [x for x in args.shapes.split(",") if x]
    unknown = [x for x in names if x not in SHAPES]
    if unknown:
        raise UsageError(f"--shapes: unknown {', '.join(unknown)}; known: {', '.join(SHAPES)}")
    if events < 1 or repeat < 1:
        raise UsageError("--events and --repeat must be >= 1")
    out = out_file(args.out, "shapes")
    params = params_for("uniform")
    result: dict[str, Any] = {"experiment": "shapes", "events": events, "repeat": repeat, "quick": args.quick,
                              **provenance(sys.argv), "machine": describe_machine(),
                              "params": {k: getattr(params, k) for k in ("keys", "key_dist", "rate", "delay_max",
                                                                          "lateness", "lower", "upper")},
                              "rows": []}
    oij = [sys.executable, "-m", "oij.cli"]
    with tempfile.TemporaryDirectory(prefix="oij-shapes-") as tmp:
        source = os.path.join(tmp, "w.jsonl")
        write_workload(source, params, events, args.seed)
        inputs: dict[str, str] = {}
        for name in names:
            inputs[name] = source if name == "oij" else os.path.join(tmp, f"w-{name}.jsonl")
            if name != "oij":
                write_shape(source, inputs[name], name, args.seed)
        if args.parquet:
            inputs["parquet"] = os.path.join(tmp, "w.parquet")
            write_workload(inputs["parquet"], params, events, args.seed)
        result_file = os.path.join(tmp, "want.jsonl")
        _timed([*oij, "join", source, "-o", result_file, "--no-progress"], args.timeout)
        want = _digest(result_file)
        joins: dict[str, list[float]] = {k: [] for k in inputs}
        cpus: dict[str, list[float]] = {k: [] for k in inputs}
        floors: dict[str, list[dict[str, float]]] = {k: [] for k in inputs}
        same: dict[str, bool] = dict.fromkeys(inputs, True)
        for r in range(repeat):
            for name, path in inputs.items():
                got = os.path.join(tmp, f"got-{name}.jsonl")
                wall, cpu, _ = _timed([*oij, "join", path, "-o", got, "--no-progress"], args.timeout)
                joins[name].append(wall)
                cpus[name].append(cpu)
                same[name] = same[name] and _digest(got) == want
                os.unlink(got)
                _, _, text = _timed([sys.executable, "-m", "oij.bench.shapes", "floor", path, result_file],
                                    args.timeout)
                floors[name].append(json.loads(text))
                print(f"shapes: round {r + 1}/{repeat} {name}: join {wall:.2f} s, floor "
                      f"{floors[name][-1]['floor_s']:.2f} s", file=sys.stderr)
        for name in inputs:
            j = statistics.median(joins[name])
            f = statistics.median(x["floor_s"] for x in floors[name])
            goal = 3.0 if name == "parquet" else 2.0
            result["rows"].append({
                "input": name, "format": "parquet" if name == "parquet" else "jsonl",
                "what": "Parquet from oij generate" if name == "parquet" else SHAPES[name],
                "join_s": joins[name], "join_median_s": j,
                "floor_read_s": [x["read_s"] for x in floors[name]],
                "floor_write_s": [x["write_s"] for x in floors[name]],
                "floor_median_s": f, "join_over_floor": j / f if f else None, "goal": goal,
                "join_cpu_s": cpus[name], "floor_cpu_s": [x["floor_cpu_s"] for x in floors[name]],
                "cpu_over_floor_cpu": statistics.median(cpus[name]) / fc if (fc := statistics.median(
                    x["floor_cpu_s"] for x in floors[name])) else None,
                "met": bool(f and j / f <= goal), "same_bytes": same[name]})
        result["output_bytes"] = os.path.getsize(result_file)
    write_text(out, json.dumps(result, indent=1) + "\n")
    return result


def format_table(result: dict[str, Any]) -> str:
    """The result as the text ``oij bench shapes`` prints."""
    lines = [f"oij join vs the I/O floor, {result['events']:,} tuples, median of {result['repeat']}",
             f"{'input':<14}{'join s':>9}{'floor s':>9}{'ratio':>8}{'goal':>6}{'cpu ratio':>11}  same bytes"]
    for r in result["rows"]:
        ratio = f"{r['join_over_floor']:.2f}" if r["join_over_floor"] is not None else "-"
        cpu = f"{r['cpu_over_floor_cpu']:.2f}" if r.get("cpu_over_floor_cpu") is not None else "-"
        lines.append(f"{r['input']:<14}{r['join_median_s']:>9.2f}{r['floor_median_s']:>9.2f}{ratio:>8}"
                     f"{r['goal']:>6.1f}{cpu:>11}  {'yes' if r['same_bytes'] else 'NO'}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """``python -m oij.bench.shapes floor INPUT RESULT``: :func:`floor` as one JSON line."""
    if len(argv) != 3 or argv[0] != "floor":
        print("usage: python -m oij.bench.shapes floor INPUT RESULT", file=sys.stderr)
        return 2
    print(json.dumps(floor(argv[1], argv[2])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
