"""The kit's seeded draws are the same cases in any process (``oij.testing._cases.same_draws_anywhere``).

Hypothesis now and then draws a constant from the source of the *local* modules a process has imported.  The
kit's searches and its choice of restart cases are drawn with that pool empty, so a seed gives the same cases
whatever is imported: in oij's editable install (oij's modules are local there, not in a wheel's install), after
other searches in the same process, beside a user's own modules.  The test draws the restart mode's choice
after importing a local module and beside a pool of local constants; the negative control draws without the
guard, where the pool changes the cases.  (The search's own draws, with Hypothesis's targeting, drew no local
constant in 200 cases here, guarded or not, so no test of them could fail; they are guarded the same way.)
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import oij.testing._cases as kit_cases
from oij.testing._case import Case
from oij.testing._cases import DEFAULT_FEATURES
from oij.testing._restarts import restart_cases

# numbers and strings of the kind the kit draws (timestamps, bounds, ids, keys), none of them in oij's own source
CONSTANTS = """
EDGES = (7919, -7919, 104729, -104729, 2**33 + 17, -(2**33) - 17, 65521, 3571, -3571, 1299709)
NAMES = ("zebra", "quokka", "k-7919", "ibis", "okapi")
"""


@contextlib.contextmanager
def local_module(tmp_path: Path) -> Iterator[None]:
    """A module of :data:`CONSTANTS` under ``tmp_path`` (local to Hypothesis: not under site-packages, the
    standard library or a test folder), imported for the block."""
    (tmp_path / "oij_local_constants.py").write_text(CONSTANTS)
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("oij_local_constants")
        yield
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("oij_local_constants", None)


def restart_choice() -> list[Case]:
    """The restart mode's choice from 100 generated cases, all of them chosen (the vectors and the generated
    cases: fewer than 400), so that a changed draw shows wherever it lands."""
    return restart_cases(DEFAULT_FEATURES, 400, pool=100)


def _pool() -> Any:
    """A pool of local constants as a process whose local modules held these would have it: integers the kit's
    wide draws admit (an encoding's seed in [0, 2^16), a scenario's in [0, 2^32)), floats, strings."""
    from hypothesis.internal.constants_ast import Constants

    return Constants(integers=set(range(100, 70_000, 97)), floats={0.375, -7.25, 6.75, 1e300},
                     strings={"zebra", "k-7919"})


def test_local_constants_do_not_change_the_restart_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same choice before and after a local module is imported, and beside a pool of local constants; the
    negative control draws beside that pool without the guard, and the cases change.  (The first choice of
    :func:`oij.testing._restarts.restart_cases` in a process of oij's editable install differed from its second
    before the guard: a module imported by the first made the pool of the second.)"""
    from hypothesis.internal.conjecture import providers

    before = restart_choice()
    with local_module(tmp_path):
        assert restart_choice() == before
    pool = _pool()
    monkeypatch.setattr(providers, "_get_local_constants", lambda: pool)
    providers.CONSTANTS_CACHE.cache.clear()
    assert restart_choice() == before
    monkeypatch.setattr(kit_cases, "same_draws_anywhere", contextlib.nullcontext)
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        assert restart_choice() != before
    finally:
        providers.CONSTANTS_CACHE.cache.clear()
