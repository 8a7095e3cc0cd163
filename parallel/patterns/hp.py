r"""HP-OIJ: the hybrid pattern's engine (PPOIJ §4.3).

Data flow of the calibration (PPOIJ §4.3)::

    emitters (driver) count key frequencies for the first ``calibration`` tuples, routing as KP
      --ctl queue--> replica 0 ("master"): assign(counts, current KP map, N, theta, max_split)
      --up queue (feedback channel)--> driver: Router.apply_map at the next epoch boundary
                                        (the stream never stops: epochs keep flowing meanwhile)

Alg. 1 itself (:func:`oij.parallel.runtime.balance.assign`) lives in the runtime,
because replica 0 runs it; it is re-exported here.

This module creates no process and no shared memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oij.parallel.registry import EngineOptions, EngineRun, register
from oij.parallel.runtime.balance import assign, is_balanced, model_loads
from oij.spec.model import Event, Query


@register("hp", "HP-OIJ: calibration as KP, Alg. 1 key -> replica sets, partial multicast, per-key "
          "round-robin collectors, key-based watermarks (processes + shared memory)")
def hp_engine(q: Query, events: Sequence[Event], options: EngineOptions) -> EngineRun:
    from oij.parallel.patterns.entry import run_engine

    return run_engine("hp", q, events, options)


__all__: list[Any] = ["assign", "hp_engine", "is_balanced", "model_loads"]
