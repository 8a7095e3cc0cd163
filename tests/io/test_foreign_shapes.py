"""Valid oij-jsonl in shapes other than oij's writer's: the columnar path reads what the per-line reader reads.

Files another tool writes differ from oij's in ways the format allows -- any field order, spaces after
``:`` and ``,``, absent optional fields, string keys, CRLF, values with exponents, blank lines, spaces
before a line's end.  The general columnar path (pyarrow's reader and the checks of :mod:`oij.io.columnar`)
must take every such file (no block left to the per-line reader) and give exactly the per-line reader's
events; with one error planted, both give the same error (file, line, field) after the same events.

Negative controls: a string check that compares lengths only (not bytes) accepts a side the per-line reader
rejects, and the differential check sees it; without the template's probe a foreign chunk is parsed whole by
the template before it fails.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oij.io import columnar as blocks_mod
from oij.io import template as template_mod
from tests.io.test_blocks import _blocks, _per_line, _same  # the differential of the two readers

pytestmark = pytest.mark.timeout(600)


def _number(draw: st.DrawFn, v: float) -> str:
    """A JSON spelling of the double ``v``: shortest repr, an exponent, or an integer when it is one."""
    style = draw(st.sampled_from(["repr", "exp", "EXP", "int"]))
    if style == "int" and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    if style in ("exp", "EXP"):
        text = f"{v:.17e}" if draw(st.booleans()) else f"{v:e}"
        if float(text) != v:
            text = f"{v:.17e}"
        return text.upper() if style == "EXP" else text
    return repr(v)


@st.composite
def foreign_file(draw: st.DrawFn, plant: bool = False) -> bytes:
    """A valid oij-jsonl file in a foreign shape (module docstring); with ``plant``, one line made invalid."""
    lateness = draw(st.sampled_from([None, 5]))
    channels = draw(st.integers(1, 3))
    keys = draw(st.sampled_from(["int", "str", "long-str"]))
    sep = draw(st.sampled_from([(",", ":"), (", ", ": "), (" , ", " : "), (",\t", ":")]))
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    shuffle = draw(st.booleans())
    query: dict[str, Any] = {"type": "query", "lower": -5, "upper": draw(st.integers(0, 5)), "channels": channels}
    if lateness is not None:
        query["lateness"] = lateness
    objs: list[dict[str, Any]] = []
    n = draw(st.integers(1, 40))
    for i in range(n):
        if lateness is None and draw(st.integers(0, 5)) == 0:
            w: dict[str, Any] = {"type": "watermark", "ts": draw(st.integers(-20, 60))}
            if channels > 1 or draw(st.booleans()):
                w["channel"] = draw(st.integers(0, channels - 1))
            objs.append(w)
            continue
        k = draw(st.integers(0, 4))
        key: Any = k if keys == "int" else f"k{k}" if keys == "str" else f"key-{'é' * k}-{k}-long"
        t: dict[str, Any] = {"type": "tuple", "side": draw(st.sampled_from(["base", "probe"])), "id": i * 3 + 1,
                             "ts": draw(st.integers(-10, 60)), "key": key}
        if draw(st.booleans()):
            t["value"] = draw(st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=64),
                                        st.integers(-1000, 1000).map(float)))
        if draw(st.booleans()):
            t["channel"] = draw(st.integers(0, channels - 1))
        objs.append(t)
    ended = draw(st.integers(0, 9)) > 0
    if ended:
        objs.append({"type": "end"})
    if plant and objs:
        i = draw(st.integers(0, len(objs) - 1))
        o = objs[i]
        bad = draw(st.sampled_from(["side", "id-dup", "id-float", "ts-range", "channel", "unknown", "missing",
                                    "null", "key-bool", "value-str", "type"]))
        if bad == "side" and "side" in o:
            o["side"] = draw(st.sampled_from(["bass", "Base", "prob3", ""]))
        elif bad == "id-dup" and "id" in o and i > 0 and "id" in objs[0]:
            o["id"] = objs[0]["id"]
        elif bad == "id-float" and "id" in o:
            o["id"] = float(o["id"])
        elif bad == "ts-range" and "ts" in o:
            o["ts"] = draw(st.sampled_from([(1 << 62) + 1, -(1 << 62) - 1, 1 << 64]))
        elif bad == "channel":
            o["channel"] = draw(st.sampled_from([channels, -1, 1.0]))
        elif bad == "unknown":
            o["extra"] = 1
        elif bad == "missing" and "ts" in o:
            del o["ts"]
        elif bad == "null":
            o[draw(st.sampled_from(["value", "channel", "key"]))] = None
        elif bad == "key-bool" and "key" in o:
            o["key"] = True
        elif bad == "value-str" and o["type"] == "tuple":
            o["value"] = "1.5"
        else:
            o["type"] = draw(st.sampled_from(["Tuple", "tuples", "query"]))
    lines: list[bytes] = []
    for o in [query, *objs]:
        items = list(o.items())
        if shuffle:
            items = draw(st.permutations(items))
        parts = []
        for name, v in items:
            text = _number(draw, v) if type(v) is float else json.dumps(v, ensure_ascii=draw(st.booleans()))
            parts.append(f'"{name}"{sep[1]}{text}')
        line = ("{" + sep[0].join(parts) + "}").encode()
        tail = draw(st.sampled_from([b"", b"", b"", b" ", b"\t", b" \r"]))
        lines.append(line + tail)
        if draw(st.integers(0, 15)) == 0:
            lines.append(draw(st.sampled_from([b"", b"  ", b"\t"])))
    return eol.join(lines) + (eol if draw(st.booleans()) else b"")


BLOCKS = st.sampled_from([256, 4096, 1 << 20])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=foreign_file(), block=BLOCKS)
def test_every_valid_foreign_shape_takes_the_columnar_path_and_reads_the_same(data: bytes, block: int) -> None:
    want = _per_line(data)
    before = dict(blocks_mod.STATS)
    got = _blocks(data, block)
    assert _same(want, got), (want, got)
    if want[1] is None:  # a valid file: no block went to the per-line reader
        assert blocks_mod.STATS["slow"] == before["slow"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=foreign_file(plant=True), block=BLOCKS)
def test_a_planted_error_in_a_foreign_shape_gets_the_line_readers_error(data: bytes, block: int) -> None:
    assert _same(_per_line(data), _blocks(data, block))


def test_a_bad_side_is_an_error_naming_file_line_and_field() -> None:
    data = (b'{"type": "query", "lower": -5, "upper": 0}\n'
            b'{"ts": 1, "type": "tuple", "side": "base", "id": 1, "key": "a"}\n'
            b'{"ts": 2, "type": "tuple", "side": "prob3", "id": 2, "key": "a"}\n{"type": "end"}\n')
    got = _blocks(data, 1 << 20)
    assert got[1] is not None and got[1].startswith("f:3: side:"), got[1]
    assert _same(_per_line(data), got)


def test_negative_control_a_string_check_on_lengths_only_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A vectorised ``_equals`` that compares lengths and not bytes reads ``"prob3"`` as ``"probe"``: the
    differential check must see the difference (else it could not fail)."""
    data = (b'{"type": "query", "lower": -5, "upper": 0}\n'
            b'{"ts": 1, "type": "tuple", "side": "base", "id": 1, "key": "a"}\n'
            b'{"ts": 2, "type": "tuple", "side": "prob3", "id": 2, "key": "a"}\n{"type": "end"}\n')
    assert _same(_per_line(data), _blocks(data, 1 << 20))

    def lengths_only(a: Any, text: str) -> Any:
        import pyarrow as pa

        if pa.types.is_null(a.type):
            return np.zeros(len(a), np.bool_)
        offs, _data = blocks_mod._string_parts(a)
        return (offs[1:] - offs[:-1]) == len(text)

    monkeypatch.setattr(blocks_mod, "_equals", lengths_only)
    assert not _same(_per_line(data), _blocks(data, 1 << 20))


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(st.none(), st.sampled_from(["tuple", "tuplf", "uple", "tuples", "probe", "prob", "base",
                                                      "basE", "watermark", "watermarK", "end", "", "\u00e9nd"]),
                          st.text(max_size=10)), max_size=60),
       st.integers(0, 5), st.booleans(), st.sampled_from(["tuple", "probe", "base", "end", "watermark", ""]))
def test_equals_is_string_equality(values: list[str | None], cut: int, large: bool, text: str) -> None:
    """``_equals`` (one masked 8-byte word a row, byte by byte past 8 bytes) against Python's ``==``: on string
    and large-string columns, sliced (an offset into the buffers), with nulls, and as a dictionary column."""
    import pyarrow as pa

    col = pa.array(values, pa.large_string() if large else pa.string())[cut:]
    want = [v == text for v in values[cut:]]
    assert blocks_mod._equals(col, text).tolist() == want
    assert blocks_mod._equals(col.dictionary_encode(), text).tolist() == want


def test_negative_control_keys_packed_without_their_last_byte_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """String keys are packed into integers for numpy's unique: a packing that drops a byte makes two keys one,
    and the differential check sees it."""
    data = (b'{"type":"query","lower":-5,"upper":0}\n'
            b'{"type":"tuple","side":"base","id":1,"ts":1,"key":"abcdefgh"}\n'
            b'{"type":"tuple","side":"probe","id":2,"ts":1,"key":"abcdefgX"}\n{"type":"end"}\n')
    assert _same(_per_line(data), _blocks(data, 1 << 20))
    real = blocks_mod._string_parts

    def clipped(a: Any) -> Any:
        offs, d = real(a)
        d = d.copy()
        d[offs[:-1][offs[1:] - offs[:-1] >= 8] + 7] = ord("h")  # every eighth byte (of a key) read as "h"
        return offs, d

    monkeypatch.setattr(blocks_mod, "_string_parts", clipped)
    assert not _same(_per_line(data), _blocks(data, 1 << 20))


def _foreign_chunk(lines: int) -> bytes:
    body = b"".join(b'{"type": "tuple", "side": "base", "id": %d, "ts": %d, "key": 1}\n' % (i + 1, i)
                    for i in range(lines))
    return b'{"type":"query","lower":-5,"upper":0}\n' + body + b'{"type":"end"}\n'


@pytest.mark.parametrize("probe", [True, False])
def test_the_template_fails_on_the_first_lines_of_a_foreign_chunk(monkeypatch: pytest.MonkeyPatch,
                                                                  probe: bool) -> None:
    """A chunk in another shape costs the template a few hundred bytes, not a pass over the chunk; negative
    control: without the probe, the template's parse reads the whole chunk."""
    data = _foreign_chunk(5000)
    seen: list[int] = []
    real = template_mod._parse

    def spy(chunk: bytes, q: Any, probe: bool = False) -> Any:
        seen.append(len(chunk))
        return real(chunk, q, probe)

    monkeypatch.setattr(template_mod, "_parse", spy)
    if not probe:
        monkeypatch.setattr(template_mod, "PROBE_LINES", 10**9)
    got = _blocks(data, 1 << 20)
    assert got[1] is None and len(got[0]) == 5001
    assert seen
    if probe:
        assert max(seen) < 4096, seen
    else:
        assert max(seen) > len(data) // 2, seen


def _object_lines_by_definition(chunk: bytes, lines: int) -> int | None:
    """:func:`oij.io.columnar._object_lines` by its definition, one line at a time."""
    parts = chunk.split(b"\n")
    if chunk.endswith(b"\n"):
        parts.pop()
    if len(parts) != lines:
        return None
    kept = [p.rstrip(b" \t\r") for p in parts]
    if any(k and not k.endswith(b"}") for k in kept):
        return None
    return sum(1 for k in kept if k)


LINE_ENDS = st.lists(st.tuples(st.sampled_from([b"", b'{"a":1}', b'{"a":1', b"x}", b" }"]),
                               st.lists(st.sampled_from([b" ", b"\t", b"\r"]), max_size=30).map(b"".join)),
                     min_size=1, max_size=12)


@settings(max_examples=300, deadline=None, database=None)
@given(rows=LINE_ENDS, last_newline=st.booleans(), off=st.integers(-1, 1))
def test_object_lines_is_its_definition_with_runs_of_trailing_whitespace(
        rows: list[tuple[bytes, bytes]], last_newline: bool, off: int) -> None:
    """Runs of trailing whitespace up to 30 bytes, past :data:`~oij.io.columnar.TRAIL_STEPS`: the vectorised
    steps and the per-line strip of the longer runs give the definition's count (or None)."""
    chunk = b"\n".join(body + tail for body, tail in rows) + (b"\n" if last_newline else b"")
    lines = len(rows) + off
    assert blocks_mod._object_lines(chunk, lines) == _object_lines_by_definition(chunk, lines)


def test_negative_control_long_runs_need_the_per_line_strip(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the strip of the runs longer than TRAIL_STEPS (the vectorised steps alone), a line that ends in
    ``}`` and 20 spaces is taken for a line that does not: the property above sees it."""
    chunk = b'{"a":1}' + b" " * 20 + b"\n" + b"\n"
    assert blocks_mod._object_lines(chunk, 2) == _object_lines_by_definition(chunk, 2) == 1
    monkeypatch.setattr(blocks_mod, "_strip_runs", lambda *_: None)
    assert blocks_mod._object_lines(chunk, 2) != _object_lines_by_definition(chunk, 2)
