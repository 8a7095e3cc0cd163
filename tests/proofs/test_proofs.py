"""Every claim in proofs/manifest.toml gets its expected verdict from z3 (including the ones that must fail)."""

from __future__ import annotations

import pytest
from oij.proofs import smt

CLAIMS = smt.manifest()


def test_manifest_has_claims_that_must_fail() -> None:
    verdicts = {c["verdict"] for c in CLAIMS}
    assert verdicts == {"valid", "invalid"}
    assert all(hasattr(smt, c["name"]) for c in CLAIMS)


@pytest.mark.parametrize("claim", CLAIMS, ids=[c["name"] for c in CLAIMS])
def test_claim_verdict(claim: dict[str, str]) -> None:
    verdict, model = smt.check(claim["name"])
    assert verdict == claim["verdict"], model
    if verdict == "invalid":
        assert model  # a counterexample is shown
