r"""An explicit-state model of Scale-OIJ's shared processing (``oij prove``, ``pattern = "scale"``).

The model of one design, for a fixed arrival sequence of events::

    driver: tuple of key k --any member j of team(k) (every choice is a branch)--> FIFO channel (side, j)
            watermark W    --to every channel--> ;  schedule "team(k) := S" --> the team map (one word)
    joiner j: pull(j, side)  probe --> insert into j's own index (single writer), base --> pending at j
                              W / END --> wc[j][side]; prog_j := min_side wc[j][side]  (published)
              eval(j)        pending bases that ``ready_mask`` lets through: read the index of every
                              member of the key's team (``ranges`` on ``build_run``) --> pairs
              evict(j)       drop j's probes below ``eviction_bound`` of the published eval_j

A *state* is the driver's position, the team map, the messages in transit
on every channel, and per joiner its channel watermarks, published
progress, published eval bound, index contents and pending bases; plus the
bases evaluated so far and the multiset of pairs emitted.  Every step is
atomic; reads (progress, then team, then indexes) are one step, which is
sound for the engine's order of loads because progress, teams and indexes
only grow between the loads, except by eviction, which the eval bound
guards and which is its own step here.

Checked, as in :mod:`oij.proofs.model`: a duplicate the moment it is emitted; a
pair lost the moment its base has been evaluated without it (each base is
evaluated exactly once); in every terminal state the multiset of pairs
equals :func:`oij.spec.batch.compute_pairs` on the on-time tuples
(:func:`oij.spec.stream.on_time_tuples`); and no deadlock.

Shared with the engine, not copied: the readiness rule
(:func:`oij.parallel.shared.scaleoij.ready_mask`, with the engine's negative
controls ``self`` and ``arrival``), the eviction bound
(:func:`oij.parallel.shared.scaleoij.eviction_bound`), the index's run layout
(:func:`oij.parallel.shared.swmr.build_run`) and its window lookup
(:func:`oij.parallel.shared.scaleoij.ranges`, :func:`oij.parallel.runtime.store.expand`).
Modelled: channels, the driver's routing choice (the engine picks a random
member: here every member is a branch), the schedule (a design lists team
changes at fixed points of the input; the engine's Alg. 3 decides them from
statistics, but correctness may not depend on when or how: every point is a
possible one) and the joiner loop.  Three controls exist only in the model,
because the engine cannot express them: ``schedule = "move"`` (a schedule
that takes a key away from a member: :class:`oij.parallel.shared.teams.TeamMap`
refuses to shrink a team), ``evict = "own"`` (evict below the joiner's own
eval bound instead of the team's minimum) and ``rule = "symmetric"`` (no
time-travel bound at all: every tuple is inserted on arrival into its
joiner's index, and then probes the opposite side of every team member's
index, as a shared-nothing symmetric join would).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
from oij.parallel.runtime.store import expand
from oij.parallel.shared import scaleoij
from oij.parallel.shared.scaleoij import I64MAX, NEG
from oij.parallel.shared.swmr import build_run
from oij.parallel.shared.teams import members
from oij.proofs.verdicts import Counterexample, Result, explore
from oij.spec.batch import compute_pairs
from oij.spec.match import is_match, lower_offset, upper_offset
from oij.spec.model import BASE, PROBE, End, Event, Query, StreamTuple, Watermark
from oij.spec.stream import on_time_tuples
from oij.spec.watermark import arrival_watermarks

RULES = ("team", "self", "arrival", "symmetric")
EVICTIONS = ("team", "own", "none")
SCHEDULES = ("grow", "move")
INF = I64MAX


@dataclass(frozen=True)
class SharedDesign:
    """One shared-processing design: joiners, the input, the window, the initial teams and the variant.

    ``events`` in arrival order: ``a:K@TS`` / ``b:K@TS`` a base / probe of key
    K at time TS (ids 1, 2, ... in order), ``w:TS`` a watermark, ``s:K=J,J``
    a schedule publishing team(K) = {J, J}.  ``teams`` is the initial map
    (a key absent from it belongs to joiner 0 alone).
    """

    joiners: int
    events: tuple[str, ...]
    teams: tuple[tuple[int, tuple[int, ...]], ...] = ()
    lower: int = 0
    upper: int = 0
    rule: str = "team"
    evict: str = "team"
    schedule: str = "grow"
    pattern: str = "scale"

    @property
    def collector(self) -> str:
        """The variant, in the slot the verdict table uses for a collector."""
        return f"rule={self.rule} evict={self.evict} schedule={self.schedule}"

    def bounds(self) -> str:
        sides = Counter(e[0] for e in self.events)
        keys = len({e.split(":")[1].split("@")[0] for e in self.events if e[0] in "ab"})
        return (f"J={self.joiners} base={sides['a']} probe={sides['b']} keys={keys} wm={sides['w']} "
                f"sched={sides['s']} window=[{self.lower},{self.upper}]")


@dataclass(frozen=True)
class Step:
    """A driver action: route a tuple, broadcast a watermark or the end, or publish a team."""

    kind: str  # "tuple" | "wm" | "end" | "team"
    tid: int = 0
    value: int = 0  # W for "wm"; the new mask for "team"
    key: int = 0


@dataclass(frozen=True)
class SState:
    pos: int
    teams: tuple[int, ...]
    chans: tuple[tuple[tuple[str, int], ...], ...]  # index side * J + j; messages ("t", id) | ("w", W)
    wc: tuple[tuple[int, int], ...]
    prog: tuple[int, ...]
    evalb: tuple[int, ...]
    index: tuple[frozenset[int], ...]
    pending: tuple[frozenset[int], ...]
    done: frozenset[int]
    out: tuple[tuple[int, int], ...]


def _put(t: tuple[Any, ...], i: int, x: Any) -> tuple[Any, ...]:
    return (*t[:i], x, *t[i + 1:])


def _w(x: int) -> str:
    return "inf" if x == INF else "-inf" if x == NEG else str(x)


def _mask(js: tuple[int, ...] | list[int]) -> int:
    return sum(1 << j for j in js)


def parse_events(d: SharedDesign) -> tuple[list[Event], list[tuple[int, int, int]]]:
    """The spec events of the design and its schedule points (events before it, key, new mask)."""
    events: list[Event] = []
    sched: list[tuple[int, int, int]] = []
    tid = 0
    for e in d.events:
        kind, rest = e.split(":", 1)
        if kind in ("a", "b"):
            k, ts = rest.split("@")
            tid += 1
            events.append(StreamTuple(BASE if kind == "a" else PROBE, tid, int(ts), int(k)))
        elif kind == "w":
            events.append(Watermark(int(rest)))
        elif kind == "s":
            k, js = rest.split("=")
            sched.append((len(events), int(k), _mask([int(j) for j in js.split(",")])))
        else:
            raise ValueError(f"unknown event {e!r} (a:K@TS, b:K@TS, w:TS, s:K=J,J)")
    return events, sched


class SharedChecker:
    """Breadth-first exploration of every interleaving of one shared-processing design."""

    def __init__(self, d: SharedDesign, max_states: int = 2_000_000) -> None:
        if d.rule not in RULES or d.evict not in EVICTIONS or d.schedule not in SCHEDULES:
            raise ValueError(f"unknown variant {d.collector}; rules {RULES}, evict {EVICTIONS}, schedule {SCHEDULES}")
        self.d = d
        self.J = d.joiners
        self.max_states = max_states
        self.q = Query(d.lower, d.upper)
        self.lo, self.hi = lower_offset(self.q), upper_offset(self.q)
        events, sched = parse_events(d)
        self.tuples = {e.id: e for e in events if isinstance(e, StreamTuple)}
        self.keys = sorted({int(t.key) for t in self.tuples.values()} | {k for _, k, _ in sched})
        on_time = on_time_tuples([*events, End()], self.q)
        self.late = sorted(set(self.tuples) - {t.id for t in on_time})
        pairs = compute_pairs([t for t in on_time if t.side == BASE], [t for t in on_time if t.side == PROBE], self.q)
        self.expected: Counter[tuple[int, int]] = Counter((a, b) for a, b in pairs if b is not None)
        # the driver's script: late tuples are dropped at the driver (counted late by the spec, never routed)
        ws = arrival_watermarks([*events, End()], self.q)
        self.script: list[Step] = []
        last = NEG
        for i, e in enumerate(events):
            for at, k, m in sched:
                if at == i:
                    self.script.append(Step("team", value=m, key=k))
            if isinstance(e, StreamTuple) and e.id not in self.late:
                self.script.append(Step("tuple", e.id, key=int(e.key)))
            if ws[i + 1] > last and ws[i + 1] > NEG:
                last = ws[i + 1]
                self.script.append(Step("wm", value=last))
        self.script += [Step("team", value=m, key=k) for at, k, m in sched if at >= len(events)]
        self.script.append(Step("end"))

    # ------------------------------------------------------------------ states and steps

    def initial(self) -> SState:
        teams0 = dict(self.d.teams)
        teams = tuple(_mask(teams0.get(k, (0,))) for k in self.keys)
        J = self.J
        return SState(0, teams, tuple(() for _ in range(2 * J)), tuple((NEG, NEG) for _ in range(J)),
                      tuple(NEG for _ in range(J)), tuple(NEG for _ in range(J)),
                      tuple(frozenset() for _ in range(J)), tuple(frozenset() for _ in range(J)), frozenset(), ())

    def _team(self, s: SState, key: int) -> int:
        return s.teams[self.keys.index(key)]

    def _evalb(self, s: SState, j: int, prog: int, pending: frozenset[int]) -> int:
        """eval_j: no base j may still evaluate has a smaller ts (pending ones, and those behind prog_j)."""
        return min([prog, *(self.tuples[i].ts for i in pending if self.tuples[i].side == BASE)])

    def _name(self, tid: int) -> str:
        t = self.tuples[tid]
        return f"{'a' if t.side == BASE else 'b'}{tid}(k{t.key}@{t.ts})"

    def successors(self, s: SState) -> list[tuple[str, SState, tuple[str, int, int, str, list[str]]]]:
        out: list[tuple[str, SState, tuple[str, int, int, str, list[str]]]] = []
        J = self.J
        if s.pos < len(self.script):
            st = self.script[s.pos]
            if st.kind == "tuple":
                t = self.tuples[st.tid]
                side = 0 if t.side == BASE else 1
                for j in members(self._team(s, st.key)):
                    ch = _put(s.chans, side * J + j, (*s.chans[side * J + j], ("t", st.tid)))
                    out.append((f"driver routes {self._name(st.tid)} to J{j}",
                                SState(s.pos + 1, s.teams, ch, s.wc, s.prog, s.evalb, s.index, s.pending, s.done,
                                       s.out), ("route", -1, j, self._name(st.tid), [])))
            elif st.kind in ("wm", "end"):
                msg = ("w", st.value if st.kind == "wm" else INF)
                ch = tuple((*c, msg) for c in s.chans)
                what = f"W={st.value}" if st.kind == "wm" else "END"
                out.append((f"driver sends {what} to every joiner",
                            SState(s.pos + 1, s.teams, ch, s.wc, s.prog, s.evalb, s.index, s.pending, s.done,
                                   s.out), ("bcast", -1, -1, what, [])))
            else:
                i = self.keys.index(st.key)
                old, new = s.teams[i], st.value
                if self.d.schedule == "grow":
                    new |= old  # Alg. 3 replicates a partition, never moves it (TeamMap refuses to shrink)
                team = "{" + ",".join(f"J{j}" for j in members(new)) + "}"
                out.append((f"driver publishes team(k{st.key}) = {team}",
                            SState(s.pos + 1, _put(s.teams, i, new), s.chans, s.wc, s.prog, s.evalb, s.index,
                                   s.pending, s.done, s.out), ("team", -1, -1, f"team(k{st.key})={team}", [])))
        for j in range(J):
            for side in (0, 1):
                ch = s.chans[side * J + j]
                if ch:
                    out.append(self._pull(s, j, side, ch))
            ev = self._eval(s, j)
            if ev is not None:
                out.append(ev)
            ex = self._evict(s, j)
            if ex is not None:
                out.append(ex)
        return out

    def _pull(self, s: SState, j: int, side: int, ch: tuple[tuple[str, int], ...]
              ) -> tuple[str, SState, tuple[str, int, int, str, list[str]]]:
        kind, v = ch[0]
        chans = _put(s.chans, side * self.J + j, ch[1:])
        index, pending, wc = s.index[j], s.pending[j], s.wc[j]
        if kind == "t":
            t = self.tuples[v]
            if self.d.rule == "symmetric":
                index, pending = index | {v}, pending | {v}
                what = f"inserts {self._name(v)} into I{j}"
            elif t.side == PROBE:
                index = index | {v}
                what = f"inserts {self._name(v)} into I{j}"
            else:
                pending = pending | {v}
                what = f"holds {self._name(v)} pending"
            label = self._name(v)
        else:
            wc = _put(wc, side, max(wc[side], v))
            label = "END" if v == INF else f"W={v}"
            what = f"reads {label}"
        prog = min(wc)
        evalb = self._evalb(s, j, prog, pending)
        what += f"; prog{j}={_w(prog)}"
        ns = SState(s.pos, s.teams, chans, _put(s.wc, j, wc), _put(s.prog, j, prog), _put(s.evalb, j, evalb),
                    _put(s.index, j, index), _put(s.pending, j, pending), s.done, s.out)
        return (f"J{j} pulls {label} from the {('base', 'probe')[side]} channel: {what}", ns,
                ("pull", side, j, label, []))

    def _lookup(self, s: SState, team: list[int], key: int, ts: int) -> list[int]:
        """Probe ids of ``key`` in the window of a base at ``ts``, over the indexes of ``team`` (engine lookup)."""
        found: list[int] = []
        for m in team:
            ids = sorted(i for i in s.index[m] if self.tuples[i].side == PROBE)
            if not ids:
                continue
            cols = build_run({"ts": np.array([self.tuples[i].ts for i in ids], np.int64),
                              "key": np.array([int(self.tuples[i].key) for i in ids], np.int64),
                              "value": np.zeros(len(ids)), "id": np.array(ids, np.int64),
                              "born": np.zeros(len(ids), np.int64)})
            q1 = np.array([key], np.int64)
            qlo, qhi = np.array([ts + self.lo], np.int64), np.array([ts + self.hi], np.int64)
            st, en = scaleoij.ranges(cols, len(ids), q1, qlo, qhi)
            _qi, ei = expand(st, en)
            found += [int(x) for x in cols["id"][ei]]
        return found

    def _eval(self, s: SState, j: int) -> tuple[str, SState, tuple[str, int, int, str, list[str]]] | None:
        if not s.pending[j]:
            return None
        pend = sorted(s.pending[j])
        if self.d.rule == "symmetric":  # every inserted tuple probes the other side of the team's indexes, unbounded
            tid = pend[0]
            t = self.tuples[tid]
            team = members(self._team(s, int(t.key)))
            new: list[tuple[int, int]] = []
            for m in team:
                for x in sorted(s.index[m]):
                    u = self.tuples[x]
                    if u.side != t.side and u.key == t.key:
                        a, b = (t, u) if t.side == BASE else (u, t)
                        if is_match(a, b, self.q):
                            new.append((a.id, b.id))
            pending = s.pending[j] - {tid}
            done = s.done | {tid}
            read = f"{self._name(tid)} probes " + ",".join(f"I{m}" for m in team)
            evaluated = [tid]
        else:
            keys = [int(self.tuples[i].key) for i in pend]
            ends = np.array([self.tuples[i].ts + self.hi for i in pend], np.int64)
            masks = np.array([self._team(s, k) for k in keys], np.int64)
            ready, _held = scaleoij.ready_mask(self.d.rule, ends, np.array(s.prog, np.int64), j, masks)
            if not ready.any():
                return None
            evaluated = [i for i, r in zip(pend, ready.tolist(), strict=True) if r]
            new = []
            reads = []
            for i in evaluated:
                t = self.tuples[i]
                team = members(self._team(s, int(t.key)))
                new += [(i, b) for b in self._lookup(s, team, int(t.key), t.ts)]
                reads.append(f"{self._name(i)} reads " + ",".join(f"I{m}" for m in team))
            pending = s.pending[j] - set(evaluated)
            done = s.done | set(evaluated)
            read = "; ".join(reads)
        pairs = [f"(a{a},b{b})" for a, b in new]
        evalb = self._evalb(s, j, s.prog[j], pending)
        ns = SState(s.pos, s.teams, s.chans, s.wc, s.prog, _put(s.evalb, j, evalb), s.index,
                    _put(s.pending, j, pending), done, tuple(sorted([*s.out, *new])))
        label = f"J{j} evaluates: {read}" + (f"; emits {' '.join(pairs)}" if pairs else "; emits nothing")
        return label, ns, ("eval", -1, j, read, pairs)

    def _evict(self, s: SState, j: int) -> tuple[str, SState, tuple[str, int, int, str, list[str]]] | None:
        if self.d.evict == "none":
            return None
        evals = list(s.evalb) if self.d.evict == "team" else [s.evalb[j]]
        below = scaleoij.eviction_bound(evals, self.lo)
        if below is None:
            return None
        drop = {i for i in s.index[j] if self.tuples[i].side == PROBE and self.tuples[i].ts < below}
        if not drop:
            return None
        names = " ".join(self._name(i) for i in sorted(drop))
        ns = SState(s.pos, s.teams, s.chans, s.wc, s.prog, s.evalb, _put(s.index, j, s.index[j] - drop),
                    s.pending, s.done, s.out)
        return f"J{j} evicts {names} (ts < {below})", ns, ("evict", -1, j, names, [])

    # ------------------------------------------------------------------ verdicts

    def lost(self, s: SState) -> list[tuple[int, int]]:
        """Expected pairs no step can emit any more: each base is evaluated once (both sides, if symmetric)."""
        got = Counter(s.out)
        sym = self.d.rule == "symmetric"
        return sorted(p for p in self.expected
                      if not got.get(p, 0) and p[0] in s.done and (not sym or p[1] in s.done))

    def is_terminal(self, s: SState) -> bool:
        return s.pos == len(self.script) and not any(s.chans) and not any(s.pending)

    def violation(self, s: SState) -> tuple[str, str] | None:
        """A violation already final in ``s``: a duplicate or spurious pair once emitted, a pair lost for good."""
        got = Counter(s.out)
        dup = sorted(p for p, n in got.items() if n > self.expected.get(p, 0) and p in self.expected)
        if dup:
            return "unsafe: duplicate", f"pair(s) emitted too often: {dup}"
        spurious = sorted(p for p in got if p not in self.expected)
        if spurious:
            return "unsafe: spurious", f"pair(s) the spec does not have: {spurious}"
        miss = self.lost(s)
        if miss:
            return "unsafe: missing", f"pair(s) that can no longer be emitted: {miss}"
        return None

    def at_end(self, s: SState) -> tuple[str, str] | None:
        """A state without successors: a deadlock, or an output other than the spec's."""
        if not self.is_terminal(s):
            return "deadlock", "no step is enabled and input is left"
        if Counter(s.out) != self.expected:
            return "unsafe: missing", "the output differs from the spec at the end"
        return None

    def run(self) -> Result:
        return explore(self.initial(), self.successors, self.violation, self.at_end, self.max_states)


def check(d: SharedDesign, max_states: int = 2_000_000) -> Result:
    """Explore every interleaving of ``d``; the verdict and, if unsafe, a shortest counterexample."""
    return SharedChecker(d, max_states).run()


def format_trace(d: SharedDesign, cx: Counterexample) -> str:
    """The counterexample as numbered steps, with the verdict's reason."""
    c = SharedChecker(d)
    teams = ", ".join(f"team(k{k}) = {{{','.join(f'J{j}' for j in members(c.initial().teams[i]))}}}"
                      for i, k in enumerate(c.keys))
    lines = [f"Scale-OIJ shared processing, {d.collector}, {d.bounds()}: {cx.verdict}",
             f"input in arrival order: {' '.join(d.events)}; initially {teams}"]
    lines += [f"{n:3d}. {step}" for n, step in enumerate(cx.trace, 1)]
    lines.append(f"  => {cx.detail}")
    return "\n".join(lines) + "\n"


def draw_sequence(d: SharedDesign, cx: Counterexample, out: str | IO[bytes], fmt: str = "png",
                  title: str | None = None) -> None:
    """Draw the counterexample: the driver's lane and one lane per joiner.

    Dashed arrows are what the driver puts on a joiner's channels; a blue dot
    is a joiner reading its channel; a green box is an evaluation (which
    indexes it read; red: what it emitted); grey text is a schedule or an
    eviction.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lanes = ["driver", *[f"J{j}" for j in range(d.joiners)]]
    steps = cx.steps
    n = max(len(steps), 1)
    fig, ax = plt.subplots(figsize=(2.6 * len(lanes) + 3.0, 0.5 * n + 1.6))
    for i, name in enumerate(lanes):
        ax.plot([i, i], [0.3, n + 0.7], color="0.6", lw=1, zorder=0)
        ax.text(i, 0, name, ha="center", va="bottom", fontsize=10, weight="bold")
    for k, (kind, _side, j, label, pairs) in enumerate(steps, 1):
        x1 = 1 + j
        if kind in ("route", "bcast"):  # sent: now in the channel, not yet read
            for x in ([x1] if kind == "route" else range(1, len(lanes))):
                ax.annotate("", xy=(x - 0.15, k), xytext=(0, k),
                            arrowprops={"arrowstyle": "->", "color": "0.55", "ls": "--"})
            ax.text(0.5, k - 0.12, f"sends {label}", ha="center", va="bottom", fontsize=8, color="0.4")
        elif kind == "pull":
            ax.plot([x1], [k], marker="o", color="tab:blue")
            ax.text(x1 + 0.08, k, f"reads {label} from its {('base', 'probe')[_side]} channel", ha="left",
                    va="center", fontsize=8, color="tab:blue")
        elif kind == "eval":
            ax.text(x1 + 0.08, k, label, ha="left", va="center", fontsize=8, color="tab:green",
                    bbox={"boxstyle": "round", "fc": "white", "ec": "tab:green"})
            ax.text(x1 + 0.08, k + 0.4, "emits " + (" ".join(pairs) or "nothing"), ha="left", va="center",
                    fontsize=8, color="tab:red")
        elif kind == "team":
            ax.text(0.08, k, "publishes " + label, ha="left", va="center", fontsize=8, color="0.3")
        else:
            ax.text(x1 + 0.08, k, "evicts " + label, ha="left", va="center", fontsize=8, color="0.3")
    ax.set_xlim(-0.6, len(lanes) + 1.2)
    ax.set_ylim(n + 1, -0.6)
    ax.axis("off")
    ax.set_title(title or f"Scale-OIJ shared processing ({d.collector}): {cx.verdict}\n({cx.detail})", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, format=fmt)
    plt.close(fig)


def design_from(entry: dict[str, Any], bounds: str) -> SharedDesign:
    """A :class:`SharedDesign` from a manifest ``[[model]]`` entry with ``pattern = "scale"``."""
    b = entry[bounds]
    teams = tuple((int(k), tuple(int(j) for j in v)) for k, v in sorted(b.get("teams", {}).items()))
    return SharedDesign(int(b["joiners"]), tuple(b["events"]), teams, int(b.get("lower", 0)),
                        int(b.get("upper", 0)), entry.get("rule", "team"), entry.get("evict", "team"),
                        entry.get("schedule", "grow"))

