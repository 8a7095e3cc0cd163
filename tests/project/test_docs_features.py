"""The docs' feature table is generated: ``docs/conformance.rst`` lists the conformance kit's features through the
``oij-features`` directive (``docs/_ext/oijlists.py``), which reads :data:`oij.testing.FEATURES`; no page types
the list by hand, so a feature added, renamed or made opt-in in the code shows in the docs at the next build."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

from oij.testing._features import FEATURES, OPT_IN
from tests.loadfile import load_file

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _oijlists() -> ModuleType:
    return load_file("oijlists", DOCS / "_ext" / "oijlists.py")


def hand_typed_feature_rows(text: str) -> list[str]:
    """The feature names ``text`` lists at the start of a line as ````name```` followed by a column gap: a table
    of features typed by hand (three or more such rows)."""
    rows = [m.group(1) for m in re.finditer(r"^``([a-z-]+)``\s{2,}\S", text, re.M) if m.group(1) in FEATURES]
    return rows if len(rows) >= 3 else []


def test_the_docs_list_the_features_only_through_the_directive() -> None:
    conformance = (DOCS / "conformance.rst").read_text()
    assert re.search(r"^\.\. oij-features::\n   :table:$", conformance, re.M)
    typed = {page.name: rows for page in sorted(DOCS.glob("*.rst"))
             if (rows := hand_typed_feature_rows(page.read_text()))}
    assert typed == {}


def test_the_generated_rows_are_the_code_s() -> None:
    """The rows are FEATURES' own, and each opt-in feature's description says it is opt-in (``all`` leaves it
    out), since the table shows no other column."""
    rows = _oijlists().feature_rows()
    assert rows == list(FEATURES.items())
    assert [name for name, what in rows if "opt-in" in what] == sorted(OPT_IN)


def test_a_hand_typed_table_is_found() -> None:
    """Negative control: the table ``docs/conformance.rst`` held before it was generated is flagged."""
    old = ("==================== =====\n``left``             left joins\n``aggregates``       per-base "
           "aggregates\n``channels``         more than one channel\n==================== =====\n")
    assert hand_typed_feature_rows(old) == ["left", "aggregates", "channels"]
