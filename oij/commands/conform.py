"""``oij conform [options] -- CMD [ARGS...]``: property-based conformance testing of another implementation.

CMD reads one oij-jsonl v1 case on stdin and writes its result lines on
stdout (docs/conformance.rst).  Hypothesis generates cases, runs CMD once per
case and compares with the oracle; a failure is shrunk to a minimal case,
printed as a timeline, written to a replay file, and exit code 1.  Exit 0:
conforms, with the number of cases and the situations exercised.
"""

from __future__ import annotations

import argparse
import os

from oij.spec.profiles import PROFILES
from oij.testing._features import FEATURES, OPT_IN

FEATURE_NAMES = (", ".join(f for f in FEATURES if f not in OPT_IN) + "; "
                 + ", ".join(f for f in FEATURES if f in OPT_IN) + " (opt-in)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "conform",
        help="check another implementation (a command) against the oracle",
        description="Generate cases, run CMD once per case (case on stdin, result lines on stdout), compare with "
        "the oracle. On failure: a minimal case as a timeline, a replay file, the semantic profile that explains "
        "the implementation if one does, exit 1. Features: " + FEATURE_NAMES + ". Profiles: "
        + ", ".join(PROFILES) + ".",
        epilog="example: oij conform --features=-aggregates,-channels -- python my_join.py",
    )
    p.add_argument("cmd", nargs="*", metavar="-- CMD", help="the implementation under test, after --: CMD [ARGS...]")
    p.add_argument("--features", help="what CMD claims: a,b,c or all,-a,-b (default all)")
    p.add_argument("--profile", default=None,
                   help="check against this semantic profile (default canonical; with --restarts --adapter NAME, "
                   "the adapter's profile)")
    p.add_argument("--max-examples", type=int, default=None,
                   help="cases to generate (default 200; 20 with --restarts)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0: runs are reproducible)")
    p.add_argument("--small-scope", default=None, metavar="K",
                   help="after the vectors, every case of up to K events over a small alphabet, deduplicated by "
                   "symmetry (K=1: 80 cases, K=2: 1,408, K=3: 18,480), or 'cover': a pairwise covering array of "
                   "those of K=2 (about 160 cases); default 2 with --session, else cover (one process per case: "
                   "all of K=2 would take minutes)")
    p.add_argument("--no-vectors", action="store_true",
                   help="skip the test vectors (oij vectors: the fixed corpus run before the generated cases)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per case (with --restarts: per incarnation) before CMD counts as hung (default 10; "
                   "300 with --restarts --adapter NAME)")
    p.add_argument("--rest", type=float, default=None, metavar="SECONDS",
                   help="with --restarts: a kill between events (fed) comes when CMD has checkpointed the events "
                   "it was given, or its output has rested this long (default 1; 30 with --adapter NAME)")
    p.add_argument("--no-shrink", action="store_true",
                   help="with --restarts: report the first failing case as found, unshrunk (slow engines)")
    p.add_argument("--shrink-budget", type=float, default=None, metavar="SECONDS",
                   help="with --restarts: the first failure is printed as found, then shrunk for at most this long "
                   "(default 60; the report says when the budget stopped the shrinking)")
    p.add_argument("-j", "--jobs", type=int, default=None,
                   help="run cases in this many processes (default 1 for the generated cases; the vectors and "
                   "small-scope cases, a fixed list judged in order, run two at a time on two cores or more: -j 1 "
                   "runs everything one at a time)")
    p.add_argument("--session", action="store_true",
                   help="start CMD once (per job) for many cases, with OIJ_SESSION=1: after each case it writes "
                   "its result lines and the line {\"type\":\"end\"} and resets (the session protocol, for "
                   "implementations slow to start, such as a JVM); judged exactly as one process per case")
    p.add_argument("--state-bound", action="store_true",
                   help="after the cases, run long cases (--state-events each) whose live window stays constant and "
                   "fail CMD if its state grows with the stream (its state lines on stderr, else its resident "
                   "memory) or its output is not exact; with --max-examples 0 --no-vectors, only these")
    p.add_argument("--state-events", type=int, default=100_000, help="events per long case (default 100000)")
    p.add_argument("--adapter", metavar="NAME",
                   help="test a real system through its adapter (oij adapter NAME) in this process, one JVM for all "
                   "cases, instead of a command; the features default to the adapter's")
    p.add_argument("--as-run", action="store_true",
                   help="with --adapter spark-ss or flink-ds: run the engine's ordinary job as its users run it "
                   "(Spark: micro-batches of many rows, default trigger; Flink: periodic watermarks, parallelism 1 "
                   "and 2) on --runs seeded workloads and judge each output up to schedule "
                   "(docs/howto-schedule.rst) instead of driving it one tuple per step")
    p.add_argument("--runs", type=int, default=3, help="with --as-run: workloads to run (default 3)")
    p.add_argument("--run-events", type=int, default=3000, help="with --as-run: tuples per workload (default 3000)")
    p.add_argument("--restarts", type=int, default=0, metavar="N",
                   help="the restart protocol (docs/recovery.rst): run each case under kill plans that SIGKILL CMD "
                   "N times (before, at and after its checkpoints, mid-output) and restart it on the same "
                   "OIJ_STATE_DIR; the committed rows of all incarnations must be exactly the result")
    p.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                   help="with --restarts and --adapter: a restart option of the adapter (e.g. sink=append)")
    p.add_argument("--kill-plan", metavar="FILE", help="with --replay and --restarts: the kill plan to replay")
    p.add_argument("--replay", metavar="FILE", help="re-run one case (an oij-jsonl file) instead of generating: "
                   "CMD is sent the file's own bytes, after the kit's reader has validated them")
    p.add_argument("--replay-out", default="oij-conform-failure.jsonl",
                   help="where a failing case is written (default ./oij-conform-failure.jsonl)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from oij.adapters import conform_adapter
    from oij.testing import ConformOptions, conform

    if args.as_run:
        return run_as_run(args)

    adapter = conform_adapter(args.adapter) if args.adapter is not None else None
    return conform(ConformOptions(
        cmd=tuple(args.cmd), adapter=args.adapter, features=args.features, profile=args.profile,
        max_examples=args.max_examples, seed=args.seed, small_scope=args.small_scope, no_vectors=args.no_vectors,
        timeout=args.timeout, rest=args.rest, no_shrink=args.no_shrink, shrink_budget=args.shrink_budget,
        jobs=1 if args.jobs is None else args.jobs,
        fixed_jobs=args.jobs, session=args.session,
        state_bound=args.state_bound, state_events=args.state_events, restarts=args.restarts,
        option=tuple(args.option), kill_plan=args.kill_plan, replay=args.replay, replay_out=args.replay_out),
        adapter=adapter)


def run_as_run(args: argparse.Namespace) -> int:
    """``--as-run``: :func:`oij.testing._asrun.conform_as_run`, its lines printed; exit 0 iff every run is
    admissible."""
    import sys

    from oij.errors import UsageError
    from oij.testing._asrun import conform_as_run

    if args.adapter is None or args.cmd:
        raise UsageError("--as-run runs a real engine's ordinary job: give --adapter spark-ss or flink-ds, no CMD")
    if args.runs < 1 or args.run_events < 1:
        raise UsageError("--runs and --run-events must be >= 1")
    rep = conform_as_run(args.adapter, runs=args.runs, events=args.run_events, seed=args.seed or 0,
                         out=os.path.dirname(os.path.abspath(args.replay_out)),
                         say=lambda x: print(x, file=sys.stderr, flush=True))
    print("\n".join(rep.lines()))
    return 0 if rep.admissible else 1
