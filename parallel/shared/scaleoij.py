r"""Scale-OIJ (``--pattern scale``): shared time-travel indexes, virtual teams, dynamic schedule,
incremental aggregation.

Data flow::

    driver: ScaleRouter -- a tuple of key k goes to a random member of team(partition(k)) --> rings
            Alg. 3 every ``schedule_every`` tuples --> TeamMap (grow-only)           (oij.parallel.shared.teamrun)
    joiner j (ScaleJob, one per replica process):
        probes  --> append to j's own index (single writer)         --> publish run, then prog_j
        bases   --> pending at j
        ready bases (the hazard rule below) --> read the indexes of every member of the key's team
                --> pairs / aggregate rows (incremental: subtract-on-evict, two stacks) --> result ring j
        publish eval_j; quiescent point on every index; LSM maintenance of j's own index (evicts)

The concurrency hazard and the rule that excludes it.  Two members of a
team may process a base tuple a and a probe tuple b of the same key at the
same time: if the member evaluating a reads the team's indexes before the
other member has inserted b, the pair is lost (and a design that let the
probe side also look for bases could emit it twice -- PPOIJ Examples
4.1/4.2).  Here a probe never looks for bases: every pair is made by the one
joiner that evaluates its base, once, from the indexes.  So the only thing
to guarantee is that every probe of the window is *in* some member's index
when a is evaluated.  The rule: **a is evaluated only when every member of
its team has insert progress** :math:`prog_j > hi(a) = a.ts + u'`.

Argument.  ``prog_j`` is the minimum, over j's input channels, of the
largest W that channel delivered, stored after the runs holding the probes
delivered before it are published.  Ws are global (decided on the arrival
order by the emitters) and a tuple that arrives after W was in force has
ts >= W or is late (dropped).  Let b be an on-time probe of a's key with
b.ts <= hi(a) < prog_j routed to member j.  If j had not yet inserted b, b
would sit behind the batch that carried W >= prog_j on its channel, so b
arrived after that W was in force and b.ts >= prog_j > hi(a): contradiction.
So b is in j's index, and a's reader, which loads prog_j before the
directory (load->load order), sees its run.  Membership: the evaluating
joiner loads all ``prog`` words *first* and the team map *after*; if b was
routed to a member added by a later schedule, the driver published that
team word before routing b, and b reached the member, which then stored
``prog`` -- so if the reader's ``prog`` load saw that store, its later team
load sees the member (causality of x86 stores).  Teams never shrink, so no
member's tuples are ever out of reach.  Eviction: a probe is dropped by its
owner only when :math:`b.ts < \min_j eval_j + \ell'`, where ``eval_j``
bounds the ts of every base j may still evaluate (pending, in flight:
>= prog_j, or future).  Same-key pairs are thus made exactly once, whatever
the interleaving; the same rule makes a's aggregate final.

A joining condition filters each window's entries before they make pairs
or enter an aggregate (:func:`oij.reference.cond.cond_mask`; every entry of the
index keeps its cond operands, :mod:`oij.parallel.shared.swmr`).  With a cond the
aggregate folds the passing entries one by one instead of sliding over the
run (the two-stack window cannot skip the entries a base rejects).  Readiness
and eviction are unchanged: they depend on times and W only.

Negative controls (``rule``): ``self`` waits for the evaluating joiner's
own progress only (the hazard: a lagging team member's probes are missed);
``arrival`` evaluates bases on arrival.  Both must fail the differential
tests (``tests/parallel/test_scale.py``).

Processes and shared memory: none created here (:mod:`oij.parallel.shared.teamrun`
owns the segments; the joiner attaches its own index as the writer and every
other index as a reader, and closes them when the job ends).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from oij.parallel.registry import EngineOptions, EngineRun, register
from oij.parallel.runtime.replica import _Job
from oij.parallel.runtime.ring import KIND_CLOSE, KIND_DATA, KIND_END
from oij.parallel.runtime.store import expand
from oij.parallel.shared.aggr import Acc
from oij.parallel.shared.keyoij import _Buf, pairs, rows
from oij.parallel.shared.swmr import EVAL, PROG, Index, wait_briefly
from oij.parallel.shared.teams import TeamMap, members, partition_of
from oij.reference.cond import cond_mask, operand_columns
from oij.spec.model import Comparison, Event, Query

I64 = npt.NDArray[np.int64]
I64MAX = int(np.iinfo(np.int64).max)
NEG = int(np.iinfo(np.int64).min)
PEND = {"ts": np.int64, "id": np.int64, "born": np.int64, "key": np.int64}


def ranges(cols: dict[str, npt.NDArray[Any]], n: int, qk: I64, qlo: I64, qhi: I64) -> tuple[I64, I64]:
    """Per query, the run [s, e) of entries of key qk with qlo <= ts <= qhi (four binary searches)."""
    sts, comp = cols["sts"], cols["comp"]
    rlo = np.searchsorted(sts, qlo, "left")
    rhi = np.maximum(np.searchsorted(sts, qhi, "right"), rlo)
    base = qk * (n + 1)
    s: I64 = np.searchsorted(comp, base + rlo, "left")
    e: I64 = np.searchsorted(comp, base + rhi, "left")
    return s, e


RULES = ("team", "self", "arrival")


def ready_mask(rule: str, end: I64, progs: I64, me: int, masks: I64) -> tuple[npt.NDArray[np.bool_], int]:
    r"""Which pending bases joiner ``me`` may evaluate now: the hazard rule of the module docstring.

    ``end[i]`` is :math:`hi(a_i) = a_i.ts + u'`, ``masks[i]`` the team (bit
    mask of joiners) of :math:`a_i`'s partition, ``progs[j]`` the insert
    progress joiner j has published.  Rule ``team`` (Scale-OIJ's, the
    engine's default): :math:`hi(a) < \min_{j \in team(a)} prog_j`; the
    negative controls ``self``: :math:`hi(a) < prog_{me}` and ``arrival``:
    always.  Also returns how many bases ``team`` holds back that ``self``
    would have let through (the hazard waits).  Pure; O(len(end) + teams x
    joiners).  The model checker (:mod:`oij.proofs.shared`) calls it as it is.
    """
    if rule == "arrival":
        return np.ones(len(end), dtype=np.bool_), 0
    own = end < progs[me]
    if rule == "self":
        return own, 0
    if rule != "team":
        raise ValueError(f"unknown rule {rule!r}; known: {', '.join(RULES)}")
    minprog = np.empty(len(end), dtype=np.int64)
    for u in np.unique(masks).tolist():
        minprog[masks == u] = min(int(progs[j]) for j in members(u))
    ready = end < minprog
    return ready, int(np.count_nonzero(own & ~ready))


def eviction_bound(evals: Sequence[int], lo: int) -> int | None:
    r"""The owner of an index may drop its probes with :math:`ts < \min_j eval_j + \ell'` (None: drop nothing).

    ``evals[j]`` bounds the ts of every base joiner j may still evaluate
    (module docstring); a probe below every such base's window start is
    needed by none.  None while some joiner has published nothing yet (-inf)
    or every joiner is done (+inf).  Pure; O(joiners).
    """
    emin = min(evals)
    return None if emin in (NEG, I64MAX) else emin + lo


class ScaleJob(_Job):
    """The replica-side job of ``scale`` (module docstring)."""

    def __init__(self, me: int, spec: dict[str, Any], ctl: Any, up: Any, abort: npt.NDArray[np.int64],
                 ppid: int) -> None:
        super().__init__(me, spec, ctl, up, abort, ppid)
        self.idx: list[Index] = []
        for r, s in enumerate(spec["indexes"]):
            self.idx.append(Index.attach(s, r == me, me))
        self.own = self.idx[me]
        self.team: TeamMap | None = TeamMap.attach(spec["teams"])
        self.lo, self.hi = int(spec["lo"]), int(spec["hi"])
        self.parts = int(spec["partitions"])
        self.rule = spec["rule"]
        self.incremental = bool(spec["incremental"])
        self.emit_pairs = bool(spec["pairs"])
        self.partial = bool(spec["partial"])
        self.kind = spec["aggregate"] if self.partial else None
        self.cond: tuple[Comparison, ...] = tuple(spec.get("cond", ()))
        k = len(self.cond)
        self.pend = _Buf({**PEND, "ch": (np.float64, (k,))} if k else PEND)
        self.received = self.inserted = self.evaluated = 0
        self.emitted_pairs = self.emitted_rows = 0
        self.in_window = self.search_steps = self.ratio_n = 0
        self.agg_work = self.agg_recompute = self.fallback = 0
        self.hazard_waits = 0
        self.state_max = 0
        self.wait = wait_briefly(self.check, self._quiesce)

    def close(self) -> None:
        super().close()
        for ix in self.idx:
            ix.close()
        self.idx = []
        if self.team is not None:
            self.team.close()
            self.team = None

    def _quiesce(self) -> None:
        for ix in self.idx:
            ix.quiesce()

    # ------------------------------------------------------------------ main loop

    def run(self) -> dict[str, Any]:
        spec = self.spec
        fail_after = spec.get("fail_after")
        stall = spec.get("stall", False)
        lag = float(spec.get("lag") or 0.0)
        idle = 0
        while True:
            finished = self.col.finished()
            if finished and self.pend.n == 0:
                break
            worked = False
            if finished:
                self.own.put(PROG, I64MAX)
            elif stall:
                self.check()
                time.sleep(0.01)
                continue
            else:
                got = self.col.poll()
                if got:
                    worked = True
                    probes = []
                    for i, b in got:
                        if b.kind == KIND_DATA:
                            self.batches += 1
                            if fail_after is not None and self.batches > fail_after:
                                raise RuntimeError(f"injected failure after {fail_after} batches")
                            r = b.recs
                            self.received += len(r)
                            isb = r["side"] == 0
                            if not isb.all():
                                probes.append(r[~isb])
                            if isb.any():
                                rb = r[isb]
                                self.pend.append({"ts": rb["ts"], "id": rb["id"], "born": rb["born"],
                                                  "key": rb["key"], **({"ch": rb["ch"]} if self.cond else {})})
                            if b.wm > self.wc[i]:
                                self.wc[i] = b.wm
                        elif b.kind == KIND_CLOSE and b.wm > self.wc[i]:
                            self.wc[i] = b.wm
                        elif b.kind == KIND_END:
                            self.ended[i] = True
                    if probes:
                        if lag:
                            time.sleep(lag)
                        p = np.concatenate(probes)
                        self.own.append({"ts": p["ts"], "key": p["key"], "value": p["value"], "id": p["id"],
                                         "born": p["born"], **operand_columns(p, self.cond)}, self.wait)
                        self.inserted += len(p)
                    # the runs are published; now the progress they cover
                    self.own.put(PROG, self._global_w() if not self.col.finished() else I64MAX)
            if self.pend.n:
                out = self._evaluate()
                if out:
                    self.push(out)
                    worked = True
            prog = self.own.get(PROG)
            pmin = int(self.pend.view("ts").min()) if self.pend.n else I64MAX
            self.own.put(EVAL, min(prog, pmin))
            self._quiesce()
            self.state_max = max(self.state_max, int(self.own.get(3 * 8)) + self.pend.n)
            if worked or idle % 64 == 0:
                self.own.compact(eviction_bound([ix.get(EVAL) for ix in self.idx], self.lo), self.wait)
            if worked:
                idle = 0
            else:
                idle += 1
                self.waits += 1
                self.check()
                time.sleep(0 if idle < 4 else min(1e-5 * idle, 1e-3))
        self.own.put(PROG, I64MAX)
        self.own.put(EVAL, I64MAX)
        for ix in self.idx:
            ix.offline()
        self.push([], KIND_END)
        return {
            "replica": self.me,
            "received": self.received,
            "stored": self.received,
            "inserted": self.inserted,
            "comparisons": self.in_window,
            "pairs": self.emitted_pairs,
            "rows": self.emitted_rows,
            "batches": self.batches,
            "result_batches": self.result_batches,
            "lookups": self.evaluated,
            "visited": self.in_window,
            "in_window": self.in_window,
            "search_steps": self.search_steps,
            "ratio_sum": float(self.ratio_n),
            "ratio_n": self.ratio_n,
            "agg_work": self.agg_work,
            "agg_recompute_work": self.agg_recompute,
            "sum_fallback_windows": self.fallback,
            "hazard_waits": self.hazard_waits,
            "index_merges": self.own.merges,
            "index_evicted": self.own.evicted,
            "index_waits": self.own.waits,
            "state_max": self.state_max,
            "idle_waits": self.waits,
        }

    # ------------------------------------------------------------------ evaluation

    def _evaluate(self) -> list[npt.NDArray[Any]]:
        progs = np.array([ix.get(PROG) for ix in self.idx], dtype=np.int64)  # progress first ...
        assert self.team is not None
        pk = self.pend.view("key")
        part = partition_of(pk, self.parts)
        mk = self.team.masks[part].copy()  # ... then the teams (module docstring)
        pts = self.pend.view("ts")
        ready, held = ready_mask(self.rule, pts + self.hi, progs, self.me, mk)
        self.hazard_waits += held
        if not ready.any():
            return []
        sel = np.flatnonzero(ready)
        order = sel[np.lexsort((pts[sel], pk[sel]))]
        out: list[npt.NDArray[Any]] = []
        r_ts, r_id, r_born, r_key, r_mask = pts[order], self.pend.view("id")[order], \
            self.pend.view("born")[order], pk[order], mk[order]
        r_ch = self.pend.view("ch")[order] if self.cond else None
        for u in np.unique(r_mask).tolist():
            g = np.flatnonzero(r_mask == u)
            out.extend(self._join(r_key[g], r_ts[g], r_id[g], r_born[g], members(u),
                                  None if r_ch is None else r_ch[g]))
        self.evaluated += len(order)
        self.pend.keep(~ready)
        return out

    def _join(self, qk: I64, qts: I64, qid: I64, qborn: I64, team: list[int],
              qch: npt.NDArray[np.float64] | None = None) -> list[npt.NDArray[Any]]:
        m = len(qk)
        qlo, qhi = qts + self.lo, qts + self.hi
        acc = Acc(m, self.kind) if self.partial else None
        hit = np.zeros(m, dtype=np.int64)
        out: list[npt.NDArray[Any]] = []
        for j in team:
            ix = self.idx[j]
            for off, n in ix.snapshot():
                cols = ix.columns(off, n)
                s, e = ranges(cols, n, qk, qlo, qhi)
                cnt = e - s
                hit += cnt
                self.search_steps += 4 * m * max(1, math.ceil(math.log2(n + 1)))
                if qch is not None:
                    qi, ei = expand(s, e)
                    keep = cond_mask(self.cond, qch[qi], cols["ch"][ei], cols["cl"][ei])
                    qi, ei = qi[keep], ei[keep]
                    if self.emit_pairs and len(qi):
                        out.append(pairs(qid[qi], cols["id"][ei], np.maximum(qborn[qi], cols["born"][ei])))
                        self.emitted_pairs += len(qi)
                    if acc is not None:
                        acc.add_values(qi, cols["value"][ei])
                    continue
                if self.emit_pairs and cnt.any():
                    qi, ei = expand(s, e)
                    out.append(pairs(qid[qi], cols["id"][ei], np.maximum(qborn[qi], cols["born"][ei])))
                    self.emitted_pairs += len(qi)
                if acc is not None:
                    acc.add_run(cols["value"], s, e, self.incremental)
        tot = int(hit.sum())
        self.in_window += tot
        self.ratio_n += int(np.count_nonzero(hit))
        if acc is not None:
            out.append(rows(qid, acc, qborn))
            self.emitted_rows += m
            self.agg_work += acc.work
            self.agg_recompute += acc.recompute_work
            self.fallback += acc.fallback
        return out


@register("scale", "Scale-OIJ: SWMR time-travel indexes in shared memory, virtual teams with Alg. 3 dynamic "
          "schedule, incremental aggregation (processes + shared memory)")
def scale_engine(q: Query, events: Sequence[Event], options: EngineOptions) -> EngineRun:
    from oij.parallel.shared.teamrun import run_engine

    return run_engine("scale", q, events, options)
