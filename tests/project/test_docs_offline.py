"""The built docs render their formulas with no network (issue 26): a page loads only assets of the built site.

The docs are built here in part: the tutorial and the spec page (both with formulas), with the project's own
``docs/conf.py`` (``-c docs``) and its extensions, less the three that draw pictures neither page shows at
every build (10-20 s).  The pages may reference no script, stylesheet, image or ``@import`` by an ``http(s)://``
or ``//`` address, and the MathJax script they load is the copy in the built ``_static``.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ("tutorial", "spec")
# setup-time generators of pictures for other pages (architecture, proofs, experiments): not needed here
SKIPPED_EXTENSIONS = {"archgraph", "provediagrams", "benchplots"}

_REMOTE = re.compile(r"^\s*(?:https?:)?//", re.I)
_CSS_IMPORT = re.compile(r"""@import\s+(?:url\(\s*)?['"]?([^'")\s;]+)""", re.I)
_CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)""", re.I)
# (tag, attribute) pairs whose address the browser loads by itself, with no click
_LOADED = {("script", "src"), ("link", "href"), ("img", "src"), ("iframe", "src"), ("source", "src"),
           ("audio", "src"), ("video", "src"), ("embed", "src"), ("object", "data")}


def remote_in_css(css: str) -> list[str]:
    """The addresses of ``@import`` and ``url(...)`` in a stylesheet that point off the site."""
    found = _CSS_IMPORT.findall(css) + _CSS_URL.findall(css)  # @import url(...) is found by both
    return [u for u in dict.fromkeys(found) if _REMOTE.match(u)]


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.loaded: list[tuple[str, str, str]] = []  # (tag, attribute, address)
        self.css: list[str] = []  # <style> bodies and style="..." attributes
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if (tag, name) in _LOADED:
                self.loaded.append((tag, name, value))
            elif name == "style":
                self.css.append(value)
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.css.append(data)


def assets(html: str) -> _Assets:
    p = _Assets()
    p.feed(html)
    p.close()
    return p


def remote_assets(html: str) -> list[str]:
    """Everything a page loads from off the site: ``<script src>``, ``<link href>``, ``<img src>`` (and the like)
    and CSS ``@import`` / ``url()`` addresses that start with ``http://``, ``https://`` or ``//``."""
    a = assets(html)
    out = [f"<{tag} {name}={value!r}>" for tag, name, value in a.loaded if _REMOTE.match(value)]
    for css in a.css:
        out += [f"css {u!r}" for u in remote_in_css(css)]
    return out


def _local(page: Path, address: str) -> Path:
    return (page.parent / address.split("?")[0].split("#")[0]).resolve()


def _extensions() -> list[str]:
    """docs/conf.py's ``extensions``, read without running it."""
    tree = ast.parse((DOCS / "conf.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "extensions"
                                                for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list)
            return [str(v) for v in value]
    raise AssertionError("docs/conf.py sets no extensions")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("docs-src")
    out = tmp_path_factory.mktemp("docs-html")
    for name in PAGES:
        (src / f"{name}.rst").write_text((DOCS / f"{name}.rst").read_text(encoding="utf-8"), encoding="utf-8")
    (src / "index.rst").write_text("oij\n===\n\n.. toctree::\n\n" + "".join(f"   {p}\n" for p in PAGES),
                                   encoding="utf-8")
    extensions = [e for e in _extensions() if e not in SKIPPED_EXTENSIONS]
    # Not -W: links to the pages left out are warnings here (the full build in .ci/run runs with -W -n).
    r = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", "-c", str(DOCS),
                        "-D", "extensions=" + ",".join(extensions), str(src), str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


@pytest.mark.parametrize("page", PAGES)
def test_a_page_with_formulas_loads_only_local_assets(built: Path, page: str) -> None:
    path = built / f"{page}.html"
    html = path.read_text(encoding="utf-8")
    assert 'class="math' in html, f"{page}: no formula, so no MathJax to check"
    assert remote_assets(html) == []
    # the stylesheets it links, too (an @import there would load from the network all the same)
    sheets = [v for tag, _, v in assets(html).loaded if tag == "link" and v.split("?")[0].endswith(".css")]
    assert sheets
    for address in sheets:
        css = _local(path, address)
        if css.exists():  # alabaster links _static/custom.css whether or not there is one
            assert remote_in_css(css.read_text(encoding="utf-8")) == [], address


@pytest.mark.parametrize("page", PAGES)
def test_mathjax_is_shipped_with_the_site(built: Path, page: str) -> None:
    path = built / f"{page}.html"
    scripts = [v for tag, _, v in assets(path.read_text(encoding="utf-8")).loaded
               if tag == "script" and "mathjax" in v.lower()]
    assert len(scripts) == 1, scripts
    js = _local(path, scripts[0])
    static = (built / "_static").resolve()
    assert js.is_file() and js.is_relative_to(static), scripts[0]
    assert js.stat().st_size > 100_000  # MathJax itself, not a stub that loads it from elsewhere
    # what that combined component loads at run time, beside it: the TeX fonts of its HTML output
    assert (js.parent / "output" / "chtml" / "fonts" / "woff-v2" / "MathJax_Main-Regular.woff").is_file()


def test_the_tutorial_figure_scales_to_the_column(built: Path) -> None:
    html = (built / "tutorial.html").read_text(encoding="utf-8")
    roots = re.findall(r"<svg [^>]*>", html)
    assert roots
    for root in roots:
        assert 'width="100%"' in root and "viewBox=" in root and " height=" not in root, root


def test_the_check_reports_a_cdn() -> None:
    """Negative control: the checks above see what a page loading MathJax (and more) from a CDN loads."""
    importlib.import_module("sphinx.util.logging")  # sphinx.ext.mathjax uses it unimported (an app loads it)
    from sphinx.ext.mathjax import MATHJAX_URL  # Sphinx's default, what the docs loaded before issue 26

    page = f"""<html><head>
    <link rel="stylesheet" href="_static/basic.css?v=1" />
    <link rel="stylesheet" href="//fonts.example.org/serif.css" />
    <script src="_static/doctools.js"></script>
    <script defer="defer" src="{MATHJAX_URL}"></script>
    <style>@import url("https://example.org/a.css"); @import "b.css"; body {{ background: url(x.png) }}</style>
    </head><body><img src="HTTP://example.org/logo.png"><div style="background:url('//example.org/bg.png')"></div>
    <a href="https://example.org/">a link is not an asset</a></body></html>"""
    assert remote_assets(page) == [
        "<link href='//fonts.example.org/serif.css'>",
        f"<script src='{MATHJAX_URL}'>",
        "<img src='HTTP://example.org/logo.png'>",
        "css 'https://example.org/a.css'",
        "css '//example.org/bg.png'",
    ]
    assert remote_in_css('@import url(https://example.org/a.css);\n@import "//example.org/b.css";') == [
        "https://example.org/a.css", "//example.org/b.css"]
    assert remote_assets('<script src="_static/mathjax/tex-chtml.js"></script>') == []
