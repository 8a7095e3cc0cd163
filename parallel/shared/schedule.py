r"""Alg. 3 (Scale-OIJ §V-B2): the dynamic schedule of key partitions over joiners.  Pure; no process, no shared memory.

Workload model (Eq. 3): joiner :math:`J_i` gets
:math:`W_i = \sum_{p \ni J_i} |x_p| / |vt_p|`, where :math:`|x_p|` is the
(decayed) number of tuples of partition p seen so far and :math:`|vt_p|` the
size of its virtual team.  Unbalancedness (Eq. 2) is
:func:`oij.parallel.runtime.metrics.balance`'s: :math:`\frac{1}{J\mu}\sum_i |W_i-\mu|`.

Alg. 3, as implemented: repeat -- take :math:`J_{max}` and :math:`J_{min}`;
walk the partitions of :math:`J_{max}` by decreasing share
:math:`|x_p|/|vt_p|` (the priority queue) and *replicate* the first one
whose replication to :math:`J_{min}` lowers the unbalancedness by more than
:math:`\delta` -- until an iteration changes nothing.  The paper's listing
keeps every tried replication until one succeeds; we undo the unsuccessful
tries (otherwise one call replicates every partition of :math:`J_{max}`),
which we take to be the intent of "if S_new does not change then break".
The caller decays the statistics by :math:`\lambda` afterwards (line 13).
Partitions are only ever replicated, never moved (:mod:`oij.parallel.shared.teams`).
"""

from __future__ import annotations

from collections.abc import Sequence

from oij.parallel.runtime.metrics import balance


def loads(x: Sequence[float], masks: Sequence[int], n: int) -> list[float]:
    """Eq. 3 for every joiner."""
    w = [0.0] * n
    for p, m in enumerate(masks):
        if not x[p] or not m:
            continue
        mem = [j for j in range(n) if m >> j & 1]
        share = x[p] / len(mem)
        for j in mem:
            w[j] += share
    return w


def unbalancedness(x: Sequence[float], masks: Sequence[int], n: int) -> float:
    return balance(loads(x, masks, n))[1]


def alg3(x: Sequence[float], masks: Sequence[int], n: int, delta: float) -> list[int]:
    """One run of Alg. 3: a grown copy of ``masks`` (see the module docstring)."""
    s = list(masks)
    if n < 2:
        return s
    last = unbalancedness(x, s, n)
    while True:
        w = loads(x, s, n)
        jmax = max(range(n), key=lambda j: (w[j], -j))
        jmin = min(range(n), key=lambda j: (w[j], j))
        if w[jmax] <= w[jmin]:
            break
        pq = sorted((p for p, m in enumerate(s) if m >> jmax & 1 and not m >> jmin & 1 and x[p] > 0),
                    key=lambda p: (-x[p] / bin(s[p]).count("1"), p))
        changed = False
        for p in pq:
            s[p] |= 1 << jmin
            u = unbalancedness(x, s, n)
            if last - u > delta:
                last = u
                changed = True
                break
            s[p] &= ~(1 << jmin)
        if not changed:
            break
    return s
