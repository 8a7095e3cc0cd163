"""KP-OIJ: key-based parallelism (PPOIJ §3.1, §4.1).

Data flow::

    emitter e --hash(key) mod N--> SPSC ring (e, r) --> standard collector of replica r --> JoinState (owner: r)

Every tuple of a key reaches one replica, which stores it, so any delivery
order is correct; the replica's watermark is the minimum over its input
channels of the largest W each channel carried (global low watermark).
The rings are created and unlinked by the driver (:mod:`oij.parallel.runtime.pool`).
"""

from __future__ import annotations

from collections.abc import Sequence

from oij.parallel.registry import EngineOptions, EngineRun, register
from oij.spec.model import Event, Query


@register("kp", "KP-OIJ: hash(key) -> one replica, standard collector, global low watermark "
          "(processes + shared memory)")
def kp_engine(q: Query, events: Sequence[Event], options: EngineOptions) -> EngineRun:
    from oij.parallel.patterns.entry import run_engine

    return run_engine("kp", q, events, options)
