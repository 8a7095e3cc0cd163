"""The driver's sink: result records from the replicas -> the specification's :class:`~oij.spec.batch.Results`.

Data flow (driver process)::

    result ring r --> Sink.take(records, now) --> pairs (a, b)      + latency now - born
                                              --> partial rows --> merged per base once all ``fan``
                                                  partials arrived --> aggregate row / (a, null)

A base tuple's row may be split over several replicas (DP, HP): every
replica that received the base emits exactly one partial row for it (the
replicas that do not store it at once, the owner when the base is final),
and each record says how many partials the base has (``fan``, set by the
emitter).  Counts and min/max merge exactly; sums arrive exact (an int64 of
the common values and pieces of the rest, :mod:`oij.parallel.runtime.exactsum`),
are added as Python integers, and the total is rounded once: a sum or an avg
is the oracle's, bit for bit, whatever the values and the arrival order.

Two modes.  *Retained* (the default): everything is kept, and
:meth:`Sink.results` returns it in canonical order at the end (memory grows
with the output, as sorting needs).  *Streamed* (``stream=`` a callable): every
result is handed to the callable as soon as it is complete -- pairs as they
arrive, a row once all its partials merged, late ids as the router finds
them -- and nothing is kept but counters, so the driver's memory stays
bounded on an unbounded stream (``oij run --order arrival``).  Latencies are
kept as a uniform sample of at most ``LATENCY_SAMPLE`` results
(Algorithm R), in both modes.

Creates no process and no shared memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from oij.parallel.runtime.exactsum import PAIR, PIECE, ROW, UNIT_BITS, round_sum
from oij.reference.exact import SHIFT, scaled
from oij.spec.batch import AggregateRow, Results
from oij.spec.model import Query

LATENCY_SAMPLE = 1 << 17
SCALE = 1 << UNIT_BITS  # a common row's sum is si / SCALE, its mean si / (n SCALE): Python's int division rounds once


class Reservoir:
    """A uniform random sample of at most ``cap`` of the values offered (Algorithm R, vectorised).

    O(len(values)) per :meth:`offer`; memory O(cap).  Deterministic for a seed.
    """

    def __init__(self, cap: int = LATENCY_SAMPLE, seed: int = 0) -> None:
        self.cap = cap
        self.buf = np.empty(cap, dtype=np.int64)
        self.n = 0  # values offered so far
        self.rng = np.random.default_rng(seed)

    def offer(self, values: npt.NDArray[np.int64]) -> None:
        k = len(values)
        if not k:
            return
        fill = min(max(self.cap - self.n, 0), k)
        if fill:
            self.buf[self.n:self.n + fill] = values[:fill]
        rest = values[fill:]
        if len(rest):
            # value i (0-based over everything offered) replaces slot j ~ U[0, i] if j < cap
            idx = np.arange(self.n + fill, self.n + k, dtype=np.int64)
            j = (self.rng.random(len(rest)) * (idx + 1)).astype(np.int64)
            keep = j < self.cap
            self.buf[j[keep]] = rest[keep]
        self.n += k

    def sample(self) -> npt.NDArray[np.int64]:
        return self.buf[:min(self.n, self.cap)]


class Sink:
    """Collects and merges result records (see the module docstring)."""

    def __init__(self, q: Query, stream: Callable[[Results], None] | None = None) -> None:
        self.q = q
        self.stream = stream
        self.pair_a: list[npt.NDArray[np.int64]] = []
        self.pair_b: list[npt.NDArray[np.int64]] = []
        self.rows: list[npt.NDArray[Any]] = []  # complete partial-row records (fan 1, or merged)
        self.pending: dict[int, list[Any]] = {}
        self.extra: dict[int, int] = {}  # base id -> the exact rest of its sum beyond si (units of 2**-1074)
        self.late: list[npt.NDArray[np.int64]] = []
        self.latency = Reservoir()
        self.ended: set[int] = set()
        self.records = 0
        self.n_pairs = 0
        self.n_rows = 0
        self.n_late = 0

    def add_late(self, ids: npt.NDArray[np.int64]) -> None:
        """Late tuple ids found by the router."""
        if not len(ids):
            return
        self.n_late += len(ids)
        if self.stream is not None:
            self.stream(Results(late=ids.tolist()))
        else:
            self.late.append(ids)

    def take(self, recs: npt.NDArray[Any], now: int) -> None:
        self.records += len(recs)
        kind = recs["kind"]
        if (kind == PIECE).any():  # before the rows: a piece precedes its row on the ring
            for a, s in zip(recs["a"][kind == PIECE].tolist(), recs["s"][kind == PIECE].tolist(), strict=True):
                self.extra[a] = self.extra.get(a, 0) + scaled(s)
        pairs = recs[kind == PAIR]
        if len(pairs):
            self.n_pairs += len(pairs)
            self.latency.offer(now - pairs["born"])
            if self.stream is not None:
                columns = getattr(self.stream, "pairs", None)  # a stream that takes columns (oij run's sorter)
                if columns is not None:
                    columns(pairs["a"], pairs["b"])
                else:
                    self.stream(Results(pairs=list(zip(pairs["a"].tolist(), pairs["b"].tolist(), strict=True))))
            else:
                self.pair_a.append(pairs["a"].copy())
                self.pair_b.append(pairs["b"].copy())
        parts = recs[kind == ROW]
        if not len(parts):
            return
        one = parts["fan"] <= 1
        if one.all():
            done = parts
        else:
            done = parts[one]
            merged = []
            for r in parts[~one].tolist():
                a, _b, n, si, s, mn, mx, born, fan, _k = r
                if s:
                    self.extra[a] = self.extra.get(a, 0) + scaled(s)
                p = self.pending.get(a)
                if p is None:
                    self.pending[a] = [1, n, si, mn, mx, born, fan]
                    continue
                p[0] += 1
                p[1] += n
                p[2] += si
                p[3] = min(p[3], mn)
                p[4] = max(p[4], mx)
                p[5] = max(p[5], born)
                if p[0] == p[6]:
                    del self.pending[a]
                    si = p[2]
                    if not -(1 << 63) <= si < (1 << 63):  # the merged int64 sum: exact in extra
                        self.extra[a] = self.extra.get(a, 0) + (si << (SHIFT - UNIT_BITS))
                        si = 0
                    merged.append((a, -1, p[1], si, 0.0, p[3], p[4], p[5], p[6], ROW))
            if merged:
                done = np.concatenate((done, np.array(merged, dtype=recs.dtype)))
        if len(done):
            self.n_rows += len(done)
            if self.q.aggregate is not None:
                self.latency.offer(now - done["born"])
            if self.stream is not None:
                self.stream(self._rows_results(done))
            else:
                self.rows.append(done)

    def results(self) -> Results:
        """Everything received, in canonical order (raises if a base's partial rows are incomplete).

        In the streamed mode everything has been handed out already: the result is empty.
        """
        if self.pending:
            a = next(iter(self.pending))
            raise RuntimeError(f"base {a}: {self.pending[a][0]} of {self.pending[a][6]} partial rows arrived")
        res = Results()
        res.late = sorted(np.concatenate(self.late).tolist()) if self.late else []
        rows = self._rows_results(np.concatenate(self.rows)) if self.rows else Results()
        if self.q.aggregate is None:
            a = np.concatenate(self.pair_a) if self.pair_a else np.empty(0, np.int64)
            b = np.concatenate(self.pair_b) if self.pair_b else np.empty(0, np.int64)
            res.pairs = list(zip(a.tolist(), b.tolist(), strict=True)) + rows.pairs
        else:
            res.aggregates = rows.aggregates
        return res.canonical()

    def pair_columns(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_],
                                    npt.NDArray[np.int64]]:
        """Pairs mode, retained: (base ids, probe ids, probe is null, late ids), pairs and late in canonical order.

        The column form of :meth:`results` (no Python object per result): O(n log n).
        """
        assert self.q.aggregate is None and self.stream is None
        if self.pending:
            a0 = next(iter(self.pending))
            raise RuntimeError(f"base {a0}: {self.pending[a0][0]} of {self.pending[a0][6]} partial rows arrived")
        z = np.empty(0, np.int64)
        a = np.concatenate(self.pair_a) if self.pair_a else z
        b = np.concatenate(self.pair_b) if self.pair_b else z
        null = np.zeros(len(a), np.bool_)
        if self.q.join == "left" and self.rows:
            rows = np.concatenate(self.rows)
            lone = rows["a"][rows["n"] == 0].astype(np.int64)
            a = np.concatenate((a, lone))
            b = np.concatenate((b, np.zeros(len(lone), np.int64)))
            null = np.concatenate((null, np.ones(len(lone), np.bool_)))
        order = np.lexsort((np.where(null, 0, b), ~null, a))
        late = np.sort(np.concatenate(self.late)) if self.late else z
        return a[order], b[order], null[order], late

    def _rows_results(self, rows: npt.NDArray[Any]) -> Results:
        """Complete rows as results: aggregate rows, or a left join's (a, None) for bases without a match."""
        q = self.q
        extra = self.extra  # every row takes its own rest of the sum, used or not (count, min, max, a left join)
        rest = [extra.pop(a, 0) for a in rows["a"].tolist()] if extra else [0] * len(rows)
        if q.aggregate is None:
            if q.join != "left":
                return Results()
            return Results(pairs=[(x, None) for x in rows["a"][rows["n"] == 0].tolist()])
        out: list[AggregateRow] = []
        kind = q.aggregate
        for a_, n_, si_, s_, mn_, mx_, e_ in zip(rows["a"].tolist(), rows["n"].tolist(), rows["si"].tolist(),
                                                 rows["s"].tolist(), rows["mn"].tolist(), rows["mx"].tolist(),
                                                 rest, strict=True):
            if kind == "count":
                out.append((a_, n_, n_))
            elif kind == "sum":
                out.append((a_, n_, (si_ / SCALE + 0.0 if not (s_ or e_) else round_sum(si_, s_, e_, n_, False))
                            if n_ else 0.0))
            elif n_ == 0:
                out.append((a_, 0, None))
            elif kind == "avg":
                out.append((a_, n_, si_ / (n_ * SCALE) + 0.0 if not (s_ or e_) else round_sum(si_, s_, e_, n_, True)))
            elif kind == "min":
                out.append((a_, n_, mn_ + 0.0))
            else:
                out.append((a_, n_, mx_ + 0.0))
        return Results(aggregates=out)

    def latencies_ms(self) -> npt.NDArray[np.float64]:
        """The latency sample, in ms (every result's latency while fewer than LATENCY_SAMPLE arrived)."""
        lat: npt.NDArray[np.float64] = self.latency.sample().astype(np.float64) / 1e6
        return lat
