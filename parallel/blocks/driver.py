r"""The block engine's driver: rounds of pieces, W carries, the id check, and the output's key ranges.

Data flow of one job (n workers, the runtime's replica processes; pieces in file order, n per round)::

    driver                                             worker w (oij.parallel.blocks.job)
    ------------------------------------------------   ------------------------------------------------
    decode(piece t*n + w) ------------------------->   decode its piece (file range / row group / inbox)
    <-- lines, W summary, end, error, key counts ---   ids --> outbox[w][t % 2].ids
    in piece order: ids into one IdSet (file input),
      anomalies re-read (oij.io.pieces.reread_piece),
      carries: W before / after every piece
      (round 0 of hp/scale: Alg. 1 / Alg. 3)
    route(piece i, carry) ------------------------->   W at every arrival, late ids, on-time tuples
      (once pieces < i are decoded, its slot free)     --> outbox[w][t % 2] (per destination)
    <-- rows sent per replica, key table -----------
    join(piece i: its rows for r, W after) -------->   BlockStore.add --> sorter  (pieces in order)
      (once piece i is routed)
    ... round t + 2's decode is sent after round t's last join: a worker joins, then decodes ...
    end ------------------------------------------->   last rows, sorter runs
    write(key range r of every part) -------------->   merge every worker's runs in range r --> part file
    part files, in order --> the caller's output (one concatenation: no merge, no formatting here); given the
      output stream (``out``), replica 0 writes range 0 of the first part with rows into it instead of a file

``barriers="round"`` (``oij run --barriers round``) is the older schedule, kept for comparison: all of round
t's decode reports before any route, all of its routes before any join.

**W, two-pass, with exchanged carries.**  A piece knows its own watermarks (or largest ts), not what came
before it.  Pass 1 (decode): each piece's summary -- per-channel maxima of its watermarks, or its largest
ts.  The driver folds the summaries in piece order: the carry into piece i is the fold of pieces ``< i``,
the W after it is the fold's minimum over channels (or largest ts minus the lateness).  Pass 2 (route):
:func:`oij.reference.block_oracle.watermarks_before` / :func:`~oij.reference.block_oracle.lateness_before` from
the carry give
:math:`W_i` at every arrival, exactly as the sequential block path computes it (its step 1: a prefix
maximum is associative, so a fold of piece summaries equals the maximum over the prefix).

**Why the output is the oracle's.**  Lateness is decided per event with the sequential W (above).  Each
worker's store receives, in arrival order, the on-time tuples routed to it, piece by piece, each piece with
the W after it: that is :class:`oij.reference.block_oracle.BlockStore`'s contract, whose argument (the module
docstring of :mod:`oij.reference.block_oracle`, steps 3-4) needs only that every tuple is on time, that W after a
block bounds every later on-time tuple from below, and that all probes a stored base can match reach its
store (:mod:`oij.parallel.blocks.route`).  So each base's pairs and row are made once, by its replica; the union
over replicas is the oracle's multiset.  The canonical order is a sort, so the bytes are the oracle's when
the key ranges, written in order, hold every row once: they partition the base ids (late ids) by
``[s_i, s_{i+1})`` and every row of a base id falls in exactly one range.

**Block emission refines the checked event protocol.**  ``proofs/`` checks the event-at-a-time collectors
(PPOIJ's Examples 4.1-4.3: duplicates, missed pairs, wrong order come from a collector that lets a replica
act on a W some of its inputs have not reached).  Here no replica ever sees a W before every tuple that
arrived before it: W after piece i is sent with piece i's rows, and every replica joins the pieces in piece
order, each after it is routed (under either barrier schedule).  A block run is therefore one particular
event-at-a-time run of the checked protocol -- the standard collector's, with every channel's punctuation
delivered at piece ends -- with the events of a piece processed together, which changes what is stored in
between, never what is found (oij.reference.block_oracle, step 3).

**Input errors.**  Workers number their piece's lines from 1 and check ids within the piece only; the driver
reads the pieces' reports in order, adds every piece's ids to one :class:`~oij.io.errors.IdSet`, and on any
doubt re-reads that piece with the sequential reader's state (:func:`oij.io.pieces.reread_piece`), which
raises the error the sequential reader raises -- the first one in the file, with its line and field.

Ownership (who creates / who frees): :func:`execute` creates every shared-memory box of the job
(:mod:`oij.parallel.blocks.exchange`) and the job directory (the workers' sorted runs and part files), and frees
the boxes in a ``finally`` block; the caller removes the job directory once it has copied the part files
(:class:`BlockRun` names it).  Processes belong to the :class:`~oij.parallel.runtime.pool.Runtime`, which the
caller closes; any failure (an input error, a worker's exception or death, Ctrl-C) propagates after the
boxes are unlinked, and closing the runtime stops every worker.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
from oij.parallel.blocks.exchange import INBOX, Box, Layout, outbox_layout
from oij.parallel.blocks.job import BlockJob
from oij.parallel.blocks.route import Groups, Router
from oij.parallel.config import EngineConfig
from oij.parallel.runtime.pool import EngineFailure, Runtime
from oij.reference.block_oracle import NEG, w_after_lateness
from oij.reference.columns import EventBlock
from oij.spec.model import Event, Query

from oij.io.atomic import settled, signals_deferred, temp_name
from oij.io.extsort import PARTS, range_splitters
from oij.io.jsonlread import EventParser
from oij.io.pieces import PIECE_BYTES, Piece, Plan, missing_end, reread_piece

PIECE_EVENTS = 1 << 17
"""Events per piece when the driver holds the columns (a generated stream, stdin, oij check's events)."""


@dataclass
class BlockOptions(EngineConfig):
    """Everything that defines a block run besides the query and the input: the shared settings
    (:class:`~oij.parallel.config.EngineConfig`; ``fail_after`` counts rounds here) and the block engine's own."""

    piece_bytes: int = PIECE_BYTES
    piece_events: int = PIECE_EVENTS
    output: bool = True
    check: bool = False  # tests: every store's _check() after every piece
    slow_join: dict[int, float] = field(default_factory=dict)  # tests: replica -> seconds it sleeps per join message
    barriers: str = "piece"  # "round": route after a round's pieces are decoded, join after they are routed;
    # "piece": each piece routed once its carry is known, joined once it is routed (_Drive._piece_loop)
    solo_rounds: int = 0  # tests: the first rounds give a piece to replica 0 only (as while helpers start)


@dataclass
class BlockRun:
    """A finished run: the part files that, concatenated in order, are the canonical result (empty without
    output), the job directory holding them (the caller removes it), and the metrics."""

    query: Query
    parts: list[str]
    job_dir: str
    metrics: dict[str, Any]

    def write_to(self, out: Any) -> None:
        """Copy the parts, in order, to the text stream ``out`` -- as bytes, into its binary buffer when it has
        one (the lines are ASCII: decoding and encoding 10^8 bytes of them again costs seconds).  O(output
        bytes)."""
        raw = getattr(out, "buffer", None)
        if raw is not None:
            out.flush()
        for p in self.parts:
            if raw is not None:
                with open(p, "rb") as fb:
                    shutil.copyfileobj(fb, raw, 1 << 20)
            else:
                with open(p, encoding="utf-8", newline="") as f:
                    shutil.copyfileobj(f, out, 1 << 20)

    def remove(self) -> None:
        """Remove the job directory (idempotent)."""
        shutil.rmtree(self.job_dir, ignore_errors=True)
        settled(self.job_dir)


class FileSource:
    """Pieces of a file, decoded by the workers (:func:`oij.io.pieces.plan_pieces`)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.query = plan.query
        self.cap = plan.max_rows
        self.parser = EventParser(plan.query, plan.path, int64_ids=True)
        self._it = iter(plan.pieces)

    def take(self, k: int) -> list[Piece]:
        return [p for _, p in zip(range(k), self._it, strict=False)]


class ColumnSource:
    """Event blocks the driver already holds (validated by their reader), cut into pieces of at most
    ``cap`` events and copied to the workers' inboxes."""

    def __init__(self, query: Query, blocks: Iterator[EventBlock], cap: int) -> None:
        self.query = query
        self.cap = cap
        self._pieces = _cut(blocks, cap)

    def take(self, k: int) -> list[EventBlock]:
        return list(itertools.islice(self._pieces, k))


def _cut(blocks: Iterator[EventBlock], cap: int) -> Iterator[EventBlock]:
    """Blocks cut into pieces of at most ``cap`` events; the end flag on the last piece of an end block."""
    for b in blocks:
        if not len(b):
            if b.end:
                yield b
            continue
        for i in range(0, len(b), cap):
            yield b.slice(i, i + cap)


def execute(rt: Runtime | None, source: FileSource | ColumnSource, opt: BlockOptions, tmp_dir: str | None = None,
            out: IO[str] | None = None) -> BlockRun:
    """Run one block job: replica 0 in this process, replicas 1 .. n-1 on ``rt``'s processes (None for one
    replica).  ``out``: the output stream, for replica 0 to write the first key range of the first part with rows
    straight into it (the returned run's parts are then the rest, to be copied after it: :meth:`BlockRun.write_to`).
    Raises the input's :class:`~oij.io.errors.InputError` or :class:`~oij.parallel.runtime.pool.EngineFailure`."""
    n = opt.replicas
    helpers = 0 if rt is None else rt.n
    if n < 1 or n - 1 > helpers:
        raise ValueError(f"replicas must be in [1, {helpers + 1}] with {helpers} helper processes, got {n}")
    prefix = rt.begin_job() if rt is not None else f"oij-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    q = source.query
    router = Router(opt.pattern, n, opt.theta, opt.max_split, opt.partitions, opt.delta)
    # named before it exists (oij.io.atomic.temp_name): the finally below, or the CLI's last sweep, finds it
    # whenever a Ctrl-C comes
    job_dir = temp_name(tmp_dir, ".oij-run-")
    boxes: list[Box] = []
    local: BlockJob | None = None
    ok = made = False
    try:
        try:
            os.mkdir(job_dir, 0o700)
        except FileExistsError:  # another's (48 random bits: never seen): not to be removed
            settled(job_dir)
            raise
        made = True
        cap = max(1, source.cap)
        outboxes = [[_new_box(boxes, f"{prefix}-o{w}s{s}", outbox_layout(n), cap) for s in range(2)]
                    for w in range(n)]
        inboxes = [[_new_box(boxes, f"{prefix}-i{w}s{s}", INBOX, cap) for s in range(2)] for w in range(n)] \
            if isinstance(source, ColumnSource) else []
        spec = {
            "job": "oij.parallel.blocks.job:BlockJob",
            "offset": 1,
            "query": q,
            "n": n,
            "pattern": opt.pattern,
            "router": {"theta": opt.theta, "max_split": opt.max_split, "partitions": opt.partitions,
                       "delta": opt.delta},
            "outboxes": [[b.spec for b in slots] for slots in outboxes],
            "inboxes": [[b.spec for b in slots] for slots in inboxes],
            "output": opt.output,
            "job_dir": job_dir,
            "fail_after": dict(opt.fail_after),
            "check": opt.check,
            "slow_join": dict(opt.slow_join),
        }
        if rt is not None:
            for w in range(1, n):
                rt.ctls[w - 1].put(("job", spec))
        local = BlockJob(0, {**spec, "offset": 0}, None, None, np.zeros(1, np.int64), os.getpid())
        local.direct = out if opt.output else None
        run = _Drive(rt, local, source, opt, router, outboxes, inboxes, job_dir).run()
        ok = True
        return run
    except BaseException as e:
        if rt is not None:  # helpers may be in the middle of this job: none is reused (execute_job does so too)
            if not isinstance(e, EngineFailure):
                rt.broken = f"{type(e).__name__}: {e}"
            rt.close()
        raise
    finally:
        with signals_deferred():  # a second Ctrl-C must not cut the cleanup short
            if local is not None:
                local.close()
            for b in boxes:
                b.close()
                b.unlink()
            if not ok and made:
                shutil.rmtree(job_dir, ignore_errors=True)
                settled(job_dir)


def _new_box(boxes: list[Box], name: str, layout: Layout, cap: int) -> Box:
    """Create a box and record it in ``boxes`` as one step: a Ctrl-C between the two would leave a segment in
    /dev/shm that the ``finally`` of :func:`execute` does not know (oij's CLI defers the signal until the
    section ends, as :class:`~oij.parallel.runtime.pool.Runtime` does for its abort segment)."""
    with signals_deferred():
        box = Box.create(name, layout, cap)
        boxes.append(box)
    return box


class _Drive:
    """The driver's state during one job (module docstring)."""

    def __init__(self, rt: Runtime | None, local: BlockJob, source: FileSource | ColumnSource, opt: BlockOptions,
                 router: Router, outboxes: list[list[Box]], inboxes: list[list[Box]], job_dir: str) -> None:
        self.rt = rt
        self.local = local
        self._local_msgs: list[tuple[Any, ...]] = []
        self.source = source
        self.q = source.query
        self.opt = opt
        self.n = opt.replicas
        self.router = router
        self.outboxes = outboxes
        self.inboxes = inboxes
        self.job_dir = job_dir
        self.cm = np.full(self.q.channels, NEG, np.int64)
        self.w = NEG
        self.max_ts = NEG
        self.lines = 0  # lines (rows) after the query, in the pieces read so far
        self.ended = False
        self.position = 0
        self.events = 0
        self.tuples = 0
        self.late = 0
        self.rounds = 0
        self.pieces = 0
        self.t_wait = 0.0

    def _send(self, w: int, msg: tuple[Any, ...]) -> None:
        """Send ``msg`` to replica ``w``: a helper process's queue, or -- for replica 0, this process -- a list
        handled at the next collect, once every helper has its message (so they work meanwhile)."""
        if w == 0:
            self._local_msgs.append(msg)
        else:
            assert self.rt is not None
            self.rt.ctls[w - 1].put(msg)

    def _collect(self, kind: str, count: int) -> list[Any]:
        """Run replica 0's pending messages, then wait for ``count`` replies of ``kind`` in all."""
        msgs, self._local_msgs = self._local_msgs, []
        for m in msgs:
            if self.local.handle(m):
                self.local.replies.append(("done", 0, self.local.stats))
        got = [m for m in self.local.replies if m[0] == kind]
        self.local.replies = [m for m in self.local.replies if m[0] != kind]
        if len(got) < count:
            assert self.rt is not None
            t = time.perf_counter()
            got += self.rt.collect(kind, count - len(got))
            self.t_wait += time.perf_counter() - t
        return got

    def _decoded(self, want: list[int]) -> dict[int, dict[str, Any]]:
        """The decode reports of pieces ``want`` (reports of the round ahead are kept for later)."""
        while not all(i in self._stash for i in want):
            for m in self._collect("decoded", 1):
                self._stash[m[2]] = m[3]
        return {i: self._stash.pop(i) for i in want}

    def _take_round(self) -> list[Any]:
        """The next round's pieces (none once a column source's end came): one per replica, or -- while the
        helper processes are still starting (or ``solo_rounds`` asks for it) -- one for replica 0 only, so
        that this process works instead of waiting for them."""
        if self._source_done:
            return []
        self._round_no += 1
        solo = self._round_no <= self.opt.solo_rounds or (
            self.rt is not None and self.n > 1 and not self.rt.all_ready())
        batch: list[Any] = list(self.source.take(1 if solo else self.n))
        if isinstance(self.source, ColumnSource) and (not batch or batch[-1].end):
            self._source_done = True
        return batch

    _source_done = False
    _round_no = 0

    def _await_joined(self, t: int) -> None:
        """Wait until every replica has joined round ``t`` (its outbox slot may then be written again): a
        round with pieces for only some replicas gives no decode reply to order this by (module docstring)."""
        while not self._slot_free(t + 2):
            for m in self._collect("joined", 1):
                self._joined[m[1]] = max(self._joined[m[1]], m[2])

    def _slot_free(self, t: int) -> bool:
        """Whether round ``t``'s pieces may be routed: every replica has joined round ``t - 2``, the last to use
        their outbox slot ``t % 2``."""
        return min(self._joined) >= t - 2

    _dispatched = 0  # pieces sent for decoding so far: the next piece's index

    def _dispatch_decode(self, batch: list[Any], t: int) -> None:
        want = t == 0 and self.router.needs_calibration
        first = self._dispatched
        self._dispatched += len(batch)
        for w, item in enumerate(batch):
            idx = first + w
            if isinstance(item, Piece):
                self._send(w, ("decode", idx, item, t % 2, 0, None, want))
            else:
                table: list[Any] | None = None
                key = item.key
                if key.dtype == object:
                    codes: dict[tuple[type, Any], int] = {}
                    table = []
                    kc = np.zeros(len(key), np.int64)
                    for i, k in enumerate(key.tolist()):
                        if item.kind[i] != 0:
                            continue
                        c = codes.get((type(k), k))
                        if c is None:
                            c = codes[(type(k), k)] = len(table)
                            table.append(k)
                        kc[i] = c
                    if not table:
                        table.append(0)
                    key = kc
                self.inboxes[w][t % 2].put("", id=item.id, ts=item.ts, key=key, value=item.value, channel=item.channel,
                                    kind=item.kind, side=item.side)
                # a column source's end row is the last piece's flag
                self._send(w, ("decode", idx, None, t % 2, len(item), table, want))
                self._ends[idx] = item.end

    _ends: dict[int, bool]

    def run(self) -> BlockRun:
        self._ends = {}
        self._stash: dict[int, dict[str, Any]] = {}
        self._joined = [-1] * self.n
        self._has_groups: set[int] = set()
        t0 = time.perf_counter()
        # decode runs one round ahead: a worker decodes round t + 1 while the others finish round t, so the
        # barriers of a round wait for imbalance only (the slot argument: oij.parallel.blocks.exchange)
        rounds: list[list[Any]] = []
        for t in range(2):
            batch = self._take_round()
            if not batch:
                break
            rounds.append(batch)
            self._dispatch_decode(batch, t)
        if self.opt.barriers == "piece":
            self._piece_loop(rounds)
        else:
            self._round_loop(rounds)
        if isinstance(self.source, FileSource) and not self.ended:
            raise missing_end(self.source.plan, self.lines)
        return self._finish(t0)

    def _round_loop(self, rounds: list[list[Any]]) -> None:
        """Round barriers: every piece of round t decoded before any is routed, every piece routed before any
        is joined."""
        n = self.n
        t = 0
        while t < len(rounds):
            batch = rounds[t]
            first = self.pieces
            infos = self._decoded([first + w for w in range(len(batch))])
            if t == 0 and self.router.needs_calibration:
                self._calibrate(infos.values())
            admitted = [self._admit(first + w, item, infos[first + w], w, t % 2) for w, item in enumerate(batch)]
            self._await_joined(t - 2)
            for w, (carry, _w_end, position) in enumerate(admitted):
                self._send(w, ("route", first + w, t % 2, carry, self._groups_for(w), position))
            routed = {m[2]: m[3] for m in self._collect("routed", len(batch))}
            for r in routed.values():
                self.late += r["late"]
            for r in range(n):
                joins = [(w, t % 2, admitted[w][1], routed[first + w]["sent"][r], routed[first + w]["table"])
                         for w in range(len(batch))]
                self._send(r, ("join", t, joins, True))
            self.pieces += len(batch)
            self.rounds += 1
            if len(rounds) == t + 2:
                nxt = self._take_round()
                if nxt:
                    rounds.append(nxt)
                    self._dispatch_decode(nxt, t + 2)
            rounds[t] = []
            t += 1

    def _piece_loop(self, rounds: list[list[Any]]) -> None:
        """Piece barriers: piece i is routed once the pieces before it are decoded (its carry is known) and its
        slot is free, and joined once it is routed -- not once its whole round is.  The driver's own replica
        runs one message at a time, between which the helpers' replies are read and answered."""
        n = self.n
        starts = [0]  # starts[t]: the index of round t's first piece
        for batch in rounds:
            starts.append(starts[-1] + len(batch))
        routed: dict[int, dict[str, Any]] = {}
        admitted: dict[int, tuple[Any, int, int]] = {}
        nxt_route = nxt_join = 0
        t_route = t_join = 0  # the rounds of those pieces

        def advance() -> bool:
            nonlocal nxt_route, nxt_join, t_route, t_join
            moved = False
            while t_route < len(rounds) and nxt_route < starts[t_route + 1]:
                batch = rounds[t_route]
                first = starts[t_route]
                if t_route == 0 and self.router.needs_calibration and not self.router.calibrated:
                    if not all(first + w in self._stash for w in range(len(batch))):
                        break
                    self._calibrate([self._stash[first + w] for w in range(len(batch))])
                if nxt_route not in self._stash or not self._slot_free(t_route):
                    break
                w = nxt_route - first
                info = self._stash.pop(nxt_route)
                admitted[nxt_route] = carry, _w_end, position = self._admit(nxt_route, batch[w], info, w, t_route % 2)
                self._send(w, ("route", nxt_route, t_route % 2, carry, self._groups_for(w), position))
                nxt_route += 1
                moved = True
                if nxt_route == starts[t_route + 1]:
                    t_route += 1
            while nxt_join < nxt_route and nxt_join in routed:
                first = starts[t_join]
                w = nxt_join - first
                info = routed.pop(nxt_join)
                self.late += info["late"]
                last = nxt_join + 1 == starts[t_join + 1]
                for r in range(n):
                    part = (w, t_join % 2, admitted[nxt_join][1], info["sent"][r], info["table"])
                    self._send(r, ("join", t_join, [part], last))
                del admitted[nxt_join]
                nxt_join += 1
                moved = True
                if last:
                    self.pieces += len(rounds[t_join])
                    self.rounds += 1
                    rounds[t_join] = []
                    t_join += 1
                    if len(rounds) == t_join + 1:
                        nxt = self._take_round()
                        if nxt:
                            rounds.append(nxt)
                            starts.append(starts[-1] + len(nxt))
                            self._dispatch_decode(nxt, len(rounds) - 1)
            return moved

        def take(m: tuple[Any, ...]) -> None:
            if m[0] == "decoded":
                self._stash[m[2]] = m[3]
            elif m[0] == "routed":
                routed[m[2]] = m[3]
            elif m[0] == "joined":
                self._joined[m[1]] = max(self._joined[m[1]], m[2])

        kinds = ("decoded", "routed", "joined")
        while t_join < len(rounds):
            while advance():
                pass
            if t_join >= len(rounds):
                break
            if self._local_msgs:  # one step of this process's replica, then the helpers' news
                if self.local.handle(self._local_msgs.pop(0)):
                    self.local.replies.append(("done", 0, self.local.stats))
                keep = [m for m in self.local.replies if m[0] not in kinds]
                for m in self.local.replies:
                    if m[0] in kinds:
                        take(m)
                self.local.replies = keep
                if self.rt is not None:
                    for m in self.rt.receive(kinds, wait=False):
                        take(m)
            else:
                assert self.rt is not None, "one replica: every message is this process's own"
                t = time.perf_counter()
                for m in self.rt.receive(kinds, wait=True):
                    take(m)
                self.t_wait += time.perf_counter() - t

    def _calibrate(self, infos: Any) -> None:
        """HP / Scale: the routing groups from round 0's key counts."""
        counts: dict[int, int] = {}
        for info in infos:
            for k, c in info.get("counts", {}).items():
                counts[k] = counts.get(k, 0) + c
        self.router.calibrate(counts)

    def _groups_for(self, w: int) -> Groups | None:
        """The routing groups for replica ``w``'s route message: sent once, with its first piece to route."""
        got = None if w in self._has_groups else self.router.groups if self.router.calibrated else None
        if got is not None:
            self._has_groups.add(w)
        return got

    def _admit(self, idx: int, item: Any, info: dict[str, Any], w: int, slot: int) -> tuple[Any, int, int]:
        """Piece ``idx``, in piece order: its ids and errors checked (file pieces), the W carry into it folded
        past it.  Returns (the carry into it, W after it, its first tuple's position)."""
        if isinstance(item, Piece):
            self._check_piece(item, info, w, slot)
        elif self._ends.get(idx):
            info["end"] = True
        carry = self._carry()
        self._fold(info["summary"])
        position = self.position
        self.position += info["tuples"]
        self.events += info["events"]
        self.tuples += info["tuples"]
        if info["end"]:
            self.ended = True
        return carry, self.w, position

    def _finish(self, t0: float) -> BlockRun:
        """End every replica, have them write the key ranges; the run."""
        n = self.n
        for r in range(n):
            self._send(r, ("end",))
        runs_msgs = sorted(self._collect("runs", n), key=lambda m: m[1])
        parts: list[str] = []
        if self.opt.output:
            tasks: list[list[tuple[str, list[tuple[str, int]], int | None, int | None, str]]] = [[] for _ in range(n)]
            # the output begins with range 0 of the first part with rows: replica 0 writes it there itself
            direct = self.local.direct is not None
            for name in PARTS:
                runs = [run for m in runs_msgs for run in m[2].get(name, [])]
                cuts = range_splitters(runs, n)
                bounds: list[int | None] = [None, *cuts, None]
                first = direct and any(rows for _, rows in runs)
                for r in range(n):
                    path = "" if first and r == 0 else os.path.join(self.job_dir, f"part-{name}-{r}")
                    # range r is [bounds[r], bounds[r + 1]); with no cuts (nothing sampled) range 0 takes all
                    lo, hi = (bounds[r], bounds[r + 1]) if r <= len(cuts) else (0, 0)
                    tasks[r].append((name, runs, lo, hi, path))
                    if path:
                        parts.append(path)
                direct = direct and not first
            for r in range(n):
                self._send(r, ("write", tasks[r]))
        done = sorted(self._collect("done", n), key=lambda m: m[1])
        stats = [m[2] for m in done]
        wall = time.perf_counter() - t0
        return BlockRun(self.q, parts, self.job_dir, self._metrics(stats, wall))

    # ------------------------------------------------------------------ pieces in order

    def _check_piece(self, piece: Piece, info: dict[str, Any], w: int, slot: int) -> None:
        """Ids, errors and the end line of a file piece, in file order (module docstring)."""
        src = self.source
        assert isinstance(src, FileSource)
        bad = info["error"] is not None or (self.ended and info["events"] > 0)
        if not bad:
            ids = self.outboxes[w][slot].cols["ids"][: info["tuples"]]
            bad = not src.parser.ids.add_many(ids, presorted=True)
        if bad:
            src.parser.ended = self.ended
            blk = reread_piece(piece, self.q, src.parser, src.plan.first_line + self.lines)  # the sequential error
            if len(blk) or info["error"] is not None:
                raise EngineFailure(f"piece {piece.index} of {piece.path} was decoded differently by a worker "
                                    "and by the sequential reader")
        self.lines += info["lines"]

    def _carry(self) -> Any:
        if self.q.lateness is None:
            return self.cm.tolist(), self.w
        return self.max_ts

    def _fold(self, summary: Any) -> None:
        if self.q.lateness is None:
            self.cm = np.maximum(self.cm, np.array(summary, np.int64))
            self.w = int(self.cm.min())
        else:
            self.max_ts = max(self.max_ts, int(summary))
            self.w = w_after_lateness(self.max_ts, self.q.lateness)

    def _metrics(self, stats: list[dict[str, Any]], wall: float) -> dict[str, Any]:
        received = [s["received"] for s in stats]
        mean = sum(received) / len(received) if received else 0.0
        return {
            "engine": "blocks",
            "pattern": self.opt.pattern,
            "replicas": self.n,
            "wall_s": wall,
            "events": self.events,
            "tuples": self.tuples,
            "late": self.late,
            "pieces": self.pieces,
            "rounds": self.rounds,
            "driver_wait_s": self.t_wait,
            "deliveries": sum(received),
            "replication": sum(received) / max(1, self.tuples - self.late),
            "load_balance_factor": max(received) / mean if mean else 1.0,
            "groups": {str(k): v for k, v in self.router.groups.as_map().items()},
            "per_replica": stats,
        }


@contextlib.contextmanager
def helpers(replicas: int, start_method: str = "spawn") -> Iterator[Runtime | None]:
    """The helper processes of a ``replicas``-replica block run (replica 0 is the driver's process): a runtime
    of ``replicas - 1`` processes, or None for one replica; closed on exit (no process or segment left).  The
    helpers start importing while the driver goes on (the first message waits for them, not this call)."""
    if replicas <= 1:
        yield None
        return
    rt = Runtime(replicas - 1, start_method, wait_ready=False, first=1)
    try:
        yield rt
    finally:
        rt.close()


# ---------------------------------------------------------------------- sources and whole runs


def file_source(path: str, q: Query | None = None, piece_bytes: int = PIECE_BYTES) -> FileSource | ColumnSource:
    """The source for ``path``: pieces the workers decode (an oij-jsonl or ``.parquet`` file), else -- stdin
    (``-``) or a Parquet dataset (a directory) -- the readers' blocks, copied to the workers.  ``q`` overrides
    a Parquet file's query.  Raises :class:`~oij.io.errors.InputError` for a bad query."""
    if path == "-" or os.path.isdir(path):
        from oij.io import open_blocks

        query, blocks, _f = open_blocks(path, q, int64_ids=True)
        return ColumnSource(query, blocks, PIECE_EVENTS)
    from oij.io.pieces import plan_pieces

    return FileSource(plan_pieces(path, piece_bytes, q))


def events_source(q: Query, events: Sequence[Event], piece_events: int = PIECE_EVENTS) -> ColumnSource:
    """The source for an event sequence in memory (ending with End): blocks of at most ``piece_events``."""
    from oij.io import group_events

    return ColumnSource(q, group_events(events, piece_events), piece_events)


def run(source: FileSource | ColumnSource, opt: BlockOptions, write: Callable[[BlockRun], None] | None = None,
        tmp_dir: str | None = None, start_method: str = "spawn", rt: Runtime | None = None,
        out: IO[str] | None = None) -> dict[str, Any]:
    """One whole block run: helper processes (``rt``'s, or started and stopped here), :func:`execute`, then
    ``write(run)`` to copy the canonical result out (the caller's atomic file or stream), then the job
    directory removed.  Or, given ``out`` instead of ``write``: the result into the stream ``out``, its first
    range written there by replica 0 directly (no part file, no copy of it).  Returns the metrics (with
    ``total_s``, the helpers' start included)."""
    if out is not None and write is not None:
        raise ValueError("write or out, not both")
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if rt is None:
            rt = stack.enter_context(helpers(opt.replicas, start_method))
        br = execute(rt, source, opt, tmp_dir, out)
        try:
            if out is not None and opt.output:
                br.write_to(out)
            elif write is not None and opt.output:
                write(br)
        finally:
            br.remove()
    br.metrics["total_s"] = time.perf_counter() - t0
    return br.metrics
