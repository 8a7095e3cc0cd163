"""mypy --strict over the repository, each folder under its installed module name (``python .ci/typecheck.py``).

pyproject.toml maps the top-level folders under ``oij`` (``[tool.setuptools.package-dir]``: ``spec/`` is
``oij.spec``).  mypy names a file by its folders alone (``spec/match.py`` would be in a package ``spec`` that no
code imports), so this takes mypy's own source list (``[tool.mypy]``'s ``files``, or the paths given), renames the
modules of each mapped folder by the same map, and runs mypy's build on it: every ``import oij.spec...`` resolves
to the repository's file, and errors are reported at the repository's paths.  Other arguments go to mypy.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parents[1]


def renamed(sources: list[BuildSource], package_dir: dict[str, str]) -> list[BuildSource]:
    """``sources`` with each module of a mapped folder under its mapped name (the folder's package ``spec`` becomes
    ``oij.spec``, and so every module in it)."""
    name_of = {folder.replace("/", "."): name for name, folder in package_dir.items() if name and name != folder}
    out = []
    for s in sources:
        module = s.module or ""
        top = next((f for f in name_of if module == f or module.startswith(f + ".")), None)
        if top is not None:
            s = BuildSource(s.path, name_of[top] + module[len(top):], s.text, s.base_dir)
        out.append(s)
    return out


def main(argv: list[str]) -> int:
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    sources, options = process_options(["--strict", *argv])
    try:
        result = build.build(renamed(sources, package_dir), options, stdout=sys.stdout, stderr=sys.stderr)
        messages = result.errors
    except CompileError as e:
        messages = e.messages
    for line in messages:
        print(line)
    errors = sum(1 for m in messages if ": error:" in m)
    files = len({m.split(":", 1)[0] for m in messages if ": error:" in m})
    if errors:
        print(f"Found {errors} error{'s' * (errors != 1)} in {files} file{'s' * (files != 1)} "
              f"(checked {len(sources)} source files)")
        return 1
    print(f"Success: no issues found in {len(sources)} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
