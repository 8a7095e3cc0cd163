"""Issue 65: situations in proportion.  The generated cases of every default run (the kit's own features and every
adapter's, under the adapter's profile: the cases ``oij conform --adapter NAME --profile P`` sends) hold each
situation the features allow (several channels, a left join, an aggregate, a late tuple) in at least
``SHARE_FLOOR`` of the cases, and the run's report prints the shares.

The runs here judge the oracle's own answers (a callable), so only the generator is measured: the cases a default
run generates do not depend on the implementation while it answers right.
"""

from __future__ import annotations

import functools
import io
from collections import Counter
from collections.abc import Sequence

import pytest
from oij.spec.batch import Results
from oij.spec.model import Event, Query

from oij.testing._case import Case
from oij.testing._cases import SHARE_FLOOR, shares
from oij.testing._features import DEFAULT_FEATURES
from oij.testing._protocol import expected_output
from oij.testing._runner import SearchResult, search

pytestmark = pytest.mark.timeout(900)


def feature_sets() -> dict[tuple[frozenset[str], str], str]:
    """Each distinct (features, profile) of a default run: the kit's, then every adapter's."""
    from oij.adapters import ADAPTERS

    out = {(DEFAULT_FEATURES, "canonical"): "default"}
    for name, a in ADAPTERS.items():
        out.setdefault((frozenset(a.features), a.profile), name)
    return out


@functools.lru_cache(maxsize=1)
def generated(features: frozenset[str], profile: str) -> SearchResult:
    """A default run's search (no vectors) with the oracle as the implementation; the last one kept (the floor's
    test ends with the kit's own run, which the report's test prints: one search for both)."""
    from oij.spec.profiles import get_profile

    p = get_profile(profile)

    def oracle(q: Query, events: Sequence[Event]) -> Results:
        return expected_output(Case(q, tuple(events)), p)

    return search(oracle, features=features, profile=p, vectors=False)


def test_no_situation_the_features_allow_falls_below_the_floor() -> None:
    low = []
    for (feats, profile), name in reversed(feature_sets().items()):
        res = generated(feats, profile)
        assert res.failure is None and res.generated == 200
        low += [(name, s, n) for s, n, _, below in shares(res.tags, res.generated, feats) if below]
    assert low == [], f"below {SHARE_FLOOR:.0%} of a default run's generated cases: {low}"


def test_the_floor_check_can_fail() -> None:
    # the negative control: the shares of the generator before issue 65 (6 of 200 cases with several channels)
    tags = Counter({"several channels": 6, "left join": 68, "aggregate sum": 27, "aggregate avg": 13,
                    "aggregate over an empty window": 28, "late tuple": 116})
    got = {name: (n, below) for name, n, _, below in shares(tags, 200, DEFAULT_FEATURES)}
    assert got == {"several channels": (6, True), "left join": (68, False), "aggregate": (40, False),
                   "late tuple": (116, False)}
    # a situation the features do not allow is not held to the floor
    assert [s[0] for s in shares(tags, 200, frozenset({"lateness", "left"}))] == ["left join"]


def test_the_report_prints_the_shares() -> None:
    from oij.spec.profiles import CANONICAL

    from oij.testing._conform import print_pass

    res = generated(DEFAULT_FEATURES, "canonical")
    out = io.StringIO()
    print_pass(res, CANONICAL, DEFAULT_FEATURES, lambda *a: print(*a, file=out))
    text = out.getvalue()
    assert "shares of the generated cases (each situation the features allow, floor 10%):" in text, text
    for name in ("several channels", "left join", "aggregate", "late tuple"):
        assert f"  {name}\n" in text, text
    assert "below the floor" not in text, text
