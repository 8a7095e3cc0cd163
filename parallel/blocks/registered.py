"""The block engines in the registry: ``blocks-kp``, ``blocks-dp``, ``blocks-hp``, ``blocks-key``,
``blocks-scale`` (:mod:`oij.parallel.blocks.driver`), for ``oij check`` and the differential tests.

An engine takes the whole event sequence: it is cut into pieces of at most ``options.settings["piece_events"]`` events
(default :data:`~oij.parallel.blocks.driver.PIECE_EVENTS`) that the driver copies to the workers.  A query the
block path does not compute (a joining condition) runs on the same pattern's event engine, which says so in
its metrics (``engine``).  Helper processes come from ``options.runtime`` (a shared pool) or are started and
stopped per run.
"""

from __future__ import annotations

from collections.abc import Sequence

from oij.parallel.blocks.driver import BlockOptions, BlockRun, events_source, run
from oij.parallel.config import PATTERN_NAMES
from oij.parallel.registry import EngineOptions, EngineRun, get, options_for, register
from oij.reference.block_oracle import supports
from oij.spec.batch import Results
from oij.spec.model import Event, Query

from oij.io.jsonlread import parse_result_lines


def run_blocks_engine(pattern: str, q: Query, events: Sequence[Event], options: EngineOptions) -> EngineRun:
    """The registry's callable for ``blocks-<pattern>`` (module docstring)."""
    if not supports(q):
        inner = get(pattern)(q, events, options)
        inner.metrics["engine"] = "events (the block path has no cond)"
        return inner
    opt = options_for(BlockOptions, pattern, options)
    got: list[Results] = []

    def keep(br: BlockRun) -> None:
        lines: list[str] = []
        for p in br.parts:
            with open(p, encoding="utf-8") as f:
                lines += f.readlines()
        got.append(parse_result_lines(lines))

    metrics = run(events_source(q, events, opt.piece_events), opt, keep, rt=options.runtime,
                  start_method=options.start_method)
    return EngineRun(got[0] if got else Results(), metrics)


def _register(pattern: str, what: str) -> None:
    @register(f"blocks-{pattern}", f"{what}, a block at a time (parallel reading, columnar routing)")
    def engine(q: Query, events: Sequence[Event], options: EngineOptions) -> EngineRun:
        return run_blocks_engine(pattern, q, events, options)


for _p, _what in PATTERN_NAMES.items():
    _register(_p, _what)
