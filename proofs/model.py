r"""An explicit-state model checker for the emitter/collector protocols of KP, DP and HP (``oij prove``).

The model of one design, for a fixed arrival sequence of tuples::

    emitter e (2M of them) --sends, in its own order--> FIFO channel (e, r) --pull--> collector r
        collector r --deliver (the engines' own decision function)--> replica r: join, then store if owner

A *state* is: how far every emitter has sent, the messages in transit on
every channel, every collector's internal state (its per-channel queues,
epoch, turn, ended flags), every replica's stored set and delivery order,
and the multiset of pairs emitted so far.  The *steps* are

* ``send(e)``: emitter e puts its next message on its channel(s) (a DP
  broadcast ring: on the channel to every replica at once);
* ``pull(r, e)``: the head of channel (e, r) moves into collector r's queue,
  and the collector is polled: what it releases is processed by replica r.

Emitters run independently of each other and every channel is read
independently, so every interleaving the engines can show is a path here
(the engines' single driver sends in one fixed order, a subset of these).
The checker explores every reachable state breadth-first with state hashing
(the state graph is a :class:`networkx.DiGraph`) and checks

* **safety** in every terminal state: the multiset of emitted pairs equals
  :func:`oij.spec.batch.compute_pairs` on the tuples (``unsafe: duplicate`` /
  ``unsafe: missing``), and the pattern's ordering predicate of
  :mod:`oij.spec.ordering` holds on the delivery orders (``unsafe: ordering``);
* **liveness**: no reachable state with something left to do and no step
  enabled (``deadlock``).

The first violation found is at minimal depth (BFS), so its path is a
shortest counterexample; :func:`format_trace` prints it and
:func:`draw_sequence` draws it as a sequence diagram.

Shared with the engines, not copied: the routing
(:class:`~oij.parallel.runtime.emitter.Router`: destinations, owners, epochs,
batches) and the collectors' decision functions (``deliver`` of the classes in
:mod:`oij.parallel.runtime.collector`, run on the model's queues).  Modelled:
the channels (FIFO, as the rings are), the replica's join step (probe the
stored opposite side of the key, then store iff owner; the engines' numpy
store does the same on batches), and time (every tuple has ts 0 and the
window is [0, 0], so every same-key pair matches and nothing is purged:
ordering, not time, is what these protocols get right or wrong).
"""

from __future__ import annotations

import tomllib
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar, cast

import numpy as np
from oij.parallel.config import COLLECTORS as ENGINE_COLLECTORS
from oij.parallel.config import ROUTED_PATTERNS
from oij.parallel.runtime.collector import (
    Collector,
    FixedRoundRobinCollector,
    Input,
    RoundRobinCollector,
    StandardCollector,
)
from oij.parallel.runtime.emitter import Router, chunks_from_events
from oij.parallel.runtime.ring import KIND_CLOSE, KIND_DATA, KIND_END, TUPLE, Batch, Ring
from oij.proofs.verdicts import Counterexample, Result, explore
from oij.spec.batch import compute_pairs
from oij.spec.model import BASE, PROBE, Query, Side, StreamTuple
from oij.spec.ordering import dp_rule, hp_rule, pairs_decided_once, stored_once

if TYPE_CHECKING:
    from oij.proofs.shared import SharedDesign

T = TypeVar("T")
COLLECTORS = (*(c for c in ENGINE_COLLECTORS if c != "naive"), "fixed-round-robin")
"""The collectors a design may name: the engines' (:data:`oij.parallel.config.COLLECTORS`, the naive negative
control aside) and a fixed round-robin without epochs, which only the model has."""
PATTERNS = ROUTED_PATTERNS
"""The patterns a design may name: the engines' routed ones (:data:`oij.parallel.config.ROUTED_PATTERNS`)."""


@dataclass(frozen=True)
class Design:
    """One design to check: a pattern, a collector, and the bounds (replicas, emitters, the input).

    ``tuples`` is the arrival sequence as (side, key) pairs (ids 1, 2, ...);
    ``epoch`` is the number of tuples per epoch (the driver's chunk);
    ``teams`` gives HP's key -> replicas assignment (Alg. 1's output).
    """

    pattern: str
    collector: str
    replicas: int
    tuples: tuple[tuple[str, int], ...]
    emitters: int = 1
    epoch: int = 64
    teams: tuple[tuple[int, tuple[int, ...]], ...] = ()

    def bounds(self) -> str:
        sides = Counter(s for s, _ in self.tuples)
        keys = len({k for _, k in self.tuples})
        return (f"R={self.replicas} M={self.emitters} base={sides[BASE]} probe={sides[PROBE]} keys={keys} "
                f"epoch={self.epoch}")


@dataclass(frozen=True)
class Message:
    """What travels on a channel: a data batch (tuple records) or a CLOSE/END punctuation."""

    kind: int
    epoch: int
    recs: tuple[tuple[int, str, int, int], ...] = ()  # (id, side, key, owner)

    def label(self) -> str:
        if self.kind == KIND_DATA:
            return ",".join(f"{'a' if s == BASE else 'b'}{i}@R{o}" for i, s, _, o in self.recs)
        return f"CLOSE{self.epoch}" if self.kind == KIND_CLOSE else "END"


@dataclass
class Protocol:
    """The messages every emitter sends, in order, and where each goes."""

    messages: list[Message]
    sends: list[list[tuple[int, tuple[int, ...]]]]  # per emitter: (message index, destination replicas)
    tuples: list[StreamTuple]


def build_protocol(d: Design) -> Protocol:
    """Route the design's input with the engines' :class:`~oij.parallel.runtime.emitter.Router` into per-emitter
    send lists."""
    q = Query(0, 0)
    tuples = [StreamTuple(cast(Side, side), i, 0, key, 0.0) for i, (side, key) in enumerate(d.tuples, 1)]
    r = Router(q, d.pattern, d.replicas, d.emitters, batch=1)
    if d.pattern == "hp":
        r.counting = False
        r.key2r = {k: tuple(rs) for k, rs in d.teams}
    m2 = 2 * d.emitters
    messages: list[Message] = []
    sends: list[list[tuple[int, tuple[int, ...]]]] = [[] for _ in range(m2)]

    def ring_dest(ring: int) -> tuple[int, tuple[int, ...]]:
        if d.pattern == "dp":  # one broadcast ring per emitter, read by every replica
            return ring, tuple(range(d.replicas))
        return ring // d.replicas, (ring % d.replicas,)

    def put(emitter: int, msg: Message, dests: tuple[int, ...]) -> None:
        messages.append(msg)
        sends[emitter].append((len(messages) - 1, dests))

    codes = None
    for ep, chunk in enumerate(chunks_from_events(tuples, d.epoch, codes)):
        routed = r.route(chunk, 0)
        for ring, recs, _w in routed.sends:
            e, dests = ring_dest(ring)
            rows = tuple((int(x["id"]), BASE if int(x["side"]) == 0 else PROBE, int(x["key"]), int(x["owner"]))
                         for x in recs)
            put(e, Message(KIND_DATA, ep, rows), dests)
        for e in range(m2):
            put(e, Message(KIND_CLOSE, ep), tuple(range(d.replicas)))
    for e in range(m2):
        put(e, Message(KIND_END, -1), tuple(range(d.replicas)))
    return Protocol(messages, sends, tuples)


# A collector's state: (queues of message indices per channel, epoch, turn, ended flags)
CollState = tuple[tuple[tuple[int, ...], ...], int, int, tuple[bool, ...]]


@dataclass(frozen=True)
class State:
    sent: tuple[int, ...]
    chans: tuple[tuple[int, ...], ...]  # index e * R + r
    colls: tuple[CollState, ...]
    stored: tuple[frozenset[int], ...]
    order: tuple[tuple[int, ...], ...]
    out: tuple[tuple[int, int], ...]  # sorted multiset of emitted pairs


def _put(t: tuple[T, ...], i: int, x: T) -> tuple[T, ...]:
    """``t`` with item ``i`` replaced by ``x`` (states are immutable tuples, hashed)."""
    return (*t[:i], x, *t[i + 1:])


def _rr_order(m: int) -> list[int]:
    """The engines' circular channel order: b0, p0, b1, p1, ... (channels: M base emitters, then M probe)."""
    out: list[int] = []
    for i in range(m):
        out += [i, m + i]
    return out


def make_collector(kind: str, channels: int, m: int) -> Collector:
    """A collector of the engines' classes, with no rings: the model fills its queues."""
    inputs = [Input(i, cast(Ring, None), 0) for i in range(channels)]
    if kind == "standard":
        return StandardCollector(inputs)
    if kind == "round-robin":
        return RoundRobinCollector(inputs, _rr_order(m))
    if kind == "fixed-round-robin":
        return FixedRoundRobinCollector(inputs, _rr_order(m))
    raise ValueError(f"unknown collector {kind!r}; known: {', '.join(COLLECTORS)}")


class Checker:
    """Breadth-first exploration of every interleaving of one design (module docstring)."""

    def __init__(self, d: Design, max_states: int = 2_000_000) -> None:
        self.d = d
        self.p = build_protocol(d)
        self.R = d.replicas
        self.E = 2 * d.emitters
        self.max_states = max_states
        self.batches = [Batch(m.kind, m.epoch, 0, np.empty(0, TUPLE)) for m in self.p.messages]
        self.index = {id(b): i for i, b in enumerate(self.batches)}
        self.coll = make_collector(d.collector, self.E, d.emitters)
        self.labels = [m.label() for m in self.p.messages]
        self.polled: dict[CollState, tuple[CollState, tuple[int, ...]]] = {}  # _poll's answers: a pure function
        pairs = compute_pairs([t for t in self.p.tuples if t.side == BASE],
                              [t for t in self.p.tuples if t.side == PROBE], Query(0, 0))
        self.expected: Counter[tuple[int, int]] = Counter((a, b) for a, b in pairs if b is not None)
        self.receivers: dict[int, set[int]] = {}  # tuple id -> the replicas it is sent to (static routing)
        for per in self.p.sends:
            for mi, dests in per:
                for rec in self.p.messages[mi].recs:
                    self.receivers.setdefault(rec[0], set()).update(dests)

    def missing_now(self, s: State) -> list[tuple[int, int]]:
        """Pairs that can no longer be emitted: every replica receiving both has delivered both, none emitted."""
        got = Counter(s.out)
        out = []
        for (a, b) in self.expected:
            if got.get((a, b), 0):
                continue
            both = self.receivers.get(a, set()) & self.receivers.get(b, set())
            if all(a in s.order[r] and b in s.order[r] for r in both):
                out.append((a, b))
        return out

    def initial(self) -> State:
        c0: CollState = (tuple(() for _ in range(self.E)), 0, 0, tuple(False for _ in range(self.E)))
        return State(tuple(0 for _ in range(self.E)), tuple(() for _ in range(self.E * self.R)),
                     tuple(c0 for _ in range(self.R)), tuple(frozenset() for _ in range(self.R)),
                     tuple(() for _ in range(self.R)), ())

    def _poll(self, cs: CollState) -> tuple[CollState, tuple[int, ...]]:
        """Run the engines' decision function on collector state ``cs``; the new state and released messages.

        A function of ``cs`` alone (the collector's fields are all set from it first): each answer is kept, as
        many global states share a collector's state."""
        known = self.polled.get(cs)
        if known is None:
            known = self.polled[cs] = self._run_collector(cs)
        return known

    def _run_collector(self, cs: CollState) -> tuple[CollState, tuple[int, ...]]:
        c = self.coll
        c.queues = [deque(self.batches[i] for i in q) for q in cs[0]]
        c.ended = list(cs[3])
        if isinstance(c, RoundRobinCollector):
            c.epoch, c.turn = cs[1], cs[2]
        elif isinstance(c, FixedRoundRobinCollector):
            c.turn = cs[2]
        released = tuple(self.index[id(b)] for _, b in c.deliver())
        epoch = c.epoch if isinstance(c, RoundRobinCollector) else 0
        turn = c.turn if isinstance(c, (RoundRobinCollector, FixedRoundRobinCollector)) else 0
        new: CollState = (tuple(tuple(self.index[id(b)] for b in q) for q in c.queues), epoch, turn,
                          tuple(c.ended))
        return new, released

    def successors(self, s: State) -> list[tuple[str, State, tuple[str, int, int, str, list[str]]]]:
        out: list[tuple[str, State, tuple[str, int, int, str, list[str]]]] = []
        for e in range(self.E):
            if s.sent[e] < len(self.p.sends[e]):
                mi, dests = self.p.sends[e][s.sent[e]]
                chans = list(s.chans)
                for r in dests:
                    chans[e * self.R + r] = (*chans[e * self.R + r], mi)
                sent = _put(s.sent, e, s.sent[e] + 1)
                label = f"E{e} sends {self.labels[mi]} to {','.join(f'R{r}' for r in dests)}"
                out.append((label, State(sent, tuple(chans), s.colls, s.stored, s.order, s.out),
                            ("send", e, -1, self.labels[mi], [])))
        for r in range(self.R):
            for e in range(self.E):
                ch = s.chans[e * self.R + r]
                if not ch:
                    continue
                mi = ch[0]
                chans = list(s.chans)
                chans[e * self.R + r] = ch[1:]
                qs, ep, tn, ended = s.colls[r]
                qs2 = _put(qs, e, (*qs[e], mi))
                cs, released = self._poll((qs2, ep, tn, ended))
                stored = set(s.stored[r])
                order = list(s.order[r])
                out_pairs = list(s.out)
                new_pairs: list[str] = []
                for ri in released:
                    for tid, side, key, owner in self.p.messages[ri].recs:
                        for x in sorted(stored):  # probe: the stored opposite side of the key
                            xt = self.p.tuples[x - 1]
                            if xt.side != side and xt.key == key:
                                pair = (tid, x) if side == BASE else (x, tid)
                                out_pairs.append(pair)
                                new_pairs.append(f"(a{pair[0]},b{pair[1]})")
                        order.append(tid)
                        if owner == r:
                            stored.add(tid)
                colls = _put(s.colls, r, cs)
                st = _put(s.stored, r, frozenset(stored))
                od = _put(s.order, r, tuple(order))
                rel = " ".join(self.labels[i] for i in released) or "nothing"
                label = (f"R{r} pulls {self.labels[mi]} from E{e}; collector releases {rel}"
                         + (f"; emits {' '.join(new_pairs)}" if new_pairs else ""))
                out.append((label, State(s.sent, tuple(chans), colls, st, od, tuple(sorted(out_pairs))),
                            ("pull", e, r, self.labels[mi], new_pairs)))
        return out

    def is_terminal(self, s: State) -> bool:
        return (all(s.sent[e] == len(self.p.sends[e]) for e in range(self.E)) and not any(s.chans)
                and all(all(c[3]) and not any(c[0]) for c in s.colls))

    def judge(self, s: State) -> tuple[str, str]:
        """The verdict of a terminal state and a one-line reason."""
        got = Counter(s.out)
        dup = sorted(p for p, n in got.items() if n > self.expected.get(p, 0))
        if dup:
            return "unsafe: duplicate", f"pair(s) emitted too often: {dup}"
        miss = sorted(p for p, n in self.expected.items() if got.get(p, 0) < n)
        if miss:
            return "unsafe: missing", f"pair(s) never emitted: {miss}"
        orders = {r: list(o) for r, o in enumerate(s.order)}
        stored = {r: set(x) for r, x in enumerate(s.stored)}
        ids = [t.id for t in self.p.tuples]
        pairs = list(self.expected)
        if self.d.pattern == "dp":
            ok = dp_rule(orders, stored, ids)
        elif self.d.pattern == "hp":
            ok = hp_rule(orders, stored, {t.id: t.key for t in self.p.tuples})
        else:
            ok = stored_once(orders, stored, ids)
        if not (ok and pairs_decided_once(orders, stored, pairs)):
            return "unsafe: ordering", f"the {self.d.pattern.upper()} ordering predicate of oij.spec.ordering fails"
        return "safe", ""

    def violation(self, s: State) -> tuple[str, str] | None:
        """A violation already final in ``s``: a duplicate once emitted, a pair no replica can emit any more."""
        dup = [p for p, n in Counter(s.out).items() if n > self.expected.get(p, 0)]
        if dup:
            return "unsafe: duplicate", f"pair(s) emitted too often: {sorted(dup)}"
        miss = self.missing_now(s)
        if miss:  # every replica that could emit these pairs has delivered both tuples: they are lost
            return "unsafe: missing", f"pair(s) that no replica can emit any more: {miss}"
        return None

    def at_end(self, s: State) -> tuple[str, str] | None:
        """A state without successors: the terminal verdict, or a deadlock."""
        if not self.is_terminal(s):
            return "deadlock", "no step is enabled and input is left"
        v, why = self.judge(s)
        return None if v == "safe" else (v, why)

    def run(self) -> Result:
        """Explore every reachable state; keep the shallowest violation of each kind (BFS: shortest paths)."""
        return explore(self.initial(), self.successors, self.violation, self.at_end, self.max_states)


def check(d: Design, max_states: int = 2_000_000) -> Result:
    """Explore every interleaving of ``d``; the verdict and, if unsafe, a shortest counterexample."""
    return Checker(d, max_states).run()


def format_trace(d: Design, cx: Counterexample) -> str:
    """The counterexample as numbered steps, with the verdict's reason."""
    lines = [f"{d.pattern.upper()} with the {d.collector} collector, {d.bounds()}: {cx.verdict}"]
    tups = ", ".join(f"{'a' if t.side == BASE else 'b'}{t.id}(k{t.key})" for t in build_protocol(d).tuples)
    lines.append(f"input in arrival order: {tups}")
    for n, step in enumerate(cx.trace, 1):
        lines.append(f"{n:3d}. {step}")
    lines.append(f"  => {cx.detail}")
    return "\n".join(lines) + "\n"


def draw_sequence(d: Design, cx: Counterexample, out: str | IO[bytes], fmt: str = "png",
                  title: str | None = None) -> None:
    """Draw the counterexample as a sequence diagram: emitters left, replicas (collector + join) right.

    An arrow is a message pulled by a replica's collector and released to its
    join (``a2@R1``: tuple a2, stored by R1); red text is what the replica emits.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lanes = [f"E{e} ({'base' if e < d.emitters else 'probe'})" for e in range(2 * d.emitters)]
    lanes += [f"R{r}" for r in range(d.replicas)]
    x = {name: i for i, name in enumerate(lanes)}
    steps = [s for s in cx.steps if s[0] == "pull"]
    n = max(len(steps), 1)
    fig, ax = plt.subplots(figsize=(1.9 * len(lanes) + 2.5, 0.55 * n + 1.6))
    for name, i in x.items():
        ax.plot([i, i], [0.3, n + 0.7], color="0.6", lw=1, zorder=0)
        ax.text(i, 0, name, ha="center", va="bottom", fontsize=10, weight="bold")
    for k, (kind, e, r, label, pairs) in enumerate(steps, 1):
        if kind != "pull":
            continue
        x0, x1 = e, 2 * d.emitters + r
        ax.annotate("", xy=(x1, k), xytext=(x0, k), arrowprops={"arrowstyle": "->", "color": "tab:blue"})
        ax.text((x0 + x1) / 2, k - 0.12, label, ha="center", va="bottom", fontsize=8, color="tab:blue")
        if pairs:
            ax.text(x1 + 0.08, k, "emits " + " ".join(pairs), ha="left", va="center", fontsize=8, color="tab:red")
    ax.set_xlim(-0.6, len(lanes) + 0.6)
    ax.set_ylim(n + 1, -0.6)
    ax.axis("off")
    ax.set_title(title or f"{d.pattern.upper()} + {d.collector} collector: {cx.verdict}\n"
                 f"({cx.detail}; x@Rn = tuple x, stored by Rn)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, format=fmt)
    plt.close(fig)


MANIFEST = Path(__file__).with_name("manifest.toml")


def manifest() -> list[dict[str, Any]]:
    """The manifest's ``[[model]]`` entries, in order."""
    with MANIFEST.open("rb") as f:
        models: list[dict[str, Any]] = tomllib.load(f)["model"]
    return models


def design_from(entry: dict[str, Any], bounds: str) -> Design:
    """A :class:`Design` from a manifest ``[[model]]`` entry and its ``quick`` or ``full`` bounds."""
    b = entry[bounds]
    tuples = tuple((BASE if s == "a" else PROBE, int(k)) for s, k in (t.split(":") for t in b["tuples"]))
    teams = tuple((int(k), tuple(v)) for k, v in sorted(b.get("teams", {}).items()))
    return Design(entry["pattern"], entry["collector"], int(b["replicas"]), tuples,
                  int(b.get("emitters", 1)), int(b.get("epoch", 64)), teams)


# -- every model of the manifest, whichever checker it needs ------------------
# ``pattern = "scale"`` entries are Scale-OIJ shared-processing models
# (:mod:`oij.proofs.shared`); the others are emitter/collector models (above).


def load_design(entry: dict[str, Any], bounds: str) -> Design | SharedDesign:
    """The design of a manifest ``[[model]]`` entry at its ``quick`` or ``full`` bounds."""
    if entry.get("pattern") == "scale":
        from oij.proofs import shared

        return shared.design_from(entry, bounds)
    return design_from(entry, bounds)


def check_design(d: Design | SharedDesign) -> Result:
    """Explore every interleaving of ``d`` with the checker its kind needs."""
    if isinstance(d, Design):
        return check(d)
    from oij.proofs import shared

    return shared.check(d)


def trace_text(d: Design | SharedDesign, cx: Counterexample) -> str:
    """The counterexample of ``d`` as numbered steps."""
    if isinstance(d, Design):
        return format_trace(d, cx)
    from oij.proofs import shared

    return shared.format_trace(d, cx)


def draw_design(d: Design | SharedDesign, cx: Counterexample, out: str | IO[bytes], fmt: str = "png") -> None:
    """The counterexample of ``d`` as a sequence diagram."""
    if isinstance(d, Design):
        draw_sequence(d, cx, out, fmt)
        return
    from oij.proofs import shared

    shared.draw_sequence(d, cx, out, fmt)
