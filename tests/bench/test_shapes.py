"""``oij bench shapes``: the foreign shapes are what they say, hold the same join, and the floor measures.

A benchmark is never a timed test: these check what the benchmark writes and compares, not its times.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from oij.bench import shapes
from oij.io.jsonlread import read_jsonl
from oij.pipelines.join import JoinOptions, join_file
from oij.workloads import write_workload

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from oij.bench.peers import params_for

    d = tmp_path_factory.mktemp("shapes")
    src = d / "w.jsonl"
    write_workload(str(src), params_for("uniform"), 3000, 1)
    return src


MARKS = {"dumps": b'", "', "crlf": b"}\r\n", "exponents": b"e+", "string-keys": b'"key":"k', "bom": b"\xef\xbb\xbf"}
"""Bytes each shape's file must hold (and oij's own shape must not)."""


@pytest.mark.parametrize("shape", list(shapes.SHAPES))
def test_every_shape_is_what_it_says_and_joins_to_the_same_bytes(source: Path, tmp_path: Path, shape: str) -> None:
    dst = tmp_path / f"w-{shape}.jsonl"
    shapes.write_shape(str(source), str(dst), shape)
    data = dst.read_bytes()
    if shape in MARKS:
        assert MARKS[shape] in data and MARKS[shape] not in source.read_bytes()
    if shape in ("no-optional", "issue"):
        assert b'"channel"' not in data.split(b"\n", 1)[1]
    if shape == "no-optional":
        assert b'"value"' not in data
    if shape == "shuffled":
        assert data.split(b"\n", 1)[0] != source.read_bytes().split(b"\n", 1)[0]
    _q, events = read_jsonl(io.BytesIO(data), str(dst))
    assert sum(1 for _ in events) == sum(1 for _ in read_jsonl(io.BytesIO(source.read_bytes()), "s")[1])
    want, got = tmp_path / "want.jsonl", tmp_path / "got.jsonl"
    join_file(JoinOptions(file=str(source), output=str(want), no_progress=True))
    join_file(JoinOptions(file=str(dst), output=str(got), no_progress=True))
    assert got.read_bytes() == want.read_bytes() and want.stat().st_size > 0


def test_the_floor_reads_every_row_and_writes_the_result(source: Path, tmp_path: Path) -> None:
    result = tmp_path / "r.jsonl"
    join_file(JoinOptions(file=str(source), output=str(result), no_progress=True))
    pq = tmp_path / "w.parquet"
    from oij.bench.peers import params_for

    write_workload(str(pq), params_for("uniform"), 3000, 1)
    for path in (source, pq):
        f = shapes.floor(str(path), str(result))
        assert f["rows"] == 3001 and f["floor_s"] == f["read_s"] + f["write_s"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl", "w.parquet"]  # nothing left behind


def test_an_unknown_shape_is_refused(source: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown shape"):
        shapes.write_shape(str(source), str(tmp_path / "x.jsonl"), "yaml")
