"""The stream generator: vectorised blocks in generation order, reordered into arrival order.

Method (every step is a numpy operation on a block of ``GEN_BLOCK`` tuples):

1. *Time.*  Unit-rate gaps (exponential for poisson arrivals, 1 for regular)
   are summed into an "operational time" τ, mapped to event time by the
   inverse of the cumulative intensity (constant rate, or a rate multiplied
   by ``burst_factor`` in the first ``burst_duty`` of every ``burst_period``),
   and floored to integer microseconds.  Timestamps are non-decreasing in
   generation order.
2. *Side, key, value, channel, delay* are drawn per tuple, each from its own
   random stream (spawned from the seed), so changing one parameter does not
   reshuffle the others.  Ids are 1, 2, ... in generation order (unique over
   both sides).
3. *Arrival.*  A tuple arrives at ``ts + delay``; ties keep generation order.
   A reorder buffer holds tuples whose arrival time is after the timestamp
   of the last generated tuple (no later tuple can arrive before them), so
   memory is O(rate × largest delay), not O(stream length).
4. *Watermarks* are inserted into the released, arrival-ordered block per
   channel (see :class:`~oij.workloads.params.WorkloadParams`).

The output depends only on (params, seed, number of tuples): the block size
is a constant, and a run of n tuples is, in generation order, a prefix of a
run of m > n tuples.  Streams are identical for the same numpy version (numpy
does not promise its distributions across versions).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from oij.reference.columns import KIND_TUPLE, KIND_WATERMARK, SIDE_BASE, SIDE_NAMES, SIDE_PROBE, EventBlock
from oij.spec.model import TS_LIMIT, End, Event, Query, StreamTuple, Watermark
from oij.workloads.keys import KeySampler
from oij.workloads.params import US_PER_S, ParamError, WorkloadParams, check_params

__all__ = ["GEN_BLOCK", "KIND_TUPLE", "KIND_WATERMARK", "SIDE_BASE", "SIDE_NAMES", "SIDE_PROBE", "Block",
           "WorkloadGenerator", "block_events", "events_of"]

GEN_BLOCK = 1 << 16
"""Tuples generated per step.  A constant: changing it changes the output."""

I64 = npt.NDArray[np.int64]
NEG = np.iinfo(np.int64).min

@dataclass
class Block:
    """A run of consecutive generated events in arrival order: their columns and the generator's facts.

    ``events`` are the event columns (:class:`~oij.reference.columns.EventBlock`) with the key *index* as
    ``key`` (``key_prefix`` ``"k"`` for string keys: the key is ``WorkloadParams.key_label`` of the index),
    and the named fields column-wise (0.0 in a watermark's cells).  ``delay`` is the arrival delay the
    generator gave the tuple (-1 for a watermark); ``on_time`` is the generator's promise that the tuple is
    not late (delay <= lateness; True for a watermark).
    """

    events: EventBlock
    delay: I64
    on_time: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.events)

    @property
    def tuples(self) -> int:
        """Number of tuple rows.  O(n)."""
        return self.events.tuples


_COLS = ("side", "id", "ts", "key", "value", "channel", "delay", "on_time", "arrival")


def _take(cols: dict[str, npt.NDArray[Any]], idx: npt.NDArray[Any]) -> dict[str, npt.NDArray[Any]]:
    return {k: v[idx] for k, v in cols.items()}


class WorkloadGenerator:
    """Generates one workload.  Construct, then iterate :meth:`blocks` once.

    Memory: O(GEN_BLOCK + rate × largest delay + channels).
    """

    def __init__(self, params: WorkloadParams, seed: int) -> None:
        self.p = check_params(params)
        if type(seed) is not int or not 0 <= seed < 1 << 64:
            raise ParamError("seed", f"must be an integer in [0, 2^64), got {seed!r}")
        self.seed = seed
        ss = np.random.SeedSequence([seed & 0xFFFFFFFF, seed >> 32, 0x0171])
        self.field_names = self.p.field_names()
        self.rng_fields = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed & 0xFFFFFFFF, 0xF1E1D])))
        rt, rs, rk, rv, rc, rd, rg = (np.random.Generator(np.random.PCG64(s)) for s in ss.spawn(7))
        self.rng_time, self.rng_side, self.rng_value, self.rng_chan = rt, rs, rv, rc
        self.rng_delay, self.rng_strag = rd, rg
        self.keys = KeySampler(self.p, rk, seed)
        self.query: Query = self.p.query()

    # ------------------------------------------------------------ generation

    def _event_time(self, tau: npt.NDArray[np.float64]) -> I64:
        """Map operational time τ (one unit per tuple) to integer event time."""
        p = self.p
        lam = p.rate * (1.0 + p.probe_ratio) / US_PER_S  # tuples per us, outside bursts
        if p.burst_factor == 1.0:
            t = tau / lam
        else:
            per = float(p.burst_period)
            burst_len = p.burst_duty * per
            hi = p.burst_factor * lam
            cap_burst = hi * burst_len
            cap = cap_burst + lam * (per - burst_len)
            k = np.floor(tau / cap)
            r = tau - k * cap
            t = k * per + np.where(r < cap_burst, r / hi, burst_len + (r - cap_burst) / lam)
        if not float(t[-1]) + p.start_ts < TS_LIMIT:
            raise ParamError("events", "the stream would leave the timestamp range |ts| <= 2^62 (rate too low?)")
        ts: I64 = np.floor(t).astype(np.int64) + p.start_ts
        return ts

    def _delays(self, n: int) -> I64:
        """Integer delays for ``n`` tuples (stragglers included)."""
        p = self.p
        rd = self.rng_delay
        if p.delay == "none":
            d = np.zeros(n, dtype=np.int64)
        elif p.delay == "uniform":
            assert p.delay_max is not None
            d = rd.integers(0, p.delay_max + 1, n, dtype=np.int64)
        else:
            u = rd.random(n)
            if p.delay_max is None:
                x = -p.delay_mean * np.log1p(-u)
            else:
                x = -p.delay_mean * np.log1p(-u * -math.expm1(-p.delay_max / p.delay_mean))
                x = np.minimum(x, p.delay_max)
            d = np.floor(x).astype(np.int64)
        if p.delay_fraction < 1.0:
            d = np.where(self.rng_delay.random(n) < p.delay_fraction, d, 0)
        if p.stragglers > 0:
            rg = self.rng_strag
            is_s = rg.random(n) < p.stragglers
            sd = p.lateness + 1 + rg.integers(0, p.straggler_max, n, dtype=np.int64)
            d = np.where(is_s, sd, d)
        return d

    def generated(self, total: int) -> Iterator[dict[str, npt.NDArray[Any]]]:
        """The ``total`` tuples in generation order, in blocks of GEN_BLOCK (the last one cut)."""
        p = self.p
        if type(total) is not int or total < 0:
            raise ParamError("events", f"must be an integer >= 0, got {total!r}")
        tau = 0.0
        next_id = 1
        p_base = 1.0 / (1.0 + p.probe_ratio)
        mb, mp = p.base_channels, p.probe_channels
        checks_time = p.lateness if p.watermark in ("lateness", "count", "interval") else 0
        done = 0
        while done < total:
            n = GEN_BLOCK
            gaps = self.rng_time.exponential(1.0, n) if p.arrivals == "poisson" else np.ones(n)
            taus = tau + np.cumsum(gaps)
            tau = float(taus[-1])
            ts = self._event_time(taus)
            side = (self.rng_side.random(n) >= p_base).astype(np.int8)
            key = self.keys.sample(ts)
            value = self.rng_value.integers(0, 100, n).astype(np.float64)
            rc = self.rng_chan.random(n)
            channel = np.where(side == SIDE_BASE, np.floor(rc * mb), mb + np.floor(rc * mp)).astype(np.int64)
            delay = self._delays(n)
            m = min(n, total - done)
            if m < n:
                ts, side, key, value, channel, delay = ts[:m], side[:m], key[:m], value[:m], channel[:m], delay[:m]
            arrival = ts + delay
            on_time = delay <= checks_time if p.watermark != "none" else np.ones(m, dtype=np.bool_)
            ids = np.arange(next_id, next_id + m, dtype=np.int64)
            next_id += m
            done += m
            extra = {f"f:{name}": col for name, col in zip(self.field_names, self._fields(m), strict=True)}
            yield {
                **extra,
                "side": side,
                "id": ids,
                "ts": ts,
                "key": key,
                "value": value,
                "channel": channel,
                "delay": delay,
                "on_time": on_time,
                "arrival": arrival,
            }

    def _fields(self, n: int) -> list[npt.NDArray[np.float64]]:
        """The named fields of n tuples: integers in [0, field_range), correlated by field_correlation."""
        p = self.p
        if not self.field_names:
            return []
        rho = p.field_correlation
        z = self.rng_fields.random(n)
        out = []
        for j, _name in enumerate(self.field_names):
            zj = 1.0 - z if rho < 0 and j % 2 == 1 else z
            v = abs(rho) * zj + (1.0 - abs(rho)) * self.rng_fields.random(n)
            out.append(np.minimum(np.floor(v * p.field_range), p.field_range - 1).astype(np.float64))
        return out

    def blocks(self, total: int) -> Iterator[Block]:
        """The ``total`` tuples in arrival order with the watermarks, as :class:`Block` s (End not included)."""
        pending: dict[str, npt.NDArray[Any]] | None = None
        wm = _WatermarkState(self.p)
        for gen in self.generated(total):
            cols = gen if pending is None else {k: np.concatenate((pending[k], gen[k])) for k in gen}
            frontier = int(gen["ts"][-1])
            release = cols["arrival"] <= frontier
            if release.all():
                out, pending = cols, None
            else:
                out, pending = _take(cols, release), _take(cols, ~release)
            if len(out["ts"]):
                yield wm.insert(_take(out, np.argsort(out["arrival"], kind="stable")))
        if pending is not None and len(pending["ts"]):
            yield wm.insert(_take(pending, np.argsort(pending["arrival"], kind="stable")))


class _WatermarkState:
    """Per-channel state carried across blocks: max ts seen, tuples seen, last watermark emitted."""

    def __init__(self, p: WorkloadParams) -> None:
        self.p = p
        m = p.channels
        self.max_ts = np.full(m, NEG, dtype=np.int64)
        self.count = np.zeros(m, dtype=np.int64)
        self.last = np.full(m, NEG, dtype=np.int64)
        self.bucket: int | None = None
        self.key_prefix = None if p.key_type == "int" else "k"  # the key of index i: p.key_label(i)

    def insert(self, c: dict[str, npt.NDArray[Any]]) -> Block:
        """The block of arrival-ordered tuples ``c`` with this block's watermarks inserted.  O(n × channels)."""
        p = self.p
        n = len(c["ts"])
        if p.watermark == "count":
            after, wch, wts = self._count(c)
        elif p.watermark == "interval":
            after, wch, wts = self._interval(c)
        else:
            return Block(EventBlock(np.zeros(n, np.int8), c["side"], c["id"], c["ts"], c["key"], c["value"],
                                    c["channel"], False, _block_fields(c, None), self.key_prefix),
                         c["delay"], c["on_time"])
        w = len(after)
        order = np.argsort(after * p.channels + wch, kind="stable")
        after, wch, wts = after[order], wch[order], wts[order]
        wpos = np.arange(w, dtype=np.int64) + after + 1
        is_wm = np.zeros(n + w, dtype=np.bool_)
        is_wm[wpos] = True
        is_t = ~is_wm

        def fill(col: npt.NDArray[Any], wval: npt.NDArray[Any] | int | float | bool) -> npt.NDArray[Any]:
            out = np.empty(n + w, dtype=col.dtype)
            out[is_t] = col
            out[is_wm] = wval
            return out

        events = EventBlock(
            kind=is_wm.astype(np.int8),
            side=fill(c["side"], -1),
            id=fill(c["id"], 0),
            ts=fill(c["ts"], wts),
            key=fill(c["key"], -1),
            value=fill(c["value"], 0.0),
            channel=fill(c["channel"], wch),
            fields=_block_fields(c, lambda col: fill(col, 0.0)),
            key_prefix=self.key_prefix,
        )
        return Block(events, fill(c["delay"], -1), fill(c["on_time"], True))

    def _by_channel(self, ch: npt.NDArray[Any]) -> Iterator[tuple[int, I64]]:
        """(channel, positions of its tuples in order) for every channel present.  O(n × channels) or O(n log n)."""
        if self.p.channels <= 16:
            for chan in range(self.p.channels):
                pos = np.flatnonzero(ch == chan)
                if len(pos):
                    yield chan, pos
            return
        order = np.argsort(ch, kind="stable")
        chs = ch[order]
        present = np.unique(chs)
        starts = np.searchsorted(chs, present, side="left")
        ends = np.searchsorted(chs, present, side="right")
        for chan, s, e in zip(present.tolist(), starts.tolist(), ends.tolist(), strict=True):
            yield chan, order[s:e]

    def _count(self, c: dict[str, npt.NDArray[Any]]) -> tuple[I64, I64, I64]:
        """After every ``watermark_every``-th tuple of a channel: that channel's max ts - l."""
        p = self.p
        every, lat = p.watermark_every, p.lateness
        ch = c["channel"]
        ts = c["ts"]
        afters: list[I64] = []
        chans: list[I64] = []
        vals: list[I64] = []
        for chan, pos in self._by_channel(ch):
            s, e = 0, len(pos)
            run = np.maximum.accumulate(np.maximum(ts[pos], self.max_ts[chan]))
            cnt = self.count[chan] + np.arange(1, e - s + 1, dtype=np.int64)
            sel = np.flatnonzero(cnt % every == 0)
            self.max_ts[chan] = run[-1]
            self.count[chan] += e - s
            if not len(sel):
                continue
            v = run[sel] - lat
            prev = np.concatenate(([self.last[chan]], v[:-1]))
            keep = v > prev
            if keep.any():
                self.last[chan] = v[keep][-1]
                afters.append(pos[sel[keep]].astype(np.int64))
                vals.append(v[keep])
                chans.append(np.full(int(keep.sum()), chan, dtype=np.int64))
        if not afters:
            e0 = np.zeros(0, dtype=np.int64)
            return e0, e0, e0
        return np.concatenate(afters), np.concatenate(chans), np.concatenate(vals)

    def _interval(self, c: dict[str, npt.NDArray[Any]]) -> tuple[I64, I64, I64]:
        """Before the first tuple whose arrival crosses a multiple of dt: every channel's max ts - l."""
        p = self.p
        lat = p.lateness
        arr = c["arrival"]
        bucket = arr // p.watermark_interval
        first = int(bucket[0]) if self.bucket is None else self.bucket
        prev = np.concatenate(([first], bucket[:-1]))
        cross = np.flatnonzero(bucket > prev)
        self.bucket = int(bucket[-1])
        ch = c["channel"]
        ts = c["ts"]
        afters: list[I64] = []
        chans: list[I64] = []
        vals: list[I64] = []
        for chan in range(p.channels):
            mine = ch == chan
            if not len(cross):
                if mine.any():
                    self.max_ts[chan] = max(int(self.max_ts[chan]), int(ts[mine].max()))
                continue
            run = np.maximum.accumulate(np.concatenate(([self.max_ts[chan]], np.where(mine, ts, NEG))))
            self.max_ts[chan] = run[-1]
            base = run[cross]  # max over tuples before position cross[i]
            valid = base > NEG
            v = np.where(valid, base - lat, NEG)
            prevv = np.concatenate(([self.last[chan]], v[:-1]))
            keep = valid & (v > prevv)
            if keep.any():
                self.last[chan] = v[keep][-1]
                afters.append(cross[keep].astype(np.int64) - 1)
                vals.append(v[keep])
                chans.append(np.full(int(keep.sum()), chan, dtype=np.int64))
        if not afters:
            e0 = np.zeros(0, dtype=np.int64)
            return e0, e0, e0
        return np.concatenate(afters), np.concatenate(chans), np.concatenate(vals)


# ------------------------------------------------------------------ events


def _block_fields(c: dict[str, npt.NDArray[Any]], fill: Any) -> dict[str, npt.NDArray[np.float64]] | None:
    """The named-field columns of generated columns ``c`` (keys ``f:<name>``), through ``fill`` if given."""
    out = {k[2:]: (v if fill is None else fill(v)) for k, v in c.items() if k.startswith("f:")}
    return out or None


def block_events(block: Block, p: WorkloadParams) -> Iterator[StreamTuple | Watermark]:
    """The events of a block as :class:`~oij.spec.model.StreamTuple` / :class:`~oij.spec.model.Watermark` objects
    (:meth:`oij.reference.columns.EventBlock.events`; ``p`` is the generator's, whose ``key_label`` the block's
    ``key_prefix`` follows).  O(n)."""
    for e in block.events.events():
        if not isinstance(e, End):  # (a generated block has no end)
            yield e


def events_of(gen: WorkloadGenerator, total: int) -> Iterator[Event]:
    """All events of a generator, End included.  Lazy; constant memory."""
    for b in gen.blocks(total):
        yield from block_events(b, gen.p)
    yield End()
