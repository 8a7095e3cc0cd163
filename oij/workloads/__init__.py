"""Workloads: stream generators and the papers' workload presets.

Public API::

    generate(preset_or_params, events, seed) -> (Query, Iterator[Event])      # lazy, constant memory
    generate_blocks(preset_or_params, events, seed) -> (Query, Iterator[Block])  # column-wise fast path
    write_workload(path, preset_or_params, events, seed) -> WriteStats          # Parquet / oij-jsonl
    PRESETS: dict[str, WorkloadParams]                                         # name -> params (.description, .source)

``events`` counts stream tuples (base + probe); watermark events and the
final End come on top.  The same (params, events, seed) give the same
events and the same file bytes.  See :mod:`oij.workloads.params` for the
parameters and :mod:`oij.workloads.generator` for the method.
"""

from __future__ import annotations

from collections.abc import Iterator

from oij.spec.model import Event, Query
from oij.workloads.generator import GEN_BLOCK, Block, WorkloadGenerator, block_events, events_of
from oij.workloads.params import ParamError, WorkloadParams, check_params, parse_value, with_overrides
from oij.workloads.presets import PRESETS, resolve
from oij.workloads.writers import WriteStats, block_columns, block_jsonl, write_workload

__all__ = [
    "GEN_BLOCK",
    "PRESETS",
    "Block",
    "ParamError",
    "WorkloadGenerator",
    "WorkloadParams",
    "WriteStats",
    "block_columns",
    "block_events",
    "block_jsonl",
    "check_params",
    "generate",
    "generate_blocks",
    "parse_value",
    "resolve",
    "with_overrides",
    "write_workload",
]


def generate(preset_or_params: str | WorkloadParams, events: int, seed: int) -> tuple[Query, Iterator[Event]]:
    """The query and a lazy iterator of the events (``events`` tuples + watermarks + End) of a workload.

    ``preset_or_params`` is a name in ``PRESETS`` or a :class:`~oij.workloads.params.WorkloadParams`.
    Raises :class:`ParamError` for bad parameters (at once, not on iteration).
    Memory: constant in ``events`` (one generation block plus the reorder buffer).
    """
    gen = WorkloadGenerator(resolve(preset_or_params), seed)
    if type(events) is not int or events < 0:
        raise ParamError("events", f"must be an integer >= 0, got {events!r}")
    return gen.query, events_of(gen, events)


def generate_blocks(preset_or_params: str | WorkloadParams, events: int, seed: int) -> tuple[Query, Iterator[Block]]:
    """Like :func:`generate`, but yields column-wise :class:`Block` s (numpy arrays) without the End.

    A block also carries each tuple's generated ``delay`` and the ``on_time``
    promise (delay <= lateness: the tuple is not late).  Use
    :func:`block_events` to turn a block into events, or :func:`block_columns` /
    :func:`block_jsonl` to write it.
    """
    gen = WorkloadGenerator(resolve(preset_or_params), seed)
    if type(events) is not int or events < 0:
        raise ParamError("events", f"must be an integer >= 0, got {events!r}")
    return gen.query, gen.blocks(events)
