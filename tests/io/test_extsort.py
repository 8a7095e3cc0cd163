"""The external merge sort of the canonical output (oij/io/extsort.py): the same bytes as the in-memory sort."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oij.spec.batch import Results

from oij.io import extsort
from oij.io.extsort import CanonicalSorter
from oij.io.jsonlwrite import result_lines
from tests.budget import examples

ids = st.integers(-(1 << 63), (1 << 63) - 1)
small = st.integers(-5, 40)
values = st.one_of(st.none(), st.integers(-10, 10), st.floats(allow_nan=False), st.just(float("inf")))


@st.composite
def results_in_chunks(draw: st.DrawFn, id_: st.SearchStrategy[int] = small) -> list[Results]:
    """Result rows split into chunks as a command hands them over (pairs repeat: a multiset)."""
    chunks = []
    bases = draw(st.lists(id_, unique=True, max_size=30))
    for _ in range(draw(st.integers(0, 6))):
        pairs = draw(st.lists(st.tuples(id_, st.one_of(st.none(), id_)), max_size=25))
        late = draw(st.lists(id_, max_size=8))
        k = draw(st.integers(0, len(bases)))
        aggs = [(b, draw(st.integers(0, 5)), draw(values)) for b in bases[:k]]
        bases = bases[k:]
        chunks.append(Results(pairs, aggs, late))
    return chunks


def _in_memory(chunks: list[Results]) -> str:
    whole = Results([p for c in chunks for p in c.pairs], [r for c in chunks for r in c.aggregates],
                    [i for c in chunks for i in c.late])
    return "".join(result_lines(whole.canonical()))


def _sorted(chunks: list[Results], tmp: Path, run_rows: int, block_rows: int) -> tuple[str, int]:
    out = io.StringIO()
    with CanonicalSorter(str(tmp), run_rows=run_rows, block_rows=block_rows) as s:
        for c in chunks:
            s.add(c)
        s.write(out)
        spills = s.spills
    assert os.listdir(tmp) == []  # the runs are gone
    return out.getvalue(), spills


@settings(max_examples=examples(75, 150), deadline=None)
@given(results_in_chunks(), st.integers(1, 9), st.integers(1, 5))
def test_the_external_sort_writes_the_bytes_of_the_in_memory_sort(chunks: list[Results], run_rows: int,
                                                                   block_rows: int) -> None:
    """Tiny runs and blocks, so that every boundary is crossed; duplicates, null probes, negative ids."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        got, _ = _sorted(chunks, Path(d), run_rows, block_rows)
    assert got == _in_memory(chunks)


@settings(max_examples=40, deadline=None)
@given(results_in_chunks(ids), st.integers(1, 9))
def test_extreme_ids_sort_like_the_in_memory_sort(chunks: list[Results], run_rows: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        got, _ = _sorted(chunks, Path(d), run_rows, 2)
    assert got == _in_memory(chunks)


def test_an_id_beyond_int64_falls_back_to_memory_with_the_same_bytes(tmp_path: Path) -> None:
    chunks = [Results([(5, 1), (3, None)], [(7, 2, 1.5)], [9]), Results([(4, 2)], [], [8]),
              Results([(1 << 64, 3), (2, 1 << 70)], [(1 << 65, 1, None)], [1 << 66])]
    got, spills = _sorted(chunks, tmp_path, 1, 1)
    assert spills > 0 and got == _in_memory(chunks)


def test_many_runs_are_spilled_and_merged(tmp_path: Path) -> None:
    import random

    rng = random.Random(7)
    chunks = [Results([(rng.randrange(50), rng.choice([None, rng.randrange(50)])) for _ in range(300)], [],
                      [rng.randrange(1000) for _ in range(20)]) for _ in range(10)]
    got, spills = _sorted(chunks, tmp_path, 64, 16)
    assert spills >= 10 and got == _in_memory(chunks)


def test_negative_control_a_merge_that_ignores_the_bound_is_caught(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Taking whole blocks instead of the rows up to the bound writes rows out of order: the comparison with
    the in-memory sort sees it."""
    chunks = [Results([(1, 1), (9, 9), (10, 1), (11, 1)], [], []), Results([(2, 2), (3, 3), (4, 1), (5, 1)], [], [])]
    assert _sorted(chunks, tmp_path, 4, 2)[0] == _in_memory(chunks)
    monkeypatch.setattr(extsort, "_count_not_above", lambda cols, bound: len(cols[0]))
    assert _sorted(chunks, tmp_path, 4, 2)[0] != _in_memory(chunks)


@settings(max_examples=examples(50, 100), deadline=None)
@given(results_in_chunks(), st.integers(1, 60), st.lists(st.booleans(), max_size=6))
def test_a_small_result_in_memory_and_its_move_to_columns_keep_the_bytes(chunks: list[Results], small_rows: int,
                                                                        as_columns: list[bool]) -> None:
    """Rows stay Python tuples until ``small_rows``; then they and every later chunk are columns (some chunks'
    pairs handed over as columns, as the engines do, which ends the small mode too): the same bytes."""
    import tempfile

    import numpy as np

    out = io.StringIO()
    with tempfile.TemporaryDirectory() as d, CanonicalSorter(d, run_rows=50, block_rows=3,
                                                             small_rows=small_rows) as s:
        for c, cols in zip(chunks, as_columns + [False] * len(chunks), strict=False):  # the first few: as drawn
            if cols and c.pairs:
                s.add_pair_columns(np.array([p[0] for p in c.pairs], np.int64),
                                   np.array([p[1] or 0 for p in c.pairs], np.int64),
                                   np.array([p[1] is None for p in c.pairs], np.bool_))
                s.add(Results([], c.aggregates, c.late))
            else:
                s.add(c)
        s.write(out)
    assert out.getvalue() == _in_memory(chunks)


def test_a_small_join_does_not_import_numpy(tmp_path: Path) -> None:
    """``oij join`` on a small case keeps its rows in memory, without numpy (the start the kit pays per case);
    negative control: with runs of one row (``OIJ_SORT_RUN_ROWS``), the same join makes columns and imports it."""
    import subprocess
    import sys

    case = tmp_path / "case.jsonl"
    case.write_text('{"type":"query","lower":0,"upper":5}\n{"type":"tuple","side":"base","id":1,"ts":1,"key":1}\n'
                    '{"type":"tuple","side":"probe","id":2,"ts":3,"key":1}\n{"type":"end"}\n')
    code = ("import sys\nfrom oij.cli import main\nrc = main(['join', sys.argv[1]])\n"
            "print('numpy' in sys.modules, file=sys.stderr)\nsys.exit(rc)")

    def numpy_imported(env: dict[str, str]) -> bool:
        r = subprocess.run([sys.executable, "-c", code, str(case)], capture_output=True, text=True, timeout=60,
                           env={**os.environ, **env})
        assert r.returncode == 0 and r.stdout == '{"type":"pair","base":1,"probe":2}\n', (r.stdout, r.stderr)
        return r.stderr.strip().splitlines()[-1] == "True"

    assert not numpy_imported({})
    assert numpy_imported({"OIJ_SORT_RUN_ROWS": "1"})


def test_the_runs_are_removed_when_writing_fails(tmp_path: Path) -> None:
    class Full(io.StringIO):
        def write(self, s: str) -> int:
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError), CanonicalSorter(str(tmp_path), run_rows=2) as s:
        s.add(Results([(3, 1), (2, 1), (1, 1)], [], [4, 5]))
        assert s.spills and os.listdir(tmp_path)
        s.write(Full())
    assert os.listdir(tmp_path) == []


def _sorted_fan_in(chunks: list[Results], tmp: Path, run_rows: int, block_rows: int, fan_in: int) -> tuple[str, int]:
    out = io.StringIO()
    with CanonicalSorter(str(tmp), run_rows=run_rows, block_rows=block_rows, fan_in=fan_in) as s:
        for c in chunks:
            s.add(c)
        s.write(out)
        merges = s.merges
    assert os.listdir(tmp) == []  # the runs, merged ones included, are gone
    return out.getvalue(), merges


@settings(max_examples=examples(50, 100), deadline=None)
@given(results_in_chunks(), st.integers(1, 9), st.integers(1, 5), st.integers(2, 4))
def test_a_merge_of_bounded_fan_in_writes_the_bytes_of_the_in_memory_sort(chunks: list[Results], run_rows: int,
                                                                          block_rows: int, fan_in: int) -> None:
    """More runs than the fan-in: merged in groups into longer runs first (aggregate lines too), same bytes."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        got, _ = _sorted_fan_in(chunks, Path(d), run_rows, block_rows, fan_in)
    assert got == _in_memory(chunks)


@pytest.mark.parametrize("fan_in", [3, 1000])
def test_the_fan_in_bounds_the_runs_read_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fan_in: int) -> None:
    """No merge reads more than ``fan_in`` runs at once (open files, blocks), however many runs were spilled;
    negative control: with a fan-in above the number of runs, the one merge reads them all."""
    import random

    rng = random.Random(3)
    chunks = [Results([(rng.randrange(500), rng.choice([None, rng.randrange(50)])) for _ in range(100)],
                      [(rng.randrange(10**6), 1, 0.5)], []) for _ in range(30)]
    widest: list[int] = []
    real = extsort._merge

    def counting(name: str, sources: list[Any]) -> Any:
        widest.append(len(sources))
        return real(name, sources)

    monkeypatch.setattr(extsort, "_merge", counting)
    got, merges = _sorted_fan_in(chunks, tmp_path, 100, 16, fan_in)
    assert got == _in_memory(chunks)
    if fan_in == 3:
        assert merges > 0 and max(widest) <= 3, widest
    else:
        assert merges == 0 and max(widest) >= 30, widest
