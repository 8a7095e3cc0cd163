"""Looking for gaps among an earlier run's survivors: more generated cases (``--deep``) or every small case
against the oracle's mutants (``--exhaustive``); a survivor they tell apart is a gap of the kit, not equivalent."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from oij.bench.kitpower.mutants import TARGETS, Mutant, mutant_source
from oij.bench.kitpower.runner import mutant_dir, record
from oij.io.atomic import write_text

_EXHAUSTIVE_CHILD = """
import os, pickle, sys
import oij
oij.__path__.insert(0, os.path.join(sys.argv[1], "oij"))  # oij.reference from the mutant's copy
import oij.reference
from oij.reference.oracle import run_events
assert oij.reference.__file__.startswith(sys.argv[1]), "the mutant's package was not imported"
with open(sys.argv[2], "rb") as f:
    corpus = pickle.load(f)
for n, (q, events, want) in enumerate(corpus):
    try:
        got = run_events(events, q).canonical()
    except Exception as e:
        print(f"{n}: crash: {type(e).__name__}: {e}")
        sys.exit(1)
    if got != want:
        print(f"{n}: the result differs")
        sys.exit(1)
print(f"{len(corpus)} cases: every result as the oracle's")
"""


def exhaustive_check(path: str, repo: Path, jobs: int, out_dir: Path) -> dict[str, Any]:
    """The oracle's survivors of an earlier result run on every small case of :func:`oij.testing._exhaustive.
    small_cases` (in a child process that imports the mutated ``reference`` and calls ``run_events``, no
    protocol, so 27,000 cases take seconds): a survivor whose results differ is a gap, its case saved to
    ``out_dir``.  Only the ``oracle`` target (the others are scripts of the protocol)."""
    import json
    import pickle

    from oij.reference.oracle import run_events
    from oij.testing._exhaustive import small_cases

    result: dict[str, Any] = json.loads(Path(path).read_text())
    todo = [m for m in result["mutants"] if m["target"] == "oracle" and m["verdict"] in ("survived", "equivalent")]
    out_dir.mkdir(parents=True, exist_ok=True)
    corpus = [(c.query, list(c.events), run_events(c.events, c.query).canonical()) for c in small_cases()]
    found: dict[str, Any] = {"cases": len(corpus), "survivors": len(todo), "told_apart": []}
    with tempfile.TemporaryDirectory(prefix="oij-kit-power-exhaustive-") as d:
        pick = Path(d) / "corpus.pickle"
        pick.write_bytes(pickle.dumps(corpus))
        t = TARGETS["oracle"]

        def one(d_: dict[str, Any]) -> tuple[dict[str, Any], str]:
            m = Mutant(d_["target"], d_["operator"], d_["occurrence"], d_["line_no"], d_["line"])
            code = mutant_source(m, (repo / t.path).read_text())
            with mutant_dir(t, repo, code) as (lib, _, _cmd):
                try:
                    r = subprocess.run([sys.executable, "-c", _EXHAUSTIVE_CHILD, str(lib), str(pick)],
                                       capture_output=True, text=True, check=False, cwd=d, timeout=600)
                except subprocess.TimeoutExpired:
                    return d_, "timeout"
            return d_, "" if r.returncode == 0 else (r.stdout.strip().splitlines() or [r.stderr.strip()])[-1]

        print(f"kit-power: {len(todo)} oracle survivors against {len(corpus)} small cases", flush=True)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for d_, why in pool.map(one, todo):
                if not why:
                    continue
                name = f"{d_['target']}:{d_['operator']}:{d_['occurrence']}"
                entry = {"mutant": name, "line_no": d_["line_no"], "line": d_["line"], "mutated": d_["mutated"],
                         "why": why}
                n = why.split(":", 1)[0]
                if n.isdigit():
                    q, events, _ = corpus[int(n)]
                    from oij.testing._case import Case

                    stem = name.replace("/", "_").replace(":", "_")
                    write_text(str(out_dir / f"{stem}.in.jsonl"), Case(q, tuple(events)).to_jsonl())
                    entry["case"] = str(out_dir / f"{stem}.in.jsonl")
                found["told_apart"].append(entry)
                print(f"  told apart: {name} line {d_['line_no']}: {d_['mutated']}  ({why})", flush=True)
    print(f"kit-power: {len(found['told_apart'])} of {len(todo)} oracle survivors told apart by "
          f"{len(corpus)} small cases")
    return found


def deep_check(path: str, repo: Path, cases: int, jobs: int, timeout: float, out_dir: Path) -> dict[str, Any]:
    """The survivors of an earlier result replayed against ``cases`` more generated cases (seed 1, no vectors):
    one those tell apart is not equivalent, but a gap of the kit; its first differing case and the unmutated
    answer are copied to ``out_dir`` (a vector to write).  Nothing is run through ``oij conform``."""
    import json

    result: dict[str, Any] = json.loads(Path(path).read_text())
    todo = [m for m in result["mutants"] if m["verdict"] == "survived" and m.get("kind") != "unreached"]
    out_dir.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {"cases": cases, "survivors": len(todo), "told_apart": []}
    with tempfile.TemporaryDirectory(prefix="oij-kit-power-deep-") as d:
        recs = {n: record(TARGETS[n], repo, Path(d), max(timeout, 3600.0),
                          ("--no-vectors", "--max-examples", str(cases), "--seed", "1"))
                for n in sorted({m["target"] for m in todo})}
        print(f"kit-power: {len(todo)} survivors against {cases} more cases", flush=True)

        def one(d_: dict[str, Any]) -> tuple[dict[str, Any], str]:
            m = Mutant(d_["target"], d_["operator"], d_["occurrence"], d_["line_no"], d_["line"])
            t = TARGETS[m.target]
            code = mutant_source(m, (repo / t.path).read_text())
            rec = recs[m.target]
            with mutant_dir(t, repo, code) as (_, _, cmd):
                try:
                    r = subprocess.run([sys.executable, "-m", "oij.bench.mutrun", "replay", str(rec.dir), "--",
                                        *cmd], capture_output=True, text=True, check=False,
                                       cwd=tempfile.gettempdir(), timeout=max(60.0, 5 * rec.seconds))
                    return d_, r.stdout.strip().splitlines()[-1] if r.returncode else ""
                except subprocess.TimeoutExpired:
                    return d_, "timeout"

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for d_, why in pool.map(one, todo):
                name = f"{d_['target']}:{d_['operator']}:{d_['occurrence']}"
                if not why:
                    continue
                entry = {"mutant": name, "line_no": d_["line_no"], "line": d_["line"], "mutated": d_["mutated"],
                         "why": why}
                case = why.split(":", 1)[0]
                src = recs[d_["target"]].dir / case
                if src.suffix == ".in" and src.exists():
                    stem = name.replace("/", "_").replace(":", "_")
                    shutil.copy(src, out_dir / f"{stem}.in.jsonl")
                    shutil.copy(src.with_suffix(".out"), out_dir / f"{stem}.expected.jsonl")
                    entry["case"] = str(out_dir / f"{stem}.in.jsonl")
                found["told_apart"].append(entry)
                print(f"  told apart: {name} line {d_['line_no']}: {d_['mutated']}  ({why})", flush=True)
    print(f"kit-power: {len(found['told_apart'])} of {len(todo)} survivors told apart by {cases} more cases")
    return found
