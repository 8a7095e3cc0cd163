r"""The fastest way into columns: oij-jsonl lines in the exact shape oij's writer gives them, parsed by position.

:func:`oij.io.jsonl.format_event` writes every event in one of three shapes::

    {"type":"tuple","side":"base","id":<int>,"ts":<int>,"key":<int>,"value":<float>,"channel":<int>}
    {"type":"watermark","ts":<int>,"channel":<int>}
    {"type":"end"}

each line ending with a newline, or a CR and a newline.  :func:`parse_template` reads a chunk of such
lines with numpy: one pass for the line ends, then per line and field a few operations on 8-byte words read
at computed offsets: every fixed part compared, the next ``,`` (or ``.``) found by the zero-byte trick, the
digits of a number turned into an int eight at a time
(SWAR).  It accepts the chunk only when it can *prove* that every byte of every line is in its place:

* each line is ``[fixed text][field][fixed text][field]...}`` with every fixed part compared byte by byte,
  so nothing is left over, missing, reordered or repeated, and no line holds a second object;
* an integer field is ``-?[0-9]+`` with no leading zero (JSON's grammar), at most 16 digits (two 8-byte
  words; so it fits int64 and the per-line reader's int64 check holds);
* a value is ``-?[0-9]+\.[0-9]+`` with no leading zero in its integer part and at most 15 digits in all: then
  its mantissa m and :math:`10^k` are exact doubles and :math:`m / 10^k` rounded once is the correctly rounded
  double of the decimal, which is what the per-line reader's decoder returns (Clinger's fast path);
* then the query's checks, as the Arrow reader's ``_check_table`` makes them: ``|ts| <= 2^62``, channels in
  range, watermarks only without lateness, ids new (:meth:`oij.io.errors.IdSet.add_many`), an end line last
  and nothing after it, no ``cond`` (its fields are the per-line reader's).

Anything else -- a string key, a value with an exponent, spaces, another field order, an absent optional
field -- is not an error here: the chunk goes to the next reader (pyarrow's, then the per-line one), which
decides.  So a file means what :func:`oij.io.jsonl.read_jsonl` says, whichever reader took a chunk
(``tests/io/test_blocks.py`` compares them on the per-line reader's fuzz corpus, with negative controls).

Creates no process and no shared memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from oij.io.jsonl import EventParser
from oij.spec.model import TS_LIMIT, Query

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
U64 = npt.NDArray[np.uint64]
Columns = tuple[Any, Any, I64, I64, I64, Any, I64, bool]
"""kind (int8), side (int8), id, ts, key, value (float64), channel, and whether the end line closes the chunk."""

_POW10 = np.array([10**k for k in range(19)], np.int64)
_HEAD = b'{"type":"'
_TUPLE = b'tuple","side":"'
_BASE = b'base","id":'
_PROBE = b'probe","id":'
_WM = b'watermark","ts":'
_END = b'{"type":"end"}'
_MIN_TUPLE = len('{"type":"tuple","side":"base","id":0,"ts":0,"key":0,"value":0.0,"channel":0}')
_MIN_WM = len('{"type":"watermark","ts":0,"channel":0}')
_PAD = 64
_TS = b',"ts":'
_KEY = b',"key":'
_VALUE = b',"value":'
_CHANNEL = b',"channel":'


class _Doubt(Exception):
    """Not provably in the writer's shape: the next reader decides."""


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


_W_HEAD, _W_TUPLE, _W_BASE, _W_PROBE, _W_WM, _W_TS, _W_KEY, _W_VALUE, _W_CHANNEL = (
    _text_words(t) for t in (_HEAD, _TUPLE, _BASE, _PROBE, _WM, _TS, _KEY, _VALUE, _CHANNEL))

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
    doubt): a word at a time, the first match by the zero-byte trick (its lowest marked bit is exact), and its
    byte index by one multiplication; rows not matched in a word go on to the next one."""
    pattern = np.uint64(0x0101010101010101 * byte)
    out = np.empty(len(pos), np.int64)
    todo = np.arange(len(pos))
    with np.errstate(over="ignore"):
        for k in range(words):
            p = pos[todo] + 8 * k
            x = w8[p] ^ pattern
            t = (x - _ONES) & ~x & _TOP
            hit = t != 0
            m = (t & (~t + np.uint64(1))) >> np.uint64(7)  # byte j of the first match: m == 1 << 8j
            j = ((m * _BYTE_INDEX) >> np.uint64(56)).astype(np.int64)
            out[todo[hit]] = (p + j)[hit]
            todo = todo[~hit]
            if not len(todo):
                return out
    raise _Doubt


_BYTE_INDEX = np.uint64(0x0001020304050607)


def _value_field(a: U8, w8: U64, s: I64, e: I64) -> npt.NDArray[np.float64]:
    r"""Decimals ``-?[0-9]+\.[0-9]+`` of at most 15 digits in ``a[s:e]``, exactly rounded, or doubt."""
    if not len(s):
        return np.zeros(0)
    neg = a[s] == 45
    ds = s + neg
    dot = _find(w8, ds, 46)
    if bool((dot >= e).any()):
        raise _Doubt
    ip = _digits(a, w8, ds, dot)
    fl = e - dot - 1
    fp = _digits(a, w8, dot + 1, e, leading_zero_ok=True)
    if int((dot - ds + fl).max()) > 15:
        raise _Doubt
    m = (ip * _POW10[fl] + fp).astype(np.float64)
    v = m / _POW10[fl].astype(np.float64)
    return np.where(neg, -v, v)


def parse_template(chunk: bytes, p: EventParser) -> Columns | None:
    """The events of ``chunk`` (whole lines, each ending with a newline) as the columns of an
    :class:`~oij.reference.columns.EventBlock` (kind, side, id, ts, key, value, channel, end), or None when the chunk
    is not provably in the writer's shape (module docstring).  Adds the tuples' ids to ``p``'s and sets
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
    """Whether the first :data:`PROBE_LINES` lines of ``chunk`` are in the writer's shape (a chunk of fewer lines:
    True, the whole parse decides).  A file in another shape fails here, on a few hundred bytes, instead of
    after a pass over the whole chunk.  It decides nothing for the chunk (a probe that passes is followed by
    the whole parse, which decides).  O(1)."""
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
    whose end follows."""
    if q.cond or not chunk.endswith(b"\n"):
        raise _Doubt
    # padded: a gather past a malformed last line reads zeros (a mismatch), never past the array
    buf = chunk + bytes(_PAD)
    a = np.frombuffer(buf, np.uint8)
    w8 = _words(buf)
    nl = np.flatnonzero(a[: len(chunk)] == 10)
    starts = np.empty(len(nl), np.int64)
    starts[0] = 0
    starts[1:] = nl[:-1] + 1
    ends = nl.astype(np.int64)  # each line is a[start:end]: without its newline and a CR before it
    ends[1:] -= a[nl[1:] - 1] == 13
    if len(nl) and nl[0] > 0 and a[nl[0] - 1] == 13:
        ends[0] -= 1
    end_line = False
    if not probe and chunk[starts[-1]: ends[-1]] == _END:
        end_line = True
        starts, ends = starts[:-1], ends[:-1]
    if not len(starts):
        if not end_line:
            raise _Doubt
        z = np.zeros(0, np.int64)
        return (np.zeros(0, np.int8), np.zeros(0, np.int8), z, z, z, np.zeros(0), z, True), z
    _fixed(w8, starts, _W_HEAD)
    kind_ch = a[starts + 9]
    is_t = kind_ch == 116  # t
    is_w = kind_ch == 119  # w
    if not bool((is_t | is_w).all()):
        raise _Doubt
    length = ends - starts
    if bool(((length < _MIN_TUPLE) & is_t).any() or ((length < _MIN_WM) & is_w).any()):
        raise _Doubt
    if is_w.any() and q.lateness is not None:
        raise _Doubt
    if not bool((a[ends - 1] == 125).all()):  # }
        raise _Doubt
    n = len(starts)
    ts = np.zeros(n, np.int64)
    channel = np.zeros(n, np.int64)
    ids = np.zeros(n, np.int64)
    key = np.zeros(n, np.int64)
    value = np.zeros(n)
    side = np.full(n, -1, np.int8)

    t = np.flatnonzero(is_t)
    if len(t):
        s0, e0 = starts[t], ends[t]
        _fixed(w8, s0 + 9, _W_TUPLE)
        isb = a[s0 + 24] == 98  # b
        b, pr = np.flatnonzero(isb), np.flatnonzero(~isb)
        _fixed(w8, s0[b] + 24, _W_BASE)
        _fixed(w8, s0[pr] + 24, _W_PROBE)
        pos = s0 + 24 + np.where(isb, len(_BASE), len(_PROBE))
        c = _find(w8, pos, 44)
        tid = _int_field(a, w8, pos, c)
        _fixed(w8, c, _W_TS)
        pos = c + len(_TS)
        c = _find(w8, pos, 44)
        tts = _int_field(a, w8, pos, c)
        _fixed(w8, c, _W_KEY)
        pos = c + len(_KEY)
        c = _find(w8, pos, 44)
        tkey = _int_field(a, w8, pos, c)
        _fixed(w8, c, _W_VALUE)
        pos = c + len(_VALUE)
        c = _find(w8, pos, 44)
        tval = _value_field(a, w8, pos, c)
        _fixed(w8, c, _W_CHANNEL)
        pos = c + len(_CHANNEL)
        tch = _int_field(a, w8, pos, e0 - 1)
        ids[t], ts[t], key[t], value[t], channel[t] = tid, tts, tkey, tval, tch
        side[t] = np.where(isb, 0, 1)
    w = np.flatnonzero(is_w)
    if len(w):
        s0, e0 = starts[w], ends[w]
        _fixed(w8, s0 + 9, _W_WM)
        pos = s0 + 9 + len(_WM)
        c = _find(w8, pos, 44)
        ts[w] = _int_field(a, w8, pos, c)
        _fixed(w8, c, _W_CHANNEL)
        pos = c + len(_CHANNEL)
        channel[w] = _int_field(a, w8, pos, e0 - 1)
    if not bool(((ts >= -TS_LIMIT) & (ts <= TS_LIMIT)).all()):
        raise _Doubt
    if not bool(((channel >= 0) & (channel < q.channels)).all()):
        raise _Doubt
    return (np.where(is_t, 0, 1).astype(np.int8), side, ids, ts, key, value, channel, end_line), ids[t]
