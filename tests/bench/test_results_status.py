"""Results that carry their provenance: ``oij bench status`` and the generated tables (oij/bench/results.py).

The negative controls build a small git repository with a result measured at one commit and code changed
after it; the last tests hold this repository itself to it: nothing stale, the generated tables in step
with the raw files, and a README that quotes numbers only through its generated table.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path

import pytest

from oij.bench import results as pv

ROOT = Path(__file__).resolve().parents[2]

MANIFEST = '''
[[result]]
file = "speed.json"
code = ["engine/"]
command = "bench speed"
readme = true
[[result.headline]]
label = "speed"
path = 'rows[name=a,size=2].s'
format = "{:.1f} s"
[[result.headline]]
label = "ratio"
path = 'rows[name=a,size=2].s / rows[name=b,size=2].s'
format = "{:.2f}x"
[[result.headline]]
label = "docs only"
path = 'rows[name=a,size=3].s'
format = "{} s"
readme = false
'''


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "r"
    (repo / "engine").mkdir(parents=True)
    (repo / "docs").mkdir()
    (repo / "bench" / "results").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.org")
    _git(repo, "config", "user.name", "t")
    (repo / "engine" / "join.py").write_text("X = 1\n")
    (repo / "other.py").write_text("Y = 1\n")
    (repo / "bench" / "results" / "manifest.toml").write_text(MANIFEST)
    (repo / "README.md").write_text(f"# r\n\n{pv.README_BEGIN}\n{pv.README_END}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "code")
    return repo


def _measure(repo: Path, s: float = 2.0) -> None:
    result = {"provenance": pv.capture("bench speed", repo),
              "rows": [{"name": "a", "size": 2, "s": s}, {"name": "b", "size": 2, "s": 1.0},
                       {"name": "a", "size": 3, "s": 9.0}]}
    (repo / "bench" / "results" / "speed.json").write_text(json.dumps(result))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "measured")


def _states(repo: Path) -> dict[str, str]:
    return {f.file: f.state for f in pv.status(repo).findings}


def test_fresh_then_stale_when_measured_code_changes(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _measure(repo)
    assert _states(repo) == {"speed.json": "fresh"}
    assert pv.status(repo).ok
    (repo / "other.py").write_text("Y = 2\n")  # not measured code: still fresh
    _git(repo, "commit", "-qam", "other")
    assert pv.status(repo).ok
    (repo / "engine" / "join.py").write_text("X = 2\n")  # the negative control: measured code changed
    report = pv.status(repo)
    assert not report.ok
    [f] = report.problems
    assert (f.state, f.changed) == ("stale", ("engine/join.py",))
    assert "stale" in report.lines()[0] and "engine/join.py" in report.lines()[0]
    _git(repo, "commit", "-qam", "engine")  # committed or not, it is stale until measured again
    assert _states(repo) == {"speed.json": "stale"}
    _measure(repo)
    assert pv.status(repo).ok


def test_a_change_to_comments_and_docstrings_only_changes_nothing(tmp_path: Path) -> None:
    """A measured module whose docstrings, attribute docstrings, comments and layout change: still fresh (what
    runs is the same).  Negative controls: a changed string that the code uses, and a changed number, in the
    same file, are changes."""
    repo = _repo(tmp_path)
    code = repo / "engine" / "join.py"
    code.write_text('"""Join."""\n\n\ndef f(x):\n    """Twice."""\n    return 2 * x\n\n\nNAME = "a"\n')
    _git(repo, "commit", "-qam", "f")
    _measure(repo)
    code.write_text('"""Join, said otherwise."""\n\n\ndef f(x):  # a comment\n    """Twice x,\n    in two lines."""\n'
                    '    return (2 *\n            x)\n\n\nNAME = "a"\n"""An attribute\'s docstring."""\n')
    assert _states(repo) == {"speed.json": "fresh"}
    code.write_text(code.read_text().replace('NAME = "a"', 'NAME = "b"'))
    assert _states(repo) == {"speed.json": "stale"}
    code.write_text(code.read_text().replace('NAME = "b"', 'NAME = "a"').replace("2 *", "3 *"))
    assert _states(repo) == {"speed.json": "stale"}
    assert not pv.same_code("def f(:\n", "def f(:\n")  # a file that does not parse is a change


_BEFORE = {"engine.a": "def f():\n    return 1\n\n\ndef g():\n    return 2\n",
           "engine.user": "from engine.a import f, g\n\nY = f() + g()\n"}
_SPLIT = {"engine.a": '"""f alone."""\n\n\ndef f():\n    return 1\n',
          "engine.b": "def g():\n    return 2\n",
          "engine.user": "from engine.a import f\nfrom engine.b import g\n\nY = f() + g()\n"}


def test_code_moved_between_measured_files_changes_nothing(tmp_path: Path) -> None:
    """A module split in two, its importer repointed: the same code, so the result stays fresh (issue 66 split
    oij/io/jsonl.py; every result measuring oij/io/ would have gone stale).  Negative control: the same split
    with one constant changed is stale."""
    repo = _repo(tmp_path)
    for name, src in _BEFORE.items():
        (repo / (name.replace(".", "/") + ".py")).write_text(src)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "two functions")
    _measure(repo)
    for name, src in _SPLIT.items():
        (repo / (name.replace(".", "/") + ".py")).write_text(src)
    assert _states(repo)["speed.json"] == "fresh"
    (repo / "engine" / "b.py").write_text("def g():\n    return 3\n")
    assert _states(repo)["speed.json"] == "stale"
    # g's old body is nowhere now: the module it left and the one it went to changed; the importer did not
    assert {x for f in pv.status(repo).findings for x in f.changed} == {"engine/a.py", "engine/b.py"}


@pytest.mark.parametrize(("after", "moved"), [
    (_SPLIT, {"engine.a", "engine.b", "engine.user"}),
    ({**_SPLIT, "engine.b": "def g():\n    return 3\n"}, {"engine.user"}),  # a changed body
    ({**_SPLIT, "engine.b": "import os\n\n\ndef g():\n    return 2\n"}, {"engine.user"}),  # a new import
    ({**_SPLIT, "engine.b": "def g():\n    return 2\n\n\ndef f():\n    return 1\n",  # f defined twice
      "engine.a": "def f():\n    return 1\n"}, set()),
    ({**_SPLIT, "engine.user": "from engine.b import f, g\n\nY = f() + g()\n"}, set()),  # f from elsewhere
])
def test_moved_code_and_its_negative_controls(after: dict[str, str], moved: set[str]) -> None:
    """Which modules only moved code: all three for the plain split; none or only the repointed importer when a
    body changes, an import is new, a name is defined twice or imported from the wrong module."""
    assert pv.moved_code(_BEFORE, after) == moved


def test_a_path_excluded_from_measured_code_changes_nothing(tmp_path: Path) -> None:
    """``:(exclude)PATH`` in ``code``: a module the benchmark never runs (oij/io/recovery.py beside the readers)."""
    repo = _repo(tmp_path)
    manifest = repo / "bench" / "results" / "manifest.toml"
    manifest.write_text(MANIFEST.replace('code = ["engine/"]', 'code = ["engine/", ":(exclude)engine/restart.py"]'))
    _git(repo, "commit", "-qam", "exclude")
    _measure(repo)
    (repo / "engine" / "restart.py").write_text("R = 1\n")  # untracked, excluded
    assert _states(repo) == {"speed.json": "fresh"}
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "restart")  # committed, excluded
    assert _states(repo) == {"speed.json": "fresh"}
    (repo / "engine" / "join.py").write_text("X = 3\n")  # the negative control: the rest of engine/ still counts
    assert _states(repo) == {"speed.json": "stale"}


def test_a_new_module_counts_once_the_measured_code_can_run_it(tmp_path: Path) -> None:
    """A module added beside the measured code, which none of it imports or names: what ran is what runs, so the
    result stays fresh (a mirror of a spec module added to reference/ would have made every result that
    measures reference/ stale).  Negative controls, each stale: a measured file that imports it (``from . import``
    too), one that names it in a string (``importlib`` could import it), a new file that is not Python."""
    repo = _repo(tmp_path)
    (repo / "engine" / "__init__.py").write_text("")
    (repo / "engine" / "dyn.py").write_text('import importlib\n\n\ndef load():\n    return 1\n')
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "package")
    _measure(repo)
    (repo / "engine" / "new.py").write_text("Z = 1\n")
    assert _states(repo) == {"speed.json": "fresh"}
    assert pv.status(repo).findings[0].changed == ()
    join = repo / "engine" / "join.py"
    for importer in ("from engine.new import Z\nX = 1\n", "from . import new\nX = 1\n", "import engine.new\nX = 1\n",
                     "from .new import Z\nX = 1\n"):
        join.write_text(importer)
        assert _states(repo) == {"speed.json": "stale"}, importer
        assert set(pv.status(repo).findings[0].changed) == {"engine/join.py", "engine/new.py"}, importer
    _git(repo, "checkout", "-q", "--", "engine/join.py")
    assert _states(repo) == {"speed.json": "fresh"}
    (repo / "engine" / "dyn.py").write_text('import importlib\n\n\ndef load():\n    return importlib.import_module('
                                            '"engine.new")\n')
    assert _states(repo) == {"speed.json": "stale"}
    _git(repo, "checkout", "-q", "--", "engine/dyn.py")
    (repo / "engine" / "data.csv").write_text("a,b\n")
    assert _states(repo) == {"speed.json": "stale"}


def test_unknown_missing_unregistered_and_bad(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    assert _states(repo) == {"speed.json": "missing"}
    (repo / "bench" / "results" / "speed.json").write_text(json.dumps(
        {"rows": [{"name": "a", "size": 2, "s": 1.0}, {"name": "b", "size": 2, "s": 1.0},
                  {"name": "a", "size": 3, "s": 9.0}]}))
    assert _states(repo) == {"speed.json": "unknown"}  # no commit recorded
    d = json.loads((repo / "bench" / "results" / "speed.json").read_text())
    d["provenance"] = {"commit": "0" * 40}
    (repo / "bench" / "results" / "speed.json").write_text(json.dumps(d))
    assert _states(repo) == {"speed.json": "unknown"}  # a commit git does not know
    _measure(repo)
    (repo / "bench" / "results" / "stray.json").write_text("{}")
    assert _states(repo) == {"speed.json": "fresh", "stray.json": "unregistered"}
    (repo / "bench" / "results" / "stray.json").unlink()
    d = json.loads((repo / "bench" / "results" / "speed.json").read_text())
    d["rows"] = d["rows"][1:]  # the headline's row is gone
    (repo / "bench" / "results" / "speed.json").write_text(json.dumps(d))
    assert _states(repo) == {"speed.json": "bad"}


def test_measured_with_uncommitted_measured_code_is_stale(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "engine" / "join.py").write_text("X = 3\n")  # measured before this was committed
    _measure(repo)  # commits the result and the change together
    d = json.loads((repo / "bench" / "results" / "speed.json").read_text())
    assert d["provenance"]["dirty"] == ["engine/join.py"]
    assert _states(repo) == {"speed.json": "stale"}


def test_tables_are_generated_from_the_raw_file(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _measure(repo, s=2.5)
    assert pv.stale_tables(repo) == [Path("README.md")]
    pv.write_tables(repo)
    assert pv.stale_tables(repo) == []
    rst = (repo / "docs" / "_generated" / "results" / "speed.rst").read_text()
    measured = json.loads((repo / "bench" / "results" / "speed.json").read_text())["provenance"]["commit"]
    assert "2.5 s" in rst and "2.50x" in rst and f"commit {measured[:7]}" in rst
    readme = (repo / "README.md").read_text()
    assert "| speed | 2.5 s |" in readme and "| ratio | 2.50x |" in readme
    assert "docs only" not in readme and "docs only" in rst
    _measure(repo, s=3.0)  # a new measurement: the README's table no longer matches until written again
    assert pv.stale_tables(repo) == [Path("README.md")]
    assert pv.write_docs_tables(repo) == [Path("docs/_generated/results/speed.rst")]
    assert "3.0 s" in (repo / "docs" / "_generated" / "results" / "speed.rst").read_text()


def test_a_result_marked_stale_says_so_everywhere(tmp_path: Path) -> None:
    """``stale = "why"``: a stale result the manifest explains passes status, and every table that quotes it
    says it is stale and why; the mark on a fresh result is an error (negative control), and an unmarked
    stale result still fails."""
    repo = _repo(tmp_path)
    manifest = repo / "bench" / "results" / "manifest.toml"
    manifest.write_text(MANIFEST.replace('readme = true\n', 'readme = true\nstale = "no time to re-run"\n', 1))
    _git(repo, "commit", "-qam", "mark")
    _measure(repo)
    assert _states(repo) == {"speed.json": "bad"}  # marked, but fresh
    (repo / "engine" / "join.py").write_text("X = 5\n")
    _git(repo, "commit", "-qam", "engine")
    report = pv.status(repo)
    assert _states(repo) == {"speed.json": "marked stale"} and report.ok
    assert "no time to re-run" in report.lines()[0] and "marked stale" in report.lines()[-1]
    pv.write_tables(repo)
    rst = (repo / "docs" / "_generated" / "results" / "speed.rst").read_text()
    assert "**stale**" in rst and "no time to re-run" in rst
    assert "(stale: its code changed since)" in (repo / "README.md").read_text()
    manifest.write_text(MANIFEST)  # the mark removed: the same result fails again
    _git(repo, "commit", "-qam", "unmark")
    assert _states(repo) == {"speed.json": "stale"} and not pv.status(repo).ok


@pytest.mark.parametrize(("path", "want"), [
    ("rows[name=a,size=3].s", 9.0), ("rows[1].name", "b"), ("rows[name=a].s", None),  # two rows match: refused
    ("rows[9].s", None), ("nope", None), ("rows[name=b,size=2].s / rows[name=a,size=3].s", 1 / 9),
    ("rows[name=join [jsonl]].s", 4.0), ("rows[name=join [jsonl].s", None)])  # brackets inside a value
def test_resolve(path: str, want: object) -> None:
    d = {"rows": [{"name": "a", "size": 2, "s": 2.0}, {"name": "b", "size": 2, "s": 1.0},
                  {"name": "a", "size": 3, "s": 9.0}, {"name": "join [jsonl]", "s": 4.0}]}
    assert pv._resolve(d, path) == want


# ------------------------------------------------------------------------------------- this repository

def test_this_repository_has_no_stale_result() -> None:
    """CI fails while a result a page or the README quotes is older than a change to its code."""
    report = pv.status(ROOT)
    assert report.ok, "\n".join(report.lines())


def test_this_repository_generated_tables_in_step() -> None:
    assert pv.stale_tables(ROOT) == [], "run `oij bench tables`"


def test_readme_is_short_and_quotes_numbers_only_through_its_table() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 120
    i, j = text.index(pv.README_BEGIN), text.index(pv.README_END)
    outside = text[:i] + text[j:]
    outside = re.sub(r"```.*?```", "", outside, flags=re.S)  # commands may carry numbers (--events 100000)
    outside = re.sub(r"`[^`]*`", "", outside)
    measured = re.findall(r"\d[\d,.]*\s*(?:s\b|ms\b|MiB|GiB|x\b|%|events/s|tuples/s)", outside)
    assert measured == [], f"numbers outside the generated table: {measured}"


def test_a_result_with_cases_shows_each_minimal_case_in_its_include(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    manifest = repo / "bench" / "results" / "manifest.toml"
    manifest.write_text(MANIFEST + '''
[[result]]
file = "faults.json"
code = ["engine/"]
command = "bench faults"
cases = true
[[result.headline]]
label = "verdict"
path = 'runs[label=x sink=append].verdict'
format = "{}"
''')
    result = {"provenance": pv.capture("bench faults", repo), "runs": [
        {"label": "x", "verdict": "exactly-once"},
        {"label": "x sink=append", "verdict": "at-least-once", "events": 2, "kill_plan": [["row", 1]],
         "command": "oij conform --restarts 1", "minimal_case": '{"type":"query"}\n{"type":"end"}\n',
         "timeline": ["  incarnation 0: killed"], "duplicated_rows": ["pair base=2 probe=1"]}]}
    (repo / "bench" / "results" / "faults.json").write_text(json.dumps(result))
    [entry] = [e for e in pv.load_manifest(repo) if e.file == "faults.json"]
    text = pv.render_rst(repo, entry)
    assert "| at-least-once" in text.replace("     - ", "| ")  # the headline (selector with '=' in the value)
    assert "``x sink=append``: **at-least-once**, minimal case of 2 events, kill plan: row 1" in text
    assert '   {"type":"query"}' in text and "duplicated: pair base=2 probe=1" in text
    assert text.count(".. code-block::") == 1  # the run that passed has no case
    plain = pv.render_rst(repo, dataclasses.replace(entry, cases=False))  # the negative control
    assert ".. code-block::" not in plain and "at-least-once" in plain


def test_capture_names_the_checkout_oij_runs_from_whatever_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A benchmark started outside the checkout (oij bench recovery from a scratch directory) still records the
    commit it measured."""
    monkeypatch.chdir(tmp_path)  # not a git repository
    head = _git(ROOT, "rev-parse", "HEAD")
    assert pv.capture("bench x")["commit"] == head
    assert pv.capture("bench x", tmp_path)["commit"] is None  # the negative control: an explicit repo is used
