"""Events column-wise: :class:`EventBlock`, the one columnar event type of the project.

Every part that handles events in numpy columns uses this type::

    oij-jsonl / Parquet --readers (oij.io.columnar)-------------------> EventBlock (keys as read)
    generator (oij.workloads.generator.Block.events) ---------------> EventBlock (key indexes, key_prefix)
    EventBlock --BlockOracle.feed (oij.reference.block_oracle)                  (the block path of the oracle)
    EventBlock --chunks (oij.parallel.runtime.emitter.Chunk.events) ------> EventBlock (dense key codes) + cond operands
    EventBlock --pieces (oij.parallel.blocks.driver) --> the block engine's replicas

A block is a run of consecutive, already validated events in arrival order, one numpy array per field.
What is not an event column stays outside it: the generator's ``delay`` and ``on_time`` promise
(:class:`oij.workloads.generator.Block`), the engines' cond operands (:class:`oij.parallel.runtime.emitter.Chunk`).

Creates no process and no shared memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from oij.spec.model import End, Event, Key, Side, StreamTuple, Watermark

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

KIND_TUPLE = 0
"""``EventBlock.kind`` of a tuple."""
KIND_WATERMARK = 1
"""``EventBlock.kind`` of a watermark."""
SIDE_BASE = 0
"""``EventBlock.side`` of a base tuple."""
SIDE_PROBE = 1
"""``EventBlock.side`` of a probe tuple."""
SIDE_NAMES: tuple[Side, Side] = ("base", "probe")
"""The side of ``EventBlock.side`` 0 and 1 (:data:`SIDE_BASE`, :data:`SIDE_PROBE`)."""


@dataclass
class EventBlock:
    """Consecutive validated events in arrival order, column-wise (module docstring).

    * ``kind``: 0 tuple (:data:`KIND_TUPLE`) / 1 watermark (:data:`KIND_WATERMARK`);
    * ``side``: 0 base / 1 probe, -1 for a watermark;
    * ``id``: int64 (an object column for ids beyond 64 bits, which the engines refuse); 0 for a watermark;
    * ``ts``, ``channel``: int64, a tuple's or a watermark's;
    * ``key``: the join keys -- an int64 column when every key is an int that fits, else an object column
      of the keys as read; or, when ``key_prefix`` is not None, int64 key *indexes*: the key of index i is
      ``f"{key_prefix}{i}"`` (the generator's string keys, formatted only by :meth:`keys`).  A watermark's
      cell is not a key (0, -1 or None);
    * ``value``: float64, 0.0 for a watermark;
    * ``end``: the stream's End follows the block's last event;
    * ``fields``: None when no tuple of the block has named fields, else one float64 column per field name
      (``StreamTuple.fields`` column-wise): NaN where a tuple lacks the field (a field's value is finite,
      :func:`oij.spec.model.check_tuple`), a watermark's cell unspecified.

    The engines' views: ``key`` may also hold dense key codes (:class:`oij.parallel.runtime.emitter.Chunk`),
    which stand for the keys in equality, the only use the join makes of them.
    """

    kind: npt.NDArray[np.int8]
    side: npt.NDArray[np.int8]
    id: npt.NDArray[Any]
    ts: I64
    key: npt.NDArray[Any]
    value: F64
    channel: I64
    end: bool = False
    fields: dict[str, F64] | None = None
    key_prefix: str | None = None

    def __len__(self) -> int:
        return len(self.kind)

    @property
    def tuples(self) -> int:
        """Number of tuple rows.  O(n)."""
        return int(np.count_nonzero(self.kind == KIND_TUPLE))

    def slice(self, a: int, b: int) -> EventBlock:
        """Events ``a`` to ``b`` (views of the columns); ``end`` kept only when the slice reaches the block's
        end.  O(fields)."""
        return EventBlock(self.kind[a:b], self.side[a:b], self.id[a:b], self.ts[a:b], self.key[a:b],
                          self.value[a:b], self.channel[a:b], self.end and b >= len(self.kind),
                          None if self.fields is None else {k: v[a:b] for k, v in self.fields.items()},
                          self.key_prefix)

    def keys(self) -> npt.NDArray[Any]:
        """The key column as keys: ``key`` itself, or with ``key_prefix`` the formatted strings (an object
        column).  O(n) (per-tuple Python work with a prefix)."""
        if self.key_prefix is None:
            return self.key
        pre = self.key_prefix
        out = np.empty(len(self.key), dtype=object)
        out[:] = [f"{pre}{k}" for k in self.key.tolist()]
        return out

    def events(self) -> Iterator[Event]:
        """The block as event objects (and End if the stream ends here).  O(n)."""
        sides = SIDE_NAMES
        names = sorted(self.fields) if self.fields else []
        fcols = [self.fields[n].tolist() for n in names] if self.fields else []
        pre = self.key_prefix
        keys = self.key.tolist()
        for i, (k, s, ident, t, v, c) in enumerate(zip(self.kind.tolist(), self.side.tolist(), self.id.tolist(),
                                                       self.ts.tolist(), self.value.tolist(),
                                                       self.channel.tolist(), strict=True)):
            if k == KIND_TUPLE:
                f = tuple((n, col[i]) for n, col in zip(names, fcols, strict=True) if col[i] == col[i]) \
                    if fcols else ()
                key: Key = keys[i] if pre is None else f"{pre}{keys[i]}"
                yield StreamTuple(sides[s], ident, t, key, v, c, f)
            else:
                yield Watermark(t, c)
        if self.end:
            yield End()

    def columns(self) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int8], npt.NDArray[Any], I64,
                               npt.NDArray[Any], F64, I64]:
        """(kind, side, id, ts, key, value, channel): what :meth:`oij.reference.block_oracle.BlockOracle.feed` takes."""
        return self.kind, self.side, self.id, self.ts, self.key, self.value, self.channel

    @staticmethod
    def concat(blocks: list[EventBlock]) -> EventBlock:
        """Consecutive blocks as one (the last one's ``end``).  O(n)."""
        if len(blocks) == 1:
            return blocks[0]
        if not blocks:
            return EventBlock.from_events([])
        prefix = blocks[0].key_prefix
        if any(b.key_prefix != prefix for b in blocks):  # key indexes of different spaces: the keys themselves
            blocks = [replace(b, key=b.keys(), key_prefix=None) for b in blocks]
            prefix = None
        keys = [b.key for b in blocks]
        if any(k.dtype == object for k in keys):
            keys = [k.astype(object) for k in keys]
        ids = [b.id for b in blocks]
        if any(i.dtype == object for i in ids):
            ids = [i.astype(object) for i in ids]
        fields: dict[str, F64] | None = None
        if any(b.fields is not None for b in blocks):
            names = sorted({n for b in blocks for n in (b.fields or {})})
            fields = {n: np.concatenate([(b.fields or {}).get(n, np.full(len(b), np.nan)) for b in blocks])
                      for n in names}
        return EventBlock(np.concatenate([b.kind for b in blocks]), np.concatenate([b.side for b in blocks]),
                          np.concatenate(ids), np.concatenate([b.ts for b in blocks]), np.concatenate(keys),
                          np.concatenate([b.value for b in blocks]), np.concatenate([b.channel for b in blocks]),
                          blocks[-1].end, fields, prefix)

    @staticmethod
    def from_events(events: Iterable[Event]) -> EventBlock:
        """The block of already validated events; an End ends it (``end``), what follows the End is ignored.
        O(n)."""
        kind: list[int] = []
        side: list[int] = []
        ids: list[int] = []
        ts: list[int] = []
        keys: list[Any] = []
        value: list[float] = []
        channel: list[int] = []
        named: list[tuple[int, tuple[tuple[str, float], ...]]] = []
        end = False
        for e in events:
            if type(e) is StreamTuple:
                if e.fields:
                    named.append((len(kind), e.fields))
                kind.append(0)
                side.append(0 if e.side == "base" else 1)
                ids.append(e.id)
                keys.append(e.key)
                value.append(e.value)
            elif type(e) is Watermark:
                kind.append(1)
                side.append(-1)
                ids.append(0)
                keys.append(None)
                value.append(0.0)
            else:
                assert type(e) is End
                end = True
                break
            ts.append(e.ts)
            channel.append(e.channel)
        kcol = np.array(kind, np.int8)
        fields: dict[str, F64] = {}
        for j, fs in named:
            for name, v in fs:
                col = fields.get(name)
                if col is None:
                    col = fields[name] = np.full(len(kind), np.nan)
                col[j] = v
        return EventBlock(kcol, np.array(side, np.int8), _int64_or_object(ids), np.array(ts, np.int64),
                          _key_array(keys, kcol), np.array(value, np.float64), np.array(channel, np.int64), end,
                          fields or None)


def _int64_or_object(xs: list[Any]) -> npt.NDArray[Any]:
    """int64 when every value is an int that fits, else an object column (ids beyond 64 bits: the engines refuse
    them, the oracle does not)."""
    if all(type(x) is int and -(1 << 63) <= x < (1 << 63) for x in xs):
        return np.array(xs, np.int64)
    out = np.empty(len(xs), dtype=object)
    out[:] = xs
    return out


def _key_array(keys: list[Any], kind: npt.NDArray[np.int8]) -> npt.NDArray[Any]:
    """int64 when every tuple's key is an int that fits (a watermark's cell 0), else an object column."""
    if all(type(k) is int and -(1 << 63) <= k < (1 << 63) for k, t in zip(keys, kind.tolist(), strict=True)
           if t == 0):
        return np.array([0 if k is None else k for k in keys], dtype=np.int64)
    out = np.empty(len(keys), dtype=object)
    out[:] = keys
    return out
