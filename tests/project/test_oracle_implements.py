"""The oracles say which definition of the specification each of their handlers implements (issue 66).

Every method of the oracles' classes and every function of their modules either has a paragraph
``Implements :func:`oij.spec...` ...`` in its docstring, or is listed in :data:`HELPERS` with what it is instead;
every definition such a paragraph names exists in :mod:`oij.spec`.  A reader goes from ``_finalize`` to
:func:`oij.spec.stream.is_final`, and a renamed definition of the spec breaks this test, not the reader.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

ORACLES = {"reference/oracle.py": ("Oracle",), "reference/block_oracle.py": ("BlockOracle", "BlockStore"),
           "reference/profiles.py": ("ProfileOracle",)}
"""Each oracle module and its classes whose methods are handlers (the others are data layouts)."""

HELPERS = {
    "reference/oracle.py": {
        "Oracle.__init__": "the state's layout",
        "Oracle._key_state": "a key's state, made on first use",
        "Oracle._passing": "cond's mask over a slice, at C speed (the definition is named by its callers)",
        "Oracle._scaled": "exact arithmetic (oij.reference.exact)",
        "Oracle._to_float": "exact arithmetic (oij.reference.exact)",
        "Oracle.effectiveness": "a measurement (Scale-OIJ's Eq. 1), not a result",
        "Oracle._check": "the structural invariants, for the tests",
        "_operands": "a tuple's cond operands, as stored (oij.reference.cond)",
    },
    "reference/block_oracle.py": {
        "supports": "which queries the block path takes",
        "key_ts_order": "a sort",
        "event_columns": "events as columns",
        "BlockOracle.__init__": "the state's layout",
        "BlockOracle.ended": "an accessor",
        "BlockOracle.compact_min": "a tuning knob of the key dictionary",
        "BlockOracle.take": "the output buffer",
        "BlockOracle._channel_carry": "a carry between blocks (overridden by the tests' negative controls)",
        "BlockOracle._ts_carry": "a carry between blocks (overridden by the tests' negative controls)",
        "BlockOracle.stored": "a measurement of the state",
        "BlockOracle._check": "the invariants, for the tests",
        "BlockStore.__init__": "the state's layout",
        "BlockStore.take": "the output buffer",
        "BlockStore.stored": "a measurement of the state",
        "BlockStore._exact_objects": "exact arithmetic for values past int64",
        "BlockStore._compact": "renumbering the key dictionary",
        "BlockStore._check": "the invariants, for the tests",
    },
    "reference/profiles.py": {
        "_key": "a key's index entry (its type and its value)",
        "ProfileOracle.__init__": "the state's layout",
        "ProfileOracle._check": "the invariants, for the tests",
    },
}

_REF = re.compile(r":(?:func|meth|class|data|mod|attr):`~?([\w.]+)`")


def handlers(text: str, classes: tuple[str, ...]) -> dict[str, str]:
    """Every module-level function of ``text`` and every method of ``classes``, by qualified name, with its
    docstring ('' if none)."""
    tree = ast.parse(text)
    out: dict[str, str] = {}
    scopes: list[tuple[str, list[ast.stmt]]] = [("", tree.body)]
    scopes += [(n.name + ".", n.body) for n in tree.body if isinstance(n, ast.ClassDef) and n.name in classes]
    for prefix, body in scopes:
        for fn in body:
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                out[prefix + fn.name] = ast.get_docstring(fn) or ""
    return out


def implemented(doc: str) -> list[str]:
    """The definitions named by the docstring's ``Implements ...`` paragraph (none without one)."""
    paragraphs = re.split(r"\n\s*\n", doc)
    said = [p for p in paragraphs if p.lstrip().startswith("Implements ")]
    return [m for p in said for m in _REF.findall(p)]


def exists_in_spec(name: str) -> bool:
    """``name`` (dotted, e.g. ``oij.spec.stream.is_final`` or ``oij.spec.batch.Results.canonical``) is a module of
    oij.spec or a definition inside one."""
    if name != "oij.spec" and not name.startswith("oij.spec."):
        return False
    parts = name.split(".")
    for cut in range(len(parts), 1, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def unmet(path: str, text: str) -> list[str]:
    """What is wrong with the oracle module ``text`` (at ``path``): handlers that name no definition, helpers
    that name one (listed in the wrong place) or no longer exist, names that are not in oij.spec."""
    found = handlers(text, ORACLES[path])
    helpers = HELPERS[path]
    problems = [f"{path}: {h} is listed as a helper and no longer exists" for h in helpers if h not in found]
    for name, doc in found.items():
        names = implemented(doc)
        if name in helpers:
            if names:
                problems.append(f"{path}: {name} names {names}: take it off HELPERS")
            continue
        if not names:
            problems.append(f"{path}: {name} names no definition of oij.spec (\"Implements :func:`oij.spec...`\")")
        problems += [f"{path}: {name} names {n}, which oij.spec does not define" for n in names
                     if not exists_in_spec(n)]
    return problems


@pytest.mark.parametrize("path", sorted(ORACLES))
def test_every_handler_names_the_definition_it_implements(path: str) -> None:
    assert unmet(path, (ROOT / path).read_text()) == []


def test_the_oracle_names_the_spec_definitions_of_its_events() -> None:
    """The event handlers name at least the definitions of the stream's semantics."""
    found = handlers((ROOT / "reference/oracle.py").read_text(), ("Oracle",))
    assert "oij.spec.watermark.is_late" in implemented(found["Oracle.on_tuple"])
    assert "oij.spec.watermark.on_watermark" in implemented(found["Oracle.on_watermark"])
    assert "oij.spec.stream.is_final" in implemented(found["Oracle._finalize"])


def test_a_made_up_name_fails() -> None:
    """Negative controls: a definition the spec does not have, a real one outside oij.spec, a handler that names
    nothing, and a helper that no longer exists are each reported."""
    assert exists_in_spec("oij.spec.stream.is_final")
    assert exists_in_spec("oij.spec.batch.Results.canonical")
    assert not exists_in_spec("oij.spec.stream.on_tuple")
    assert not exists_in_spec("oij.spec.nowhere.is_final")
    assert not exists_in_spec("oij.reference.oracle.Oracle")
    text = (ROOT / "reference/oracle.py").read_text()
    made_up = text.replace(":func:`oij.spec.stream.is_final`", ":func:`oij.spec.stream.is_finished`", 1)
    assert made_up != text
    assert any("oij.spec.stream.is_finished, which oij.spec does not define" in p
               for p in unmet("reference/oracle.py", made_up))
    bare = text + "\n\ndef run_more(events: object) -> None:\n    \"\"\"No paragraph.\"\"\"\n"
    assert any("run_more names no definition" in p for p in unmet("reference/oracle.py", bare))
    gone = text.replace("def _key_state(", "def _key_state_of(", 1)
    assert any("Oracle._key_state is listed as a helper and no longer exists" in p
               for p in unmet("reference/oracle.py", gone))
