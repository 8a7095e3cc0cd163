"""``oij bench kit-power`` from its options to its result: the mutants of the targets run ``--jobs`` at a time,
the manifest applied, the result written; also a survivors' rerun and the other modes' dispatch."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from oij.bench.kitpower.evidence import load_manifest, load_unreached, missing_evidence
from oij.bench.kitpower.gaps import deep_check, exhaustive_check
from oij.bench.kitpower.mutants import TARGETS, Mutant, Target, enumerate_mutants, pick_evenly
from oij.bench.kitpower.render import render_rst, render_text
from oij.bench.kitpower.runner import STATE_TIMEOUT, Recording, record, run_mutant, run_shapes, state_bound
from oij.bench.kitpower.score import rescore, summarize
from oij.errors import UsageError
from oij.io.atomic import write_text
from oij.options import option


@dataclass
class KitPowerOptions:
    """The options of ``oij bench kit-power``, each with its flag, help and default (:mod:`oij.options`)."""

    targets: str = option("accum,oracle", help=f"comma-separated: {', '.join(TARGETS)}")
    repo: str = option(".", help="a checkout of oij (the targets are read from it; default .)")
    manifest: str | None = option(None, help="equivalent mutants (default REPO/tests/impls/mutants.toml)")
    sample: str = option("0", help="run only N mutants per target, spread evenly over the list (0: all); or "
                         "TARGET=N,... (a target not named runs all)")
    only: str = option("", help="comma-separated TARGET:OPERATOR:OCCURRENCE to run alone")
    jobs: int = option(2, flags=("-j", "--jobs"), help="mutants run at once (default 2)")
    timeout: float = option(600.0, help="seconds per mutant before it counts as timeout")
    out: str = option("kit-power.json", help="where the raw numbers go (default ./kit-power.json)")
    docs: str | None = option(None, help="also write the table (--table) to this directory")
    table: str = option("kit-power-table.rst", help="the name of the table --docs writes (default "
                        "kit-power-table.rst)")
    rescore: str | None = option(
        None, metavar="JSON", help="run nothing: apply the manifest again to the survivors of an earlier result "
        "(after an entry was added or removed) and write --out and --docs")
    rerun: str | None = option(
        None, metavar="JSON", help="run again, under the kit as it is now, the survivors of an earlier result "
        "(after the generation was strengthened) and write the merged result; kills are kept as measured")
    no_replay: bool = option(
        False, help="run every mutant through oij conform (slow): no recorded run, no in-process replay, no "
        "coverage shortcut")
    judge_in_replay: bool = option(
        False, help="decide kills from the in-process replay too: the first differing answer the kit's judge "
        "rejects (confirmed by one fresh run of that case) is where oij conform would fail; fast, but such kills "
        "have no seconds or replay size (a real run of a sample gives those)")
    deep: str | None = option(
        None, metavar="JSON", help="run nothing through oij conform: replay the survivors of an earlier result "
        "against --deep-cases more generated cases; those they tell apart are gaps of the kit, not equivalent "
        "(their first differing case goes to --deep-out)")
    exhaustive: str | None = option(
        None, metavar="JSON", help="run nothing through oij conform: run the oracle's survivors (and equivalents) "
        "of an earlier result on every small case of oij/testing/_exhaustive.py (bounded-exhaustive: up to 3 "
        "events); those told apart go to --deep-out")
    deep_cases: int = option(2000, help="cases of --deep (default 2000)")
    deep_out: str = option("kit-power-gaps", help="where --deep puts the cases (default ./kit-power-gaps)")
    state_bound: bool = option(
        False, help="also run every survivor on the long cases of oij conform --state-bound (in this process, the "
        "cases and the oracle's answers made once): a mutant whose state grows with the stream, or whose output "
        "on them is wrong, is killed there (found by 'state-bound')")
    state_events: int = option(100_000, help="events per long case (default 100000)")
    no_shapes: bool = option(False, help="leave out the eight bug shapes of tests/impls/accum_bugs.py (run after "
                             "the mutants)")
    restarts: bool = option(
        False, help="measure the restart mode instead: every state-drop mutant of the oracle's checkpoint "
        "(tests/impls/state_drop.py) and every recovery bug of tests/impls/restart_bugs.py under oij conform "
        "--restarts 1 at its defaults; exit 1 unless each is killed or, with its argument, equivalent")


def rerun(path: str, repo: Path, jobs: int, timeout: float,
          manifest: dict[tuple[str, str, int], dict[str, Any]], replay: bool = True,
          judge: bool = False) -> dict[str, Any]:
    """An earlier result whose unkilled mutants ran again under the current kit (a kit only ever gets
    stronger between the two runs if the change only added cases, so the kills of the first run stand)."""
    import json

    result: dict[str, Any] = json.loads(Path(path).read_text())
    again = [i for i, m in enumerate(result["mutants"]) if m["verdict"] in ("survived", "timeout", "error")]
    print(f"kit-power: running {len(again)} mutants again", flush=True)
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        into = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="oij-kit-power-")))
        recs = ({n: record(TARGETS[n], repo, into, timeout) for n in
                 sorted({result["mutants"][i]["target"] for i in again})} if replay else {})

        def one(i: int) -> Mutant:
            d = result["mutants"][i]
            m = Mutant(d["target"], d["operator"], d["occurrence"], d["line_no"], d["line"])
            return run_mutant(m, TARGETS[m.target], repo, timeout, rec=recs.get(m.target), judge=judge)

        _rerun_all(result, again, one, jobs, manifest)
    result["rerun"] = {"mutants": len(again), "wall_seconds": round(time.perf_counter() - t0, 1),
                       "command": " ".join(sys.argv[1:])}
    result["targets"] = {n: summarize([Mutant(**m) for m in result["mutants"] if m["target"] == n])
                         for n in result["targets"]}
    return result


def _rerun_all(result: dict[str, Any], again: list[int], one: Any, jobs: int,
               manifest: dict[tuple[str, str, int], dict[str, Any]]) -> None:
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for i, m in zip(again, pool.map(one, again), strict=True):
            e = manifest.get((m.target, m.operator, m.occurrence))
            if m.verdict == "survived" and e is not None and e.get("line", "").strip() == m.line:
                m.verdict, m.reason = "equivalent", str(e.get("reason", ""))
            print(f"  again {m.verdict:<10} {m.seconds:7.1f}s  {m.target}:{m.operator}:{m.occurrence}  line "
                  f"{m.line_no}: {m.mutated}", flush=True)
            result["mutants"][i] = asdict(m)


def write_result(result: dict[str, Any], args: KitPowerOptions) -> int:
    """Write ``result`` to ``--out`` (and the table to ``--docs``), print its summary; 1 if any mutant was not
    killed or found equivalent, a manifest entry is stale or lacks evidence, or a bug shape survived."""
    import json

    write_text(args.out, json.dumps(result, indent=1) + "\n")
    print(render_text(result))
    if args.docs:
        Path(args.docs).mkdir(parents=True, exist_ok=True)
        write_text(str(Path(args.docs) / args.table), render_rst(result))
    bad = (any(s["survived"] or s["timeout"] or s["error"] for s in result["targets"].values())
           or result["stale_manifest_entries"] or result.get("entries_without_evidence")
           or any(x["verdict"] != "killed" for x in result.get("shapes", [])))
    return 1 if bad else 0


def kit_power(args: KitPowerOptions) -> int:
    """Run ``oij bench kit-power`` with ``args``: progress on stdout, the result to ``args.out`` (and
    ``args.docs``); the exit code."""
    repo = Path(args.repo).resolve()
    mpath = Path(args.manifest) if args.manifest else repo / "tests" / "impls" / "mutants.toml"
    if args.restarts:
        from oij.bench.restartpower import restart_power

        cmd = "oij bench kit-power " + " ".join(sys.argv[3:]) if sys.argv[1:3] == ["bench", "kit-power"] else ""
        return restart_power(repo, args.jobs, args.timeout, args.out, args.docs,
                             args.table if args.table != "kit-power-table.rst" else "kit-power-restarts-table.rst",
                             cmd)
    if args.rescore:
        return write_result(rescore(args.rescore, load_manifest(mpath)), args)
    if args.exhaustive:
        import json

        gaps = exhaustive_check(args.exhaustive, repo, args.jobs, Path(args.deep_out))
        write_text(str(Path(args.deep_out) / "exhaustive.json"), json.dumps(gaps, indent=1) + "\n")
        return 1 if gaps["told_apart"] else 0
    if args.deep:
        import json

        gaps = deep_check(args.deep, repo, args.deep_cases, args.jobs, args.timeout, Path(args.deep_out))
        write_text(str(Path(args.deep_out) / "gaps.json"), json.dumps(gaps, indent=1) + "\n")
        return 1 if gaps["told_apart"] else 0
    if args.rerun:
        return write_result(rerun(args.rerun, repo, args.jobs, args.timeout, load_manifest(mpath), not args.no_replay,
                           args.judge_in_replay),
                      args)
    names = [x.strip() for x in args.targets.split(",") if x.strip()]
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        raise UsageError(f"unknown target {unknown[0]!r}; known: {', '.join(TARGETS)}")
    try:
        sample = ({n: int(args.sample) for n in names} if "=" not in args.sample else
                  {k.strip(): int(v) for k, v in (x.split("=", 1) for x in args.sample.split(",") if x.strip())})
    except ValueError:
        raise UsageError(f"--sample: a number or TARGET=N,...; got {args.sample!r}") from None
    if args.jobs < 1 or args.timeout <= 0 or any(v < 0 for v in sample.values()):
        raise UsageError("--jobs must be >= 1, --timeout > 0, --sample >= 0")
    for n in names:
        if not (repo / TARGETS[n].path).is_file():
            raise UsageError(f"{repo / TARGETS[n].path}: not found (run from a checkout of oij, or give --repo)")
    manifest_path = Path(args.manifest) if args.manifest else repo / "tests" / "impls" / "mutants.toml"
    manifest = load_manifest(manifest_path)
    only = {tuple(x.split(":")) for x in args.only.split(",") if x.strip()}
    work: list[tuple[Mutant, Target]] = []
    stale: list[str] = []
    for n in names:
        t = TARGETS[n]
        found = enumerate_mutants(t, (repo / t.path).read_text())
        if only:
            found = [m for m in found if (m.target, m.operator, str(m.occurrence)) in only]
        for m in pick_evenly(found, sample.get(n, 0)):
            e = manifest.get((m.target, m.operator, m.occurrence))
            if e is not None and e.get("line", "").strip() != m.line:
                stale.append(f"{m.target}:{m.operator}:{m.occurrence} (manifest line {e.get('line')!r}, "
                             f"now {m.line!r})")
            work.append((m, t))
    print(f"kit-power: {len(work)} mutants of {', '.join(names)}; {args.jobs} at a time", flush=True)
    t0 = time.perf_counter()
    done: list[Mutant] = []
    into = Path(tempfile.mkdtemp(prefix="oij-kit-power-"))
    try:
        recs = {} if args.no_replay else {n: record(TARGETS[n], repo, into, args.timeout) for n in names}
        for n, r in recs.items():
            print(f"kit-power: {n}: recorded {len(list(r.dir.glob('*.in')))} cases of the unmutated run; they reach "
                  f"{len(r.ran)} lines of {TARGETS[n].path}", flush=True)
        return _run_work(args, repo, names, sample, work, stale, manifest, recs, done, t0)
    finally:
        shutil.rmtree(into, ignore_errors=True)


def _run_work(args: KitPowerOptions, repo: Path, names: list[str], sample: dict[str, int],
              work: list[tuple[Mutant, Target]], stale: list[str],
              manifest: dict[tuple[str, str, int], dict[str, Any]], recs: dict[str, Recording],
              done: list[Mutant], t0: float) -> int:
    unreached = load_unreached(Path(args.manifest) if args.manifest else repo / "tests" / "impls" / "mutants.toml",
                               repo)
    for n, rows in unreached.items():
        r = recs.get(n)
        ran = sorted(x for x in rows if r is not None and x in r.ran)
        if ran:  # the entry says the command cannot run these lines, and the recorded run did
            stale.append(f"{n}: [[unreached]] lines {ran[:5]} ran in the recorded run ({rows[ran[0]]})")
    from oij.bench.host import machine

    def one(item: tuple[Mutant, Target]) -> Mutant:
        m = run_mutant(item[0], item[1], repo, args.timeout, rec=recs.get(item[0].target),
                       judge=args.judge_in_replay)
        if args.state_bound and m.verdict == "survived":
            state_bound(m, item[1], repo, args.state_events, STATE_TIMEOUT)
        return m

    def report(m: Mutant) -> None:
        how = f" ({m.kind})" if m.verdict == "survived" and m.kind else ""
        print(f"  [{len(done):>4}/{len(work)}] {m.verdict:<8} {m.seconds:7.1f}s  {m.target}:{m.operator}:"
              f"{m.occurrence}  line {m.line_no}: {m.mutated}{how}", flush=True)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for m in pool.map(one, work):
            if m.verdict == "no-op":  # cosmic-ray counted a position it then could not change
                continue
            e = manifest.get((m.target, m.operator, m.occurrence))
            if m.verdict == "survived" and e is not None and e.get("line", "").strip() == m.line:
                m.verdict, m.reason = "equivalent", str(e.get("reason", ""))
            elif m.kind == "unreached" and m.line_no in unreached.get(m.target, {}):
                m.verdict, m.reason = "equivalent", "never run by the command: " + unreached[m.target][m.line_no]
            done.append(m)
            report(m)
    shapes = [] if args.no_shapes or args.only.strip() else run_shapes(repo, args.timeout)
    listed = {(m.target, m.operator, m.occurrence) for m in done}
    unused = [f"{k[0]}:{k[1]}:{k[2]}" for k in manifest if k in listed and
              next(m for m in done if (m.target, m.operator, m.occurrence) == k).verdict == "killed"]
    from oij.bench.results import capture

    cmd = "oij bench kit-power " + " ".join(sys.argv[3:]) if sys.argv[1:3] == ["bench", "kit-power"] else ""
    result: dict[str, Any] = {
        "command": cmd,
        "provenance": capture(cmd, repo),  # the commit of the targets (--repo); the date is the run's end
        "machine": machine(),
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "sample": {n: sample.get(n, 0) for n in names},
        "targets": {n: summarize([m for m in done if m.target == n]) for n in names},
        "shapes": shapes,
        "stale_manifest_entries": stale,
        "entries_without_evidence": missing_evidence(manifest),
        "manifest_entries_killed": unused,
        "mutants": [asdict(m) for m in done],
    }
    return write_result(result, args)
