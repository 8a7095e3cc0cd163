"""``spec/`` reads as one document: its reading order names every module, and papers are cited by name.

The papers are listed with full citations in ``docs/bibliography.rst`` and cited by short names (``[PPOIJ]_``);
a citation by the internal number of a paper's file (``002 Eq. 1``) tells a reader nothing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_READING_ITEM = re.compile(r"^\s*\d+\.\s+:mod:`(oij\.spec\.\w+)`", re.MULTILINE)
_PAPER_NUMBER = re.compile(r"(?<![\w.,:/-])00[0-4](?![0-9A-Za-z])")

NUMBER_ALLOWED: dict[str, str] = {}
"""Files that may still cite a paper by its number, and why (each a debt, not a rule)."""


def reading_order_gaps(init_doc: str, modules: list[str]) -> list[str]:
    """The modules of ``modules`` that the numbered reading order in ``init_doc`` does not name, and the names
    it lists that are not modules."""
    listed = _READING_ITEM.findall(init_doc)
    return [m for m in modules if m not in listed] + [f"not a module: {m}" for m in listed if m not in modules]


def paper_numbers(text: str) -> list[str]:
    """The lines of ``text`` that cite a paper by its internal number (000 to 004 standing alone)."""
    return [line.strip() for line in text.splitlines() if _PAPER_NUMBER.search(line)]


def _spec_modules() -> list[str]:
    return sorted(f"oij.spec.{p.stem}" for p in (ROOT / "spec").glob("*.py") if p.stem != "__init__")


def test_the_reading_order_names_every_module_of_spec() -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "spec" / "__init__.py").read_text())) or ""
    assert reading_order_gaps(doc, _spec_modules()) == []


def test_a_module_missing_from_the_reading_order_is_named() -> None:
    """Negative control: an order that stops at purge misses the rest; a listed name with no module is named."""
    doc = "Read:\n\n1. :mod:`oij.spec.model` -- x;\n2. :mod:`oij.spec.purge` -- y;\n10. :mod:`oij.spec.gone` -- z.\n"
    assert reading_order_gaps(doc, ["oij.spec.model", "oij.spec.ordering", "oij.spec.purge"]) == [
        "oij.spec.ordering", "not a module: oij.spec.gone"]


def test_papers_are_cited_by_name_not_by_number() -> None:
    paths = [p for d in ("spec", "reference", "parallel", "proofs", "oij") for p in (ROOT / d).rglob("*.py")]
    paths += [*(ROOT / "docs").glob("*.rst"), ROOT / "README.md"]
    bad = []
    for path in sorted(paths):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in NUMBER_ALLOWED:
            bad += [f"{rel}: {line}" for line in paper_numbers(path.read_text())]
    assert bad == []
    assert all((ROOT / p).exists() for p in NUMBER_ALLOWED), "an allowed file is gone: drop its entry"


def test_a_citation_by_number_is_flagged() -> None:
    """Negative control: the forms the project used are caught; quantities and versions are not."""
    text = ("condition (002, Eq. 1)\nSPO-Join's idea (004 §3)\nPPOIJ's Alg. 1 (002_7c903de5405f5b7f.txt\n"
            "1,000 events\n0.004 s\n2000 us\nversion 1.002\n")
    assert paper_numbers(text) == ["condition (002, Eq. 1)", "SPO-Join's idea (004 §3)",
                                   "PPOIJ's Alg. 1 (002_7c903de5405f5b7f.txt"]
