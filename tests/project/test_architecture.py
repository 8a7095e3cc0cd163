"""The structure tools can see: no symlinks, one-way imports (import-linter), and a negative control."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("spec", "reference", "parallel", "proofs", "oij")
LINT = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([LINT, "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _copy_tree(dst: Path) -> Path:
    for p in PACKAGES:
        shutil.copytree(ROOT / p, dst / p, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    return dst


def test_no_symlinks_in_the_repository() -> None:
    out = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.fail(f"git ls-files failed: {out.stderr}")
    links = [line.split("\t", 1)[1] for line in out.stdout.splitlines() if line.startswith("120000")]
    assert links == []


def test_import_contracts_hold(tmp_path: Path) -> None:
    r = _lint(_copy_tree(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


@pytest.mark.parametrize(
    ("module", "line", "needle"),
    [
        ("spec/match.py", "from reference.oracle import Oracle\n", "spec.match -> reference.oracle"),
        ("parallel/runtime/replica.py", "from parallel.patterns.hp import hp_engine\n",
         "parallel.runtime.replica -> parallel.patterns.hp"),
        ("reference/exact.py", "from oij.io.jsonl import format_float\n", "reference.exact -> oij.io.jsonl"),
    ],
)
def test_a_forbidden_import_breaks_a_contract(tmp_path: Path, module: str, line: str, needle: str) -> None:
    tree = _copy_tree(tmp_path)
    with open(tree / module, "a") as f:
        f.write(line)
    r = _lint(tree)
    assert r.returncode != 0
    assert needle in r.stdout


@pytest.mark.parametrize("group", ["spark-session", "flink-gateway"])
def test_a_test_that_starts_a_jvm_outside_its_group_is_caught(group: str, request: pytest.FixtureRequest,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The conftest guard that keeps Spark's JVM, and PyFlink's gateway, on one xdist worker each: a test that
    launches one in-process without its group's mark is named; the same test marked, or one that found the JVM
    already up, is not (stand-in pyspark and pyflink modules whose gateways are set or not, so no JVM starts
    here)."""
    import types

    from tests.conftest import jvm_escape

    spark = types.ModuleType("pyspark")
    flink = types.ModuleType("pyflink.java_gateway")
    vars(spark)["SparkContext"] = type("SparkContext", (), {"_gateway": object() if group == "spark-session" else None})
    vars(flink)["_gateway"] = object() if group == "flink-gateway" else None
    monkeypatch.setitem(sys.modules, "pyspark", spark)
    monkeypatch.setitem(sys.modules, "pyflink.java_gateway", flink)
    node = request.node
    down = {"spark-session": False, "flink-gateway": False}
    problem = jvm_escape(node, started_before=down)
    assert problem is not None and group in problem, problem
    assert jvm_escape(node, started_before={**down, group: True}) is None
    node.add_marker(getattr(pytest.mark, group.replace("-", "_")))
    assert jvm_escape(node, started_before=down) is None


def test_the_suite_collects_without_xdist() -> None:
    """The xdist groups are pytest-xdist's marks: with the plugin off (``-p no:xdist``, one process) conftest adds
    none, so ``--strict-markers`` does not reject them (it did: "'xdist_group' not found in `markers`")."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                        "--collect-only", "tests/project/test_architecture.py", "tests/testing/test_check_got.py"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "tests collected" in r.stdout, r.stdout[-2000:]


# ------------------------------------------------------------------------------------------------ private names
SHARED_PRIVATE = {
    "oij.testing": "the kit's modules: private to the kit's users (its API is oij.testing itself), but the "
                   "project's own internal API, which its commands and tests import",
}
"""Packages whose private *modules* (not private names) tests and docs may import, and why."""

_IMPORT_LINE = re.compile(r"(?:^|[;\"'(]|\s)(?:from\s+([\w.]+)\s+import\s+([\w ,*]+)|import\s+([\w., ]+))")


def private_imports(text: str, *, python: bool = True) -> list[str]:
    """The imports in ``text`` that reach a private name of a project package: an imported name, or a module
    path component, that starts with ``_`` (dunder names aside), unless the private module belongs to
    :data:`SHARED_PRIVATE`.  ``python``: parse ``text`` as Python; else (reStructuredText) scan each line for
    import statements, in code blocks and ``python -c`` strings alike."""
    found: list[tuple[str, list[str]]] = []
    if python:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append((node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                found += [(a.name, []) for a in node.names]
    else:
        for line in text.splitlines():
            for m in _IMPORT_LINE.finditer(line):
                if m[1]:
                    found.append((m[1], [x.strip() for x in m[2].split(",") if x.strip()]))
                else:
                    found += [(x.strip(), []) for x in m[3].split(",") if x.strip()]
    bad = []
    for module, names in found:
        parts = module.split(".")
        if parts[0] not in PACKAGES:
            continue
        private = [i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")]
        if private and ".".join(parts[:private[0]]) not in SHARED_PRIVATE:
            bad.append(module)
        bad += [f"{module}.{n}" for n in names if n.startswith("_") and not n.startswith("__")]
    return bad


def test_tests_and_docs_import_no_private_name_of_another_package() -> None:
    """Tests and docs use the library's public names: a helper another command, a test or a user could call has
    a public name in a library module (``oij.commands.kitpower._pick`` was one, ``oij.commands.peers._params_for``
    another)."""
    bad: list[str] = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        bad += [f"{path.relative_to(ROOT)}: {x}" for x in private_imports(path.read_text())]
    for path in sorted((ROOT / "docs").rglob("*.py")):
        if "_build" not in path.parts:
            bad += [f"{path.relative_to(ROOT)}: {x}" for x in private_imports(path.read_text())]
    for path in sorted((ROOT / "docs").glob("*.rst")):
        bad += [f"{path.relative_to(ROOT)}: {x}" for x in private_imports(path.read_text(), python=False)]
    assert bad == []


@pytest.mark.parametrize(("snippet", "python", "want"), [
    ("from oij.commands.kitpower import TARGETS, _pick\n", True, ["oij.commands.kitpower._pick"]),
    ("import oij.commands._got\n", True, ["oij.commands._got"]),
    ('    python -c "from oij.commands.peers import _params_for; print(1)"\n', False,
     ["oij.commands.peers._params_for"]),
    ("::\n\n    from spec._private import x\n", False, ["spec._private"]),
])
def test_a_private_import_is_flagged(snippet: str, python: bool, want: list[str]) -> None:
    """Negative control of the check above: each of these reaches a private name and is named."""
    assert private_imports(snippet, python=python) == want


def test_public_and_shared_imports_are_not_flagged() -> None:
    ok = "from oij.bench.kitpower import pick_evenly\nfrom oij.testing._runner import search\nimport _thread\n"
    assert private_imports(ok) == []
    assert private_imports("    from oij.testing import cases\n", python=False) == []
