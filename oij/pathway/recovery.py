"""Pathway under crashes: the interval join restarted on its persistent storage, its sink read as a downstream reader.

``oij adapter pathway --restart-protocol`` runs one incarnation of the restart protocol (docs/recovery.rst,
:mod:`oij.io.recovery`).  The join is the ``pathway`` adapter's (:mod:`oij.pathway.join`, behavior ``none``:
window made inclusive, keys tagged, an empty window given to probes as a key no base has), judged under the
same profile ``pathway``.

What Pathway guarantees, and the mapping
-----------------------------------------

Pathway's documentation (user guide, "Consistency of the Pathway data model", section "Persistency
guarantees") says: on a restart the saved state is loaded and the inputs replayed from the times recorded in
the checkpoint; "Pathway gives 'at least once' output data delivery guarantee for the data output in the
different runs ... if some of the lines were outputted to a data sink in a non-closed Pathway's data batch,
these output lines may appear on the output after the program has been re-run"; "the enterprise version of
Pathway supports 'exactly once' message delivery on selected combinations of input and output connectors
which enable the use of the 2-phase commit protocol".  The free version (this one: ``pw.persistence`` with
the filesystem backend runs without a license key) therefore promises **at-least-once**, and offers no
public hook telling a program when its state through some input is persisted (the frontier is in the
storage's internal metadata, ``STATE/pw/*-*-*`` ``last_advanced_timestamp``, not an API).

So this adapter prints **no checkpoint line** before the end: every restart gets ``OIJ_CHECKPOINT=0`` and
all events again, which it writes idempotently into the input queue (an event's file is written once, so a
repeat adds nothing: the queue plays the role of the replayable message queue Pathway asks for).  Pathway,
restarted on the same persistent storage, resumes its file reader at its own persisted offset.  Only the
incarnation that reads the end line prints rows: the **whole sink of every incarnation, consolidated as a
downstream reader would** (diffs summed per row: a ``+1`` written twice is a duplicate, a retraction cancels
its row).  What the kit judges is therefore exactly Pathway's output guarantee across runs: at-least-once
shows up as ``duplicated`` rows, a loss as ``lost`` ones.  For an inner join (whose sink never takes a row
back) every incarnation also prints the pairs its own sink file receives as they enter it, provisional (no
checkpoint follows), and the last one prints at the end only the consolidated rows it has not printed: so a
``row`` kill lands just after Pathway's sink wrote a batch, the moment its documented at-least-once window
opens (the sink is written before the frontier is committed: pathwaycom/pathway src/persistence/tracker.rs,
``finalized_time_within_worker`` is the minimum over the sinks' times, and the metadata is saved after it).
A left join's rows are printed at the end only.  A ``fed`` kill comes once the output has rested.

Data flow of one incarnation ``i``::

    stdin: query, events 1..            (OIJ_CHECKPOINT is always 0: no checkpoint line is ever printed)
      (the reader takes ``*.jsonl`` only: write_once's temp file in the same directory, read and then
       deleted, would be an insertion and a retraction of its own, and a kill between them a duplicate)
      event j --> STATE/in/e{j:08d}.jsonl  {"seq": j, "side": b|p|w, "rid", "ts", "key"}  (write_once)
    pw.io.jsonlines.read(STATE/in, mode="streaming", name="events")      <- resumes at its persisted offset
      --> interval_join[_left] (bases, probes) --> pairs ("pair", base id, probe id | null)
      --> count and max(seq) of the events read ("seen", count, max seq)
      concat --> pw.io.jsonlines.write(STATE/sink/{i:04d}.jsonl)    (one file per incarnation, -o sink=)
      inner join: thread sink-tail prints that file's new "pair" lines as they come (provisional)
    pw.run(persistence_config=Config(Backend.filesystem(STATE/pw)))      in a daemon thread of this process
    end line: wait until the sink says all N events were read; then the marker file z{i}a (seq N+1+2i) and,
      once it is in the sink, z{i}b (seq N+2+2i): when z{i}b is in the sink, the batch holding z{i}a (and
      every event before it) has been written whole
      --> every STATE/sink/*.jsonl, "pair" diffs summed --> result lines on stdout --> exit 0 (os._exit:
          Pathway's streaming run has no end of its own)

Options (``-o KEY=VALUE``):

* ``persistence=on`` (default) / ``off``: ``off`` runs without ``persistence_config``, the negative control:
  a restart reads every input file again and writes every row again into its new sink file, so the
  consolidated sink holds the rows of the killed incarnations twice (``duplicated``);
* ``sink=per-run`` (default) / ``single``: ``single`` gives every incarnation the same file
  ``STATE/sink/all.jsonl``; Pathway's file writer recreates (truncates) its file at each start while the
  persisted run only writes what changes after its frontier, so the rows written before the crash are gone
  from the file (``lost``): what a reader that reads the file after the crash sees.

Resources: Pathway's engine threads live in this process (no child process: the kit's SIGKILL of the group
ends them with it).  Every file lives in the caller's state directory (``query.json`` from
:meth:`~oij.io.recovery.Restart.claim`, ``in/``, ``pw/`` Pathway's, ``sink/``), which this module never
removes; the marker files are the only inputs not from the case, and they are filtered out of the join.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from oij.errors import UsageError
from oij.io.adapt import Unsupported
from oij.io.errors import InputError
from oij.io.jsonlread import read_jsonl
from oij.io.jsonlwrite import format_query, result_lines
from oij.io.keys import tag_key
from oij.io.recovery import RestartRequest, write_once
from oij.pathway.join import NO_KEY, check_supported
from oij.spec.batch import Results
from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import BASE, End, Query, StreamTuple

OPTIONS = {"persistence": ("on", "off"), "sink": ("per-run", "single")}
"""The restart options and their values, the default first."""

WAIT_EVENTS = 60.0
"""Seconds to wait after the end line for the sink to say every event was read (then go on: a loss is judged)."""
WAIT_MARKER = 60.0
"""Seconds to wait for an end marker to reach the sink (then exit 1: Pathway stopped processing)."""


def event_record(q: Query, seq: int, e: object) -> dict[str, Any]:
    """The input file's record of event ``seq`` (a tuple, or a watermark line as side ``w``, read and ignored
    as the ``pathway`` adapter ignores it)."""
    if isinstance(e, StreamTuple):
        side = "b" if e.side == BASE else "p"
        empty = lower_offset(q) > upper_offset(q)
        key = NO_KEY if empty and side == "p" else tag_key(e.key)
        return {"seq": seq, "side": side, "rid": e.id, "ts": e.ts, "key": key}
    return {"seq": seq, "side": "w", "rid": 0, "ts": 0, "key": ""}


def read_sink(paths: Iterable[str]) -> tuple[Counter[tuple[int, int | None]], int, int]:
    """The sink files as a downstream reader consolidates them: per pair, its diffs summed; and the largest
    count and max seq of the events the engine reported read.  A torn last line (no newline) is not read.
    O(lines)."""
    pairs: Counter[tuple[int, int | None]] = Counter()
    count = seen = 0
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            continue
        for line in text.split("\n")[:-1]:
            if not line.strip():
                continue
            r = json.loads(line)
            if r["kind"] == "pair":
                pairs[(int(r["a"]), None if r["b"] is None else int(r["b"]))] += int(r["diff"])
            elif r["diff"] > 0:
                count, seen = max(count, int(r["a"])), max(seen, int(r["b"]))
    return pairs, count, seen


class _Tail(threading.Thread):
    """Print the pairs this incarnation's sink file receives as they enter it (inner joins only: their sink
    takes nothing back, so a row once written stays in the consolidated result).  O(lines) in all."""

    def __init__(self, path: str, out: Any) -> None:
        super().__init__(name="sink-tail", daemon=True)
        self.path, self.out = path, out
        self.printed: Counter[tuple[int, int | None]] = Counter()
        self.halt = threading.Event()

    def _poll(self, pos: int) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(pos)
                chunk = f.read()
        except FileNotFoundError:
            return pos
        done = chunk.rfind(b"\n") + 1  # a torn last line waits for its end
        res = Results()
        for line in chunk[:done].decode("utf-8").splitlines():
            r = json.loads(line) if line.strip() else None
            if r is not None and r["kind"] == "pair" and r["diff"] > 0:
                pair = (int(r["a"]), None if r["b"] is None else int(r["b"]))
                res.pairs.append(pair)
                self.printed[pair] += 1
        if res.pairs:
            self.out.writelines(result_lines(res))
            self.out.flush()
        return pos + done

    def run(self) -> None:
        pos = 0
        while not self.halt.wait(0.02):
            pos = self._poll(pos)
        self._poll(pos)

    def stop(self) -> Counter[tuple[int, int | None]]:
        """Print what the file holds now and stop; the pairs printed (each as often as printed)."""
        self.halt.set()
        self.join()
        return self.printed


def _graph(q: Query, in_dir: str, sink_path: str) -> None:
    """Build the Pathway graph: the input queue read in streaming mode, the join and the progress, one sink."""
    import pathway as pw

    class Ev(pw.Schema):
        seq: int
        side: str
        rid: int
        ts: int
        key: str

    ev = pw.io.jsonlines.read(in_dir, schema=Ev, mode="streaming", object_pattern="*.jsonl", name="events",
                              autocommit_duration_ms=20)  # not write_once's temp files (.NAME.tmp-PID)
    a = ev.filter(ev.side == "b")
    b = ev.filter(ev.side == "p")
    lo, hi = lower_offset(q), upper_offset(q)
    window = pw.temporal.interval(lo, lo if lo > hi else hi)
    join = a.interval_join_left if q.join == "left" else a.interval_join
    pairs = join(b, a.ts, b.ts, window, a.key == b.key).select(kind="pair", a=a.rid, b=b.rid)
    reducers: Any = pw.reducers  # count() is untyped
    seen = ev.reduce(kind="seen", a=reducers.count(), b=reducers.max(ev.seq))
    out = pw.Table.concat_reindex(pairs, seen.update_types(b=int | None))
    pw.io.jsonlines.write(out, sink_path, name="sink")


def _run_pathway(persist_dir: str | None, failure: list[BaseException]) -> None:
    import pathway as pw

    cfg = None if persist_dir is None else pw.persistence.Config(pw.persistence.Backend.filesystem(persist_dir))
    try:
        pw.run(monitoring_level=pw.MonitoringLevel.NONE, default_logging=False, persistence_config=cfg)
    except BaseException as e:  # reported by the main thread, which owns the exit code
        failure.append(e)


def run_restart(req: RestartRequest, behavior: str = "none") -> int:
    """One incarnation of the restart protocol on Pathway (module docstring); 0 after the end line.

    Requires: the case within the ``pathway`` adapter's features (else exit 2 with one line, through
    :class:`InputError`); ``OIJ_CHECKPOINT`` 0 (this adapter prints no checkpoint line).
    Changes: ``STATE/in``, ``STATE/pw`` (Pathway's), ``STATE/sink``.
    Emits: (inner joins) this incarnation's sink rows as they come; after the end line the rest of the
    consolidated sink of every incarnation, and exits.
    """
    if importlib.util.find_spec("pathway") is None:  # said before anything is read or written
        raise UsageError("the pathway adapters need Pathway: pip install 'oij[pathway]'")
    req.unknown_options(list(OPTIONS))
    persistence = req.option("persistence", "on", OPTIONS["persistence"])
    sink_kind = req.option("sink", "per-run", OPTIONS["sink"])
    if behavior != "none":
        raise InputError("<stdin>", 0, "adapter", f"the restart drive maps behavior none only, not {behavior}")
    r = req.env
    if r.checkpoint != 0:
        raise InputError("<stdin>", 0, "OIJ_CHECKPOINT", f"{r.checkpoint}: this adapter prints no checkpoint "
                         "line, so it resumes at 0 only")
    q, events = read_jsonl(req.stdin, "<stdin>")
    try:
        check_supported(q, [], "none")
        if q.aggregate is not None:
            raise Unsupported("aggregates are not mapped in the restart drive (the pathway adapter's features)")
    except Unsupported as why:
        raise InputError("<stdin>", 1, "query", f"pathway cannot run this case: {why}") from None
    r.claim(format_query(q))
    in_dir, sink_dir = r.path("in"), r.path("sink")
    os.makedirs(in_dir, exist_ok=True)
    os.makedirs(sink_dir, exist_ok=True)
    sink_path = os.path.join(sink_dir, "all.jsonl" if sink_kind == "single" else f"{r.incarnation:04d}.jsonl")

    logging.getLogger("pathway_engine").setLevel(logging.WARNING)
    _graph(q, in_dir, sink_path)
    failure: list[BaseException] = []
    engine = threading.Thread(target=_run_pathway, name="pathway-run", daemon=True,
                              args=(r.path("pw") if persistence == "on" else None, failure))
    engine.start()
    tail = _Tail(sink_path, req.stdout) if q.join != "left" and sink_kind == "per-run" else None
    if tail is not None:
        tail.start()

    n = 0
    for e in events:
        if isinstance(e, End):
            break
        n += 1
        write_once(os.path.join(in_dir, f"e{n:08d}.jsonl"), (json.dumps(event_record(q, n, e)) + "\n").encode())

    def sinks() -> list[str]:
        return sorted(os.path.join(sink_dir, x) for x in os.listdir(sink_dir) if x.endswith(".jsonl"))

    def wait(pred: Any, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if failure:
                raise RuntimeError(f"Pathway's run failed: {failure[0]!r}")
            if pred(*read_sink(sinks())):
                return True
            time.sleep(0.05)
        return False

    if not wait(lambda _p, count, _s: count >= n, WAIT_EVENTS):
        print(f"pathway: the sink never reported all {n} events read; judging what it holds", file=sys.stderr)
    for j, tag in ((n + 1 + 2 * r.incarnation, "a"), (n + 2 + 2 * r.incarnation, "b")):
        write_once(os.path.join(in_dir, f"z{r.incarnation:04d}{tag}.jsonl"),
                   (json.dumps({"seq": j, "side": "end", "rid": 0, "ts": 0, "key": ""}) + "\n").encode())
        if not wait(lambda _p, _c, s, j=j: s >= j, WAIT_MARKER):
            print(f"pathway: the end marker {j} never reached the sink", file=sys.stderr)
            sys.stderr.flush()
            os._exit(1)
    pairs, _, _ = read_sink(sinks())
    printed: Counter[tuple[int, int | None]] = Counter()
    if tail is not None:
        printed = tail.stop()
    res = Results()
    for pair, mult in pairs.items():
        if mult < 0:
            print(f"pathway: the sink retracts {pair} more often than it adds it ({mult})", file=sys.stderr)
        res.pairs.extend([pair] * max(0, mult - printed[pair]))
    if printed - +pairs:
        print(f"pathway: rows printed that the sink no longer holds: {dict(printed - +pairs)}", file=sys.stderr)
    req.stdout.writelines(result_lines(res.canonical()))
    req.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the streaming run never ends by itself: leave with its threads


__all__ = ["OPTIONS", "event_record", "read_sink", "run_restart"]
