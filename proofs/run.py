"""Every model and claim of ``proofs/manifest.toml`` checked, as ``oij prove`` reports it (:func:`check_manifest`).

The models explore every interleaving within their bounds: of the emitter/collector protocols
(:mod:`oij.proofs.model`) and of Scale-OIJ's shared processing (:mod:`oij.proofs.shared`); the claims
(:mod:`oij.proofs.smt`) are decided by z3.  The verdict table compares each with the manifest; every
counterexample is written as a trace (``.txt``) and a sequence diagram (``.png`` and ``.svg``).
"""

from __future__ import annotations

import io
import os
import time
from dataclasses import dataclass

from oij.errors import UsageError
from oij.io.atomic import atomic_binary, write_text
from oij.options import option


@dataclass
class ProveReport:
    """One row per model and claim (name, bounds, states, edges, verdict, expected, seconds), how many differ
    from the manifest, and the counterexample files written."""

    rows: list[tuple[str, str, str, str, str, str, str]]
    bad: int
    written: list[str]
    out: str

    def text(self) -> str:
        """The verdict table and the summary, as ``oij prove`` prints them."""
        head = ("model / claim", "bounds", "states", "edges", "verdict", "expected", "seconds")
        widths = [max(len(r[i]) for r in [head, *self.rows]) for i in range(7)]
        lines = ["  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip() for r in [head, *self.rows]]
        if self.written:
            lines.append(f"\ncounterexamples: {len(self.written)} files in {self.out}/")
        lines.append(f"\n{len(self.rows) - self.bad} of {len(self.rows)} verdicts as the manifest says"
                     + (f"; {self.bad} DIFFER" if self.bad else ""))
        return "\n".join(lines)


@dataclass
class ProveOptions:
    """The options of ``oij prove``, each with its flag, help and default (:mod:`oij.options`)."""

    bounds: str = option("quick", consts=(("--quick", "quick", "the small bounds (the default; what CI runs)"),
                                          ("--full", "full", "the larger bounds (minutes)")))
    names: list[str] = option(factory=list, positional=True, nargs="*", metavar="NAME",
                              help="only these models or claims (default: all)")
    out: str = option("prove-out", help="directory for traces and diagrams (default ./prove-out)")
    claims: bool = option(True, flags=("--no-claims",), help="skip the z3 claims")


def check_manifest(opts: ProveOptions) -> ProveReport:
    """Check every model (or those of ``opts.names``) within ``opts.bounds`` (quick or full) and decide every z3
    claim (unless not ``opts.claims``); write each counterexample as a trace and a sequence diagram into
    ``opts.out``."""
    from oij.proofs import model, smt

    names, bounds, out = opts.names, opts.bounds, opts.out

    models = model.manifest()
    todo = smt.manifest() if opts.claims else []
    known = {m["name"] for m in models} | {c["name"] for c in smt.manifest()}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown model or claim {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    if names:
        models = [m for m in models if m["name"] in names]
        todo = [c for c in todo if c["name"] in names]
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
            written += _write_counterexample(out, m["name"], d, cx)
    for c in todo:
        t0 = time.perf_counter()
        verdict, _model = smt.check(c["name"])
        ok = verdict == c["verdict"]
        bad += not ok
        rows.append((c["name"], "z3 claim", "-", "-", verdict, c["verdict"],
                     f"{time.perf_counter() - t0:.1f}" + ("" if ok else "  <-- DIFFERS")))
    return ProveReport(rows, bad, written, out)


def _write_counterexample(out: str, name: str, d: object, cx: object) -> list[str]:
    from oij.proofs.model import Design, draw_design, trace_text
    from oij.proofs.shared import SharedDesign
    from oij.proofs.verdicts import Counterexample

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


__all__ = ["ProveOptions", "ProveReport", "check_manifest"]
