"""The oracle as a command of the restart protocol, correct or with one recovery bug (``oij conform --restarts``).

``python tests/impls/restart_bugs.py MODE`` reads one case on stdin event by event, feeds
:class:`oij.reference.oracle.Oracle`, prints each event's rows as they come, and checkpoints after every event:
it writes the operator's snapshot to ``$OIJ_STATE_DIR/snap-K`` atomically (with ``oij join --state``'s
:func:`~oij.pipelines.restartable.save`), then prints ``{"type":"checkpoint","events":K}``.  On a restart
(``OIJ_CHECKPOINT=K > 0``) it restores ``snap-K``.
Modes, each the negative control of one way recovery goes wrong:

* ``correct``: rows, then the snapshot, then the checkpoint line: exactly once.
* ``checkpoint-before-emit``: the checkpoint line before the event's rows: a crash between them loses the rows.
* ``reemit-after-restore``: keeps the rows it printed in its snapshot and prints them again after a restore:
  duplicates (at-least-once).
* ``no-restore``: ignores the saved state and starts empty: everything the lost state would have produced
  is lost.
* ``forget-matched``: restores everything but a left join's set of matched bases (an implementation that
  checkpoints its stored tuples and not the flags beside them): a base that matched before the crash gets an
  ``(a, null)`` row at finality as well.
* ``min-watermark``: saves one watermark, W (the minimum over the channels), and restores every channel to it:
  a channel that ran ahead is pulled back, so W moves later than it should and a tuple late by the channel's
  real watermark is joined instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, so that tests.impls imports

from oij.reference.checkpoint import restore, snapshot
from oij.reference.oracle import Oracle

from oij.pipelines.restartable import save
from tests.impls.oracle_cmd import event_of, read_case, value_text

MODES = ("correct", "checkpoint-before-emit", "reemit-after-restore", "no-restore", "forget-matched", "min-watermark")


def _lines(o: Oracle) -> list[str]:
    out = [json.dumps({"type": "pair", "base": b, "probe": p}) for b, p in o.pairs]
    out += [f'{{"type": "aggregate", "base": {b}, "count": {n}, "value": {value_text(v)}}}'
            for b, n, v in o.aggregates]
    out += [json.dumps({"type": "late", "id": i}) for i in o.late]
    o.pairs.clear()
    o.aggregates.clear()
    o.late.clear()
    return out


def main(mode: str) -> int:
    state_dir = os.environ["OIJ_STATE_DIR"]
    k = int(os.environ.get("OIJ_CHECKPOINT", "0"))
    q, _ = read_case([sys.stdin.readline()])
    printed: list[str] = []  # reemit-after-restore: every row printed so far, kept in the snapshot
    if k > 0 and mode != "no-restore":
        with open(os.path.join(state_dir, f"snap-{k}"), "rb") as f:
            blob = f.read()
        n = int.from_bytes(blob[:8], "big")
        o = restore(blob[8:8 + n])
        printed = json.loads(blob[8 + n:]) if mode == "reemit-after-restore" else []
        if mode == "forget-matched":
            o.matched = set()
        elif mode == "min-watermark":
            o.channel_max = [o.w] * len(o.channel_max)
        for line in printed:
            print(line)
    else:
        o = Oracle(q)
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        e = event_of(json.loads(line))
        o.on_event(e)
        rows = _lines(o)
        if e.__class__.__name__ == "End":
            out.write("".join(r + "\n" for r in rows))
            out.flush()
            return 0
        k += 1
        snap = snapshot(o)
        if mode == "reemit-after-restore":
            printed += rows
        blob = len(snap).to_bytes(8, "big") + snap + json.dumps(printed).encode()
        if mode == "checkpoint-before-emit":
            save(state_dir, k, blob)
            out.write(f'{{"type":"checkpoint","events":{k}}}\n')
            out.flush()
            out.write("".join(r + "\n" for r in rows))
        else:
            out.write("".join(r + "\n" for r in rows))
            out.flush()
            save(state_dir, k, blob)
            out.write(f'{{"type":"checkpoint","events":{k}}}\n')
        out.flush()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in MODES:
        sys.exit(f"usage: restart_bugs.py {{{','.join(MODES)}}}")
    sys.exit(main(sys.argv[1]))
