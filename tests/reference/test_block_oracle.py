"""The block path (oij.reference.block_oracle) against the event-by-event oracle (oij.reference.oracle), and
``oij join`` on it.

* Property: on Hypothesis workloads with every feature the block path supports (both the project's strategies
  and the conformance kit's cases), fed in tiny blocks (1-7 events, so every boundary is crossed), the output
  emitted after every block is the oracle's after the same prefix, the invariants hold after every block,
  and the final output is the oracle's.
* Negative controls: a block path with an off-by-one late rule, and one that drops the watermark carry
  between blocks, are caught by the same property.
* As a command: ``oij join`` (the block path by default) under ``oij vectors verify`` on a subset of the
  vectors and under ``oij conform``; byte-identical to the event path (``OIJ_JOIN_PATH=event``) on generated
  workloads, on input errors (same message, exit 2, a file output left as it was, the same prefix on stdout),
  and the block path is the one taken when it applies.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from oij.reference import block_oracle as blocks_mod
from oij.reference.block_oracle import BlockOracle, KeyCodes, event_columns, run_blocks, supports, window_pairs
from oij.reference.oracle import Oracle, run_events
from oij.spec.batch import Results
from oij.spec.model import AGGREGATES, AggregateKind, End, Event, Query, StreamTuple, Watermark

from oij.cli import main
from oij.io.jsonlwrite import write_events
from oij.pipelines import join as join_mod
from oij.testing import Case, cases
from tests.budget import examples
from tests.io.test_nothing_lost import mutated
from tests.strategies import workloads

pytestmark = pytest.mark.timeout(300)

OIJ = [sys.executable, "-m", "oij.cli"]
SETTINGS = settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))

Make = Callable[[Query, int], BlockOracle]


def _merge(into: Results, got: Results) -> None:
    into.pairs += got.pairs
    into.aggregates += got.aggregates
    into.late += got.late


def check_against_oracle(q: Query, events: Sequence[Event], block: int, make: Make = BlockOracle,
                         loop_watermarks: bool = False, compact: bool = False, rank: bool = False) -> None:
    """Feed ``events`` to the oracle and, ``block`` events at a time, to the block path; after every block the
    output so far must be the same (canonical order), and the block path's invariants must hold.  ``rank``:
    window runs through the sorted ranks of step 5 (not the timestamps themselves)."""
    limit = blocks_mod.DIRECT_LIMIT
    blocks_mod.DIRECT_LIMIT = 0 if rank else limit
    try:
        _check_against_oracle(q, events, block, make, loop_watermarks, compact)
    finally:
        blocks_mod.DIRECT_LIMIT = limit


def _check_against_oracle(q: Query, events: Sequence[Event], block: int, make: Make, loop_watermarks: bool,
                          compact: bool) -> None:
    o = Oracle(q)
    b = make(q, block)
    if loop_watermarks:
        b.wm_matrix_cells = 0  # the one-watermark loop of step 1 instead of the matrix
    if compact:
        b.compact_min = 0  # renumber the key codes whenever the dictionary outgrows the state
    got = Results()
    body = [e for e in events if type(e) is not End]
    for i in range(0, len(body), block):
        chunk = body[i: i + block]
        for e in chunk:
            o.on_event(e)
        b.feed(*event_columns(chunk))
        b._check()
        _merge(got, b.take().results())
        assert got.canonical() == o.results(), f"after {i + len(chunk)} events"
    if events and type(events[-1]) is End:
        o.on_end()
        b.end()
        b._check()
        _merge(got, b.take().results())
        assert got.canonical() == o.results(), "at the end"


# ---------------------------------------------------------------------- properties

@settings(SETTINGS, max_examples=examples(200, 400))
@given(workloads(cond=False, max_events=50), st.integers(1, 7), st.booleans(), st.booleans(), st.booleans())
def test_every_block_prefix_equals_the_oracle(w: tuple[Query, list[Event]], block: int, loop: bool,
                                              compact: bool, rank: bool) -> None:
    q, events = w
    check_against_oracle(q, events, block, loop_watermarks=loop, compact=compact, rank=rank)


@settings(SETTINGS, max_examples=examples(200, 400))
@given(cases(features=["left", "aggregates", "channels", "exclusive", "watermarks", "lateness", "late-report",
                       "regressions", "mixed-keys", "extreme-ts", "negative-ts"], max_events=24),
       st.integers(1, 7), st.booleans())
def test_conformance_cases_equal_the_oracle(case: Case, block: int, rank: bool) -> None:
    check_against_oracle(case.query, case.events, block, rank=rank)
    assert run_blocks(case.events, case.query, block) == run_events(case.events, case.query)


def test_one_big_block_and_wide_ids_and_keys() -> None:
    """Ids and int keys beyond 64 bits (object columns), int and str keys that print alike, one block and
    many: the oracle's result."""
    big = 1 << 70
    q = Query(lower=-2, upper=1, join="left")
    events: list[Event] = []
    rng = random.Random(5)
    keys: list[int | str] = [1, "1", big, -big, "a"]
    for i in range(300):
        events.append(StreamTuple(rng.choice(["base", "probe"]), big + i if i % 3 else i,
                                  i // 2 + rng.randint(-6, 4), rng.choice(keys)))
        if i % 17 == 0:
            events.append(Watermark(i // 2 - 3))
    events.append(End())
    expected = run_events(events, q)
    assert expected.pairs and any(p[1] is None for p in expected.pairs) and expected.late
    for block in (1, 7, 64, 10_000):
        assert run_blocks(events, q, block) == expected
    assert event_columns(events)[2].dtype == object


def test_the_watermark_loop_and_aggregates_of_every_kind() -> None:
    """Six channels, watermarks that regress, values whose float sums are not exact: every aggregate, with W
    from the channels x watermarks matrix and from the one-watermark loop (step 1), in blocks of 13."""
    rng = random.Random(7)
    kinds: list[AggregateKind] = list(AGGREGATES)
    for agg in kinds:
        q = Query(lower=-5, upper=3, upper_inclusive=False, aggregate=agg, channels=6)
        events: list[Event] = []
        for i in range(600):
            if rng.random() < 0.2:
                events.append(Watermark(i - rng.randint(0, 30), rng.randrange(6)))
            else:
                events.append(StreamTuple(rng.choice(["base", "probe"]), i, i + rng.randint(-120, 0), rng.randrange(4),
                                          rng.choice([0.1, -0.0, 1e16, 1.0, -1e16, 2.5])))
        events.append(End())
        expected = run_events(events, q)
        assert expected.late and expected.aggregates
        for cells in (0, 1 << 22):
            o = BlockOracle(q, 13)
            o.wm_matrix_cells = cells
            o.feed(*event_columns(events))
            o._check()
            o.end()
            assert o.take().results() == expected, (agg, cells)


def test_state_stays_bounded_by_the_live_window() -> None:
    """Purged per block: 200,000 tuples over 5,000 keys that come and go leave a state and a key dictionary of
    the live window's size, not the input's."""
    q = Query(lower=-10, upper=0, lateness=5, aggregate="sum")
    n = 200_000
    ts = np.arange(n, dtype=np.int64)
    kind = np.zeros(n, np.int8)
    side = (np.arange(n) % 2).astype(np.int8)
    key = (np.arange(n) // 40 % 5_000).astype(np.int64)
    o = BlockOracle(q, 4096)
    o.compact_min = 64
    peak = 0
    for i in range(0, n, 10_000):
        o.feed(kind[i:i + 10_000], side[i:i + 10_000], ts[i:i + 10_000], ts[i:i + 10_000], key[i:i + 10_000],
               np.ones(10_000), np.zeros(10_000, np.int64))
        peak = max(peak, o.stored())
        assert o.store.keys.next <= max(64, 2 * o.stored())
    o._check()
    o.end()
    rows = o.take().aggregate_rows()
    assert len(rows) == n // 2 and peak < 5_000


def test_supports_and_key_codes() -> None:
    from oij.spec.model import Comparison

    q = Query(lower=0, upper=1, cond=(Comparison("x", "<", "y"),))
    assert not supports(q) and supports(Query(lower=0, upper=1))
    with pytest.raises(ValueError, match="cond"):
        BlockOracle(q)
    k = KeyCodes()
    codes = k.encode(np.array([1, "1", 1, "a", 1 << 70], dtype=object))
    assert codes.tolist() == [0, 1, 0, 2, 3]
    assert k.encode(np.array([1, 5], np.int64)).tolist() == [0, 4]
    remap = k.compact(np.array([1, 4], np.int64))
    assert remap.tolist() == [-1, 0, -1, -1, 1] and k.codes == {"1": 0, 5: 1} and k.next == 2
    ia, ib = window_pairs(np.array([0, 0, 1]), np.array([10, 20, 10]), np.array([0, 1, 0]), np.array([9, 11, 21]),
                          -1, 1)
    assert sorted(zip(ia.tolist(), ib.tolist(), strict=True)) == [(0, 0), (1, 2), (2, 1)]


def _brute_pairs(a_kc: list[int], a_ts: list[int], b_kc: list[int], b_ts: list[int], lo: int,
                 hi: int) -> list[tuple[int, int]]:
    return sorted((i, j) for i in range(len(a_ts)) for j in range(len(b_ts))
                  if a_kc[i] == b_kc[j] and a_ts[i] + lo <= b_ts[j] <= a_ts[i] + hi)


PAIR_SIDES = st.lists(st.tuples(st.integers(0, 3), st.integers(-20, 20)), max_size=40)


@settings(SETTINGS, max_examples=300)
@given(PAIR_SIDES, PAIR_SIDES, st.integers(-6, 3), st.integers(0, 6), st.sampled_from([0, (1 << 16) - 4]),
       st.sampled_from([1, 1 << 30]))
def test_window_pairs_are_every_pair_whatever_the_order_of_the_queries(
        a: list[tuple[int, int]], b: list[tuple[int, int]], lo: int, width: int, code0: int, sorted_from: int) -> None:
    """Step 5 against its definition, with the query tuples sorted first (``SORTED_QUERIES`` 1) or taken as they
    come, and codes below and across ``RADIX_CODES`` (the radix order, or the sort of the composite)."""
    a_kc, a_ts = [k + code0 for k, _ in a], [t for _, t in a]
    b_kc, b_ts = [k + code0 for k, _ in b], [t for _, t in b]
    ak, at, bk, bt = (np.array(x, np.int64) for x in (a_kc, a_ts, b_kc, b_ts))
    old = blocks_mod.SORTED_QUERIES
    blocks_mod.SORTED_QUERIES = sorted_from
    try:
        ia, ib = window_pairs(ak, at, bk, bt, lo, lo + width)
    finally:
        blocks_mod.SORTED_QUERIES = old
    assert sorted(zip(ia.tolist(), ib.tolist(), strict=True)) == _brute_pairs(a_kc, a_ts, b_kc, b_ts, lo, lo + width)


def test_key_ts_order_sorts_by_key_then_ts_and_a_wrong_order_loses_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The radix order sorts by (code, ts), ties in arrival order, and declines codes past ``RADIX_CODES``.
    Negative control: an order by ts alone (the key pass forgotten) makes ``window_pairs`` miss pairs."""
    rng = np.random.default_rng(7)
    kc = rng.integers(0, 50, 5000).astype(np.int64)
    ts = (np.arange(5000) + rng.integers(-30, 30, 5000)).astype(np.int64)
    o = blocks_mod.key_ts_order(kc, ts)
    assert o is not None
    got = list(zip(kc[o].tolist(), ts[o].tolist(), o.tolist(), strict=True))
    assert got == sorted(zip(kc.tolist(), ts.tolist(), range(5000), strict=True))
    assert blocks_mod.key_ts_order(kc + (1 << 16), ts) is None
    want = _brute_pairs(kc[:300].tolist(), ts[:300].tolist(), kc[300:900].tolist(), ts[300:900].tolist(), -40, 0)
    ia, ib = window_pairs(kc[:300], ts[:300], kc[300:900], ts[300:900], -40, 0)
    assert sorted(zip(ia.tolist(), ib.tolist(), strict=True)) == want
    monkeypatch.setattr(blocks_mod, "key_ts_order", lambda k, t: np.argsort(t, kind="stable"))
    ia, ib = window_pairs(kc[:300], ts[:300], kc[300:900], ts[300:900], -40, 0)
    assert sorted(zip(ia.tolist(), ib.tolist(), strict=True)) != want


@settings(SETTINGS, max_examples=200)
@given(st.lists(st.one_of(st.lists(st.integers(0, 40), min_size=1, max_size=30),
                          st.lists(st.one_of(st.integers(-3, 40), st.sampled_from(["a", "7", "k"])), min_size=1,
                                   max_size=30),
                          st.lists(st.integers(-5, 3), min_size=1, max_size=5),
                          st.lists(st.integers(0, 40), min_size=0, max_size=4).map(lambda x: ("live", x))),
                max_size=12))
def test_key_codes_keep_one_code_per_key_through_the_table_and_compaction(steps: list[Any]) -> None:
    """Blocks of small int keys (the table), mixed int/str keys (the dictionary), negative ints (the sort), and
    compactions in between: every key keeps one code while it lives, and ``_check`` holds after every step."""
    k = KeyCodes()
    seen: dict[object, int] = {}
    for step in steps:
        if isinstance(step, tuple):
            live = np.unique(np.array([seen[x] for x in step[1] if x in seen] or [], np.int64))
            remap = k.compact(live).tolist()
            seen = {x: remap[c] for x, c in seen.items() if remap[c] >= 0}
        else:
            arr = (np.array(step, np.int64) if all(type(x) is int for x in step)
                   else np.array(step, dtype=object))
            codes = k.encode(arr).tolist()
            for x, c in zip(step, codes, strict=True):
                assert seen.setdefault(x, c) == c, (x, seen[x], c)
        k._check()
    assert len(set(seen.values())) == len(seen)


def test_a_table_left_unmapped_by_compaction_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control for the table's invariant: a compaction that renumbers the dictionary but not the table
    fails ``_check`` (and would code a key with a dead code)."""
    k = KeyCodes()
    k.encode(np.array([3, 9, 4], np.int64))
    real = KeyCodes.compact

    def forgets_table(self: KeyCodes, live: Any) -> Any:
        table = self.table.copy()
        remap = real(self, live)
        self.table = table
        return remap

    monkeypatch.setattr(KeyCodes, "compact", forgets_table)
    k.compact(np.array([1, 2], np.int64))
    with pytest.raises(AssertionError, match="key table"):
        k._check()


# ---------------------------------------------------------------------- negative controls


class LateLe(BlockOracle):
    """Wrong: late when ts <= W (Spark's rule, not the specification's)."""

    def _is_late(self, ts: Any, w_before: Any) -> Any:
        return ts <= w_before


class NoCarry(BlockOracle):
    """Wrong: each block starts from no watermark (the carry from the previous block dropped)."""

    def _channel_carry(self) -> Any:
        return np.full(len(self.cm), blocks_mod.NEG, np.int64)

    def _ts_carry(self) -> int:
        return blocks_mod.NEG


@pytest.mark.parametrize("wrong", [LateLe, NoCarry])
def test_the_property_catches_a_wrong_block_path(wrong: type[BlockOracle]) -> None:
    @settings(SETTINGS, max_examples=400, phases=[Phase.generate], report_multiple_bugs=False)
    @given(workloads(cond=False, max_events=50), st.integers(1, 7))
    def prop(w: tuple[Query, list[Event]], block: int) -> None:
        check_against_oracle(w[0], w[1], block, make=wrong)

    # caught either way: a differing result (AssertionError), or the broken block path failing its own check
    # first (NoCarry can move W back: "W went back", a ValueError) -- which one comes first depends on the draws
    with pytest.raises((AssertionError, ValueError)):
        prop()


# ---------------------------------------------------------------------- as a command


def _run(args: list[str], env: dict[str, str] | None = None, stdin: bytes | None = None,
         ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*OIJ, *args], capture_output=True, input=stdin, timeout=120,
                          env={**os.environ, **(env or {})})


@pytest.mark.timeout(120)
def test_vectors_verify_a_subset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``oij join -`` (stdin, the block path forced: cond vectors take the event path) passes a sample of every
    feature's vectors, judged by ``oij vectors verify``'s own code with the join run in this process
    (:func:`tests.testing.test_conform.join_in_process`), and the first of them of every feature through the
    command itself, a process per vector; the upper-edge vectors fail the toy with an upper-bound bug (the
    verification can fail)."""
    from oij.testing._verify import verify_vectors
    from tests.testing.test_conform import join_in_process

    a, sub = tmp_path / "all", tmp_path / "sub"
    assert main(["vectors", "export", str(a)]) == 0
    rows = [json.loads(x) for x in (a / "manifest.jsonl").read_text().splitlines()]
    by_feature: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["profile"] == "canonical":  # verify runs these; the others need --profile
            by_feature.setdefault(r["feature"], []).append(r)
    upper = [r for r in by_feature["bounds"] if "_upper+1_" in r["case"]][:4]  # a probe one past hi(a)
    pick = [r for rs in by_feature.values() for r in rs[:: max(1, len(rs) // 3)] if r not in upper] + upper
    assert len(by_feature) >= 8 and 30 <= len(pick) <= 80 and len(upper) == 4
    _copy_vectors(a, sub, pick)
    monkeypatch.setenv("OIJ_JOIN_PATH", "block")
    rep = verify_vectors(str(sub), join_in_process())
    assert rep.failed == 0 and f"{len(pick)} passed, 0 failed" in rep.text, rep.text
    firsts = list({r["feature"]: r for r in reversed(pick)}.values())  # the first picked vector of each feature
    assert len(firsts) == len(by_feature)
    _copy_vectors(a, tmp_path / "firsts", firsts)
    r = subprocess.run([*OIJ, "vectors", "verify", str(tmp_path / "firsts"), "-j", "2", "--", *OIJ, "join", "-"],
                       capture_output=True, text=True, timeout=110)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(firsts)} passed, 0 failed" in r.stdout
    _copy_vectors(a, tmp_path / "upper", upper)
    toy = [sys.executable, str(Path(__file__).parent.parent / "impls" / "toy_oij.py"), "upper-off-by-one"]
    r = subprocess.run([*OIJ, "vectors", "verify", str(tmp_path / "upper"), "--", *toy], capture_output=True,
                       text=True, timeout=110)
    assert r.returncode == 1 and "FAIL bounds/" in r.stdout, r.stdout


def _copy_vectors(src: Path, dst: Path, rows: list[dict[str, Any]]) -> None:
    """A vector directory of the manifest rows ``rows`` of ``src``."""
    for r in rows:
        for f in (r["case"] + ".in.jsonl", r["expected"]):
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / f, dst / f)
    (dst / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


AS_A_PROCESS_EVERY = examples(16, 8)
"""test_conform_passes_the_command: one case in this many runs ``oij join -`` as a process (about ten of the
run's 160 cases by default, twenty under ``OIJ_TESTS=full``; each costs 0.2 CPU-seconds of an interpreter and
numpy), the others its :func:`oij.cli.main` in this process."""


@pytest.mark.timeout(120)
def test_conform_passes_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``oij conform -- oij join -``, the block path forced, conforms on the per-case default (the small-scope
    covering array) and 30 generated cases.  Every sixteenth case (every eighth under ``OIJ_TESTS=full``) runs
    the command as a process (its reading of stdin, its output and exit code); the others run the same parser,
    block path and writer through :func:`oij.cli.main` in this process, on the case's text
    (:func:`tests.testing.test_conform.join_in_process`), without an interpreter and numpy started per case."""
    import threading

    import oij.testing._runner as runner
    from tests.testing.test_conform import join_in_process

    monkeypatch.setenv("OIJ_JOIN_PATH", "block")  # the cases are small: auto would take the event path
    real, here, lock = runner.run_command, join_in_process(), threading.Lock()
    runs: list[bool] = []  # per case, whether it ran as a process

    def some_as_processes(argv: Sequence[str], stdin: str, timeout: float) -> runner.Outcome:
        assert list(argv) == [*OIJ, "join", "-"], argv
        with lock:
            runs.append(len(runs) % AS_A_PROCESS_EVERY == 0)
            if not runs[-1]:
                return here(stdin)
        return real(argv, stdin, timeout)

    monkeypatch.setattr(runner, "run_command", some_as_processes)
    rc = main(["conform", "--no-vectors", "--max-examples", "30", "--replay-out", str(tmp_path / "fail.jsonl"),
               "--", *OIJ, "join", "-"])
    out = capsys.readouterr().out
    assert rc == 0 and "conforms" in out and "[covering array]" in out, out
    assert len(runs) >= 150 and sum(runs) >= 144 // AS_A_PROCESS_EVERY, (len(runs), sum(runs))


WORKLOADS = [
    ("teach-watermarks", ["-n", "3000"]),
    ("teach-late", ["-n", "3000", "-p", "join=left"]),
    ("ppoij-skewed", ["-n", "4000", "-p", "aggregate=avg"]),
    ("scale-oij-default", ["-n", "20000", "-p", "aggregate=sum", "-p", "upper_inclusive=false"]),
    ("scale-oij-synthetic", ["-n", "20000", "-p", "aggregate=min", "-p", "key_type=str"]),
    ("teach-watermarks", ["-n", "3000", "-p", "aggregate=max", "-p", "lower=5", "-p", "upper=20"]),
    ("teach-bursts", ["-n", "3000", "-p", "aggregate=count"]),
]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("preset", "params"), WORKLOADS)
def test_join_bytes_equal_the_event_path(tmp_path: Path, preset: str, params: list[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``oij join`` (block path) writes the event path's bytes on generated workloads (oij-jsonl and Parquet,
    tiny sort runs so that the external sort spills and merges).  The commands run through :func:`oij.cli.main`
    in this process (an interpreter and numpy per command cost more than most of these joins); the block path
    reading stdin runs as a process, the command as a user runs it, on the largest workload."""
    src = tmp_path / "w.jsonl"
    assert main(["generate", preset, *params, "-s", "3", "-o", str(src), "--no-progress"]) == 0
    ev, bl = tmp_path / "ev.out", tmp_path / "bl.out"
    monkeypatch.setenv("OIJ_SORT_RUN_ROWS", "1000")
    for path, out in (("event", ev), ("block", bl)):
        monkeypatch.setenv("OIJ_JOIN_PATH", path)
        assert main(["join", str(src), "-o", str(out), "--no-progress"]) == 0
    assert ev.read_bytes() == bl.read_bytes() and ev.stat().st_size > 0
    if preset == "scale-oij-default":
        monkeypatch.delenv("OIJ_SORT_RUN_ROWS")
        monkeypatch.delenv("OIJ_JOIN_PATH")
        pq, pqo = tmp_path / "w.parquet", tmp_path / "pq.out"
        assert main(["generate", preset, *params, "-s", "3", "-o", str(pq), "--no-progress"]) == 0
        assert main(["join", str(pq), "-o", str(pqo), "--no-progress"]) == 0
        assert pqo.read_bytes() == ev.read_bytes()
        r = _run(["join", "-", "--no-progress"], {"OIJ_JOIN_PATH": "block"}, stdin=src.read_bytes())
        assert r.returncode == 0 and r.stdout == ev.read_bytes()


def _case_file(path: Path, q: Query, events: list[Event]) -> None:
    with path.open("w") as f:
        write_events(q, events, f)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("columnar", [False, True])
@pytest.mark.parametrize("bad", ['{"type":"tuple","side":"base","id":3,"ts":"x","key":1}',
                                 '{"type":"tuple","side":"probe","id":1,"ts":9,"key":1}'])
def test_input_errors_are_the_event_paths(tmp_path: Path, bad: str, columnar: bool, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A bad line (a wrong type; a duplicate id) after 1,499 good ones: both paths print the same one line and
    exit 2, leave an existing output file as it was, and write the same results of the prefix to stdout -- with
    the file read line by line or (``columnar``) by the columnar reader, and from stdin."""
    if columnar:
        monkeypatch.setattr(join_mod, "SMALL_FILE", 0)
    q = Query(lower=-3, upper=2, join="left")
    events: list[Event] = [StreamTuple("base" if i % 2 else "probe", i, i // 3, i % 7) for i in range(2000)]
    good = tmp_path / "good.jsonl"
    _case_file(good, q, [*events, End()])
    lines = good.read_text().splitlines()
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join([*lines[:1500], bad, *lines[1500:]]) + "\n")
    out = tmp_path / "out"
    out.write_text("old\n")
    seen = []
    for path in ("event", "block"):
        monkeypatch.setenv("OIJ_JOIN_PATH", path)
        assert main(["join", str(src), "-o", str(out), "--no-progress"]) == 2 and out.read_text() == "old\n"
        to_file = capsys.readouterr()
        assert main(["join", str(src), "--no-progress"]) == 2
        to_stdout = capsys.readouterr()
        assert to_stdout.out.count("\n") > 100
        got = [to_file.err, to_stdout.out, to_stdout.err]
        if not columnar:
            r = _run(["join", "-"], {"OIJ_JOIN_PATH": path}, stdin=src.read_bytes())
            assert r.returncode == 2
            got += [r.stdout.decode(), r.stderr.decode()]
        seen.append(got)
    assert seen[0] == seen[1]
    assert len(seen[0][0].splitlines()) == 1 and ":1501: " in seen[0][0] and "left as it was" in seen[0][0]


@pytest.mark.parametrize("params", [["-p", "aggregate=avg"], ["-p", "join=left", "-p", "lower_inclusive=false"]])
def test_the_columnar_reader_feeds_the_same_bytes(tmp_path: Path, params: list[str], monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A file read by the columnar reader (as every file of 16 MiB or more is), in process, small sort runs."""
    src = tmp_path / "w.jsonl"
    assert main(["generate", "teach-watermarks", *params, "-n", "5000", "-o", str(src), "--no-progress"]) == 0
    monkeypatch.setenv("OIJ_SORT_RUN_ROWS", "500")
    from oij.io.columnar import STATS

    outs = []
    fast = STATS["fast"]
    for path, small in (("event", join_mod.SMALL_FILE), ("block", 0)):
        monkeypatch.setenv("OIJ_JOIN_PATH", path)
        monkeypatch.setattr(join_mod, "SMALL_FILE", small)
        assert main(["join", str(src), "-o", str(tmp_path / path), "--no-progress"]) == 0
        outs.append((tmp_path / path).read_bytes())
    capsys.readouterr()
    assert STATS["fast"] > fast  # the columnar fast path read it
    assert outs[0] == outs[1] and b'"late"' in outs[0] and (b'"aggregate"' in outs[0] or b"null" in outs[0])


def _judged(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@settings(SETTINGS, max_examples=examples(75, 150))
@given(data=mutated(), columnar=st.booleans())
def test_fuzzed_files_give_the_event_paths_bytes_and_errors(data: bytes, columnar: bool,
                                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    """The nothing-lost suite's mutated files (truncated, flipped, duplicated lines, huge numbers, odd keys,
    CRLF, NUL...): the block path's exit code, stdout and stderr are the event path's, read line by line or
    (``columnar``) by the columnar reader."""
    path = tmp_path_factory.mktemp("fz") / "in.jsonl"
    path.write_bytes(data)
    got = []
    with pytest.MonkeyPatch.context() as mp:
        for p in ("event", "block"):
            mp.setenv("OIJ_JOIN_PATH", p)
            mp.setattr(join_mod, "SMALL_FILE", 0 if columnar and p == "block" else 16 << 20)
            got.append(_judged(["join", str(path), "--no-progress"]))
    assert got[0] == got[1]
    assert got[0][0] in (0, 2) and got[0][2].count("\n") == (got[0][0] == 2)


def test_the_block_path_is_taken_when_it_applies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from oij.spec.model import Comparison

    fed: list[int] = []
    real = BlockOracle.feed

    def counting(self: BlockOracle, *cols: Any) -> None:
        fed.append(len(cols[0]))
        real(self, *cols)

    monkeypatch.setattr(BlockOracle, "feed", counting)
    monkeypatch.setattr(join_mod, "SMALL_INPUT", 0)  # auto takes the block path for files of any size
    src = tmp_path / "w.jsonl"
    plain: list[Event] = [StreamTuple("base" if i % 2 else "probe", i, i, i % 3) for i in range(50)]
    _case_file(src, Query(lower=-4, upper=0), [*plain, End()])
    outs = []
    runs: list[tuple[list[str], str, bool]] = [([], "", True), (["--order", "arrival"], "", False),
                                               ([], "event", False), (["--stats", str(tmp_path / "s.json")], "", False)]
    for flags, env, block in runs:
        if env:
            monkeypatch.setenv("OIJ_JOIN_PATH", env)
        else:
            monkeypatch.delenv("OIJ_JOIN_PATH", raising=False)
        fed.clear()
        assert main(["join", str(src), "--no-progress", *flags]) == 0
        assert bool(fed) == block, flags
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[2] == outs[3] and sorted(outs[1].splitlines()) == sorted(outs[0].splitlines())
    monkeypatch.delenv("OIJ_JOIN_PATH", raising=False)
    cond = tmp_path / "c.jsonl"
    fields: list[Event] = [StreamTuple("base" if i % 2 else "probe", i, i, i % 3, fields=(("x", 1.0),))
                           for i in range(50)]
    _case_file(cond, Query(lower=-4, upper=0, cond=(Comparison("x", "<=", "x"),)), [*fields, End()])
    fed.clear()
    assert main(["join", str(cond), "--no-progress"]) == 0 and not fed
    assert capsys.readouterr().out == outs[0]
    # by default, a file under SMALL_INPUT takes the event path, and block forces the block path
    monkeypatch.setattr(join_mod, "SMALL_INPUT", 1 << 20)
    fed.clear()
    assert main(["join", str(src), "--no-progress"]) == 0 and not fed
    monkeypatch.setenv("OIJ_JOIN_PATH", "block")
    assert main(["join", str(src), "--no-progress"]) == 0 and fed
    assert capsys.readouterr().out == outs[0] * 2
    monkeypatch.setenv("OIJ_JOIN_PATH", "fast")
    assert main(["join", str(src)]) == 2 and "OIJ_JOIN_PATH" in capsys.readouterr().err
