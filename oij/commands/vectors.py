"""``oij vectors export DIR`` and ``oij vectors verify DIR -- CMD``: portable test vectors for any language."""

from __future__ import annotations

import argparse
import os
from collections import defaultdict

import orjson

from oij.commands.common import UsageError
from oij.io.errors import InputError
from spec.profiles import PROFILES


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
    from oij.testing._case import Case
    from oij.testing._protocol import compare, parse_output
    from oij.testing._runner import run_command
    from oij.testing._timeline import render

    cmd = list(args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd)
    if not cmd:
        raise UsageError("no command under test: oij vectors verify DIR -- CMD [ARGS...]")
    if args.profile not in PROFILES:
        raise UsageError(f"unknown profile {args.profile!r}; known: {', '.join(PROFILES)}")
    manifest = os.path.join(args.dir, "manifest.jsonl")
    try:
        with open(manifest, "rb") as f:
            rows = [orjson.loads(line) for line in f if line.strip()]
    except OSError as e:
        raise InputError(manifest, 0, "file", e.strerror or str(e)) from None
    except orjson.JSONDecodeError as e:
        raise InputError(manifest, 0, "line", f"not valid JSON ({e})") from None
    if args.jobs < 1:
        raise UsageError("--jobs must be >= 1")
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    shown = 0
    todo = []
    for row in rows:
        if row.get("profile") != args.profile:
            continue
        path_in = os.path.join(args.dir, row["case"] + ".in.jsonl")
        with open(path_in, encoding="utf-8") as f:
            text = f.read()  # sent as it is: some vectors leave optional fields out on purpose
        case = Case.from_jsonl(text, path_in)
        with open(os.path.join(args.dir, row["expected"]), encoding="utf-8") as f:
            expected = parse_output(f.read())
        todo.append((row, text, case, expected))
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # threads, each waiting on its command's process
        outcomes = list(pool.map(lambda t: run_command(cmd, t[1], args.timeout), todo))
    for (row, _text, case, expected), outcome in zip(todo, outcomes, strict=True):
        ok = False
        problem = outcome.problem
        diff = None
        if outcome.got is not None:
            diff = compare(expected, outcome.got)
            ok = not diff
        table[row["feature"]][0 if ok else 1] += 1
        if not ok and shown < args.show:
            shown += 1
            print(f"FAIL {row['case']}: {row['description']}")
            print(render(case, expected, outcome.got, diff, problem=problem) + "\n")
    if not table:
        raise UsageError(f"{manifest}: no case for profile {args.profile!r}")
    print(f"{'feature':<14}{'passed':>8}{'failed':>8}")
    for feat, (p, f_) in table.items():
        print(f"{feat:<14}{p:>8}{f_:>8}")
    passed = sum(v[0] for v in table.values())
    failed = sum(v[1] for v in table.values())
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0

