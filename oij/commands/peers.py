"""``oij bench peers``: oij's engines, the numpy floor, Flink and Spark on the same workload, the same pairs.

The method is :mod:`oij.bench.peers`'s (docs/results.rst has the write-up and the table).
"""

from __future__ import annotations

import argparse

from oij.commands.common import options


def register(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = bsub.add_parser("peers", help="oij's engines vs the numpy floor, Flink and Spark on one workload")
    p.add_argument("--quick", action="store_true", help="20,000 tuples, one repetition, 2 replicas only (CI smoke)")
    p.add_argument("--events", type=int, default=2_000_000, help="tuples per workload (default 2,000,000)")
    p.add_argument("--repeat", type=int, default=2, help="interleaved repetitions (median reported)")
    p.add_argument("--workloads", default="uniform,zipf", help="comma-separated: uniform, zipf")
    p.add_argument("--skip", default="", help="comma-separated system names to leave out (e.g. flink-sql)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=900.0,
                   help="seconds a system may take per run; a slower one is reported as timed out (default 900)")
    p.add_argument("--out", default="peers.json", help="where the raw numbers go (default ./peers.json)")
    p.add_argument("--docs", default=None, help="also write peers-table.rst and peers.png/.svg to this directory")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from oij.bench.peers import PeersOptions, format_table, peers_bench

    print(format_table(peers_bench(options(PeersOptions, args))))
    return 0
