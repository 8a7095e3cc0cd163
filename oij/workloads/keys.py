"""Key distributions, sampled in vectorised blocks.

* uniform over u keys;
* Zipf(s) over u keys: P(k) ∝ (k+1)^-s, sampled by inverse CDF (a tabulated
  CDF and a binary search per draw);
* self-similar(h) (Gray et al., "Quickly generating billion-record synthetic
  databases", SIGMOD 1994; used by Korn et al. 2006 and PPOIJ §5):
  ``k = floor(u * r ** (log h / log(1-h)))`` for r uniform in [0,1), so the
  first h*u keys get a share 1-h of the tuples, the first h^2*u keys get
  (1-h)^2, and so on.  h = 0.5 is uniform; h = 0.2 is the 80-20 rule;
* rotating hot keys (Scale-OIJ Fig. 14): see :class:`RotatingKeys`.

Key 0 is the hottest key of the skewed distributions.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from oij.workloads.params import US_PER_S, WorkloadParams

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


def self_similar_exponent(h: float) -> float:
    """The exponent log(h)/log(1-h) of Gray et al.'s self-similar generator."""
    return math.log(h) / math.log(1.0 - h)


def key_probabilities(p: WorkloadParams) -> F64:
    """The long-run share of every key (length ``p.keys``).

    Rotating hot keys: every key is hot for the same fraction of the time, so
    the long-run shares are uniform; :func:`period_collision` gives the
    within-period collision probability that drives the number of matches.
    """
    u = p.keys
    if p.key_dist == "zipf":
        w = np.arange(1, u + 1, dtype=np.float64) ** -p.skew
        return np.asarray(w / w.sum(), dtype=np.float64)
    if p.key_dist == "self-similar":
        e = self_similar_exponent(p.skew)
        edges = (np.arange(u + 1, dtype=np.float64) / u) ** (1.0 / e)
        return np.asarray(np.diff(edges), dtype=np.float64)
    if p.key_dist == "rotating":
        # Within one period: hot keys share hot_share, every key gets (1-hot_share)/u.
        probs = np.full(u, (1.0 - p.hot_share) / u)
        probs[: p.hot_keys] += p.hot_share / p.hot_keys
        return probs
    return np.full(u, 1.0 / u)


class KeySampler:
    """Draws key indices for a block of tuples.  ``sample`` is O(n) (O(n log u) for Zipf)."""

    def __init__(self, p: WorkloadParams, rng: np.random.Generator, seed: int) -> None:
        self.p = p
        self.rng = rng
        self.seed = seed
        self.u = p.keys
        self.cdf: F64 | None = None
        if p.key_dist == "zipf":
            cdf = np.cumsum(key_probabilities(p))
            cdf[-1] = 1.0
            self.cdf = cdf
        self.exponent = self_similar_exponent(p.skew) if p.key_dist == "self-similar" else 1.0

    def sample(self, ts: I64) -> I64:
        """Key indices for tuples with timestamps ``ts`` (only rotating keys look at ts)."""
        n = len(ts)
        u = self.u
        d = self.p.key_dist
        if d == "uniform":
            return self.rng.integers(0, u, n, dtype=np.int64)
        if d == "zipf":
            assert self.cdf is not None
            r = self.rng.random(n)
            k = np.searchsorted(self.cdf, r, side="right").astype(np.int64)
            return np.minimum(k, u - 1)
        if d == "self-similar":
            r = self.rng.random(n)
            kk: I64 = np.minimum(np.floor(u * r**self.exponent).astype(np.int64), u - 1)
            return kk
        return self._rotating(ts)

    def _rotating(self, ts: I64) -> I64:
        """Hot set of period t = floor((ts - start) / hot_period): keys perm_c[j*h:(j+1)*h], c = t // (u//h)."""
        p = self.p
        n = len(ts)
        h = p.hot_keys
        per_cycle = self.u // h
        hot = self.rng.random(n) < p.hot_share
        cold_keys = self.rng.integers(0, self.u, n, dtype=np.int64)
        slot = self.rng.integers(0, h, n, dtype=np.int64)
        period = (ts - p.start_ts) // p.hot_period
        cycle = period // per_cycle
        pos = (period % per_cycle) * h + slot
        out = cold_keys
        out[hot] = keyed_permutation(pos[hot], cycle[hot], self.u, self.seed)
        return out


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finaliser, element-wise (wrapping uint64 arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def keyed_permutation(pos: I64, cycle: I64, u: int, seed: int) -> I64:
    """``perm_cycle(pos)``: a pseudo-random permutation of [0, u) per cycle, element-wise.  O(n).

    A 4-round Feistel network on 2*b bits (4^b >= u) keyed by (seed, cycle,
    round), with cycle-walking back into [0, u): a bijection of [0, u) for
    every cycle, computed without materialising the permutation, so any
    number of cycles per block costs the same.
    """
    if u == 1:
        return np.zeros(len(pos), dtype=np.int64)
    half = max(1, math.ceil(math.log2(u) / 2))
    mask = np.uint64((1 << half) - 1)
    sh = np.uint64(half)
    keys = [
        _mix(cycle.astype(np.uint64) * np.uint64(4) + np.uint64(r) + _mix(np.full(1, seed, dtype=np.uint64)))
        for r in range(4)
    ]

    def rounds(x: npt.NDArray[np.uint64], ks: list[npt.NDArray[np.uint64]]) -> npt.NDArray[np.uint64]:
        left, right = x >> sh, x & mask
        for k in ks:
            left, right = right, left ^ (_mix(right ^ k) & mask)
        return (left << sh) | right

    x = rounds(pos.astype(np.uint64), keys)
    bad = np.flatnonzero(x >= np.uint64(u))
    while len(bad):
        x[bad] = rounds(x[bad], [k[bad] for k in keys])
        bad = bad[x[bad] >= np.uint64(u)]
    return x.astype(np.int64)


def key_collision(p: WorkloadParams) -> float:
    """sum_k p_k^2 for the key distribution (the chance that two independent tuples share a key)."""
    probs = key_probabilities(p)
    return float((probs * probs).sum())


def expected_matches(p: WorkloadParams) -> float:
    """Expected probes in a base tuple's window, from the parameters (ignores disorder, bursts, lateness).

    E = sum_k p_k^2 * probe_rate * window_length over the key shares p_k
    (rotating: averaged over one hot period).
    """
    window = (p.upper - p.lower) / US_PER_S
    probe_rate = p.rate * p.probe_ratio
    return key_collision(p) * probe_rate * window
