"""``oij vectors export DIR`` and ``oij vectors verify DIR -- CMD``: portable test vectors for any language."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from oij.commands.common import UsageError, options
from oij.options import add_options, option


@dataclass
class ExportFlags:
    """The argument of ``oij vectors export`` (:mod:`oij.options`)."""

    dir: str = option(positional=True)


@dataclass
class VerifyFlags:
    """The arguments of ``oij vectors verify`` (:mod:`oij.options`): the defaults of
    ``oij.testing._verify.verify_vectors`` (``--features`` and ``--timeout`` go to the parser and the runner the
    command builds); kept here, not beside that function, whose package the fresh ``conform-time.json``
    measures."""

    dir: str = option(positional=True)
    cmd: list[str] = option(factory=list, positional=True, nargs="*", metavar="-- CMD",
                            help="the implementation under test, after --")
    profile: str = option("canonical", help="the expected outputs to check (default canonical)")
    features: str | None = option(
        None, help="what CMD claims, as for oij conform (a,b,c or all,-a,-b; all,cond adds cond): vectors needing "
        "anything else are skipped and counted; without late-report late lines are not compared (default: every "
        "vector, late lines compared)")
    timeout: float = option(30.0, help="seconds per case")
    show: int = option(3, help="failing cases to print in full (default 3)")
    jobs: int = option(1, flags=("-j", "--jobs"),
                       help="cases run at once (default 1; the report is the same, in the manifest's order)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("vectors", help="export or verify the portable test vectors",
                       description="Test vectors by feature (bounds, lateness, watermarks, channels, keys, "
                       "aggregates, left-join, extreme, empty, profiles): input, expected output, manifest.")
    vs = p.add_subparsers(dest="action", metavar="ACTION")
    vs.required = True
    e = vs.add_parser("export", help="write the vectors to DIR (deterministic: re-export gives the same bytes)")
    add_options(e, ExportFlags)
    e.set_defaults(func=run_export)
    v = vs.add_parser("verify", help="run CMD on every vector in DIR and print a pass/fail table by feature")
    add_options(v, VerifyFlags)
    v.set_defaults(func=run_verify)


def run_export(args: argparse.Namespace) -> int:
    from oij.testing._vectors import export

    opts = options(ExportFlags, args)
    n = export(opts.dir)
    print(f"wrote {n} cases to {opts.dir} (manifest.jsonl lists them)")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from oij.testing._runner import run_command
    from oij.testing._verify import verify_vectors

    opts = options(VerifyFlags, args)
    cmd = list(opts.cmd[1:] if opts.cmd[:1] == ["--"] else opts.cmd)
    if not cmd:
        raise UsageError("no command under test: oij vectors verify DIR -- CMD [ARGS...]")
    timeout = opts.timeout
    features = None
    if opts.features is not None:
        from oij.testing._case import parse_features

        try:
            features = parse_features(opts.features)
        except ValueError as e:
            raise UsageError(str(e)) from None
    report = verify_vectors(opts.dir, lambda text: run_command(cmd, text, timeout), profile=opts.profile,
                            show=opts.show, jobs=opts.jobs, features=features)
    print(report.text)
    return 1 if report.failed else 0
