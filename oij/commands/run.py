"""``oij run FILE | --preset P --events N``: run a parallel engine (KP/DP/HP, Key-OIJ, Scale-OIJ).

Writes the result lines in exactly the canonical form of ``oij join`` (so the
two can be diffed), prints a metrics table on stderr, and with ``--metrics``
writes them as JSON.  With ``--preset`` the stream is generated in-process
before the clock starts (no file parsing in the measurement); with a FILE
the measurement is end to end (reading and parsing included).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from oij.commands.common import (
    UsageError,
    add_query_flags,
    check_outputs,
    input_blocks,
    output_file,
    sort_dir,
)
from oij.io.atomic import write_text
from oij.io.extsort import CanonicalSorter
from oij.io.jsonl import result_lines
from spec.batch import Results
from spec.model import Query


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run a parallel engine (kp, dp, hp, key, scale) on replica processes and shared memory",
        description="Run KP-OIJ, DP-OIJ or HP-OIJ over an event file (oij-jsonl or Parquet) or a generated "
        "preset. Result lines are canonical, byte-identical to `oij join` when the engine is correct.",
    )
    p.add_argument("file", nargs="?", help="input: oij-jsonl, .parquet, or - for stdin")
    p.add_argument("--preset", help="generate this workload preset in-process instead of reading a file")
    p.add_argument("--events", type=int, default=None, help="tuples to generate (with --preset; default: preset's)")
    p.add_argument("--seed", type=int, default=1, help="generator seed (with --preset)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="override a preset parameter (repeatable)")
    p.add_argument("--pattern", choices=["kp", "dp", "hp", "key", "scale"], default="kp",
                   help="kp/dp/hp: PPOIJ patterns; key: Key-OIJ; scale: Scale-OIJ (docs/scaleoij.rst)")
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--emitters", type=int, default=1, help="emitters per stream (M)")
    p.add_argument("--engine", choices=["auto", "blocks", "events"], default="auto",
                   help="blocks: every replica decodes, routes and joins whole blocks (parallel/blocks); events: "
                   "tuples in batches through rings and collectors, one at a time in each replica (latency "
                   "experiments, cond, --order arrival). auto: blocks unless an option only the event engine has is "
                   "given")
    p.add_argument("--batch", type=int, default=None,
                   help="event engine: tuples per batch (1..4096; default 256: PPOIJ's b=32 pays numpy's per-call "
                   "cost per 32 tuples, see docs/results.rst); giving it selects the event engine")
    p.add_argument("--collector", choices=["auto", "standard", "rr", "naive"], default="auto",
                   help="collector policy (auto: standard for kp, round robin for dp/hp; naive = negative control)")
    p.add_argument("--theta", type=float, default=1.05, help="HP: Alg. 1 balance threshold")
    p.add_argument("--max-split", type=int, default=None, help="HP: maximum splitting degree (default replicas)")
    p.add_argument("--calibration", type=int, default=4096, help="HP: tuples counted before Alg. 1 runs")
    p.add_argument("--epoch", type=int, default=None,
                   help="events per epoch (default max(8192, 4 x batch x replicas x M))")
    p.add_argument("--rate", type=float, default=None, help="pace the source at this many tuples/s (latency runs)")
    p.add_argument("--cond-index", action="store_true",
                   help="kp/dp/hp with a cond: answer window AND cond from the SPO-Join style cond index instead of "
                   "filtering the window (docs/cond.rst)")
    g = p.add_argument_group("Scale-OIJ (--pattern scale)")
    g.add_argument("--partitions", type=int, default=64, help="key partitions (hash ranges) of the team map")
    g.add_argument("--delta", type=float, default=0.01, help="Alg. 3: minimum unbalancedness decrease (delta)")
    g.add_argument("--decay", type=float, default=0.5, help="Alg. 3: statistics decay (lambda)")
    g.add_argument("--schedule-every", type=int, default=4096, help="tuples between two runs of Alg. 3 (0: never)")
    g.add_argument("--rule", choices=["team", "self", "arrival"], default="team",
                   help="hazard rule (self, arrival: negative controls that lose pairs)")
    g.add_argument("--no-incremental", action="store_true", help="recompute every window (no subtract-on-evict)")
    g.add_argument("--arena-mb", type=int, default=128, help="index arena per joiner (MiB, sparse)")
    p.add_argument("--start-method", choices=["spawn", "forkserver", "fork"], default="spawn")
    p.add_argument("-o", "--output", help="result lines to this file (default stdout; '/dev/null' to skip)")
    p.add_argument("--metrics", help="write the metrics as JSON to this file")
    p.add_argument("--cdf", help="write the latency CDF (percentile, ms) as JSON to this file")
    p.add_argument("--no-output", action="store_true", help="do not write result lines (nor keep them: bounded memory)")
    p.add_argument("--order", choices=["canonical", "arrival"], default="canonical",
                   help="canonical: sorted, byte-identical to `oij join`, in bounded memory (sorted runs spilled to "
                   "--tmp-dir and merged); arrival: each result written as the driver receives it (the order varies "
                   "between runs)")
    p.add_argument("--tmp-dir", metavar="DIR",
                   help="where the canonical order's sorted runs go (default: beside the output, or $TMPDIR for "
                   "stdout); removed at the end, on an error and on Ctrl-C")
    add_query_flags(p)
    p.set_defaults(func=run)


EVENT_ONLY = ("batch", "rate", "cdf", "cond_index", "epoch")
"""Options only the event engine has: giving one selects it under ``--engine auto``."""


def uses_blocks(args: argparse.Namespace) -> bool:
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


def _check(args: argparse.Namespace) -> None:

    if (args.file is None) == (args.preset is None):
        raise UsageError("give a FILE or --preset, not both and not neither")
    if args.batch is None:
        args.batch = 256
    if not 1 <= args.batch <= 4096:
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
    if args.cond_index and args.pattern not in ("kp", "dp", "hp"):
        raise UsageError(f"--cond-index is an option of kp, dp and hp, not of {args.pattern}")
    if args.events is not None and args.events < 0:
        raise UsageError(f"--events must be >= 0, got {args.events}")


def run(args: argparse.Namespace) -> int:
    from parallel.patterns.engine import epoch_size
    from parallel.runtime.driver import EngineFailure, JobOptions

    if uses_blocks(args):
        rc = _run_blocks(args)
        if rc is not None:
            return rc
    _check(args)
    check_outputs([None if args.no_output else args.output, args.metrics, args.cdf], [args.file])
    opt = JobOptions(pattern=args.pattern, replicas=args.replicas, emitters=args.emitters, batch=args.batch,
                     collector=args.collector, theta=args.theta, max_split=args.max_split,
                     calibration=args.calibration, epoch=args.epoch, rate=args.rate, seed=args.seed,
                     cond_index=args.cond_index)
    ep = epoch_size(opt)
    t_setup = time.perf_counter()
    with contextlib.ExitStack() as stack:
        stream: Callable[[Results], None]
        sorter: CanonicalSorter | None = None
        if args.no_output:
            stream = _discard
        elif args.order == "arrival":  # results go out as they complete; the file appears whole at the end, or not
            out = stack.enter_context(output_file(args.output, [args.file]))

            def stream(r: Results) -> None:
                out.writelines(result_lines(r))
        else:  # canonical: results go to the external sort as they complete (bounded memory), then out in order
            sorter = stack.enter_context(CanonicalSorter(sort_dir(args)))
            stream = _SortedStream(sorter)
        try:
            q, _res, metrics = _execute(args, opt, ep, stream)
        except EngineFailure as e:
            print(f"oij: error: {e}", file=sys.stderr)
            return 1
        metrics["setup_and_total_s"] = time.perf_counter() - t_setup
        if sorter is not None:
            with output_file(args.output, [args.file]) as out2:
                sorter.write(out2)
    _table(metrics, q)
    if args.metrics:
        _write_json(args.metrics, {k: v for k, v in metrics.items() if k != "latency_cdf"})
    if args.cdf:
        _write_json(args.cdf, metrics.get("latency_cdf", []))
    return 0


def _run_blocks(args: argparse.Namespace) -> int | None:
    """The block engine (parallel/blocks): the library runs it, the result goes to the atomic output.  None
    (the event engine then runs) for a query with a joining condition, and -- unless ``--engine blocks`` --
    for stdin and Parquet datasets, which are read event by event anyway."""
    from oij.io.errors import InputError
    from parallel.blocks.driver import BlockOptions, ColumnSource, file_source
    from parallel.blocks.driver import run as run_blocks
    from parallel.runtime.driver import EngineFailure

    if (args.file is None) == (args.preset is None):
        raise UsageError("give a FILE or --preset, not both and not neither")
    if args.replicas < 1 or args.replicas > 64:
        raise UsageError(f"--replicas must be in [1, 64], got {args.replicas}")
    check_outputs([None if args.no_output else args.output, args.metrics], [args.file])
    opt = BlockOptions(pattern=args.pattern, replicas=args.replicas, theta=args.theta, max_split=args.max_split,
                       partitions=args.partitions, delta=args.delta, output=not args.no_output)
    from reference.blocks import supports

    source: Any
    if args.preset is not None:
        q, blocks = _preset_blocks(args)
        source = ColumnSource(q, blocks, 1 << 17)
    elif args.engine == "auto" and (args.file == "-" or os.path.isdir(args.file)):
        return None
    else:
        from oij.commands.common import query_from_flags

        if args.file.endswith(".parquet") or os.path.isdir(args.file):
            from oij.io.parquet import parquet_query

            if not os.path.exists(args.file):
                raise InputError(args.file, 0, "file", "No such file or directory")
            source = file_source(args.file, query_from_flags(args, parquet_query(args.file), args.file))
        else:
            source = file_source(args.file)
            if query_from_flags(args, source.query, args.file) is not None:
                raise InputError(args.file, 1, "query",
                                 "query flags apply to Parquet input; oij-jsonl carries its query")
    if not supports(source.query):
        if args.engine == "blocks":
            raise UsageError("--engine blocks: the query has a joining condition (cond), which only the event "
                             "engine computes")
        return None
    try:
        with contextlib.ExitStack() as stack:
            write = None
            if not args.no_output:
                write = stack.enter_context(output_file(args.output, [args.file]))
            m = run_blocks(source, opt, None if write is None else _writer(write), sort_dir(args), args.start_method)
    except EngineFailure as e:
        print(f"oij: error: {e}", file=sys.stderr)
        return 1
    m["input"] = {"preset": args.preset, "seed": args.seed} if args.preset else {"file": args.file}
    _block_table(m)
    if args.metrics:
        _write_json(args.metrics, m)
    return 0


def _writer(out: Any) -> Any:
    """The block run's output step: its part files, in order, to ``out``."""

    def write(br: Any) -> None:
        br.write_to(out)

    return write


def _preset_params(args: argparse.Namespace) -> tuple[Any, int]:
    """The preset's parameters with the ``--param`` overrides, and the number of tuples to generate."""
    from oij.workloads import parse_value, resolve, with_overrides

    over: dict[str, Any] = {}
    for item in args.param:
        name, sep, raw = item.partition("=")
        if not sep:
            raise UsageError(f"--param wants NAME=VALUE, got {item!r}")
        over[name] = parse_value(name, raw)
    params = with_overrides(resolve(args.preset), over)
    return params, args.events if args.events is not None else params.events


def _preset_blocks(args: argparse.Namespace) -> tuple[Query, Any]:
    """A generated stream as event blocks (generated before the clock starts), ending with the end flag."""
    import numpy as np

    from oij.io.blocks import EventBlock
    from oij.workloads import ParamError, generate_blocks

    try:
        params, n_events = _preset_params(args)
        q, gen = generate_blocks(params, n_events, args.seed)
        blocks = [EventBlock(b.kind.astype(np.int8), b.side.astype(np.int8), b.id, b.ts, b.key, b.value,
                             b.channel.astype(np.int64)) for b in gen]
    except (ParamError, KeyError) as e:
        raise UsageError(str(e).strip("'\"")) from None
    blocks.append(EventBlock.from_events([]))
    blocks[-1].end = True
    return q, iter(blocks)


def _block_table(m: dict[str, Any]) -> None:
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
        print(f"{k:<{w}}  {v}", file=sys.stderr)
    print(f"{'replica':<8}{'received':>12}{'stored max':>12}{'visited':>12}{'pairs':>12}{'rows':>10}"
          f"{'decode s':>10}{'join s':>8}{'write s':>9}", file=sys.stderr)
    for s in m["per_replica"]:
        print(f"{s['replica']:<8}{s['received']:>12,}{s['stored_max']:>12,}{s['visited']:>12,}{s['pairs']:>12,}"
              f"{s['rows']:>10,}{s['t_decode']:>10.2f}{s['t_join']:>8.2f}{s['t_write']:>9.2f}", file=sys.stderr)


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


def _execute(args: argparse.Namespace, opt: Any, ep: int, stream: Callable[[Results], None] | None
             ) -> tuple[Query, Results, dict[str, Any]]:
    """Run the engine on the preset or the file: the query, the (canonical or empty) results, the metrics."""
    from parallel.runtime.emitter import chunks_from_blocks, chunks_from_event_blocks

    cdf = 100 if args.cdf else 0
    if args.preset is not None:
        from oij.workloads import ParamError, generate_blocks

        try:
            params, n_events = _preset_params(args)
            q, blocks = generate_blocks(params, n_events, args.seed)
            chunks = list(chunks_from_blocks(blocks, ep, q))  # generated before the clock starts
        except (ParamError, KeyError) as e:
            raise UsageError(str(e).strip("'\"")) from None
        res, metrics = _runner(args, opt)(args.pattern, q, chunks, n_events, _team(args, opt),
                                          start_method=args.start_method, cdf_points=cdf, stream=stream,
                                          columns=True)
        metrics["input"] = {"preset": args.preset, "seed": args.seed, "params": args.param}
        return q, res, metrics
    with input_blocks(args.file, args) as (q, fblocks):
        counted = [0]
        chunks_in = chunks_from_event_blocks(fblocks, ep, counter=counted, q=q)
        res, metrics = _runner(args, opt)(args.pattern, q, chunks_in, 0, _team(args, opt),
                                          start_method=args.start_method, cdf_points=cdf, stream=stream, columns=True)
        for _rest in fblocks:  # the engines stop at the end row: the reader must still see what follows
            pass
    metrics["events"] = counted[0]
    wall = metrics["wall_s"]
    metrics["throughput_tuples_per_s"] = counted[0] / wall if wall > 0 else None
    metrics["input"] = {"file": args.file}
    return q, res, metrics


def _runner(args: argparse.Namespace, opt: Any) -> Any:
    """kp/dp/hp run on :mod:`parallel.patterns.engine`; key/scale on :mod:`parallel.shared.teamrun` (same runtime)."""
    if args.pattern in ("key", "scale"):
        from parallel.shared.teamrun import run_chunks as team_run

        return team_run
    from parallel.patterns.engine import run_chunks

    return run_chunks


def _team(args: argparse.Namespace, opt: Any) -> Any:
    if args.pattern not in ("key", "scale"):
        return opt
    from parallel.shared.teamrun import TeamOptions

    if not 1 <= args.partitions <= 1 << 20 or args.schedule_every < 0 or not 0 <= args.decay <= 1 or \
            args.arena_mb < 1 or args.replicas > 63:
        raise UsageError("need 1 <= --partitions, --schedule-every >= 0, 0 <= --decay <= 1, --arena-mb >= 1, "
                         "--replicas <= 63")
    return TeamOptions(pattern=args.pattern, replicas=args.replicas, emitters=args.emitters, batch=args.batch,
                       epoch=args.epoch, rate=args.rate, seed=args.seed, partitions=args.partitions,
                       delta=args.delta, decay=args.decay, schedule_every=args.schedule_every, rule=args.rule,
                       incremental=not args.no_incremental, arena=args.arena_mb << 17)


def _write_json(path: str, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=1) + "\n")


def _table(m: dict[str, Any], q: Query) -> None:
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
        print(f"{k:<{w}}  {v}", file=sys.stderr)
    print(f"{'replica':<8}{'received':>12}{'stored':>12}{'comparisons':>14}{'pairs':>12}{'rows':>10}", file=sys.stderr)
    for s in m["per_replica"]:
        print(f"{s['replica']:<8}{s['received']:>12,}{s['stored']:>12,}{s['comparisons']:>14,}{s['pairs']:>12,}"
              f"{s['rows']:>10,}", file=sys.stderr)
