"""Draw the import graph of the project's packages by layer, from the code itself, at docs build time.

grimp (import-linter's graph builder) reads every import statically; networkx
collapses modules to the units of the layer contract; matplotlib draws one row
per layer, lowest (``oij.spec``) at the bottom, with an arrow for every unit that
imports another.  An arrow pointing up would be a broken contract.
"""

from __future__ import annotations

import os
from typing import Any

UNITS = [
    ["oij.cli", "oij.commands"],
    ["oij.check", "oij.bench", "oij.adapters"],
    ["oij.testing", "oij.proofs", "oij.pipelines"],
    ["oij.parallel", "oij.spark"],
    ["oij.workloads", "oij.io"],
    ["oij.reference"],
    ["oij.spec"],
]
FOLDERS = {"oij.spec", "oij.reference", "oij.parallel", "oij.proofs"}
"""The packages that are top-level folders of the repository (pyproject.toml maps them under oij), drawn blue."""


def _unit(module: str) -> str | None:
    best = None
    for row in UNITS:
        for u in row:
            if (module == u or module.startswith(u + ".")) and (best is None or len(u) > len(best)):
                best = u
    return best


def build_graph() -> Any:
    import grimp
    import networkx as nx

    g = grimp.build_graph("oij")
    dg = nx.DiGraph()
    for row in UNITS:
        dg.add_nodes_from(row)
    for m in g.modules:
        for imported in g.find_modules_directly_imported_by(m):
            a, b = _unit(m), _unit(imported)
            if a and b and a != b:
                dg.add_edge(a, b)
    return dg


def draw(out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dg = build_graph()
    pos = {}
    for level, row in enumerate(reversed(UNITS)):
        for i, u in enumerate(row):
            pos[u] = ((i + 1) / (len(row) + 1), level)
    fig, ax = plt.subplots(figsize=(8, 5))
    for a, b in dg.edges:
        (x0, y0), (x1, y1) = pos[a], pos[b]
        ax.annotate("", xy=(x1, y1 + 0.12), xytext=(x0, y0 - 0.12),
                    arrowprops={"arrowstyle": "->", "color": "#888", "lw": 0.8})
    for u, (x, y) in pos.items():
        ax.text(x, y, u, ha="center", va="center", fontsize=10,
                bbox={"boxstyle": "round", "fc": "#eef" if u in FOLDERS else "#efe", "ec": "#446"})
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.5, len(UNITS) - 0.5)
    ax.axis("off")
    ax.set_title("imports point down: spec <- reference <- readers <- engines <- kit, proofs <- commands\n"
                 "(drawn from the code)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def setup(app: Any) -> dict[str, Any]:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(os.path.join(here, "_static"), exist_ok=True)
    draw(os.path.join(here, "_static", "architecture.png"))
    return {"parallel_read_safe": True}
