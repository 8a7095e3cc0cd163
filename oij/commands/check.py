"""``oij check [FILE | --preset P] [--engines ...]``: check every engine against the oracles (the main job).

The steps are :func:`oij.check.check`'s; this module parses the flags and prints its :class:`~oij.check.CheckReport`.
Exit code 0 iff every engine (and the sequential oracle) agrees with the reference, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse

from oij.check import DEFAULT_EVENTS, DEFAULT_PRESET, CheckOptions, check
from oij.commands.common import add_query_flags, options


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
    p.add_argument("--engines", "--patterns", dest="engines", metavar="NAMES",
                   help="comma-separated names of registered engines: a pattern on the event engine (kp, dp, hp, "
                   "key, scale), blocks-<pattern> on the block engine, or one you registered; default: every "
                   "registered engine (--patterns is its older name)")
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
    p.add_argument("--salt-theta", dest="theta", type=float, default=CheckOptions.theta,
                   help="Spark range join: balance threshold of PPOIJ Alg. 1 for salting hot keys")
    # the older spelling, kept for one release: in `oij run` --theta is HP's split threshold (issue 66)
    p.add_argument("--theta", dest="theta", type=float, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument("--seq-limit", type=int, default=2_000_000,
                   help="run the sequential oracle and keep events in memory up to this many events (default 2e6)")
    p.add_argument("--first", type=int, default=10, help="differences listed per engine (default 10)")
    p.add_argument("--got", action="append", metavar="NAME=PATH", default=[],
                   help="also judge another system's output: oij-jsonl result lines, Parquet (file or dataset "
                   "directory) or CSV with a header; repeatable. With --got, no engine runs unless --engines names "
                   "some; each difference gets a small replay case in OUT/replays/")
    p.add_argument("--got-columns", metavar="[NAME:]FIELD=COLUMN,...", action="append", default=[],
                   help="column names of a --got output written by another tool (of --got NAME, or of every --got): "
                   "fields kind, base, probe, count, value, id (e.g. flink:base=a_id,probe=b_id); repeatable")
    p.add_argument("--profile", default="canonical",
                   help="judge against a semantic profile of oij.spec.profiles (spark-ss, flink-sql, ...; default "
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
    p.add_argument("--keep-results", action="store_true",
                   help="on Spark: write every row of the Spark oracle to OUT/results (by default only the "
                   "buckets whose fingerprints differ from an output's are written; docs/spark.rst)")
    p.add_argument("--schedule", nargs="+", metavar="MODE", default=[],
                   help="judge each --got output up to schedule: 'any' accepts it when some admissible watermark "
                   "schedule (--family) explains it, as a real engine that picks its own watermark timing "
                   "produces; 'spark-checkpoint DIR' judges it under the schedule recorded in a Spark "
                   "checkpoint (docs/howto-check-output.rst)")
    p.add_argument("--family", default="auto", help="with --schedule any: the chains along which W never "
                   "decreases: auto (the strictest sound for --profile: spark-ss one arrival order from W 0, "
                   "flink-datastream each input's order, or each instance's with --parallelism), arrival, input, "
                   "instance, key")
    p.add_argument("--parallelism", type=int, default=1, help="with --schedule any and Flink: the job's "
                   "parallelism (keys go to instances by Flink's key groups; default 1)")
    p.add_argument("--max-lag", default=None, help="with --schedule any: how far W may trail the eager bound, N "
                   "tuples or Nts in ts units (default: unbounded, so a batch join of all tuples is admissible)")
    p.add_argument("--no-progress", action="store_true", help="no progress messages")
    add_query_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = check(options(CheckOptions, args))
    print(report.text())
    return 0 if report.all_agree else 1
