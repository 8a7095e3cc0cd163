"""The bare environment of ``tests/commands/test_bare_install.py``: a fresh venv with ``pip install .`` of a copy
of the tree, no extras, as a user installs oij.

Built by that module's ``bare`` fixture, or ahead of the tests by ``.ci/run`` while its own install runs on one
core (the first 20 to 30 s of a fresh clone's run leave the other idle)::

    python3 tests/bare_env.py DEST     # DEST/venv, DEST/src, and DEST/ready.json last

``.ci/run`` then names DEST in ``OIJ_TEST_BARE_ENV``.  The fixture takes such an environment only if its
``ready.json`` names the digest of the tree as it is when the tests run (:func:`tree_digest`: every file the copy
takes, by path and content); otherwise it builds its own, as before.  Whoever builds DEST removes it (the fixture
its own; ``.ci/run`` its DEST at exit).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

IGNORED_NAMES = (".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".mypy_cache",
                 ".ruff_cache", ".pytest_cache", ".import_linter_cache", "_build", "spark-warehouse", "metastore_db",
                 "prove-out", "oij-check")
"""Left out of the copy: version control, environments, caches and build output."""

IGNORED = shutil.ignore_patterns(*IGNORED_NAMES)


def bare_env(venv: Path) -> dict[str, str]:
    """The environment of an activated ``venv``, with nothing of the caller's Python setup (and not the test
    suite's Spark options: ``oij check`` there runs on Spark's defaults)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYSPARK_SUBMIT_ARGS", "VIRTUAL_ENV")}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


INSTALLED_FROM = ("pyproject.toml", "README.md", "LICENSE", "oij", "spec", "reference", "parallel", "proofs")
"""What ``pip install .`` builds the distribution from (pyproject.toml's packages, package data and readme): the
parts of the tree :func:`tree_digest` covers.  (Not the whole copy: the Sphinx build beside the tests writes its
generated pages into ``docs/``.)"""


def tree_digest(root: Path = ROOT) -> str:
    """SHA-256 over every file under ``INSTALLED_FROM`` (``IGNORED`` left out), by relative path and content, in
    path order.  O(size of those sources)."""
    h = hashlib.sha256()
    for top in INSTALLED_FROM:
        t = root / top
        if t.is_file():
            h.update(top.encode() + b"\0" + hashlib.sha256(t.read_bytes()).digest())
        elif t.is_dir():
            _digest_dir(h, root, t)
    return h.hexdigest()


def _digest_dir(h: Any, root: Path, top: Path) -> None:
    for d, dirs, files in os.walk(top):
        here = Path(d)
        skip = IGNORED(d, [*dirs, *files])
        dirs[:] = sorted(x for x in dirs if x not in skip)
        for name in sorted(f for f in files if f not in skip):
            p = here / name
            if p.is_symlink() or not p.is_file():
                continue
            h.update(p.relative_to(root).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(p.read_bytes()).digest())


def build(dest: Path, work: Path) -> float:
    """Copy the tree to ``dest/src``, make ``dest/venv`` and ``pip install`` the copy into it (non-editable, so a
    missing package data file shows; ``--no-compile``: Python compiles what a command imports).  Returns the
    seconds it took; raises ``RuntimeError`` with pip's last output when the install fails."""
    src, venv = dest / "src", dest / "venv"
    shutil.copytree(ROOT, src, ignore=IGNORED)
    work.mkdir(parents=True, exist_ok=True)
    env = bare_env(venv)
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, env=env)
    p = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", str(src)],
                       env=env, cwd=work, capture_output=True, text=True, timeout=780, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"pip install . failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return time.monotonic() - t0


def prebuilt(dest: Path | None) -> tuple[Path, float] | None:
    """The venv of a build ahead of the tests at ``dest`` (``OIJ_TEST_BARE_ENV``) and the seconds its build took,
    if it finished and was made from the tree as it is now; else None."""
    if dest is None:
        return None
    try:
        ready = json.loads((dest / "ready.json").read_text())
    except (OSError, ValueError):
        return None
    if ready.get("tree") != tree_digest() or not (dest / "venv" / "bin" / "oij").exists():
        return None
    return dest / "venv", float(ready["seconds"])


def main(argv: list[str]) -> int:
    """``python3 tests/bare_env.py DEST``: build into DEST (which must not exist), then write DEST/ready.json."""
    if len(argv) != 1:
        print("usage: python3 tests/bare_env.py DEST", file=sys.stderr)
        return 2
    dest = Path(argv[0])
    digest = tree_digest()
    seconds = build(dest, dest / "work")
    tmp = dest / "ready.json.tmp"
    tmp.write_text(json.dumps({"tree": digest, "seconds": round(seconds, 1)}))
    os.replace(tmp, dest / "ready.json")
    print(f"bare environment: {dest / 'venv'} in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
