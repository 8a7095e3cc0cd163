"""Sphinx extension: draw the model checker's counterexamples (PPOIJ Examples 4.1-4.3) when the docs build.

The checker (:mod:`oij.proofs.model`) explores the manifest's must-fail models at
their quick bounds and draws the shortest counterexample of each kind into
``_static/prove/`` (not committed): the pictures on the proofs page are what
the checker finds, every time the docs are built.
"""

from __future__ import annotations

import os
from typing import Any

DIAGRAMS = [("dp-standard", "unsafe: duplicate"), ("dp-standard", "unsafe: missing"),
            ("hp-fixed-round-robin", "unsafe: missing"), ("scale-self", "unsafe: missing"),
            ("scale-symmetric", "unsafe: duplicate"), ("scale-move", "unsafe: missing")]


def draw(out_dir: str) -> None:
    from oij.proofs import model

    os.makedirs(out_dir, exist_ok=True)
    entries = {m["name"]: m for m in model.manifest()}
    for name, verdict in DIAGRAMS:
        d = model.load_design(entries[name], "quick")
        res = model.check_design(d)
        cx = next(c for c in res.counterexamples if c.verdict == verdict)
        stem = os.path.join(out_dir, f"{name}--{verdict.split()[-1]}")
        model.draw_design(d, cx, stem + ".png")
        with open(stem + ".txt", "w", encoding="utf-8") as f:
            f.write(model.trace_text(d, cx))


def setup(app: Any) -> dict[str, Any]:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    draw(os.path.join(here, "_static", "prove"))
    return {"parallel_read_safe": True}
