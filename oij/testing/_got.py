"""Another system's output (``oij check EVENTS --got NAME=PATH``), read into the results dataset, and the small
replay cases that explain its differences.

Reading (``read_got``): PATH is oij-jsonl result lines, a Parquet file or
dataset directory, or CSV with a header.  ``--got-columns`` maps the
result fields (kind, base, probe, count, value, id) to the columns of an
output written by another tool (``base=a_id,probe=b_id``).  Without a kind
column, a row is a pair if it has a probe column, an aggregate row if it has
count, a late id if it has id.  Every row is validated as it is read, in
batches (driver memory does not grow with the file), and a bad one is an
:class:`~oij.io.errors.InputError` naming the file, the row (1-based; a
header counts as row 1 in CSV, as a text editor counts lines) and the field.

Data flow::

    PATH --(batches: orjson lines / pyarrow batches / csv rows)--> validated rows
         --> RESULT_SCHEMA Parquet parts in OUT/results/engine=NAME/ --> compared in Spark like any engine

Replay cases (``replay_case``): for one difference, the tuples that decide it
(a missing or extra pair: its base and probe; an aggregate row: the base and
every probe of its key in its window; a late id: that tuple), each preceded
by a watermark line carrying the W in force at its arrival in the whole
stream, with ``channels = 1`` and no lateness bound.  Whether a tuple is late
is decided by that W alone (``oij.spec.watermark``), and the canonical result is
the batch join of the on-time tuples plus the late ids
(``oij.spec.stream.compute_stream_result``), so the small case yields the same
rows for these ids as the whole stream.  Watermark lines that change nothing
are then dropped while the oracle's rows for the ids stay the same.

Files: only the partition directory of NAME (created here; the caller
replaces OUT/results as a whole) and the replay files the caller names.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterator, Sequence
from typing import Any

from oij.errors import UsageError
from oij.io.errors import InputError
from oij.spec.batch import Results
from oij.spec.model import NO_WATERMARK, End, Event, Query, StreamTuple, Watermark

FIELDS = ("kind", "base", "probe", "count", "value", "id")
KINDS = {"pair", "aggregate", "late"}
BATCH = 1 << 16


def parse_got(specs: Sequence[str], reserved: Sequence[str]) -> list[tuple[str, str]]:
    """``NAME=PATH`` pairs (names unique, not an oracle's or an engine's)."""
    out: list[tuple[str, str]] = []
    for s in specs:
        name, sep, path = s.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--got wants NAME=PATH, got {s!r}")
        if name in reserved or name in (n for n, _ in out):
            raise UsageError(f"--got {name}: the name is taken (an oracle, an engine or another --got)")
        if not os.path.exists(path):
            raise UsageError(f"--got {name}: {path}: no such file or directory")
        out.append((name, path))
    return out


def parse_columns(specs: Sequence[str], names: Sequence[str]) -> dict[str, dict[str, str]]:
    """``[NAME:]field=column,...`` (repeatable) -> {got name: {field: column}}; without NAME: every --got."""
    out: dict[str, dict[str, str]] = {n: {} for n in names}
    for text in specs:
        head, _, rest = text.partition("=")
        name, colon, first = head.partition(":")
        targets = [name] if colon else list(names)
        if colon and name not in out:
            raise UsageError(f"--got-columns {text!r}: no --got named {name!r}")
        for item in ((first if colon else head) + "=" + rest).split(","):
            f, sep, col = item.strip().partition("=")
            if not sep or f not in FIELDS or not col:
                raise UsageError(f"--got-columns: {item!r}: want FIELD=COLUMN with FIELD one of {', '.join(FIELDS)}")
            for t in targets:
                out[t][f] = col
    return out


# ------------------------------------------------------------------------------------------------ reading
def _rows(path: str, cols: dict[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, {field: raw value}) for every row of PATH, in batches."""
    if os.path.isdir(path) or path.endswith(".parquet"):
        yield from _parquet_rows(path, cols)
    elif path.endswith(".csv"):
        yield from _csv_rows(path, cols)
    else:
        yield from _jsonl_rows(path, cols)


def _rename(obj: dict[str, Any], cols: dict[str, str]) -> dict[str, Any]:
    out = {f: obj[c] for f, c in cols.items() if c in obj}
    for f in FIELDS:
        if f not in cols and f in obj:
            out[f] = obj[f]
    if "kind" not in out and "type" in obj and "type" not in cols.values():
        out["kind"] = obj["type"]
    return out


def _jsonl_rows(path: str, cols: dict[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    import orjson

    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise InputError(path, n, "line", f"not JSON: {e}") from None
            if not isinstance(obj, dict):
                raise InputError(path, n, "line", "not a JSON object")
            yield n, _rename(obj, cols)


def _csv_rows(path: str, cols: dict[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        for n, rec in enumerate(reader, 2):
            yield n, _rename({k: (None if v in ("", "null", "NULL", None) else v) for k, v in rec.items()}, cols)


def _parquet_rows(path: str, cols: dict[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow.dataset as ds

    data = ds.dataset(path, format="parquet")
    n = 0
    for batch in data.to_batches(batch_size=BATCH):
        for rec in batch.to_pylist():
            n += 1
            yield n, _rename(rec, cols)


def _int(path: str, n: int, field: str, v: Any, nullable: bool = False) -> int | None:
    if v is None:
        if nullable:
            return None
        raise InputError(path, n, field, "missing")
    if isinstance(v, bool):
        raise InputError(path, n, field, f"not an integer: {v!r}")
    if isinstance(v, int):
        x = v
    elif isinstance(v, float) and v.is_integer():
        x = int(v)
    elif isinstance(v, str):
        try:
            x = int(v)
        except ValueError:
            raise InputError(path, n, field, f"not an integer: {v!r}") from None
    else:
        raise InputError(path, n, field, f"not an integer: {v!r}")
    if not -(1 << 63) <= x < (1 << 63):
        raise InputError(path, n, field, f"{x} does not fit 64 bits")
    return x


def _value(path: str, n: int, v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool):
        raise InputError(path, n, "value", f"not a number: {v!r}")
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        try:
            x = float(v)
        except ValueError:
            raise InputError(path, n, "value", f"not a number: {v!r}") from None
        if math.isnan(x):
            raise InputError(path, n, "value", "NaN is not an aggregate value")
        return x
    raise InputError(path, n, "value", f"not a number: {v!r}")


def _row(path: str, n: int, r: dict[str, Any]) -> tuple[str, int | None, int | None, int | None, float | None,
                                                          int | None]:
    kind = r.get("kind")
    if kind is None:
        kind = "pair" if "probe" in r else "aggregate" if "count" in r else "late" if "id" in r else None
    if kind not in KINDS:
        raise InputError(path, n, "kind", f"must be pair, aggregate or late, got {kind!r}")
    if kind == "pair":
        return "pair", _int(path, n, "base", r.get("base")), _int(path, n, "probe", r.get("probe"), True), None, \
            None, None
    if kind == "aggregate":
        count = _int(path, n, "count", r.get("count"))
        if count is not None and count < 0:
            raise InputError(path, n, "count", f"negative: {count}")
        return "aggregate", _int(path, n, "base", r.get("base")), None, count, _value(path, n, r.get("value")), None
    return "late", None, None, None, None, _int(path, n, "id", r.get("id"))


def read_got(path: str, cols: dict[str, str], out_dir: str) -> int:
    """Validate the rows of PATH and write them as Parquet parts of RESULT_SCHEMA into ``out_dir``; the number
    of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from oij.spark.compare import RESULT_SCHEMA

    os.makedirs(out_dir, exist_ok=True)
    total = part = 0
    buf: list[tuple[Any, ...]] = []

    def flush() -> None:
        nonlocal part
        if not buf:
            return
        columns = [list(c) for c in zip(*buf, strict=True)]
        pq.write_table(pa.table(columns, schema=RESULT_SCHEMA), os.path.join(out_dir, f"part-{part:05d}.parquet"))
        part += 1
        buf.clear()

    for n, r in _rows(path, cols):
        buf.append(_row(path, n, r))
        total += 1
        if len(buf) >= BATCH:
            flush()
    flush()
    if part == 0:  # an empty output still makes a partition the comparison can read
        pq.write_table(RESULT_SCHEMA.empty_table(), os.path.join(out_dir, "part-00000.parquet"))
    return total


def read_got_results(out_dir: str) -> Results:
    """The rows written by :func:`read_got`, in memory (``--no-spark``: small outputs)."""
    import pyarrow.dataset as ds

    res = Results()
    for rec in ds.dataset(out_dir, format="parquet").to_table().to_pylist():
        if rec["kind"] == "pair":
            res.pairs.append((rec["base"], rec["probe"]))
        elif rec["kind"] == "aggregate":
            v = rec["value"]
            res.aggregates.append((rec["base"], rec["count"], None if v is None else v))
        else:
            res.late.append(rec["id"])
    return res


# ------------------------------------------------------------------------------------------------ replay cases
def replay_case(q: Query, events: Sequence[Event], diff: dict[str, Any]) -> tuple[Query, list[Event]]:
    """The small self-contained case of one difference (module docstring)."""
    from oij.spec.match import is_match
    from oij.spec.watermark import arrival_watermarks

    ws = arrival_watermarks(events, q)
    tuples = {e.id: (i, e) for i, e in enumerate(events) if isinstance(e, StreamTuple)}
    want: set[int] = set()
    if diff["kind"] == "pair":
        want = {x for x in (diff["base"], diff["probe"]) if x is not None}
    elif diff["kind"] == "late":
        want = {diff["id"]}
    elif diff["base"] in tuples:
        a = tuples[diff["base"]][1]
        want = {a.id} | {e.id for _, e in tuples.values() if e.side != a.side and e.key == a.key and is_match(a, e, q)}
    return build_case(q, [(i, ws[i], t) for i, t in sorted(tuples[i] for i in want if i in tuples)])


def build_case(q: Query, picked: Sequence[tuple[int, int, StreamTuple]]) -> tuple[Query, list[Event]]:
    """The replay case of the tuples ``picked`` as (arrival position, W at arrival, tuple), positions ascending:
    each tuple after a watermark line with its W, in a query with one channel and no lateness bound."""
    small = Query(q.lower, q.upper, q.lower_inclusive, q.upper_inclusive, q.aggregate, q.join, 1, None, q.cond)
    out: list[Event] = []
    last = None
    for _, w, t in picked:
        if w != last and w != NO_WATERMARK:  # -inf (no watermark yet) needs no line
            out.append(Watermark(w, 0))
            last = w
        out.append(t._replace(channel=0))
    out.append(End())
    return small, _drop_idle_watermarks(small, out, {t.id for _, _, t in picked})


def _drop_idle_watermarks(q: Query, events: list[Event], ids: set[int]) -> list[Event]:
    """Remove watermark lines whose absence leaves the oracle's rows for ``ids`` unchanged."""
    from oij.reference.oracle import run_events

    def rows(evs: list[Event]) -> tuple[Any, ...]:
        r = run_events(evs, q).canonical()
        return (tuple(p for p in r.pairs if p[0] in ids or p[1] in ids),
                tuple(x for x in r.aggregates if x[0] in ids), tuple(x for x in r.late if x in ids))

    target = rows(events)
    i = 0
    while i < len(events):
        if isinstance(events[i], Watermark):
            trial = events[:i] + events[i + 1:]
            if rows(trial) == target:
                events = trial
                continue
        i += 1
    return events


def _rows_within(res: Any, ids: set[int]) -> tuple[Any, ...]:
    """The rows of ``res`` among the tuples ``ids``: pairs of two of them (or a null row), their aggregates and
    late ids."""
    r = res.canonical()
    return (tuple(p for p in r.pairs if p[0] in ids and (p[1] is None or p[1] in ids)),
            tuple(x for x in r.aggregates if x[0] in ids), tuple(x for x in r.late if x in ids))


def _deciders(events: Sequence[Event], q: Query, upto: int) -> set[int]:
    """Positions of the events that decide the watermarks in force up to position ``upto``: per input (lateness
    mode) or per channel (watermark lines), the one with the largest ts before it, at each of the last few
    positions (so that a profile's lag and its per-input watermark are decided as in the whole stream)."""
    best: dict[Any, tuple[int, int]] = {}
    out: set[int] = set()
    for i, e in enumerate(events[:upto + 1]):
        if isinstance(e, StreamTuple) and q.lateness is not None:
            slot: Any = e.side
        elif isinstance(e, Watermark):
            slot = e.channel
        else:
            continue
        if slot not in best or e.ts > best[slot][0]:
            best[slot] = (e.ts, i)
    out |= {i for _, i in best.values()}
    return out


def replay_case_as_is(q: Query, events: Sequence[Event], diff: dict[str, Any], profile: Any,
                      whole: Any, canonical: Any) -> tuple[Query, list[Event]] | None:
    """A small case of one difference in the stream's own terms (its query, lateness bound and channels), for a
    system whose output is profile ``profile``'s result (``whole``: that result on the whole stream;
    ``canonical``: the canonical one).

    The canonical-W case of :func:`replay_case` does not reproduce a difference that comes from how the system
    computes W (per input, minus one): there the system is handed the canonical W.  This case keeps the tuples
    and watermark lines that decide W: it starts from the difference's tuples and, for each, the events
    holding the running maxima before it and the ``lag`` events just before it, then drops events one by one
    while the rows among the difference's tuples (pairs of two of them, their aggregates and late ids), both
    canonical and under the profile, stay those of the whole stream.  So a system that follows the profile
    reproduces the difference on it.  None if those events do not keep both.
    """
    from oij.reference.oracle import run_events
    from oij.spec.profiles import compute_profile_result

    pos = {e.id: i for i, e in enumerate(events) if isinstance(e, StreamTuple)}
    _, small = replay_case(q, events, diff)
    ids = {e.id for e in small if isinstance(e, StreamTuple)}
    keep: set[int] = {pos[i] for i in ids if i in pos}
    for p in list(keep):
        keep |= _deciders(events, q, p - 1) | _deciders(events, q, p - 2)
        # the events just before it too: a profile's lag counts events, so W one event back must be the same
        keep |= {i for i in range(max(0, p - profile.lag), p) if not isinstance(events[i], End)}
    target = (_rows_within(canonical, ids), _rows_within(whole, ids))

    def holds(sel: list[int]) -> bool:
        evs = [events[i] for i in sel] + [End()]
        got = (_rows_within(run_events(evs, q), ids), _rows_within(compute_profile_result(evs, q, profile), ids))
        return got == target

    sel = sorted(keep)
    if not holds(sel):
        return None
    i = 0
    while i < len(sel):
        e = events[sel[i]]
        trial = sel[:i] + sel[i + 1:]
        if not (isinstance(e, StreamTuple) and e.id in ids) and holds(trial):
            sel = trial
            continue
        i += 1
    return q, [events[i] for i in sel] + [End()]
