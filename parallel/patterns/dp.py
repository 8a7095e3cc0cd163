"""DP-OIJ: data parallelism (PPOIJ §3.2, §4.2).

Data flow::

    emitter e --one batch, written once--> broadcast ring e (N readers) --> round-robin collector of every replica
                                              owner = round robin over the replicas, per emitter

Every replica reads the same shared copy of a batch; the slot is reused only
after the last reader moved past it.  Every replica joins every tuple with
its partition of the opposite state; only the tuple's owner stores it.  The
round-robin collector (b0, p0, b1, p1, ... by epoch) gives all replicas one
common delivery order, which is what makes each pair come out exactly once
(PPOIJ Examples 4.1 and 4.2 show what happens without it; ``collector=naive``
reproduces them).  Rings are created and unlinked by the driver.
"""

from __future__ import annotations

from collections.abc import Sequence

from oij.parallel.registry import EngineOptions, EngineRun, register
from oij.spec.model import Event, Query


@register("dp", "DP-OIJ: broadcast of one shared copy, one owner per tuple, round-robin collector "
          "(processes + shared memory)")
def dp_engine(q: Query, events: Sequence[Event], options: EngineOptions) -> EngineRun:
    from oij.parallel.patterns.entry import run_engine

    return run_engine("dp", q, events, options)
