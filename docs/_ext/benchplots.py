"""Sphinx extension: redraw the experiments' plots, and write the results tables, from the raw numbers in
``bench/results/`` at every build.

``oij bench plot bench/results --to docs/_generated/bench`` -- the pictures on
the Experiments page are drawn from the committed raw files, never by hand.
"""

from __future__ import annotations

import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(HERE)


def setup(app: Any) -> dict[str, Any]:
    sys.path.insert(0, ROOT)
    from oij.bench.experiment import plot_dir
    from oij.bench.results import write_docs_tables

    # PNG only: the pages show those (``oij bench plot`` draws the SVGs too)
    plot_dir(os.path.join(ROOT, "bench", "results"), os.path.join(HERE, "_generated", "bench"), formats=("png",))
    write_docs_tables(ROOT)  # docs/_generated/results/NAME.rst: every page's measured numbers
    return {"parallel_read_safe": True}
