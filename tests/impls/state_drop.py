"""State-drop mutants of the oracle's checkpoint: a restartable command that loses one piece of its state.

``python tests/impls/state_drop.py COMPONENT:HOW`` is ``restart_bugs.py correct`` (the oracle, a checkpoint
after every event, rows before the checkpoint line) except that on a restart it restores one component of the
snapshot wrongly:

* ``drop``: the component is lost (emptied, or its scalar reset to the value of a fresh operator);
* ``stale``: the component is taken from the checkpoint one event earlier (the rest from the right one).

``oij bench kit-power --restarts`` runs ``oij conform --restarts 1`` at its defaults on every mutant of
:data:`MUTANTS`; each must be killed.  The components (attributes of :class:`oij.reference.oracle.Oracle` and its
per-key ``_KeyState``):

==================  ============================================================================
``watermark``       W in force (and in lateness mode the largest ts seen, from which W follows)
``channel-C``       channel C's largest watermark (C = 0, 1, 2)
``bases``           the stored bases of every key (ts, id, condition operands): the pending bases
``probes``          the stored probes of every key (ts, id, value, exact value, condition operands)
``matched``         the ids of the bases of a left join that have matched (no ``(a, null)`` row)
``cursors``         each key's aggregate cursor: ``drop`` empties its running count, sum and extremes
                    but keeps the range they cover (an empty range would be rebuilt: equivalent)
``wakeups``         the purge marks: the heap of wake-up times and each key's next wake-up
==================  ============================================================================

The oracle keeps no set of ids seen (ids are unique by the format, and nothing is deduplicated), so there is no
id-set component; ``matched`` is its only set of ids.  :data:`EQUIVALENT` lists the mutants no output can tell
apart, each with its argument.
"""

from __future__ import annotations

import heapq
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, so that tests.impls imports
from oij.reference.checkpoint import restore, snapshot
from oij.reference.oracle import Oracle
from oij.spec.model import NO_WATERMARK, Query

from oij.pipelines.restartable import save
from tests.impls.oracle_cmd import event_of, read_case
from tests.impls.restart_bugs import _lines

COMPONENTS = ("watermark", "channel-0", "channel-1", "channel-2", "bases", "probes", "matched", "cursors",
              "wakeups")
MUTANTS = tuple(f"{c}:{how}" for c in COMPONENTS for how in ("drop", "stale"))
"""Every state-drop mutant, ``COMPONENT:HOW``."""

EQUIVALENT = {
    "wakeups:drop": "only delays finality and purging to the end of the stream: a base past its finality edge "
                    "can meet only probes with ts <= hi(a) < W, which are late, and a probe past its purge edge "
                    "only bases whose window starts above it; the rows, a multiset, are the same (a state bound "
                    "sees it, a restart cannot)",
    "wakeups:stale": "as wakeups:drop: a missing or stale wake-up delays a key's purge, never changes a row",
}
"""Mutants that no case tells apart by their output, with the argument (``oij bench kit-power --restarts``
reports them as equivalent, and still runs them: a kill would make the entry stale)."""

_KEY_ATTRS = {
    "bases": ("bts", "bid", "bcv", "b0"),
    "probes": ("pts", "pid", "pval", "pex", "pcv"),
}


def _fresh(ks: Any, attrs: tuple[str, ...]) -> None:
    for a in attrs:
        v = getattr(ks, a)
        if a == "b0":
            setattr(ks, a, 0)
        elif a in ("bcv", "pcv"):
            setattr(ks, a, [[] for _ in v])
        else:
            setattr(ks, a, [])


def corrupt(o: Oracle, earlier: Oracle, mutant: str) -> None:
    """Apply ``mutant`` to the restored operator ``o``; ``earlier`` is the one restored from the checkpoint one
    event before (a fresh operator at the first)."""
    comp, how = mutant.split(":")
    stale = how == "stale"
    if comp == "watermark":
        o.w = earlier.w if stale else NO_WATERMARK
        o.max_ts = earlier.max_ts if stale else NO_WATERMARK
    elif comp.startswith("channel-"):
        c = int(comp.split("-")[1])
        if c < len(o.channel_max):
            o.channel_max[c] = earlier.channel_max[c] if stale else NO_WATERMARK
    elif comp in _KEY_ATTRS:
        for key, ks in o.keys.items():
            old = earlier.keys.get(key)
            if stale and old is not None:
                for a in _KEY_ATTRS[comp]:
                    setattr(ks, a, getattr(old, a))
            else:
                _fresh(ks, _KEY_ATTRS[comp])
    elif comp == "matched":
        o.matched = set(earlier.matched) if stale else set()
    elif comp == "cursors":
        for key, ks in o.keys.items():
            old = earlier.keys.get(key)
            if stale:
                if old is not None:
                    ks.cur_lo, ks.cur_hi, ks.cur_n, ks.cur_sum, ks.cur_dq = (old.cur_lo, old.cur_hi, old.cur_n,
                                                                             old.cur_sum, old.cur_dq)
                else:  # no cursor then: an empty range, as a fresh key state has
                    fresh = type(ks)(key, -1)
                    ks.cur_lo, ks.cur_hi = fresh.cur_lo, fresh.cur_hi
            else:
                ks.cur_n, ks.cur_sum = 0, 0
                ks.cur_dq.clear()
    elif comp == "wakeups":
        if stale:
            o.heap = [(w, slot, o.keys[ks.key]) for w, slot, ks in earlier.heap if ks.key in o.keys]
            heapq.heapify(o.heap)
            for key, ks in o.keys.items():
                old = earlier.keys.get(key)
                ks.wake = old.wake if old is not None else None
        else:
            o.heap = []
            for ks in o.keys.values():
                ks.wake = None
    else:
        raise ValueError(f"unknown component {comp!r}")


def _load(state_dir: str, k: int, q: Query) -> Oracle:
    if k <= 0:
        return Oracle(q)
    with open(os.path.join(state_dir, f"snap-{k}"), "rb") as f:
        return restore(f.read())


def main(mutant: str) -> int:
    state_dir = os.environ["OIJ_STATE_DIR"]
    k = int(os.environ.get("OIJ_CHECKPOINT", "0"))
    q, _ = read_case([sys.stdin.readline()])
    o = _load(state_dir, k, q)
    if k > 0:
        corrupt(o, _load(state_dir, k - 1, q), mutant)
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        e = event_of(json.loads(line))
        o.on_event(e)
        rows = _lines(o)
        out.write("".join(r + "\n" for r in rows))
        out.flush()
        if e.__class__.__name__ == "End":
            return 0
        k += 1
        save(state_dir, k, snapshot(o))
        out.write(f'{{"type":"checkpoint","events":{k}}}\n')
        out.flush()
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:  # for oij bench kit-power --restarts
        print("\n".join(f"{m}\t{EQUIVALENT.get(m, '')}" for m in MUTANTS))
        sys.exit(0)
    if len(sys.argv) != 2 or sys.argv[1] not in MUTANTS:
        sys.exit(f"usage: state_drop.py {{{','.join(MUTANTS)}}} | --list")
    sys.exit(main(sys.argv[1]))
