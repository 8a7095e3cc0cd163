"""The block engines (``blocks-kp`` ... ``blocks-scale``, :mod:`oij.parallel.blocks`) against the oracle.

Spawn start method throughout; the module's pool of 4 helper processes (the ``rt`` fixture) serves the
differential tests, failure tests start their own.  After every test no segment of this process is left in
/dev/shm (conftest), and the failure tests check that no helper outlives its runtime.  Each check keeps a
negative control: a broken router, a broken carry and a broken output range are each caught.
"""

from __future__ import annotations

import functools
import io
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oij.parallel.blocks import driver as bdriver
from oij.parallel.blocks import route as broute
from oij.parallel.blocks.driver import BlockOptions, file_source, run
from oij.parallel.registry import EngineOptions, get
from oij.parallel.runtime.pool import EngineFailure, Runtime
from oij.reference.block_oracle import NEG, run_blocks
from oij.reference.oracle import run_events
from oij.spec.model import AGGREGATES, End, Event, Query, StreamTuple

from oij.cli import main
from oij.io.errors import InputError
from oij.io.extsort import range_splitters, write_range
from oij.io.jsonlread import read_jsonl
from oij.io.jsonlwrite import result_lines, write_events
from oij.workloads import generate, resolve, with_overrides, write_workload
from tests.procs import alive
from tests.strategies import workloads

pytestmark = pytest.mark.timeout(180)

PATTERNS = ["kp", "dp", "hp", "key", "scale"]


def _opts(rt: Runtime, replicas: int, **extra: Any) -> EngineOptions:
    return EngineOptions(replicas=replicas, runtime=rt, settings={"check": True, **extra})


def _int64_ids(events: list[Event]) -> bool:
    return all(-(1 << 63) <= e.id < 1 << 63 for e in events if type(e) is StreamTuple)


# ---------------------------------------------------------------- differential (Hypothesis)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(w=workloads(max_events=60, cond=False), pattern=st.sampled_from(PATTERNS), replicas=st.integers(1, 4),
       piece=st.integers(1, 25), solo=st.integers(0, 4), barriers=st.sampled_from(["piece", "round"]))
def test_block_engines_equal_the_oracle(rt: Runtime, w: tuple[Query, list[Event]], pattern: str, replicas: int,
                                        piece: int, solo: int, barriers: str) -> None:
    """Any query without cond, any arrival order, any piece size (so many rounds, late tuples at piece edges),
    rounds for replica 0 alone first (as while the helpers start), either barrier schedule: the block engine's
    results are the oracle's, and every store's _check() holds after every piece."""
    q, events = w
    if not _int64_ids(events):
        return
    got = get(f"blocks-{pattern}")(q, events, _opts(rt, replicas, piece_events=piece, solo_rounds=solo,
                                                    barriers=barriers))
    assert got.results == run_events(events, q)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), preset=st.sampled_from(["teach-skew", "teach-late", "teach-watermarks"]),
       pattern=st.sampled_from(PATTERNS), agg=st.sampled_from([None, *AGGREGATES]),
       replicas=st.integers(2, 4))
def test_generated_workloads_equal_the_oracle(rt: Runtime, seed: int, preset: str, pattern: str, agg: Any,
                                              replicas: int) -> None:
    q, it = generate(preset, 400, seed)
    q = replace(q, aggregate=agg)
    events = list(it)
    got = get(f"blocks-{pattern}")(q, events, _opts(rt, replicas, piece_events=53))
    assert got.results == run_events(events, q)


def test_a_cond_query_runs_on_the_event_engine(rt: Runtime) -> None:
    from oij.spec.model import Comparison

    q = Query(lower=-5, upper=5, cond=(Comparison("x", "<", "x"),))
    events: list[Event] = [StreamTuple("base", 1, 10, 1, fields=(("x", 1.0),)),
                           StreamTuple("probe", 2, 12, 1, fields=(("x", 2.0),)),
                           StreamTuple("probe", 3, 13, 1, fields=(("x", 0.0),)), End()]
    got = get("blocks-kp")(q, events, _opts(rt, 2))
    assert got.results == run_events(events, q)
    assert got.results.pairs == [(1, 2)]
    assert "events" in got.metrics["engine"]


# ---------------------------------------------------------------- routing


@given(keys=st.lists(st.one_of(st.integers(-(1 << 70), 1 << 70), st.text(max_size=4)), min_size=1, max_size=30))
def test_key_digest_is_the_same_for_an_int_key_in_either_column(keys: list[Any]) -> None:
    """An int key hashes alike whether its block's key column is int64 or object (a block with a str key);
    ``1`` and ``"1"`` are different keys."""
    obj = np.empty(len(keys), dtype=object)
    obj[:] = keys
    d = broute.key_digest(obj)
    small = [i for i, k in enumerate(keys) if type(k) is int and -(1 << 63) <= k < 1 << 63]
    if small:
        ints = np.array([keys[i] for i in small], np.int64)
        assert broute.key_digest(ints).tolist() == d[small].tolist()
    again = broute.key_digest(obj)
    assert d.tolist() == again.tolist()
    assert broute.key_digest(np.array([1, "1"], dtype=object)).tolist()[0] != \
        broute.key_digest(np.array([1, "1"], dtype=object)).tolist()[1]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_base_goes_to_one_replica_and_meets_every_probe_of_its_key(pattern: str) -> None:
    rng = np.random.default_rng(7)
    keys = rng.zipf(1.3, 5000).astype(np.int64) % 40
    is_base = rng.random(5000) < 0.5
    r = broute.Router(pattern, 3, theta=1.0)
    d = broute.key_digest(keys)
    if r.needs_calibration:
        r.calibrate(r.counts(d))
    dests = r.destinations(d, is_base, 11)
    where = np.zeros((5000, 3), np.bool_)
    for i, ix in enumerate(dests):
        where[ix, i] = True
    assert (where[is_base].sum(axis=1) == 1).all()
    for k in np.unique(keys):
        probes_at = where[~is_base & (keys == k)]
        for row in where[is_base & (keys == k)]:
            assert probes_at[:, row.argmax()].all()


def test_the_routing_check_catches_a_dp_that_does_not_broadcast(monkeypatch: pytest.MonkeyPatch, rt: Runtime
                                                                 ) -> None:
    """Negative control: DP whose probes go round robin like its bases loses pairs, and the differential check
    sees it."""
    real = broute.Router.destinations

    def broken(self: broute.Router, d: Any, is_base: Any, first: int) -> list[Any]:
        if self.pattern != "dp":
            return real(self, d, is_base, first)
        pos = np.arange(first, first + len(d)) % self.n
        return [np.flatnonzero(pos == r) for r in range(self.n)]

    monkeypatch.setattr(broute.Router, "destinations", broken)
    q = Query(lower=-10, upper=10)
    events: list[Event] = [*(StreamTuple("base" if i % 2 else "probe", i, i, 1) for i in range(1, 40)), End()]
    got = bdriver.run(bdriver.events_source(q, events), BlockOptions("dp", 2, output=True), rt=None)
    assert got["tuples"] == 39
    res = get("blocks-dp")(q, events, EngineOptions(replicas=2))
    assert res.results != run_events(events, q)


# ---------------------------------------------------------------- files: parallel reading


FILE_EVENTS = 2000
"""Events per file: oij-jsonl in 4,096-byte ranges is 43 pieces per file (14 rounds of three replicas, a line cut
at nearly every edge), with late tuples in every file (307 in two; the watermark file's one at seed 7) and
aggregates; 6,000 events (128 pieces) cost three times as much and crossed the same kinds of edges."""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("blocks")
    out: dict[str, Path] = {}
    for name, over in (("lateness", {"lateness": 50, "keys": 30, "key_dist": "zipf"}),
                       ("watermarks", {"watermark": "count", "watermark_every": 16, "base_channels": 2,
                                       "probe_channels": 1, "keys": 12}),
                       ("aggregate", {"aggregate": "avg", "lateness": 20, "keys": 9})):
        p = with_overrides(resolve("teach-late"), over)
        for ext in ("jsonl", "parquet"):
            f = d / f"{name}.{ext}"
            write_workload(str(f), p, FILE_EVENTS, 7)
            out[f"{name}.{ext}"] = f
    for f in out.values():  # what the tests below claim of these files
        assert '{"type":"late"' in _expected(f), f.name
    assert '{"type":"aggregate"' in _expected(out["aggregate.jsonl"])
    return out


@functools.cache
def _expected(path: Path) -> str:
    from oij.io import open_events

    q, events, f = open_events(str(path))
    try:
        return "".join(result_lines(run_blocks(events, q)))
    finally:
        if f is not None:
            f.close()


def _blocks_text(path: Path, pattern: str, replicas: int, rt: Runtime | None, **kw: Any) -> str:
    src = file_source(str(path), piece_bytes=kw.pop("piece_bytes", 4096))
    if hasattr(src, "plan") and str(path).endswith(".parquet"):
        src = bdriver.FileSource(__import__("oij.io.pieces", fromlist=["plan_pieces"]).plan_pieces(
            str(path), piece_rows=kw.pop("piece_rows", 700)))
    direct = kw.pop("direct", False)
    buf = io.StringIO()
    if direct:  # the first range into the stream by replica 0 itself, the other parts copied after it
        run(src, BlockOptions(pattern, replicas, check=True, **kw), rt=rt, out=buf)
    else:
        run(src, BlockOptions(pattern, replicas, check=True, **kw), lambda br: br.write_to(buf), rt=rt)
    return buf.getvalue()


@pytest.mark.parametrize("pattern", PATTERNS)
def test_files_read_in_pieces_give_the_oracles_bytes(files: dict[str, Path], rt: Runtime, pattern: str) -> None:
    """oij-jsonl in byte ranges and Parquet in row slices, decoded by the workers, W from exchanged carries:
    the canonical bytes of the sequential block path, for every workload and pattern."""
    assert len(files) == 6
    for _name, path in sorted(files.items()):
        assert _blocks_text(path, pattern, 3, rt) == _expected(path), path.name


@pytest.mark.parametrize("replicas", [1, 3])
def test_the_first_range_written_straight_into_the_output_gives_the_same_bytes(
        files: dict[str, Path], rt: Runtime, replicas: int) -> None:
    """``out=``: replica 0 writes the first key range of the first part with rows (pairs; the aggregate rows when a
    query has no pairs; late ids after them) into the output itself, the other part files follow it: the bytes
    are the oracle's for every file, with late tuples and with aggregates, on one replica and on three."""
    for path in files.values():
        assert _blocks_text(path, "kp", replicas, rt, direct=True) == _expected(path), path.name


def test_the_carry_check_catches_a_driver_that_forgets_the_carry(monkeypatch: pytest.MonkeyPatch,
                                                                 files: dict[str, Path], rt: Runtime) -> None:
    """Negative control: W computed from each piece alone (no carry from the earlier pieces) marks other tuples
    late, and the bytes differ."""
    monkeypatch.setattr(bdriver._Drive, "_carry", lambda self: (([NEG] * self.q.channels, NEG)
                                                                if self.q.lateness is None else NEG))
    path = files["lateness.jsonl"]
    assert _blocks_text(path, "kp", 2, rt) != _expected(path)


@pytest.mark.parametrize("barriers", ["piece", "round"])
def test_a_lagging_replica_keeps_its_slot_and_the_slot_check_catches_a_driver_that_does_not_wait(
        monkeypatch: pytest.MonkeyPatch, rt: Runtime, barriers: str) -> None:
    """Replica 1 sleeps before each join, so the driver runs ahead of it: the result is still the oracle's (a
    piece is routed into its outbox slot only once every replica has joined the round that used the slot
    last).  Negative control: a driver that takes every slot for free overwrites rows replica 1 has not read (a
    wrong result, or a replica that fails on the rows it reads).  Round barriers wait for a round's decode
    reports, which a replica sends only after its earlier joins, so there the slot check matters only in
    rounds that give some replicas no piece: the first rounds here are replica 0's alone."""
    q, it = generate("teach-skew", 3000, 5)
    events = list(it)
    want = run_events(events, q)
    opts = _opts(rt, 3, piece_events=40, barriers=barriers, slow_join={1: 0.01}, check=False, solo_rounds=12)
    assert get("blocks-kp")(q, events, opts).results == want
    monkeypatch.setattr(bdriver._Drive, "_slot_free", lambda self, t: True)
    with Runtime(2, "spawn", first=1) as own:  # the broken run may break its runtime: not the module's
        try:
            broken = get("blocks-kp")(q, events, replace(opts, runtime=own)).results
        except EngineFailure:
            return
    assert broken != want


def test_the_range_check_catches_overlapping_output_ranges(monkeypatch: pytest.MonkeyPatch,
                                                          files: dict[str, Path], rt: Runtime) -> None:
    """Negative control: key ranges that overlap write rows twice, and the bytes differ."""
    real = range_splitters
    monkeypatch.setattr(bdriver, "range_splitters", lambda runs, n, samples=1024: [1 << 62] * (n - 1))
    path = files["lateness.jsonl"]
    text = _blocks_text(path, "kp", 2, rt)
    assert text == _expected(path)  # one range holds every row: still right
    monkeypatch.setattr(bdriver, "range_splitters", real)
    monkeypatch.setattr("oij.parallel.blocks.job.write_range", _overlapping)  # replica 0 (this process) writes all
    assert _blocks_text(path, "kp", 2, None) != _expected(path)


def _overlapping(name: str, runs: Any, lo: Any, hi: Any, out: Any, block: int = 1 << 16) -> int:
    return write_range(name, runs, None, None, out, block)


# ---------------------------------------------------------------- input errors: the sequential reader's


def _jsonl(tmp: Path, lines: list[str]) -> Path:
    p = tmp / "in.jsonl"
    p.write_text("".join(x + "\n" for x in lines))
    return p


def _sequential_error(path: Path) -> str:
    with open(path, "rb") as f:
        _q, events = read_jsonl(f, str(path), int64_ids=True)
        with pytest.raises(InputError) as e:
            list(events)
    return str(e.value)


def _tuples(n: int, start: int = 1) -> list[str]:
    return [f'{{"type":"tuple","side":"{"base" if i % 2 else "probe"}","id":{i},"ts":{i},"key":{i % 3}}}'
            for i in range(start, start + n)]


QUERY = '{"type":"query","lower":-5,"upper":5,"lateness":3}'


@pytest.mark.parametrize("case", ["dup-across", "dup-within", "bad-field", "after-end", "no-end", "late-bad"])
def test_an_input_error_is_the_sequential_readers(tmp_path: Path, case: str) -> None:
    """Whatever piece holds it, the error names the file, line and field the sequential reader names (the id
    check across pieces is the driver's)."""
    body = _tuples(300)
    if case == "dup-across":
        body[250] = body[250].replace('"id":251', '"id":3')
    elif case == "dup-within":
        body[251] = body[251].replace('"id":252', '"id":251')
    elif case == "bad-field":
        body[200] = body[200].replace('"ts":201', '"ts":"x"')
    elif case == "late-bad":
        body[298] = body[298].replace('"side":"base"', '"side":"left"')
    lines = [QUERY, *body]
    if case == "after-end":
        lines = [QUERY, *body[:150], '{"type":"end"}', *body[150:]]
    elif case != "no-end":
        lines.append('{"type":"end"}')
    path = _jsonl(tmp_path, lines)
    want = _sequential_error(path)
    with pytest.raises(InputError) as e:
        _blocks_text(path, "kp", 1, None, piece_bytes=700)
    assert str(e.value) == want


def test_a_piece_with_a_bad_line_is_reread_not_trusted(tmp_path: Path) -> None:
    """Negative control of the re-read: if the driver trusted a worker's local error, the line number would be
    the piece's, not the file's -- so the two differ, and the test above could fail."""
    body = _tuples(300)
    body[200] = body[200].replace('"ts":201', '"ts":"x"')
    path = _jsonl(tmp_path, [QUERY, *body, '{"type":"end"}'])
    from oij.io.pieces import decode_piece, plan_pieces

    plan = plan_pieces(str(path), 700)
    local = []
    for p in plan.pieces:
        try:
            decode_piece(p, plan.query)
        except InputError as e:
            local.append(str(e))
    assert local and local[0] != _sequential_error(path)


# ---------------------------------------------------------------- failures and leaks


def test_a_failing_worker_fails_the_run_fast_and_leaves_nothing() -> None:
    q = Query(lower=-3, upper=3)
    events: list[Event] = [StreamTuple("base" if i % 2 else "probe", i, i, i % 5) for i in range(1, 3000)]
    events.append(End())
    with bdriver.helpers(3) as rt:
        assert rt is not None
        pids = rt.pids()
        with pytest.raises(EngineFailure, match="injected failure"):
            bdriver.run(bdriver.events_source(q, events, 100), BlockOptions("kp", 3, fail_after={2: 1}), rt=rt)
    assert not any(alive(p) for p in pids)


def test_a_killed_worker_fails_the_run(tmp_path: Path) -> None:
    q = Query(lower=-3, upper=3)
    events: list[Event] = [StreamTuple("base" if i % 2 else "probe", i, i, i % 5) for i in range(1, 30000)]
    events.append(End())
    with bdriver.helpers(2) as rt:
        assert rt is not None
        pid = rt.pids()[0]
        import signal

        os.kill(pid, signal.SIGKILL)
        with pytest.raises(EngineFailure, match="replica 1 killed by SIGKILL"):
            bdriver.run(bdriver.events_source(q, events, 100), BlockOptions("dp", 2), rt=rt)
    assert not alive(pid)


# ---------------------------------------------------------------- the command


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_oij_run_writes_the_bytes_of_oij_join(tmp_path: Path, files: dict[str, Path], fmt: str) -> None:
    src = files[f"lateness.{fmt}"]
    want = tmp_path / "join.out"
    got = tmp_path / "run.out"
    cmd = [sys.executable, "-m", "oij.cli"]
    assert main(["join", str(src), "-o", str(want), "--no-progress"]) == 0  # in this process: the reference bytes
    r = subprocess.run([*cmd, "run", "--pattern", "hp", "--replicas", "2", str(src), "-o", str(got)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "blocks" in r.stderr
    assert got.read_bytes() == want.read_bytes()


def test_oij_run_reads_stdin_with_the_block_engine(tmp_path: Path) -> None:
    q = Query(lower=-5, upper=0, lateness=2)
    evs: list[Event] = [StreamTuple("base" if i % 3 else "probe", i, i, i % 4) for i in range(1, 500)]
    buf = io.StringIO()
    write_events(q, [*evs, End()], buf)
    cmd = [sys.executable, "-m", "oij.cli"]
    a = subprocess.run([*cmd, "run", "--pattern", "kp", "--engine", "blocks", "-"], input=buf.getvalue(),
                       capture_output=True, text=True)
    b = subprocess.run([*cmd, "join", "-"], input=buf.getvalue(), capture_output=True, text=True)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout and a.stdout

