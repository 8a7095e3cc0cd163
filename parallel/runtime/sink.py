"""The driver's sink: result records from the replicas -> the specification's :class:`Results`.

Data flow (driver process)::

    result ring r --> Sink.take(records, now) --> pairs (a, b)      + latency now - born
                                              --> partial rows --> merged per base once all ``fan``
                                                  partials arrived --> aggregate row / (a, null)

A base tuple's row may be split over several replicas (DP, HP): every
replica that received the base emits exactly one partial row for it (the
replicas that do not store it at once, the owner when the base is final),
and each record says how many partials the base has (``fan``, set by the
emitter).  Counts and min/max merge exactly; sums are added in float64 in
arrival order, so with non-integer values a sum may differ from the oracle's
exactly rounded one in the last bits (the tests compare aggregates with a
relative tolerance of 1e-9; the integer-valued workload presets are exact).

Creates no process and no shared memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from spec.batch import AggregateRow, Pair, Results
from spec.model import Query


class Sink:
    """Collects and merges result records (see the module docstring)."""

    def __init__(self, q: Query) -> None:
        self.q = q
        self.pair_a: list[npt.NDArray[np.int64]] = []
        self.pair_b: list[npt.NDArray[np.int64]] = []
        self.rows: list[npt.NDArray[Any]] = []  # complete partial-row records (fan 1, or merged)
        self.pending: dict[int, list[Any]] = {}
        self.late: list[npt.NDArray[np.int64]] = []
        self.latency_ns: list[npt.NDArray[np.int64]] = []
        self.ended: set[int] = set()
        self.records = 0

    def take(self, recs: npt.NDArray[Any], now: int) -> None:
        self.records += len(recs)
        kind = recs["kind"]
        pairs = recs[kind == 0]
        if len(pairs):
            self.pair_a.append(pairs["a"].copy())
            self.pair_b.append(pairs["b"].copy())
            self.latency_ns.append(now - pairs["born"])
        parts = recs[kind == 1]
        if not len(parts):
            return
        one = parts["fan"] <= 1
        if one.all():
            done = parts
        else:
            done = parts[one]
            merged = []
            for r in parts[~one].tolist():
                a, _b, n, s, mn, mx, born, fan, _k = r
                p = self.pending.get(a)
                if p is None:
                    self.pending[a] = [1, n, s, mn, mx, born, fan]
                    continue
                p[0] += 1
                p[1] += n
                p[2] += s
                p[3] = min(p[3], mn)
                p[4] = max(p[4], mx)
                p[5] = max(p[5], born)
                if p[0] == p[6]:
                    del self.pending[a]
                    merged.append((a, -1, p[1], p[2], p[3], p[4], p[5], p[6], 1))
            if merged:
                done = np.concatenate((done, np.array(merged, dtype=recs.dtype)))
        if len(done):
            self.rows.append(done)
            if self.q.aggregate is not None:
                self.latency_ns.append(now - done["born"])

    def results(self) -> Results:
        """Everything received, in canonical order (raises if a base's partial rows are incomplete)."""
        if self.pending:
            a = next(iter(self.pending))
            raise RuntimeError(f"base {a}: {self.pending[a][0]} of {self.pending[a][6]} partial rows arrived")
        q = self.q
        res = Results()
        res.late = sorted(np.concatenate(self.late).tolist()) if self.late else []
        rows = np.concatenate(self.rows) if self.rows else None
        if q.aggregate is None:
            a = np.concatenate(self.pair_a) if self.pair_a else np.empty(0, np.int64)
            b = np.concatenate(self.pair_b) if self.pair_b else np.empty(0, np.int64)
            pairs: list[Pair] = list(zip(a.tolist(), b.tolist(), strict=True))
            if q.join == "left" and rows is not None:
                pairs += [(x, None) for x in rows["a"][rows["n"] == 0].tolist()]
            res.pairs = pairs
            return res.canonical()
        out: list[AggregateRow] = []
        if rows is not None:
            kind = q.aggregate
            for a_, n_, s_, mn_, mx_ in zip(rows["a"].tolist(), rows["n"].tolist(), rows["s"].tolist(),
                                            rows["mn"].tolist(), rows["mx"].tolist(), strict=True):
                if kind == "count":
                    out.append((a_, n_, n_))
                elif kind == "sum":
                    out.append((a_, n_, (s_ if n_ else 0.0) + 0.0))
                elif n_ == 0:
                    out.append((a_, 0, None))
                elif kind == "avg":
                    out.append((a_, n_, s_ / n_ + 0.0))
                elif kind == "min":
                    out.append((a_, n_, mn_ + 0.0))
                else:
                    out.append((a_, n_, mx_ + 0.0))
        res.aggregates = out
        return res.canonical()

    def latencies_ms(self) -> npt.NDArray[np.float64]:
        if not self.latency_ns:
            return np.empty(0)
        lat: npt.NDArray[np.float64] = np.concatenate(self.latency_ns).astype(np.float64) / 1e6
        return lat
