"""Sphinx extension: lists the docs show, read from the one place the code defines them.

``.. oij-features::``
    every feature of :data:`oij.testing.FEATURES`, each with what it covers (an opt-in one says so there), as a
    bullet list; with ``:table:``, as a two-column table.
"""

from __future__ import annotations

from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective


def feature_rows() -> list[tuple[str, str]]:
    """(name, what it covers) per feature, in :data:`FEATURES`' order."""
    from oij.testing._features import FEATURES

    return list(FEATURES.items())


def _inline(text: str) -> list[nodes.Node]:
    """``text`` with its ````literal```` spans as literals, the rest as text."""
    out: list[nodes.Node] = []
    for i, part in enumerate(text.split("``")):
        if part:
            out.append(nodes.literal(text=part) if i % 2 else nodes.Text(part))
    return out


class FeaturesDirective(SphinxDirective):
    """The conformance kit's features, as a bullet list or (``:table:``) a table."""

    option_spec: ClassVar[dict[str, Any]] = {"table": directives.flag}

    def run(self) -> list[nodes.Node]:
        rows = feature_rows()
        if "table" not in self.options:
            items = nodes.bullet_list()
            for name, what in rows:
                para = nodes.paragraph()
                para += nodes.literal(text=name)
                para += nodes.Text(": ")
                para.extend(_inline(what))
                items += nodes.list_item("", para)
            return [items]
        table = nodes.table()
        group = nodes.tgroup(cols=2)
        table += group
        group += nodes.colspec(colwidth=20)
        group += nodes.colspec(colwidth=80)
        body = nodes.tbody()
        group += body
        for name, what in rows:
            row = nodes.row()
            for cell_nodes in ([nodes.literal(text=name)], _inline(what)):
                entry, para = nodes.entry(), nodes.paragraph()
                para.extend(cell_nodes)
                entry += para
                row += entry
            body += row
        return [table]


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("oij-features", FeaturesDirective)
    return {"parallel_read_safe": True}
