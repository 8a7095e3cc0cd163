"""``oij vectors verify DIR -- CMD``'s judging: every vector of a directory run through an implementation and
compared with its expected output (:func:`verify_vectors`)."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from oij.errors import UsageError
from oij.io.errors import InputError
from oij.spec.profiles import PROFILES

if TYPE_CHECKING:
    from oij.testing._runner import Outcome


@dataclass
class VectorReport:
    """The verdict: cases passed and failed, and the text ``oij vectors verify`` prints (the failing cases shown,
    the table by feature, the skipped ones)."""

    passed: int
    failed: int
    text: str


def verify_vectors(directory: str, run: Callable[[str], Outcome], *, profile: str = "canonical", show: int = 3,
                   jobs: int = 1, features: frozenset[str] | None = None) -> VectorReport:
    """What ``oij vectors verify`` does once it has its command: ``run`` each case of ``profile`` listed in
    ``directory``'s manifest (it gets the input file's text and returns the outcome, as
    ``oij.testing._runner.run_command`` does for CMD), judge it; the report holds the failing cases (the
    first ``show`` in full) and the table by feature.  ``jobs`` > 1: ``run`` is called from that many
    threads at once (the report is the same, in the manifest's order); 1: from the calling thread.
    ``features``: what the implementation claims (``oij conform --features``); a case needing more (its
    manifest row's ``features``, or for an older manifest the case's own) is skipped and counted, and without
    ``late-report`` late lines are not compared.  None: every case, everything compared."""
    from oij.testing._case import Case, case_features
    from oij.testing._protocol import compare, parse_output, restrict
    from oij.testing._timeline import render

    if profile not in PROFILES:
        raise UsageError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    manifest = os.path.join(directory, "manifest.jsonl")
    try:
        with open(manifest, "rb") as f:
            rows = [orjson.loads(line) for line in f if line.strip()]
    except OSError as e:
        raise InputError(manifest, 0, "file", e.strerror or str(e)) from None
    except orjson.JSONDecodeError as e:
        raise InputError(manifest, 0, "line", f"not valid JSON ({e})") from None
    if jobs < 1:
        raise UsageError("--jobs must be >= 1")
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    shown = 0
    lines: list[str] = []
    todo = []
    skipped: dict[str, int] = defaultdict(int)
    for row in rows:
        if row.get("profile") != profile:
            continue
        path_in = os.path.join(directory, row["case"] + ".in.jsonl")
        with open(path_in, encoding="utf-8") as f:
            text = f.read()  # sent as it is: some vectors leave optional fields out on purpose
        case = Case.from_jsonl(text, path_in)
        if features is not None:
            needs = frozenset(row["features"]) if "features" in row else case_features(case)
            if not needs <= features:
                for name in sorted(needs - features):
                    skipped[name] += 1
                skipped[""] += 1
                continue
        with open(os.path.join(directory, row["expected"]), encoding="utf-8") as f:
            expected = parse_output(f.read())
        if features is not None:
            expected = restrict(expected, features)
        todo.append((row, text, case, expected))
    if jobs == 1:
        outcomes = [run(t[1]) for t in todo]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=jobs) as pool:  # threads, each waiting on its command's process
            outcomes = list(pool.map(lambda t: run(t[1]), todo))
    for (row, _text, case, expected), outcome in zip(todo, outcomes, strict=True):
        ok = False
        problem = outcome.problem
        diff = None
        if outcome.got is not None:
            diff = compare(expected, outcome.got if features is None else restrict(outcome.got, features))
            ok = not diff
        table[row["feature"]][0 if ok else 1] += 1
        if not ok and shown < show:
            shown += 1
            lines.append(f"FAIL {row['case']}: {row['description']}")
            lines.append(render(case, expected, outcome.got, diff, problem=problem) + "\n")
    if not table:
        why = " the features claimed" if skipped else ""
        raise UsageError(f"{manifest}: no case for profile {profile!r}{why}")
    lines.append(f"{'feature':<14}{'passed':>8}{'failed':>8}")
    for feat, (p, f_) in table.items():
        lines.append(f"{feat:<14}{p:>8}{f_:>8}")
    passed = sum(v[0] for v in table.values())
    failed = sum(v[1] for v in table.values())
    lines.append(f"{passed} passed, {failed} failed")
    if skipped:
        listed = ", ".join(f"{k} ({n})" for k, n in sorted(skipped.items()) if k)
        lines.append(f"{skipped['']} skipped: they need features not claimed: {listed}")
    return VectorReport(passed, failed, "\n".join(lines))


__all__ = ["VectorReport", "verify_vectors"]
