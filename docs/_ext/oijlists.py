"""Sphinx extension: lists the docs show, read from the one place the code defines them.

``.. oij-features::``
    every feature of :data:`oij.testing.FEATURES`, each with what it covers.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


class FeaturesDirective(SphinxDirective):
    """A bullet list of the conformance kit's features."""

    def run(self) -> list[nodes.Node]:
        from oij.testing._features import FEATURES

        items = nodes.bullet_list()
        for name, what in FEATURES.items():
            para = nodes.paragraph()
            para += nodes.literal(text=name)
            para += nodes.Text(f": {what}")
            items += nodes.list_item("", para)
        return [items]


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("oij-features", FeaturesDirective)
    return {"parallel_read_safe": True}
