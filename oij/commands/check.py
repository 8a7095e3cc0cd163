"""``oij check [FILE | --preset P] [--patterns ...]``: check every engine against the oracles (the main job).

Steps (each announced on stderr with its time):

1. the workload: FILE (oij-jsonl or Parquet), ``--preset P`` (:mod:`oij.workloads`),
   or with neither a small default workload;
2. the sequential oracle (:func:`reference.oracle.run_events`) when the
   workload has at most ``--seq-limit`` events;
3. every chosen engine of :mod:`parallel.registry` (default: all registered);
4. the Spark oracle (``--spark``, the default; ``--master`` for a cluster): the canonical result, or with
   ``--profile P`` that semantic profile's (:mod:`oij.spark.profiles`), at any size;
5. every output is written to ``OUT/results/engine=<name>/`` (one Parquet
   dataset partitioned by engine) and Spark compares each engine with the
   reference (the Spark oracle, or the sequential one with ``--no-spark``);
6. one table on stdout, ``OUT/report.json`` and ``OUT/report.md``; for ``--got`` outputs, a replay case per
   listed difference (``OUT/replays/``) and the profiles that explain the differences (``--attribute``).

Exit code 0 iff every engine (and the sequential oracle) agrees with the reference, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from oij.commands.common import UsageError, add_query_flags, check_outputs, input_events, progress
from oij.io.atomic import write_text
from oij.io.errors import InputError
from spec.batch import Results
from spec.model import Event, Query, StreamTuple

SPARK_ORACLE = "spark-oracle"
SEQ_ORACLE = "seq-oracle"
DEFAULT_PRESET = "scale-oij-default"
DEFAULT_EVENTS = 20_000


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="check every engine against the sequential and the Spark oracle (the main job)",
        description="Run the sequential oracle (when the workload fits in memory), the Spark oracle and every "
        "chosen engine on one workload; store all outputs as a Parquet dataset partitioned by engine; compare "
        "each engine with the oracle in Spark; print a table and write OUT/report.json and OUT/report.md. "
        "Exit 0 only if every engine agrees. With no arguments: a small default workload.",
    )
    p.add_argument("file", nargs="?", help="input: oij-jsonl, .parquet, or a directory of Parquet files (a "
                   "dataset as Spark writes it: files in name order are the arrival order); default: a generated "
                   "workload")
    p.add_argument("--preset", help=f"generate this workload preset (default {DEFAULT_PRESET} when no FILE)")
    p.add_argument("--events", type=int, default=None, help=f"tuples to generate (default {DEFAULT_EVENTS})")
    p.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    p.add_argument("--patterns", help="comma-separated engine names (default: every registered engine)")
    p.add_argument("--replicas", type=int, default=2, help="replicas per engine (default 2)")
    p.add_argument("--batch", type=int, default=32, help="batch size per engine (default 32)")
    p.add_argument("--spark", dest="spark", action="store_true", default=True, help="run the Spark oracle (default)")
    p.add_argument("--no-spark", dest="spark", action="store_false", help="no Spark: the sequential oracle is the "
                   "reference and the comparison runs in Python")
    p.add_argument("--out", default="oij-check", help="output directory (default ./oij-check)")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*]; e.g. spark://host:7077, "
                   "or 'submit' to keep what spark-submit set)")
    p.add_argument("--driver-memory", default="4g", help="Spark driver memory (default 4g)")
    p.add_argument("--method", choices=["salted", "bucketed", "plain"], default="salted",
                   help="Spark range join: bucketed + hot-key salting (default), bucketed, or plain")
    p.add_argument("--theta", type=float, default=1.2, help="balance threshold of PPOIJ Alg. 1 for salting")
    p.add_argument("--seq-limit", type=int, default=2_000_000,
                   help="run the sequential oracle and keep events in memory up to this many events (default 2e6)")
    p.add_argument("--first", type=int, default=10, help="differences listed per engine (default 10)")
    p.add_argument("--got", action="append", metavar="NAME=PATH", default=[],
                   help="also judge another system's output: oij-jsonl result lines, Parquet (file or dataset "
                   "directory) or CSV with a header; repeatable. With --got, no engine runs unless --patterns names "
                   "some; each difference gets a small replay case in OUT/replays/")
    p.add_argument("--got-columns", metavar="[NAME:]FIELD=COLUMN,...", action="append", default=[],
                   help="column names of a --got output written by another tool (of --got NAME, or of every --got): "
                   "fields kind, base, probe, count, value, id (e.g. flink:base=a_id,probe=b_id); repeatable")
    p.add_argument("--profile", default="canonical",
                   help="judge against a semantic profile of spec.profiles (spark-ss, flink-sql, ...; default "
                   "canonical): the Spark oracle computes its result at any size, and within --sim-limit it is "
                   "also simulated in memory as the seq-oracle row; the "
                   "comparison runs in Python")
    p.add_argument("--attribute", default="auto", metavar="PROFILES",
                   help="which profiles to try on each --got output's differences: auto (default: every named "
                   "profile within --sim-limit, simulated in memory; none past it), all, none, or P,P,...; past "
                   "--sim-limit each one is a Spark oracle run")
    p.add_argument("--sim-limit", type=int, default=200_000,
                   help="events up to which profiles are simulated: for --profile, and to attribute each --got "
                   "output's differences to the profiles that explain them (default 200000; about 0.35 ms per "
                   "event per profile)")
    p.add_argument("--no-progress", action="store_true", help="no progress messages")
    add_query_flags(p)
    p.set_defaults(func=run)


@dataclass
class Row:
    """One line of the report: an engine's agreement and performance."""

    engine: str
    agrees: bool | None = None
    missing: int = 0
    extra: int = 0
    wrong: int = 0
    wall_s: float = 0.0
    throughput: float | None = None
    p99_ms: float | None = None
    load_balance: float | None = None
    error: str | None = None
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    differences: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


class Progress:
    """Stage messages on stderr with the elapsed time."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.t0 = time.perf_counter()

    def say(self, msg: str) -> None:
        if self.enabled:
            print(f"[oij check {time.perf_counter() - self.t0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def _engines(args: argparse.Namespace) -> list[str]:
    from parallel.registry import engines

    known = engines()
    if args.patterns is None:
        return sorted(known)
    names = [n.strip() for n in args.patterns.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(
            f"--patterns: unknown engine {unknown[0]!r}; registered: {', '.join(sorted(known)) or 'none yet'}"
        )
    reserved = [n for n in names if n in (SPARK_ORACLE, SEQ_ORACLE)]
    if reserved:
        raise UsageError(f"--patterns: {reserved[0]!r} is the name of an oracle")
    return names


def _generated(args: argparse.Namespace) -> tuple[str, Query, Iterator[Event]]:

    events = DEFAULT_EVENTS if args.events is None else args.events
    if events < 0:
        raise UsageError("--events must be >= 0")
    workloads: Any
    try:
        workloads = importlib.import_module("oij.workloads")
    except ImportError:
        workloads = None
    from oij.spark.workload import BUILTIN, builtin_workload

    preset = args.preset
    if preset == BUILTIN or (preset is None and (workloads is None or DEFAULT_PRESET not in workloads.PRESETS)):
        q, it = builtin_workload(events, args.seed)
        return f"preset {BUILTIN} ({events} events, seed {args.seed})", q, it
    if workloads is None:
        raise UsageError(f"--preset needs oij.workloads, which is not installed; use {BUILTIN} or give a FILE")
    name = preset or DEFAULT_PRESET
    if name not in workloads.PRESETS:
        raise UsageError(f"--preset: unknown preset {name!r}; known: {', '.join([*workloads.PRESETS, BUILTIN])}")
    try:
        q, it = workloads.generate(name, events, args.seed)
    except workloads.ParamError as e:
        raise UsageError(f"--preset {name}: {e}") from None
    return f"preset {name} ({events} tuples, seed {args.seed})", q, it


def _engine_row(name: str, fn: Any, q: Query, events: list[Event], args: argparse.Namespace,
                tuples: int, pool: Any = None) -> tuple[Row, Results | None]:
    from parallel.registry import EngineOptions

    row = Row(name)
    t = time.perf_counter()
    try:
        run = fn(q, events, EngineOptions(replicas=args.replicas, batch=args.batch,
                                          extra={"runtime": pool} if pool is not None else {}))
    except Exception as e:  # an engine that crashes disagrees; the report says why
        row.wall_s = time.perf_counter() - t
        row.error = f"{type(e).__name__}: {e}"
        row.agrees = False
        return row, None
    row.wall_s = time.perf_counter() - t
    m = dict(run.metrics)
    row.metrics = m
    row.throughput = _num(m.get("throughput_tuples_per_s")) or (tuples / row.wall_s if row.wall_s > 0 else None)
    lat = m.get("latency_ms")
    row.p99_ms = _num(lat.get("p99")) if isinstance(lat, dict) else _num(m.get("p99_latency_ms"))
    row.load_balance = _num(m.get("load_balance_factor"))
    return row, run.results


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def run(args: argparse.Namespace) -> int:
    from oij.spark.compare import compare_frames, compare_results, write_frame, write_results
    from oij.spark.frames import materialize, read_parquet_events, validate_events
    from reference.oracle import run_events

    prog = Progress(not args.no_progress)
    if args.file is not None and args.preset is not None:
        raise UsageError("give a FILE or --preset, not both")
    if args.seq_limit < 0 or args.sim_limit < 0:
        raise UsageError("--seq-limit and --sim-limit must be >= 0")
    from spec.profiles import PROFILES

    if args.profile not in PROFILES:
        raise UsageError(f"unknown profile {args.profile!r}; known: {', '.join(PROFILES)}")
    profiled = args.profile != "canonical"
    if args.attribute not in ("auto", "all", "none"):
        bad = [n for n in args.attribute.split(",") if n.strip() not in PROFILES]
        if bad:
            raise UsageError(f"--attribute: unknown profile {bad[0].strip()!r}; known: {', '.join(PROFILES)}")
    from oij.commands._got import parse_columns, parse_got

    names = _engines(args) if args.patterns is not None or not args.got else []
    gots = parse_got(args.got, [SPARK_ORACLE, SEQ_ORACLE, *names])
    got_columns = parse_columns(args.got_columns, [n for n, _ in gots])
    if args.spark:
        from oij.spark.session import check_java

        check_java()  # before any work: no Java, no Spark
    out = args.out
    results_dir = os.path.join(out, "results")
    if args.file not in (None, "-") and os.path.exists(args.file):
        rdir = os.path.realpath(results_dir)
        target = os.path.realpath(args.file)  # the file itself, through symlinks
        link = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(args.file))), os.path.basename(args.file))
        if any(os.path.commonpath([p, rdir]) == rdir for p in (target, link)):
            raise UsageError(f"input {args.file} is inside {results_dir}, which oij check replaces: refusing")
        if os.path.isdir(args.file) and os.path.commonpath([os.path.realpath(out), target]) == target:
            raise UsageError(f"--out {out} is inside the input dataset {args.file}: refusing (it would become "
                             "part of the input)")
    os.makedirs(out, exist_ok=True)
    check_outputs([os.path.join(out, "report.json"), os.path.join(out, "report.md")], [args.file])
    shutil.rmtree(results_dir, ignore_errors=True)
    os.makedirs(results_dir)

    # 1. the workload
    parquet_in = args.file is not None and (args.file.endswith(".parquet") or os.path.isdir(args.file))
    events: list[Event] | None
    if args.file is not None:
        source = args.file
        if parquet_in:
            from oij.io.parquet import parquet_rows
            from oij.spark.frames import check_schema

            check_schema(args.file)
            with input_events(args.file, args, int64_ids=True) as (q, it):
                n_events = parquet_rows(args.file)
                fits = n_events <= args.seq_limit
                events = list(progress(it, enabled=not args.no_progress, desc="read")) if fits else None
            spark_input = os.path.abspath(args.file)
        else:
            spark_input = os.path.join(out, "input.parquet")
            with input_events(args.file, args, int64_ids=True) as (q, it):
                prog.say(f"reading {args.file}")
                events, n_events = materialize(
                    q, progress(it, enabled=not args.no_progress, desc="read"), spark_input, args.seq_limit
                )
    else:
        source, q, it = _generated(args)
        spark_input = os.path.join(out, "input.parquet")
        prog.say(f"generating {source}")
        events, n_events = materialize(
            q, progress(it, enabled=not args.no_progress, desc="generate"), spark_input, args.seq_limit
        )
    tuples = sum(1 for e in events if isinstance(e, StreamTuple)) if events is not None else None
    prog.say(f"workload: {source}: {n_events} events; query {q}")
    if events is None and names and args.patterns is None:
        prog.say(f"{n_events} events > --seq-limit {args.seq_limit}: the engines need the workload in memory; "
                 f"skipping {', '.join(names)}")
        names = []
    if events is None and names:
        raise UsageError(f"the workload has {n_events} events, more than --seq-limit {args.seq_limit}: engines "
                         f"need it in memory; raise --seq-limit or choose no --patterns")
    if profiled and not args.spark and (events is None or n_events > args.sim_limit):
        raise UsageError(f"--profile {args.profile} with --no-spark: the workload has {n_events} events; profiles "
                         f"are simulated in memory up to --sim-limit {args.sim_limit} (and --seq-limit "
                         f"{args.seq_limit}) events")
    simulate = events is not None and (not profiled or n_events <= args.sim_limit)
    if profiled and not simulate:
        prog.say(f"{n_events} events > --sim-limit {args.sim_limit}: the {args.profile} profile is computed by "
                 "Spark alone")
    if events is None and not args.spark:
        raise UsageError(f"the workload has more than --seq-limit {args.seq_limit} events and --no-spark leaves "
                         f"no oracle that can run it")

    rows: list[Row] = []
    mem: dict[str, Results] = {}
    # 2. the sequential oracle
    canonical: Results | None = None
    if events is not None:
        prog.say("sequential oracle ...")
        t = time.perf_counter()
        canonical = run_events(events, q)
        if profiled and simulate:
            from spec.profiles import compute_profile_result

            prog.say(f"the {args.profile} profile (simulated) ...")
            mem[SEQ_ORACLE] = compute_profile_result(events, q, PROFILES[args.profile]).canonical()
        elif not profiled:
            mem[SEQ_ORACLE] = canonical
        if SEQ_ORACLE in mem:
            r = Row(SEQ_ORACLE, wall_s=time.perf_counter() - t)
            r.throughput = (tuples or 0) / r.wall_s if r.wall_s > 0 else None
            rows.append(r)
            prog.say(f"sequential oracle: {r.wall_s:.1f}s")
    # 3. the engines, on one pool of replica processes (a new one after an engine that broke it)
    from parallel.registry import get
    from parallel.runtime.driver import Runtime

    pool: Runtime | None = None
    try:
        for name in names:
            assert events is not None
            prog.say(f"engine {name} ...")
            if pool is None or pool.closed or pool.broken:
                if pool is not None:
                    pool.close()
                pool = Runtime(args.replicas) if names else None
            r, res = _engine_row(name, get(name), q, events, args, tuples or 0, pool)
            rows.append(r)
            if res is not None:
                mem[name] = res
            prog.say(f"engine {name}: {r.wall_s:.1f}s" + (f" (failed: {r.error})" if r.error else ""))
    finally:
        if pool is not None:
            pool.close()
    for name, res in mem.items():
        write_results(results_dir, name, res)
    # the outputs of other systems (--got), validated as they are read
    from oij.commands._got import read_got, read_got_results
    from oij.spark.compare import engine_dir

    for name, path in gots:
        prog.say(f"reading {name}: {path} ...")
        t = time.perf_counter()
        n_rows = read_got(path, got_columns[name], engine_dir(results_dir, name))
        rows.append(Row(name, wall_s=time.perf_counter() - t, metrics={"rows": n_rows, "path": path}))
        if not args.spark:
            mem[name] = read_got_results(engine_dir(results_dir, name))
        prog.say(f"{name}: {n_rows} rows")

    plan: dict[str, Any] = {}
    if args.spark:
        from oij.spark.oracle import SparkOracleOptions, spark_oracle
        from oij.spark.profiles import spark_profile_oracle
        from oij.spark.session import spark_session

        prog.say(f"starting Spark ({args.master}) ...")
        spark = spark_session(None if args.master == "submit" else args.master, driver_memory=args.driver_memory)
        # 4. the Spark oracle
        prog.say("Spark oracle ...")
        t = time.perf_counter()
        _, frame = read_parquet_events(spark, spark_input, q)
        if parquet_in and events is None:
            validate_events(frame, q, args.file)
        sp_opts = SparkOracleOptions(method=args.method, theta=args.theta)
        if profiled:  # the profile's result, decided per tuple and per candidate pair (oij.spark.profiles)
            res_sp = spark_profile_oracle(spark, q, frame, PROFILES[args.profile], sp_opts)
        else:
            res_sp = spark_oracle(spark, q, frame, sp_opts)
        write_frame(res_sp.frame(), results_dir, SPARK_ORACLE)
        res_sp.release()
        plan = res_sp.plan
        r = Row(SPARK_ORACLE, wall_s=time.perf_counter() - t, agrees=True)
        spark_tuples = tuples if tuples is not None else n_events
        r.throughput = spark_tuples / r.wall_s if r.wall_s > 0 else None
        r.load_balance = _num(plan.get("load_balance_factor"))
        rows.insert(0, r)
        prog.say(f"Spark oracle: {r.wall_s:.1f}s; plan {plan}")
        # 5. compare in Spark
        prog.say("comparing in Spark ...")
        compared = [x.engine for x in rows if x.engine != SPARK_ORACLE and (x.engine in mem or
                                                                           x.engine in dict(gots))]
        comps = compare_frames(spark, results_dir, SPARK_ORACLE, compared, first=args.first)
        reference = SPARK_ORACLE
    else:
        reference = SEQ_ORACLE
        rows[0].agrees = True
        comps = {n: compare_results(mem[SEQ_ORACLE], res, first=args.first) for n, res in mem.items()
                 if n != SEQ_ORACLE}
    for r in rows:
        c = comps.get(r.engine)
        if c is not None:
            r.agrees = c.agrees
            r.missing, r.extra, r.wrong = c.missing, c.extra, c.wrong
            r.by_kind, r.differences = c.by_kind, c.differences
    attribution = _attribution(q, events, n_events, rows, gots, canonical, results_dir, args, prog,
                               *((spark, frame) if args.spark else ()))
    replays: dict[str, list[dict[str, Any]]] = {}
    if profiled and gots:
        prog.say(f"no replay cases under --profile {args.profile}: a replay case carries the canonical W at each "
                 "arrival, which other profiles do not follow")
    elif gots and events is not None:
        from oij.commands._got import replay_case, replay_case_as_is
        from spec.profiles import compute_profile_result

        follows = {a.system: a.explained_by[0] for a in attribution if a.explained_by}
        wholes = {p: compute_profile_result(events, q, PROFILES[p]) for p in set(follows.values())}

        def in_memory(engine: str, ds: list[dict[str, Any]]) -> list[tuple[Query, list[Event], str | None]]:
            cases: list[tuple[Query, list[Event], str | None]] = []
            for d in ds:
                p = follows.get(engine)
                as_is = replay_case_as_is(q, events, d, PROFILES[p], wholes[p], canonical) if p else None
                cases.append((*as_is, p) if as_is is not None else (*replay_case(q, events, d), None))
            return cases

        replays = _replays(rows, dict(gots), out, in_memory)
    elif gots and args.spark:  # past --seq-limit: the tuples of each difference and their W come from Spark
        import pyarrow.parquet as pq

        from oij.commands._got import build_case
        from oij.spark.frames import KEYS_META
        from oij.spark.replay import replay_picks

        tagged = os.path.isfile(spark_input) and \
            (pq.read_schema(spark_input).metadata or {}).get(KEYS_META) == b"tagged"
        prog.say("replay cases from Spark ...")
        replays = _replays(rows, dict(gots), out, lambda _, ds: [(*build_case(q, p), None) for p in
                                                                 replay_picks(spark, frame, q, ds, tagged)])
    prog.say("done")

    # 6. report
    report = {
        "workload": {"source": source, "events": n_events, "tuples": tuples, "query": _query_dict(q)},
        "reference": reference,
        "results": os.path.abspath(results_dir),
        "spark_plan": plan,
        "engines": [r.__dict__ for r in rows],
        "all_agree": all(r.agrees for r in rows),
        "replays": replays,
        "profile": args.profile,
        "attribution": [a.__dict__ for a in attribution],
    }
    write_text(os.path.join(out, "report.json"), json.dumps(report, indent=2, default=str) + "\n")
    write_text(os.path.join(out, "report.md"), markdown(report, rows))
    if profiled:
        how = [w for w, on in (("computed by the Spark oracle", args.spark),
                               ("simulated in memory as the seq-oracle row", simulate)) if on]
        print(f"reference: the {args.profile} profile (spec.profiles), {' and '.join(how)}")
    print(table(rows, reference))
    print(f"report: {os.path.join(out, 'report.md')}, {os.path.join(out, 'report.json')}; "
          f"outputs: {results_dir}/engine=*")
    for name, cases in replays.items():
        for case_info in cases:
            kept = (f", the stream's own terms: a system that follows {case_info['follows']} reproduces it"
                   if case_info["follows"] else "")
            print(f"\n{name}: {case_info['difference']}: replay case {case_info['file']} "
                  f"({case_info['events']} events{kept})")
            print("\n".join("  " + x for x in case_info["timeline"]))
    if attribution:
        print()
        for a in attribution:
            print("attribution: " + a.line())
    if not names and not gots:
        print("note: no engine was checked (none registered, none chosen, or the workload exceeds --seq-limit); "
              "only the oracles were compared")
    return 0 if report["all_agree"] else 1


def _attribution(q: Query, events: list[Event] | None, n_events: int, rows: list[Row], gots: list[tuple[str, str]],
                 canonical: Results | None, results_dir: str, args: argparse.Namespace, prog: Progress,
                 spark: Any = None, frame: Any = None) -> list[Any]:
    """For each --got output that differs from the canonical result: the profiles that explain its differences
    (:mod:`oij.commands._attribute`): simulated in memory within --sim-limit, else by the Spark oracle for the
    profiles --attribute names."""
    from oij.commands._got import read_got_results
    from oij.spark.compare import engine_dir
    from spec.profiles import PROFILES

    if not gots or args.attribute == "none":
        return []
    names = [n for n in PROFILES if n != "canonical"] if args.attribute in ("auto", "all") else \
        [n.strip() for n in args.attribute.split(",") if n.strip()]
    if events is not None and canonical is not None and n_events <= args.sim_limit:
        from oij.commands._attribute import attribute

        outs = {name: read_got_results(engine_dir(results_dir, name)) for name, _ in gots}
        return attribute(q, events, outs, canonical, names, say=prog.say)
    if args.attribute == "auto" or spark is None or args.profile != "canonical":
        why = ("the reference is a profile's result, not the canonical one" if args.profile != "canonical" else
               "no Spark" if spark is None else "each profile is one more Spark oracle run: ask with --attribute all "
               "or --attribute P,P")
        prog.say(f"no attribution to profiles: {n_events} events, more than --sim-limit {args.sim_limit} (or "
                 f"--seq-limit), and {why}")
        return []
    from oij.commands._attribute import attribute_in_spark
    from oij.spark.oracle import SparkOracleOptions

    return attribute_in_spark(spark, frame, q, results_dir, SPARK_ORACLE, [n for n, _ in gots], names,
                              SparkOracleOptions(method=args.method, theta=args.theta), say=prog.say)


CaseMaker = Callable[[str, list[dict[str, Any]]], list[tuple[Query, list[Event], str | None]]]


def _replays(rows: list[Row], gots: dict[str, str], out: str, make: CaseMaker) -> dict[str, list[dict[str, Any]]]:
    """A small replay case for each listed difference of each --got output; ``make`` builds the cases of one
    output's differences: (query, events, the profile the output follows if the case keeps the stream's own
    terms, else None for a case with the canonical W at each arrival)."""
    from oij.testing._case import Case
    from oij.testing._timeline import timeline

    found: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.engine not in gots or not r.differences:
            continue
        for k, (d, (small, evs, follows)) in enumerate(zip(r.differences, make(r.engine, r.differences),
                                                          strict=True), 1):
            path = os.path.join(out, "replays", f"{r.engine}-{k}.jsonl")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            case = Case(small, tuple(evs))
            write_text(path, case.to_jsonl())
            what = {"pair": f"pair ({d['base']}, {d['probe']})", "late": f"late id {d['id']}",
                    "aggregate": f"aggregate of base {d['base']}"}[d["kind"]]
            found.setdefault(r.engine, []).append({"difference": f"{d['issue']} {what}", "file": path,
                                                   "events": len(evs), "follows": follows,
                                                   "timeline": timeline(case)})
    return found


def _query_dict(q: Query) -> dict[str, Any]:
    return {
        "lower": q.lower, "upper": q.upper, "lower_inclusive": q.lower_inclusive,
        "upper_inclusive": q.upper_inclusive, "aggregate": q.aggregate, "join": q.join,
        "channels": q.channels, "lateness": q.lateness,
    }


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def table(rows: list[Row], reference: str) -> str:
    """The report table: engine, agrees, missing, extra, wrong, throughput, p99 latency, load balance."""
    head = ["engine", "agrees", "missing", "extra", "wrong", "tuples/s", "p99 ms", "load balance"]
    body = []
    for r in rows:
        agrees = "reference" if r.engine == reference else ("yes" if r.agrees else "NO")
        body.append([
            r.engine, agrees, str(r.missing), str(r.extra), str(r.wrong),
            _fmt(r.throughput, ",.0f"), _fmt(r.p99_ms, ".2f"), _fmt(r.load_balance, ".2f"),
        ])
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    rest = ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join([line, rule, *rest])


def markdown(report: dict[str, Any], rows: list[Row]) -> str:
    """The short Markdown report: workload, table, and the first differences of each disagreeing engine."""
    w = report["workload"]
    lines = [
        "# oij check",
        "",
        f"Workload: {w['source']} -- {w['events']} events, query `{json.dumps(w['query'])}`.",
        f"Reference: `{report['reference']}`. Outputs: `{report['results']}` (partitioned by engine).",
        "",
        "**All engines agree.**" if report["all_agree"] else "**Some engines disagree with the oracle.**",
        "",
        "| " + " | ".join(["engine", "agrees", "missing", "extra", "wrong", "tuples/s", "p99 ms", "load balance"])
        + " |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        agrees = "reference" if r.engine == report["reference"] else ("yes" if r.agrees else "**no**")
        lines.append(
            f"| {r.engine} | {agrees} | {r.missing} | {r.extra} | {r.wrong} | {_fmt(r.throughput, ',.0f')} | "
            f"{_fmt(r.p99_ms, '.2f')} | {_fmt(r.load_balance, '.2f')} |"
        )
    for r in rows:
        if r.error or r.differences:
            lines += ["", f"## {r.engine}: first differences", ""]
            if r.error:
                lines.append(f"- the engine failed: `{r.error}`")
            for d in r.differences:
                what = {"pair": f"pair ({d['base']}, {d['probe']})", "late": f"late id {d['id']}",
                        "aggregate": f"aggregate of base {d['base']}"}[d["kind"]]
                extra = f": expected {d['expected']}, got {d['got']}" if d["issue"] == "wrong" else ""
                times = f" x{d['n']}" if d["n"] > 1 else ""
                lines.append(f"- {d['issue']} {what}{times}{extra}")
    if report.get("spark_plan"):
        lines += ["", f"Spark plan: `{json.dumps(report['spark_plan'])}`"]
    return "\n".join(lines) + "\n"


__all__ = ["InputError", "markdown", "register", "run", "table"]
