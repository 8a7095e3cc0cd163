"""What a model check finds, and the search that finds it: breadth-first exploration of a state graph.

Shared by the checkers of :mod:`oij.proofs.model` (emitter/collector protocols)
and :mod:`oij.proofs.shared` (Scale-OIJ shared processing): each supplies its
states, steps and verdicts; :func:`explore` does the rest.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import networkx as nx

S = TypeVar("S", bound=Hashable)
Step = tuple[str, int, int, str, list[str]]  # (kind, e, r, message, pairs): what a diagram draws

VERDICTS = ("safe", "unsafe: duplicate", "unsafe: missing", "unsafe: spurious", "unsafe: ordering", "deadlock")


@dataclass
class Counterexample:
    """A shortest path to a violation: its verdict, why, the steps as text and as diagram records."""

    verdict: str
    detail: str
    trace: list[str] = field(default_factory=list)
    steps: list[tuple[str, int, int, str, list[str]]] = field(default_factory=list)  # (kind, e, r, msg, pairs)


@dataclass
class Result:
    """The outcome of checking one design: ``safe`` or the violations found (comma-separated), with paths."""

    verdict: str
    states: int
    edges: int
    seconds: float
    counterexamples: list[Counterexample] = field(default_factory=list)


def explore(initial: S, successors: Callable[[S], list[tuple[str, S, Step]]],
            violation: Callable[[S], tuple[str, str] | None], at_end: Callable[[S], tuple[str, str] | None],
            max_states: int) -> Result:
    """Every state reachable from ``initial``, breadth first, with state hashing (a :class:`networkx.DiGraph`).

    ``violation(s)`` names a violation already final in ``s`` (the state is not
    expanded); ``at_end(s)`` judges a state with no successor (a deadlock, or a
    wrong output), None meaning safe.  The first state of each verdict is a
    shallowest one, so its path is a shortest counterexample.
    """
    t0 = time.perf_counter()
    g: Any = nx.DiGraph()
    ids = {initial: 0}
    states = [initial]
    g.add_node(0)
    queue = deque([0])
    info: dict[tuple[int, int], tuple[str, Step]] = {}
    bad: dict[str, tuple[int, str]] = {}  # verdict -> (state, reason), the first (shallowest) of each kind
    while queue:
        i = queue.popleft()
        s = states[i]
        v = violation(s)
        if v is not None:
            bad.setdefault(v[0], (i, v[1]))
            continue
        succ = successors(s)
        if not succ:
            v = at_end(s)
            if v is not None:
                bad.setdefault(v[0], (i, v[1]))
            continue
        for label, t, step in succ:
            j = ids.get(t)
            if j is None:
                j = ids[t] = len(states)
                states.append(t)
                queue.append(j)
                if len(states) > max_states:
                    raise RuntimeError(f"more than {max_states} states: lower the bounds")
            g.add_edge(i, j)
            info.setdefault((i, j), (label, step))
    res = Result("safe", g.number_of_nodes(), g.number_of_edges(), time.perf_counter() - t0)
    for verdict in VERDICTS:
        if verdict not in bad:
            continue
        i, why = bad[verdict]
        cx = Counterexample(verdict, why)
        for a, b in itertools.pairwise(nx.shortest_path(g, 0, i)):
            label, step = info[(a, b)]
            cx.trace.append(label)
            cx.steps.append(step)
        res.counterexamples.append(cx)
    if res.counterexamples:
        res.verdict = ", ".join(c.verdict for c in res.counterexamples)
    return res
