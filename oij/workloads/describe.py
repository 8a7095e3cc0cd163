"""What a workload is: one streaming pass over an event file (``oij describe``).

Reported: tuples per side, channel and key (top keys, skew), the event-time
span and rates, the disorder distribution (for each tuple, how far its ts is
below the largest ts that arrived before it), watermarks per channel, and
from the reference oracle run over the same events: the exact fraction of
late tuples under the file's watermarks (or lateness), the exact number of
matches per base tuple, and the state the oracle retains (max and mean).
The expected matches per window are also estimated from the observed rates
and key shares, sum_k (base_k / B) * (probe_k / span) * |window|.

Memory: O(keys + channels) for the statistics plus the oracle's state.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from oij.reference.oracle import Oracle
from oij.spec.model import End, Event, Query, StreamTuple, Watermark

LAG_BINS = 64


def _lag_bin(lag: int) -> int:
    """Bin 0: lag 0 (in order); bin i >= 1: lag in [2^(i-1), 2^i)."""
    return lag.bit_length()


def describe_events(
    q: Query, events: Iterable[Event], *, oracle: bool = True, limit: int | None = None, sample_every: int = 1024
) -> dict[str, Any]:
    """Statistics of an event sequence under query ``q`` (see the module docstring).

    ``limit`` stops after that many events (the oracle then ends the stream
    there).  O(n) time; the oracle dominates.
    """
    side_n = {"base": 0, "probe": 0}
    key_n: dict[str, Counter[Any]] = {"base": Counter(), "probe": Counter()}
    chan_n: Counter[int] = Counter()
    wm_n: Counter[int] = Counter()
    wm_regress = 0
    wm_last: dict[int, int] = {}
    lag_hist = [0] * LAG_BINS
    lag_max = 0
    max_seen: int | None = None
    ts_min: int | None = None
    o = Oracle(q) if oracle else None
    matches = 0
    late = 0
    state_max = 0
    state_sum = 0
    state_samples = 0
    n = 0
    late_bases = 0
    ended = False

    def drain() -> None:
        nonlocal matches, late
        assert o is not None
        if o.aggregates:
            matches += sum(r[1] for r in o.aggregates)
            o.aggregates = []
        if o.pairs:
            matches += sum(1 for _, pr in o.pairs if pr is not None)
            o.pairs = []
        late += len(o.late)
        o.late = []

    for e in events:
        if limit is not None and n >= limit:
            break
        n += 1
        if type(e) is StreamTuple:
            side_n[e.side] += 1
            key_n[e.side][e.key] += 1
            chan_n[e.channel] += 1
            ts = e.ts
            if max_seen is None or ts_min is None:
                max_seen = ts_min = ts
                lag_hist[0] += 1
            elif ts < max_seen:
                lag = max_seen - ts
                lag_hist[min(_lag_bin(lag), LAG_BINS - 1)] += 1
                if lag > lag_max:
                    lag_max = lag
                if ts < ts_min:
                    ts_min = ts
            else:
                lag_hist[0] += 1
                max_seen = ts
            if o is not None:
                before = len(o.late)
                o.on_tuple(e)
                if e.side == "base" and len(o.late) > before:
                    late_bases += 1
        elif type(e) is Watermark:
            wm_n[e.channel] += 1
            if e.channel in wm_last and e.ts < wm_last[e.channel]:
                wm_regress += 1
            wm_last[e.channel] = max(e.ts, wm_last.get(e.channel, e.ts))
            if o is not None:
                o.on_watermark(e)
        elif type(e) is End:
            ended = True
        if o is not None and n % sample_every == 0:
            state_max = max(state_max, o.stored)
            state_sum += o.stored
            state_samples += 1
            drain()
    if o is not None:
        state_max = max(state_max, o.stored)
        o.on_end()
        drain()
    state_mean = state_sum / state_samples if state_samples else float(state_max)
    return _summary(
        q, n, ended, side_n, key_n, chan_n, wm_n, wm_regress, lag_hist, lag_max, ts_min, max_seen,
        o is not None, matches, late, late_bases, state_max, state_mean,
    )  # fmt: skip


def _quantile(hist: list[int], total: int, qn: float) -> int:
    """Upper edge of the bin holding the qn-quantile (0 for in-order)."""
    if total == 0:
        return 0
    need = qn * total
    acc = 0
    for i, c in enumerate(hist):
        acc += c
        if acc >= need:
            return 0 if i == 0 else (1 << i) - 1
    return (1 << (len(hist) - 1)) - 1


def _summary(
    q: Query,
    n: int,
    ended: bool,
    side_n: dict[str, int],
    key_n: dict[str, Counter[Any]],
    chan_n: Counter[int],
    wm_n: Counter[int],
    wm_regress: int,
    lag_hist: list[int],
    lag_max: int,
    ts_min: int | None,
    ts_max: int | None,
    ran_oracle: bool,
    matches: int,
    late: int,
    late_bases: int,
    state_max: int,
    state_mean: float,
) -> dict[str, Any]:
    tuples = side_n["base"] + side_n["probe"]
    all_keys: Counter[Any] = key_n["base"] + key_n["probe"]
    u = len(all_keys)
    top = all_keys.most_common(10)
    counts = sorted(all_keys.values(), reverse=True)

    def top_share(frac: float) -> float:
        if not counts:
            return 0.0
        k = max(1, math.ceil(frac * len(counts)))
        return sum(counts[:k]) / tuples

    chi2 = 0.0
    if u > 1:
        mean = tuples / u
        chi2 = sum((c - mean) ** 2 / mean for c in counts)
    span = (ts_max - ts_min) if ts_min is not None and ts_max is not None else 0
    width = q.upper - q.lower
    est = 0.0
    if span > 0 and side_n["base"]:
        est = sum(
            (key_n["base"][k] / side_n["base"]) * (key_n["probe"].get(k, 0) / span) * width for k in key_n["base"]
        )
    out_of_order = tuples - lag_hist[0]
    d: dict[str, Any] = {
        "events": n,
        "complete": ended,
        "tuples": tuples,
        "base": side_n["base"],
        "probe": side_n["probe"],
        "watermarks": sum(wm_n.values()),
        "watermarks_per_channel": {str(c): wm_n[c] for c in sorted(wm_n)},
        "watermark_regressions": wm_regress,
        "tuples_per_channel": {str(c): chan_n[c] for c in sorted(chan_n)},
        "ts_min": ts_min,
        "ts_max": ts_max,
        "span": span,
        "base_rate_per_s": side_n["base"] / span * 1e6 if span else None,
        "probe_rate_per_s": side_n["probe"] / span * 1e6 if span else None,
        "keys": u,
        "top_keys": [[k, c, c / tuples, key_n["base"][k], key_n["probe"][k]] for k, c in top],
        "top_key_share": top[0][1] / tuples if top else 0.0,
        "top_1pct_keys_share": top_share(0.01),
        "top_10pct_keys_share": top_share(0.10),
        "top_20pct_keys_share": top_share(0.20),
        "chi2_uniform": chi2,
        "chi2_df": max(u - 1, 0),
        "out_of_order": out_of_order,
        "out_of_order_fraction": out_of_order / tuples if tuples else 0.0,
        "disorder_max": lag_max,
        "disorder_p50": _quantile(lag_hist, tuples, 0.5),
        "disorder_p90": _quantile(lag_hist, tuples, 0.9),
        "disorder_p99": _quantile(lag_hist, tuples, 0.99),
        "disorder_p999": _quantile(lag_hist, tuples, 0.999),
        "disorder_histogram": {("0" if i == 0 else f"<{1 << i}"): c for i, c in enumerate(lag_hist) if c},
        "window": width,
        "expected_matches_per_window_estimate": est,
    }
    if ran_oracle:
        on_time_bases = side_n["base"] - late_bases
        d.update(
            {
                "late": late,
                "late_fraction": late / tuples if tuples else 0.0,
                "matches": matches,
                "late_bases": late_bases,
                "matches_per_base": matches / on_time_bases if on_time_bases else 0.0,
                "state_max": state_max,
                "state_mean": state_mean,
            }
        )
    return d


def format_description(path: str, q: Query, d: dict[str, Any]) -> str:
    """The human-readable report of :func:`describe_events`."""
    lines = [f"file: {path}"]
    lat = f" lateness={q.lateness}" if q.lateness is not None else " (watermark mode)"
    agg = q.aggregate or "pairs"
    lines.append(
        f"query: [{q.lower}, {q.upper}] (window {d['window']} us), {agg}, {q.join} join, channels={q.channels}{lat}"
    )
    lines.append(
        f"events: {d['events']}{'' if d['complete'] else ' (incomplete: no end row read)'}: "
        f"{d['tuples']} tuples (base {d['base']}, probe {d['probe']}), {d['watermarks']} watermarks"
    )
    if d["span"]:
        lines.append(
            f"time: ts {d['ts_min']} .. {d['ts_max']} ({d['span'] / 1e6:.6g} s of event time at 1 tick = 1 us); "
            f"base {d['base_rate_per_s']:.6g}/s, probe {d['probe_rate_per_s']:.6g}/s"
        )
    tops = ", ".join(f"{k!r}: {c} ({s:.1%}; base {b}, probe {pr})" for k, c, s, b, pr in d["top_keys"][:5])
    lines.append(f"keys: {d['keys']} distinct; top: {tops}")
    lines.append(
        f"skew: hottest key {d['top_key_share']:.1%} of tuples; top 1% of keys {d['top_1pct_keys_share']:.1%}, "
        f"top 10% {d['top_10pct_keys_share']:.1%}, top 20% {d['top_20pct_keys_share']:.1%}; "
        f"chi-square vs uniform {d['chi2_uniform']:.1f} on {d['chi2_df']} df"
    )
    lines.append(
        f"disorder: {d['out_of_order_fraction']:.2%} of tuples arrive after a larger ts; lag (us, bin upper edge) "
        f"p50 {d['disorder_p50']}, p90 {d['disorder_p90']}, p99 {d['disorder_p99']}, p99.9 {d['disorder_p999']}, "
        f"max {d['disorder_max']}"
    )
    if d["watermarks"]:
        per = ", ".join(f"ch{c}: {v}" for c, v in d["watermarks_per_channel"].items())
        lines.append(f"watermarks: {per}; regressions {d['watermark_regressions']}")
    est = d["expected_matches_per_window_estimate"]
    if "late" in d:
        lines.append(f"late: {d['late']} tuples ({d['late_fraction']:.3%}) under the file's watermarks (oracle)")
        lines.append(
            f"matches per on-time base tuple: {d['matches_per_base']:.4g} exact (oracle), "
            f"{est:.4g} estimated from rates"
        )
        lines.append(f"oracle state: max {d['state_max']} tuples, mean {d['state_mean']:.0f}")
    else:
        lines.append(f"matches per base tuple: {est:.4g} estimated from rates")
    return "\n".join(lines) + "\n"
