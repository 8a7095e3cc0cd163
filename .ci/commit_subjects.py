"""Commit subjects of at most 72 characters, details in the body (CONTRIBUTING.md; issue 66).

``python .ci/commit_subjects.py`` lists every commit after :data:`BASELINE` (the history before it is kept as
it was: 44 of its 467 subjects were that short) up to ``HEAD`` whose subject is longer than :data:`LIMIT`, and
exits 1 if there is one, 0 otherwise, 2 when the baseline is not in the history (a shallow clone: fetch more).
``--base REV`` and ``--head REV`` check another range.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

BASELINE = "a5b2cddf7ee5f1ea4484ec7c8e3bf37dede18306"
"""The newest commit whose subject is exempt (issue 66): the rule was written during the session of this commit,
and two of that session's subjects before it (eafb163, this one) ran to 73 and 75 characters; every commit after it
keeps the rule."""

LIMIT = 72
"""The longest subject, in characters (``git log --oneline`` and most tools show this much)."""

ROOT = Path(__file__).resolve().parents[1]


def too_long(commits: Iterable[tuple[str, str]], limit: int = LIMIT) -> list[tuple[str, str]]:
    """The (commit, subject) pairs of ``commits`` whose subject is longer than ``limit`` characters."""
    return [(c, s) for c, s in commits if len(s) > limit]


def subjects(base: str, head: str = "HEAD", repo: Path = ROOT) -> list[tuple[str, str]]:
    """(commit, subject) of every commit in ``base..head``, newest first.  Raises ValueError when ``base`` is not
    a commit of the repository."""
    known = subprocess.run(["git", "cat-file", "-e", f"{base}^{{commit}}"], cwd=repo, capture_output=True)
    if known.returncode != 0:
        raise ValueError(f"the baseline {base} is not in this repository's history (a shallow clone?)")
    out = subprocess.run(["git", "log", "--format=%H%x00%s", f"{base}..{head}"], cwd=repo, capture_output=True,
                         text=True, check=True).stdout
    return [(c, s) for c, _, s in (line.partition("\0") for line in out.splitlines())]


def main(argv: list[str] | None = None, repo: Path = ROOT) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--base", default=BASELINE, help="check the commits after this one (default: the baseline)")
    ap.add_argument("--head", default="HEAD", help="up to this commit (default: HEAD)")
    args = ap.parse_args(argv)
    try:
        commits = subjects(args.base, args.head, repo)
    except ValueError as e:
        print(f"commit subjects: {e}", file=sys.stderr)
        return 2
    bad = too_long(commits)
    for c, s in bad:
        print(f"{c[:10]}: subject of {len(s)} characters (at most {LIMIT}; details go in the body): {s[:LIMIT]}...")
    if bad:
        print(f"commit subjects: {len(bad)} of {len(commits)} commits after {args.base[:10]} are too long",
              file=sys.stderr)
        return 1
    print(f"commit subjects: all {len(commits)} commits after {args.base[:10]} are at most {LIMIT} characters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
