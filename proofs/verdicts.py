"""What a model check finds: a verdict per design, and a shortest counterexample per kind of violation.

Shared by the checkers of :mod:`proofs.model` (emitter/collector protocols)
and :mod:`proofs.shared` (Scale-OIJ shared processing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

VERDICTS = ("safe", "unsafe: duplicate", "unsafe: missing", "unsafe: spurious", "unsafe: ordering", "deadlock")


@dataclass
class Counterexample:
    """A shortest path to a violation: its verdict, why, the steps as text and as diagram records."""

    verdict: str
    detail: str
    trace: list[str] = field(default_factory=list)
    steps: list[tuple[str, int, int, str, list[str]]] = field(default_factory=list)  # (kind, e, r, msg, pairs)


@dataclass
class Result:
    """The outcome of checking one design: ``safe`` or the violations found (comma-separated), with paths."""

    verdict: str
    states: int
    edges: int
    seconds: float
    counterexamples: list[Counterexample] = field(default_factory=list)
