"""Judging another system's output up to schedule (``oij check --got NAME=PATH --schedule any``;
:func:`oij.testing.judge_up_to_schedule`).

Data flow::

    events file --columnar reader (oij.io.open_blocks)--> tuple columns in input order (+ the file's W per tuple
        in watermark mode)
    --got rows (already validated into Parquet parts by oij.testing._got.read_got) --> output columns
    both --> oij.reference.schedule.judge (family from the profile, or --family) --> verdict, schedules, witnesses
    --schedule spark-checkpoint DIR: Spark's offsets/N and sources/*/N --> the W of each micro-batch --> the
        output judged under that one schedule

Files: reads only; the caller writes the report and the replay cases.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from oij.errors import UsageError
from oij.reference.schedule import (
    I64,
    NEG,
    Judgement,
    OutputColumns,
    TupleColumns,
    as_spec_schedule,
    judge,
    judge_under,
)
from oij.spec.batch import Results
from oij.spec.model import NO_WATERMARK, Event, Query, StreamTuple
from oij.spec.profiles import Profile, get_profile
from oij.spec.schedule import ORDERS, Family, Order, flink_instance

FAMILY_NAMES = ("auto", *ORDERS)
"""What ``--family`` accepts: ``auto`` (the strictest family sound for the profile) or an order."""


def default_family(p: Profile, parallelism: int = 1) -> Family:
    """The strictest family sound for profile ``p``: Spark (late rule ``le``, W at most one per batch, starting at
    0): one arrival order with the floor 0; Flink DataStream: each input's own order at parallelism 1, each
    instance's at parallelism p (Flink's key groups); any other profile: one arrival order."""
    if p.name.startswith("spark-ss"):
        return Family("arrival", floor=0)
    if p.name.startswith("flink"):
        return Family("instance", instances=flink_instance(parallelism)) if parallelism > 1 else Family("input")
    return Family("arrival")


def parse_max_lag(text: str | None) -> tuple[int | None, int | None]:
    """``--max-lag``: ``N`` (tuples of input order) or ``Nts`` (time, in ts units) -> (lag_time, lag_tuples)."""
    if text is None:
        return None, None
    m = re.fullmatch(r"\s*(\d+)\s*(ts)?\s*", text)
    if not m:
        raise UsageError(f"--max-lag wants N (tuples) or Nts (time in ts units), got {text!r}")
    n = int(m.group(1))
    return (n, None) if m.group(2) else (None, n)


def make_family(profile: Profile, family: str = "auto", parallelism: int = 1, max_lag: str | None = None) -> Family:
    """The family of ``--family``/``--parallelism``/``--max-lag`` for ``profile``."""
    if family not in FAMILY_NAMES:
        raise UsageError(f"--family: unknown family {family!r}; known: {', '.join(FAMILY_NAMES)}")
    if parallelism < 1:
        raise UsageError("--parallelism must be >= 1")
    f = default_family(profile, parallelism)
    if family != "auto":
        order = cast(Order, family)  # one of ORDERS: checked against FAMILY_NAMES above
        f = Family(order, instances=flink_instance(parallelism) if order == "instance" else None, floor=f.floor)
    lag_time, lag_tuples = parse_max_lag(max_lag)
    return Family(f.order, f.instances, f.floor, lag_time, lag_tuples)


# ------------------------------------------------------------------------------------------------- reading
def tuple_columns(events: Iterable[Event], q: Query) -> tuple[TupleColumns, I64 | None]:
    """The tuples of ``events`` as columns, and in watermark mode the input's W at each tuple's arrival."""
    from oij.spec.watermark import arrival_watermarks

    evs = list(events)
    tuples = [e for e in evs if isinstance(e, StreamTuple)]
    fw = None
    if q.lateness is None:
        ws = arrival_watermarks(evs, q)
        fw = np.array([max(w, int(NEG)) for e, w in zip(evs, ws, strict=False) if isinstance(e, StreamTuple)],
                      np.int64)
    return TupleColumns.of(tuples), fw


def tuple_columns_from_file(path: str) -> tuple[Query, TupleColumns, I64 | None]:
    """The tuples of an oij-jsonl or Parquet file as columns (the columnar reader, in blocks), and in watermark
    mode the input's W at each tuple's arrival."""
    from oij.io import open_blocks
    from oij.reference.columns import KIND_TUPLE, KIND_WATERMARK

    q, blocks, f = open_blocks(path, int64_ids=True)
    try:
        parts: list[dict[str, Any]] = []
        chan_max = np.full(q.channels, int(NEG), np.int64)
        fws: list[I64] = []
        for b in blocks:
            is_t = b.kind == KIND_TUPLE
            keys = b.keys()
            if q.lateness is None:
                is_w = b.kind == KIND_WATERMARK
                # the W in force at each row: per channel the running maximum, the minimum over channels
                cols = []
                for c in range(q.channels):
                    m = np.where(is_w & (b.channel == c), b.ts, int(NEG))
                    m[0] = max(m[0], chan_max[c]) if len(m) else 0
                    acc = np.maximum.accumulate(m) if len(m) else m
                    cols.append(acc)
                    if len(acc):
                        chan_max[c] = acc[-1]
                w_row = np.min(np.vstack(cols), axis=0) if cols and len(b) else np.empty(0, np.int64)
                fws.append(w_row[is_t])
            parts.append({"side": b.side[is_t], "id": np.asarray(b.id[is_t], np.int64), "ts": b.ts[is_t],
                          "key": keys[is_t], "value": b.value[is_t]})
    finally:
        if f is not None:
            f.close()
    side = np.concatenate([p["side"] for p in parts]) if parts else np.empty(0, np.int8)
    if parts and all(np.asarray(p["key"]).dtype == np.int64 for p in parts):  # int keys: codes by numpy
        uniq, inv = np.unique(np.concatenate([p["key"] for p in parts]), return_inverse=True)
        key_list: list[Any] = [int(k) for k in uniq]
        kc = inv.astype(np.int64)
    else:
        keys_all = np.concatenate([np.asarray(p["key"], dtype=object) for p in parts]) if parts else \
            np.empty(0, object)
        codes: dict[tuple[str, Any], int] = {}
        key_list = []
        kc = np.empty(len(keys_all), np.int64)
        for i, k in enumerate(keys_all.tolist()):
            t = (type(k).__name__, k)
            code = codes.get(t)
            if code is None:
                code = codes[t] = len(key_list)
                key_list.append(k)
            kc[i] = code
    tc = TupleColumns(side == 0, np.concatenate([p["id"] for p in parts]) if parts else np.empty(0, np.int64),
                        np.concatenate([p["ts"] for p in parts]) if parts else np.empty(0, np.int64), kc, key_list,
                        np.concatenate([p["value"] for p in parts]) if parts else np.empty(0, np.float64))
    return q, tc, (np.concatenate(fws) if q.lateness is None and fws else None)


GOT_FIELDS = {"type", "base", "probe", "count", "value", "id"}
"""The fields of oij-jsonl result lines that :func:`fast_output_columns` reads."""


def fast_got_table(path: str) -> Any:
    """The rows of an oij-jsonl result file as one Arrow table of the results layout (kind, base, probe, count,
    value, id), read column-wise by pyarrow; None when this path cannot vouch that
    :func:`oij.testing._got.read_got` would read the same rows: a blank or CR line, a field other than those of
    the protocol, a kind spelled otherwise, a number that is not an int64 where an id is, a value that is not
    finite, a missing field, a row count that differs from the line count.  The caller then reads the file with
    ``read_got``, which also names the first bad row."""
    import pyarrow as pa
    import pyarrow.json as pj

    if os.path.isdir(path) or path.endswith((".parquet", ".csv")):
        return None
    with open(path, "rb") as fh:
        data = fh.read()
    if not data or b"\r" in data or b"\n\n" in data or data.startswith(b"\n"):
        return None
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    schema = pa.schema([("type", pa.string()), ("base", pa.int64()), ("probe", pa.int64()), ("count", pa.int64()),
                        ("value", pa.float64()), ("id", pa.int64())])
    try:
        tb = pj.read_json(pa.BufferReader(data), parse_options=pj.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="infer"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if tb.num_rows != lines or set(tb.column_names) - GOT_FIELDS:
        return None
    kind = tb.column("type").to_numpy(zero_copy_only=False).astype(object)
    pair, agg, late = kind == "pair", kind == "aggregate", kind == "late"
    if not (pair | agg | late).all():
        return None

    def null(name: str) -> npt.NDArray[np.bool_]:
        return np.asarray(tb.column(name).is_null().to_numpy(zero_copy_only=False), np.bool_)

    count = np.asarray(tb.column("count").fill_null(0).to_numpy(), np.int64)
    values = np.asarray(tb.column("value").fill_null(0.0).to_numpy(), np.float64)
    if (null("base") & (pair | agg)).any() or (null("count") & agg).any() or (count < 0)[agg].any() or \
            (null("id") & late).any() or not np.isfinite(values).all():
        return None

    def kept(name: str, where: npt.NDArray[np.bool_]) -> Any:  # the field where the kind reads it, else null
        import pyarrow.compute as pc

        c = tb.column(name).combine_chunks()  # kept in Arrow: a column with nulls as numpy would be float64
        return pc.if_else(pa.array(where), c, pa.scalar(None, c.type))

    return pa.table([pa.array(kind.tolist(), pa.string()), kept("base", pair | agg), kept("probe", pair),
                     kept("count", agg), kept("value", agg), kept("id", late)],
                    names=["kind", "base", "probe", "count", "value", "id"])


def fast_output_columns(path: str) -> OutputColumns | None:
    """:func:`fast_got_table`'s rows as columns (None when it declines)."""
    tb = fast_got_table(path)
    return None if tb is None else table_columns(tb)


def table_columns(tb: Any) -> OutputColumns:
    """A table of the results layout as output columns."""
    kind = np.asarray(tb.column("kind").to_numpy(zero_copy_only=False), dtype=object)
    pair, agg, late = kind == "pair", kind == "aggregate", kind == "late"

    def ints(name: str) -> I64:
        return np.asarray(tb.column(name).fill_null(0).to_numpy(), np.int64)

    base, probe, count, ids = ints("base"), ints("probe"), ints("count"), ints("id")
    pnull = np.asarray(tb.column("probe").is_null().to_numpy(zero_copy_only=False), np.bool_)
    values = tb.column("value").to_pylist()
    return OutputColumns(base[pair], probe[pair], pnull[pair], base[agg], count[agg],
                         [values[i] for i in np.flatnonzero(agg)], ids[late])


def output_columns(results_dir: str) -> OutputColumns:
    """The rows :func:`oij.testing._got.read_got` wrote into ``results_dir`` (Parquet parts), as columns."""
    import pyarrow.dataset as ds

    return table_columns(ds.dataset(results_dir, format="parquet").to_table())


# ------------------------------------------------------------------------------------------- Spark's checkpoint
def spark_checkpoint_batches(ckpt: str) -> list[tuple[int, int, list[str]]]:
    """Each micro-batch Spark planned, from its checkpoint: (batch id, ``batchWatermarkMs``, the files its file
    sources read), in batch order.  ``offsets/N`` holds batch N's watermark; the file sources' logs
    ``sources/S/N`` (and ``N.compact``, which keeps every entry up to N) name each file with its ``batchId``."""
    off = os.path.join(ckpt, "offsets")
    if not os.path.isdir(off):
        raise UsageError(f"--schedule spark-checkpoint {ckpt}: no offsets/ folder (not a Spark checkpoint)")
    files: dict[int, list[str]] = {}
    src = os.path.join(ckpt, "sources")
    for s in sorted(os.listdir(src)) if os.path.isdir(src) else []:
        seen: set[tuple[int, str]] = set()
        for name in sorted(os.listdir(os.path.join(src, s))):
            if not name.split(".")[0].isdigit():
                continue
            with open(os.path.join(src, s, name), encoding="utf-8") as fh:
                for line in fh.read().splitlines()[1:]:
                    if line.strip().startswith("{"):
                        entry = json.loads(line)
                        key = (int(entry.get("batchId", name.split(".")[0])), str(entry.get("path", "")))
                        if key not in seen:
                            seen.add(key)
                            files.setdefault(key[0], []).append(key[1])
    out = []
    for name in sorted((x for x in os.listdir(off) if x.isdigit()), key=int):
        with open(os.path.join(off, name), encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        meta = json.loads(lines[1]) if len(lines) > 1 else {}
        out.append((int(name), int(meta.get("batchWatermarkMs", 0)), sorted(files.get(int(name), []))))
    return out


def local_path(uri: str) -> str:
    """A file source's path as the checkpoint writes it (``file:///tmp/x``), as a local path (``/tmp/x``)."""
    for prefix in ("file://", "file:"):
        if uri.startswith(prefix):
            return uri[len(prefix):]
    return uri


def spark_checkpoint_schedule(ckpt: str, file_of_tuple: Sequence[str]) -> list[int]:
    """The W Spark's late filter used for each tuple: a row of batch b is judged against the watermark computed at
    the end of batch b - 2, which is ``batchWatermarkMs`` of batch b - 1 (0 for the first batch).
    ``file_of_tuple[j]``: the input file that held tuple j (:func:`local_path` of the checkpoint's entry)."""
    batches = spark_checkpoint_batches(ckpt)
    batch_of: dict[str, int] = {}
    wm: dict[int, int] = {}
    for k, (_, w, files) in enumerate(batches):
        wm[k] = w
        for f in files:
            batch_of.setdefault(local_path(f), k)
    out = []
    for name in file_of_tuple:
        b = batch_of.get(name)
        if b is None:
            raise UsageError(f"--schedule spark-checkpoint: input file {name} is in no committed batch")
        out.append(wm.get(b - 1, 0))
    return out


# ---------------------------------------------------------------------------------------------------- report
@dataclass
class ScheduleVerdict:
    """The judgement of one output up to schedule, with the family and profile it used."""

    name: str
    profile: str
    family: Family
    judgement: Judgement
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def admissible(self) -> bool:
        return self.judgement.admissible

    def family_text(self) -> str:
        f = self.family
        parts: list[str] = [f.order]
        if f.floor is not None:
            parts.append(f"floor {f.floor}")
        if f.lag_time is not None:
            parts.append(f"lag <= {f.lag_time} ts")
        if f.lag_tuples is not None:
            parts.append(f"lag <= {f.lag_tuples} tuples")
        return ", ".join(parts)

    def lines(self) -> list[str]:
        """What ``oij check`` prints for this output."""
        j = self.judgement
        head = (f"{self.name}: {'admissible' if j.admissible else 'undetermined' if j.undetermined else 'REJECTED'}"
                f" up to schedule (profile {self.profile}, family {self.family_text()})")
        out = [head]
        s = j.stats
        if j.admissible:
            out.append(f"  {s['tuples']} tuples; late under the eager bound {s['late_under_eager_bound']}, under the "
                       f"tightest explaining schedule {s['late_under_tightest']} (forced late {s['forced_late']}), "
                       f"under the loosest {s['late_under_loosest']}; touched {s['touched']}, undetermined "
                       f"{s['undetermined']}")
            lt, lp = s.get("lag_time_loosest") or {}, s.get("lag_positions_loosest") or {}
            if lt:
                out.append(f"  least lag behind the eager bound (loosest schedule): time p50 {lt['p50']:g}, p99 "
                           f"{lt['p99']:g}, max {lt['max']:g}; tuples p50 {lp.get('p50', 0):g}, p99 "
                           f"{lp.get('p99', 0):g}, max {lp.get('max', 0):g}")
        for w in j.witnesses:
            out.append(f"  witness ({w.kind}): {w.text}")
        if self.extra.get("ran_on") == "spark":
            out.append(f"  judged on Spark (master {self.extra.get('master')}): the driver held per-block summaries "
                       "and the witnesses' rows, no per-tuple array")
        return out

    def json(self) -> dict[str, Any]:
        j = self.judgement
        return {"name": self.name, "profile": self.profile, "family": self.family_text(),
                "admissible": j.admissible, "undetermined": j.undetermined, "stats": j.stats,
                "witnesses": [w.__dict__ for w in j.witnesses], "seconds": round(self.seconds, 3), **self.extra}


def judge_columns(name: str, c: TupleColumns, q: Query, got: OutputColumns | Results, profile: str = "canonical",
                  family: str = "auto", parallelism: int = 1, max_lag: str | None = None,
                  file_watermarks: I64 | None = None, first: int = 10) -> ScheduleVerdict:
    """Judge ``got`` up to schedule (module docstring)."""
    import time

    p = get_profile(profile)
    f = make_family(p, family, parallelism, max_lag)
    t = time.perf_counter()
    try:
        j = judge(c, q, p, f, got, file_watermarks, first)
    except ValueError as e:
        raise UsageError(f"--schedule: {e}") from None
    return ScheduleVerdict(name, p.name, f, j, time.perf_counter() - t)


def judge_fixed(name: str, c: TupleColumns, q: Query, got: OutputColumns, ws: Sequence[int],
                profile: str = "spark-ss", first: int = 10) -> ScheduleVerdict:
    """Judge ``got`` under one recorded schedule (``ws[j]`` the W of tuple j):
    :func:`oij.reference.schedule.judge_under`."""
    import time

    p = get_profile(profile)
    w = np.array([max(x, int(NEG)) for x in ws], np.int64)
    t = time.perf_counter()
    j = judge_under(c, q, p, w, got, first)
    return ScheduleVerdict(name, p.name, Family("arrival"), j, time.perf_counter() - t, {"schedule": "recorded"})


def judge_up_to_schedule(events: Iterable[Event], q: Query, got: Results, *, profile: str = "canonical",
                         family: str = "auto", parallelism: int = 1, max_lag: str | None = None) -> ScheduleVerdict:
    """Whether some admissible watermark schedule explains ``got`` (:func:`oij.testing.judge_up_to_schedule`)."""
    c, fw = tuple_columns(events, q)
    return judge_columns("got", c, q, got, profile, family, parallelism, max_lag, fw)


def replay_picks(v: ScheduleVerdict, c: TupleColumns) -> list[list[tuple[int, int, StreamTuple]]]:
    """For each witness, its tuples as (input position, W, tuple) with the loosest schedule's W (the eager bound
    when the judge found none): the replay case of :func:`oij.testing._got.build_case`."""
    j = v.judgement
    w = j.w_max if j.w_max is not None else j.eager
    out = []
    for wit in j.witnesses:
        picked = []
        for x in sorted(wit.positions):
            t = StreamTuple("base" if c.is_base[x] else "probe", int(c.ids[x]), int(c.ts[x]), c.keys[c.key[x]],
                            float(c.value[x]))
            wx = NO_WATERMARK if w is None else as_spec_schedule(w[x:x + 1])[0]
            picked.append((x, wx, t))
        out.append(picked)
    return out
