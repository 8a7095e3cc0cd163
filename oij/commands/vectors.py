"""``oij vectors export DIR`` and ``oij vectors verify DIR -- CMD``: portable test vectors for any language."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from oij.commands.common import UsageError

if TYPE_CHECKING:
    pass


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
    from oij.testing._verify import verify_vectors

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
    report = verify_vectors(args.dir, lambda text: run_command(cmd, text, timeout), profile=args.profile,
                            show=args.show, jobs=args.jobs, features=features)
    print(report.text)
    return 1 if report.failed else 0
