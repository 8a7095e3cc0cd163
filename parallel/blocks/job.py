r"""The block engine's worker: one replica process decodes, routes, joins and writes whole blocks.

Data flow inside worker r (each step is one control message from the driver, each answered on the up queue)::

    decode(i):  piece i (its own byte range or row group, or the driver's inbox) --> columns, key digests,
                its tuple ids --> outbox[r][slot].ids;  reply: lines, W summary, end, errors, key counts
    route(i):   carry (W before the piece) --> W at every arrival (oij.reference.block_oracle.watermarks_before /
                lateness_before) --> late ids (to r's sorter) --> on-time tuples --Router--> outbox[r][slot]
    join(t):    for every piece of round t (or one piece: piece barriers), in piece order: outbox[w][slot] rows
                for r --> BlockStore.add(..., W after the piece) --> pairs / rows --> r's CanonicalSorter (int64
                columns, spilled runs)
    end:        BlockStore.end() --> last rows; every sorter buffer spilled as a run;  reply: the runs
    write:      for each part and r's key range [lo, hi): the runs of *every* worker --> merge --> part file

So the driver never touches a tuple: it checks ids, hands out carries and W, and concatenates r's part files.

The store is :class:`oij.reference.block_oracle.BlockStore`, the oracle's block path itself: a routed subset of the
on-time tuples, with W after each piece, gives exactly the pairs and rows of the bases routed here
(:mod:`oij.parallel.blocks.route` says why each base's pairs all meet at its replica).  ``key`` (Key-OIJ) uses
:class:`ScanStore`, which joins a base only when it is final and counts the whole key buffer as visited, as
Key-OIJ's scan does.

Ownership: this process creates no shared memory and no process; it attaches the driver's boxes and closes
them.  Its sorter's runs go to the job directory, which the driver creates and removes (other workers read
these runs during ``write``).  It runs inside :func:`oij.parallel.runtime.replica.replica_main` (the runtime's job
hook), which reports an exception as ``("error", r, traceback)``; ``exit`` or the abort flag ends it.
"""

from __future__ import annotations

import os
import time
from queue import Empty
from typing import IO, Any

import numpy as np
import numpy.typing as npt
from oij.parallel.blocks.exchange import Box, BoxSpec
from oij.parallel.blocks.route import Groups, Router, key_digest
from oij.parallel.runtime.replica import Aborted
from oij.reference.block_oracle import (
    NEG,
    BlockOutput,
    BlockStore,
    Tuples,
    lateness_before,
    watermarks_before,
    window_pairs,
)
from oij.reference.columns import EventBlock
from oij.spec.model import Query

from oij.io.errors import InputError
from oij.io.extsort import CanonicalSorter, write_range

I64 = npt.NDArray[np.int64]


class ScanStore(BlockStore):
    """Key-OIJ on blocks: a base is joined once, when it is final, with its key's whole probe buffer (the scan
    is one vectorised window test; ``visited`` counts the buffer, as the scan visits it).  Probes inside a
    pending base's window are kept until its finality, as for aggregates."""

    def _join_new(self, new_b: Tuples, new_p: Tuples) -> None:
        if not self.empty:
            self.probes = self.probes.cat(new_p)

    def _keeps_pending_windows(self) -> bool:
        return True

    def _final(self, done: Tuples) -> None:
        p = self.probes
        if len(p) and len(done):
            per_key = np.bincount(p.kc, minlength=int(max(done.kc.max(), p.kc.max())) + 1)
            self.visited += int(per_key[done.kc].sum())
        if self.agg is not None:
            self._rows(done)
            return
        if self.empty or not len(p):
            ia = np.empty(0, np.intp)
        else:
            ia, ib = window_pairs(done.kc, done.ts, p.kc, p.ts, self.lo, self.hi)
            self.out.add_pairs(done.id[ia], p.id[ib])
        if self.left:
            hit = np.zeros(len(done), np.bool_)
            hit[ia] = True
            self.out.add_nulls(done.id[~hit])


class _Decoded:
    """A decoded piece, kept until it is routed."""

    def __init__(self, blk: EventBlock, digest: npt.NDArray[np.uint64]) -> None:
        self.blk = blk
        self.digest = digest


class BlockJob:
    """One job on one replica process (module docstring).  Created by the runtime's job hook."""

    def __init__(self, me: int, spec: dict[str, Any], ctl: Any, up: Any, abort: npt.NDArray[np.int64],
                 ppid: int) -> None:
        self.me = me + int(spec.get("offset", 0))  # helper process k is replica k + 1 (the driver is replica 0)
        self.spec = spec
        self.ctl = ctl
        self.up = up
        self.abort = abort
        self.ppid = ppid
        self.q: Query = spec["query"]
        self.n: int = spec["n"]
        self.router = Router(spec["pattern"], self.n, **spec["router"])
        self.boxes: list[list[Box]] = [[Box.attach(s) for s in slots] for slots in spec["outboxes"]]
        inbox: list[BoxSpec] = spec["inboxes"][self.me] if spec["inboxes"] else []
        self.inbox = [Box.attach(b) for b in inbox]
        self.store: BlockStore = (ScanStore if spec["pattern"] == "key" else BlockStore)(self.q)
        self.keep = bool(spec["output"])
        self.sorter = CanonicalSorter(spec["job_dir"], small_rows=0) if self.keep else None
        self.fail_after: int | None = spec["fail_after"].get(self.me)
        self.replies: list[tuple[Any, ...]] = []  # the driver's own replica: replies kept here
        self.decoded: dict[int, _Decoded] = {}
        self.cache: Any = None  # the last Parquet row group read (oij.io.pieces.GroupCache)
        self.direct: IO[str] | None = None  # replica 0: the output stream its first range goes to (driver.execute)
        self.stats: dict[str, Any] = {"replica": self.me, "received": 0, "pairs": 0, "rows": 0, "late": 0,
                                      "pieces_decoded": 0, "t_decode": 0.0, "t_route": 0.0, "t_join": 0.0,
                                      "t_write": 0.0, "t_wait": 0.0}

    def close(self) -> None:
        for slots in self.boxes:
            for b in slots:
                b.close()
        self.boxes = []
        for b in self.inbox:
            b.close()
        self.inbox = []
        if self.cache is not None:
            self.cache.close()

    # ------------------------------------------------------------------ the loop

    def _next(self) -> Any:
        t = time.perf_counter()
        while True:
            try:
                msg = self.ctl.get(timeout=0.05)
                break
            except Empty:
                if self.abort[0]:
                    raise Aborted("abort flag set") from None
                if os.getppid() != self.ppid:
                    raise Aborted("the driver is gone") from None
        self.stats["t_wait"] += time.perf_counter() - t
        if msg[0] == "exit":
            raise Aborted("exit")
        return msg

    def run(self) -> dict[str, Any]:
        """The loop of a worker process: handle messages until ``write`` (or ``end`` without output)."""
        while True:
            if self.handle(self._next()):
                return self.stats

    def handle(self, msg: tuple[Any, ...]) -> bool:
        """Handle one message from the driver (replies go to the up queue, or to ``self.replies`` for the
        driver's own replica); True when the job is over.  The driver calls this directly for replica 0."""
        kind = msg[0]
        t = time.perf_counter()
        if kind == "decode":
            self._decode(*msg[1:])
            self.stats["t_decode"] += time.perf_counter() - t
        elif kind == "route":
            self._route(*msg[1:])
            self.stats["t_route"] += time.perf_counter() - t
        elif kind == "join":
            self._join(*msg[1:])
            self.stats["t_join"] += time.perf_counter() - t
        elif kind == "end":
            self.store.end()
            self._drain()
            runs = self.sorter.spill_all() if self.sorter is not None else {}
            self.stats["t_join"] += time.perf_counter() - t
            self.stats["stored_max"] = self.store.stored_max
            self.stats["visited"] = self.store.visited
            self._reply(("runs", self.me, runs, self.stats))
            return not self.keep
        elif kind == "write":
            for name, runs, lo, hi, path in msg[1]:
                if not path:  # the output itself (replica 0 only: the driver's stream, execute's ``out``)
                    assert self.direct is not None
                    write_range(name, runs, lo, hi, self.direct)
                    continue
                with open(path, "w", encoding="utf-8", newline="") as f:
                    write_range(name, runs, lo, hi, f)
            self.stats["t_write"] += time.perf_counter() - t
            return True
        else:
            raise ValueError(f"unknown message {kind!r}")
        return False

    def _reply(self, msg: tuple[Any, ...]) -> None:
        if self.up is None:
            self.replies.append(msg)
        else:
            self.up.put(msg)

    # ------------------------------------------------------------------ steps

    def _decode(self, idx: int, piece: Any, slot: int, rows: int, table: list[Any] | None, counts: bool) -> None:
        """Decode piece ``idx`` (a file piece, or ``rows`` rows of the inbox) and report what the driver needs."""
        info: dict[str, Any] = {"error": None}
        if piece is not None:
            from oij.io.pieces import GroupCache, decode_piece

            if self.cache is None:
                self.cache = GroupCache()
            try:
                blk, lines = decode_piece(piece, self.q, False, self.cache)
            except InputError as e:
                self._reply(("decoded", self.me, idx, {"error": str(e), "lines": 0, "events": 0, "end": False}))
                return
        else:
            g = self.inbox[slot].get
            key: npt.NDArray[Any] = g("key", rows)
            if table is not None:
                key = np.array(table, dtype=object)[key]
            blk = EventBlock(g("kind", rows), g("side", rows), g("id", rows), g("ts", rows), key, g("value", rows),
                             g("channel", rows))
            lines = rows
        is_t = blk.kind == 0
        tids = blk.id[is_t]
        if tids.dtype != np.int64:  # the reader refuses ids beyond int64 for the engines
            raise ValueError("ids must fit in int64")
        # sorted here, in parallel (a timsort: ids come nearly in order): the driver's check is O(n)
        self.boxes[self.me][slot].put("", ids=np.sort(tids, kind="stable"))
        digest = key_digest(blk.key[is_t])
        if self.q.lateness is None:
            cm = np.full(self.q.channels, NEG, np.int64)
            w = ~is_t
            if w.any():
                np.maximum.at(cm, blk.channel[w], blk.ts[w])
            summary: Any = cm.tolist()
        else:
            summary = int(blk.ts[is_t].max()) if is_t.any() else NEG
        info.update(lines=lines, events=len(blk), tuples=len(tids), end=blk.end, summary=summary)
        if counts:
            info["counts"] = self.router.counts(digest)
        self.decoded[idx] = _Decoded(blk, digest)
        self.stats["pieces_decoded"] += 1
        self._reply(("decoded", self.me, idx, info))

    def _route(self, idx: int, slot: int, carry: Any, groups: Groups | None, first: int) -> None:
        """W at every arrival from the carry, late ids, and the on-time tuples into outbox[me][slot]."""
        if groups is not None:
            self.router.groups = groups
        d = self.decoded.pop(idx)
        blk = d.blk
        is_t = blk.kind == 0
        if self.q.lateness is None:
            cm, w = carry
            wb, _, _ = watermarks_before(~is_t, blk.ts, blk.channel, np.array(cm, np.int64), w)
        else:
            wb, _ = lateness_before(blk.ts, carry, self.q.lateness) if len(blk.ts) else (blk.ts, carry)
        late = is_t & (blk.ts < wb)
        nlate = int(late.sum())
        if nlate:
            self.stats["late"] += nlate
            if self.sorter is not None:
                from oij.spec.batch import Results

                self.sorter.add(Results(late=blk.id[late].tolist()))
        ot_all = np.flatnonzero(is_t & ~late)
        t_ot = np.flatnonzero(~late[is_t])  # the on-time tuples among the piece's tuples (digest order)
        ids, ts, val = blk.id[ot_all], blk.ts[ot_all], blk.value[ot_all]
        side = blk.side[ot_all]
        keys = blk.key[ot_all]
        table: list[Any] | None = None
        if keys.dtype == object:
            codes: dict[tuple[type, Any], int] = {}
            table = []
            kc = np.empty(len(keys), np.int64)
            for i, k in enumerate(keys.tolist()):
                c = codes.get((type(k), k))
                if c is None:
                    c = codes[(type(k), k)] = len(table)
                    table.append(k)
                kc[i] = c
            keys = kc
        dests = self.router.destinations(d.digest[t_ot], side == 0, first)
        box = self.boxes[self.me][slot]
        sent = []
        for r, ix in enumerate(dests):
            box.put(f"{r}.", id=ids[ix], ts=ts[ix], key=keys[ix], value=val[ix], side=side[ix])
            sent.append(len(ix))
        self._reply(("routed", self.me, idx, {"sent": sent, "late": nlate, "table": table}))

    def _join(self, t: int, parts: list[tuple[int, int, int, int, list[Any] | None]], last: bool) -> None:
        """Join pieces of round ``t``: the rows for this replica of each piece, in piece order, each settled under
        the W after its piece; ``last``: these end round ``t`` (the reply that frees its slots)."""
        delay = self.spec.get("slow_join", {}).get(self.me)
        if delay:  # tests: a replica that lags behind the driver
            time.sleep(delay)
        me = f"{self.me}."
        for src, slot, w_end, cnt, table in parts:
            box = self.boxes[src][slot]
            g = box.get
            keys: npt.NDArray[Any] = g(me + "key", cnt)
            if table is not None:
                keys = np.array(table, dtype=object)[keys]
            side = g(me + "side", cnt)
            self.store.add(g(me + "id", cnt), keys, g(me + "ts", cnt), g(me + "value", cnt), side == 0, w_end)
            if self.spec.get("check"):
                self.store._check()
            self.stats["received"] += cnt
            self._drain()
        if not last:
            return
        if self.fail_after is not None:
            self.fail_after -= 1
            if self.fail_after < 0:
                raise RuntimeError(f"injected failure in replica {self.me} (test hook)")
        self._reply(("joined", self.me, t))

    def _drain(self) -> None:
        out: BlockOutput = self.store.take()
        for a, b, null in out.pairs:
            self.stats["pairs"] += len(a)
            if self.sorter is not None:
                self.sorter.add_pair_columns(a, b, null)
        for base, count, value, null, counts_are_values in out.aggregate_columns:
            self.stats["rows"] += len(base)
            if self.sorter is not None:
                self.sorter.add_aggregate_columns(base, count, value, null, counts_are_values)
        if out.aggregates:
            self.stats["rows"] += len(out.aggregates)
            if self.sorter is not None:
                from oij.spec.batch import Results

                self.sorter.add(Results(aggregates=out.aggregates))
