"""The fast loop (``-m "not slow"``, tests/README.md): its list of slow tests names tests that exist, and the real
engines are always left out of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from tests.conftest import SLOW, is_slow

ROOT = Path(__file__).resolve().parents[2]


def missing(entries: dict[str, str], root: Path = ROOT) -> list[str]:
    """The entries of a SLOW list that name no file, folder or test of ``root`` (a renamed test would otherwise
    come back into the fast loop unnoticed, or stay out of it under a name nobody reads)."""
    return [entry for entry in entries if not _exists(root, *entry.partition("::")[::2])]


def _exists(root: Path, path: str, name: str) -> bool:
    """The file or folder ``path`` exists and, if ``name`` is given, defines a test function or class so named."""
    target = root / path
    if not target.exists():
        return False
    return not name or any(f"{kw} {name.split('::')[0]}" in target.read_text() for kw in ("def", "class"))


@dataclass
class _Item:
    """What :func:`is_slow` reads of a pytest item."""

    path: Path
    name: str
    marks: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> Any:
        return name if name in self.marks else None


def _slow(item: _Item) -> bool:
    return is_slow(cast(pytest.Item, item), str(ROOT))


def test_every_slow_entry_names_a_test_that_exists() -> None:
    assert missing(SLOW) == []
    assert all(reason.strip() for reason in SLOW.values())


def test_a_made_up_entry_is_found() -> None:
    """Negative control: a test that does not exist, in a file that does, and a file that does not."""
    made_up = {"tests/reference/test_oracle.py::test_made_up_name": "x", "tests/nowhere/test_x.py": "x"}
    assert missing(made_up) == list(made_up)


def test_the_real_engines_and_the_listed_tests_are_slow_and_others_are_not() -> None:
    oracle = ROOT / "tests" / "reference" / "test_oracle.py"
    assert _slow(_Item(ROOT / "tests" / "spark" / "test_spark.py", "test_x"))
    assert _slow(_Item(ROOT / "tests" / "testing" / "test_check_got.py", "test_x", {"spark"}))  # by its mark
    assert _slow(_Item(oracle, "test_negative_control_is_caught[FloatSubtractOnEvict]"))
    # the negative control: an ordinary test of the same file, and one of another folder, stay in the loop
    assert not _slow(_Item(oracle, "test_results_are_canonical"))
    assert not _slow(_Item(ROOT / "tests" / "workloads" / "test_workloads.py", "test_x"))
