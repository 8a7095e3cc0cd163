"""Drive an operator and the specification in lockstep; report the first disagreement."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from oij.reference.oracle import Oracle
from oij.spec.model import Event, Query
from oij.spec.purge import compute_needed
from oij.spec.stream import compute_emitted

OracleFactory = Callable[[Query], Oracle]


def first_disagreement(q: Query, events: Sequence[Event], factory: OracleFactory = Oracle) -> str | None:
    """Feed ``events`` one by one; after each, compare emitted output and retained state with the spec.

    Returns None if they agree at every step, else a description of the first
    step where they do not.  Also runs the operator's ``_check()`` invariants.
    """
    o = factory(q)
    for i, e in enumerate(events):
        o.on_event(e)
        try:
            o._check()
        except AssertionError as err:
            return f"after event {i} ({e!r}): invariant broken: {err}"
        prefix = events[: i + 1]
        got = o.results()
        want = compute_emitted(prefix, q)
        if got != want:
            return f"after event {i} ({e!r}): emitted {got} but the spec says {want}"
        kept, needed = o.retained(), compute_needed(prefix, q)
        if kept - needed:
            return f"after event {i} ({e!r}): retains {sorted(kept - needed)} that the spec says are not needed"
        if needed - kept:
            return f"after event {i} ({e!r}): dropped {sorted(needed - kept)} that are still needed"
    return None
