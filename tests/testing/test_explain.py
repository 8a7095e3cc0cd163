"""``oij explain``: the step table and the timeline agree with the oracle, draw what they claim, and fail
on bad input with one line."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from oij.reference.oracle import run_events
from oij.spec.batch import Results

from oij.cli import main
from oij.testing import Case, cases
from oij.testing._explain import MAX_EVENTS, explain, explain_svg, explain_text, results_of

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
NS = "{http://www.w3.org/2000/svg}"


@settings(max_examples=60, deadline=None)
@given(cases())
def test_the_steps_add_up_to_the_oracle(case: Case) -> None:
    steps = explain(case.query, case.events)
    assert len(steps) == len(case.events)
    assert results_of(steps) == run_events(case.events, case.query)
    # W never goes back, and a late tuple emits nothing
    ws = [s.w for s in steps]
    assert ws == sorted(ws)
    assert all(not (s.pairs or s.rows) for s in steps if s.late)
    ET.fromstring(explain_svg(case.query, steps))


def test_a_lost_step_is_noticed() -> None:
    """Negative control: the check above sees one step's rows missing."""
    case = Case.from_jsonl((EXAMPLES / "first.jsonl").read_text())
    steps = explain(case.query, case.events)
    want = run_events(case.events, case.query)
    assert results_of(steps) == want
    steps[1].pairs.clear()
    assert results_of(steps) != want


def _svg(path: Path) -> ET.Element:
    return ET.fromstring(path.read_text())


def test_the_tutorial_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "first.svg"
    assert main(["explain", str(EXAMPLES / "first.jsonl"), "--svg", str(out)]) == 0
    text = capsys.readouterr().out
    assert "total: 4 pair(s), 0 aggregate row(s), 2 late tuple(s)" in text
    lines = text.splitlines()
    assert "(a2, b6)" in lines[8] and "LATE" in lines[9] and "LATE" in lines[12]
    root = _svg(out)
    # it scales to the docs' text column: as wide as its container, the height from the viewBox's aspect ratio
    assert root.get("width") == "100%" and root.get("height") is None
    x0, y0, vb_w, vb_h = (float(v) for v in (root.get("viewBox") or "").split())
    assert (x0, y0) == (0, 0) and vb_w > 0 and vb_h > 0
    assert f"max-width:{vb_w:g}px" in (root.get("style") or "")
    # and every mark starts inside the viewBox (nothing drawn outside it is cut off)
    for e in root.iter():
        for name, limit in (("x", vb_w), ("x1", vb_w), ("x2", vb_w), ("cx", vb_w), ("y", vb_h), ("cy", vb_h)):
            if e.get(name) is not None:
                assert 0 <= float(e.get(name) or "") <= limit, (e.tag, name, e.get(name))
    # one mark per tuple in each panel: 4 bases (squares of width 12), 5 probes (circles of radius 6)
    rects = [e for e in root.iter(NS + "rect") if e.get("width") == "12"]
    circles = [e for e in root.iter(NS + "circle") if e.get("r") == "6"]
    assert len(rects) == 2 * 4 and len(circles) == 2 * 5
    pairs = [e for e in root.iter(NS + "line") if e.get("opacity") == "0.6"]
    assert len(pairs) == 4
    # the same input draws the same bytes
    again = tmp_path / "again.svg"
    assert main(["explain", str(EXAMPLES / "first.jsonl"), "--svg", str(again)]) == 0
    assert again.read_bytes() == out.read_bytes()


def test_got_marks_missing_and_unexpected_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = "\n".join(['{"type":"pair","base":2,"probe":1}', '{"type":"pair","base":2,"probe":4}',
                      '{"type":"pair","base":2,"probe":6}', '{"type":"pair","base":5,"probe":3}',
                      '{"type":"late","id":7}', '{"type":"late","id":9}']) + "\n"
    bad = good.replace('"probe":6', '"probe":7')
    for name, text, marked in (("good", good, False), ("bad", bad, True)):
        got = tmp_path / f"{name}.jsonl"
        got.write_text(text)
        svg = tmp_path / f"{name}.svg"
        assert main(["explain", str(EXAMPLES / "first.jsonl"), "--got", str(got), "--svg", str(svg)]) == 0
        out = capsys.readouterr().out
        dashed = [e.get("stroke") for e in _svg(svg).iter(NS + "line") if e.get("stroke-dasharray") in ("4,3", "2,2")
                  and e.get("x1") != e.get("x2")]
        # the legend draws one of each kind when got is given
        assert (len(dashed) > 2) is marked, (name, dashed)
        assert ("1 row(s) missing, 1 unexpected" in out) is marked


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"query","lower":-1,"upper":0}\n{"type":"tuple","side":"base","id":1,"ts":1.5,"key":1}\n')
    assert main(["explain", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:2: ts:" in err
    big = tmp_path / "big.jsonl"
    rows = [f'{{"type":"tuple","side":"base","id":{i},"ts":{i},"key":1}}' for i in range(MAX_EVENTS + 1)]
    big.write_text("\n".join(['{"type":"query","lower":-1,"upper":0}', *rows, '{"type":"end"}']) + "\n")
    assert main(["explain", str(big)]) == 2
    assert "oij explain is for small cases" in capsys.readouterr().err
    got = tmp_path / "got.jsonl"
    got.write_text('{"type":"pair","base":1}\n')
    assert main(["explain", str(EXAMPLES / "first.jsonl"), "--got", str(got)]) == 2
    assert f"{got}:1: output:" in capsys.readouterr().err
    assert main(["explain", str(bad), "--svg", str(bad)]) == 2


def test_text_and_results_agree_for_every_tutorial_file() -> None:
    for f in sorted(EXAMPLES.glob("*.jsonl")):
        case = Case.from_jsonl(f.read_text(), str(f))
        steps = explain(case.query, case.events)
        text = explain_text(case.query, steps)
        r: Results = results_of(steps)
        assert f"total: {len(r.pairs)} pair(s), {len(r.aggregates)} aggregate row(s), {len(r.late)} late" in text
