"""The evidence for kit-power's equivalent mutants: the manifest ``tests/impls/mutants.toml`` (its
``[[equivalent]]`` entries, each with the kind of its evidence, and its ``[[unreached]]`` code)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from oij.bench.kitpower.mutants import TARGETS

EVIDENCE_KINDS = ("unreached", "proven", "searched")
"""How an entry of the manifest was established: no command runs the line; an argument (its ``reason``) that no
input can tell the mutant apart, which a search then failed to refute; or a search alone (which generators, how
many cases).  Each entry's ``evidence`` starts with one of these words."""


def missing_evidence(manifest: dict[tuple[str, str, int], dict[str, Any]]) -> list[str]:
    """The entries whose ``evidence`` is absent or does not start with one of :data:`EVIDENCE_KINDS`."""
    return [f"{k[0]}:{k[1]}:{k[2]}" for k, e in manifest.items()
            if not str(e.get("evidence", "")).startswith(EVIDENCE_KINDS)]


def load_manifest(path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The equivalent mutants: (target, operator, occurrence) -> {line, mutated, reason, evidence}."""
    if not path.exists():
        return {}
    data = tomllib.loads(path.read_text())
    return {(e["target"], e["operator"], int(e["occurrence"])): e for e in data.get("equivalent", [])}


def load_unreached(path: Path, repo: Path) -> dict[str, dict[int, str]]:
    """The code a target's command cannot run (the manifest's ``[[unreached]]`` entries: a ``function`` of the
    target file, or ``lines`` by their text, each with a reason): target -> {line number: reason}."""
    import ast

    if not path.exists():
        return {}
    out: dict[str, dict[int, str]] = {}
    for e in tomllib.loads(path.read_text()).get("unreached", []):
        t = TARGETS.get(e["target"])
        if t is None or not (repo / t.path).is_file():
            continue
        source = (repo / t.path).read_text()
        rows = out.setdefault(t.name, {})
        reason = str(e["reason"])
        if "function" in e:
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == e["function"]:
                    # the body only: the def line itself runs when the class is made
                    for x in range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1):
                        rows[x] = reason
        texts = {str(x).strip() for x in e.get("lines", [])}
        for i, line in enumerate(source.splitlines(), 1):
            if line.strip() in texts:
                rows[i] = reason
    return out
