"""``oij conform`` as a library call: :class:`ConformOptions` and :func:`conform`.

The command (:mod:`oij.commands.conform`) parses its arguments into a :class:`ConformOptions` and calls
:func:`conform`, which applies the defaults that depend on the mode (:meth:`ConformOptions.with_defaults`),
runs the kit (generated cases, a replay, the restart protocol or the state bound) and writes the report.

Data flow::

    ConformOptions --with_defaults--> features, profile --> search | search_parallel | judge_file
                   | restart_conformance | check_state --> report lines (out) + replay files --> exit code
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TextIO

from oij.errors import UsageError
from oij.io.atomic import write_text
from oij.spec.profiles import CANONICAL, Profile, get_profile

if TYPE_CHECKING:  # the kit imports Hypothesis: loaded only when a run starts
    from oij.testing._case import Impl
    from oij.testing._runner import SearchResult, Session

Say = Callable[..., Any]


@dataclass(frozen=True)
class ConformAdapter:
    """A real system's adapter as :func:`conform` uses it, resolved by the caller
    (``oij.adapters.conform_adapter``: the adapters sit above the kit): its name, the features it claims, the
    profile that explains it, how it is started in this process, and the command line of its restartable drive
    given ``-o KEY=VALUE`` options.

    ``open()`` starts the system for all the cases of a run: a context manager whose value runs one case, and
    whose exit stops the system (a JVM that serves every case, where the adapter has one: the cases of one run
    then pay for one start-up, not one each)."""

    name: str
    features: frozenset[str]
    profile: str
    open: Callable[[], AbstractContextManager[Impl]]
    restart_command: Callable[[Sequence[str]], list[str]]


@dataclass(frozen=True)
class ConformOptions:
    """Everything ``oij conform`` can be told (its flags, one field each; ``docs/conformance.rst``).

    None means "the default for the mode" (:meth:`with_defaults`): ``timeout`` 10 s a case (300 with
    ``restarts`` through an ``adapter``), ``rest`` 1 s (30), ``max_examples`` 200 (20 with ``restarts``),
    ``small_scope`` 2 with ``session`` else ``"cover"`` (the covering array of the cases of up to 2 events:
    ``oij.testing._smallscope.small_scope_cover``), ``fixed_jobs`` (a command's cases run this many at a
    time when ``jobs`` is 1, the generated ones drawn first: ``oij.testing._runner.search``) 2 on a machine of
    two cores or more, ``profile`` canonical (an adapter's own under ``restarts``), ``shrink_budget`` 60 s
    (:data:`oij.testing._restarts.SHRINK_BUDGET`; ``restarts`` only).
    """

    cmd: tuple[str, ...] = ()
    adapter: str | None = None
    features: str | None = None
    profile: str | None = None
    max_examples: int | None = None
    seed: int = 0
    small_scope: int | str | None = None
    no_vectors: bool = False
    timeout: float | None = None
    rest: float | None = None
    no_shrink: bool = False
    shrink_budget: float | None = None
    jobs: int = 1
    fixed_jobs: int | None = None
    session: bool = False
    state_bound: bool = False
    state_events: int = 100_000
    restarts: int = 0
    option: tuple[str, ...] = ()
    kill_plan: str | None = None
    replay: str | None = None
    replay_out: str = "oij-conform-failure.jsonl"

    def with_defaults(self) -> ConformOptions:
        """The same options with every None that has a mode-dependent default filled in (``profile`` stays None
        when not given: the run decides between canonical and an adapter's)."""
        slow = bool(self.restarts) and self.adapter is not None  # a JVM or an engine per incarnation
        return replace(
            self,
            timeout=self.timeout if self.timeout is not None else (300.0 if slow else 10.0),
            rest=self.rest if self.rest is not None else (30.0 if slow else 1.0),
            max_examples=self.max_examples if self.max_examples is not None else (20 if self.restarts else 200),
            small_scope=self.small_scope if self.small_scope is not None else (2 if self.session else "cover"),
            fixed_jobs=self.fixed_jobs if self.fixed_jobs is not None else (
                1 if self.adapter is not None or self.session else min(2, os.cpu_count() or 1)),
        )


def _command(o: ConformOptions) -> list[str]:
    cmd = list(o.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd and o.adapter is None:
        raise UsageError("no command under test: oij conform [options] -- CMD [ARGS...]")
    if cmd and o.adapter is not None:
        raise UsageError("give either --adapter NAME or -- CMD, not both")
    return cmd


def conform(opts: ConformOptions, out: TextIO | None = None, adapter: ConformAdapter | None = None) -> int:
    """Run ``oij conform`` as ``opts`` says, writing its report to ``out`` (default standard output); the exit
    code: 0 conforms, 1 a difference (its minimal case written to ``opts.replay_out``).  ``adapter``: the
    system ``opts.adapter`` names, resolved.  Raises ``oij.errors.UsageError`` for options that do not go
    together."""
    from oij.testing._case import parse_features
    from oij.testing._runner import passes_fresh, search, search_parallel

    say = functools.partial(print, file=out if out is not None else sys.stdout, flush=True)
    cmd = _command(opts)
    if (adapter is None) != (opts.adapter is None):
        raise ValueError("conform: give the resolved adapter exactly when opts.adapter names one")
    o = opts.with_defaults()
    try:
        feats = parse_features(o.features)
        profile = get_profile(o.profile or "canonical")
    except (ValueError, KeyError) as e:
        raise UsageError(str(e).strip("'\"")) from None
    if o.restarts:
        return _restarts(cmd, feats, profile, o, say, adapter)
    assert o.max_examples is not None and o.small_scope is not None and o.timeout is not None
    assert o.fixed_jobs is not None
    cover = o.small_scope == "cover"
    try:
        k = 2 if cover else int(o.small_scope)
    except ValueError:
        k = -1
    if not 0 <= k <= 3:
        raise UsageError("--small-scope K: 0 (none) to 3 (18,480 cases), or cover (its covering array of up to 2 "
                         "events)")
    if o.max_examples < (0 if o.state_bound else 1) or o.jobs < 1 or o.timeout <= 0:
        raise UsageError("--max-examples and --jobs must be >= 1 (--max-examples 0 only with --state-bound), "
                         "--timeout > 0")
    if o.state_bound and (o.adapter is not None or o.replay):
        raise UsageError("--state-bound runs a command (-- CMD), not --adapter or --replay")
    if o.adapter is not None and o.jobs != 1:  # (checked before the adapter's system starts)
        raise UsageError("--adapter runs in this process: -j must be 1")
    if o.adapter is not None and o.session:
        raise UsageError("--adapter already runs every case in this process: --session is for a command")
    with contextlib.ExitStack() as stack:  # an adapter's system, stopped whichever way the run ends
        impl: Impl = cmd
        if adapter is not None:
            feats = feats & adapter.features if o.features else adapter.features
            impl = stack.enter_context(adapter.open())
            cmd = ["oij", "adapter", adapter.name]
        if o.replay:
            if o.session:
                from oij.testing._runner import Session

                with Session(cmd) as s:
                    return _replay(o.replay, s, cmd, profile, feats, o.timeout, say)
            return _replay(o.replay, impl, cmd, profile, feats, o.timeout, say)
        if o.max_examples == 0 and o.no_vectors:
            return _state_bound(cmd, feats, o, say)
        if o.jobs > 1 or o.session:
            res = search_parallel(cmd, features=feats, profile=profile, max_examples=o.max_examples,
                                  seed=o.seed, timeout=o.timeout, jobs=o.jobs, vectors=not o.no_vectors,
                                  session=o.session, small_scope=k, small_cover=cover)
        else:
            res = search(impl, features=feats, profile=profile, max_examples=o.max_examples, seed=o.seed,
                         timeout=o.timeout, vectors=not o.no_vectors, small_scope=k, small_cover=cover,
                         fixed_jobs=o.fixed_jobs)
        if res.failure is None:
            print_pass(res, profile, feats, say)
            if res.interference:
                say(interference_note(res.interference))
            return _state_bound(cmd, feats, o, say) if o.state_bound else 0
        f = res.failure
        say(f"oij conform: {' '.join(cmd)} does NOT conform to the {profile.name} semantics "
              f"({f.kind}; minimal case of {len(f.case)} events, found in {res.examples} cases)")
        say(f"found by: {res.found_by}\n")
        if res.interference:
            say(interference_note(res.interference) + "\n")
        if o.session and passes_fresh(cmd, f.case, profile, feats, o.timeout):
            say("in a fresh session this case passes: the failure depends on the cases before it in the same "
                  "session, so CMD does not reset its state between cases (the session protocol requires it); "
                  "run without --session to judge the cases alone\n")
        say(f.report)
        if "|" in f.case.encoding:
            say(f"\nthe case was written with {f.case.encoding.split('|', 1)[1].replace('|', ', ')} "
                  f"(oij/testing/_case.py encode): the replay file below has the same text")
        write_text(o.replay_out, f.case.to_jsonl())
        if profile is CANONICAL:
            from oij.testing._explain import explain, explain_svg

            svg = os.path.splitext(o.replay_out)[0] + ".svg"
            write_text(svg, explain_svg(f.case.query, explain(f.case.query, f.case.events), f.got,
                                        f"counterexample ({f.kind}): {' '.join(cmd)}"))
            say(f"\npicture of the case (oracle's rows; missing dashed red, unexpected dashed purple): {svg}")
        how = f"--adapter {o.adapter}" if o.adapter is not None else (
            f"{'--session ' if o.session else ''}-- {' '.join(cmd)}")
        say(f"\nreplay: oij conform --replay {o.replay_out} {how}")
        if profile is CANONICAL:
            _print_fingerprint(res, feats, say)
        return 1


def interference_note(where: str) -> str:
    """What ``oij conform`` says when a fixed case failed while another ran beside it and passed alone
    (:attr:`oij.testing._runner.SearchResult.interference`)."""
    return (f"note: {where} failed while another case ran beside it and passed alone: the command's processes "
            "interfere (a file, a port or a temporary name they share) or it is not deterministic; the cases "
            "after it ran one at a time (-j 1 runs every case alone)")


def _state_bound(cmd: list[str], feats: frozenset[str], o: ConformOptions, say: Say) -> int:
    assert o.timeout is not None  # ConformOptions.with_defaults
    from oij.testing._state import check_state

    if o.state_events < 1000:
        raise UsageError("--state-events must be >= 1000")
    report = check_state(cmd, feats, events=o.state_events, seed=o.seed, timeout=60 * o.timeout)
    if not report.runs:
        raise UsageError("--state-bound needs watermarks or lateness among the features")
    say(report.text())
    return 0 if report.ok else 1


def print_pass(res: SearchResult, profile: Profile, feats: frozenset[str], say: Say) -> None:
    from oij.testing._edges import EDGE_NEEDS, EDGES

    scope = (f", then {res.small_scope} small-scope cases" + (" [covering array]" if res.small_scope_cover else "")
             if res.small_scope else "")
    say(f"conforms: {res.examples} cases against the {profile.name} semantics, no difference "
          f"({res.vectors} test vectors{scope}, then {res.generated} generated cases)")
    say(f"features claimed: {', '.join(sorted(feats))}")
    say("situations exercised (generated cases):")
    for tag, n in sorted(res.tags.items(), key=lambda kv: (-kv[1], kv[0])):
        say(f"  {n:>5}  {tag}")
    from oij.testing._cases import SHARE_FLOOR, shares

    say(f"shares of the generated cases (each situation the features allow, floor {SHARE_FLOOR:.0%}):")
    for name, n, share, below in shares(res.tags, res.generated, feats):
        say(f"  {share:>5.0%}  {n:>5}  {name}" + ("  (below the floor)" if below else ""))
    say("rule edges hit (generated cases):")
    edges = [e for e in EDGES if EDGE_NEEDS.get(e, frozenset()) <= feats]  # only those the claims allow
    for edge in edges:
        say(f"  {res.edges[edge]:>5}  {edge}")
    missed = [e for e in edges if res.edges[e] == 0]
    for edge in missed:
        say(f"warning: no generated case hit the edge '{edge}': this run says nothing about it "
              "(raise --max-examples or claim more features)")


def _print_fingerprint(res: SearchResult, feats: frozenset[str], say: Say) -> None:
    from oij.testing._runner import fingerprint

    say()
    say(fingerprint(res.observations, feats).text())


def _replay(path: str, impl: Impl | Session, cmd: list[str], profile: Profile, feats: frozenset[str],
            timeout: float, say: Say) -> int:
    from oij.testing._runner import judge_file

    case, f = judge_file(path, impl, profile, feats, timeout)
    sent = (f"sent the file's own {len(case.raw.encode())} bytes, validated first" if case.raw is not None
            and not callable(impl) else "sent the events read from it, in the kit's encoding")
    if f is None:
        say(f"conforms on {path} ({len(case)} events, {profile.name} semantics; {sent})")
        return 0
    say(f"oij conform: {' '.join(cmd)} fails {path} ({f.kind}; {sent})\n")
    say(f.report)
    if case.raw is not None and not callable(impl) and case.raw.count("\n") <= 40:
        say("\nthe file as sent (its own text; the timeline above shows every value as a float):")
        say("  " + case.raw.rstrip("\r\n").replace("\n", "\n  "))
    return 1


def _restarts(cmd: list[str], feats: frozenset[str], profile: Profile, o: ConformOptions, say: Say,
              adapter: ConformAdapter | None) -> int:
    assert o.timeout is not None and o.rest is not None  # ConformOptions.with_defaults
    from oij.testing._restarts import read_plan, replay_restarts, restart_conformance

    if o.restarts < 0 or o.session or o.state_bound or o.jobs != 1:
        raise UsageError("--restarts N (N >= 1) runs a command (-- CMD or --adapter NAME), alone: not with "
                         "--session, --state-bound or -j")
    if adapter is not None:  # the engine's restartable drive, one process per incarnation
        cmd = adapter.restart_command(o.option)
        feats = feats & adapter.features if o.features else adapter.features
        if o.profile is None:  # not given: the adapter's own profile
            profile = get_profile(adapter.profile)
    elif o.option:
        raise UsageError("-o KEY=VALUE goes with --adapter NAME")
    if o.replay:
        if not o.kill_plan:
            raise UsageError("--replay with --restarts needs --kill-plan FILE (written beside the replay file)")
        from oij.io import open_events
        from oij.testing._case import Case

        try:
            with open(o.kill_plan, encoding="utf-8") as f:
                plan = read_plan(f.read())
        except (OSError, ValueError) as e:
            raise UsageError(f"--kill-plan {o.kill_plan}: {e}") from None
        q, events, fh = open_events(o.replay)
        try:
            case = Case(q, tuple(events))
        finally:
            if fh is not None:
                fh.close()
        ok, text = replay_restarts(cmd, case, plan, profile, o.timeout, o.rest)
        say(text)
        return 0 if ok else 1
    n = o.max_examples or 0
    if n < 1:
        raise UsageError("--max-examples must be >= 1")
    from oij.testing._restarts import SHRINK_BUDGET

    budget = SHRINK_BUDGET if o.shrink_budget is None else o.shrink_budget
    if budget < 0:
        raise UsageError("--shrink-budget SECONDS must be >= 0")
    report = restart_conformance(cmd, features=feats, profile=profile, max_examples=n, restarts=o.restarts,
                                 seed=o.seed, timeout=o.timeout, replay_out=o.replay_out,
                                 quiet=o.rest, shrinking=not o.no_shrink, shrink_budget=budget,
                                 say_first=functools.partial(_say_cleared, say),
                                 progress=_progress() if sys.stderr.isatty() else None)
    _clear_progress()
    say(report.text())
    return 0 if report.ok else 1


def _say_cleared(say: Say, text: str) -> None:
    _clear_progress()
    say(text)


def _clear_progress() -> None:
    """Erase the progress line of :func:`_progress` (on a terminal only), before a report is printed."""
    if sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr, flush=True)


def _progress() -> Callable[[int, int, int], None]:
    """A one-line progress report on a terminal (stderr), rewritten in place: the case and the runs so far."""
    import time

    t0 = time.monotonic()

    def show(case: int, cases: int, runs: int) -> None:
        print(f"\r\033[Koij conform --restarts: case {case}/{cases}, {runs} runs, {time.monotonic() - t0:.0f} s",
              end="", file=sys.stderr, flush=True)
    return show

__all__ = ["ConformAdapter", "ConformOptions", "conform"]
