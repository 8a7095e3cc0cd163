"""Sphinx extension: the docs' examples are run when the docs build, and their output is what the page shows.

Directives (paths are relative to ``docs/examples/``; every command runs in a
fresh copy of that directory, so the files a page creates are the ones the
reader creates by copy-paste):

``.. oij-file:: first.jsonl``
    the file as a ``cat > first.jsonl <<'EOF'`` block the reader pastes;
``.. oij-run:: oij join first.jsonl``
    runs the command (``oij`` is this checkout's CLI) and shows it with its
    output; ``:returncode: N`` is the exit code it must have (default 0) --
    any other code fails the build;
``.. oij-explain:: first.jsonl``
    runs ``oij explain FILE --svg`` and puts the picture in the page.

``tests/project/test_docs_pages.py`` runs every ``oij-run`` command of every page in
the test command too, so an example that stops working fails CI twice.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import Directive, directives

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(HERE, "examples")
ROOT = os.path.dirname(HERE)


def run_example(command: str, workdir: str) -> tuple[int, str]:
    """Run one documented command (``oij ...``) in ``workdir``: (exit code, stdout + stderr)."""
    words = shlex.split(command)
    if not words or words[0] != "oij":
        raise ValueError(f"an example command starts with oij: {command!r}")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), COLUMNS="100")
    r = subprocess.run([sys.executable, "-m", "oij.cli", *words[1:]], cwd=workdir, capture_output=True, text=True,
                       timeout=600, env=env)
    return r.returncode, r.stdout + r.stderr


def fresh_examples() -> str:
    """A temporary copy of docs/examples (the caller removes it)."""
    d = tempfile.mkdtemp(prefix="oij-docs-")
    for name in os.listdir(EXAMPLES):
        shutil.copy(os.path.join(EXAMPLES, name), d)
    return d


def _console(text: str) -> nodes.literal_block:
    node = nodes.literal_block(text, text)
    node["language"] = "console"
    return node


class OijFile(Directive):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        with open(os.path.join(EXAMPLES, name), encoding="utf-8") as f:
            body = f.read()
        return [_console(f"$ cat > {name} <<'EOF'\n{body}EOF")]


class OijRun(Directive):
    required_arguments = 1
    final_argument_whitespace = True
    option_spec: ClassVar[dict[str, Any]] = {"returncode": directives.nonnegative_int}

    def run(self) -> list[nodes.Node]:
        command = self.arguments[0]
        want = self.options.get("returncode", 0)
        d = fresh_examples()
        try:
            rc, out = run_example(command, d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        if rc != want:
            raise self.error(f"example {command!r} exited {rc}, the page says {want}:\n{out}")
        return [_console(f"$ {command}\n{out.rstrip()}" + (f"\n$ echo $?\n{rc}" if rc else ""))]


class OijExplain(Directive):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        d = fresh_examples()
        try:
            rc, out = run_example(f"oij explain {shlex.quote(name)} --svg picture.svg --title {shlex.quote(name)}", d)
            if rc != 0:
                raise self.error(f"oij explain {name} exited {rc}:\n{out}")
            with open(os.path.join(d, "picture.svg"), encoding="utf-8") as f:
                svg = f.read()
        finally:
            shutil.rmtree(d, ignore_errors=True)
        html = f'<div class="oij-explain" style="overflow-x:auto">{svg}</div>'
        return [nodes.raw("", html, format="html")]


class OijCli(Directive):
    """Every command's ``--help``, from the parser itself (so the page cannot drift from the CLI)."""

    def run(self) -> list[nodes.Node]:
        import argparse

        sys.path.insert(0, ROOT)
        from oij.cli import build_parser

        os.environ["COLUMNS"] = "100"
        out: list[nodes.Node] = []

        def walk(p: argparse.ArgumentParser, words: list[str]) -> None:
            subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
            if words:
                name = " ".join(words)
                sec = nodes.section(ids=[nodes.make_id("cli-" + name)])
                sec += nodes.title(text=f"oij {name}")
                help_text = p.format_help()
                sec += nodes.literal_block(help_text, help_text)
                out.append(sec)
            for a in subs:
                for name, sp in a.choices.items():
                    walk(sp, [*words, name])

        walk(build_parser(), [])
        return out


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("oij-cli", OijCli)
    app.add_directive("oij-file", OijFile)
    app.add_directive("oij-run", OijRun)
    app.add_directive("oij-explain", OijExplain)
    return {"parallel_read_safe": True}
