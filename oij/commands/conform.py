"""``oij conform [options] -- CMD [ARGS...]``: property-based conformance testing of another implementation.

CMD reads one oij-jsonl v1 case on stdin and writes its result lines on
stdout (docs/conformance.rst).  Hypothesis generates cases, runs CMD once per
case and compares with the oracle; a failure is shrunk to a minimal case,
printed as a timeline, written to a replay file, and exit code 1.  Exit 0:
conforms, with the number of cases and the situations exercised.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from oij.options import add_options, from_args, option
from oij.spec.profiles import PROFILES
from oij.testing import ConformOptions
from oij.testing._features import FEATURES, OPT_IN

FEATURE_NAMES = (", ".join(f for f in FEATURES if f not in OPT_IN) + "; "
                 + ", ".join(f for f in FEATURES if f in OPT_IN) + " (opt-in)")

@dataclass
class ConformFlags:
    """The flags of ``oij conform``, each with its help (:mod:`oij.options`); the defaults are
    :class:`oij.testing.ConformOptions`'s (but ``--as-run``'s, which are the command's own), and
    :meth:`conform_options` is what the kit is given."""

    cmd: list[str] = option(factory=list, positional=True, nargs="*", metavar="-- CMD",
                            help="the implementation under test, after --: CMD [ARGS...]")
    features: str | None = option(ConformOptions.features, help="what CMD claims: a,b,c or all,-a,-b (default all)")
    profile: str | None = option(
        ConformOptions.profile, help="check against this semantic profile (default canonical; with --restarts "
        "--adapter NAME, the adapter's profile)")
    max_examples: int | None = option(ConformOptions.max_examples,
                                      help="cases to generate (default 200; 20 with --restarts)")
    seed: int = option(ConformOptions.seed, help="random seed (default 0: runs are reproducible)")
    small_scope: str | None = option(
        None, metavar="K",
        help="after the vectors, every case of up to K events over a small alphabet, deduplicated by symmetry "
        "(K=1: 80 cases, K=2: 1,408, K=3: 18,480), or 'cover': a pairwise covering array of those of K=2 (about "
        "160 cases); default 2 with --session, else cover (one process per case: all of K=2 would take minutes)")
    no_vectors: bool = option(
        ConformOptions.no_vectors,
        help="skip the test vectors (oij vectors: the fixed corpus run before the generated cases)")
    timeout: float | None = option(
        ConformOptions.timeout,
        help="seconds per case (with --restarts: per incarnation) before CMD counts as hung (default 10; 300 with "
        "--restarts --adapter NAME)")
    rest: float | None = option(
        ConformOptions.rest, metavar="SECONDS",
        help="with --restarts: a kill between events (fed) comes when CMD has checkpointed the events it was given, "
        "or its output has rested this long (default 1; 30 with --adapter NAME)")
    no_shrink: bool = option(
        ConformOptions.no_shrink,
        help="with --restarts: report the first failing case as found, unshrunk (slow engines)")
    shrink_budget: float | None = option(
        ConformOptions.shrink_budget, metavar="SECONDS",
        help="with --restarts: the first failure is printed as found, then shrunk for at most this long (default "
        "60; the report says when the budget stopped the shrinking)")
    jobs: int | None = option(
        ConformOptions.fixed_jobs, flags=("-j", "--jobs"),
        help="run cases in this many processes (default: a command's cases, the generated ones drawn first, run "
        "two at a time on two cores or more, judged in order, the same verdict; -j 1 runs everything one at a "
        "time; N > 1 splits the generated cases over N searches of their own seeds)")
    session: bool = option(
        ConformOptions.session,
        help="start CMD once (per job) for many cases, with OIJ_SESSION=1: after each case it writes its result "
        "lines and the line {\"type\":\"end\"} and resets (the session protocol, for implementations slow to "
        "start, such as a JVM); judged exactly as one process per case")
    state_bound: bool = option(
        ConformOptions.state_bound,
        help="after the cases, run long cases (--state-events each) whose live window stays constant and fail CMD "
        "if its state grows with the stream (its state lines on stderr, else its resident memory) or its output "
        "is not exact; with --max-examples 0 --no-vectors, only these")
    state_events: int = option(ConformOptions.state_events, help="events per long case (default 100000)")
    adapter: str | None = option(
        ConformOptions.adapter, metavar="NAME",
        help="test a real system through its adapter (oij adapter NAME) in this process, one JVM for all cases, "
        "instead of a command; the features default to the adapter's")
    as_run: bool = option(
        False,
        help="with --adapter spark-ss or flink-ds: run the engine's ordinary job as its users run it (Spark: "
        "micro-batches of many rows, default trigger; Flink: periodic watermarks, parallelism 1 and 2) on --runs "
        "seeded workloads and judge each output up to schedule (docs/howto-schedule.rst) instead of driving it "
        "one tuple per step")
    runs: int = option(3, help="with --as-run: workloads to run (default 3)")
    run_events: int = option(3000, help="with --as-run: tuples per workload (default 3000)")
    restarts: int = option(
        ConformOptions.restarts, metavar="N",
        help="the restart protocol (docs/recovery.rst): run each case under kill plans that SIGKILL CMD N times "
        "(before, at and after its checkpoints, mid-output) and restart it on the same OIJ_STATE_DIR; the "
        "committed rows of all incarnations must be exactly the result")
    adapter_option: list[str] = option(
        factory=list, flags=("-o", "--option"), action="append", metavar="KEY=VALUE",
        help="with --restarts and --adapter: a restart option of the adapter (e.g. sink=append)")
    kill_plan: str | None = option(ConformOptions.kill_plan, metavar="FILE",
                                   help="with --replay and --restarts: the kill plan to replay")
    replay: str | None = option(
        ConformOptions.replay, metavar="FILE",
        help="re-run one case (an oij-jsonl file) instead of generating: CMD is sent the file's own bytes, after "
        "the kit's reader has validated them")
    replay_out: str = option(ConformOptions.replay_out,
                             help="where a failing case is written (default ./oij-conform-failure.jsonl)")

    def conform_options(self) -> ConformOptions:
        """The kit's options: every field of :class:`~oij.testing.ConformOptions` of the same name, ``-j`` as
        both ``jobs`` (1 when not given) and ``fixed_jobs``."""
        shared = {f.name for f in dataclasses.fields(ConformOptions)} & set(vars(self))
        given: dict[str, Any] = {n: getattr(self, n) for n in shared}
        return ConformOptions(**given | {"cmd": tuple(self.cmd), "option": tuple(self.adapter_option),
                                         "jobs": 1 if self.jobs is None else self.jobs, "fixed_jobs": self.jobs})


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
    add_options(p, ConformFlags)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from oij.adapters import conform_adapter
    from oij.testing import conform

    if args.as_run:
        return run_as_run(args)
    flags = from_args(ConformFlags, args)
    adapter = conform_adapter(flags.adapter) if flags.adapter is not None else None
    return conform(flags.conform_options(), adapter=adapter)


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
