"""``oij generate`` (write a workload) and ``oij describe`` (what an event file is)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import orjson

from oij.commands.common import UsageError, options
from oij.options import add_options, option
from oij.pipelines.files import QueryFlags, input_events, progress
from oij.pipelines.generate import OUTPUT_REQUIRED, GenerateOptions


@dataclass(kw_only=True)
class DescribeFlags(QueryFlags):
    """The arguments of ``oij describe`` (:mod:`oij.options`), the query flags last: ``oracle`` and ``limit`` are
    :func:`oij.workloads.describe.describe_events`'s (kept here, not beside it: the fresh results measure
    ``oij/workloads/``), the rest the command's (the input, the output format, a progress bar)."""

    file: str = option(positional=True, help="input: oij-jsonl, .parquet, or - for stdin")
    json: bool = option(False, help="print the statistics as JSON")
    oracle: bool = option(True, flags=("--no-oracle",),
                          help="skip the oracle (no late fraction, exact matches, state)")
    limit: int | None = option(None, help="describe only the first LIMIT events")
    no_progress: bool = option(False, help="no progress bar")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    g = sub.add_parser(
        "generate",
        help="generate a workload (a preset or parameters) as oij-jsonl or Parquet",
        description="Generate a workload: a named preset (see --list) and/or --param NAME=VALUE overrides. "
        "Timestamps are microseconds. The same preset, parameters, --events and --seed give byte-identical "
        "files. Writes Parquet if FILE ends in .parquet, else oij-jsonl (- is stdout).",
    )
    add_options(g, GenerateOptions)
    g.set_defaults(func=run_generate)

    d = sub.add_parser(
        "describe",
        help="describe an event file: keys, skew, disorder, late fraction, matches per window, state",
        description="One pass over an event file (oij-jsonl or Parquet), running the reference oracle for the "
        "exact late fraction, matches per base tuple and retained state.",
    )
    add_options(d, DescribeFlags)
    d.set_defaults(func=run_describe)


def run_generate(args: argparse.Namespace) -> int:
    from oij.pipelines.generate import generate_file, tuple_count, workload_params
    from oij.workloads import PRESETS

    if args.list_presets:
        width = max(len(n) for n in PRESETS)
        for name, p in PRESETS.items():
            print(f"{name:<{width}}  {p.source or 'teaching'}: {p.description}")
        return 0
    p = workload_params(args.preset, args.param)
    if args.show:
        print(orjson.dumps(p.summary(), option=orjson.OPT_INDENT_2).decode())
        return 0
    if not args.output:
        raise UsageError(OUTPUT_REQUIRED)
    opts = options(GenerateOptions, args)
    events = tuple_count(opts)
    bar = None
    if not args.no_progress and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=events, desc="generate", unit=" tuples", unit_scale=True, mininterval=0.5, file=sys.stderr)
    try:
        stats = generate_file(opts, on_block=bar.update if bar else None)
    finally:
        if bar is not None:
            bar.close()
    if args.output != "-":
        print(
            f"oij: wrote {stats.tuples} tuples, {stats.watermarks} watermarks ({stats.rows} events) to {args.output}",
            file=sys.stderr,
        )
    return 0


def run_describe(args: argparse.Namespace) -> int:
    from oij.workloads.describe import describe_events, format_description

    opts = options(DescribeFlags, args)
    if opts.limit is not None and opts.limit < 0:
        raise UsageError(f"--limit: must be >= 0, got {opts.limit}")
    with input_events(opts.file, opts) as (q, events):
        evs = progress(events, enabled=not opts.no_progress, desc="describe")
        d = describe_events(q, evs, oracle=opts.oracle, limit=opts.limit)
    if opts.json:
        print(orjson.dumps(d, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())
    else:
        sys.stdout.write(format_description(opts.file, q, d))
    return 0
