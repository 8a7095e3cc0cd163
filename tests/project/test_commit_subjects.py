"""The CI check of commit subjects (``.ci/commit_subjects.py``): at most 72 characters after the baseline."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import cast

from tests.loadfile import load_file

ROOT = Path(__file__).resolve().parents[2]


CHECK = load_file("commit_subjects", ROOT / ".ci" / "commit_subjects.py")
too_long = cast(Callable[[list[tuple[str, str]]], list[tuple[str, str]]], CHECK.too_long)
main = cast(Callable[..., int], CHECK.main)


def test_a_subject_of_72_characters_passes_and_73_fails() -> None:
    ok = ("a", "x" * 72)
    long = ("b", "y" * 73)
    assert too_long([ok]) == []
    assert too_long([ok, long, ("c", "short")]) == [long]  # the negative control: one character over


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_the_check_reads_the_commits_after_the_baseline(tmp_path: Path) -> None:
    """In a repository of its own: a long subject before the baseline is history and passes; after it, one short
    subject passes and a long one fails (exit 1, naming it); an unknown baseline is exit 2."""
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "z" * 200)
    base = _git(tmp_path, "rev-parse", "HEAD")
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "A short subject\n\nThe details, in the body: " + "d" * 200)
    assert main(["--base", base], repo=tmp_path) == 0
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "w" * 73)
    assert main(["--base", base], repo=tmp_path) == 1
    assert main(["--base", "0" * 40], repo=tmp_path) == 2

