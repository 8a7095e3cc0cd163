r"""The fastest way into columns: oij-jsonl lines that all follow one layout per line kind, parsed by position.

:func:`oij.io.jsonlwrite.format_event` writes every event in one of three shapes::

    {"type":"tuple","side":"base","id":<int>,"ts":<int>,"key":<int>,"value":<float>,"channel":<int>}
    {"type":"watermark","ts":<int>,"channel":<int>}
    {"type":"end"}

and other tools write their own fixed shapes: ``json.dumps``'s ``{"type": "tuple", "side": "base", ...}``,
another field order, no ``"value"`` or ``"channel"``, string keys.  :func:`parse_template` takes a chunk of
lines (each ending with a newline, or a CR and a newline) whose lines of each kind all follow *one* layout,
whatever it is.  It learns the layout of a kind from the chunk's first line of that kind with a small exact
tokenizer (:func:`learn`): the line is cut into ``T0 f1 T1 f2 ... fn Tn``, the fixed texts ``Ti`` being the
exact bytes between the field values (braces, names, colons, commas, whatever spaces the line has; the constant
``"type"`` value is part of ``T0``, the quotes of a string value part of the texts around it).  A layout is
learned only when

* the line is one flat JSON object whose first field is ``"type"`` (its value ``"tuple"`` or ``"watermark"``),
  every other field one of its kind's (``side``, ``id``, ``ts``, ``key``, optional ``value`` and ``channel``;
  ``ts``, optional ``channel``), each at most once, every required one present: so a line that matches the
  layout byte for byte has no duplicate, missing or unknown field (a duplicate field is never accepted: orjson
  and msgspec keep its last value, a layout cannot hold one);
* ``side`` is a string (``"base"`` or ``"probe"``), ``key`` a number or a string, the others numbers;
* no fixed text is longer than ``_MAX_TEXT`` bytes.

Then, with numpy, one pass for the line ends and per kind and field a few operations on 8-byte words read at
computed offsets: every fixed text compared, the end of a number found by the zero-byte trick (the first
byte of the text after it: a space, comma or brace, never part of a number), the digits of a number turned
into an int eight at a time (SWAR).  The lines are classified by the byte where the first line's ``"type"``
value starts (``t`` or ``w``) and each must match its kind's layout.  The chunk is accepted only when that
*proves* every byte of every line is in its place:

* each line is ``T0 v1 T1 v2 ... vn Tn`` of its kind's layout, every fixed text compared byte by byte at its
  position and the last one ending where the line ends: so nothing is left over, missing, reordered or
  repeated, and no line holds a second object; since every value has the grammar of the value learned (a
  number for a number, a string for a string, below), the line is the learned line with other values, the
  same JSON object structure;
* ``side`` is the literal ``base`` or ``probe`` (variable width: classified by its first byte, the whole
  literal compared, positions advanced per row);
* an integer field is ``-?[0-9]+`` with no leading zero (JSON's grammar), at most 16 digits (two 8-byte
  words; so it fits int64 and the per-line reader's int64 check holds);
* a value is a JSON number ``-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`` with at most 15 significant
  digits m and a decimal exponent p (the exponent less the fraction's digits) with :math:`|p| \le 22`: then
  m and :math:`10^{|p|}` are exact doubles and :math:`m \cdot 10^p` rounded once is the correctly rounded
  double of the decimal, which is what the per-line reader's decoder returns (Clinger's fast path); an
  integer value is the float of the integer (``-0`` is 0.0); more digits or a larger exponent is doubt;
* a string key is 1 to 8 bytes, each printable ASCII (0x20 to 0x7F) other than ``"`` and ``\``: a JSON string
  without escapes, whose text is its bytes; the keys become an object column of ``str`` (``None`` on
  watermarks), as :mod:`oij.io.columnar`'s ``_string_keys`` and the per-line reader make it;
* an absent optional field takes the per-line reader's default (``value`` 0.0, ``channel`` 0);
* then the query's checks, as the Arrow reader's ``_check_table`` makes them: ``|ts| <= 2^62``, channels in
  range, watermarks only without lateness, ids new (:meth:`oij.io.errors.IdSet.add_many`), an end line
  (any flat object ``{"type":"end"}``, with any spaces) last and nothing after it, no ``cond`` (its fields are
  the per-line reader's).

Anything else -- lines of one kind in two layouts (``shuffled`` field orders: doubt on the first
:data:`PROBE_LINES` lines), a value of more than 15 digits, a longer or escaped string key, a blank line, spaces after
a line's ``}`` that differ from the first line's -- is not an error here: the chunk goes to the next reader
(pyarrow's, then the per-line one), which decides.  So a file means what :func:`oij.io.jsonlread.read_jsonl` says,
whichever reader took a chunk (``tests/io/test_blocks.py`` and ``tests/io/test_foreign_shapes.py`` compare
them, on the per-line reader's fuzz corpus and on files in random layouts with planted errors, with negative
controls).

Creates no process and no shared memory.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from oij.io.jsonlread import EventParser
from oij.spec.model import TS_LIMIT, Query

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
U64 = npt.NDArray[np.uint64]
Columns = tuple[Any, Any, I64, Any, Any, Any, I64, bool]
"""kind (int8), side (int8), id, ts, key (int64, or object: str keys), value (float64), channel, and whether
the end line closes the chunk."""

_POW10 = np.array([10**k for k in range(19)], np.int64)
_MAX_TEXT = 64
_PAD = 128  # past the chunk: every gather after a matched fixed text stays inside (``_parse``)


class _Doubt(Exception):
    """Not provably in one layout per line kind: the next reader decides."""


def _words(buf: bytes) -> U64:
    """Every 8 bytes of ``buf`` starting at each offset, as little-endian uint64 (an unaligned view, no copy)."""
    out: U64 = np.ndarray((len(buf) - 7,), np.dtype("<u8"), buf, 0, (1,))
    return out


def _text_words(text: bytes) -> list[tuple[int, np.uint64, np.uint64]]:
    """``text`` as (offset, word, mask) triples for :func:`_fixed`."""
    out = []
    for j in range(0, len(text), 8):
        part = text[j: j + 8]
        word = int.from_bytes(part.ljust(8, b"\0"), "little")
        mask = (1 << (8 * len(part))) - 1
        out.append((j, np.uint64(word), np.uint64(mask)))
    return out


def _fixed(w8: U64, at: I64, text: list[tuple[int, np.uint64, np.uint64]]) -> None:
    """The bytes at every ``at`` are ``text`` (8 bytes per comparison), or doubt."""
    for j, word, mask in text:
        if len(at) and not bool(((w8[at + j] & mask) == word).all()):
            raise _Doubt


_ZEROS = np.uint64(0x3030303030303030)
_HIGH = np.uint64(0xF0F0F0F0F0F0F0F0)
_SIX = np.uint64(0x0606060606060606)


def _swar8(w8: U64, e: I64, n: I64) -> I64:
    """The numbers spelled by the ``n`` (1..8) bytes before every ``e``, all digits (else doubt): eight digits
    at a time in one word (the first digit is the word's lowest byte)."""
    x = w8[e - 8]
    shift = ((8 - n) * 8).astype(np.uint64)
    low = (np.uint64(1) << shift) - np.uint64(1)  # the bytes before the number: made '0'
    x = (x & ~low) | (_ZEROS & low)
    if not bool((((x & _HIGH) == _ZEROS) & (((x + _SIX) & _HIGH) == _ZEROS)).all()):
        raise _Doubt
    x = x - _ZEROS
    x = ((x * np.uint64(2561)) >> np.uint64(8)) & np.uint64(0x00FF00FF00FF00FF)
    x = ((x * np.uint64(6553601)) >> np.uint64(16)) & np.uint64(0x0000FFFF0000FFFF)
    x = (x * np.uint64(42949672960001)) >> np.uint64(32)
    out: I64 = x.astype(np.int64)
    return out


def _digits(a: U8, w8: U64, s: I64, e: I64, leading_zero_ok: bool = False) -> I64:
    """The unsigned integers spelled by ``a[s:e]`` (row-wise), each 1 to 16 digits (two words), or doubt."""
    n = e - s
    if not len(s):
        return np.zeros(0, np.int64)
    if int(n.min()) < 1 or int(n.max()) > 16:
        raise _Doubt
    if not leading_zero_ok and bool(((n > 1) & (a[s] == 48)).any()):
        raise _Doubt
    with np.errstate(over="ignore"):
        v = _swar8(w8, e, np.minimum(n, 8))
        big = np.flatnonzero(n > 8)
        if len(big):
            v[big] += _swar8(w8, e[big] - 8, n[big] - 8) * 100_000_000
    return v


def _int_field(a: U8, w8: U64, s: I64, e: I64) -> I64:
    """JSON integers ``-?[0-9]+`` in ``a[s:e]``, or doubt."""
    neg = a[s] == 45
    v = _digits(a, w8, s + neg, e)
    out: I64 = np.where(neg, -v, v)
    return out


_ONES = np.uint64(0x0101010101010101)
_TOP = np.uint64(0x8080808080808080)


def _find(w8: U64, pos: I64, byte: int, words: int = 3) -> I64:
    """For every ``pos``, the position of the first ``byte`` at or after it within ``8 * words`` bytes (else
    doubt): a word at a time (:func:`_first_in_words`); rows not matched in a word go on to the next one."""
    pattern = np.uint64(0x0101010101010101 * byte)
    out = np.empty(len(pos), np.int64)
    todo = np.arange(len(pos))
    for k in range(words):
        p = pos[todo] + 8 * k
        hit, j = _first_in_words(w8[p], (pattern,))
        out[todo[hit]] = (p + j)[hit]
        todo = todo[~hit]
        if not len(todo):
            return out
    raise _Doubt


def _first_in_words(w: U64, patterns: tuple[np.uint64, ...]) -> tuple[npt.NDArray[np.bool_], I64]:
    """For every 8-byte word of ``w``: whether it holds a byte of any of ``patterns`` (each a byte repeated 8
    times), and the index (0-7, in memory order) of the first such byte.  The zero-byte trick: ``x = w ^
    pattern`` has a zero byte where ``w`` matches, and ``(x - 0x01..01) & ~x & 0x80..80`` marks bytes with the
    lowest mark exact (a borrow only runs upward, so only marks above a true zero can be false); the lowest
    mark of the union over the patterns is the first match of any, and its byte index is one multiplication."""
    t: U64 | None = None
    with np.errstate(over="ignore"):
        for pattern in patterns:
            x = w ^ pattern
            u = (x - _ONES) & ~x & _TOP
            t = u if t is None else t | u
        assert t is not None
        m = (t & (~t + np.uint64(1))) >> np.uint64(7)  # byte j of the first match: m == 1 << 8j
        return t != 0, ((m * _BYTE_INDEX) >> np.uint64(56)).astype(np.int64)


_BYTE_INDEX = np.uint64(0x0001020304050607)


_POW10F = np.array([10.0**k for k in range(23)])  # every power of ten that is an exact double
_E_LOWER = np.uint64(0x6565656565656565)
_E_UPPER = np.uint64(0x4545454545454545)
_DOTS = np.uint64(0x2E2E2E2E2E2E2E2E)


def _first(w8: U64, s: I64, e: I64, *patterns: np.uint64) -> I64:
    """For every row, the position of the first byte in ``[s, e)`` that is one of ``patterns``' byte, else
    ``e``; rows longer than three words are doubt.  A word at a time (:func:`_first_in_words`)."""
    if int((e - s).max()) > 24:
        raise _Doubt
    out = e.copy()
    for k in range(3):
        p = s + 8 * k
        live = np.flatnonzero(p < out)
        if not len(live):
            break
        hit, j = _first_in_words(w8[p[live]], patterns)
        at = live[hit]
        out[at] = np.minimum(out[at], (p[live] + j)[hit])
    return out


def _value_field(a: U8, w8: U64, s: I64, e: I64) -> npt.NDArray[np.float64]:
    r"""JSON numbers ``-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`` in ``a[s:e]`` whose significand has
    at most 15 digits m and whose decimal exponent p (the exponent less the fraction's digits) has
    :math:`|p| \le 22`, as the double nearest :math:`m \cdot 10^p`; else doubt.  Then m and :math:`10^{|p|}`
    are exact doubles and one multiplication or division rounds once (Clinger's fast path), which is what the
    per-line reader's decoder returns.  A number without fraction and exponent is a JSON integer, which the
    per-line reader turns into a float: ``-0`` is 0.0 there, not -0.0."""
    if not len(s):
        return np.zeros(0)
    neg = a[s] == 45
    ds = s + neg
    x = _first(w8, ds, e, _E_LOWER, _E_UPPER)  # the exponent's marker, or e
    dot = _first(w8, ds, x, _DOTS)  # the fraction's dot, or x
    ip = _digits(a, w8, ds, dot)
    has_dot = dot < x
    fl = np.where(has_dot, x - dot - 1, 0)
    if int((dot - ds + fl).max()) > 15:
        raise _Doubt
    m = ip.copy()
    f = np.flatnonzero(has_dot)
    if len(f):
        fp = _digits(a, w8, dot[f] + 1, x[f], leading_zero_ok=True)  # an empty fraction ("1.") is doubt
        m[f] = ip[f] * _POW10[fl[f]] + fp
    p = -fl
    has_exp = x < e
    g = np.flatnonzero(has_exp)
    if len(g):
        sign = a[x[g] + 1]
        signed = (sign == 43) | (sign == 45)
        ev = _digits(a, w8, x[g] + 1 + signed, e[g], leading_zero_ok=True)  # JSON allows "1e05"
        p[g] += np.where(sign == 45, -ev, ev)
    if int(np.abs(p).max()) > 22:
        raise _Doubt
    mf = m.astype(np.float64)
    v = np.where(p >= 0, mf * _POW10F[np.maximum(p, 0)], mf / _POW10F[np.maximum(-p, 0)])
    neg &= has_dot | has_exp | (m != 0)  # "-0" is the integer 0
    return np.where(neg, -v, v)


# ---------------------------------------------------------------------- layouts: learned from one line


class Layout(NamedTuple):
    """The layout of one line kind: ``texts[0] fields[0] texts[1] ... fields[-1] texts[-1]``."""

    kind: str
    """``"tuple"``, ``"watermark"`` or ``"end"``."""
    texts: tuple[bytes, ...]
    """The fixed texts, one more than the fields."""
    fields: tuple[str, ...]
    """The fields whose values vary, in the line's order (``type`` is in ``texts[0]``)."""
    kind_at: int
    """The offset of the ``"type"`` value's first byte (after its quote) in the line."""
    str_key: bool
    """Whether the key is a string (its quotes are the ends of the texts around it)."""


_REQUIRED = {"tuple": frozenset({"side", "id", "ts", "key"}), "watermark": frozenset({"ts"}), "end": frozenset()}
_ALLOWED = {"tuple": frozenset({"side", "id", "ts", "key", "value", "channel"}),
            "watermark": frozenset({"ts", "channel"}), "end": frozenset()}
_WS = frozenset(b" \t\r")  # JSON's whitespace but the newline, which ends the line
_NUMBER = frozenset(b"-+.0123456789eE")  # every byte a JSON number may hold


def _skip(line: bytes, i: int) -> int:
    """The first offset at or after ``i`` that is not JSON whitespace."""
    while i < len(line) and line[i] in _WS:
        i += 1
    return i


def _string(line: bytes, i: int) -> tuple[bytes, int] | None:
    """The bytes of the JSON string at ``i`` and the offset after it, when it has no escape; else None."""
    if line[i: i + 1] != b'"':
        return None
    j = line.find(b'"', i + 1)
    if j < 0 or b"\\" in line[i + 1: j]:
        return None
    return line[i + 1: j], j + 1


def _value(line: bytes, i: int, name: str) -> tuple[bytes, int] | None:
    """The token of ``name``'s value at ``i`` (a string: its bytes with its quotes) and the offset after it: a
    string for ``side`` (base or probe) and maybe ``key``, a run of number bytes for the others (its grammar
    is checked with every other row's); None when it is neither."""
    if line[i: i + 1] == b'"':
        s = _string(line, i)
        if s is None or name not in ("side", "key") or (name == "side" and s[0] not in (b"base", b"probe")):
            return None
        return line[i: s[1]], s[1]
    if name == "side":
        return None
    j = i
    while j < len(line) and line[j] in _NUMBER:
        j += 1
    return (line[i:j], j) if j > i else None


def _new_field(kind: str, name: str, fields: list[str]) -> bool:
    """Whether ``name`` may follow ``fields`` in a line of ``kind``: one of the kind's fields, not yet seen (a
    layout repeats no field, so no line that matches it holds a duplicate).  O(fields)."""
    return name in _ALLOWED[kind] and name not in fields


def learn(line: bytes) -> Layout | None:
    """The layout of ``line`` (without its line end), or None when it is not one flat JSON object whose first
    field is ``"type"`` with its kind's fields, each once (module docstring).  An exact tokenizer of that
    subset of JSON: ``ws { ws "name" ws : ws value ws (, ...)* } ws``.  O(len(line))."""
    i = _skip(line, 0)
    if line[i: i + 1] != b"{":
        return None
    i += 1
    texts: list[bytes] = []
    fields: list[str] = []
    cut = 0  # where the fixed text being read began
    kind = ""
    kind_at = 0
    str_key = False
    while True:
        i = _skip(line, i)
        got = _string(line, i)
        if got is None:
            return None
        name, i = got[0].decode("latin-1"), _skip(line, got[1])
        if line[i: i + 1] != b":":
            return None
        i = _skip(line, i + 1)
        if not kind:
            typ = _string(line, i)
            if name != "type" or typ is None or typ[0].decode("latin-1") not in _ALLOWED:
                return None
            kind, kind_at, i = typ[0].decode("latin-1"), i + 1, typ[1]
        else:
            v = _value(line, i, name)
            if v is None or not _new_field(kind, name, fields):
                return None
            quoted = v[0][:1] == b'"'
            texts.append(line[cut: i + quoted])  # a string's opening quote ends the text before it
            fields.append(name)
            str_key = str_key or (quoted and name == "key")
            i = v[1]
            cut = i - quoted  # and its closing quote begins the one after it
        i = _skip(line, i)
        if line[i: i + 1] == b"}":
            break
        if line[i: i + 1] != b",":
            return None
        i += 1
    if _skip(line, i + 1) != len(line) or not _REQUIRED[kind] <= set(fields):
        return None
    texts.append(line[cut:])
    if max(len(t) for t in texts) > _MAX_TEXT:
        return None
    return Layout(kind, tuple(texts), tuple(fields), kind_at, str_key)


# ---------------------------------------------------------------------- a layout's rows, by position


@functools.lru_cache(maxsize=256)
def _w(text: bytes) -> list[tuple[int, np.uint64, np.uint64]]:
    """:func:`_text_words` of ``text``, computed once per text."""
    return _text_words(text)


_BACKSLASH = np.uint64(0x5C5C5C5C5C5C5C5C)
_QUOTES = np.uint64(0x2222222222222222)
_SPACES = np.uint64(0x2020202020202020)
_FILL = np.uint64(0x4141414141414141)  # "A": a printable byte in the unused bytes of a key's word


def _str_keys(w8: U64, s: I64, e: I64) -> npt.NDArray[Any]:
    """The string keys ``a[s:e]`` (row-wise, each 1 to 8 bytes from 0x20 to 0x7F but ``"`` and ``\\``: a JSON
    string's text without escapes), as an object array of ``str``, or doubt.  One word a row: the bytes past
    the key made ``A``, then no byte below 0x20 (a control character), none at or above 0x80, no ``"`` and no
    ``\\`` (each found by the zero-byte trick); numpy's unique finds the distinct words, each is decoded once.
    O(n log n)."""
    n = e - s
    if not len(s):
        return np.empty(0, dtype=object)
    if int(n.min()) < 1 or int(n.max()) > 8:
        raise _Doubt
    keep = (np.uint64(1) << (n * 8).astype(np.uint64)) - np.uint64(1)
    keep[n == 8] = np.uint64(0xFFFFFFFFFFFFFFFF)
    x = (w8[s] & keep) | (_FILL & ~keep)
    b = x ^ _BACKSLASH
    d = x ^ _QUOTES
    with np.errstate(over="ignore"):
        low = (x - _SPACES) & ~x & _TOP  # a byte below 0x20 (exact for bytes below 0x80, checked with it)
        esc = (b - _ONES) & ~b & _TOP
        quote = (d - _ONES) & ~d & _TOP
    if bool(((x & _TOP) | low | esc | quote).any()):
        raise _Doubt
    words = x & keep
    uniq, inv = np.unique(words, return_inverse=True)
    texts = np.empty(len(uniq), dtype=object)
    texts[:] = [int(u).to_bytes(8, "little").rstrip(b"\0").decode("ascii") for u in uniq.tolist()]
    out: npt.NDArray[Any] = texts[inv.reshape(-1)]
    return out


def _rows(a: U8, w8: U64, s0: I64, e0: I64, lay: Layout) -> dict[str, Any]:
    """The fields of the lines ``a[s0:e0]`` (row-wise), all of ``lay``'s kind, as columns (``side``: whether
    base), or doubt unless every line is ``lay``'s texts with valid values between them and its last text ends
    where the line ends (module docstring).  O(rows * fields)."""
    _fixed(w8, s0, _w(lay.texts[0]))
    pos = s0 + len(lay.texts[0])
    out: dict[str, Any] = {}
    last = len(lay.fields) - 1
    for k, name in enumerate(lay.fields):
        after = lay.texts[k + 1]
        if name == "side":
            isb = a[pos] == 98  # b
            _fixed(w8, pos[isb], _w(b"base" + after))
            _fixed(w8, pos[~isb], _w(b"probe" + after))
            pos = pos + np.where(isb, 4 + len(after), 5 + len(after))
            out[name] = isb
            if k == last and not bool((pos == e0).all()):
                raise _Doubt
            continue
        # the value's end: the first byte of the text after it (for a string key, its closing quote)
        c = e0 - len(after) if k == last else _find(w8, pos, after[0], 2 if name == "key" and lay.str_key else 3)
        if name == "key" and lay.str_key:
            out[name] = _str_keys(w8, pos, c)
        elif name == "value":
            out[name] = _value_field(a, w8, pos, c)
        else:
            out[name] = _int_field(a, w8, pos, c)
        _fixed(w8, c, _w(after))
        pos = c + len(after)
    return out


def parse_template(chunk: bytes, p: EventParser) -> Columns | None:
    """The events of ``chunk`` (whole lines, each ending with a newline) as the columns of an
    :class:`~oij.reference.columns.EventBlock` (kind, side, id, ts, key, value, channel, end), or None when the chunk
    is not provably in one layout per line kind (module docstring).  Adds the tuples' ids to ``p``'s and sets
    ``p.ended`` only when it returns columns.
    O(len(chunk)) numpy work."""
    if p.ended:
        return None
    return commit_template(decode_template(chunk, p.q), p)


def decode_template(chunk: bytes, q: Query) -> tuple[Columns, I64] | None:
    """The part of :func:`parse_template` that needs no state of the stream (a pure function of the chunk and
    the query, so it may run on another thread, ahead of the stream's order): the columns and the tuples'
    ids, or None.  :func:`commit_template` then checks the ids and the end in the stream's order."""
    if not _probe(chunk, q):
        return None
    try:
        return _parse(chunk, q)
    except _Doubt:
        return None


def commit_template(decoded: tuple[Columns, I64] | None, p: EventParser) -> Columns | None:
    """:func:`decode_template`'s columns once the stream's state accepts them: nothing after the end line, ids
    new (added to ``p``'s, atomically); sets ``p.ended`` at an end line.  None otherwise (``p`` unchanged)."""
    if decoded is None or p.ended:
        return None
    cols, ids = decoded
    if not p.ids.add_many(ids):
        return None
    if cols[-1]:
        p.ended = True
    return cols


PROBE_LINES = 32
"""A chunk of more lines than this is first tried on its first ``PROBE_LINES`` lines (``_probe``)."""


def _probe(chunk: bytes, q: Query) -> bool:
    """Whether the first :data:`PROBE_LINES` lines of ``chunk`` follow one layout per line kind, learned from
    them (a chunk of fewer lines: True, the whole parse decides).  A file whose lines do not (a field order per
    line, a 17-digit value) fails here, on a few hundred bytes, instead of after a pass over the whole chunk.  It
    decides nothing for the chunk (a probe that passes is followed by the whole parse, which decides).  O(1)."""
    at = -1
    for _ in range(PROBE_LINES):
        at = chunk.find(b"\n", at + 1)
        if at < 0:
            return True
    if at + 1 == len(chunk):
        return True
    try:
        _parse(chunk[: at + 1], q, probe=True)
    except _Doubt:
        return False
    return True


def _parse(chunk: bytes, q: Query, probe: bool = False) -> tuple[Columns, I64]:
    """The columns of ``chunk`` and its tuples' ids, or doubt; ``probe``: the first lines of a longer chunk,
    whose end follows.  The layouts are learned from the first line of each kind (:func:`learn`), then
    every line must follow its kind's (:func:`_rows`).  O(len(chunk)).

    Bounds: a fixed text matched at a position p lies inside the chunk (its bytes are not the zero bytes of
    the padding), so every gather after it (a number's end within 24 bytes, a text of at most
    :data:`_MAX_TEXT` bytes after that) stays inside the :data:`_PAD` bytes after the chunk; and every position
    is at least ``len(T0)`` >= 8 past its line's start, so the words before a number's end are inside too."""
    if q.cond or not chunk.endswith(b"\n"):
        raise _Doubt
    whole = np.frombuffer(chunk, np.uint8)
    nl = np.flatnonzero(whole == 10)
    starts = np.empty(len(nl), np.int64)
    starts[0] = 0
    starts[1:] = nl[:-1] + 1
    ends = nl.astype(np.int64)  # each line is a[start:end]: without its newline and a CR before it
    ends[1:] -= whole[nl[1:] - 1] == 13
    if nl[0] > 0 and whole[nl[0] - 1] == 13:
        ends[0] -= 1
    end_line = False
    if not probe and ends[-1] - starts[-1] <= 64:
        last = learn(chunk[starts[-1]: ends[-1]])
        if last is not None and last.kind == "end":
            end_line = True
            starts, ends = starts[:-1], ends[:-1]
    if not len(starts):
        if not end_line:
            raise _Doubt
        z = np.zeros(0, np.int64)
        return (np.zeros(0, np.int8), np.zeros(0, np.int8), z, z, z, np.zeros(0), z, True), z
    first = learn(chunk[starts[0]: ends[0]])
    if first is None:
        raise _Doubt
    buf = chunk + bytes(_PAD)  # padded: a gather past a malformed last line reads zeros (a mismatch)
    a = np.frombuffer(buf, np.uint8)
    w8 = _words(buf)
    kind_ch = a[starts + first.kind_at]
    is_t = kind_ch == 116  # t
    is_w = kind_ch == 119  # w
    if not bool((is_t | is_w).all()):
        raise _Doubt
    if is_w.any() and q.lateness is not None:
        raise _Doubt
    n = len(starts)
    ts = np.zeros(n, np.int64)
    channel = np.zeros(n, np.int64)
    ids = np.zeros(n, np.int64)
    key: Any = np.zeros(n, np.int64)
    value = np.zeros(n)
    side = np.full(n, -1, np.int8)
    t = np.flatnonzero(is_t)
    if len(t):
        got = _rows(a, w8, starts[t], ends[t], _layout(chunk, starts, ends, t[0], "tuple"))
        ids[t], ts[t], side[t] = got["id"], got["ts"], np.where(got["side"], 0, 1)
        if got["key"].dtype == object:
            key = np.full(n, None, dtype=object)
        key[t] = got["key"]
        if "value" in got:
            value[t] = got["value"]
        if "channel" in got:
            channel[t] = got["channel"]
    w = np.flatnonzero(is_w)
    if len(w):
        got = _rows(a, w8, starts[w], ends[w], _layout(chunk, starts, ends, w[0], "watermark"))
        ts[w] = got["ts"]
        if "channel" in got:
            channel[w] = got["channel"]
    if not bool(((ts >= -TS_LIMIT) & (ts <= TS_LIMIT)).all()):
        raise _Doubt
    if not bool(((channel >= 0) & (channel < q.channels)).all()):
        raise _Doubt
    return (np.where(is_t, 0, 1).astype(np.int8), side, ids, ts, key, value, channel, end_line), ids[t]


def _layout(chunk: bytes, starts: I64, ends: I64, row: int, kind: str) -> Layout:
    """The layout learned from line ``row``, which must be of ``kind``; else doubt.  O(line)."""
    lay = learn(chunk[int(starts[row]): int(ends[row])])
    if lay is None or lay.kind != kind:
        raise _Doubt
    return lay
