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
_README_NAME = re.compile(r"`([\w.]+)(/?)`")


def contract_layers(pyproject: str) -> Layers:
    """The layers contract over the project's packages (the one whose layers hold ``oij.spec``)."""
    config = tomllib.loads(pyproject)["tool"]["importlinter"]
    for contract in config["contracts"]:
        if contract["type"] == "layers" and any(p.strip() == "oij.spec" for layer in contract["layers"]
                                                for p in layer.split("|")):
            return [frozenset(p.strip() for p in layer.split("|")) for layer in contract["layers"]]
    raise AssertionError("pyproject.toml has no layers contract over oij.spec")


def comment_layers(pyproject: str) -> Layers:
    """The layer order written out in the comment above ``[tool.importlinter]`` (bottom up, ``<-`` between layers,
    ``|`` within one), top layer first as :func:`contract_layers` gives it."""
    head = pyproject.split("[tool.importlinter]", 1)[0].rsplit("\n\n", 1)[-1]
    text = " ".join(line.lstrip("# ").strip() for line in head.splitlines() if "<-" in line)
    return [frozenset(p.strip() for p in layer.split("|")) for layer in reversed(text.split("<-")) if layer.strip()]


def folder_names(pyproject: str) -> dict[str, str]:
    """The folders mapped under ``oij`` and their packages (``spec`` -> ``oij.spec``)."""
    package_dir = tomllib.loads(pyproject)["tool"]["setuptools"]["package-dir"]
    return {folder: package for package, folder in package_dir.items() if package != folder}


def above_claims(text: str) -> list[tuple[str, str]]:
    """``(a, b)`` for each sentence "`a/` sits above `b`" (proofs/README.md's placement of its package)."""
    return re.findall(r"`([\w.]+)/?` sits above `([\w.]+)/?`", " ".join(text.split()))


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


def readme_order(readme: str, modules: set[str], folders: dict[str, str] | None = None) -> list[str]:
    """The contract's modules in the order the README's layout paragraph first names them (a folder, ```spec/```,
    names its package, ``oij.spec``, through ``folders``)."""
    folders = folders or {}
    paragraph = next((p for p in readme.split("\n\n") if p.startswith("The layout")), "")
    named = [folders.get(n, n) if slash else n for n, slash in _README_NAME.findall(paragraph)]
    names = [n for n in named if n in modules]
    return list(dict.fromkeys(names))


def disagreements(layers: Layers, table: Layers, readme: list[str], comment: Layers | None = None,
                  above: list[tuple[str, str]] | None = None) -> list[str]:
    """Where the table, the README's order, pyproject.toml's comment or proofs/README.md's placements differ
    from the contract ``layers``: the table and the comment must have the contract's layers, row by row; the
    README must name every mapped folder's package and every module under ``oij.parallel``'s layer, from the
    bottom layer up; each "a sits above b" must hold."""
    out = []
    if comment is not None and comment != layers:
        out.append(f"pyproject.toml's comment: {[sorted(c) for c in comment]}, the contract: "
                   f"{[sorted(c) for c in layers]}")
    if table != layers:
        for i in range(max(len(table), len(layers))):
            want = sorted(layers[i]) if i < len(layers) else None
            got = sorted(table[i]) if i < len(table) else None
            if want != got:
                out.append(f"table row {i + 1}: {got}, the contract: {want}")
    rank = {m: len(layers) - i for i, layer in enumerate(layers) for m in layer}
    below = {m for m in rank if "oij.parallel" in rank and rank[m] < rank["oij.parallel"]}
    mapped = {f"oij.{f}" for f in ("spec", "reference", "parallel", "proofs")} & set(rank)
    out += [f"README: names no {m}" for m in sorted(below | mapped) if m not in readme]
    for a, b in above or []:
        if a not in rank or b not in rank or rank[a] <= rank[b]:
            out.append(f"proofs/README.md: {a} above {b}, the contract: not so")
    out += [f"README: {a} before {b}, a lower layer" for a, b in pairwise(readme)
            if rank[a] > rank[b]]
    return out


def test_the_descriptions_say_what_the_contract_says() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    layers = contract_layers(pyproject)
    folders = folder_names(pyproject)
    table = table_layers((ROOT / "docs" / "architecture.rst").read_text())
    order = readme_order((ROOT / "README.md").read_text(), {m for layer in layers for m in layer}, folders)
    claims = above_claims((ROOT / "proofs" / "README.md").read_text())
    above = [(folders.get(a, a), folders.get(b, b)) for a, b in claims]
    assert above, "proofs/README.md no longer says where proofs/ sits"
    assert disagreements(layers, table, order, comment_layers(pyproject), above) == []


CONTRACT = """
# bottom up:
# oij.spec <- oij.io <- oij.parallel <- oij.proofs | oij.pipelines <- oij.cli
[tool.importlinter]
root_packages = ["oij"]
[[tool.importlinter.contracts]]
name = "inner"
type = "layers"
layers = ["oij.parallel.a", "oij.parallel.b"]
[[tool.importlinter.contracts]]
name = "layers"
type = "layers"
layers = ["oij.cli", "oij.proofs | oij.pipelines", "oij.parallel", "oij.io", "oij.spec"]
"""

TABLE = """The layers
----------

====================================  =====
``oij.cli``                           top
``oij.proofs``, ``oij.pipelines``     two, with ``oij.parallel`` named
                                      on a continuation line
``oij.parallel``                      engines
``oij.io``                            readers
``oij.spec``                          spec
====================================  =====
"""

ORDER = ["oij.spec", "oij.io", "oij.parallel", "oij.proofs"]
FOLDERS = {"spec": "oij.spec", "parallel": "oij.parallel", "proofs": "oij.proofs"}


def test_the_parsers_read_the_contract_and_the_table() -> None:
    layers = contract_layers(CONTRACT)
    assert layers == [frozenset({"oij.cli"}), frozenset({"oij.proofs", "oij.pipelines"}), frozenset({"oij.parallel"}),
                      frozenset({"oij.io"}), frozenset({"oij.spec"})]
    assert table_layers(TABLE) == layers
    assert comment_layers(CONTRACT) == layers
    readme = "Intro.\n\nThe layout: `spec/`, `oij.io`, `parallel/` (through `oij.io`), `proofs/`, `tests/`.\n"
    assert readme_order(readme, {m for layer in layers for m in layer}, FOLDERS) == ORDER
    assert above_claims("So `proofs/` sits\nabove `parallel` in the contract") == [("proofs", "parallel")]
    assert disagreements(layers, table_layers(TABLE), ORDER, comment_layers(CONTRACT),
                         [("oij.proofs", "oij.parallel")]) == []


def test_a_description_that_disagrees_is_named() -> None:
    """Negative control: the descriptions this test was written against -- ``proofs`` in a layer of its own
    under ``parallel``, a README that goes spec, reference, parallel, proofs with the readers left in ``oij/``
    above them -- a table with two rows swapped, a comment with a layer left out, a placement that is false."""
    layers = contract_layers(CONTRACT)
    moved = TABLE.replace("``oij.proofs``, ``oij.pipelines``     two",
                          "``oij.pipelines``                     two")
    moved = moved.replace("``oij.io``                            readers",
                          "``oij.io``, ``oij.proofs``            readers")
    assert disagreements(layers, table_layers(moved), ORDER) == [
        "table row 2: ['oij.pipelines'], the contract: ['oij.pipelines', 'oij.proofs']",
        "table row 4: ['oij.io', 'oij.proofs'], the contract: ['oij.io']"]
    assert disagreements(layers, layers, ["oij.spec", "oij.parallel", "oij.proofs"]) == [
        "README: names no oij.io"]
    assert disagreements(layers, layers, ["oij.spec", "oij.parallel", "oij.io", "oij.proofs"]) == [
        "README: oij.parallel before oij.io, a lower layer"]
    row_p = "``oij.parallel``                      engines\n"
    row_io = "``oij.io``                            readers\n"
    swapped = TABLE.replace(row_p + row_io, row_io + row_p)
    assert disagreements(layers, table_layers(swapped), ORDER) == [
        "table row 3: ['oij.io'], the contract: ['oij.parallel']",
        "table row 4: ['oij.parallel'], the contract: ['oij.io']"]
    short = comment_layers(CONTRACT.replace("oij.io <- ", ""))
    assert disagreements(layers, layers, ORDER, short)[0].startswith("pyproject.toml's comment: ")
    assert disagreements(layers, layers, ORDER, layers, [("oij.proofs", "oij.pipelines")]) == [
        "proofs/README.md: oij.proofs above oij.pipelines, the contract: not so"]
