"""Faithful encodings (issue 46): integer-typed numbers, key order and whitespace are features of generated
cases; ``oij conform --replay FILE`` sends the file's own bytes after validating them.

* Every encoding, with every text feature, reads back as the same case (and the features do what they say).
* Negative control: ``int-values-integer-avg`` (tests/impls/accum_bugs.py: an average over values written as
  JSON integers taken in integer arithmetic) fails ``--replay`` of a file with ``"value":1`` and
  ``"value":2``, while the same case as the kit would write it (``1.0``, ``2.0``) passes: the replay judges the
  user's bytes, not a re-encoding of them.  The correct implementation passes both.
* Bad input to ``--replay``: one line naming file, line and field, exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oij.spec.model import StreamTuple

from oij.cli import main
from oij.testing import Case
from oij.testing._case import SPACE_STYLES, encode
from oij.testing._cases import cases, text_features

IMPLS = Path(__file__).parent.parent / "impls"
BUG = [sys.executable, str(IMPLS / "accum_bugs.py"), "int-values-integer-avg"]
CORRECT = [sys.executable, str(IMPLS / "accum_bugs.py"), "correct"]
INT_AVG = ('{"type":"query","lower":-3,"upper":0,"aggregate":"avg"}\n'
           '{"type":"tuple","side":"probe","id":1,"ts":8,"key":1,"value":1}\n'
           '{"type":"tuple","side":"probe","id":2,"ts":9,"key":1,"value":2}\n'
           '{"type":"tuple","side":"base","id":3,"ts":10,"key":1}\n'
           '{"type":"end"}\n')


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases(["watermarks", "lateness", "aggregates", "cond", "channels", "representation", "negative-ts",
              "mixed-keys"]),
       st.sampled_from(["full", "minimal", "mixed:5", "explicit"]),
       st.sampled_from(["", "|int", "|float"]), st.integers(-1, 2**16), st.integers(-1, 2**16))
def test_every_encoding_with_every_text_feature_reads_back_as_the_same_case(
        case: Case, base: str, numbers: str, order: int, space: int) -> None:
    enc = base + numbers + (f"|order:{order}" if order >= 0 else "") + (f"|space:{space}" if space >= 0 else "")
    back = Case.from_jsonl(encode(Case(case.query, case.events).to_jsonl(), enc))
    assert (back.query, back.events) == (case.query, case.events), enc


def test_the_text_features_do_what_they_say() -> None:
    case = Case.from_jsonl(INT_AVG)
    floats = Case(case.query, case.events).to_jsonl()
    assert '"value":1.0' in floats and '"value":1,' not in floats
    ints = Case(case.query, case.events, encoding="full|int").to_jsonl()
    assert '"value":1,' in ints and '"value":2,' in ints and "1.0" not in ints
    half = Case(case.query, tuple(e._replace(value=0.5) if isinstance(e, StreamTuple) else e for e in case.events),
                encoding="full|int").to_jsonl()
    assert '"value":0.5' in half  # only integral values become integers
    firsts = {next(iter(orjson.loads(line))) for n in range(40)
              for line in Case(case.query, case.events, encoding=f"full|order:{n}").to_jsonl().splitlines()}
    assert firsts - {"type"}  # "type" is not always first
    texts = [Case(case.query, case.events, encoding=f"full|space:{n}").to_jsonl() for n in range(40)]
    assert any("\r\n" in t for t in texts) and any("\t" in t for t in texts) and any(" : " in t for t in texts)
    assert len(SPACE_STYLES) == 6


def test_generated_cases_carry_each_text_feature() -> None:
    seen: set[str] = set()

    @settings(max_examples=200, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases())
    def collect(case: Case) -> None:
        assert case.encoding.endswith(text_features(case))
        seen.update(f.split(":")[0] for f in case.encoding.split("|")[1:])

    collect()
    assert seen == {"int", "float", "order", "space"}


def _conform(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, str]:
    rc = main(["conform", "--replay-out", str(tmp_path / "fail.jsonl"), *args])
    return rc, capsys.readouterr().out


def test_replay_sends_the_files_own_bytes_and_finds_the_integer_typed_bug(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ints = tmp_path / "ints.jsonl"
    ints.write_text(INT_AVG)
    rc, out = _conform(capsys, tmp_path, "--replay", str(ints), "--", *BUG)
    assert rc == 1, out
    assert f"sent the file's own {len(INT_AVG)} bytes, validated first" in out and "value=1.5" in out, out
    assert '"value":2}' in out  # the report quotes the file as sent
    # the same case as the kit writes it (floats): the bug does not show, so a re-encoding replay would pass
    floats = tmp_path / "floats.jsonl"
    floats.write_text(Case.from_jsonl(INT_AVG).to_jsonl())
    rc, out = _conform(capsys, tmp_path, "--replay", str(floats), "--", *BUG)
    assert rc == 0 and out.startswith("conforms on "), out
    rc, out = _conform(capsys, tmp_path, "--replay", str(ints), "--", *CORRECT)
    assert rc == 0 and "sent the file's own" in out, out


def test_replay_sends_bytes_the_kit_would_never_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a BOM, CRLF, a blank line, tabs and no newline at the end: valid, and sent as they are
    odd = tmp_path / "odd.jsonl"
    odd.write_bytes(b"\xef\xbb\xbf" + INT_AVG.replace("\n", "\r\n").replace('{"type":"tuple"', '\t{"type":"tuple"')
                    .replace("\r\n{\"type\":\"end\"}\r\n", "\r\n\r\n{\"type\":\"end\"}").encode())
    echo = tmp_path / "echo.py"
    seen = tmp_path / "seen.bin"
    echo.write_text("import sys\nopen(sys.argv[1], 'wb').write(sys.stdin.buffer.read())\n"
                    "print('{\"type\":\"aggregate\",\"base\":3,\"count\":2,\"value\":1.5}')\n")
    rc, out = _conform(capsys, tmp_path, "--replay", str(odd), "--", sys.executable, str(echo), str(seen))
    assert rc == 0, out
    assert seen.read_bytes() == odd.read_bytes()


def test_replay_of_a_bad_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(INT_AVG.replace('"value":2', '"value":"two"'))
    rc = main(["conform", "--replay", str(bad), "--", *CORRECT])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "bad.jsonl:3" in err and "value" in err, err
    rc = main(["conform", "--replay", str(tmp_path / "absent.jsonl"), "--", *CORRECT])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "absent.jsonl" in err, err
