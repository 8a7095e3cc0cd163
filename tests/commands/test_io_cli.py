"""oij-jsonl and Parquet round trips, bad-input errors (file, line, field, exit 2), and ``oij join``."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oij.reference.oracle import run_events
from oij.spec.model import End, Event, Query, StreamTuple, Watermark

from oij.cli import main
from oij.io.errors import IdSet
from oij.io.jsonlread import parse_result_lines, read_jsonl
from oij.io.jsonlwrite import result_lines, write_events
from oij.io.parquet import read_parquet, write_parquet
from tests.strategies import workloads

QUERY = '{"type":"query","lower":-10,"upper":0,"aggregate":null,"channels":2}'


def _write(tmp_path: Path, lines: list[str], name: str = "in.jsonl") -> str:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return str(p)


@settings(max_examples=60, deadline=None)
@given(workloads())
def test_jsonl_round_trip(w: tuple[Query, list[Event]]) -> None:
    q, events = w
    buf = io.StringIO()
    write_events(q, events, buf)
    q2, it = read_jsonl(io.BytesIO(buf.getvalue().encode()), "mem")
    assert q2 == q
    assert list(it) == events


@settings(max_examples=25, deadline=None)
@given(workloads())
def test_parquet_round_trip(tmp_path_factory: pytest.TempPathFactory, w: tuple[Query, list[Event]]) -> None:
    q, events = w
    # Parquet holds one key type per file: keep the str keys (ints become strs of another value space);
    # and only the fields the cond reads (a tuple with another field is refused, tested below).
    from oij.io.parquet import field_names

    keep = set(field_names(q))
    events = [e._replace(key=f"s{e.key}", fields=tuple(f for f in e.fields if f[0] in keep))
              if isinstance(e, StreamTuple) else e for e in events]
    path = str(tmp_path_factory.mktemp("pq") / "w.parquet")
    write_parquet(path, q, events)
    q2, it = read_parquet(path)
    assert q2 == q
    assert list(it) == events


@settings(max_examples=40, deadline=None)
@given(workloads())
def test_result_lines_round_trip(w: tuple[Query, list[Event]]) -> None:
    q, events = w
    res = run_events(events, q)
    back = parse_result_lines(list(result_lines(res)))
    assert back.canonical() == res


def test_parquet_refuses_a_field_it_would_drop(tmp_path: Path) -> None:
    """No data is silently dropped: a field no cond reads has no column, so writing it is an error."""
    q = Query(-1, 0)
    with pytest.raises(ValueError, match="field 'power'"):
        write_parquet(str(tmp_path / "x.parquet"), q, [StreamTuple("base", 1, 0, "k", fields=(("power", 1.0),)), End()])


def test_join_cli_matches_oracle_in_both_orders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [
        QUERY,
        '{"type":"tuple","side":"probe","id":1,"ts":5,"key":"k","value":1.5}',
        '{"type":"tuple","side":"base","id":2,"ts":10,"key":"k"}',
        '{"type":"watermark","ts":8,"channel":0}',
        '{"type":"watermark","ts":9,"channel":1}',
        '{"type":"tuple","side":"probe","id":3,"ts":7,"key":"k","channel":1}',
        '{"type":"tuple","side":"probe","id":4,"ts":9,"key":"k","channel":1}',
        '{"type":"end"}',
    ]
    src = _write(tmp_path, lines)
    out = tmp_path / "out.jsonl"
    assert main(["join", src, "-o", str(out), "--no-progress"]) == 0
    assert out.read_text().splitlines() == [
        '{"type":"pair","base":2,"probe":1}',
        '{"type":"pair","base":2,"probe":4}',
        '{"type":"late","id":3}',
    ]
    assert main(["join", src, "--order", "arrival", "--no-progress"]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == sorted(out.read_text().splitlines())


def test_join_cli_parquet_with_query_flags(tmp_path: Path) -> None:
    q = Query(lower=-10, upper=0)
    events: list[Event] = [StreamTuple("probe", 1, 5, 7), StreamTuple("base", 2, 10, 7), End()]
    path = str(tmp_path / "w.parquet")
    write_parquet(path, q, events, key_type="int")
    out = tmp_path / "o.jsonl"
    assert main(["join", path, "-o", str(out), "--no-progress"]) == 0
    assert out.read_text() == '{"type":"pair","base":2,"probe":1}\n'
    assert main(["join", path, "-o", str(out), "--lower", "-2", "--no-progress"]) == 0
    assert out.read_text() == ""
    assert main(["join", path, "-o", str(out), "--aggregate", "count", "--no-progress"]) == 0
    assert out.read_text() == '{"type":"aggregate","base":2,"count":1,"value":1}\n'


BAD = [
    ('{"type":"tuple","side":"base","id":1,"ts":1.5,"key":"k"}', 2, "ts", "must be an integer"),
    ('{"type":"tuple","side":"base","id":1,"ts":4611686018427387904,"key":"k"}', 2, "ts", "out of range"),
    ('{"type":"tuple","side":"base","id":1,"ts":-4611686018427387904,"key":"k"}', 2, "ts", "< 2^62"),
    ('{"type":"tuple","side":"base","id":1,"ts":100000000000000000000000,"key":"k"}', 2, "ts", "out of range"),
    ('{"type":"tuple","side":"base","id":1,"ts":1,"key":"k","value":NaN}', 2, "value", "must be finite"),
    ('{"type":"tuple","side":"base","id":1,"ts":1,"key":"k","value":1e999}', 2, "value", "must be finite"),
    ('{"type":"tuple","side":"left","id":1,"ts":1,"key":"k"}', 2, "side", "'base' or 'probe'"),
    ('{"type":"tuple","side":"base","id":1,"ts":1,"key":1.5}', 2, "key", "integer or a string"),
    ('{"type":"tuple","side":"base","id":1,"ts":1,"key":true}', 2, "key", "integer or a string"),
    ('{"type":"tuple","side":"base","id":1,"ts":1,"key":"k","channel":2}', 2, "channel", "[0, 2)"),
    ('{"type":"tuple","side":"base","id":1,"ts":1}', 2, "key", "missing"),
    ('{"type":"tuple","side":"base","id":1,"ts":1,"key":"k","colour":"red"}', 2, "colour", "unknown field"),
    ('{"type":"punctuation","ts":1}', 2, "type", "unknown type"),
    ('{"type":"watermark","ts":"soon"}', 2, "ts", "must be an integer"),
    ("not json at all", 2, "line", "not valid JSON"),
    ("[1, 2]", 2, "line", "JSON object"),
]


@pytest.mark.parametrize(("line", "lineno", "field", "text"), BAD)
def test_bad_event_line_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, lineno: int, field: str, text: str
) -> None:
    src = _write(tmp_path, [QUERY, line, '{"type":"end"}'])
    assert main(["join", src, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith(f"oij: error: {src}:{lineno}: {field}: "), err
    assert text in err


BAD_QUERIES = [
    ('{"type":"query","lower":5,"upper":0}', "lower", "must be <= upper"),
    ('{"type":"query","upper":0}', "lower", "missing"),
    ('{"type":"query","lower":0,"upper":1,"aggregate":"median"}', "aggregate", "one of"),
    ('{"type":"query","lower":0,"upper":1,"channels":0}', "channels", ">= 1"),
    ('{"type":"query","lower":0,"upper":1,"join":"outer"}', "join", "one of"),
    ('{"type":"query","lower":0,"upper":1,"uper":1}', "uper", "unknown field"),
    ('{"type":"tuple","side":"base","id":1,"ts":1,"key":"k"}', "type", "must be the query"),
]


@pytest.mark.parametrize(("line", "field", "text"), BAD_QUERIES)
def test_bad_query_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, field: str, text: str) -> None:
    src = _write(tmp_path, [line, '{"type":"end"}'])
    assert main(["join", src, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"oij: error: {src}:1: {field}: "), err
    assert text in err


def test_prefix_results_are_written_before_the_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [
        QUERY,
        '{"type":"tuple","side":"probe","id":1,"ts":5,"key":"k"}',
        '{"type":"tuple","side":"base","id":2,"ts":10,"key":"k"}',
        '{"type":"tuple","side":"base","id":2,"ts":11,"key":"k"}',
        '{"type":"end"}',
    ]
    src = _write(tmp_path, lines)
    assert main(["join", src, "--no-progress"]) == 2
    cap = capsys.readouterr()
    assert cap.out == '{"type":"pair","base":2,"probe":1}\n'
    assert f"{src}:4: id: duplicate id 2" in cap.err


def test_structural_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        ([QUERY], 2, "type", "missing the last line"),
        ([QUERY, '{"type":"end"}', '{"type":"end"}'], 3, "type", "nothing may follow"),
        ([QUERY, QUERY, '{"type":"end"}'], 2, "type", "second query"),
        (['{"type":"query","lower":0,"upper":1,"lateness":3}', '{"type":"watermark","ts":1}'], 2, "type", "lateness"),
    ]
    for lines, lineno, field, text in cases:
        src = _write(tmp_path, lines)
        assert main(["join", src, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert f"{src}:{lineno}: {field}: " in err and text in err, err
    assert main(["join", str(tmp_path / "missing.jsonl")]) == 2
    assert "No such file" in capsys.readouterr().err
    assert main(["join", str(tmp_path / "missing.parquet")]) == 2
    assert "No such file" in capsys.readouterr().err


def test_output_format_is_the_documented_one(tmp_path: Path) -> None:
    q = Query(lower=-5, upper=5, aggregate="avg")
    events: list[Event] = [StreamTuple("base", 1, 0, "k"), Watermark(1), StreamTuple("probe", 2, -3, "k"), End()]
    lines = [json.loads(x) for x in result_lines(run_events(events, q))]
    assert lines == [{"type": "aggregate", "base": 1, "count": 0, "value": None}, {"type": "late", "id": 2}]


def test_id_set_dense_sparse_and_negative() -> None:
    s = IdSet()
    for x in [*range(1000), -5, 10**15, 2**63 - 1]:
        assert s.add(x)
        assert not s.add(x)
    for x in range(0, 10**9, 10**6):  # sparse ids switch to a plain set
        s.add(x + 7)
    assert not s.add(10**15) and not s.add(-5) and s.add(-6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3 * 65536 + 100), max_size=400), st.integers(0, 2))
def test_id_set_is_a_set_and_full_pages_are_shared(extra: list[int], pages: int) -> None:
    s, ref = IdSet(), set()
    for x in [*range(pages * 65536), *extra]:  # whole pages first: they fill, and are swept when a page opens
        assert s.add(x) == (x not in ref)
        ref.add(x)
    assert s.add(10**7) and s.count == len(ref) + 1
    full = [p for p, arr in s.pages.items() if arr is IdSet.FULL]
    assert all(p not in s.open for p in full) and len(full) >= min(pages, len(s.pages) - 2) - 1
    assert all(not s.add(x) for x in range(0, pages * 65536, 4099))


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("oij ")
    with pytest.raises(SystemExit) as e:
        main(["join", "--help"])
    assert e.value.code == 0


def test_join_stats_report_effectiveness_and_state(tmp_path: Path) -> None:
    lines = [
        '{"type":"query","lower":-10,"upper":0,"lateness":2}',
        '{"type":"tuple","side":"probe","id":1,"ts":5,"key":"k"}',
        '{"type":"tuple","side":"probe","id":2,"ts":8,"key":"k"}',
        '{"type":"tuple","side":"base","id":3,"ts":10,"key":"k"}',
        '{"type":"tuple","side":"base","id":4,"ts":30,"key":"k"}',
        '{"type":"end"}',
    ]
    src = _write(tmp_path, lines)
    stats_path = tmp_path / "s.json"
    assert main(["join", src, "-o", str(tmp_path / "o.jsonl"), "--stats", str(stats_path), "--no-progress"]) == 0
    stats = json.loads(stats_path.read_text())
    assert stats["entries_in_window"] == 2 and stats["effectiveness"] == 1.0
    assert stats["retained_state_peak"] >= 1 and stats["late"] == 0


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
@pytest.mark.parametrize("command", ["join", "run"])
def test_an_output_that_is_the_input_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                link: str, command: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"type":"query","lower":0,"upper":1}\n{"type":"tuple","side":"base","id":1,"ts":1,"key":1}\n'
                   '{"type":"end"}\n')
    before = src.read_bytes()
    out = src
    if link == "symlink":
        out = tmp_path / "out.jsonl"
        out.symlink_to(src)
    elif link == "hardlink":
        out = tmp_path / "out.jsonl"
        os.link(src, out)
    assert main([command, str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "refusing to overwrite" in err and str(src) in err and err.count("\n") == 1
    assert src.read_bytes() == before


def test_an_unwritable_output_is_one_line_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"type":"query","lower":0,"upper":1}\n{"type":"end"}\n')
    assert main(["join", str(src), "-o", str(tmp_path / "missing" / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "cannot write: directory" in err and "does not exist" in err and err.count("\n") == 1


@pytest.mark.parametrize("cond", [True, False])
def test_the_block_engine_refuses_a_cond_it_learns_from_stdin(
        cond: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``oij run --engine blocks -``: the query comes with the stream, so the refusal of a cond comes only once
    it is read: exit 2 and one line.  Negative control: the same stream without the cond runs (exit 0)."""
    extra = ',"cond":[{"a":"x","op":"<","b":"x"}]' if cond else ""
    text = f'{{"type":"query","lower":0,"upper":1{extra}}}\n{{"type":"end"}}\n'
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    rc = main(["run", "--pattern", "kp", "--engine", "blocks", "-"])
    err = capsys.readouterr().err
    if cond:
        assert rc == 2 and err.count("\n") == 1 and "only the event engine computes" in err, err
    else:
        assert rc == 0, err
