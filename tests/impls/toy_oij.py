"""A toy online interval join, written apart from oij (stdlib only), with switchable bugs.

Used as a command under test: ``python toy_oij.py [BUG]`` reads one oij-jsonl
case on stdin and writes result lines on stdout.  With no BUG it is correct;
each BUG is a mistake real implementations make, and ``oij conform`` must
catch every one (tests/testing/test_conform.py).
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from typing import Any

BUGS = {
    "lower-off-by-one": "the lower bound is one tick too narrow",
    "upper-off-by-one": "the upper bound is one tick too wide",
    "exclusive-ignored": "exclusive flags are ignored",
    "late-le": "late iff ts <= W",
    "no-probe-direction": "a probe never joins bases stored before it",
    "premature-purge": "state dropped when W reaches it, not when W passes it",
    "ties-twice": "a pair with equal timestamps is emitted twice",
    "stale-minmax": "min/max keep probes that already left the window",
    "spurious-left": "(a, null) emitted on arrival when nothing matched yet",
    "watermark-max": "W = max over channels",
    "late-joined": "late tuples still join",
    "key-str": "key 1 equals key \"1\"",
    "aggregate-wrong-side": "aggregates read the base's value",
}


def _float(x: Fraction) -> float | str:
    """An exact sum as the protocol writes it: the nearest double, or "inf"/"-inf" beyond the double range."""
    try:
        return float(x)
    except OverflowError:
        return "inf" if x > 0 else "-inf"


def main(bug: str) -> None:
    lines = [json.loads(x) for x in sys.stdin if x.strip()]
    q = lines[0]
    lo = q["lower"] + (0 if q.get("lower_inclusive", True) or bug == "exclusive-ignored" else 1)
    hi = q["upper"] - (0 if q.get("upper_inclusive", True) or bug == "exclusive-ignored" else 1)
    if bug == "lower-off-by-one":
        lo += 1
    if bug == "upper-off-by-one":
        hi += 1
    agg, left, lateness = q.get("aggregate"), q.get("join") == "left", q.get("lateness")
    chans: list[int | None] = [None] * q.get("channels", 1)
    max_ts: int | None = None
    out: list[str] = []
    state: dict[str, list[dict[str, Any]]] = {}  # key -> stored tuples
    met: dict[int, list[float]] = {}

    def key_of(t: dict[str, Any]) -> str:
        return str(t["key"]) if bug == "key-str" else json.dumps(t["key"])

    def watermark() -> float:
        if lateness is not None:
            return float("-inf") if max_ts is None else max_ts - lateness
        if any(c is None for c in chans) and bug != "watermark-max":
            return float("-inf")
        known = [c for c in chans if c is not None]
        if not known:
            return float("-inf")
        return max(known) if bug == "watermark-max" else min(known)

    def matches(a: dict[str, Any], b: dict[str, Any]) -> bool:
        return bool(a["ts"] + lo <= b["ts"] <= a["ts"] + hi)

    def row(a: dict[str, Any]) -> None:
        vals = met.pop(a["id"])
        if agg is None:
            if left and not vals:
                out.append(json.dumps({"type": "pair", "base": a["id"], "probe": None}))
            return
        n = len(vals)
        v: Any
        if agg == "count":
            v = n
        elif agg == "sum":
            v = _float(sum(map(Fraction, vals), Fraction(0)))
        elif n == 0:
            v = None
        elif agg == "avg":
            v = _float(sum(map(Fraction, vals), Fraction(0)) / n)
        else:
            v = min(vals) if agg == "min" else max(vals)
        out.append(json.dumps({"type": "aggregate", "base": a["id"], "count": n, "value": v}))

    def purge(w: float) -> None:
        for k, ts in state.items():
            keep = []
            for t in ts:
                edge = t["ts"] + hi if t["side"] == "base" else t["ts"] - lo
                gone = w >= edge if bug == "premature-purge" else w > edge
                if gone and t["side"] == "base" and t["id"] in met:
                    row(t)
                if not gone or (agg in ("min", "max") and bug == "stale-minmax" and t["side"] == "probe"):
                    keep.append(t)
            state[k] = keep

    for e in lines[1:]:
        w = watermark()
        if e["type"] == "end":
            for ts in state.values():
                for t in ts:
                    if t["side"] == "base" and t["id"] in met:
                        row(t)
            break
        if e["type"] == "watermark":
            c = e.get("channel", 0)
            chans[c] = e["ts"] if chans[c] is None else max(chans[c], e["ts"])
        else:
            late = e["ts"] <= w if bug == "late-le" else e["ts"] < w
            if late:
                out.append(json.dumps({"type": "late", "id": e["id"]}))
                if bug != "late-joined":
                    continue
            e["value"] = float(e.get("value", 0.0))  # a value is a double (an integer above 2^53 too)
            stored = state.setdefault(key_of(e), [])
            if e["side"] == "base":
                met[e["id"]] = []
            for x in stored:
                if x["side"] == e["side"]:
                    continue
                a, b = (e, x) if e["side"] == "base" else (x, e)
                stale = bug == "stale-minmax" and x["side"] == "probe" and b["ts"] < a["ts"] + lo
                if not (matches(a, b) or (stale and b["ts"] <= a["ts"] + hi)):
                    continue
                if e["side"] == "probe" and bug == "no-probe-direction":
                    continue
                if agg is None:
                    out.append(json.dumps({"type": "pair", "base": a["id"], "probe": b["id"]}))
                    if bug == "ties-twice" and a["ts"] == b["ts"]:
                        out.append(json.dumps({"type": "pair", "base": a["id"], "probe": b["id"]}))
                if a["id"] in met:
                    met[a["id"]].append(a["value"] if bug == "aggregate-wrong-side" else b["value"])
            if e["side"] == "base" and bug == "spurious-left" and left and agg is None and not met[e["id"]]:
                out.append(json.dumps({"type": "pair", "base": e["id"], "probe": None}))
            if not late:
                stored.append(e)
            elif e["side"] == "base":
                row(e)
            if lateness is not None:
                max_ts = e["ts"] if max_ts is None else max(max_ts, e["ts"])
        purge(watermark())
    sys.stdout.write("".join(x + "\n" for x in out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
