"""``oij bench shapes`` and ``oij bench floor``: ``oij join`` on foreign oij-jsonl shapes and Parquet, against
the I/O floor (pyarrow's reader plus writing the result).

The method is :mod:`oij.bench.shapes`'s.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from oij.bench.shapes import ShapesOptions
from oij.commands.common import options
from oij.options import add_options, option


@dataclass
class FloorFlags:
    """The arguments of ``oij bench floor`` (:mod:`oij.options`), those of :func:`oij.bench.shapes.floor`; kept
    here, not in :mod:`oij.bench.shapes`, so that the code the fresh ``shapes.json`` measured stays as it was."""

    input: str = option(positional=True, help="an oij-jsonl or .parquet file")
    result: str = option(positional=True, help="the result file whose bytes the floor writes (e.g. oij join's "
                         "output)")


def register(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = bsub.add_parser("shapes", help="oij join on oij-jsonl written by other tools (and Parquet) vs the I/O floor")
    add_options(p, ShapesOptions)
    p.set_defaults(func=run)
    f = bsub.add_parser("floor", help="the I/O floor of one input: pyarrow's reader plus writing RESULT's bytes")
    add_options(f, FloorFlags)
    f.set_defaults(func=run_floor)


def run(args: argparse.Namespace) -> int:
    from oij.bench.shapes import format_table, shapes_bench

    print(format_table(shapes_bench(options(ShapesOptions, args))))
    return 0


def run_floor(args: argparse.Namespace) -> int:
    from oij.bench.shapes import floor

    opts = options(FloorFlags, args)
    print(json.dumps(floor(opts.input, opts.result)))
    return 0
