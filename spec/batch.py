r"""Batch semantics: the result of the join over two finite sets of tuples.

.. math::

   \mathit{pairs}(A, B) = \{\!\{ (a.id, b.id) \mid a \in A, b \in B, b \text{ matches } a \}\!\}

For a left join, also :math:`(a.id, \mathrm{null})` for every :math:`a \in A`
that matches no :math:`b \in B`.  With an aggregate, the result is instead one
row per base tuple, :math:`(a.id, \mathit{count}, \mathit{value})` as in
:mod:`oij.spec.aggregate` (a left join then changes nothing: every base tuple
already has its row).

Results are compared as multisets; :class:`~oij.spec.batch.Results` keeps each part sorted
(the *canonical order*) so that equal multisets compare equal as lists.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from oij.spec.aggregate import AggregateValue, compute_aggregate
from oij.spec.match import is_match
from oij.spec.model import BASE, PROBE, Query, StreamTuple

Pair = tuple[int, int | None]
"""(base id, probe id); probe id None marks an unmatched base tuple of a left join."""

AggregateRow = tuple[int, int, AggregateValue]
"""(base id, count, value)."""


def pair_order(p: Pair) -> tuple[int, int, int]:
    """Canonical order of pairs: by base id, the null probe first, then probe id."""
    return (p[0], 0, 0) if p[1] is None else (p[0], 1, p[1])


@dataclass
class Results:
    """The three parts of a result, each a multiset kept in canonical order."""

    pairs: list[Pair] = field(default_factory=list)
    aggregates: list[AggregateRow] = field(default_factory=list)
    late: list[int] = field(default_factory=list)

    def canonical(self) -> Results:
        """The same multisets, each sorted in canonical order."""
        return Results(
            sorted(self.pairs, key=pair_order),
            sorted(self.aggregates, key=lambda r: r[0]),
            sorted(self.late),
        )


def compute_pairs(bases: Iterable[StreamTuple], probes: Iterable[StreamTuple], q: Query) -> list[Pair]:
    """All matching (a.id, b.id) pairs, plus (a.id, None) for unmatched bases of a left join.

    Quadratic by design: this is the definition, not an algorithm.
    """
    ps = list(probes)
    out: list[Pair] = []
    for a in bases:
        matched = [(a.id, b.id) for b in ps if is_match(a, b, q)]
        out.extend(matched)
        if not matched and q.join == "left":
            out.append((a.id, None))
    return sorted(out, key=pair_order)


def compute_window(a: StreamTuple, probes: Iterable[StreamTuple], q: Query) -> list[float]:
    """The values of the probes that match ``a``: the multiset ``V`` the aggregate reads."""
    return [b.value for b in probes if is_match(a, b, q)]


def compute_aggregates(bases: Iterable[StreamTuple], probes: Iterable[StreamTuple], q: Query) -> list[AggregateRow]:
    """One row (a.id, count, value) per base tuple; requires ``q.aggregate``."""
    assert q.aggregate is not None, "compute_aggregates needs a query with an aggregate"
    ps = list(probes)
    rows = [(a.id, *compute_aggregate(compute_window(a, ps, q), q.aggregate)) for a in bases]
    return sorted(rows, key=lambda r: r[0])


def compute_batch(tuples: Iterable[StreamTuple], q: Query) -> Results:
    """The batch result over a set of tuples (both sides mixed): pairs or aggregates."""
    ts = list(tuples)
    bases = [t for t in ts if t.side == BASE]
    probes = [t for t in ts if t.side == PROBE]
    if q.aggregate is None:
        return Results(pairs=compute_pairs(bases, probes, q))
    return Results(aggregates=compute_aggregates(bases, probes, q))
