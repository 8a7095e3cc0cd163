r"""Hot-key salting for the Spark range join: choosing the split degree S(k) with PPOIJ Alg. 1.

The bucketed range join (:mod:`oij.spark.oracle`) is an equi-join on the join
*group* g = (key, bucket).  The work of a group in a sort-merge join is
:math:`|A_g| \cdot |B_g|` candidate comparisons, all in one task.  A group
with a large share of the total work makes that task the straggler.  Salting
splits the base side of a hot group into S(g) salts (each base row goes to
salt ``hash(id) mod S(g)``) and replicates its probe side S(g) times, so the
group's work is spread over S(g) tasks at the price of S(g) - 1 extra copies
of its probes.

S(g) is the splitting degree that PPOIJ's Alg. 1 ([PPOIJ]_
§3.3, "Assign keys to OIJ replicas") gives the group, with the groups' work
shares as the frequencies f and the tasks as the N replicas: first every
group goes to the least-loaded replica (descending frequency); if the load is
not balanced (max load / mean load > theta, or a replica is idle), the groups
are visited again in descending frequency and each is split once more (onto
the least-loaded replica that does not have it yet, the group's load being
spread evenly over its replicas) until the loads are balanced or every group
reached the maximum splitting degree.

:func:`assign_replicas` is Alg. 1 verbatim; :func:`split_degrees` applies it to
the heaviest groups only, with the rest of the work spread evenly over the
replicas beforehand (the many light groups can always be packed evenly, and
collecting them all to the driver would cost more than it helps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def is_balanced(loads: Sequence[float], theta: float) -> bool:
    r"""PPOIJ's isBalanced: :math:`\max(loads) / \mathrm{mean}(loads) \le \theta` and no replica is idle."""
    if not loads or min(loads) <= 0.0:
        return False
    mean = sum(loads) / len(loads)
    return max(loads) <= theta * mean


SPARK_THETA = 1.2
"""The Spark oracle's Alg. 1 balance threshold (``oij check --theta``): the salting of hot (key, bucket)
groups."""


@dataclass(frozen=True)
class Assignment:
    """The outcome of Alg. 1: replicas of each key (``key2r[i]``), split degrees, and final replica loads."""

    key2r: list[list[int]]
    split: list[int]
    loads: list[float]

    def balance_factor(self) -> float:
        """Max replica load / mean replica load (1.0 is perfect; PPOIJ Fig. 12's load-balance factor)."""
        mean = sum(self.loads) / len(self.loads) if self.loads else 0.0
        return max(self.loads) / mean if mean > 0 else 1.0


def assign_replicas(
    freqs: Sequence[float],
    n: int,
    theta: float = SPARK_THETA,
    max_split: int | None = None,
    base_load: Sequence[float] | None = None,
) -> Assignment:
    r"""PPOIJ Alg. 1: assign key i (frequency ``freqs[i]``) to one or more of ``n`` replicas.

    ``theta >= 1`` is the balance threshold; a key is split over at most
    ``min(n, max_split)`` replicas.  ``base_load`` (default zeros) is load the
    replicas already carry before the keys are placed.  Ties between equally
    loaded replicas go to the lowest index, and keys of equal frequency are
    visited in index order, so the result is deterministic.  O(K n) per round,
    at most ``max_split`` rounds.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    if theta < 1.0:
        raise ValueError("theta must be >= 1")
    cap = n if max_split is None else max(1, min(n, max_split))
    loads = list(base_load) if base_load is not None else [0.0] * n
    if len(loads) != n:
        raise ValueError("base_load needs one entry per replica")
    k = len(freqs)
    split = [0] * k
    key2r: list[list[int]] = [[] for _ in range(k)]
    order = sorted(range(k), key=lambda i: (-freqs[i], i))
    # Lines 4-9: every key to the least-loaded replica, heaviest first.
    for i in order:
        r = min(range(n), key=lambda j: (loads[j], j))
        loads[r] += freqs[i]
        split[i] = 1
        key2r[i].append(r)
    if is_balanced(loads, theta) or k == 0:
        return Assignment(key2r, split, loads)
    # Lines 11-25: split the heaviest keys once more, round after round.
    balanced = False
    while not balanced:
        progressed = False
        for i in order:
            if split[i] >= cap:
                continue
            owners = set(key2r[i])
            r = min((j for j in range(n) if j not in owners), key=lambda j: (loads[j], j))
            f, s = freqs[i], split[i]
            for j in key2r[i]:
                loads[j] += f / (s + 1) - f / s
            loads[r] += f / (s + 1)
            split[i] = s + 1
            key2r[i].append(r)
            progressed = True
            if is_balanced(loads, theta):
                balanced = True
                break
        if not progressed or is_balanced(loads, theta) or all(s >= cap for s in split):
            balanced = True
    return Assignment(key2r, split, loads)


def split_degrees(
    group_loads: Sequence[float],
    rest_load: float,
    n: int,
    theta: float = SPARK_THETA,
    max_split: int | None = None,
) -> tuple[list[int], float]:
    """Split degree S(g) of each of the heaviest groups, and the resulting load-balance factor.

    ``group_loads`` are the work of the heaviest groups (any unit), ``rest_load``
    the total work of all other groups, spread evenly over the ``n`` replicas
    before Alg. 1 places the heavy ones.  Returns ``(S, max/mean load)``.
    """
    total = sum(group_loads) + rest_load
    if total <= 0:
        return [1] * len(group_loads), 1.0
    freqs = [g / total for g in group_loads]
    base = [rest_load / total / n] * n
    a = assign_replicas(freqs, n, theta, max_split, base)
    return a.split, a.balance_factor()
