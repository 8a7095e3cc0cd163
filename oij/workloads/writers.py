"""Column-wise writers: a generated :class:`~oij.workloads.generator.Block` straight to Parquet or oij-jsonl.

No Python object per event: Parquet columns are built from the numpy arrays
(zero-copy where the types agree; the ``type``/``side`` strings through a
dictionary cast), and oij-jsonl lines are concatenated by Arrow's string
kernels, so a block's text is one contiguous buffer.  The files are the same
as :class:`oij.io.parquet.ParquetEventWriter` and :func:`oij.io.jsonlwrite.format_event`
would write event by event (a test checks the JSONL byte for byte, and both
read back to the same events).
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from oij.io.atomic import atomic_path
from oij.io.jsonlwrite import format_query
from oij.io.parquet import FIELD_PREFIX, ParquetEventWriter
from oij.reference.columns import EventBlock
from oij.spec.model import Query
from oij.workloads.generator import KIND_WATERMARK, Block, WorkloadGenerator
from oij.workloads.params import ParamError, WorkloadParams
from oij.workloads.presets import resolve

DICTIONARY_COLUMNS = ["type", "side", "key", "channel"]
"""Columns dictionary-encoded in generated Parquet files (``id``, ``ts``, ``value`` are not: faster, smaller)."""

_TYPES = pa.array(["tuple", "watermark"], pa.string())
_SIDES = pa.array(["base", "probe"], pa.string())


def _dict_strings(codes: npt.NDArray[Any], dictionary: pa.Array, mask: npt.NDArray[Any] | None) -> pa.Array:
    idx = pa.array(codes.astype(np.int8), pa.int8(), mask=mask)
    return pa.DictionaryArray.from_arrays(idx, dictionary).cast(pa.string())


def block_columns(generated: Block, p: WorkloadParams) -> dict[str, pa.Array]:
    """The Parquet columns of a block (schema of :func:`oij.io.parquet.schema`).  O(n), no per-row Python."""
    block = generated.events
    is_wm = block.kind == KIND_WATERMARK
    mask: npt.NDArray[Any] | None = is_wm if is_wm.any() else None
    if p.key_type == "int":
        key = pa.array(block.key, pa.int64(), mask=mask)
    else:
        key = pc.binary_join_element_wise("k", pc.cast(pa.array(block.key, pa.int64(), mask=mask), pa.string()), "")
    return {
        "type": _dict_strings(block.kind, _TYPES, None),
        "side": _dict_strings(np.maximum(block.side, 0), _SIDES, mask),
        "id": pa.array(block.id, pa.int64(), mask=mask),
        "ts": pa.array(block.ts, pa.int64()),
        "key": key,
        "value": pa.array(block.value, pa.float64(), mask=mask),
        "channel": pa.array(block.channel.astype(np.int32), pa.int32()),
        **{FIELD_PREFIX + n: pa.array(v, pa.float64(), mask=mask) for n, v in sorted((block.fields or {}).items())},
    }


def _field_parts(block: EventBlock, tsel: npt.NDArray[np.bool_]) -> list[Any]:
    """The ``,"fields":{"x":1,...}`` pieces of the tuple lines (fields are integers, written as such)."""
    if not block.fields:
        return []
    parts: list[Any] = []
    for j, (name, v) in enumerate(sorted(block.fields.items())):
        parts.append((',"fields":{' if j == 0 else ",") + f'"{name}":')
        parts.append(pc.cast(pa.array(v[tsel].astype(np.int64)), pa.string()))
    parts.append("}")
    return parts


def block_jsonl(generated: Block, p: WorkloadParams) -> memoryview:
    """The oij-jsonl lines of a block, as one buffer (each line ends with a newline).  O(n) in Arrow kernels.

    Values are integers (the generator draws 0..99), so ``str(int) + ".0"``
    is exactly the ``repr`` of the float that :func:`oij.io.jsonlwrite.format_event` writes.
    """
    block = generated.events
    is_wm = block.kind == KIND_WATERMARK
    tsel = ~is_wm
    s = pc.cast
    st = pa.string()
    ts = block.ts
    t_side = _dict_strings(block.side[tsel], _SIDES, None)
    t_key = s(pa.array(block.key[tsel]), st)
    if p.key_type == "str":
        t_key = pc.binary_join_element_wise('"k', t_key, '"', "")
    t_lines = pc.binary_join_element_wise(
        '{"type":"tuple","side":"',
        t_side,
        '","id":',
        s(pa.array(block.id[tsel]), st),
        ',"ts":',
        s(pa.array(ts[tsel]), st),
        ',"key":',
        t_key,
        ',"value":',
        s(pa.array(block.value[tsel].astype(np.int64)), st),
        '.0,"channel":',
        s(pa.array(block.channel[tsel]), st),
        *_field_parts(block, tsel),
        "}\n",
        "",
    )
    nw = int(is_wm.sum())
    if nw:
        w_lines = pc.binary_join_element_wise(
            '{"type":"watermark","ts":',
            s(pa.array(ts[is_wm]), st),
            ',"channel":',
            s(pa.array(block.channel[is_wm]), st),
            "}\n",
            "",
        )
        nt = len(t_lines)
        idx = np.where(is_wm, nt + np.cumsum(is_wm) - 1, np.cumsum(tsel) - 1)
        lines = pc.take(pa.concat_arrays([t_lines, w_lines]), pa.array(idx))
    else:
        lines = t_lines
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32, count=len(lines) + 1, offset=4 * lines.offset)
    data = lines.buffers()[2]
    return memoryview(data)[int(offsets[0]) : int(offsets[-1])]


class _Pipeline:
    """Runs write steps in one background thread, in order, with at most ``depth`` steps queued.

    Arrow's kernels, the Parquet encoder and file writes release the GIL, so
    the next block is generated while the previous one is written.  The
    output is the same as writing inline (one worker, FIFO).
    """

    def __init__(self, depth: int = 2) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="oij-write")
        self.pending: deque[Future[Any]] = deque()
        self.depth = depth

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)``; blocks while ``depth`` steps are queued.  Re-raises a failed step's error."""
        while len(self.pending) >= self.depth:
            self.pending.popleft().result()
        self.pending.append(self.pool.submit(fn, *args))

    def drain(self) -> None:
        """Wait for every queued step."""
        while self.pending:
            self.pending.popleft().result()

    def __enter__(self) -> _Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self.drain()
        finally:
            for f in self.pending:
                f.cancel()
            self.pool.shutdown(wait=True)


@dataclass
class WriteStats:
    """What :func:`write_workload` wrote."""

    tuples: int = 0
    watermarks: int = 0
    rows: int = 0  # events: tuples + watermarks + the end row


def write_workload(
    path: str,
    preset_or_params: str | WorkloadParams,
    events: int,
    seed: int,
    *,
    fmt: str | None = None,
    rows_per_group: int = 1 << 18,
    on_block: Callable[[int], Any] | None = None,
) -> WriteStats:
    """Generate a workload into ``path`` (Parquet if it ends in ``.parquet`` or ``fmt="parquet"``, else oij-jsonl).

    ``events`` is the number of tuples; watermarks and the end row come on top.
    ``path`` ``-`` writes oij-jsonl to stdout.  ``on_block(n_tuples)`` is
    called after each block (progress).  Memory: one row group of
    ``rows_per_group`` rows plus the generator's reorder buffer.
    """
    p = resolve(preset_or_params)
    gen = WorkloadGenerator(p, seed)
    fmt = fmt or ("parquet" if path.endswith(".parquet") else "jsonl")
    stats = WriteStats()
    if path == "-":
        if fmt == "parquet":
            raise ParamError("output", "Parquet cannot be written to stdout")
        _write_jsonl(sys.stdout.buffer, gen, events, stats, on_block)
        sys.stdout.buffer.flush()
    else:
        # Written whole or not at all (e.g. the time range ran out, Ctrl-C, a full disk): the old file stays.
        with atomic_path(path) as tmp:
            if fmt == "parquet":
                _write_parquet(tmp, gen, events, stats, rows_per_group, on_block)
            else:
                with open(tmp, "wb") as f:
                    _write_jsonl(f, gen, events, stats, on_block)
    stats.rows = stats.tuples + stats.watermarks + 1
    return stats


def _count(b: Block, stats: WriteStats, on_block: Callable[[int], Any] | None) -> None:
    nt = b.tuples
    stats.tuples += nt
    stats.watermarks += len(b) - nt
    if on_block is not None:
        on_block(nt)


def _write_jsonl(
    out: IO[bytes], gen: WorkloadGenerator, events: int, stats: WriteStats, on_block: Callable[[int], Any] | None
) -> None:
    out.write((format_query(gen.query) + "\n").encode())
    p = gen.p

    def step(b: Block) -> None:
        out.write(block_jsonl(b, p))

    with _Pipeline() as pipe:
        for b in gen.blocks(events):
            pipe.submit(step, b)
            _count(b, stats, on_block)
    out.write(b'{"type":"end"}\n')


def _write_parquet(
    path: str,
    gen: WorkloadGenerator,
    events: int,
    stats: WriteStats,
    rows_per_group: int,
    on_block: Callable[[int], Any] | None,
) -> None:
    from oij.spec.model import End

    key_type = "int" if gen.p.key_type == "int" else "string"
    with ParquetEventWriter(
        path, gen.query, key_type=key_type, rows_per_group=rows_per_group, use_dictionary=DICTIONARY_COLUMNS
    ) as w:
        p, schema = gen.p, w.schema

        def step(tables: list[pa.Table]) -> None:
            w.writer.write_table(pa.concat_tables(tables), row_group_size=rows_per_group)

        # every row group but the last holds exactly rows_per_group rows: the parallel readers give each group
        # to one process (oij.io.pieces), so even groups are even work and no group is read twice
        with _Pipeline(depth=1) as pipe:
            buf: list[pa.Table] = []
            rows = 0
            for b in gen.blocks(events):
                buf.append(pa.table(block_columns(b, p), schema=schema))
                rows += len(b)
                _count(b, stats, on_block)
                del b
                if rows >= rows_per_group:
                    t = pa.concat_tables(buf)
                    full = rows - rows % rows_per_group
                    pipe.submit(step, [t.slice(0, full)])
                    buf, rows = ([t.slice(full)] if full < rows else []), rows - full
            if buf:
                pipe.submit(step, buf)
        w.write(End())


def query_of(preset_or_params: str | WorkloadParams) -> Query:
    """The query of a workload."""
    return resolve(preset_or_params).query()
