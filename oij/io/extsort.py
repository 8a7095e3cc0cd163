"""The canonical order of a result of any size, in bounded memory: an external merge sort.

``oij join`` and ``oij run`` write their results sorted (``Results.canonical``:
pairs by base id, the null probe first, then probe id; aggregate rows by base
id; late ids ascending), so that two outputs can be compared with ``cmp``.
Sorting in memory makes memory grow with the output; GNU sort has long sorted
files larger than memory with sorted *runs* spilled to disk and merged.  So
does :class:`CanonicalSorter`:

* ``add(results)`` buffers rows as int64 columns (pairs: base, probe, null;
  late: id) and aggregate rows as (base id, formatted line).  When the buffer
  holds ``run_rows`` rows, it is sorted and spilled as one *run*: raw column
  files in a temporary directory.
* ``write(out)`` merges the runs with a block-wise k-way merge: it reads a block
  of every run, takes from each block the rows not above the smallest last key
  among the blocks (every row still unread in any run is at least that key),
  sorts that batch and writes it; then refills the blocks it emptied.  Memory:
  one block per run plus one batch, the blocks sized so that all of them
  together hold at most ``MERGE_ROWS`` rows whatever the number of runs.

Why the bytes equal the in-memory sort's: every batch is sorted, every row of a
later batch is at least the bound of the earlier one, and rows with equal keys
are equal rows (a pair is its key; a base id has one aggregate row; a late id
is its key), so the order between equal keys cannot show.

A small result never becomes columns: until ``small_rows`` rows (4,096, or
fewer than one run) the sorter keeps them as Python tuples and sorts them in
memory at the end, so that ``oij join`` on a small case does not import numpy
(40 ms of a 120 ms start; the conformance kit starts ``oij join`` once per
case).  Past it, those rows and every later one go to the columns.

Ids beyond int64 (the protocol allows them; generated and real streams do not
use them) cannot go in the columns: the sorter then reads its runs back and
sorts in memory, as before.

Data flow::

    Results --add--> column buffer --(run_rows)--> sort --> run files (tmp dir)
    write: run files --blocks--> batch <= bound --> sort --> pair / aggregate / late lines --> out

Files: the run directory is created (a fresh name in ``tmp_dir``,
beside the output or in ``$TMPDIR``) on the first spill and removed by
``close`` (the ``with`` block's end), on success, on an error and on SIGINT or
SIGTERM (both raise in oij's CLI; a signal that cuts ``close`` short before it
begins is made good by the CLI's ``oij.io.atomic.remove_leftovers``).  No process, no shared memory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from oij.io.atomic import TMP_MARK, naming, settled, signals_deferred, temp_name
from oij.spec.batch import Results

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

RUN_ROWS = 1 << 20  # rows per run: 24 MiB of buffered pair columns, about 80 MiB at the peak of its sort
BLOCK_ROWS = 1 << 16  # rows read from each run per refill, at most (fewer when there are many runs)
MERGE_ROWS = 1 << 19  # rows held in all the runs' blocks together during the merge: flat in the number of runs
SMALL_ROWS = 1 << 12  # rows kept as Python tuples (no numpy) before the first column is made
FAN_IN = 64  # runs merged at once, at most: more runs are first merged in groups into longer runs


@dataclass
class _Part:
    """One part of the result (pairs, aggregates or late) being sorted: its buffer and its runs."""

    name: str
    cols: int  # int64 key columns: pairs 3 (base, null-last flag, probe), aggregates 1, late 1
    lines: bool  # rows carry a formatted line (aggregates)
    buf: list[list[Any]] = field(default_factory=list)  # per column, chunks of arrays
    buf_lines: list[bytes] = field(default_factory=list)
    buffered: int = 0
    runs: list[tuple[str, int]] = field(default_factory=list)  # (file stem, rows)


@dataclass
class _Memory:
    """Rows kept as Python values, sorted in memory at the end: a small result's, or those of a sorter that met an
    id beyond int64.  Pairs, (base id, aggregate line), late ids."""

    pairs: list[tuple[int, int | None]] = field(default_factory=list)
    aggregates: list[tuple[int, bytes]] = field(default_factory=list)
    late: list[int] = field(default_factory=list)

    def rows(self) -> int:
        return len(self.pairs) + len(self.aggregates) + len(self.late)

    def extend(self, pairs: list[tuple[int, int | None]], aggregates: list[tuple[int, bytes]],
               late: list[int]) -> None:
        self.pairs += pairs
        self.aggregates += aggregates
        self.late += late


class CanonicalSorter:
    """Collects result rows in any order; writes them in canonical order (module docstring).

    ``add`` is O(rows) amortised plus O(run_rows log run_rows) per spill; ``write`` is O(N log k) for N rows in
    k runs (numpy sorts per batch).  Memory: O(run_rows + k * block_rows), whatever N is."""

    def __init__(self, tmp_dir: str | None = None, run_rows: int | None = None, block_rows: int = BLOCK_ROWS,
                 small_rows: int = SMALL_ROWS, fan_in: int = FAN_IN) -> None:
        self.tmp_dir = tmp_dir
        self.fan_in = max(2, fan_in)
        self.merges = 0  # runs written by merging other runs (more than fan_in runs)
        # OIJ_SORT_RUN_ROWS: a developer's knob (the tests make tiny runs through the CLI with it)
        self.run_rows = run_rows if run_rows is not None else int(os.environ.get("OIJ_SORT_RUN_ROWS", RUN_ROWS))
        self.block_rows = block_rows
        self.dir: str | None = None
        self.parts = {"pairs": _Part("pairs", 3, False), "aggregates": _Part("aggregates", 1, True),
                      "late": _Part("late", 1, False)}
        # the rows of a small result, until they reach small_rows (or a run); then None for good
        self.small: _Memory | None = _Memory()
        self.small_rows = min(small_rows, self.run_rows)
        self.memory: _Memory | None = None  # set once an id does not fit int64: everything sorted in memory
        self.spills = 0

    # ------------------------------------------------------------------ collecting
    def add(self, res: Results) -> None:
        """Take the rows of ``res`` (any order)."""
        from oij.io.jsonlwrite import result_lines

        lines = [x.encode() for x in result_lines(Results(aggregates=res.aggregates))]
        self._add(res.pairs, list(zip((r[0] for r in res.aggregates), lines, strict=True)), res.late)

    def _add(self, pairs: list[tuple[int, int | None]], aggregates: list[tuple[int, bytes]], late: list[int]) -> None:
        """Take rows: pairs, (base id, aggregate line), late ids."""
        if self.memory is not None:
            self.memory.extend(pairs, aggregates, late)
            return
        if self.small is not None:
            if self.small.rows() + len(pairs) + len(aggregates) + len(late) < self.small_rows:
                self.small.extend(pairs, aggregates, late)
                return
            small, self.small = self.small, None  # no longer small: these rows and every later one as columns
            pairs, aggregates, late = small.pairs + pairs, small.aggregates + aggregates, small.late + late
        import numpy as np

        try:
            n = len(pairs)
            a = np.fromiter((p[0] for p in pairs), np.int64, n)
            flag = np.fromiter((p[1] is not None for p in pairs), np.int64, n)
            b = np.fromiter((0 if p[1] is None else p[1] for p in pairs), np.int64, n)
            keys = np.fromiter((r[0] for r in aggregates), np.int64, len(aggregates))
            late_ids = np.fromiter(late, np.int64, len(late))
        except OverflowError:
            self._to_memory()
            self._add(pairs, aggregates, late)
            return
        if n:
            self._take(self.parts["pairs"], [a, flag, b])
        if len(keys):
            self._take(self.parts["aggregates"], [keys], [x for _, x in aggregates])
        if len(late_ids):
            self._take(self.parts["late"], [late_ids])

    def add_pair_columns(self, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64],
                         null: npt.NDArray[np.bool_]) -> None:
        """Take pairs given as columns (the engines' pairs mode); ``b`` is ignored where ``null``."""
        import numpy as np

        if self.small is not None:  # columns come from numpy already: the small rows join them
            small, self.small = self.small, None
            if small.rows():
                self._add(small.pairs, small.aggregates, small.late)
        if self.memory is not None:
            self.memory.pairs += [(x, None if z else y) for x, y, z in zip(a.tolist(), b.tolist(), null.tolist(),
                                                                         strict=True)]
            return
        self._take(self.parts["pairs"], [a.astype(np.int64), (~null).astype(np.int64),
                                          np.where(null, 0, b).astype(np.int64)])

    def add_aggregate_columns(self, base: npt.NDArray[Any], count: npt.NDArray[np.int64],
                              value: npt.NDArray[np.float64], null: npt.NDArray[np.bool_],
                              counts_are_values: bool = False) -> None:
        """Take aggregate rows given as columns (:class:`oij.reference.block_oracle.BlockOutput`'s): their lines
        made at once (:func:`oij.io.jsonlwrite.aggregate_lines`), not row by row.  O(rows)."""
        import numpy as np

        from oij.io.jsonlwrite import aggregate_lines

        if self.memory is not None or base.dtype != np.int64:  # an id beyond int64: rows, sorted in memory
            counts = count.tolist()
            vals: list[Any] = counts if counts_are_values else [
                None if z else v for v, z in zip(value.tolist(), null.tolist(), strict=True)]
            self.add(Results(aggregates=list(zip(base.tolist(), counts, vals, strict=True))))
            return
        if self.small is not None:  # columns come from numpy already: the small rows join them
            small, self.small = self.small, None
            if small.rows():
                self._add(small.pairs, small.aggregates, small.late)
        lines = aggregate_lines(base, count, value, null, counts_are_values).splitlines(keepends=True)
        self._take(self.parts["aggregates"], [base], lines)

    def _take(self, part: _Part, cols: list[Any], lines: list[bytes] | None = None) -> None:
        if not part.buf:
            part.buf = [[] for _ in range(part.cols)]
        for i, c in enumerate(cols):
            part.buf[i].append(c)
        if lines is not None:
            part.buf_lines += lines
        part.buffered += len(cols[0])
        if part.buffered >= self.run_rows:
            self._spill(part)

    def _sorted_buffer(self, part: _Part) -> tuple[list[Any], list[bytes]]:
        import numpy as np

        cols = [np.concatenate(c) for c in part.buf]
        if not part.lines:
            return sort_rows(cols), []
        order = np.lexsort(tuple(reversed(cols)))  # the first column is the primary key
        lines = [part.buf_lines[i] for i in order.tolist()]
        return [c[order] for c in cols], lines

    def _spill(self, part: _Part) -> None:
        """Sort the buffer of ``part`` and write it as a run."""
        cols, lines = self._sorted_buffer(part)
        if self.dir is None:
            # named before it exists (oij.io.atomic.temp_name): close() finds it whenever a Ctrl-C comes
            self.dir = temp_name(self.tmp_dir, f".oij-sort{TMP_MARK}")
            try:
                os.mkdir(self.dir, 0o700)
            except FileExistsError:  # another's (48 random bits: never seen): not to be removed
                settled(self.dir)
                self.dir = None
                raise
        stem = os.path.join(self.dir, f"{part.name}-{len(part.runs)}")
        with naming(self.dir):  # a full disk names the run directory
            for i, c in enumerate(cols):
                with open(f"{stem}.{i}", "wb") as f:
                    f.write(c.data)  # not ndarray.tofile: its error on a full disk has no errno
            if part.lines:
                import numpy as np

                with open(f"{stem}.lines", "wb") as f:
                    f.write(b"".join(lines))
                with open(f"{stem}.offsets", "wb") as f:
                    ends = np.zeros(len(lines) + 1, np.int64)
                    np.cumsum(np.fromiter(map(len, lines), np.int64, len(lines)), out=ends[1:])
                    f.write(ends.data)
        part.runs.append((stem, len(cols[0])))
        part.buf, part.buf_lines, part.buffered = [], [], 0
        self.spills += 1

    def _merge_runs(self, part: _Part, group: list[tuple[str, int]]) -> None:
        """Merge the runs ``group`` of ``part`` into one new run (appended to its runs) and remove their files."""
        import numpy as np

        assert self.dir is not None
        stem = os.path.join(self.dir, f"{part.name}-m{self.merges}")
        block = max(1, min(self.block_rows, MERGE_ROWS // max(1, len(group))))
        sources = [_read_run(part.name, st, 0, rows, block) for st, rows in group]
        rows = 0
        with naming(self.dir), contextlib.ExitStack() as stack:
            files = [stack.enter_context(open(f"{stem}.{i}", "wb")) for i in range(part.cols)]
            text = stack.enter_context(open(f"{stem}.lines", "wb")) if part.lines else None
            offsets = stack.enter_context(open(f"{stem}.offsets", "wb")) if part.lines else None
            at = 0
            if offsets is not None:
                offsets.write(np.zeros(1, np.int64).data)
            for cols, lines in _merge(part.name, sources):
                for f, c in zip(files, cols, strict=True):
                    f.write(np.ascontiguousarray(c, np.int64).data)
                if text is not None and offsets is not None:
                    text.write(b"".join(lines))
                    ends = at + np.cumsum(np.fromiter(map(len, lines), np.int64, len(lines)))
                    offsets.write(ends.data)
                    at = int(ends[-1]) if len(ends) else at
                rows += len(cols[0])
        for st, _rows in group:
            for suffix in [*(str(i) for i in range(part.cols)), *(("lines", "offsets") if part.lines else ())]:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{st}.{suffix}")
        part.runs.append((stem, rows))
        self.merges += 1

    def _to_memory(self) -> None:
        """An id beyond int64: read every run and buffer back into memory (sorted there at the end)."""
        mem = _Memory()
        for name, part in self.parts.items():
            for cols, lines in self._blocks(part):
                if name == "pairs":
                    mem.pairs += [(x, y if f else None) for x, f, y in zip(*(c.tolist() for c in cols), strict=True)]
                elif name == "late":
                    mem.late += cols[0].tolist()
                else:
                    mem.aggregates += zip(cols[0].tolist(), lines, strict=True)
            part.buf, part.buf_lines, part.buffered = [], [], 0
        self.memory = mem
        self.close()

    # ------------------------------------------------------------------ writing
    def write(self, out: IO[str]) -> None:
        """Write every row in canonical order: pairs, aggregate rows, late ids (the bytes of
        ``result_lines(results.canonical())``)."""
        from oij.io.jsonlwrite import result_lines

        m = self.memory if self.memory is not None else self.small
        if m is not None:
            from oij.spec.batch import pair_order

            out.writelines(result_lines(Results(pairs=sorted(m.pairs, key=pair_order))))
            out.write(b"".join(x for _, x in sorted(m.aggregates, key=lambda r: r[0])).decode())
            out.writelines(result_lines(Results(late=sorted(m.late))))
            return
        for name in PARTS:
            _write_rows(name, self._merged(self.parts[name]), out)

    def spill_all(self) -> dict[str, list[tuple[str, int]]]:
        """Write every buffered row as a run, so that other processes can merge them (:func:`write_range`); the
        runs of every part, ``{part: [(file stem, rows)]}``.  The runs stay this sorter's: ``close`` removes
        them.  Requires ids that fit int64 (the parallel engines').  O(buffered rows log run_rows)."""
        if self.memory is not None:
            raise ValueError("an id beyond int64: the rows are in memory, not in runs")
        if self.small is not None:
            small, self.small = self.small, None
            if small.rows():
                self._add(small.pairs, small.aggregates, small.late)
        for part in self.parts.values():
            if part.buffered:
                self._spill(part)
        return {name: list(part.runs) for name, part in self.parts.items()}

    def _blocks(self, part: _Part) -> Iterator[tuple[list[Any], list[bytes]]]:
        """Every row of ``part`` (runs, then the buffer), unsorted, in blocks."""
        for stem, rows in part.runs:
            yield from _read_run(part.name, stem, 0, rows, self.block_rows)
        if part.buffered:
            yield self._sorted_buffer(part)

    def _merged(self, part: _Part) -> Iterator[tuple[list[Any], list[bytes]]]:
        """The rows of ``part`` in order, batch by batch (the block-wise k-way merge of the module docstring).
        More than ``fan_in`` runs (with the buffer as one more) are first merged ``fan_in`` at a time into
        longer runs, oldest first, until few enough are left: so the final merge, like every merge before it,
        reads at most ``fan_in`` runs at once -- as many open files and blocks of at least
        ``MERGE_ROWS / fan_in`` rows, whatever the number of runs.  O(N log_fan_in(runs)) bytes moved."""
        while len(part.runs) + (1 if part.buffered else 0) > self.fan_in:
            group, part.runs = part.runs[: self.fan_in], part.runs[self.fan_in:]
            self._merge_runs(part, group)
        block = max(1, min(self.block_rows, MERGE_ROWS // max(1, len(part.runs))))
        sources: list[Iterator[tuple[list[Any], list[bytes]]]] = [
            _read_run(part.name, stem, 0, rows, block) for stem, rows in part.runs]
        if part.buffered:
            sources.append(iter([self._sorted_buffer(part)]))
            part.buf, part.buf_lines, part.buffered = [], [], 0
        return _merge(part.name, sources)

    def close(self) -> None:
        """Remove the run files (idempotent)."""
        if self.dir is not None:
            with signals_deferred():  # a Ctrl-C now is taken once the directory is gone, not halfway through
                shutil.rmtree(self.dir, ignore_errors=True)
                settled(self.dir)
                self.dir = None
            for p in self.parts.values():
                p.runs = []

    def __enter__(self) -> CanonicalSorter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


PARTS = ("pairs", "aggregates", "late")
"""The parts of a result, in the order they are written."""

_SHAPE = {"pairs": (3, False), "aggregates": (1, True), "late": (1, False)}
"""Per part: int64 key columns, and whether rows carry a formatted line."""


def _read_run(name: str, stem: str, start: int, stop: int, block: int) -> Iterator[tuple[list[Any], list[bytes]]]:
    """Rows ``[start, stop)`` of one run of part ``name``, in blocks of at most ``block`` rows."""
    import numpy as np

    ncols, has_lines = _SHAPE[name]
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(open(f"{stem}.{i}", "rb")) for i in range(ncols)]
        for f in files:
            f.seek(start * 8)
        offsets = np.fromfile(f"{stem}.offsets", np.int64) if has_lines else None
        text = stack.enter_context(open(f"{stem}.lines", "rb")) if has_lines else None
        if text is not None and offsets is not None:
            text.seek(int(offsets[start]))
        for first in range(start, stop, block):
            n = min(block, stop - first)
            cols = [np.fromfile(f, np.int64, n) for f in files]
            lines: list[bytes] = []
            if text is not None and offsets is not None:
                o = offsets[first: first + n + 1]
                data = text.read(int(o[-1] - o[0]))
                rel = (o - o[0]).tolist()
                lines = [data[rel[k]: rel[k + 1]] for k in range(n)]
            yield cols, lines


def _merge(name: str, sources: list[Iterator[tuple[list[Any], list[bytes]]]]
           ) -> Iterator[tuple[list[Any], list[bytes]]]:
    """The rows of sorted ``sources`` in order, batch by batch (the block-wise k-way merge)."""
    import numpy as np

    ncols, has_lines = _SHAPE[name]
    heads: list[tuple[list[Any], list[bytes]] | None] = [next(s, None) for s in sources]
    while True:
        live = [(k, h) for k, h in enumerate(heads) if h is not None and len(h[0][0])]
        if not live:
            return
        # the bound: the smallest last key among the blocks (lexicographic over the key columns)
        bound = min(tuple(int(c[-1]) for c in h[0]) for _, h in live)
        take_cols: list[list[Any]] = [[] for _ in range(ncols)]
        take_lines: list[bytes] = []
        for k, (cols, lines) in live:
            n = _count_not_above(cols, bound)
            for i in range(ncols):
                take_cols[i].append(cols[i][:n])
            take_lines += lines[:n]
            rest = ([c[n:] for c in cols], lines[n:])
            heads[k] = rest if len(rest[0][0]) else next(sources[k], None)
        merged = [np.concatenate(c) for c in take_cols]
        if len(live) == 1:  # one source's rows: in order already
            yield merged, take_lines
            continue
        if not has_lines:
            yield sort_rows(merged), []
            continue
        order = np.lexsort(tuple(reversed(merged)))
        yield [c[order] for c in merged], [take_lines[i] for i in order.tolist()]


def sort_rows(cols: list[Any]) -> list[Any]:
    """The int64 columns ``cols`` (the first the primary key) with their rows sorted lexicographically.

    When the columns' ranges allow it, every row is one int64 -- ``sum_i (c_i - min_i) * prod_{j>i} span_j``,
    which orders as the rows do -- sorted by value (numpy's sort of one int64 column, no permutation and no
    gather) and split back by division; otherwise ``np.lexsort``.  The same rows in the same order either way
    (equal rows are equal).  O(n log n)."""
    import numpy as np

    n = len(cols[0])
    if n < 2:
        return cols
    if len(cols) == 1:
        return [np.sort(cols[0])]
    lows = [int(c.min()) for c in cols]
    spans = [int(c.max()) - lo + 1 for c, lo in zip(cols, lows, strict=True)]
    total = 1
    for sp in spans:
        total *= sp
    if total >= 1 << 62:  # the rows do not fit in one int64: a permutation
        order = np.lexsort(tuple(reversed(cols)))
        return [c[order] for c in cols]
    key = np.zeros(n, np.int64)
    for c, lo, sp in zip(cols, lows, spans, strict=True):
        key *= sp
        key += c - lo
    key.sort(kind="stable")  # a timsort: the rows come in runs (a block's pairs by base): 4x faster
    out: list[Any] = [np.empty(0, np.int64)] * len(cols)
    for i in range(len(cols) - 1, 0, -1):
        q = key // spans[i]
        out[i] = key - q * spans[i] + lows[i]
        key = q
    out[0] = key + lows[0]
    return out


def _write_rows(name: str, batches: Iterator[tuple[list[Any], list[bytes]]], out: IO[str]) -> None:
    """Write sorted batches of part ``name`` as result lines."""
    from oij.io.jsonlwrite import result_lines, write_pairs

    for cols, lines in batches:
        if name == "pairs":
            write_pairs(out, cols[0], cols[2], cols[1] == 0)
        elif name == "aggregates":
            buf = getattr(out, "buffer", None)
            if buf is not None:  # ASCII lines, as write_pairs writes them: no decoding and encoding again
                out.flush()
                buf.write(b"".join(lines))
                buf.flush()
            else:
                out.write(b"".join(lines).decode())
        else:
            out.writelines(result_lines(Results(late=cols[0].tolist())))


def range_splitters(runs: list[tuple[str, int]], ranges: int, samples: int = 1024) -> list[int]:
    """``ranges - 1`` increasing first-column values that cut the rows of sorted ``runs`` (of any part) into
    about equal ranges ``[s_i, s_{i+1})``, from an evenly spaced sample of every run.  O(runs x samples)."""
    import numpy as np

    keys: list[Any] = []
    weights: list[Any] = []
    for stem, rows in runs:
        if rows:
            col = np.memmap(f"{stem}.0", np.int64, "r", shape=(rows,))
            idx = np.linspace(0, rows - 1, min(rows, samples)).astype(np.int64)
            keys.append(np.array(col[idx]))
            weights.append(np.full(len(idx), rows / len(idx)))
            del col
    if ranges <= 1 or not keys:
        return []
    k = np.concatenate(keys)
    w = np.concatenate(weights)
    order = np.argsort(k, kind="stable")
    k, cw = k[order], np.cumsum(w[order])
    total = float(cw[-1])
    cuts = [int(k[min(len(k) - 1, int(np.searchsorted(cw, total * i / ranges)))]) for i in range(1, ranges)]
    out: list[int] = []
    for c in cuts:  # strictly increasing (an empty range is allowed, a repeated cut is not)
        out.append(c if not out or c > out[-1] else out[-1] + 1)
    return out


def write_range(name: str, runs: list[tuple[str, int]], lo: int | None, hi: int | None, out: IO[str],
                block: int = BLOCK_ROWS) -> int:
    """Write, in canonical order, the rows of part ``name`` whose first column is in ``[lo, hi)`` (None: no
    bound) from sorted ``runs`` of any number of sorters (:meth:`CanonicalSorter.spill_all`); the rows written.

    Ranges that cover the keys, written one after the other, give the bytes of one sorter holding every row.
    Memory: one block per run, as :meth:`CanonicalSorter.write`.  O(rows log runs) plus two binary searches
    per run.
    """
    import numpy as np

    sources: list[Iterator[tuple[list[Any], list[bytes]]]] = []
    total = 0
    step = max(1, min(block, MERGE_ROWS // max(1, len(runs))))
    for stem, rows in runs:
        if not rows:
            continue
        col = np.memmap(f"{stem}.0", np.int64, "r", shape=(rows,))
        a = 0 if lo is None else int(np.searchsorted(col, lo, "left"))
        b = rows if hi is None else int(np.searchsorted(col, hi, "left"))
        del col
        if b > a:
            sources.append(_read_run(name, stem, a, b, step))
            total += b - a
    _write_rows(name, _merge(name, sources), out)
    return total


def _count_not_above(cols: list[Any], bound: tuple[int, ...]) -> int:
    """How many leading rows of the sorted columns ``cols`` have a key <= ``bound`` (lexicographic)."""
    import numpy as np

    le = np.zeros(len(cols[0]), dtype=bool)
    eq = np.ones(len(cols[0]), dtype=bool)
    for c, x in zip(cols, bound, strict=True):
        le |= eq & (c < x)
        eq &= c == x
    return int(np.count_nonzero(le | eq))
