"""The layers as described say what the import contract says.

The contract is the layers contract in ``pyproject.toml`` (``[tool.importlinter]``; ``lint-imports`` enforces it).
``docs/architecture.rst`` draws it as a table, one row per layer, the highest first; the README's layout sentence
names the packages from the bottom layer up.  Both were wrong once (``proofs/`` placed under ``oij.io``, the
readers and workloads left above ``parallel``) while the contract held: this test compares them.
"""

from __future__ import annotations

import re
import tomllib
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

Layers = list[frozenset[str]]
"""Top layer first; each layer the set of its modules."""

_LITERAL = re.compile(r"``([\w.]+)``")
_README_NAME = re.compile(r"`([\w.]+)/?`")


def contract_layers(pyproject: str) -> Layers:
    """The layers contract over the project's top-level packages (the one whose layers hold ``spec``)."""
    config = tomllib.loads(pyproject)["tool"]["importlinter"]
    for contract in config["contracts"]:
        if contract["type"] == "layers" and any(p.strip() == "spec" for layer in contract["layers"]
                                                for p in layer.split("|")):
            return [frozenset(p.strip() for p in layer.split("|")) for layer in contract["layers"]]
    raise AssertionError("pyproject.toml has no layers contract over spec")


def table_layers(rst: str) -> Layers:
    """The rows of the first simple table of the section "The layers": each row's first column, as the set of
    its ``literal`` names (continuation lines, which start blank, add nothing)."""
    section = rst.split("The layers\n----------\n", 1)[1]
    lines = section.splitlines()
    borders = [i for i, line in enumerate(lines) if re.fullmatch(r"=+ +=+", line)]
    if len(borders) < 2:
        raise AssertionError("no table in the section 'The layers'")
    width = lines[borders[0]].index(" ")
    return [frozenset(_LITERAL.findall(line[:width])) for line in lines[borders[0] + 1:borders[1]]
            if line[:1] not in ("", " ")]


def readme_order(readme: str, modules: set[str]) -> list[str]:
    """The contract's modules in the order the README's layout paragraph first names them (```spec/``` is
    ``spec``)."""
    paragraph = next((p for p in readme.split("\n\n") if p.startswith("The layout")), "")
    names = [n for n in _README_NAME.findall(paragraph) if n in modules]
    return list(dict.fromkeys(names))


def disagreements(layers: Layers, table: Layers, readme: list[str]) -> list[str]:
    """Where the table or the README's order differs from the contract ``layers``: the table must have the
    contract's layers, row by row; the README must name every top-level package and every module under
    ``parallel``'s layer, from the bottom layer up."""
    out = []
    if table != layers:
        for i in range(max(len(table), len(layers))):
            want = sorted(layers[i]) if i < len(layers) else None
            got = sorted(table[i]) if i < len(table) else None
            if want != got:
                out.append(f"table row {i + 1}: {got}, the contract: {want}")
    rank = {m: len(layers) - i for i, layer in enumerate(layers) for m in layer}
    below = {m for m in rank if "parallel" in rank and rank[m] < rank["parallel"]}
    top = {m for m in rank if "." not in m}
    out += [f"README: names no {m}" for m in sorted((below | top) - {"oij"}) if m not in readme]
    out += [f"README: {a} before {b}, a lower layer" for a, b in pairwise(readme)
            if rank[a] > rank[b]]
    return out


def test_the_descriptions_say_what_the_contract_says() -> None:
    layers = contract_layers((ROOT / "pyproject.toml").read_text())
    table = table_layers((ROOT / "docs" / "architecture.rst").read_text())
    order = readme_order((ROOT / "README.md").read_text(), {m for layer in layers for m in layer})
    assert disagreements(layers, table, order) == []


CONTRACT = """
[tool.importlinter]
root_packages = ["spec", "parallel", "oij"]
[[tool.importlinter.contracts]]
name = "inner"
type = "layers"
layers = ["parallel.a", "parallel.b"]
[[tool.importlinter.contracts]]
name = "layers"
type = "layers"
layers = ["oij.cli", "proofs | oij.drivers", "parallel", "oij.io", "spec"]
"""

TABLE = """The layers
----------

====================================  =====
``oij.cli``                           top
``proofs``, ``oij.drivers``           two, with ``parallel`` named
                                      on a continuation line
``parallel``                          engines
``oij.io``                            readers
``spec``                              spec
====================================  =====
"""


def test_the_parsers_read_the_contract_and_the_table() -> None:
    layers = contract_layers(CONTRACT)
    assert layers == [frozenset({"oij.cli"}), frozenset({"proofs", "oij.drivers"}), frozenset({"parallel"}),
                      frozenset({"oij.io"}), frozenset({"spec"})]
    assert table_layers(TABLE) == layers
    readme = "Intro.\n\nThe layout: `spec/`, `oij.io`, `parallel/` (through `oij.io`), `proofs/`, `tests/`.\n"
    assert readme_order(readme, {m for layer in layers for m in layer}) == ["spec", "oij.io", "parallel", "proofs"]
    assert disagreements(layers, table_layers(TABLE), ["spec", "oij.io", "parallel", "proofs"]) == []


def test_a_description_that_disagrees_is_named() -> None:
    """Negative control: the descriptions this test was written against -- ``proofs`` in a layer of its own
    under ``parallel``, a README that goes spec, reference, parallel, proofs with the readers left in ``oij/``
    above them -- and a table with two rows swapped."""
    layers = contract_layers(CONTRACT)
    moved = TABLE.replace("``proofs``, ``oij.drivers``           two",
                          "``oij.drivers``                       two")
    moved = moved.replace("``oij.io``                            readers",
                          "``oij.io``, ``proofs``                readers")
    assert disagreements(layers, table_layers(moved), ["spec", "oij.io", "parallel", "proofs"]) == [
        "table row 2: ['oij.drivers'], the contract: ['oij.drivers', 'proofs']",
        "table row 4: ['oij.io', 'proofs'], the contract: ['oij.io']"]
    assert disagreements(layers, layers, ["spec", "parallel", "proofs"]) == ["README: names no oij.io"]
    assert disagreements(layers, layers, ["spec", "parallel", "oij.io", "proofs"]) == [
        "README: parallel before oij.io, a lower layer"]
    row_p = "``parallel``                          engines\n"
    row_io = "``oij.io``                            readers\n"
    swapped = TABLE.replace(row_p + row_io, row_io + row_p)
    assert disagreements(layers, table_layers(swapped), ["spec", "oij.io", "parallel", "proofs"]) == [
        "table row 3: ['oij.io'], the contract: ['parallel']",
        "table row 4: ['parallel'], the contract: ['oij.io']"]
