r"""Key-OIJ (``--pattern key``): the baseline of the Scale-OIJ study (Flink's interval join design).

Data flow::

    emitter e --hash(key) mod N (static)--> SPSC ring (e, r) --> standard collector of joiner r
        --> KeyJoinState: per key an unsorted probe buffer (append) and the pending base tuples
        --> at W > hi(a): one full scan of the key's probe buffer per base tuple, filtered by the window
        --> pairs / aggregate rows --> result ring r --> driver's sink

Every tuple of a key reaches one joiner (the static hash of
:func:`oij.parallel.runtime.emitter.key_hash`), so no coordination is needed.  A base
tuple is evaluated once, when it is final (W > hi(a), or End): its key's
probe buffer is scanned *entirely* and each entry is compared with the window
(Scale-OIJ §II-C: "a thread may scan through the buffer to filter out
relevant tuples") -- with numpy, the scan is one vectorised comparison, so the
baseline is not made artificially slow, but its work is the whole buffer.

Expiration by lateness: a probe ``b`` can be needed by a base ``a`` with
:math:`a.ts + \ell' \le b.ts`; every base still to be evaluated has
:math:`a.ts \ge W - \max(u', 0)` (pending bases are not final, future ones are
not late), so ``b`` is dropped once :math:`b.ts < W - \max(u', 0) + \ell'`.  In
lateness mode W = max ts - l, so the buffer spans about :math:`|w| + l` of
event time and the scan's *effectiveness* (Eq. 1: in-window / visited) is
about :math:`|w| / (|w| + l)` -- the Fig. 7 effect.

A joining condition filters the scan's in-window entries
(:func:`oij.reference.cond.cond_mask` on the operands each entry keeps) before
they make pairs or enter an aggregate; expiration is unchanged.

Sums are exact (:mod:`oij.parallel.shared.aggr`) and travel exact to the sink
(:mod:`oij.parallel.runtime.exactsum`), which rounds them once.  A row's latency is measured from
the base tuple's creation (``born``).

Processes and shared memory: none created here; the engine runs on the
runtime's replica processes (:mod:`oij.parallel.shared.teamrun` creates and frees
the rings).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from oij.parallel.registry import EngineOptions, EngineRun, register
from oij.parallel.runtime.exactsum import ROW, piece_records
from oij.parallel.runtime.replica import _Job
from oij.parallel.runtime.ring import RESULT
from oij.parallel.runtime.store import NEG, empty_column, operand_spec
from oij.parallel.shared.aggr import Acc
from oij.reference.cond import cond_mask, operand_columns
from oij.spec.model import Comparison, Event, Query

I64 = npt.NDArray[np.int64]
I64MAX = int(np.iinfo(np.int64).max)
# an accumulator's int64 sum (units of 2**-10, each value below 2**40 of them) is exact below this many matches
# per base (oij.parallel.shared.aggr); a base with more fails the run rather than wrap
MAX_MATCHES = 1 << 23
BLOCK = 1 << 20  # at most this many (base, probe) comparisons per vectorised scan


class _Buf:
    """A growable column set (append-only until filtered)."""

    __slots__ = ("cols", "n")

    def __init__(self, spec: dict[str, Any]) -> None:
        self.cols = {k: empty_column(t, 8) for k, t in spec.items()}
        self.n = 0

    def append(self, new: dict[str, npt.NDArray[Any]]) -> None:
        k = len(next(iter(new.values())))
        need = self.n + k
        cap = len(self.cols["ts"])
        if need > cap:
            cap = max(need, 2 * cap)
            for name, a in self.cols.items():
                b = np.empty((cap, *a.shape[1:]), dtype=a.dtype)
                b[: self.n] = a[: self.n]
                self.cols[name] = b
        for name, a in self.cols.items():
            a[self.n: need] = new[name]
        self.n = need

    def view(self, name: str) -> npt.NDArray[Any]:
        return self.cols[name][: self.n]

    def keep(self, mask: npt.NDArray[np.bool_]) -> None:
        m = int(mask.sum())
        for a in self.cols.values():
            a[:m] = a[: self.n][mask]
        self.n = m


P_SPEC = {"ts": np.int64, "value": np.float64, "id": np.int64, "born": np.int64}
B_SPEC = {"ts": np.int64, "id": np.int64, "born": np.int64}


class _Merges:
    merges = 0


def rows(ids: I64, acc: Acc, born: I64) -> npt.NDArray[Any]:
    """Aggregate (partial) rows of fan 1 for bases ``ids`` from accumulators ``acc``, each sum exact (its int64
    part and the pieces of the rest, :mod:`oij.parallel.runtime.exactsum`): the pieces' records come first."""
    sums = acc.kind in ("sum", "avg")
    if sums and len(ids) and int(acc.n.max()) >= MAX_MATCHES:
        raise RuntimeError(f"a base matched {int(acc.n.max())} probes: exact int64 sums hold {MAX_MATCHES - 1}")
    s, extra = piece_records({int(ids[g]): t for g, t in acc.big.items()} if sums else {}, ids)
    r = np.empty(len(ids), dtype=RESULT)
    r["a"] = ids
    r["b"] = -1
    r["n"] = acc.n
    r["si"] = acc.si if sums else 0
    r["s"] = s
    r["mn"] = acc.mn
    r["mx"] = acc.mx
    r["born"] = born
    r["fan"] = 1
    r["kind"] = ROW
    return np.concatenate((extra, r)) if len(extra) else r


def pairs(a: I64, b: I64, born: I64) -> npt.NDArray[Any]:
    r = np.empty(len(a), dtype=RESULT)
    r["a"] = a
    r["b"] = b
    r["born"] = born
    r["kind"] = 0
    r["fan"] = 1
    return r


class KeyJoinState:
    """Key-OIJ's state and join of one joiner (module docstring); the interface of
    :class:`oij.parallel.runtime.store.JoinState`."""

    def __init__(self, lo: int, hi: int, *, emit_pairs: bool, partial: bool, kind: str | None,
                 cond: tuple[Comparison, ...] = ()) -> None:
        self.lo, self.hi = lo, hi
        self.cond = cond
        self.extra = operand_spec(len(cond))
        self.pairs, self.partial, self.kind = emit_pairs, partial, kind
        self.probe: dict[int, _Buf] = {}
        self.base: dict[int, _Buf] = {}
        self.pmin = np.full(0, I64MAX, dtype=np.int64)  # per key code: min probe ts (I64MAX: none)
        self.bmin = np.full(0, I64MAX, dtype=np.int64)  # per key code: min pending base ts
        self.bases = self.probes = _Merges()
        self.received = self.stored = self.comparisons = 0
        self.emitted_pairs = self.emitted_rows = 0
        self.state_max = 0
        self.size = 0
        self.lookups = 0  # base tuples evaluated
        self.in_window = 0  # entries in their windows
        self.ratio_sum = 0.0  # sum over lookups that visited something of in-window / visited (Eq. 1)
        self.ratio_n = 0
        self.agg_work = 0
        self.fallback = 0
        self.trace_on = False
        self.trace: list[Any] = []

    def _grow(self, kmax: int) -> None:
        if kmax >= len(self.pmin):
            n = max(kmax + 1, 2 * len(self.pmin), 64)
            for name in ("pmin", "bmin"):
                a = np.full(n, I64MAX, dtype=np.int64)
                old = getattr(self, name)
                a[: len(old)] = old
                setattr(self, name, a)

    def process(self, recs: npt.NDArray[Any]) -> list[npt.NDArray[Any]]:
        n = len(recs)
        if n == 0:
            return []
        self.received += n
        self.stored += n
        self.size += n
        self._grow(int(recs["key"].max()))
        order = np.lexsort((recs["side"], recs["key"]))
        r = recs[order]
        cut = np.flatnonzero((np.diff(r["key"]) != 0) | (np.diff(r["side"]) != 0)) + 1
        for part in np.split(r, cut):
            k = int(part["key"][0])
            if part["side"][0] == 0:
                buf = self.base.get(k) or self.base.setdefault(k, _Buf({**B_SPEC, **self.extra}))
                buf.append({"ts": part["ts"], "id": part["id"], "born": part["born"],
                            **operand_columns(part, self.cond)})
                self.bmin[k] = min(int(self.bmin[k]), int(part["ts"].min()))
            else:
                buf = self.probe.get(k) or self.probe.setdefault(k, _Buf({**P_SPEC, **self.extra}))
                buf.append({"ts": part["ts"], "value": part["value"], "id": part["id"], "born": part["born"],
                            **operand_columns(part, self.cond)})
                self.pmin[k] = min(int(self.pmin[k]), int(part["ts"].min()))
        self.state_max = max(self.state_max, self.size)
        return []

    def advance(self, w: Any, force: bool = False) -> list[npt.NDArray[Any]]:
        """Evaluate the bases that became final (one full scan each), then expire probes."""
        w = int(w)
        out: list[npt.NDArray[Any]] = []
        if force:
            keys = list(self.base)
        elif w == NEG:
            return out
        else:
            thr = w - self.hi  # final iff ts + hi < w iff ts < w - hi
            keys = np.flatnonzero(self.bmin < thr).tolist() if thr > NEG else []
        for k in keys:
            out.extend(self._evaluate(k, None if force else w - self.hi))
        if not force:
            pthr = w - max(self.hi, 0) + self.lo
            if pthr > NEG:
                for k in np.flatnonzero(self.pmin < pthr).tolist():
                    buf = self.probe[k]
                    ts = buf.view("ts")
                    live = ts >= pthr
                    self.size -= buf.n - int(live.sum())
                    buf.keep(live)
                    self.pmin[k] = int(ts[: buf.n].min()) if buf.n else I64MAX
        return out

    def _evaluate(self, k: int, thr: int | None) -> list[npt.NDArray[Any]]:
        bb = self.base[k]
        bts = bb.view("ts")
        fin = np.ones(bb.n, dtype=np.bool_) if thr is None else bts < thr
        f_ts, f_id, f_born = bts[fin], bb.view("id")[fin], bb.view("born")[fin]
        f_ch = bb.view("ch")[fin] if self.extra else None
        m = len(f_ts)
        self.lookups += m
        pb = self.probe.get(k)
        np_ = pb.n if pb is not None else 0
        out: list[npt.NDArray[Any]] = []
        acc = Acc(m, self.kind if self.partial else None)
        if np_ and m:
            pts = pb.view("ts") if pb is not None else np.empty(0, np.int64)
            step = max(1, BLOCK // np_)
            for a in range(0, m, step):
                t = f_ts[a: a + step]
                # the full scan: every base of the block is compared with every buffered probe of its key
                mask = (pts[None, :] >= t[:, None] + self.lo) & (pts[None, :] <= t[:, None] + self.hi)
                self.comparisons += mask.size
                fi, pj = np.nonzero(mask)
                hits = np.bincount(fi, minlength=len(t))
                self.in_window += len(fi)
                self.ratio_sum += float((hits / np_).sum())
                self.ratio_n += len(t)
                if f_ch is not None and len(fi):
                    assert pb is not None
                    keep = cond_mask(self.cond, f_ch[a:][fi], pb.view("ch")[pj], pb.view("cl")[pj])
                    fi, pj = fi[keep], pj[keep]
                if self.pairs and len(fi):
                    assert pb is not None
                    out.append(pairs(f_id[a:][fi], pb.view("id")[pj],
                                     np.maximum(f_born[a:][fi], pb.view("born")[pj])))
                    self.emitted_pairs += len(fi)
                if self.partial:
                    assert pb is not None
                    sub = Acc(len(t), acc.kind)
                    sub.add_values(fi, pb.view("value")[pj])
                    acc.n[a: a + len(t)] = sub.n
                    acc.si[a: a + len(t)] = sub.si
                    acc.mn[a: a + len(t)] = sub.mn
                    acc.mx[a: a + len(t)] = sub.mx
                    for g, v in sub.big.items():
                        acc.big[a + g] = v
                    acc.work += sub.work
                    acc.fallback += sub.fallback
        if self.partial and m:
            out.append(rows(f_id, acc, f_born))
            self.emitted_rows += m
            self.agg_work += acc.work
            self.fallback += acc.fallback
        keep = ~fin
        bb.keep(keep)
        self.size -= m
        self.bmin[k] = int(bb.view("ts").min()) if bb.n else I64MAX
        if not bb.n:
            del self.base[k]
        return out


class KeyJob(_Job):
    """The replica-side job of ``key`` (loaded through the runtime's job hook)."""

    def __init__(self, me: int, spec: dict[str, Any], ctl: Any, up: Any, abort: npt.NDArray[np.int64],
                 ppid: int) -> None:
        super().__init__(me, spec, ctl, up, abort, ppid)
        self.kjs = KeyJoinState(spec["lo"], spec["hi"], emit_pairs=spec["pairs"], partial=spec["partial"],
                                kind=spec["aggregate"], cond=spec.get("cond", ()))
        # _Job.run drives self.js only through process/advance/trace_on, which KeyJoinState has too;
        # its JoinState-specific statistics are read in our own run() from self.kjs instead.
        self.js = self.kjs  # type: ignore[assignment]

    def run(self) -> dict[str, Any]:
        stats = super().run()
        js = self.kjs
        stats.update({
            "lookups": js.lookups,
            "visited": js.comparisons,
            "in_window": js.in_window,
            "ratio_sum": js.ratio_sum,
            "ratio_n": js.ratio_n,
            "agg_work": js.agg_work,
            "agg_recompute_work": js.agg_work,
            "sum_fallback_windows": js.fallback,
        })
        return stats


@register("key", "Key-OIJ: static hash(key) -> joiner, unsorted per-key buffers, a full scan per base tuple, "
          "expiration by lateness (processes + shared memory)")
def key_engine(q: Query, events: Sequence[Event], options: EngineOptions) -> EngineRun:
    from oij.parallel.shared.teamrun import run_engine

    return run_engine("key", q, events, options)
