"""The docs' examples work: every ``oij-run`` command of every page runs here with the exit code the page
states (the docs build runs them too, and shows their real output), and every other ``$ oij ...`` command
line in a console block is one the CLI accepts (the slow ones -- benchmarks, clusters -- are parsed, not run)."""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from oij.cli import build_parser

DOCS = Path(__file__).resolve().parents[2] / "docs"
_spec = importlib.util.spec_from_file_location("oijexec", DOCS / "_ext" / "oijexec.py")
assert _spec is not None and _spec.loader is not None
oijexec = importlib.util.module_from_spec(_spec)
sys.modules["oijexec"] = oijexec
_spec.loader.exec_module(oijexec)

RUN = re.compile(r"^\.\. oij-run:: (.+)$((?:\n   :returncode: \d+)?)", re.M)


def _runs() -> list[tuple[str, str, int]]:
    out = []
    for page in sorted(DOCS.glob("*.rst")):
        for m in RUN.finditer(page.read_text()):
            code = int(m.group(2).split()[-1]) if m.group(2) else 0
            out.append((page.name, m.group(1).strip(), code))
    return out


def _console_commands() -> list[tuple[str, str]]:
    out = []
    for page in sorted(DOCS.glob("*.rst")):
        lines = page.read_text().replace("\\\n", " ").splitlines()  # join continued lines
        inside = False
        for ln in lines:
            if ln.startswith(".. code-block:: console"):
                inside = True
                continue
            if inside and ln and not ln.startswith(" "):
                inside = False
            s = ln.strip()
            if inside and s.startswith("$ oij "):
                out.append((page.name, re.split(r"\s#\s", s[2:])[0].strip()))
    return out


def test_the_pages_have_examples() -> None:
    pages = {p for p, _, _ in _runs()}
    assert "tutorial.rst" in pages and len(_runs()) >= 5
    assert len(_console_commands()) >= 20


@pytest.mark.parametrize(("page", "command", "code"), _runs())
def test_every_executed_example_runs(page: str, command: str, code: int) -> None:
    d = oijexec.fresh_examples()
    try:
        rc, out = oijexec.run_example(command, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert rc == code, f"{page}: {command} exited {rc}:\n{out}"
    assert out.strip(), f"{page}: {command} printed nothing"
    assert "Traceback" not in out


def _parses(command: str) -> bool:
    words = shlex.split(command)[1:]
    if "--" in words:
        words = words[: words.index("--")]
    words = [w for w in words if not w.startswith("$(")]
    try:
        build_parser().parse_args(words)
    except SystemExit:
        return False
    return True


def test_every_documented_command_line_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    # howto-pattern.rst writes an engine named "mine" that only exists once the reader has written it
    bad = [(p, c) for p, c in _console_commands() if not _parses(c) and not (p == "howto-pattern.rst" and "mine" in c)]
    capsys.readouterr()
    assert not bad, bad


def test_the_checks_can_fail(capsys: pytest.CaptureFixture[str]) -> None:
    """Negative controls: a misspelt flag is not accepted, and an example that fails is seen as failing."""
    assert not _parses("oij join first.jsonl --uper 3")
    capsys.readouterr()
    d = oijexec.fresh_examples()
    try:
        rc, out = oijexec.run_example("oij join no-such-file.jsonl", d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert rc == 2 and "no-such-file.jsonl" in out
