"""Every public command runs after a bare install, as a user installs oij: ``pip install .``, no extras.

CI installs ``.[dev,flink]``, which hides a runtime import that only an extra provides (the conformance kit
once needed Hypothesis from ``dev``: ``oij conform``, ``vectors``, ``explain`` and ``adapter`` died with
ModuleNotFoundError).  So this module builds a fresh virtual environment (no system site packages), installs
the project into it non-editable (a copy of the tree, so a missing package data file shows up too and no
``build/`` lands in the work tree), and runs the happy path of every command once with that environment's
``oij``, from a directory outside the tree.  The Flink adapter is the ``[flink]`` extra: without it, it must
say so in one line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "tests" / "impls" / "toy_oij.py"

# building the environment (about half a minute from pip's cache) is charged to the first test
pytestmark = pytest.mark.timeout(900)

# left out of the copy: version control, environments, caches and build output
IGNORED = shutil.ignore_patterns(".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis",
                                 ".mypy_cache", ".ruff_cache", ".pytest_cache", ".import_linter_cache", "_build",
                                 "spark-warehouse", "metastore_db", "prove-out", "oij-check")


@dataclass(frozen=True)
class Bare:
    venv: Path  # the fresh environment
    work: Path  # the working directory of every command (outside the tree)
    env: dict[str, str]  # the environment of an activated venv, nothing of the dev venv's
    install_seconds: float

    @property
    def oij(self) -> str:
        return str(self.venv / "bin" / "oij")

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def run(self, *args: str, ok: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run ``oij ARGS`` from the bare environment; with ``ok``, exit code 0 is asserted."""
        p = subprocess.run([self.oij, *args], cwd=self.work, env=self.env, capture_output=True,
                           text=True, timeout=timeout, check=False)
        if ok:
            assert p.returncode == 0, (f"oij {' '.join(args)}: exit {p.returncode}\n"
                                      f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        return p


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bare]:
    tmp = tmp_path_factory.mktemp("bare-install")
    src, venv, work = tmp / "src", tmp / "venv", tmp / "work"
    shutil.copytree(ROOT, src, ignore=IGNORED)
    work.mkdir()
    # (and not the test suite's Spark options, tests/conftest.py: `oij check` here runs on Spark's defaults)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYSPARK_SUBMIT_ARGS")}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, env=env)
    # --no-compile: the same install, without byte-compiling about 1 GB of dependencies up front (Python compiles
    # what a command imports when it imports it)
    p = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", str(src)],
                       env=env, cwd=work, capture_output=True, text=True, timeout=780, check=False)
    assert p.returncode == 0, f"pip install . failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    yield Bare(venv, work, env, time.monotonic() - t0)
    shutil.rmtree(venv, ignore_errors=True)  # ~1 GB (pyspark); the outputs in work/ stay for a look after a failure
    shutil.rmtree(src, ignore_errors=True)


@pytest.fixture(scope="module")
def events(bare: Bare) -> Path:
    """A small teaching workload, written by the bare ``oij generate``."""
    out = bare.work / "tiny.jsonl"
    p = bare.run("generate", "teach-tiny", "--events", "200", "--no-progress", "-o", str(out))
    assert "wrote 200 tuples" in p.stdout + p.stderr
    return out


def test_the_environment_is_bare_and_oij_comes_from_it(bare: Bare) -> None:
    print(f"venv + pip install .: {bare.install_seconds:.1f} s")
    code = ("import importlib.util as u, oij, sys; print(oij.__file__); print(sys.prefix != sys.base_prefix); "
            "print(u.find_spec('pytest') is None, u.find_spec('pyflink') is None)")
    p = subprocess.run([bare.python, "-c", code], cwd=bare.work, env=bare.env, capture_output=True, text=True,
                       timeout=60, check=True)
    where, in_venv, no_extras = p.stdout.splitlines()
    assert Path(where).is_relative_to(bare.venv) and in_venv == "True", p.stdout  # the installed copy, not the tree
    assert no_extras == "True True", "a dev or flink extra leaked into the bare environment"
    assert bare.run("--version").stdout.strip()


def installed_layout(files: list[str]) -> tuple[set[str], set[str]]:
    """From a distribution's RECORD paths (relative to site-packages): the top-level import names it adds
    (its ``.dist-info`` folder, console scripts outside site-packages and byte-code aside) and its files under
    them."""
    inside = [f for f in files if not f.startswith("..") and "__pycache__" not in f]
    top = {f.split("/", 1)[0].removesuffix(".py") for f in inside if not f.split("/", 1)[0].endswith(".dist-info")}
    return top, {f for f in inside if not f.split("/", 1)[0].endswith(".dist-info")}


def test_installed_layout_reads_a_record() -> None:
    """Negative control of the check below: a RECORD that also installs ``spec/`` is told apart."""
    files = ["oij/__init__.py", "oij/spec/match.py", "oij-0.1.0.dist-info/RECORD", "../../bin/oij",
             "oij/__pycache__/cli.cpython-311.pyc"]
    assert installed_layout(files) == ({"oij"}, {"oij/__init__.py", "oij/spec/match.py"})
    assert installed_layout([*files, "spec/__init__.py", "proofs.py"])[0] == {"oij", "spec", "proofs"}


def test_oij_is_the_only_top_level_package(bare: Bare) -> None:
    """``pip install .`` adds one import name, ``oij`` (spec/, reference/, parallel/ and proofs/ inside it, as
    pyproject.toml maps them), with every package of the tree and its package data."""
    code = "import importlib.metadata as m; print('\\n'.join(str(f) for f in m.distribution('oij').files or []))"
    p = subprocess.run([bare.python, "-c", code], cwd=bare.work, env=bare.env, capture_output=True, text=True,
                       timeout=60, check=True)
    top, files = installed_layout(p.stdout.splitlines())
    assert top == {"oij"}
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    want = set()
    for package, folder in package_dir.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                want.add("/".join([*package.split("."), *init.relative_to(ROOT / folder).parts]))
    assert want - files == set(), "a package of the tree is not installed (pyproject.toml's packages list)"
    data = {"oij/py.typed", "oij/spec/py.typed", "oij/proofs/manifest.toml", "oij/schemas/query.schema.json",
            "oij/flink/java/OijIntervalJoin.java"}
    assert data - files == set()


def test_generate(bare: Bare, events: Path) -> None:
    lines = events.read_text().splitlines()
    assert lines[0].startswith('{"type":"query"') and sum('"type":"tuple"' in x for x in lines) == 200
    assert "teach-tiny" in bare.run("generate", "--list").stdout


def test_join(bare: Bare, events: Path) -> None:
    out = bare.run("join", "--no-progress", str(events)).stdout
    assert '{"type":"pair"' in out


def test_describe(bare: Bare, events: Path) -> None:
    out = bare.run("describe", "--no-progress", str(events)).stdout
    assert "events: 201" in out and "keys:" in out


def test_run_agrees_with_join(bare: Bare, events: Path) -> None:
    metrics = bare.run("run", str(events), "--pattern", "kp", "--replicas", "2", "-o", "kp.out").stderr
    assert "kp (replicas 2" in metrics, metrics
    assert (bare.work / "kp.out").read_text() == bare.run("join", "--no-progress", str(events)).stdout


def test_check_without_spark(bare: Bare) -> None:
    out = bare.run("check", "--no-spark", "--events", "1000", "--no-progress", "--out", "check",
                   timeout=300).stdout
    assert "report:" in out and (bare.work / "check" / "report.json").exists()


def test_check_judges_another_systems_output(bare: Bare, events: Path) -> None:
    bare.run("join", "--no-progress", str(events), "-o", "theirs.jsonl")
    out = bare.run("check", str(events), "--no-spark", "--no-progress", "--out", "check-got", "--got",
                   "theirs=theirs.jsonl", timeout=300).stdout
    assert re.search(r"^theirs\s+yes\s", out, re.M), out


@pytest.mark.spark
def test_check_on_spark_judges_a_parquet_input(bare: Bare) -> None:
    """The Spark oracle's own scans (pyspark's mapInArrow) with nothing but the install line: pyspark refuses
    mapInArrow without pandas, which only the dev extras had installed until pandas became a dependency."""
    bare.run("generate", "teach-tiny", "--events", "2000", "--no-progress", "-o", "w.parquet")
    bare.run("join", "--no-progress", "w.parquet", "-o", "mine.jsonl")
    out = bare.run("check", "w.parquet", "--seq-limit", "0", "--got", "mine=mine.jsonl", "--no-progress",
                   "--out", "check-spark", timeout=600).stdout
    assert re.search(r"^mine\s+yes\s", out, re.M), out


def test_conform(bare: Bare) -> None:
    # --no-vectors: test_vectors_export_and_verify runs the vectors in the bare environment
    out = bare.run("conform", "--max-examples", "20", "-j", "2", "--no-vectors", "--replay-out", "fail.jsonl", "--",
                   bare.python, str(TOY), timeout=300).stdout
    assert out.startswith("conforms: ") and "no difference" in out, out
    assert not (bare.work / "fail.jsonl").exists()


def test_conform_restarts(bare: Bare) -> None:
    """The README's restart mode, on the oracle's own restartable drive (no engine: a JVM per incarnation would
    take minutes here), on one case: its kill plans start ``oij join - --state`` about 20 times
    (tests/testing/test_restarts.py runs four cases of it in the dev environment)."""
    out = bare.run("conform", "--restarts", "2", "--max-examples", "1", "--", str(bare.oij), "join", "-",
                   "--state", timeout=300).stdout
    assert out.startswith("exactly once: 1 cases"), out


def test_vectors_export_and_verify(bare: Bare) -> None:
    assert "wrote" in bare.run("vectors", "export", "vectors").stdout
    # verify the first case of every feature only: one `oij join -` per case (~0.4 s each, 234 cases in all)
    manifest = bare.work / "vectors" / "manifest.jsonl"
    first: dict[tuple[str, str], str] = {}
    for line in manifest.read_text().splitlines():
        row = json.loads(line)
        first.setdefault((row["feature"], row["profile"]), line)
    assert len({feature for feature, _ in first}) >= 10
    manifest.write_text("".join(line + "\n" for line in first.values()))
    out = bare.run("vectors", "verify", "vectors", "--", bare.oij, "join", "-", timeout=300).stdout
    assert re.search(r"^[1-9]\d* passed, 0 failed$", out, re.M), out


def test_explain_draws_svg(bare: Bare, events: Path) -> None:
    out = bare.run("explain", "--svg", "tiny.svg", str(events)).stdout
    assert "W" in out
    assert (bare.work / "tiny.svg").read_text().startswith("<svg")


def test_prove_quick(bare: Bare) -> None:
    """``oij prove --quick`` on a model of each kind (a pattern's, safe; Scale-OIJ's, unsafe: its counterexample
    written as text, PNG and SVG) and two z3 claims (valid, invalid): every module and dependency it runs.  All
    35 verdicts at the quick bounds are tests/proofs/'s, in the dev environment (10 CPU-seconds here)."""
    names = ("kp-standard", "scale-move", "final_means_no_future_match", "late_rules_always_agree")
    out = bare.run("prove", "--quick", *names, "--out", "prove", timeout=300).stdout
    assert "4 of 4 verdicts as the manifest says" in out, out
    assert {p.name for p in (bare.work / "prove").iterdir()} >= {f"scale-move--missing.{x}" for x in ("txt", "png",
                                                                                                     "svg")}, out


def test_bench_list(bare: Bare) -> None:
    out = bare.run("bench", "list").stdout
    assert "peers" in out and "ppoij-keys" in out


def test_spark_adapter_features(bare: Bare) -> None:
    out = bare.run("adapter", "spark-ss", "--features").stdout.strip()
    assert out and "," in out and " " not in out, out


def test_flink_adapter_says_it_needs_the_extra(bare: Bare, events: Path) -> None:
    p = bare.run("adapter", "flink-sql", str(events), ok=False)
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "oij[flink]" in p.stderr, p.stderr


@pytest.mark.parametrize(("adapter", "extra"), [("flink-ds", "oij[flink]"), ("pathway", "oij[pathway]")])
def test_restart_drives_say_they_need_the_extra(bare: Bare, adapter: str, extra: str) -> None:
    state = bare.work / f"state-{adapter}"
    state.mkdir()
    p = subprocess.run([bare.oij, "adapter", adapter, "--restart-protocol"], cwd=bare.work, capture_output=True,
                       text=True, timeout=120, check=False, input='{"type":"query","lower":0,"upper":1}\n',
                       env={**bare.env, "OIJ_STATE_DIR": str(state)})
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and extra in p.stderr, p.stderr
    assert list(state.iterdir()) == []  # said before anything was written
