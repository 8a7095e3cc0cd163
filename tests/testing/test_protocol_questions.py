"""Issue 65: the questions an implementer asks of the protocol, each answered in the docs and pinned here.

docs/format.rst ("Questions implementers ask") answers them; each answer is pinned by a test vector
(``oij/testing/_vectors.py``, folder ``questions/``) or, where no case can carry it (a bad input, a kill), by a
test below.  Every check has a negative control: the wrong answer fails it.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
from oij.spec.model import End, Query, StreamTuple, Watermark
from oij.spec.recovery import Checkpoint

from oij.io.errors import InputError
from oij.io.jsonlread import read_jsonl
from oij.testing._case import Case
from oij.testing._protocol import parse_output
from oij.testing._restarts import KillPoint, plan_json, read_plan, run_plan
from oij.testing._vectors import MAX_DOUBLE, expected_lines, question_vectors

ROOT = Path(__file__).resolve().parents[2]
BUGS = ROOT / "tests" / "impls" / "restart_bugs.py"
pytestmark = pytest.mark.timeout(120)

ANSWERS = {
    "inner-count-empty-window": '{"type":"aggregate","base":2,"count":0,"value":0}',
    "inner-sum-empty-window": '{"type":"aggregate","base":2,"count":0,"value":0.0}',
    "inner-avg-empty-window": '{"type":"aggregate","base":2,"count":0,"value":null}',
    "inner-min-empty-window": '{"type":"aggregate","base":2,"count":0,"value":null}',
    "sum-max-double-plus-half-ulp": '{"type":"aggregate","base":3,"count":2,"value":"inf"}',
    "sum-max-double-plus-half-ulp-neg": '{"type":"aggregate","base":3,"count":2,"value":"-inf"}',
    "sum-max-double-plus-below-half-ulp": '{"type":"aggregate","base":3,"count":2,"value":1.7976931348623157e+308}',
    "sum-max-double-plus-quarter-ulp": '{"type":"aggregate","base":3,"count":2,"value":1.7976931348623157e+308}',
    "sum-max-double-plus-one-ulp": '{"type":"aggregate","base":3,"count":2,"value":"inf"}',
    "avg-max-double-plus-half-ulp": '{"type":"aggregate","base":3,"count":2,"value":8.98846567431158e+307}',
    "int-value-above-2^53-sum": '{"type":"aggregate","base":3,"count":2,"value":0.0}',
    "int-value-above-2^53-max": '{"type":"aggregate","base":3,"count":2,"value":9007199254740992.0}',
}


def test_each_question_vector_gives_the_documented_answer() -> None:
    got = {v.name: expected_lines(v.case, "canonical").strip() for v in question_vectors()}
    assert got == ANSWERS
    # negative controls: the other reading of each edge is a different line, which the kit tells apart
    assert parse_output(ANSWERS["sum-max-double-plus-half-ulp"]) != parse_output(
        ANSWERS["sum-max-double-plus-below-half-ulp"])
    assert parse_output(ANSWERS["int-value-above-2^53-sum"]) != parse_output(
        '{"type":"aggregate","base":3,"count":2,"value":1.0}')


def test_the_edge_of_the_double_range_is_half_an_ulp_above_the_largest_double() -> None:
    half = 2.0 ** 970
    assert sys.float_info.max == MAX_DOUBLE and MAX_DOUBLE + half / 2 == MAX_DOUBLE
    from fractions import Fraction

    with pytest.raises(OverflowError):  # the exact value max + half an ulp rounds (to even) out of range
        float(Fraction(MAX_DOUBLE) + Fraction(half))
    assert float(Fraction(MAX_DOUBLE) + Fraction(half) - 1) == MAX_DOUBLE  # a hair below rounds down


def test_an_integer_value_above_2_53_is_sent_as_written_and_read_as_the_nearest_double() -> None:
    (v,) = [v for v in question_vectors() if v.name == "int-value-above-2^53-sum"]
    text = v.case.to_jsonl()
    assert '"value":9007199254740993,' in text  # the vector's own text (oij vectors export writes it)
    _, events = read_jsonl(io.BytesIO(text.encode()), "v")
    probe = next(e for e in events if isinstance(e, StreamTuple))
    assert probe.value == 9007199254740992.0 and type(probe.value) is float


def _read(lines: list[str]) -> list[object]:
    _, events = read_jsonl(io.BytesIO(("\n".join(lines) + "\n").encode()), "in.jsonl")
    return list(events)


def test_the_2_53_limit_is_on_fields_not_values() -> None:
    q = '{"type":"query","lower":-1,"upper":0,"cond":[{"a":"x","op":"<","b":"x"}]}'
    with pytest.raises(InputError, match=r"fields\.x.*2\^53"):
        _read([q, '{"type":"tuple","side":"probe","id":1,"ts":5,"key":1,"fields":{"x":9007199254740993}}',
               '{"type":"end"}'])
    assert _read([q, '{"type":"tuple","side":"probe","id":1,"ts":5,"key":1,"fields":{"x":9007199254740992}}',
                  '{"type":"end"}'])  # the control: at the limit
    ok = _read(['{"type":"query","lower":-1,"upper":0}',
                '{"type":"tuple","side":"probe","id":1,"ts":5,"key":1,"value":100000000000000000000000000}',
                '{"type":"end"}'])
    assert isinstance(ok[0], StreamTuple) and ok[0].value == 1e26
    with pytest.raises(InputError, match="value"):  # beyond the double range: an error, not a rounding
        _read(['{"type":"query","lower":-1,"upper":0}',
               '{"type":"tuple","side":"probe","id":1,"ts":5,"key":1,"value":' + "9" * 400 + "}", '{"type":"end"}'])


def test_a_watermark_line_in_lateness_mode_is_an_error() -> None:
    q = '{"type":"query","lower":-1,"upper":0,"lateness":2}'
    with pytest.raises(InputError, match="type: watermark events are not allowed when the query sets lateness"):
        _read([q, '{"type":"watermark","ts":9}', '{"type":"end"}'])
    assert _read([q.replace(',"lateness":2', ""), '{"type":"watermark","ts":9}', '{"type":"end"}'])  # control


# ------------------------------------------------------------------------------------------ the kill plan


def test_the_kill_plan_schema_is_the_format_read_plan_reads() -> None:
    from oij.testing._schema import KILL_PLAN, errors, schema

    s = schema(KILL_PLAN)
    valid = [[], [["fed", 3]], [["fed", 3], ["checkpoint", 1], ["row", 2]]]
    invalid = [{}, [["fed"]], [["fed", 0]], [["fed", 1, 2]], [["bogus", 1]], [["row", 1.5]], [["row", True]],
               [[1, "fed"]], "fed"]
    for plan in valid + invalid:
        assert (not errors(plan, s)) == (plan in valid), plan
        try:
            read_plan(json.dumps(plan))
            reads = True
        except ValueError:
            reads = False
        assert reads == (plan in valid), plan
    plan = (KillPoint("fed", 3), KillPoint("row", 1))
    assert not errors(json.loads(plan_json(plan)), s) and read_plan(plan_json(plan).decode()) == plan


def test_the_kill_plan_schema_means_the_same_to_a_draft_2020_12_validator() -> None:
    from oij.testing._schema import KILL_PLAN, errors, schema

    jsonschema = pytest.importorskip("jsonschema")  # not a dependency of oij: checked where it is installed
    s = schema(KILL_PLAN)
    jsonschema.Draft202012Validator.check_schema(s)
    for plan in ([], [["fed", 3], ["row", 2]], [["fed", 0]], [["fed", 1, 2]], [["bogus", 1]], [["row", True]]):
        assert (not errors(plan, s)) == jsonschema.Draft202012Validator(s).is_valid(plan), plan


# ------------------------------------------------------------------------- a checkpoint line before a kill

CASE = Case(Query(-5, 0), (StreamTuple("probe", 1, 8, "k"), StreamTuple("base", 2, 10, "k"),
                           StreamTuple("probe", 3, 9, "k"), Watermark(12), End()))

WRITER = """
import os, sys, time
sys.stdin.readline()
if os.environ["OIJ_RESTART"] == "0":
    sys.stdin.readline()
    row, mark = '{"type":"late","id":1}\\n', '{"type":"checkpoint","events":1}\\n'
    if sys.argv[1] == "together":
        sys.stdout.write(row + mark)  # the checkpoint line is in the pipe when the kit kills on the row
        sys.stdout.flush()
    else:
        sys.stdout.write(row)
        sys.stdout.flush()
        time.sleep(30)  # killed on the row, before it writes its checkpoint line
        sys.stdout.write(mark)
    time.sleep(30)
sys.stdin.read()
"""


@pytest.mark.parametrize(("how", "restored_at"), [("together", 1), ("later", 0)])
def test_a_checkpoint_line_written_before_the_kill_counts(how: str, restored_at: int) -> None:
    run = run_plan([sys.executable, "-c", WRITER, how], CASE, (KillPoint("row", 1),), timeout=20)
    first, second = run.incarnations
    assert first.killed == KillPoint("row", 1)
    assert (Checkpoint(1) in first.output) == (restored_at == 1)
    assert second.start == restored_at  # OIJ_CHECKPOINT of the next incarnation


def test_the_report_says_how_a_kill_between_events_came() -> None:
    on_line = run_plan([sys.executable, str(BUGS), "correct"], CASE, (KillPoint("fed", 2),))
    text = "\n".join(on_line.timeline())
    assert "killed after event 2, on its checkpoint line at event 2" in text and "at rest" not in text, text
    # the negative control: an implementation that never checkpoints is killed at rest, and the report says so
    silent = [sys.executable, "-c", "import sys\nfor line in sys.stdin: pass"]
    at_rest = run_plan(silent, CASE, (KillPoint("fed", 2),), timeout=20, quiet=0.3)
    text = "\n".join(at_rest.timeline())
    assert "killed after event 2 (no checkpoint at event 2 or later; its output at rest for 0.3 s)" in text, text


# ------------------------------------------------------------------------------------- links in --help

DOC_LINK = re.compile(r"docs/[\w.-]+\.rst")


def dangling_doc_links(text: str) -> list[str]:
    """The ``docs/NAME.rst`` paths in ``text`` that are not a page of the docs."""
    return [p for p in DOC_LINK.findall(text) if not (ROOT / p).is_file()]


def _help_texts() -> list[str]:
    import argparse

    from oij.cli import build_parser

    out = []
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += [sub.description or "", sub.epilog or ""]
                out += [a.help or "" for a in sub._actions]
    return out


def test_every_docs_page_the_help_names_exists() -> None:
    texts = _help_texts()
    assert len(texts) > 100 and any("docs/conformance.rst" in t for t in texts)
    assert [p for t in texts for p in dangling_doc_links(t)] == []
    assert dangling_doc_links("see docs/profiles.rst") == ["docs/profiles.rst"]  # the negative control
