"""``oij bench peers``: oij's engines, the numpy floor, Flink and Spark on the same workload, the same pairs.

The method is :mod:`oij.bench.peers`'s (docs/results.rst has the write-up and the table).
"""

from __future__ import annotations

import argparse

from oij.bench.peers import PeersOptions
from oij.commands.common import options
from oij.options import add_options


def register(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = bsub.add_parser("peers", help="oij's engines vs the numpy floor, Flink and Spark on one workload")
    add_options(p, PeersOptions)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from oij.bench.peers import format_table, peers_bench

    print(format_table(peers_bench(options(PeersOptions, args))))
    return 0
