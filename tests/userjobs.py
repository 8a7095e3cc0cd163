"""Shared by tests/spark/test_userjob.py and tests/flink/test_userjob.py: the small workload of issue 63's shape
and the check that a user job's output is explained by *some* treatment of the tuples, in its weakest form: every
pair is a pair of the batch join of all tuples (same key, in the window), none twice, and every late id is a
tuple's id."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import orjson
from oij.reference.batchjoin import compute_pair_columns
from oij.spec.match import lower_offset, upper_offset
from oij.spec.model import BASE

from oij.cli import main
from oij.io.userjob import read_workload

PARAMS = ["keys=50", "lateness=500", "delay_max=500", "stragglers=0.03", "straggler_max=1500", "rate=200000"]
"""issue 63's workload parameters (`oij generate -p ...`)."""


def small_workload(directory: Path, n: int = 3000) -> Path:
    """``oij generate -p PARAMS -n n`` into ``directory/w.jsonl``."""
    path = directory / "w.jsonl"
    args = ["generate", *[w for p in PARAMS for w in ("-p", p)], "-n", str(n), "-o", str(path), "--no-progress"]
    assert main(args) == 0
    return path


def batch_pairs(events: Path) -> set[tuple[int, int]]:
    """Every (base id, probe id) of the batch join of all the workload's tuples (arrival order and lateness
    ignored)."""
    q, tuples = read_workload(str(events))

    def cols(side_is_base: bool, field: str) -> npt.NDArray[np.int64]:
        return np.array([getattr(t, field) for t in tuples if (t.side == BASE) == side_is_base], np.int64)

    a, b = compute_pair_columns(cols(True, "id"), cols(True, "key"), cols(True, "ts"), cols(False, "id"),
                                cols(False, "key"), cols(False, "ts"), lower_offset(q), upper_offset(q))
    return set(zip(a.tolist(), b.tolist(), strict=True))


def read_output(lines: list[bytes]) -> tuple[list[tuple[int, int | None]], list[int]]:
    """The pair rows and late ids of result lines."""
    pairs: list[tuple[int, int | None]] = []
    late: list[int] = []
    for raw in lines:
        d = orjson.loads(raw)
        if d["type"] == "pair":
            pairs.append((d["base"], d["probe"]))
        elif d["type"] == "late":
            late.append(d["id"])
        else:
            raise AssertionError(f"unexpected line {raw!r}")
    return pairs, late


def violations(lines: list[bytes], events: Path, batch: set[tuple[int, int]] | None = None) -> list[str]:
    """What no treatment of the tuples explains in the output ``lines``: a pair not in the batch join, a pair
    twice, a late id that is no tuple's, lines out of canonical order.  Empty: the output passes."""
    batch = batch_pairs(events) if batch is None else batch
    _, tuples = read_workload(str(events))
    ids = {t.id for t in tuples}
    pairs, late = read_output(lines)
    bad = [f"not in the batch join: {p}" for p in pairs if p[1] is not None and p not in batch]
    bad += [f"twice: {p}" for p in _repeats(pairs)]
    bad += [f"late id of no tuple: {i}" for i in late if i not in ids]
    if pairs != sorted(pairs, key=lambda p: (p[0], p[1] is not None, p[1] or 0)):
        bad.append("pairs not in canonical order")
    return bad


def _repeats(pairs: list[tuple[int, int | None]]) -> set[tuple[int, int | None]]:
    seen: set[tuple[int, int | None]] = set()
    rep: set[tuple[int, int | None]] = set()
    for p in pairs:
        (rep if p in seen else seen).add(p)
    return rep


def outside_window_pair(events: Path) -> bytes:
    """A pair line no schedule gives: a base and a probe of the same key whose ts differ by far more than the
    window (the negative control)."""
    q, tuples = read_workload(str(events))
    bases = [t for t in tuples if t.side == BASE]
    for a in bases:
        for b in tuples:
            if b.side != BASE and b.key == a.key and not a.ts + q.lower - 5000 <= b.ts <= a.ts + q.upper + 5000:
                return f'{{"type":"pair","base":{a.id},"probe":{b.id}}}\n'.encode()
    raise AssertionError("no pair outside the window in the workload")
