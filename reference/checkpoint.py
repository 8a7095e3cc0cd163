"""Checkpoints of the oracle: :func:`snapshot` saves a :class:`oij.reference.oracle.Oracle`'s whole state,
:func:`restore` brings it back (the restart protocol's ``oij join --state``; :mod:`oij.spec.recovery` defines
what a restored run must commit).

The state is everything the operator holds: W and every channel's watermark, the stored tuples of every key,
the pending bases, the aggregate cursors, the wake heap and the rows not yet taken.  Three attributes are
derived and rebuilt instead of saved: the bound handler of bases and the comparison functions (from the
query), and the counter of key-state slots, which restarts above every slot in use.  Slots only break ties
in the wake heap between keys woken at the same time, and every slot a restored operator hands out is above
every slot in its state, as the original's are, so both wake keys in the same order and emit the same rows
in the same order (``tests/reference/test_oracle_snapshot.py`` restores at every event and compares).

The format is private to this version of ``reference`` (a pickle of plain Python values): only bytes that
:func:`snapshot` wrote may be restored.  O(state) each way.
"""

from __future__ import annotations

import itertools
import pickle
from typing import Any

from oij.reference.oracle import Oracle
from oij.spec.match import COMPARE

FORMAT = 1
"""The version of the snapshot format; :func:`restore` refuses another."""

_DERIVED = ("_on_base", "_ops", "_seq")


def snapshot(o: Oracle) -> bytes:
    """The operator's whole state as bytes.  Requires: nothing.  Changes: nothing.  O(state)."""
    state = {k: v for k, v in o.__dict__.items() if k not in _DERIVED}
    return pickle.dumps((FORMAT, state), protocol=pickle.HIGHEST_PROTOCOL)


def restore(data: bytes) -> Oracle:
    """The operator :func:`snapshot` saved: it answers every later event exactly as the saved one would.
    Raises ValueError for bytes that are not such a snapshot.  O(state)."""
    try:
        fmt, state = pickle.loads(data)  # our own checkpoint file, never input from elsewhere
    except Exception as e:
        raise ValueError(f"not an oracle snapshot: {e}") from None
    if fmt != FORMAT or not isinstance(state, dict) or "q" not in state:
        raise ValueError("not an oracle snapshot of this version")
    o: Oracle = Oracle.__new__(Oracle)
    o.__dict__.update(state)
    o._on_base = o._base_pairs if o.agg is None else o._base_aggregate
    o._ops = [COMPARE[c.op] for c in o.cond]
    slots: list[Any] = [ks.slot for ks in o.keys.values()] + [slot for _, slot, _ in o.heap]
    o._seq = itertools.count(max(slots, default=-1) + 1)
    return o
