"""``--got`` JSON lines parsed by pyarrow on the executors (:mod:`oij.spark.gotparse`) against the definition.

:func:`oij.spark.gotparse.parse_lines` holds every exactness rule of the new path, so it is checked against
:func:`oij.testing._got.read_got` without Spark, on the lines of the Spark differential test
(``tests/spark/test_spark_scale.py``'s strategy: spaces, other field orders, absent fields, ``kind`` or ``type``,
CR, blank lines, huge and non-integer ids, extra fields, trailing junk) and under ``--got-columns`` mappings: it
either declines (None) or reads exactly the rows ``read_got`` writes, and declines every file ``read_got``
rejects.  The byte ranges are checked to partition the lines for every width.  With Spark, fixed files of every
such shape are read three ways -- the new path alone (``reader="arrow"``, split into ranges of a few bytes),
today's ``from_json`` path alone (``reader="spark"``) and ``read_got`` -- with equal rows and fingerprints
wherever a path accepts, and the default reader falls back to ``from_json`` where a range declines.

Negative controls: the new path must take oij's own output (a path that always declined would pass the rest);
a mutant without the row-count check accepts two objects on one line, which ``read_got`` rejects; a mutant
that reads values as float32 gives other rows and other fingerprints than today's path, and both comparisons
see it.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import types
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oij.spark.gotparse as gp
from oij.io.errors import InputError
from oij.spark.compare import engine_dir
from oij.spark.got import read_got_spark
from oij.testing._got import read_got
from tests.budget import examples
from tests.spark.test_spark_scale import _rows, jsonl_lines

pytestmark = pytest.mark.spark

FIELDS = ("kind", "base", "probe", "count", "value", "id")
MAPPINGS: list[dict[str, str]] = [{}, {"base": "a", "probe": "b"}, {"kind": "type"}, {"kind": "k"},
                                  {"probe": "type"}, {"base": "kind"}, {"count": "value"}, {"id": "base"}]


def _defined(path: str, cols: dict[str, str], d: Path) -> Counter[tuple[Any, ...]] | InputError:
    out = str(d / "py")
    shutil.rmtree(out, ignore_errors=True)
    try:
        read_got(path, cols, out)
    except InputError as e:
        return e
    return _rows(out)


def _parsed(data: bytes, cols: dict[str, str], mod: Any = gp) -> Counter[tuple[Any, ...]] | None:
    tb = mod.parse_lines(data, cols)
    return None if tb is None else Counter(tuple(r[c] for c in FIELDS) for r in tb.to_pylist())


def _rename(line: str, cols: dict[str, str]) -> str:
    """The line with the protocol's field names replaced by the columns ``cols`` maps them to (text only)."""
    for f, c in cols.items():
        line = line.replace(f'"{f}"', f'"{c}"')
    if "kind" in cols:
        line = line.replace('"type"', f'"{cols["kind"]}"')
    return line


# ------------------------------------------------------------------------------------------------ no Spark
INT64 = st.integers(-(2 ** 63), 2 ** 63 - 1) | st.sampled_from([0, -1, 2 ** 63 - 1, -(2 ** 63), 2 ** 63])
VALUE = st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr), INT64.map(str),
                  st.integers(-(10 ** 30), 10 ** 30).map(str),
                  st.sampled_from(["null", "-0.0", "1e-320", "4.9e-324", "1.7976931348623157e308", "1e309", "0.1e1",
                                   "1E+2", "-5e-1", "0.1000000000000000055511151231257827021181583404541015625001"]))


@st.composite
def clean_lines(draw: Any) -> str:
    """Lines close to oij's own (the other strategy's are mostly declined): a kind, its fields, now and then a
    field missing, a null, an id past 64 bits or a negative count."""
    kind = draw(st.sampled_from(["pair", "aggregate", "late"]))
    keys = {"pair": ["base", "probe"], "aggregate": ["base", "count", "value"], "late": ["id"]}[kind]
    parts = [f'"type":"{kind}"']
    for k in keys:
        if draw(st.integers(0, 19)):
            x = draw(VALUE) if k == "value" else str(draw(st.integers(-1, 9) if k == "count" else INT64))
            parts.append(f'"{k}":{"null" if k == "probe" and draw(st.integers(0, 9)) == 0 else x}')
    draw(st.randoms()).shuffle(parts)
    sp: str = draw(st.sampled_from(["", " "]))
    return sp + "{" + f",{sp}".join(parts) + "}" + sp


ODD = st.sampled_from(["", "   ", "[1]", "{bad", "{}{}"])


@given(lines=st.one_of(st.lists(clean_lines(), min_size=1, max_size=6),
                      st.lists(st.one_of(clean_lines(), jsonl_lines(), ODD), min_size=1, max_size=6)),
       cols=st.sampled_from(MAPPINGS), end=st.sampled_from(["\n", ""]))
@settings(max_examples=examples(400, 4000), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_parse_lines_reads_as_read_got_does_or_declines(tmp_path: Path, lines: list[str], cols: dict[str, str],
                                                        end: str) -> None:
    path = tmp_path / "got.jsonl"
    data = ("\n".join(_rename(x, cols) for x in lines) + end).encode()
    path.write_bytes(data)
    want = _defined(str(path), cols, tmp_path)
    got = _parsed(data, cols)
    if isinstance(want, InputError):
        assert got is None, f"read_got rejects ({want}) but the pyarrow parse accepted"
    else:
        assert got is None or got == want


def _own_lines(n: int, seed: int) -> str:
    import random

    rnd = random.Random(seed)
    out = []
    for i in range(n):
        k = rnd.choice(["pair", "pair", "aggregate", "late"])
        row: dict[str, Any] = {"type": k}
        if k == "pair":
            row |= {"base": i, "probe": rnd.choice([None, rnd.randrange(-2 ** 63, 2 ** 63)])}
        elif k == "aggregate":
            row |= {"base": -i, "count": rnd.randrange(5), "value": rnd.choice([None, -0.0, rnd.uniform(-1e9, 1e9)])}
        else:
            row |= {"id": rnd.randrange(-2 ** 63, 2 ** 63)}
        out.append(json.dumps(row, separators=(",", ":") if i % 2 else (", ", ": ")) + "\n")
    return "".join(out)


def test_parse_lines_takes_oijs_own_output(tmp_path: Path) -> None:
    """Negative control of the test above: oij's result lines (and a last line without its newline) are taken."""
    path = tmp_path / "got.jsonl"
    text = _own_lines(300, 1)
    for data in (text, text.rstrip("\n")):
        path.write_text(data)
        want = _defined(str(path), {}, tmp_path)
        assert not isinstance(want, InputError) and _parsed(data.encode(), {}) == want


@given(lines=st.lists(st.sampled_from(['{"type":"late","id":1}', '{"type":"pair","base":2,"probe":3}', "", "x"]),
                      max_size=12), width=st.integers(1, 40), end=st.sampled_from(["\n", ""]))
@settings(max_examples=examples(200, 2000), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_ranges_partition_the_lines(tmp_path: Path, lines: list[str], width: int, end: str) -> None:
    """Every line lands in exactly one range, whole, in order, for any range width (ranges may hold none)."""
    data = ("\n".join(lines) + end).encode() if lines else b""
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    n = max(1, -(-len(data) // width))
    parts = [gp.range_lines(str(path), s, e, len(data)) for s, e in gp.ranges(len(data), n)]
    assert b"".join(parts) == data
    assert all(p == b"" or p.endswith(b"\n") or p is parts[-1] or not data.endswith(b"\n") for p in parts)
    assert all(not p or s == 0 or data[s - 1:s] == b"\n" for p, s in zip(parts, _starts(parts), strict=True))


def _starts(parts: list[bytes]) -> list[int]:
    out, at = [], 0
    for p in parts:
        out.append(at)
        at += len(p)
    return out


def _mutant(old: str, new: str) -> Any:
    """oij.spark.gotparse with ``old`` replaced by ``new`` in its source, as a module off ``sys.modules`` (so that
    Spark's workers get its functions by value, the mutation included)."""
    src = Path(gp.__file__).read_text()
    assert src.count(old) == 1, old
    mod = types.ModuleType("gotparse_mutant")
    exec(compile(src.replace(old, new), "gotparse_mutant", "exec"), mod.__dict__)
    assert "gotparse_mutant" not in sys.modules
    return mod


def test_a_parse_without_the_row_count_check_is_caught(tmp_path: Path) -> None:
    """Negative control: two objects on one line are two rows for pyarrow, an error for read_got."""
    path = tmp_path / "got.jsonl"
    data = b'{"type":"late","id":1}{"type":"late","id":2}\n'
    path.write_bytes(data)
    assert isinstance(_defined(str(path), {}, tmp_path), InputError)
    assert _parsed(data, {}) is None
    lax = _mutant("tb.num_rows != lines or ", "")
    assert _parsed(data, {}, lax) == Counter([("late", None, None, None, None, 1), ("late", None, None, None, None, 2)])


# ------------------------------------------------------------------------------------------------ with Spark
CASES: dict[str, tuple[str, dict[str, str]]] = {
    "own": (_own_lines(200, 2), {}),
    "spaces and orders": (' {"probe": 2 , "type" : "pair","base":1}\t\n{"value":-0.0,"count":0,"base":5,'
                          '"type":"aggregate"}\n{ "id" : -9223372036854775808 , "type":"late" }\n', {}),
    "absent optional fields": ('{"type":"pair","base":1}\n{"type":"aggregate","base":2,"count":3}\n'
                               '{"type":"pair","base":4,"probe":null}\n', {}),
    "no last newline": ('{"type":"pair","base":1,"probe":2}\n{"type":"late","id":3}', {}),
    "mapped columns": ('{"k":"pair","a":1,"b":2}\n{"k":"late","id":9}\n', {"kind": "k", "base": "a", "probe": "b"}),
    "kind field": ('{"kind":"pair","base":1,"probe":2}\n', {}),
    "CRLF": ('{"type":"pair","base":1,"probe":2}\r\n{"type":"late","id":3}\r\n', {}),
    "blank line": ('{"type":"pair","base":1,"probe":2}\n\n{"type":"late","id":3}\n', {}),
    "huge int": ('{"type":"pair","base":1,"probe":18446744073709551615}\n', {}),
    "huge value": ('{"type":"aggregate","base":1,"count":1,"value":123456789012345678901234567890}\n', {}),
    "float id": ('{"type":"late","id":3.0}\n', {}),
    "string id": ('{"type":"late","id":"3"}\n', {}),
    "inferred kind": ('{"base":1,"probe":2}\n', {}),
    "extra field": ('{"type":"late","id":3,"note":"x"}\n', {}),
    "two on a line": ('{"type":"late","id":1}{"type":"late","id":2}\n', {}),
    "bad kind": ('{"type":"Pair","base":1}\n', {}),
    "not JSON": ('{"type":"late","id":1}\n{bad\n', {}),
}
TAKEN = {"own", "spaces and orders", "absent optional fields", "no last newline", "mapped columns", "huge value"}


Prints = dict[int, tuple[int, ...]]


def _read(spark: Any, path: str, cols: dict[str, str], d: Path, reader: str, width: int | None = 16,
          later: list[tuple[Any, Prints]] | None = None) -> tuple[Counter[tuple[Any, ...]], Prints] | None:
    """The rows and fingerprints ``read_got_spark`` remembers with ``reader`` (None: it declined); the lazy
    frame's rows are collected, so the rows are those the comparison would write.  The workers' fingerprints
    (any reader but ``spark``) are checked against Spark's own of the rows here, or, given ``later``, appended
    there (frame, fingerprints) for :func:`_check_prints` to check several reads in one Spark job."""
    from oij.spark import fingerprint as fp

    results = tempfile.mkdtemp(prefix=f"sp-{reader}-", dir=d)  # a frame kept in ``later`` may read from it
    if width is not None:  # at most about 8 ranges: each is a task
        width = max(width, Path(path).stat().st_size // 8)
    n = read_got_spark(spark, path, cols, results, "x", keep=False, reader=reader, range_bytes=width)
    lazy = fp.registered(results, "x")
    if n is None:
        assert lazy is None and not Path(engine_dir(results, "x")).exists(), "a declined read leaves nothing"
        return None
    assert lazy is not None
    fp.unregister(results, "x")
    rows = Counter(tuple(r) for r in lazy.frame.collect())
    assert sum(rows.values()) == n
    if reader != "spark":  # the workers' fingerprints are Spark's own of the rows remembered
        if later is None:
            assert lazy.fingerprint == fp.fingerprint(lazy.frame)
        else:
            later.append((lazy.frame, lazy.fingerprint))
    return rows, lazy.fingerprint


def _check_prints(reads: list[tuple[Any, Prints]]) -> None:
    """The workers' fingerprints of several reads against Spark's own, in one Spark job: fingerprints add up bucket
    by bucket (a count and sums), so Spark's fingerprint of the union of the reads' rows is the sum of each read's.
    Each read's frame is a scan of its own Parquet partition; a difference in one read's fingerprints shows in the
    sum (unless another read's differs by exactly its opposite in all seven numbers of a bucket)."""
    from functools import reduce

    from oij.spark import fingerprint as fp

    assert reads
    total: dict[int, list[int]] = {}
    for _, prints in reads:
        for b, v in prints.items():
            total[b] = [x + y for x, y in zip(total.get(b, [0] * len(v)), v, strict=True)]
    union = reduce(lambda a, b: a.unionByName(b), [f for f, _ in reads])
    assert {b: tuple(v) for b, v in total.items()} == fp.fingerprint(union)


def test_the_arrow_path_reads_as_from_json_and_read_got_do(spark: Any, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Each shape of ``CASES`` read by the new path (ranges of 16 bytes, at most 8 ranges: most lines are split)
    and by read_got; where the new path takes the file (the shapes in ``TAKEN``: the negative control of a path
    that always declines), by today's ``from_json`` path too, with the same rows and fingerprints.  Where the new
    path declines, today's path is what ``test_spark_scale.py`` checks; here the default reader is seen to fall
    back to it (on CRLF lines), and to take the new path's answer where it accepts (on oij's own lines).  A few of
    oij's own lines are also read in one range (the default width: one per core here) and in ranges of 7 bytes
    (most hold no line start), with the same rows.  Every case in one test: the workers' fingerprints of all the reads
    are checked against Spark's in one job (:func:`_check_prints`), not one per read.

    Negative control, on oij's own lines: a mutant that rounds values to float32 on the workers is seen by both
    comparisons (its rows and its fingerprints, each its own, differ from today's path).  Had only the rows been
    bent, ``_read`` would catch the workers' fingerprints disagreeing with Spark's of the rows."""
    later: list[tuple[Any, Prints]] = []
    own: tuple[Path, Path, Any] | None = None
    for i, (case, (text, cols)) in enumerate(CASES.items()):
        d = tmp_path / f"case{i}"
        d.mkdir()
        path = d / "got.jsonl"
        path.write_text(text, newline="")
        want = _defined(str(path), cols, d)
        arrow = _read(spark, str(path), cols, d, "arrow", later=later)
        assert (arrow is not None) == (case in TAKEN), case
        if isinstance(want, InputError):
            assert arrow is None, case
            continue
        old = _read(spark, str(path), cols, d, "spark") if arrow is not None or case == "CRLF" else None
        if arrow is not None:
            assert arrow[0] == want, case
            if old is not None:  # today's path declines some shapes the new one takes (a huge value's text)
                assert arrow == old, case  # the same rows and the same fingerprints
            else:  # read_got's rows, as Spark fingerprints them
                later.append((spark.read.parquet(str(d / "py")), arrow[1]))
        if case == "own":
            own = (path, d, old)
        if case in ("own", "CRLF"):
            assert old is not None, case
            assert _read(spark, str(path), cols, d, "auto", later=later) == (arrow if arrow is not None else old), \
                case
    # the default width (one range per core here) and ranges of 7 bytes (most hold no line start)
    path = tmp_path / "few.jsonl"
    path.write_text(_own_lines(6, 3))
    wide = _read(spark, str(path), {}, tmp_path, "arrow", None, later=later)
    narrow = _read(spark, str(path), {}, tmp_path, "arrow", 7, later=later)
    assert wide is not None and wide == narrow
    _check_prints(later)
    assert own is not None
    path, d, old = own
    assert old is not None
    mutant = _mutant("kept(pc.cast(value, pa.float64()), agg)",
                     "kept(pc.cast(pc.cast(value, pa.float32()), pa.float64()), agg)")
    monkeypatch.setattr(gp, "arrow_rows", mutant.arrow_rows)
    monkeypatch.setattr(gp, "arrow_prints", mutant.arrow_prints)
    bent = _read(spark, str(path), {}, d, "arrow")
    assert bent is not None
    assert bent[0] != old[0] and bent[1] != old[1]


# ------------------------------------------------------------------------------------------------ worker hashes
def _edge_table() -> Any:
    """Rows of every kind with random ids and the values a cell is hard for: powers of two and their neighbours,
    the range's ends, subnormals, zeros of both signs, random bit patterns, nulls."""
    import math
    import random
    import struct

    import pyarrow as pa

    from oij.spark.compare import RESULT_SCHEMA

    rnd = random.Random(5)
    vals: list[float | None] = [None, 0.0, -0.0, 1.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]
    for k in range(-905, 905, 3):
        p = 2.0 ** k
        vals += [p, math.nextafter(p, 0), math.nextafter(p, math.inf), -p, p * (1 + 2 ** -40)]
    for _ in range(3000):
        bits = struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0]
        vals.append(rnd.choice([rnd.uniform(-1e6, 1e6), bits, float(rnd.randrange(1, 10 ** 6)),
                                rnd.randrange(1000) * 0.1]))
    vals = [v for v in vals if v is None or math.isfinite(v)]
    rows: list[tuple[Any, ...]] = [("aggregate", rnd.randrange(-10 ** 9, 10 ** 9), None, rnd.randrange(10), v, None)
                                   for v in vals]
    for _ in range(2000):
        i = rnd.randrange(-(2 ** 63), 2 ** 63)
        rows.append(("pair", rnd.choice([i, rnd.randrange(-5000, 5000)]), rnd.choice([None, i]), None, None, None)
                    if rnd.random() < 0.7 else ("late", None, None, None, None, i))
    return pa.table([pa.array([r[c] for r in rows], f.type) for c, f in enumerate(RESULT_SCHEMA)],
                    schema=RESULT_SCHEMA)


def _prints(mod: Any, tb: Any) -> dict[int, tuple[int, ...]]:
    f = mod.fingerprint_table(tb)
    names = ("n", "s0", "s1", "s2", "s3", "s4", "s5")
    return {int(b): tuple(int(f[c][i]) for c in names) for i, b in enumerate(f["bucket"])}


def test_the_workers_fingerprints_are_sparks(spark: Any, tmp_path: Path) -> None:
    """:func:`oij.spark.gotparse.fingerprint_table` (numpy: Spark's xxhash64, fdlibm's log) equals
    :func:`oij.spark.fingerprint.fingerprint` on rows whose values probe every branch of the cell (a subnormal
    used to make Spark's cell divide by zero, an error under ANSI SQL), and the ported log2 is Spark's to the
    bit.  Negative controls: the port with a term of fdlibm's log left out, and the hash without -0.0 read as
    0.0, each give other fingerprints."""
    import numpy as np
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from oij.spark import fingerprint as fp

    tb = _edge_table()
    pq.write_table(tb, str(tmp_path / "edge.parquet"))
    want = fp.fingerprint(spark.read.parquet(str(tmp_path / "edge.parquet")))
    assert _prints(gp, tb) == want
    values = [v for v in tb.column("value").to_pylist() if v and 2.0 ** -900 <= abs(v) <= 2.0 ** 900]
    df = spark.createDataFrame([(abs(v),) for v in values], "v double").select("v", F.log2("v").alias("l"))
    got = {r["v"]: r["l"] for r in df.collect()}
    arr = np.array(list(got))
    ours = gp.fdlibm_log(arr) / gp.fdlibm_log(np.array([2.0]))[0]
    assert [float(x) for x in ours] == [got[v] for v in arr.tolist()]
    short = _mutant("dk * ln2_hi - ((hfsq - (s * (hfsq + r) + dk * ln2_lo)) - f)",
                    "dk * ln2_hi - ((hfsq - (s * r - dk * ln2_lo)) - f)")  # the port's first bug
    assert [float(x) for x in short.fdlibm_log(arr) / short.fdlibm_log(np.array([2.0]))[0]] != \
        [got[v] for v in arr.tolist()]
    signed = _mutant("np.where(c == 0.0, 0.0, c).view(u)", "c.view(u)")
    assert _prints(signed, tb) != want
