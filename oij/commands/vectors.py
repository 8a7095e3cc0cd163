"""``oij vectors export DIR`` and ``oij vectors verify DIR -- CMD``: portable test vectors for any language."""

from __future__ import annotations

import argparse
import os
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson

from oij.commands.common import UsageError
from oij.io.errors import InputError
from spec.profiles import PROFILES

if TYPE_CHECKING:
    from oij.testing._runner import Outcome


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("vectors", help="export or verify the portable test vectors",
                       description="Test vectors by feature (bounds, lateness, watermarks, channels, keys, "
                       "aggregates, left-join, extreme, empty, profiles): input, expected output, manifest.")
    vs = p.add_subparsers(dest="action", metavar="ACTION")
    vs.required = True
    e = vs.add_parser("export", help="write the vectors to DIR (deterministic: re-export gives the same bytes)")
    e.add_argument("dir")
    e.set_defaults(func=run_export)
    v = vs.add_parser("verify", help="run CMD on every vector in DIR and print a pass/fail table by feature")
    v.add_argument("dir")
    v.add_argument("cmd", nargs="*", metavar="-- CMD", help="the implementation under test, after --")
    v.add_argument("--profile", default="canonical", help="the expected outputs to check (default canonical)")
    v.add_argument("--features", default=None,
                   help="what CMD claims, as for oij conform (a,b,c or all,-a,-b; all,cond adds cond): vectors "
                   "needing anything else are skipped and counted; without late-report late lines are not compared "
                   "(default: every vector, late lines compared)")
    v.add_argument("--timeout", type=float, default=30.0, help="seconds per case")
    v.add_argument("--show", type=int, default=3, help="failing cases to print in full (default 3)")
    v.add_argument("-j", "--jobs", type=int, default=1,
                   help="cases run at once (default 1; the report is the same, in the manifest's order)")
    v.set_defaults(func=run_verify)


def run_export(args: argparse.Namespace) -> int:
    from oij.testing._vectors import export

    n = export(args.dir)
    print(f"wrote {n} cases to {args.dir} (manifest.jsonl lists them)")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from oij.testing._runner import run_command

    cmd = list(args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd)
    if not cmd:
        raise UsageError("no command under test: oij vectors verify DIR -- CMD [ARGS...]")
    timeout = args.timeout
    features = None
    if args.features is not None:
        from oij.testing._case import parse_features

        try:
            features = parse_features(args.features)
        except ValueError as e:
            raise UsageError(str(e)) from None
    return verify(args.dir, lambda text: run_command(cmd, text, timeout), profile=args.profile, show=args.show,
                  jobs=args.jobs, features=features)


def verify(directory: str, run: Callable[[str], Outcome], *, profile: str = "canonical", show: int = 3,
           jobs: int = 1, features: frozenset[str] | None = None) -> int:
    """What ``oij vectors verify`` does once it has its command: ``run`` each case of ``profile`` listed in
    ``directory``'s manifest (it gets the input file's text and returns the outcome, as
    :func:`oij.testing._runner.run_command` does for CMD), judge it, print the failing cases (the first
    ``show``) and the table; 0 if every case passed, else 1.  ``jobs`` > 1: ``run`` is called from that many
    threads at once (the report is the same, in the manifest's order); 1: from the calling thread.
    ``features``: what the implementation claims (``oij conform --features``); a case needing more (its
    manifest row's ``features``, or for an older manifest the case's own) is skipped and counted, and without
    ``late-report`` late lines are not compared.  None: every case, everything compared."""
    from oij.testing._case import Case, case_features
    from oij.testing._protocol import compare, parse_output, restrict
    from oij.testing._timeline import render

    if profile not in PROFILES:
        raise UsageError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    manifest = os.path.join(directory, "manifest.jsonl")
    try:
        with open(manifest, "rb") as f:
            rows = [orjson.loads(line) for line in f if line.strip()]
    except OSError as e:
        raise InputError(manifest, 0, "file", e.strerror or str(e)) from None
    except orjson.JSONDecodeError as e:
        raise InputError(manifest, 0, "line", f"not valid JSON ({e})") from None
    if jobs < 1:
        raise UsageError("--jobs must be >= 1")
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    shown = 0
    todo = []
    skipped: dict[str, int] = defaultdict(int)
    for row in rows:
        if row.get("profile") != profile:
            continue
        path_in = os.path.join(directory, row["case"] + ".in.jsonl")
        with open(path_in, encoding="utf-8") as f:
            text = f.read()  # sent as it is: some vectors leave optional fields out on purpose
        case = Case.from_jsonl(text, path_in)
        if features is not None:
            needs = frozenset(row["features"]) if "features" in row else case_features(case)
            if not needs <= features:
                for name in sorted(needs - features):
                    skipped[name] += 1
                skipped[""] += 1
                continue
        with open(os.path.join(directory, row["expected"]), encoding="utf-8") as f:
            expected = parse_output(f.read())
        if features is not None:
            expected = restrict(expected, features)
        todo.append((row, text, case, expected))
    if jobs == 1:
        outcomes = [run(t[1]) for t in todo]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=jobs) as pool:  # threads, each waiting on its command's process
            outcomes = list(pool.map(lambda t: run(t[1]), todo))
    for (row, _text, case, expected), outcome in zip(todo, outcomes, strict=True):
        ok = False
        problem = outcome.problem
        diff = None
        if outcome.got is not None:
            diff = compare(expected, outcome.got if features is None else restrict(outcome.got, features))
            ok = not diff
        table[row["feature"]][0 if ok else 1] += 1
        if not ok and shown < show:
            shown += 1
            print(f"FAIL {row['case']}: {row['description']}")
            print(render(case, expected, outcome.got, diff, problem=problem) + "\n")
    if not table:
        why = " the features claimed" if skipped else ""
        raise UsageError(f"{manifest}: no case for profile {profile!r}{why}")
    print(f"{'feature':<14}{'passed':>8}{'failed':>8}")
    for feat, (p, f_) in table.items():
        print(f"{feat:<14}{p:>8}{f_:>8}")
    passed = sum(v[0] for v in table.values())
    failed = sum(v[1] for v in table.values())
    print(f"{passed} passed, {failed} failed")
    if skipped:
        listed = ", ".join(f"{k} ({n})" for k, n in sorted(skipped.items()) if k)
        print(f"{skipped['']} skipped: they need features not claimed: {listed}")
    return 1 if failed else 0
