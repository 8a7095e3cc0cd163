"""A parallel engine (KP/DP/HP, Key-OIJ, Scale-OIJ) from a file or a preset to a file: ``oij run``
(``run_engine``).

Writes the result lines in exactly the canonical form of ``oij join`` (so the
two can be diffed) and with ``--metrics`` the metrics as JSON; ``run_engine``
returns them, and ``RunReport.table`` is the table ``oij run`` prints on
stderr.  With ``--preset`` the stream is generated in-process
before the clock starts (no file parsing in the measurement); with a FILE
the measurement is end to end (reading and parsing included).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oij.errors import UsageError
from oij.io.atomic import write_text
from oij.io.extsort import CanonicalSorter
from oij.io.jsonlwrite import result_lines
from oij.options import option
from oij.parallel.config import (
    BATCH,
    CALIBRATION,
    COLLECTOR_ALIASES,
    COLLECTORS,
    DECAY,
    DELTA,
    EVENT_BATCH,
    PARTITIONS,
    PATTERNS,
    REPLICAS,
    ROUTED_PATTERNS,
    SCHEDULE_EVERY,
    TEAM_PATTERNS,
    THETA,
    EngineConfig,
    engine_config,
    epoch_size,
)
from oij.pipelines.files import FilePlan, QueryFlags, plan_files
from oij.spec.batch import Results
from oij.spec.model import Query

SCALE_GROUP = "Scale-OIJ (--pattern scale)"



@dataclass
class RunOptions(QueryFlags):
    """The options of ``oij run``, each with its flag, help and default (:mod:`oij.options`)."""

    file: str | None = option(None, positional=True, nargs="?", help="input: oij-jsonl, .parquet, or - for stdin")
    preset: str | None = option(None, help="generate this workload preset in-process instead of reading a file")
    events: int | None = option(None, help="tuples to generate (with --preset; default: preset's)")
    seed: int = option(1, help="generator seed (with --preset)")
    param: list[str] = option(factory=list, action="append", metavar="NAME=VALUE",
                              help="override a preset parameter (repeatable)")
    pattern: str = option("kp", choices=PATTERNS,
                          help="kp/dp/hp: PPOIJ patterns; key: Key-OIJ; scale: Scale-OIJ (docs/scaleoij.rst)")
    replicas: int = option(REPLICAS)
    emitters: int = option(1, help="emitters per stream (M)")
    engine: str = option(
        "auto", choices=["auto", "blocks", "events"],
        help="blocks: every replica decodes, routes and joins whole blocks (parallel/blocks); events: tuples in "
        "batches through rings and collectors, one at a time in each replica (latency experiments, cond, --order "
        "arrival). auto: blocks unless an option only the event engine has is given")
    barriers: str = option(
        "piece", choices=["piece", "round"],
        help="block engine: piece -- each piece is routed once the pieces before it are decoded and joined once it "
        "is routed; round -- a round's pieces wait for each other at both steps (slower by a few per cent; "
        "docs/blocks.rst)")
    batch: int | None = option(
        None, help=f"event engine: tuples per batch (1..4096; default {EVENT_BATCH}: PPOIJ's b={BATCH} pays numpy's "
        f"per-call cost per {BATCH} tuples, see docs/results.rst); giving it selects the event engine")
    collector: str = option(
        "auto", choices=["auto", *COLLECTORS], type=lambda s: COLLECTOR_ALIASES.get(s, s),
        help="collector policy (auto: standard for kp, round-robin for dp/hp; naive = negative control; rr is "
        "round-robin)")
    theta: float = option(THETA, help="HP: Alg. 1 balance threshold")
    max_split: int | None = option(None, help="HP: maximum splitting degree (default replicas)")
    calibration: int = option(CALIBRATION, help="HP: tuples counted before Alg. 1 runs")
    epoch: int | None = option(None, help="events per epoch (default max(8192, 4 x batch x replicas x M))")
    rate: float | None = option(None, help="pace the source at this many tuples/s (latency runs)")
    cond_index: bool = option(
        False, help="kp/dp/hp with a cond: answer window AND cond from the SPO-Join style cond index instead of "
        "filtering the window (docs/cond.rst)")
    partitions: int = option(PARTITIONS, help="key partitions (hash ranges) of the team map", group=SCALE_GROUP)
    delta: float = option(DELTA, help="Alg. 3: minimum unbalancedness decrease (delta)", group=SCALE_GROUP)
    decay: float = option(DECAY, help="Alg. 3: statistics decay (lambda)", group=SCALE_GROUP)
    schedule_every: int = option(SCHEDULE_EVERY, help="tuples between two runs of Alg. 3 (0: never)",
                                 group=SCALE_GROUP)
    rule: str = option("team", choices=["team", "self", "arrival"],
                       help="hazard rule (self, arrival: negative controls that lose pairs)", group=SCALE_GROUP)
    no_incremental: bool = option(False, help="recompute every window (no subtract-on-evict)", group=SCALE_GROUP)
    arena_mb: int = option(128, help="index arena per joiner (MiB, sparse)", group=SCALE_GROUP)
    start_method: str = option("spawn", choices=["spawn", "forkserver", "fork"])
    output: str | None = option(None, flags=("-o", "--output"),
                                help="result lines to this file (default stdout; '/dev/null' to skip)")
    metrics: str | None = option(None, help="write the metrics as JSON to this file")
    cdf: str | None = option(None, help="write the latency CDF (percentile, ms) as JSON to this file")
    no_output: bool = option(False, help="do not write result lines (nor keep them: bounded memory)")
    order: str = option(
        "canonical", choices=["canonical", "arrival"],
        help="canonical: sorted, byte-identical to `oij join`, in bounded memory (sorted runs spilled to --tmp-dir "
        "and merged); arrival: each result written as the driver receives it (the order varies between runs)")
    tmp_dir: str | None = option(
        None, metavar="DIR",
        help="where the canonical order's sorted runs go (default: beside the output, or $TMPDIR for stdout); "
        "removed at the end, on an error and on Ctrl-C")


@dataclass
class RunReport:
    """What a run measured: its metrics (as ``--metrics`` writes them) and which engine ran."""

    metrics: dict[str, Any]
    blocks: bool  # the block engine (else the event engine)

    def table(self) -> str:
        """The metrics table ``oij run`` prints on stderr."""
        return block_table(self.metrics) if self.blocks else metrics_table(self.metrics)


EVENT_ONLY = ("batch", "rate", "cdf", "cond_index", "epoch")
"""Options only the event engine has: giving one selects it under ``--engine auto``."""


def uses_blocks(args: RunOptions) -> bool:
    """Whether ``oij run`` takes the block engine (``--engine``, and under ``auto`` no event-engine option, the
    canonical order or no output, one emitter, the automatic collector)."""
    event_opts = [f"--{n.replace('_', '-')}" for n in EVENT_ONLY if getattr(args, n) not in (None, False)]
    if args.order == "arrival" and not args.no_output:
        event_opts.append("--order arrival")
    if args.emitters != 1:
        event_opts.append("--emitters")
    if args.collector != "auto":
        event_opts.append("--collector")
    if args.engine == "blocks" and event_opts:
        raise UsageError(f"--engine blocks: {event_opts[0]} is an option of the event engine")
    return args.engine == "blocks" or (args.engine == "auto" and not event_opts)


@dataclass(frozen=True)
class RunPlan:
    """``oij run``'s options resolved in one pass (:func:`plan_run`), before any work: which engine, its one
    configuration object, the query and the files.  The run reads ``args`` only for what it does itself (the
    preset to generate, the output order, the JSON files)."""

    args: RunOptions
    blocks: bool  # the block engine (parallel/blocks), else the event engine
    config: EngineConfig  # BlockOptions, JobOptions or TeamOptions, every setting from ``args``
    files: FilePlan
    query: Query | None  # the input's query (None: stdin's, known once it is read)


def check_run(args: RunOptions) -> None:
    """Refuse (:class:`UsageError`) options out of range or that contradict each other; reads no file."""
    if (args.file is None) == (args.preset is None):
        raise UsageError("give a FILE or --preset, not both and not neither")
    if args.batch is not None and not 1 <= args.batch <= 4096:
        raise UsageError(f"--batch must be in [1, 4096], got {args.batch}")
    if args.replicas < 1 or args.replicas > 64:
        raise UsageError(f"--replicas must be in [1, 64], got {args.replicas}")
    if args.emitters < 1 or args.emitters > 16:
        raise UsageError(f"--emitters must be in [1, 16], got {args.emitters}")
    if args.theta < 1:
        raise UsageError(f"--theta must be >= 1, got {args.theta}")
    if args.max_split is not None and args.max_split < 1:
        raise UsageError(f"--max-split must be >= 1, got {args.max_split}")
    if args.rate is not None and args.rate <= 0:
        raise UsageError(f"--rate must be > 0, got {args.rate}")
    if args.cond_index and args.pattern not in ROUTED_PATTERNS:
        raise UsageError(f"--cond-index is an option of kp, dp and hp, not of {args.pattern}")
    if args.events is not None and args.events < 0:
        raise UsageError(f"--events must be >= 0, got {args.events}")


def plan_run(args: RunOptions) -> RunPlan:
    """Every check of ``args`` and of the files they name, once, then the engine and its configuration:
    the block engine under ``--engine blocks``, or under ``auto`` (:func:`uses_blocks`) for a file or a preset
    whose query has no joining condition; else the event engine.  Raises :class:`UsageError` or
    :class:`~oij.io.errors.InputError`; starts nothing."""
    from oij.reference.block_oracle import supports

    check_run(args)
    blocks = uses_blocks(args)
    files = plan_files(args, args.file, args.output, [args.metrics, args.cdf], results=not args.no_output)
    query = files.query if args.preset is None else _preset_params(args)[0].query()
    if blocks and args.engine == "auto" and (args.file == "-" or os.path.isdir(str(args.file))):
        blocks = False  # stdin and Parquet datasets are read event by event anyway
    if blocks and query is not None and not supports(query):
        if args.engine == "blocks":
            raise UsageError("--engine blocks: the query has a joining condition (cond), which only the event "
                             "engine computes")
        blocks = False
    if blocks:
        from oij.parallel.blocks.driver import BlockOptions

        config: EngineConfig = engine_config(BlockOptions, args, output=not args.no_output)
    elif args.pattern in TEAM_PATTERNS:
        config = _team(args)
    else:
        from oij.parallel.runtime.pool import JobOptions

        config = engine_config(JobOptions, args, batch=EVENT_BATCH if args.batch is None else args.batch)
    return RunPlan(args, blocks, config, files, query)


def run_engine(args: RunOptions) -> RunReport:
    """Run the engine ``args`` choose on their input (:func:`plan_run`); the output and the JSON files written.
    An engine that fails raises :class:`oij.parallel.runtime.pool.EngineFailure`."""
    plan = plan_run(args)
    if plan.blocks:
        return RunReport(_run_blocks(plan), True)
    return RunReport(_run_events(plan), False)


def _run_events(plan: RunPlan) -> dict[str, Any]:
    """The event engine (KP/DP/HP or Key/Scale-OIJ on the replica pool): results to the output in the chosen
    order; the metrics."""
    from oij.parallel.runtime.pool import EngineFailure

    args, opt = plan.args, plan.config
    ep = epoch_size(opt)
    t_setup = time.perf_counter()
    with contextlib.ExitStack() as stack:
        stream: Callable[[Results], None]
        sorter: CanonicalSorter | None = None
        if args.no_output:
            stream = _discard
        elif args.order == "arrival":  # results go out as they complete; the file appears whole at the end, or not
            out = stack.enter_context(plan.files.open_output())

            def stream(r: Results) -> None:
                out.writelines(result_lines(r))
        else:  # canonical: results go to the external sort as they complete (bounded memory), then out in order
            sorter = stack.enter_context(CanonicalSorter(plan.files.sort_dir))
            stream = _SortedStream(sorter)
        failure: EngineFailure | None = None
        try:
            metrics = _execute(plan, ep, stream)
        except EngineFailure as e:  # raised after the block, which commits what was written (as before)
            failure = e
        if failure is None:
            metrics["setup_and_total_s"] = time.perf_counter() - t_setup
        if sorter is not None and failure is None:
            with plan.files.open_output() as out2:
                sorter.write(out2)
    if failure is not None:
        raise failure
    if args.metrics:
        _write_json(args.metrics, {k: v for k, v in metrics.items() if k != "latency_cdf"})
    if args.cdf:
        _write_json(args.cdf, metrics.get("latency_cdf", []))
    return metrics


def _run_blocks(plan: RunPlan) -> dict[str, Any]:
    """The block engine (parallel/blocks): the library runs it, the result goes to the atomic output."""
    from oij.parallel.blocks.driver import BlockOptions, ColumnSource, file_source
    from oij.parallel.blocks.driver import run as run_blocks

    args, opt = plan.args, plan.config
    assert isinstance(opt, BlockOptions)
    source: Any
    if args.preset is not None:
        q, blocks = _preset_blocks(args)
        source = ColumnSource(q, blocks, 1 << 17)
    else:
        assert args.file is not None  # a FILE or --preset (check_run)
        source = file_source(args.file, plan.files.override)
        from oij.reference.block_oracle import supports

        if not supports(source.query):  # stdin under --engine blocks: its query is known only now
            raise UsageError("--engine blocks: the query has a joining condition (cond), which only the event "
                             "engine computes")
    with contextlib.ExitStack() as stack:
        write = None
        if not args.no_output:
            write = stack.enter_context(plan.files.open_output())
        m: dict[str, Any] = run_blocks(source, opt, None, plan.files.sort_dir, args.start_method, out=write)
    m["input"] = {"preset": args.preset, "seed": args.seed} if args.preset else {"file": args.file}
    if args.metrics:
        _write_json(args.metrics, m)
    return m


def _preset_params(args: RunOptions) -> tuple[Any, int]:
    """The preset's parameters with the ``--param`` overrides, and the number of tuples to generate
    (:class:`UsageError` for an unknown preset or parameter)."""
    from oij.workloads import ParamError, parse_value, resolve, with_overrides

    over: dict[str, Any] = {}
    for item in args.param:
        name, sep, raw = item.partition("=")
        if not sep:
            raise UsageError(f"--param wants NAME=VALUE, got {item!r}")
        try:
            over[name] = parse_value(name, raw)
        except (ParamError, KeyError) as e:
            raise UsageError(str(e).strip("'\"")) from None
    assert args.preset is not None
    try:
        params = with_overrides(resolve(args.preset), over)
    except (ParamError, KeyError) as e:
        raise UsageError(str(e).strip("'\"")) from None
    return params, args.events if args.events is not None else params.events


def _preset_blocks(args: RunOptions) -> tuple[Query, Any]:
    """A generated stream as event blocks (generated before the clock starts), ending with the end flag."""
    from oij.io.columnar import EventBlock
    from oij.workloads import generate_blocks

    params, n_events = _preset_params(args)
    q, gen = generate_blocks(params, n_events, args.seed)
    blocks = [b.events for b in gen]
    blocks.append(EventBlock.from_events([]))
    blocks[-1].end = True
    return q, iter(blocks)


def block_table(m: dict[str, Any]) -> str:
    """The block engine's metrics as the table ``oij run`` prints."""
    out: list[str] = []
    wall = m["wall_s"]
    rows = [
        ("engine", f"blocks: {m['pattern']} (replicas {m['replicas']}: this process + {m['replicas'] - 1} helpers)"),
        ("events", f"{m['events']:,} ({m['late']:,} late) in {m['pieces']} pieces, {m['rounds']} rounds"),
        ("wall", f"{m['total_s']:.3f} s (join {wall:.3f} s, the rest starting helpers and writing)"),
        ("throughput", f"{m['tuples'] / m['total_s']:,.0f} tuples/s" if m["total_s"] > 0 else "-"),
        ("load balance factor", f"{m['load_balance_factor']:.3f}"),
        ("replication", f"{m['replication']:.3f} deliveries per on-time tuple"),
    ]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        out.append(f"{k:<{w}}  {v}")
    out.append(f"{'replica':<8}{'received':>12}{'stored max':>12}{'visited':>12}{'pairs':>12}{'rows':>10}"
               f"{'decode s':>10}{'join s':>8}{'write s':>9}")
    for s in m["per_replica"]:
        out.append(f"{s['replica']:<8}{s['received']:>12,}{s['stored_max']:>12,}{s['visited']:>12,}{s['pairs']:>12,}"
                   f"{s['rows']:>10,}{s['t_decode']:>10.2f}{s['t_join']:>8.2f}{s['t_write']:>9.2f}")
    return "\n".join(out)


def _discard(r: Results) -> None:
    """``--no-output``: results are counted by the sink and dropped."""


class _SortedStream:
    """The canonical order's stream: every result to the external sort; the sink hands pairs over as columns
    (``pairs``), with no Python object per pair."""

    def __init__(self, sorter: CanonicalSorter) -> None:
        self.sorter = sorter

    def __call__(self, r: Results) -> None:
        self.sorter.add(r)

    def pairs(self, a: Any, b: Any) -> None:
        import numpy as np

        self.sorter.add_pair_columns(a, b, np.zeros(len(a), np.bool_))


def _execute(plan: RunPlan, ep: int, stream: Callable[[Results], None] | None) -> dict[str, Any]:
    """Run the event engine on the preset or the file: the metrics (the results went to ``stream``)."""
    from oij.parallel.runtime.emitter import chunks_from_blocks, chunks_from_event_blocks

    args, opt = plan.args, plan.config
    cdf = 100 if args.cdf else 0
    if args.preset is not None:
        from oij.workloads import generate_blocks

        params, n_events = _preset_params(args)
        q, blocks = generate_blocks(params, n_events, args.seed)
        chunks = list(chunks_from_blocks(blocks, ep, q))  # generated before the clock starts
        metrics: dict[str, Any]
        _res, metrics = _runner(args)(args.pattern, q, chunks, n_events, opt, start_method=args.start_method,
                                      cdf_points=cdf, stream=stream, columns=True)
        metrics["input"] = {"preset": args.preset, "seed": args.seed, "params": args.param}
        return metrics
    with plan.files.open_blocks() as (q, fblocks):
        counted = [0]
        chunks_in = chunks_from_event_blocks(fblocks, ep, counter=counted, q=q)
        _res, metrics = _runner(args)(args.pattern, q, chunks_in, 0, opt, start_method=args.start_method,
                                      cdf_points=cdf, stream=stream, columns=True)
        for _rest in fblocks:  # the engines stop at the end row: the reader must still see what follows
            pass
    metrics["events"] = counted[0]
    wall = metrics["wall_s"]
    metrics["throughput_tuples_per_s"] = counted[0] / wall if wall > 0 else None
    metrics["input"] = {"file": args.file}
    return metrics


def _runner(args: RunOptions) -> Any:
    """kp/dp/hp run on :mod:`oij.parallel.patterns.entry`; key/scale on :mod:`oij.parallel.shared.teamrun`
    (same runtime)."""
    if args.pattern in TEAM_PATTERNS:
        from oij.parallel.shared.teamrun import run_chunks as team_run

        return team_run
    from oij.parallel.patterns.entry import run_chunks

    return run_chunks


def _team(args: RunOptions) -> Any:
    """The options of a key or scale run on the event engine (its own settings checked; the shared ones by
    :func:`check_run`)."""
    from oij.parallel.shared.teamrun import TeamOptions

    if not 1 <= args.partitions <= 1 << 20 or args.schedule_every < 0 or not 0 <= args.decay <= 1 or \
            args.arena_mb < 1 or args.replicas > 63:
        raise UsageError("need 1 <= --partitions, --schedule-every >= 0, 0 <= --decay <= 1, --arena-mb >= 1, "
                         "--replicas <= 63")
    return engine_config(TeamOptions, args, incremental=not args.no_incremental, arena=args.arena_mb << 17,
                         collector=TeamOptions.collector, batch=EVENT_BATCH if args.batch is None else args.batch)


def _write_json(path: str, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=1) + "\n")


def metrics_table(m: dict[str, Any]) -> str:
    """The event engine's metrics as the table ``oij run`` prints."""
    out: list[str] = []
    lat = m["latency_ms"]

    def f(x: Any, spec: str = ".2f") -> str:
        return "-" if x is None else format(x, spec)

    rows = [
        ("pattern", f"{m['pattern']} (replicas {m['replicas']}, emitters {m['emitters']}, batch {m['batch']})"),
        ("events", f"{m['events']:,} ({m['late']:,} late)"),
        ("wall", f"{m['wall_s']:.3f} s"),
        ("throughput", f"{f(m['throughput_tuples_per_s'], ',.0f')} tuples/s"),
        ("latency p50/p95/p99", f"{f(lat['p50'])} / {f(lat['p95'])} / {f(lat['p99'])} ms"),
        ("load balance factor", f"{m['load_balance_factor']:.3f}"),
        ("unbalancedness", f"{m['unbalancedness']:.3f}"),
        ("avg splitting degree", f"{m['avg_splitting_degree']:.2f}"),
        ("broadcast degree", f(m["broadcast_degree"])),
        ("bytes written / read", f"{m['bytes_written']:,} / {m['bytes_read']:,}"),
    ]
    if "effectiveness" in m:
        rows += [
            ("effectiveness (Eq. 1)", f"{f(m['effectiveness'], '.3f')} ({m['in_window']:,} in window / "
             f"{m['visited']:,} visited; {m['search_steps']:,} search steps)"),
            ("aggregation work", f"{m['agg_work']:,} entries ({f(m['agg_work_saved'], '.1%')} saved vs "
             f"{m['agg_recompute_work']:,})"),
        ]
    if "reschedules" in m:
        rows += [("reschedules", f"{m['reschedules']} (team size mean {m['team_size_mean']:.2f}, "
                  f"max {m['team_size_max']}; hazard waits {m['hazard_waits']:,})")]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        out.append(f"{k:<{w}}  {v}")
    out.append(f"{'replica':<8}{'received':>12}{'stored':>12}{'comparisons':>14}{'pairs':>12}{'rows':>10}")
    for s in m["per_replica"]:
        out.append(f"{s['replica']:<8}{s['received']:>12,}{s['stored']:>12,}{s['comparisons']:>14,}{s['pairs']:>12,}"
                   f"{s['rows']:>10,}")
    return "\n".join(out)


__all__ = ["EVENT_ONLY", "RunOptions", "RunPlan", "RunReport", "block_table", "check_run",
           "metrics_table", "plan_run", "run_engine", "uses_blocks"]
