"""``oij prove [--quick|--full] [NAME ...]``: check every model and claim of proofs/manifest.toml.

The models explore every interleaving within their bounds: of the
emitter/collector protocols (:mod:`proofs.model`) and of Scale-OIJ's shared
processing (:mod:`proofs.shared`); the claims
(:mod:`proofs.smt`) are decided by z3.  The verdict table compares each with
the manifest; every counterexample is written as a trace (``.txt``) and a
sequence diagram (``.png`` and ``.svg``) into ``--out``.  Exit 1 when a
verdict differs from the manifest.
"""

from __future__ import annotations

import argparse
import io
import os
import time

from oij.commands.common import UsageError
from oij.io.atomic import atomic_binary, write_text


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "prove",
        help="model-check the collector protocols and decide the z3 claims (proofs/manifest.toml)",
        description="Explore every interleaving of each model of proofs/manifest.toml within its bounds, decide "
        "every z3 claim, print the verdict table, write counterexample traces and sequence diagrams; exit 1 if "
        "a verdict differs from the manifest.",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="the small bounds (the default; what CI runs)")
    g.add_argument("--full", action="store_true", help="the larger bounds (minutes)")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these models or claims (default: all)")
    p.add_argument("--out", default="prove-out", help="directory for traces and diagrams (default ./prove-out)")
    p.add_argument("--no-claims", action="store_true", help="skip the z3 claims")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from proofs import model, smt

    bounds = "full" if args.full else "quick"
    models = model.manifest()
    claims = [] if args.no_claims else smt.manifest()
    known = {m["name"] for m in models} | {c["name"] for c in smt.manifest()}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise UsageError(f"unknown model or claim {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    if args.names:
        models = [m for m in models if m["name"] in args.names]
        claims = [c for c in claims if c["name"] in args.names]
    rows: list[tuple[str, str, str, str, str, str, str]] = []
    bad = 0
    written: list[str] = []
    for m in models:
        d = model.load_design(m, bounds)
        res = model.check_design(d)
        got = sorted(c.verdict for c in res.counterexamples) or ["safe"]
        want = sorted(m["expect"])
        ok = got == want
        bad += not ok
        rows.append((m["name"], d.bounds(), str(res.states), str(res.edges), "; ".join(got), "; ".join(want),
                     f"{res.seconds:.1f}" + ("" if ok else "  <-- DIFFERS")))
        for cx in res.counterexamples:
            written += _write_counterexample(args.out, m["name"], d, cx)
    for c in claims:
        t0 = time.perf_counter()
        verdict, _model = smt.check(c["name"])
        ok = verdict == c["verdict"]
        bad += not ok
        rows.append((c["name"], "z3 claim", "-", "-", verdict, c["verdict"],
                     f"{time.perf_counter() - t0:.1f}" + ("" if ok else "  <-- DIFFERS")))
    head = ("model / claim", "bounds", "states", "edges", "verdict", "expected", "seconds")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(7)]
    for r in [head, *rows]:
        print("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip())
    if written:
        print(f"\ncounterexamples: {len(written)} files in {args.out}/")
    print(f"\n{len(rows) - bad} of {len(rows)} verdicts as the manifest says" + (f"; {bad} DIFFER" if bad else ""))
    return 1 if bad else 0


def _write_counterexample(out: str, name: str, d: object, cx: object) -> list[str]:
    from proofs.model import Design, draw_design, trace_text
    from proofs.shared import SharedDesign
    from proofs.verdicts import Counterexample

    assert isinstance(d, (Design, SharedDesign)) and isinstance(cx, Counterexample)
    os.makedirs(out, exist_ok=True)
    stem = os.path.join(out, f"{name}--{cx.verdict.split()[-1]}")
    write_text(stem + ".txt", trace_text(d, cx))
    files = [stem + ".txt"]
    for fmt in ("png", "svg"):
        buf = io.BytesIO()
        draw_design(d, cx, buf, fmt)
        with atomic_binary(f"{stem}.{fmt}") as f:
            f.write(buf.getvalue())
        files.append(f"{stem}.{fmt}")
    return files
