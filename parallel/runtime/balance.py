r"""Key -> replica-set assignment: PPOIJ Alg. 1 and its load model.

The hybrid pattern (:mod:`oij.parallel.patterns.hp`) calibrates on the first
tuples and then asks replica 0 (the "master", :mod:`oij.parallel.runtime.replica`)
to run :func:`assign` on the key counts the emitters gathered; the result goes
back to the driver, which routes by it from the next epoch on.  It lives in
the runtime because the replica process runs it; it is pure arithmetic.

:func:`assign` is Alg. 1 with lines 4-10 skipped, as the paper prescribes for
runtime estimation: the initial assignment is the calibration (KP) one, so
the replica that stored a key's tuples during calibration keeps the key and
every later tuple of the key still meets those tuples.  Loads follow the
paper's model: a key of frequency f split over s replicas gives f/s to each.

This module creates no process and no shared memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def is_balanced(loads: Sequence[float], theta: float) -> bool:
    r"""PPOIJ's isBalanced: :math:`\max_j L_j / \bar L \le \theta` and every replica has a non-zero load."""
    avg = sum(loads) / len(loads)
    return avg > 0 and min(loads) > 0 and max(loads) / avg <= theta


def assign(counts: Sequence[Sequence[int]] | Mapping[int, float], key2r: Mapping[int, Sequence[int]], n: int,
           theta: float, max_split: int) -> dict[int, list[int]]:
    """Alg. 1: extend ``key2r`` (key -> replicas, every counted key present) until balanced or saturated.

    ``counts`` is a per-emitter list of per-key counts (summed here: the master's global distribution),
    or a key -> frequency mapping.  Returns the new map; every old replica of a key is kept.
    """
    if isinstance(counts, Mapping):
        freq = {int(k): float(v) for k, v in counts.items()}
    else:
        freq = {}
        for row in counts:
            for k, c in enumerate(row):
                if c:
                    freq[k] = freq.get(k, 0.0) + float(c)
    total = sum(freq.values())
    if total <= 0:
        return {int(k): list(v) for k, v in key2r.items()}
    f = {k: v / total for k, v in freq.items()}
    out = {k: list(key2r.get(k, [])) for k in f}
    loads = [0.0] * n
    for k, rs in out.items():
        if not rs:
            rs.append(min(range(n), key=lambda j: loads[j]))  # a key without an owner: lines 4-8
        for j in rs:
            loads[j] += f[k] / len(rs)
    cap = max(1, min(max_split, n))
    keys = sorted(f, key=lambda k: (-f[k], k))
    if is_balanced(loads, theta):
        return out
    while True:
        for k in keys:
            rs = out[k]
            s = len(rs)
            if s >= cap:
                continue
            cands = [j for j in range(n) if j not in rs]
            j_min = min(cands, key=lambda j: (loads[j], j))
            for j in rs:
                loads[j] += -f[k] / s + f[k] / (s + 1)
            loads[j_min] += f[k] / (s + 1)
            rs.append(j_min)
            if is_balanced(loads, theta):
                return out
        if is_balanced(loads, theta) or all(len(out[k]) >= cap for k in keys):
            return out


def model_loads(f: Mapping[int, float], key2r: Mapping[int, Sequence[int]], n: int) -> list[float]:
    """Alg. 1's load model: replica j gets :math:`f(k)/|S(k)|` of every key k it serves."""
    loads = [0.0] * n
    for k, v in f.items():
        rs = key2r[k]
        for j in rs:
            loads[j] += v / len(rs)
    return loads
