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
from typing import TYPE_CHECKING

from oij.commands.common import UsageError
from oij.io.atomic import write_text
from oij.testing._features import FEATURES, OPT_IN
from spec.profiles import CANONICAL, PROFILES, Profile, get_profile

if TYPE_CHECKING:  # the kit imports Hypothesis: loaded only when the command runs
    from oij.testing._case import Impl
    from oij.testing._runner import SearchResult, Session

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
    p.add_argument("--small-scope", type=int, default=None, metavar="K",
                   help="after the vectors, every case of up to K events over a small alphabet, deduplicated by "
                   "symmetry (K=1: 80 cases, K=2: 1,408, K=3: 18,480); default 2 with --session (a few seconds), "
                   "else 0 (one process per case: K=2 would take minutes)")
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
    p.add_argument("-j", "--jobs", type=int, default=1, help="run cases in this many processes")
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


def _command(args: argparse.Namespace) -> list[str]:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd and args.adapter is None:
        raise UsageError("no command under test: oij conform [options] -- CMD [ARGS...]")
    if cmd and args.adapter is not None:
        raise UsageError("give either --adapter NAME or -- CMD, not both")
    return cmd


def run(args: argparse.Namespace) -> int:
    from oij.testing._case import parse_features
    from oij.testing._runner import passes_fresh, search, search_parallel

    cmd = _command(args)
    args.profile_given = args.profile is not None
    slow = args.restarts and args.adapter is not None  # a JVM or an engine per incarnation
    args.timeout = args.timeout if args.timeout is not None else (300.0 if slow else 10.0)
    args.rest = args.rest if args.rest is not None else (30.0 if slow else 1.0)
    args.profile = args.profile or "canonical"
    try:
        feats = parse_features(args.features)
        profile = get_profile(args.profile)
    except (ValueError, KeyError) as e:
        raise UsageError(str(e).strip("'\"")) from None
    if args.restarts:
        return _restarts(cmd, feats, profile, args)
    if args.max_examples is None:
        args.max_examples = 200
    if args.small_scope is None:
        args.small_scope = 2 if args.session else 0
    if not 0 <= args.small_scope <= 3:
        raise UsageError("--small-scope K: 0 (none) to 3 (18,480 cases)")
    if args.max_examples < (0 if args.state_bound else 1) or args.jobs < 1 or args.timeout <= 0:
        raise UsageError("--max-examples and --jobs must be >= 1 (--max-examples 0 only with --state-bound), "
                         "--timeout > 0")
    if args.state_bound and (args.adapter is not None or args.replay):
        raise UsageError("--state-bound runs a command (-- CMD), not --adapter or --replay")
    impl: Impl = cmd
    if args.adapter is not None:
        from oij.adapters import get_adapter

        adapter = get_adapter(args.adapter)
        feats = feats & frozenset(adapter.features) if args.features else frozenset(adapter.features)
        if args.jobs != 1:
            raise UsageError("--adapter runs in this process: -j must be 1")
        impl = adapter.start(None)
        cmd = ["oij", "adapter", adapter.name]
    if args.session and args.adapter is not None:
        raise UsageError("--adapter already runs every case in this process: --session is for a command")
    if args.replay:
        if args.session:
            from oij.testing._runner import Session

            with Session(cmd) as s:
                return _replay(args.replay, s, cmd, profile, feats, args.timeout)
        return _replay(args.replay, impl, cmd, profile, feats, args.timeout)
    if args.max_examples == 0 and args.no_vectors:
        return _state_bound(cmd, feats, args)
    if args.jobs > 1 or args.session:
        res = search_parallel(cmd, features=feats, profile=profile, max_examples=args.max_examples,
                              seed=args.seed, timeout=args.timeout, jobs=args.jobs, vectors=not args.no_vectors,
                              session=args.session, small_scope=args.small_scope)
    else:
        res = search(impl, features=feats, profile=profile, max_examples=args.max_examples, seed=args.seed,
                     timeout=args.timeout, vectors=not args.no_vectors, small_scope=args.small_scope)
    if res.failure is None:
        _print_pass(res, profile, feats)
        return _state_bound(cmd, feats, args) if args.state_bound else 0
    f = res.failure
    print(f"oij conform: {' '.join(cmd)} does NOT conform to the {profile.name} semantics "
          f"({f.kind}; minimal case of {len(f.case)} events, found in {res.examples} cases)")
    print(f"found by: {res.found_by}\n")
    if args.session and passes_fresh(cmd, f.case, profile, feats, args.timeout):
        print("in a fresh session this case passes: the failure depends on the cases before it in the same "
              "session, so CMD does not reset its state between cases (the session protocol requires it); "
              "run without --session to judge the cases alone\n")
    print(f.report)
    if "|" in f.case.encoding:
        print(f"\nthe case was written with {f.case.encoding.split('|', 1)[1].replace('|', ', ')} "
              f"(oij/testing/_case.py encode): the replay file below has the same text")
    write_text(args.replay_out, f.case.to_jsonl())
    if profile is CANONICAL:
        from oij.testing._explain import explain, explain_svg

        svg = os.path.splitext(args.replay_out)[0] + ".svg"
        write_text(svg, explain_svg(f.case.query, explain(f.case.query, f.case.events), f.got,
                                    f"counterexample ({f.kind}): {' '.join(cmd)}"))
        print(f"\npicture of the case (oracle's rows; missing dashed red, unexpected dashed purple): {svg}")
    how = f"--adapter {args.adapter}" if args.adapter is not None else (
        f"{'--session ' if args.session else ''}-- {' '.join(cmd)}")
    print(f"\nreplay: oij conform --replay {args.replay_out} {how}")
    if profile is CANONICAL:
        _print_fingerprint(res, feats)
    return 1


def _state_bound(cmd: list[str], feats: frozenset[str], args: argparse.Namespace) -> int:
    from oij.testing._state import check_state

    if args.state_events < 1000:
        raise UsageError("--state-events must be >= 1000")
    report = check_state(cmd, feats, events=args.state_events, seed=args.seed, timeout=60 * args.timeout)
    if not report.runs:
        raise UsageError("--state-bound needs watermarks or lateness among the features")
    print(report.text())
    return 0 if report.ok else 1


def _print_pass(res: SearchResult, profile: Profile, feats: frozenset[str]) -> None:
    from oij.testing._edges import EDGE_NEEDS, EDGES

    scope = f", then {res.small_scope} small-scope cases" if res.small_scope else ""
    print(f"conforms: {res.examples} cases against the {profile.name} semantics, no difference "
          f"({res.vectors} test vectors{scope}, then {res.generated} generated cases)")
    print(f"features claimed: {', '.join(sorted(feats))}")
    print("situations exercised (generated cases):")
    for tag, n in sorted(res.tags.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:>5}  {tag}")
    print("rule edges hit (generated cases):")
    edges = [e for e in EDGES if EDGE_NEEDS.get(e, frozenset()) <= feats]  # only those the claims allow
    for edge in edges:
        print(f"  {res.edges[edge]:>5}  {edge}")
    missed = [e for e in edges if res.edges[e] == 0]
    for edge in missed:
        print(f"warning: no generated case hit the edge '{edge}': this run says nothing about it "
              "(raise --max-examples or claim more features)")


def _print_fingerprint(res: SearchResult, feats: frozenset[str]) -> None:
    from oij.testing._runner import fingerprint

    print()
    print(fingerprint(res.observations, feats).text())


def _replay(path: str, impl: Impl | Session, cmd: list[str], profile: Profile, feats: frozenset[str],
            timeout: float) -> int:
    from oij.testing._runner import judge_file

    case, f = judge_file(path, impl, profile, feats, timeout)
    sent = (f"sent the file's own {len(case.raw.encode())} bytes, validated first" if case.raw is not None
            and not callable(impl) else "sent the events read from it, in the kit's encoding")
    if f is None:
        print(f"conforms on {path} ({len(case)} events, {profile.name} semantics; {sent})")
        return 0
    print(f"oij conform: {' '.join(cmd)} fails {path} ({f.kind}; {sent})\n")
    print(f.report)
    if case.raw is not None and not callable(impl) and case.raw.count("\n") <= 40:
        print("\nthe file as sent (its own text; the timeline above shows every value as a float):")
        print("  " + case.raw.rstrip("\r\n").replace("\n", "\n  "))
    return 1


def _restarts(cmd: list[str], feats: frozenset[str], profile: Profile, args: argparse.Namespace) -> int:
    from oij.testing._restarts import read_plan, replay_restarts, restart_conformance

    if args.restarts < 0 or args.session or args.state_bound or args.jobs != 1:
        raise UsageError("--restarts N (N >= 1) runs a command (-- CMD or --adapter NAME), alone: not with "
                         "--session, --state-bound or -j")
    if args.adapter is not None:  # the engine's restartable drive, one process per incarnation
        from oij.adapters import get_adapter, restart_command

        adapter = get_adapter(args.adapter)
        cmd = restart_command(adapter, args.option)
        feats = feats & frozenset(adapter.features) if args.features else frozenset(adapter.features)
        if args.profile == "canonical" and not args.profile_given:
            profile = get_profile(adapter.profile)
    elif args.option:
        raise UsageError("-o KEY=VALUE goes with --adapter NAME")
    if args.replay:
        if not args.kill_plan:
            raise UsageError("--replay with --restarts needs --kill-plan FILE (written beside the replay file)")
        from oij.io import open_events
        from oij.testing._case import Case

        try:
            with open(args.kill_plan, encoding="utf-8") as f:
                plan = read_plan(f.read())
        except (OSError, ValueError) as e:
            raise UsageError(f"--kill-plan {args.kill_plan}: {e}") from None
        q, events, fh = open_events(args.replay)
        try:
            case = Case(q, tuple(events))
        finally:
            if fh is not None:
                fh.close()
        ok, text = replay_restarts(cmd, case, plan, profile, args.timeout, args.rest)
        print(text)
        return 0 if ok else 1
    n = 20 if args.max_examples is None else args.max_examples
    if n < 1:
        raise UsageError("--max-examples must be >= 1")
    report = restart_conformance(cmd, features=feats, profile=profile, max_examples=n, restarts=args.restarts,
                                 seed=args.seed, timeout=args.timeout, replay_out=args.replay_out,
                                 quiet=args.rest, shrinking=not args.no_shrink)
    print(report.text())
    return 0 if report.ok else 1
