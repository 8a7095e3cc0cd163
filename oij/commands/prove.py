"""``oij prove [--quick|--full] [NAME ...]``: check every model and claim of proofs/manifest.toml.

The models explore every interleaving within their bounds: of the
emitter/collector protocols (:mod:`oij.proofs.model`) and of Scale-OIJ's shared
processing (:mod:`oij.proofs.shared`); the claims
(:mod:`oij.proofs.smt`) are decided by z3.  The verdict table compares each with
the manifest; every counterexample is written as a trace (``.txt``) and a
sequence diagram (``.png`` and ``.svg``) into ``--out`` (:func:`oij.proofs.run.check_manifest`).  Exit 1
when a verdict differs from the manifest.
"""

from __future__ import annotations

import argparse

from oij.commands.common import options
from oij.options import add_options
from oij.proofs.run import ProveOptions


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "prove",
        help="model-check the collector protocols and decide the z3 claims (proofs/manifest.toml)",
        description="Explore every interleaving of each model of proofs/manifest.toml within its bounds, decide "
        "every z3 claim, print the verdict table, write counterexample traces and sequence diagrams; exit 1 if "
        "a verdict differs from the manifest.",
    )
    add_options(p, ProveOptions)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from oij.proofs.run import check_manifest

    report = check_manifest(options(ProveOptions, args))
    print(report.text())
    return 1 if report.bad else 0
