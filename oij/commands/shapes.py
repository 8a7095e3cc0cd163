"""``oij bench shapes`` and ``oij bench floor``: ``oij join`` on foreign oij-jsonl shapes and Parquet, against
the I/O floor (pyarrow's reader plus writing the result).

The method is :mod:`oij.bench.shapes`'s.
"""

from __future__ import annotations

import argparse
import json

from oij.commands.common import options


def register(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = bsub.add_parser("shapes", help="oij join on oij-jsonl written by other tools (and Parquet) vs the I/O floor")
    p.add_argument("--events", type=int, default=2_000_000, help="tuples (default 2,000,000)")
    p.add_argument("--repeat", type=int, default=3, help="interleaved repetitions (median reported)")
    p.add_argument("--shapes", default=None, help="comma-separated shapes (default: all of them)")
    p.add_argument("--no-parquet", dest="parquet", action="store_false", help="leave the Parquet input out")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds a run may take (default 900)")
    p.add_argument("--out", default="shapes.json", help="where the raw numbers go (default ./shapes.json)")
    p.add_argument("--quick", action="store_true", help="20,000 tuples, one repetition (CI smoke)")
    p.set_defaults(func=run)
    f = bsub.add_parser("floor", help="the I/O floor of one input: pyarrow's reader plus writing RESULT's bytes")
    f.add_argument("input", help="an oij-jsonl or .parquet file")
    f.add_argument("result", help="the result file whose bytes the floor writes (e.g. oij join's output)")
    f.set_defaults(func=run_floor)


def run(args: argparse.Namespace) -> int:
    from oij.bench.shapes import SHAPES, ShapesOptions, format_table, shapes_bench

    if args.shapes is None:
        args.shapes = ",".join(SHAPES)
    print(format_table(shapes_bench(options(ShapesOptions, args))))
    return 0


def run_floor(args: argparse.Namespace) -> int:
    from oij.bench.shapes import floor

    print(json.dumps(floor(args.input, args.result)))
    return 0
