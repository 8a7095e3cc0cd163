"""``oij check``'s options (:class:`CheckOptions`, each field with its flag and help: :mod:`oij.options`) and the
names the check gives its two oracles."""

from __future__ import annotations

from dataclasses import dataclass

from oij.options import option
from oij.parallel.config import EVENT_BATCH, REPLICAS
from oij.pipelines.files import QueryFlags
from oij.spark.salting import SPARK_THETA

SPARK_ORACLE = "spark-oracle"
SEQ_ORACLE = "seq-oracle"
DEFAULT_PRESET = "scale-oij-default"
DEFAULT_EVENTS = 20_000


@dataclass
class CheckOptions(QueryFlags):
    """The options of ``oij check``, each with its flag, help and default (:mod:`oij.options`)."""

    file: str | None = option(
        None, positional=True, nargs="?",
        help="input: oij-jsonl, .parquet, or a directory of Parquet files (a dataset as Spark writes it: files in "
        "name order are the arrival order); default: a generated workload")
    preset: str | None = option(None, help=f"generate this workload preset (default {DEFAULT_PRESET} when no FILE)")
    events: int | None = option(None, help=f"tuples to generate (default {DEFAULT_EVENTS})")
    seed: int = option(1, help="generator seed (default 1)")
    engines: str | None = option(
        None, flags=("--engines", "--patterns"), metavar="NAMES",
        help="comma-separated names of registered engines: a pattern on the event engine (kp, dp, hp, key, scale), "
        "blocks-<pattern> on the block engine, or one you registered; default: every registered engine "
        "(--patterns is its older name)")
    replicas: int = option(REPLICAS, help=f"replicas per engine (default {REPLICAS})")
    batch: int = option(EVENT_BATCH, help=f"event engine: tuples per batch (default {EVENT_BATCH}, as in oij run; "
                        "the block engines do not batch tuples)")
    spark: bool = option(True, flags=("--spark",), help="run the Spark oracle (default)", negation="--no-spark",
                         negation_help="no Spark: the sequential oracle is the reference and the comparison runs in "
                         "Python")
    out: str = option("oij-check", help="output directory (default ./oij-check)")
    master: str = option("local[*]", help="Spark master (default local[*]; e.g. spark://host:7077, or 'submit' to "
                         "keep what spark-submit set)")
    driver_memory: str = option("4g", help="Spark driver memory (default 4g)")
    method: str = option("salted", choices=["salted", "bucketed", "plain"],
                         help="Spark range join: bucketed + hot-key salting (default), bucketed, or plain")
    # --theta, the older spelling, kept hidden for one release: in `oij run` --theta is HP's split (issue 66)
    theta: float = option(SPARK_THETA, flags=("--salt-theta",), aliases=("--theta",),
                          help="Spark range join: balance threshold of PPOIJ Alg. 1 for salting hot keys")
    seq_limit: int = option(2_000_000, help="run the sequential oracle and keep events in memory up to this many "
                            "events (default 2e6)")
    first: int = option(10, help="differences listed per engine (default 10)")
    got: list[str] = option(
        factory=list, action="append", metavar="NAME=PATH",
        help="also judge another system's output: oij-jsonl result lines, Parquet (file or dataset directory) or "
        "CSV with a header; repeatable. With --got, no engine runs unless --engines names some; each difference "
        "gets a small replay case in OUT/replays/")
    got_columns: list[str] = option(
        factory=list, action="append", metavar="[NAME:]FIELD=COLUMN,...",
        help="column names of a --got output written by another tool (of --got NAME, or of every --got): fields "
        "kind, base, probe, count, value, id (e.g. flink:base=a_id,probe=b_id); repeatable")
    profile: str = option(
        "canonical",
        help="judge against a semantic profile of oij.spec.profiles (spark-ss, flink-sql, ...; default canonical): "
        "the Spark oracle computes its result at any size, and within --sim-limit it is also simulated in memory "
        "as the seq-oracle row; the comparison runs in Python")
    attribute: str = option(
        "auto", metavar="PROFILES",
        help="which profiles to try on each --got output's differences: auto (default: every named profile within "
        "--sim-limit, simulated in memory; none past it), all, none, or P,P,...; past --sim-limit each one is a "
        "Spark oracle run")
    sim_limit: int = option(
        200_000,
        help="events up to which profiles are simulated: for --profile, and to attribute each --got output's "
        "differences to the profiles that explain them (default 200000; about 0.35 ms per event per profile)")
    keep_results: bool = option(
        False, help="on Spark: write every row of the Spark oracle to OUT/results (by default only the buckets "
        "whose fingerprints differ from an output's are written; docs/spark.rst)")
    schedule: list[str] = option(
        factory=list, nargs="+", metavar="MODE",
        help="judge each --got output up to schedule: 'any' accepts it when some admissible watermark schedule "
        "(--family) explains it, as a real engine that picks its own watermark timing produces; 'spark-checkpoint "
        "DIR' judges it under the schedule recorded in a Spark checkpoint (docs/howto-check-output.rst)")
    family: str = option(
        "auto", help="with --schedule any: the chains along which W never decreases: auto (the strictest sound for "
        "--profile: spark-ss one arrival order from W 0, flink-datastream each input's order, or each instance's "
        "with --parallelism), arrival, input, instance, key")
    parallelism: int = option(1, help="with --schedule any and Flink: the job's parallelism (keys go to instances "
                              "by Flink's key groups; default 1)")
    max_lag: str | None = option(
        None, help="with --schedule any: how far W may trail the eager bound, N tuples or Nts in ts units (default: "
        "unbounded, so a batch join of all tuples is admissible)")
    no_progress: bool = option(False, help="no progress messages")


__all__ = ["DEFAULT_EVENTS", "DEFAULT_PRESET", "SEQ_ORACLE", "SPARK_ORACLE", "CheckOptions"]
