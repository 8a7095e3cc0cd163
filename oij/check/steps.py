"""The steps of ``oij check`` (:func:`check`, the package docstring lists them): the workload, the sequential
oracle, the engines, the Spark oracle and comparison, the ``--got`` outputs with their replay cases and
attributions, the judgement up to schedule; the report is ``oij.check.report``'s."""

from __future__ import annotations

import importlib
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, cast

from oij.check.options import DEFAULT_EVENTS, DEFAULT_PRESET, SEQ_ORACLE, SPARK_ORACLE, CheckOptions
from oij.check.report import CheckReport, Row, markdown
from oij.errors import UsageError
from oij.io.atomic import write_text
from oij.pipelines.files import check_outputs, input_events, progress
from oij.spec.batch import Results
from oij.spec.model import Event, Query, StreamTuple


class Progress:
    """Stage messages on stderr with the elapsed time."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.t0 = time.perf_counter()

    def say(self, msg: str) -> None:
        if self.enabled:
            print(f"[oij check {time.perf_counter() - self.t0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def _engines(args: CheckOptions) -> list[str]:
    from oij.parallel.registry import engines

    known = engines()
    if args.engines is None:
        return sorted(known)
    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(
            f"--engines: unknown engine {unknown[0]!r}; registered: {', '.join(sorted(known)) or 'none yet'}"
        )
    reserved = [n for n in names if n in (SPARK_ORACLE, SEQ_ORACLE)]
    if reserved:
        raise UsageError(f"--engines: {reserved[0]!r} is the name of an oracle")
    return names


def _generated(args: CheckOptions) -> tuple[str, Query, Iterator[Event]]:

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


def _engine_row(name: str, fn: Any, q: Query, events: list[Event], args: CheckOptions,
                tuples: int, pool: Any = None) -> tuple[Row, Results | None]:
    from oij.parallel.registry import EngineOptions

    row = Row(name)
    t = time.perf_counter()
    try:
        run = fn(q, events, EngineOptions(replicas=args.replicas, batch=args.batch, runtime=pool))
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


@dataclass
class _Workload:
    """The workload as step 1 left it: its events in memory if they fit, and the Parquet input Spark reads."""

    source: str
    q: Query
    events: list[Event] | None
    n_events: int
    spark_input: str
    parquet_in: bool

    @property
    def tuples(self) -> int | None:
        return sum(1 for e in self.events if isinstance(e, StreamTuple)) if self.events is not None else None


def _check_options(args: CheckOptions) -> None:
    """Refuse bad options before any work."""
    from oij.spec.profiles import PROFILES

    if args.file is not None and args.preset is not None:
        raise UsageError("give a FILE or --preset, not both")
    if args.seq_limit < 0 or args.sim_limit < 0:
        raise UsageError("--seq-limit and --sim-limit must be >= 0")
    if args.profile not in PROFILES:
        raise UsageError(f"unknown profile {args.profile!r}; known: {', '.join(PROFILES)}")
    if args.attribute not in ("auto", "all", "none"):
        bad = [n for n in args.attribute.split(",") if n.strip() not in PROFILES]
        if bad:
            raise UsageError(f"--attribute: unknown profile {bad[0].strip()!r}; known: {', '.join(PROFILES)}")


def _prepare_out(args: CheckOptions) -> str:
    """Refuse an input inside the results directory (or an output inside an input dataset); make ``OUT`` and an
    empty ``OUT/results``, which it returns."""
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
    return results_dir


def _read_workload(args: CheckOptions, prog: Progress) -> _Workload:
    """Step 1: the workload, materialized as Parquet for Spark and kept in memory up to ``seq_limit`` events."""
    from oij.spark.frames import materialize

    out = args.out
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
    return _Workload(source, q, events, n_events, spark_input, parquet_in)


def _engines_to_run(args: CheckOptions, w: _Workload, names: list[str], prog: Progress) -> tuple[list[str], bool]:
    """The engines that can run on the workload, and whether the profile is simulated in memory; refuses what
    cannot run (engines or ``--no-spark`` past ``seq_limit``, a profile past ``sim_limit`` without Spark)."""
    profiled = args.profile != "canonical"
    n_events = w.n_events
    if w.events is None and names and args.engines is None:
        prog.say(f"{n_events} events > --seq-limit {args.seq_limit}: the engines need the workload in memory; "
                 f"skipping {', '.join(names)}")
        names = []
    if w.events is None and names:
        raise UsageError(f"the workload has {n_events} events, more than --seq-limit {args.seq_limit}: engines "
                         f"need it in memory; raise --seq-limit or choose no --engines")
    if profiled and not args.spark and (w.events is None or n_events > args.sim_limit):
        raise UsageError(f"--profile {args.profile} with --no-spark: the workload has {n_events} events; profiles "
                         f"are simulated in memory up to --sim-limit {args.sim_limit} (and --seq-limit "
                         f"{args.seq_limit}) events")
    simulate = w.events is not None and (not profiled or n_events <= args.sim_limit)
    if profiled and not simulate:
        prog.say(f"{n_events} events > --sim-limit {args.sim_limit}: the {args.profile} profile is computed by "
                 "Spark alone")
    if w.events is None and not args.spark:
        raise UsageError(f"the workload has more than --seq-limit {args.seq_limit} events and --no-spark leaves "
                         f"no oracle that can run it")
    return names, simulate


def _sequential(args: CheckOptions, w: _Workload, rows: list[Row], mem: dict[str, Results],
                prog: Progress) -> Results | None:
    """Step 2: the sequential oracle (the canonical result, returned) and, with a profile, its simulation as the
    seq-oracle row."""
    from oij.reference.oracle import run_events
    from oij.spec.profiles import PROFILES, compute_profile_result

    if w.events is None:
        return None
    profiled = args.profile != "canonical"
    simulate = not profiled or w.n_events <= args.sim_limit
    prog.say("sequential oracle ...")
    t = time.perf_counter()
    canonical = run_events(w.events, w.q)
    if profiled and simulate:
        prog.say(f"the {args.profile} profile (simulated) ...")
        mem[SEQ_ORACLE] = compute_profile_result(w.events, w.q, PROFILES[args.profile]).canonical()
    elif not profiled:
        mem[SEQ_ORACLE] = canonical
    if SEQ_ORACLE in mem:
        r = Row(SEQ_ORACLE, wall_s=time.perf_counter() - t)
        r.throughput = (w.tuples or 0) / r.wall_s if r.wall_s > 0 else None
        rows.append(r)
        prog.say(f"sequential oracle: {r.wall_s:.1f}s")
    return canonical


def _run_engines(args: CheckOptions, w: _Workload, names: list[str], rows: list[Row], mem: dict[str, Results],
                 prog: Progress) -> None:
    """Step 3: the engines, on one pool of replica processes (a new one after an engine that broke it)."""
    from oij.parallel.registry import get
    from oij.parallel.runtime.pool import Runtime

    pool: Runtime | None = None
    try:
        for name in names:
            assert w.events is not None
            prog.say(f"engine {name} ...")
            if pool is None or pool.closed or pool.broken:
                if pool is not None:
                    pool.close()
                pool = Runtime(args.replicas) if names else None
            r, res = _engine_row(name, get(name), w.q, w.events, args, w.tuples or 0, pool)
            rows.append(r)
            if res is not None:
                mem[name] = res
            prog.say(f"engine {name}: {r.wall_s:.1f}s" + (f" (failed: {r.error})" if r.error else ""))
    finally:
        if pool is not None:
            pool.close()


def _read_gots(args: CheckOptions, gots: list[tuple[str, str]], got_columns: dict[str, dict[str, str]],
               results_dir: str, rows: list[Row], mem: dict[str, Results], prog: Progress,
               log: Any = None) -> None:
    """The outputs of other systems (``--got``), validated as they are read into the results dataset: by Spark
    when it runs (:func:`oij.spark.got.read_got_spark`, on the executors); without Spark, oij-jsonl result lines
    column-wise in this process (:func:`_columnar_got`, up to :data:`COLUMNAR_GOT_LIMIT` bytes); else (or when
    either declines a row) by :func:`oij.testing._got.read_got`, which names the first bad row."""
    from oij.spark.compare import engine_dir
    from oij.testing._got import read_got, read_got_results

    for name, path in gots:
        prog.say(f"reading {name}: {path} ...")
        t = time.perf_counter()
        n_rows: int | None = None
        how = "python"
        with log.step(f"loading --got {name}") if log is not None else nullcontext():
            table = _columnar_got(path) if not got_columns[name] and log is None else None
            if table is not None:
                import pyarrow.parquet as pq

                from oij.spark.compare import RESULT_SCHEMA

                os.makedirs(engine_dir(results_dir, name), exist_ok=True)
                pq.write_table(table.cast(RESULT_SCHEMA), os.path.join(engine_dir(results_dir, name),
                                                                       "part-00000.parquet"))
                n_rows, how = table.num_rows, "pyarrow"
            elif log is not None:
                from oij.spark.got import read_got_spark

                n_rows = read_got_spark(log.spark, path, got_columns[name], results_dir, name,
                                        keep=args.keep_results or None)
                how = "spark"
            if n_rows is None:
                if how == "spark":
                    prog.say(f"{name}: a row Spark cannot vouch for; reading {path} row by row")
                    how = "python (declined by spark)"
                n_rows = read_got(path, got_columns[name], engine_dir(results_dir, name))
        rows.append(Row(name, wall_s=time.perf_counter() - t, metrics={"rows": n_rows, "path": path,
                                                                       "read_by": how}))
        if not args.spark:
            mem[name] = read_got_results(engine_dir(results_dir, name))
        prog.say(f"{name}: {n_rows} rows")


COLUMNAR_GOT_LIMIT = 1 << 30
"""Without Spark, oij-jsonl --got files up to this many bytes are read column-wise in this process
(:func:`oij.testing._schedule.fast_got_table`, which declines to ``read_got`` on any doubt); larger ones row by
row, so the process's memory stays small."""


def _columnar_got(path: str) -> Any:
    from oij.testing._schedule import fast_got_table

    if os.path.isfile(path) and os.path.getsize(path) <= COLUMNAR_GOT_LIMIT:
        return fast_got_table(path)
    return None


@dataclass
class _Spark:
    """Steps 4 and 5 in Spark: the session, the workload's frame, the oracle's plan, the comparisons."""

    spark: Any
    frame: Any
    plan: dict[str, Any]
    comps: dict[str, Any]


def _start_spark(args: CheckOptions, prog: Progress) -> Any:
    """The Spark session and a :class:`oij.spark.metrics.StageLog` of the steps run on it."""
    from oij.spark.frames import fit_partitions
    from oij.spark.metrics import StageLog
    from oij.spark.session import spark_session

    prog.say(f"starting Spark ({args.master}) ...")
    t = time.perf_counter()
    spark = spark_session(None if args.master == "submit" else args.master, driver_memory=args.driver_memory)
    fit_partitions(spark)
    log = StageLog(spark)
    log.started_s = round(time.perf_counter() - t, 3)
    return log


def _in_spark(args: CheckOptions, w: _Workload, results_dir: str, rows: list[Row], mem: dict[str, Results],
              gots: list[tuple[str, str]], prog: Progress, log: Any) -> _Spark:
    """Step 4, the Spark oracle (its row first), and step 5, every output compared with it in Spark."""
    from oij.spark.compare import compare_frames, write_frame
    from oij.spark.frames import read_parquet_events, validate_events
    from oij.spark.oracle import SparkOracleOptions, spark_oracle
    from oij.spark.profiles import spark_profile_oracle
    from oij.spec.profiles import PROFILES

    spark = log.spark
    prog.say("Spark oracle ...")
    t = time.perf_counter()
    with log.step("reading events"):
        _, frame = read_parquet_events(spark, w.spark_input, w.q)
    # the rows of a Parquet input no sequential reader has read yet: checked in the oracle's own scans
    validate = args.file if w.parquet_in and w.events is None else None
    sp_opts = SparkOracleOptions(method=cast(Any, args.method), theta=args.theta)
    with log.step("validating events, watermarks and late marking"):
        if args.profile != "canonical":  # the profile's result, decided per tuple and per candidate pair
            if validate is not None:
                validate_events(frame, w.q, validate)
            res_sp = spark_profile_oracle(spark, w.q, frame, PROFILES[args.profile], sp_opts,
                                          n_tuples=w.tuples if w.tuples is not None else w.n_events)
        else:
            res_sp = spark_oracle(spark, w.q, frame, sp_opts, validate=validate)
    with log.step("range join, aggregation and writing results"):
        write_frame(res_sp.frame(), results_dir, SPARK_ORACLE, keep=args.keep_results or None)
    res_sp.release()
    plan: dict[str, Any] = res_sp.plan
    r = Row(SPARK_ORACLE, wall_s=time.perf_counter() - t, agrees=True)
    spark_tuples = w.tuples if w.tuples is not None else w.n_events
    r.throughput = spark_tuples / r.wall_s if r.wall_s > 0 else None
    r.load_balance = _num(plan.get("load_balance_factor"))
    rows.insert(0, r)
    prog.say(f"Spark oracle: {r.wall_s:.1f}s; plan {plan}")
    prog.say("comparing in Spark ...")
    compared = [x.engine for x in rows if x.engine != SPARK_ORACLE and (x.engine in mem or x.engine in dict(gots))]
    with log.step("comparison"):
        comps = compare_frames(spark, results_dir, SPARK_ORACLE, compared, first=args.first)
    return _Spark(spark, frame, plan, comps)


def _replay_cases(args: CheckOptions, w: _Workload, rows: list[Row], gots: list[tuple[str, str]],
                  attribution: list[Any], canonical: Results | None, sp: _Spark | None,
                  prog: Progress) -> dict[str, list[dict[str, Any]]]:
    """A small replay case per listed difference of each ``--got`` output: from the events in memory (in the
    stream's own terms for an output that follows a profile), else from Spark."""
    from oij.spec.profiles import PROFILES

    q, events = w.q, w.events
    if not gots:
        return {}
    if args.profile != "canonical":
        prog.say(f"no replay cases under --profile {args.profile}: a replay case carries the canonical W at each "
                 "arrival, which other profiles do not follow")
        return {}
    if events is not None:
        from oij.spec.profiles import compute_profile_result
        from oij.testing._got import replay_case, replay_case_as_is

        follows = {a.system: a.explained_by[0] for a in attribution if a.explained_by}
        wholes = {p: compute_profile_result(events, q, PROFILES[p]) for p in set(follows.values())}

        def in_memory(engine: str, ds: list[dict[str, Any]]) -> list[tuple[Query, list[Event], str | None]]:
            cases: list[tuple[Query, list[Event], str | None]] = []
            for d in ds:
                p = follows.get(engine)
                as_is = replay_case_as_is(q, events, d, PROFILES[p], wholes[p], canonical) if p else None
                cases.append((*as_is, p) if as_is is not None else (*replay_case(q, events, d), None))
            return cases

        return _replays(rows, dict(gots), args.out, in_memory)
    if sp is None:
        return {}
    # past --seq-limit: the tuples of each difference and their W come from Spark
    import pyarrow.parquet as pq

    from oij.spark.frames import KEYS_META
    from oij.spark.replay import replay_picks
    from oij.testing._got import build_case

    tagged = os.path.isfile(w.spark_input) and \
        (pq.read_schema(w.spark_input).metadata or {}).get(KEYS_META) == b"tagged"
    prog.say("replay cases from Spark ...")
    return _replays(rows, dict(gots), args.out, lambda _, ds: [(*build_case(q, p), None) for p in
                                                               replay_picks(sp.spark, sp.frame, q, ds, tagged)])


def check(args: CheckOptions) -> CheckReport:
    """Run ``oij check`` with ``args`` (module docstring): write ``OUT/results``, ``OUT/report.json`` and
    ``OUT/report.md``, the replay cases, and return the report."""
    from oij.spark.compare import compare_results, write_results
    from oij.testing._got import parse_columns, parse_got

    prog = Progress(not args.no_progress)
    _check_options(args)
    names = _engines(args) if args.engines is not None or not args.got else []
    gots = parse_got(args.got, [SPARK_ORACLE, SEQ_ORACLE, *names])
    got_columns = parse_columns(args.got_columns, [n for n, _ in gots])
    if args.schedule:
        return check_schedule(args, gots, got_columns, prog)
    if args.spark:
        from oij.spark.session import check_java

        check_java()  # before any work: no Java, no Spark
    results_dir = _prepare_out(args)
    w = _read_workload(args, prog)
    prog.say(f"workload: {w.source}: {w.n_events} events; query {w.q}")
    names, simulate = _engines_to_run(args, w, names, prog)
    rows: list[Row] = []
    mem: dict[str, Results] = {}
    canonical = _sequential(args, w, rows, mem, prog)
    _run_engines(args, w, names, rows, mem, prog)
    for name, res in mem.items():
        write_results(results_dir, name, res)
    log = _start_spark(args, prog) if args.spark else None
    _read_gots(args, gots, got_columns, results_dir, rows, mem, prog, log)
    sp: _Spark | None = None
    if log is not None:
        sp = _in_spark(args, w, results_dir, rows, mem, gots, prog, log)
        reference, comps = SPARK_ORACLE, sp.comps
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
    with log.step("attribution to profiles") if log is not None else nullcontext():
        attribution = _attribution(w.q, w.events, w.n_events, rows, gots, canonical, results_dir, args, prog,
                                   *((sp.spark, sp.frame) if sp is not None else ()))
    with log.step("replay cases") if log is not None else nullcontext():
        replays = _replay_cases(args, w, rows, gots, attribution, canonical, sp, prog)
    prog.say("done")
    how = [x for x, on in (("computed by the Spark oracle", args.spark),
                           ("simulated in memory as the seq-oracle row", simulate)) if on]
    report = CheckReport(
        workload={"source": w.source, "events": w.n_events, "tuples": w.tuples, "query": _query_dict(w.q)},
        reference=reference, results=os.path.abspath(results_dir), out=args.out, rows=rows,
        spark_plan=sp.plan if sp is not None else {}, replays=replays, profile=args.profile,
        attribution=attribution, profile_how=how, checked_engines=bool(names or gots),
        spark_steps=log.rows() if log is not None else [],
        spark_start_s=log.started_s if log is not None else None)
    data = report.json()
    write_text(os.path.join(args.out, "report.json"), json.dumps(data, indent=2, default=str) + "\n")
    write_text(os.path.join(args.out, "report.md"), markdown(data, rows))
    return report


def check_schedule(args: CheckOptions, gots: list[tuple[str, str]], got_columns: dict[str, dict[str, str]],
                   prog: Progress) -> CheckReport:
    """``oij check FILE --got NAME=PATH --schedule any`` (or ``spark-checkpoint DIR``): each output judged up to
    schedule (:mod:`oij.testing._schedule`) on this machine: the events read once as columns, the output's rows
    validated as ``--got`` reads them, the judge, a replay case per witness, the report.  ``--schedule any`` runs
    on Spark instead where the check would (:func:`_schedule_on_spark`, :func:`_check_schedule_spark`)."""
    from oij.spark.compare import engine_dir
    from oij.testing._got import build_case, read_got
    from oij.testing._schedule import (
        fast_output_columns,
        judge_columns,
        judge_fixed,
        output_columns,
        replay_picks,
        spark_checkpoint_schedule,
        tuple_columns_from_file,
    )

    mode = args.schedule[0]
    if mode not in ("any", "spark-checkpoint") or (mode == "any") != (len(args.schedule) == 1) or \
            len(args.schedule) > 2:
        raise UsageError("--schedule wants 'any' or 'spark-checkpoint DIR'")
    if not gots:
        raise UsageError("--schedule judges --got outputs: give at least one --got NAME=PATH")
    if args.file is None:
        raise UsageError("--schedule needs the events FILE the outputs were computed from")
    if mode == "any" and _schedule_on_spark(args):
        return _check_schedule_spark(args, gots, got_columns, prog)
    results_dir = _prepare_out(args)
    prog.say(f"reading {args.file} ...")
    q, cols, fw = tuple_columns_from_file(args.file)
    prog.say(f"{len(cols)} tuples; query {q}")
    rows: list[Row] = []
    verdicts = []
    cases: dict[str, list[Any]] = {}
    for name, path in gots:
        prog.say(f"reading {name}: {path} ...")
        t = time.perf_counter()
        fast = fast_output_columns(path) if not got_columns[name] else None
        if fast is not None:
            got = fast
            n_rows = len(got.pair_base) + len(got.agg_base) + len(got.late)
        else:
            n_rows = read_got(path, got_columns[name], engine_dir(results_dir, name))
            got = output_columns(engine_dir(results_dir, name))
        prog.say(f"judging {name} up to schedule ...")
        if mode == "any":
            v = judge_columns(name, cols, q, got, args.profile if args.profile != "canonical" else "canonical",
                              args.family, args.parallelism, args.max_lag, fw, args.first)
        else:
            files = _input_files_of_tuples(args.schedule[1], cols)
            ws = spark_checkpoint_schedule(args.schedule[1], files)
            v = judge_fixed(name, cols, q, got, ws, args.profile if args.profile != "canonical" else "spark-ss",
                            args.first)
        v.extra["ran_on"] = "one machine"
        verdicts.append(v)
        rows.append(_verdict_row(v, n_rows, path, time.perf_counter() - t))
        cases[name] = [build_case(q, picks) for picks in replay_picks(v, cols)]
        prog.say(f"{name}: {_verdict_word(v)} ({v.seconds:.1f}s)")
    return _schedule_report(args, q, len(cols), len(cols), results_dir, rows, gots, verdicts, cases)


def _verdict_word(v: Any) -> str:
    j = v.judgement
    return "admissible" if j.admissible else "undetermined" if j.undetermined else "rejected"


def _verdict_row(v: Any, n_rows: int, path: str, wall_s: float) -> Row:
    """The report's row of one output judged up to schedule."""
    j = v.judgement
    r = Row(v.name, agrees=j.admissible, wall_s=wall_s, metrics={"rows": n_rows, "path": path, "judged": v.json()})
    r.missing = sum(1 for w in j.witnesses if w.kind == "missing")
    r.extra = sum(1 for w in j.witnesses if w.kind in ("row", "duplicate"))
    r.wrong = sum(1 for w in j.witnesses if w.kind not in ("missing", "row", "duplicate"))
    r.differences = [{"kind": w.row.get("kind", "pair"), "issue": w.kind, "n": 1, "base": w.row.get("base"),
                      "probe": w.row.get("probe"), "id": w.row.get("id"), "text": w.text} for w in j.witnesses]
    return r


def _schedule_report(args: CheckOptions, q: Query, n_events: int, n_tuples: int | None, results_dir: str,
                     rows: list[Row], gots: list[tuple[str, str]], verdicts: list[Any],
                     cases: dict[str, list[Any]]) -> CheckReport:
    replays = _replays(rows, dict(gots), args.out,
                       lambda engine, ds: [(*cs, None) for cs in cases[engine][:len(ds)]])
    report = CheckReport(
        workload={"source": args.file, "events": n_events, "tuples": n_tuples, "query": _query_dict(q)},
        reference="schedule", results=os.path.abspath(results_dir), out=args.out, rows=rows, replays=replays,
        profile="canonical", checked_engines=True, schedule=verdicts)
    data = report.json()
    write_text(os.path.join(args.out, "report.json"), json.dumps(data, indent=2, default=str) + "\n")
    write_text(os.path.join(args.out, "report.md"), markdown(data, rows))
    return report


DEFAULT_MASTER = "local[*]"
"""``--master``'s default: a check given another master runs the schedule judge on Spark whatever its size."""


def _count_events(path: str) -> int:
    """The events of an input file, for routing: a Parquet file's or dataset's rows, an oij-jsonl file's lines
    after its query line (counted in blocks of bytes, nothing parsed)."""
    from oij.io.parquet import parquet_rows

    if path.endswith(".parquet") or os.path.isdir(path):
        return parquet_rows(path)
    n = 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 24), b""):
            n += chunk.count(b"\n")
    return max(n - 1, 0)


def _schedule_on_spark(args: CheckOptions) -> bool:
    """``--schedule any`` runs on Spark when the check would: Spark not refused (``--no-spark``) and the input
    above ``--seq-limit`` events, or a ``--master`` other than the default given."""
    if not args.spark or args.file is None or not os.path.exists(args.file):
        return False
    return args.master != DEFAULT_MASTER or _count_events(args.file) > args.seq_limit


def _check_schedule_spark(args: CheckOptions, gots: list[tuple[str, str]], got_columns: dict[str, dict[str, str]],
                          prog: Progress) -> CheckReport:
    """``--schedule any`` on Spark (:func:`oij.spark.schedule.judge_spark`): the events as Parquet (an oij-jsonl
    input written to ``OUT/input.parquet`` first), each output read by Spark into ``OUT/results`` (row by row
    when Spark cannot vouch for a row), judged with no per-tuple array in this process; a replay case per
    witness from the few tuples the judge collected."""
    import pyarrow.parquet as pq

    from oij.spark.compare import engine_dir
    from oij.spark.frames import KEYS_META, materialize, read_parquet_events, validate_events
    from oij.spark.got import read_got_spark
    from oij.spark.schedule import judge_spark
    from oij.spark.session import check_java
    from oij.spec.profiles import get_profile
    from oij.testing._got import build_case, read_got
    from oij.testing._schedule import ScheduleVerdict, make_family

    assert args.file is not None
    check_java()
    profile = get_profile(args.profile)
    fam = make_family(profile, args.family, args.parallelism, args.max_lag)
    results_dir = _prepare_out(args)
    parquet_in = args.file.endswith(".parquet") or os.path.isdir(args.file)
    with input_events(args.file, args, int64_ids=True) as (q, it):
        if parquet_in:
            from oij.spark.frames import check_schema

            check_schema(args.file)
            spark_input = os.path.abspath(args.file)
            n_events = _count_events(args.file)
        else:
            spark_input = os.path.join(args.out, "input.parquet")
            prog.say(f"reading {args.file} into {spark_input} ...")
            _, n_events = materialize(q, progress(it, enabled=not args.no_progress, desc="read"), spark_input, 0)
    tagged = os.path.isfile(spark_input) and (pq.read_schema(spark_input).metadata or {}).get(KEYS_META) == b"tagged"
    log = _start_spark(args, prog)
    spark = log.spark
    _, frame = read_parquet_events(spark, spark_input, q)
    if parquet_in:
        with log.step("validating events"):
            validate_events(frame, q, args.file)
    rows: list[Row] = []
    verdicts = []
    cases: dict[str, list[Any]] = {}
    n_tuples: int | None = None
    for name, path in gots:
        prog.say(f"reading {name}: {path} ...")
        t = time.perf_counter()
        with log.step(f"loading --got {name}"):
            n_rows = read_got_spark(spark, path, got_columns[name], results_dir, name, keep=True)
            if n_rows is None:
                prog.say(f"{name}: a row Spark cannot vouch for; reading {path} row by row")
                n_rows = read_got(path, got_columns[name], engine_dir(results_dir, name))
        prog.say(f"judging {name} up to schedule on Spark ...")
        t_judge = time.perf_counter()
        with log.step(f"judging {name} up to schedule"):
            try:
                sj = judge_spark(spark, frame, q, profile, fam, spark.read.parquet(engine_dir(results_dir, name)),
                                 args.first, tagged=tagged)
            except ValueError as e:
                raise UsageError(f"--schedule: {e}") from None
        n_tuples = sj.n_tuples
        v = ScheduleVerdict(name, profile.name, fam, sj.judgement, time.perf_counter() - t_judge,
                            {"ran_on": "spark", "master": args.master})
        sj.release()
        verdicts.append(v)
        rows.append(_verdict_row(v, n_rows, path, time.perf_counter() - t))
        cases[name] = [build_case(q, picks) for picks in sj.picks]
        prog.say(f"{name}: {_verdict_word(v)} ({v.seconds:.1f}s)")
    return _schedule_report(args, q, n_events, n_tuples, results_dir, rows, gots, verdicts, cases)


def _input_files_of_tuples(ckpt: str, cols: Any) -> list[str]:
    """The input file of each tuple, for a job that wrote its inputs as ``userjob`` does: the file sources'
    paths in the checkpoint's logs, each file's tuples counted in order (every file's lines are tuples)."""
    from oij.testing._schedule import local_path, spark_checkpoint_batches

    ids_of: dict[int, str] = {}
    for f in (f for _, _, fs in spark_checkpoint_batches(ckpt) for f in fs):
        path = local_path(f)
        if not os.path.isfile(path):
            raise UsageError(f"--schedule spark-checkpoint: {path}, an input file the checkpoint names, is gone: "
                             "the judge reads which tuples each batch held from the input files")
        with open(path, "rb") as fh:
            for line in fh:
                if line.strip():
                    ids_of[int(json.loads(line)["id"])] = path
    missing = [int(i) for i in cols.ids if int(i) not in ids_of]
    if missing:
        raise UsageError(f"--schedule spark-checkpoint: tuple {missing[0]} is in no file the checkpoint's batches "
                         "read")
    return [ids_of[int(i)] for i in cols.ids]


def _attribution(q: Query, events: list[Event] | None, n_events: int, rows: list[Row], gots: list[tuple[str, str]],
                 canonical: Results | None, results_dir: str, args: CheckOptions, prog: Progress,
                 spark: Any = None, frame: Any = None) -> list[Any]:
    """For each --got output that differs from the canonical result: the profiles that explain its differences
    (:mod:`oij.testing._attribute`): simulated in memory within --sim-limit, else by the Spark oracle for the
    profiles --attribute names."""
    from oij.spark.compare import engine_dir, write_remembered
    from oij.spec.profiles import PROFILES
    from oij.testing._got import read_got_results

    if not gots or args.attribute == "none":
        return []
    names = [n for n in PROFILES if n != "canonical"] if args.attribute in ("auto", "all") else \
        [n.strip() for n in args.attribute.split(",") if n.strip()]
    if events is not None and canonical is not None and n_events <= args.sim_limit:
        from oij.testing._attribute import attribute

        write_remembered(results_dir, [n for n, _ in gots])  # outputs Spark read and only fingerprinted
        outs = {name: read_got_results(engine_dir(results_dir, name)) for name, _ in gots}
        return attribute(q, events, outs, canonical, names, say=prog.say)
    if args.attribute == "auto" or spark is None or args.profile != "canonical":
        why = ("the reference is a profile's result, not the canonical one" if args.profile != "canonical" else
               "no Spark" if spark is None else "each profile is one more Spark oracle run: ask with --attribute all "
               "or --attribute P,P")
        prog.say(f"no attribution to profiles: {n_events} events, more than --sim-limit {args.sim_limit} (or "
                 f"--seq-limit), and {why}")
        return []
    from oij.spark.oracle import SparkOracleOptions
    from oij.testing._attribute import attribute_in_spark

    write_remembered(results_dir, [n for n, _ in gots])
    return attribute_in_spark(spark, frame, q, results_dir, SPARK_ORACLE, [n for n, _ in gots], names,
                              SparkOracleOptions(method=cast(Any, args.method), theta=args.theta), say=prog.say)


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


__all__ = ["Progress", "check", "check_schedule"]
