"""Stress test of the SWMR time-travel index (:mod:`oij.parallel.shared.swmr`): no torn reads under heavy writing.

One writer process appends thousands of small runs into a deliberately small
arena with few directory slots, merging, evicting and reusing memory all the
time, while several reader processes repeatedly take snapshots and verify
every entry they can reach: each field is a known function of the entry's id,
runs are sorted, and no entry appears twice in one snapshot.  The negative
control disables the readers' protection (reclamation ignores the quiescent
states) and must be caught by the same checks.  The first torn read a reader sees
ends the writing (it fails the safe run and is all the negative control needs).
Spawn start method; the test creates and unlinks the segment itself and checks
nothing is left.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from typing import Any

import numpy as np
import pytest
from oij.parallel.shared.swmr import Index, IndexSpec

pytestmark = pytest.mark.timeout(150)

K = 24  # entries per appended run
KEYS = 5
WINDOW = 600  # live ids


def _value(ids: Any) -> Any:
    return (ids * 7 % 1000) / 4.0


def writer(spec: IndexSpec, rounds: int, unsafe: bool, out: Any, caught: Any) -> None:
    ix = Index.attach(spec, True, -1)
    ix.unsafe = unsafe
    reused = 0
    seen: set[int] = set()
    try:
        for r in range(rounds):
            if caught.is_set():  # a reader saw a torn read: the run has shown what it can
                break
            ids = np.arange(r * K, (r + 1) * K, dtype=np.int64)
            ix.append({"ts": ids, "key": ids % KEYS, "value": _value(ids), "id": ids, "born": 3 * ids},
                      lambda: time.sleep(0))
            ix.compact(max(0, (r + 1) * K - WINDOW), lambda: time.sleep(0))
            for off, _n in ix.runs:
                reused += off in seen
                seen.add(off)
        out.put(("writer", ix.merges, ix.evicted, reused, ix.waits))
    finally:
        ix.close()


def reader(spec: IndexSpec, me: int, stop: Any, out: Any, caught: Any) -> None:
    ix = Index.attach(spec, False, me)
    rounds = entries = bad = 0
    try:
        while not stop.is_set():
            try:
                got: list[Any] = []
                for off, n in ix.snapshot():
                    c = ix.columns(off, n)
                    ids = c["id"].copy()
                    ok = (n >= 0 and np.all(np.diff(c["sts"]) >= 0) and np.all(np.diff(c["comp"]) >= 0)
                          and np.array_equal(c["ts"], ids) and np.array_equal(c["comp"] // (n + 1), ids % KEYS)
                          and np.array_equal(c["value"], _value(ids)) and np.array_equal(c["born"], 3 * ids)
                          and np.array_equal(np.sort(c["ts"]), c["sts"]))
                    bad += not ok
                    got.append(ids)
                    entries += n
                if got:
                    allids = np.concatenate(got)
                    bad += len(np.unique(allids)) != len(allids)
            except (ValueError, IndexError, MemoryError):
                bad += 1
            if bad:
                caught.set()
            ix.quiesce()
            rounds += 1
        out.put(("reader", me, rounds, entries, bad))
    finally:
        ix.offline()
        ix.close()


def _run(unsafe: bool, rounds: int, readers: int = 3) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    spec = IndexSpec(f"oij-{os.getpid()}-swmr-{int(unsafe)}", readers, arena=12 * (1 + 6 * WINDOW), runcap=8,
                     dslots=2)
    ix = Index.create(spec, readers)
    out = ctx.Queue()
    stop = ctx.Event()
    caught = ctx.Event()
    procs = [ctx.Process(target=reader, args=(spec, r, stop, out, caught)) for r in range(readers)]
    try:
        for p in procs:
            p.start()
        time.sleep(0.3)
        w = ctx.Process(target=writer, args=(spec, rounds, unsafe, out, caught))
        w.start()
        w.join(120)
        stop.set()
        for p in procs:
            p.join(10)
        msgs = [out.get(timeout=10) for _ in range(readers + 1)]
    finally:
        for p in [*procs]:
            if p.is_alive():
                p.kill()
        ix.close()
        ix.unlink()
    res: dict[str, Any] = {"readers": []}
    for m in msgs:
        if m[0] == "writer":
            res["merges"], res["evicted"], res["reused"], res["waits"] = m[1:]
        else:
            res["readers"].append(m[2:])
    return res


def test_no_torn_reads_under_heavy_writing() -> None:
    res = _run(False, 3000)
    assert res["merges"] > 200 and res["evicted"] > 10000 and res["reused"] > 100, res
    for rounds, entries, bad in res["readers"]:
        assert bad == 0, res
        assert rounds > 50 and entries > 10000, res
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"oij-{os.getpid()}-swmr")]


def test_unprotected_reclamation_is_caught() -> None:
    caught = 0
    for _ in range(3):
        res = _run(True, 3000)
        caught += sum(bad for _, _, bad in res["readers"])
        if caught:
            break
    assert caught, "reusing memory under the readers' feet went unnoticed: the stress test would prove nothing"
