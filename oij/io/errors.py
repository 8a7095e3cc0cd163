"""Input errors and the duplicate-id detector shared by the readers."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


class InputError(Exception):
    """Bad input: names the file, the line (or Parquet row; 0 for the file as a whole) and the field.

    The CLI prints it on one line and exits 2.
    """

    def __init__(self, path: str, line: int, field: str, message: str) -> None:
        where = f"{path}:{line}" if line > 0 else path
        super().__init__(f"{where}: {field}: {message}")
        self.path = path
        self.line = line
        self.field = field
        self.message = message


class IdSet:
    """A set of ints that costs about one bit per id when ids are dense (as generated streams are).

    Ids are grouped in pages of 2^16; a page is a bit array of 8 KiB.  A page
    whose every bit is set is replaced by one shared page (never written again), so a
    stream whose ids are dense (1, 2, 3, ... in any order within a bounded
    disorder) costs memory for the pages still filling only, not for the ids
    behind them: the reader stays bounded on an unbounded stream.  Sparse ids
    cost a page each, so very sparse ids fall back to a plain set once the
    pages would be larger than the set (that set grows with the stream: ids
    drawn at random from 2^63 cannot be checked for duplicates in bounded
    memory).  ``add`` is O(1) amortised (full pages are swept when a page is
    opened, once per 2^16 ids).
    """

    PAGE_BITS = 16
    FULL = bytearray(b"\xff" * 8192)  # shared; never written: every bit is already set

    def __init__(self) -> None:
        self.pages: dict[int, bytearray] = {}
        self.open: set[int] = set()  # pages not yet full
        self.sparse: set[int] | None = None
        self.count = 0

    def _sweep(self) -> None:
        """Replace the full pages by the shared FULL page."""
        for page in [p for p in self.open if self.pages[p] == self.FULL]:
            self.pages[page] = self.FULL
            self.open.discard(page)

    def add(self, x: int) -> bool:
        """Add ``x``; return False if it was already present."""
        if self.sparse is not None:
            if x in self.sparse:
                return False
            self.sparse.add(x)
            return True
        page, bit = x >> self.PAGE_BITS, x & 0xFFFF
        arr = self.pages.get(page)
        if arr is None:
            if len(self.pages) > 64 and len(self.pages) * 64 > self.count:
                self._to_sparse()
                return self.add(x)
            self._sweep()
            arr = self.pages[page] = bytearray(8192)
            self.open.add(page)
        byte, mask = bit >> 3, 1 << (bit & 7)
        if arr[byte] & mask:
            return False
        arr[byte] |= mask
        self.count += 1
        return True

    def __contains__(self, x: int) -> bool:
        if self.sparse is not None:
            return x in self.sparse
        arr = self.pages.get(x >> self.PAGE_BITS)
        bit = x & 0xFFFF
        return arr is not None and bool(arr[bit >> 3] >> (bit & 7) & 1)

    def add_many(self, ids: npt.NDArray[np.int64], presorted: bool = False) -> bool:
        """Add every id of ``ids`` if none is present and none repeats; else add nothing and return False.
        ``presorted``: ``ids`` is sorted already (the parallel readers sort each piece's ids in its worker).

        O(n log n) for the sort (near O(n) for ids nearly in order, O(n) presorted), plus O(pages touched); the
        same final state as ``add`` one by one.
        """
        import numpy as np

        n = len(ids)
        if n == 0:
            return True
        s = ids if presorted else np.sort(ids, kind="stable")  # a timsort: ids come nearly in order, O(n) then
        if n > 1 and bool((s[1:] == s[:-1]).any()):
            return False
        if n >= 64:
            breaks = np.flatnonzero(s[1:] != s[:-1] + 1)
            if 64 * (len(breaks) + 1) <= n:  # a few runs of consecutive ids (as numbered streams have): ranges
                lo = [int(s[0]), *s[breaks + 1].tolist()]
                hi = [*s[breaks].tolist(), int(s[-1])]
                done = self._add_ranges(lo, hi, n)
                if done is not None:
                    return done
        pages, starts = np.unique(s >> self.PAGE_BITS, return_index=True)
        new = [int(pg) for pg in pages if int(pg) not in self.pages]
        if self.sparse is not None or (new and self.may_turn_sparse(len(new))):
            # sparse ids (or the switch to a plain set may happen): one by one, after checking them all
            xs = s.tolist()
            if any(x in self for x in xs):
                return False
            for x in xs:
                self.add(x)
            return True
        ends = np.r_[starts[1:], n]
        views: list[tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]] = []
        for pg, a, b in zip(pages.tolist(), starts.tolist(), ends.tolist(), strict=True):
            arr = self.pages.get(pg)
            bits = s[a:b] & 0xFFFF
            if arr is not None:
                if arr is self.FULL:
                    return False
                v = np.frombuffer(arr, dtype=np.uint8)
                if bool(((v[bits >> 3] >> (bits & 7).astype(np.uint8)) & 1).any()):
                    return False
                views.append((v, bits))
        if new:
            self._sweep()
            for pg in new:
                self.pages[pg] = bytearray(8192)
                self.open.add(pg)
            for pg, a, b in zip(pages.tolist(), starts.tolist(), ends.tolist(), strict=True):
                if pg in new:
                    views.append((np.frombuffer(self.pages[pg], dtype=np.uint8), s[a:b] & 0xFFFF))
        for v, bits in views:  # bits sorted and distinct: OR the masks of each byte together, then one store
            byte = bits >> 3
            first = np.flatnonzero(np.r_[True, byte[1:] != byte[:-1]])
            v[byte[first]] |= np.bitwise_or.reduceat((1 << (bits & 7)).astype(np.uint8), first)
        self.count += n
        return True

    def _add_ranges(self, lo: list[int], hi: list[int], n: int) -> bool | None:
        """:meth:`add_many` of the ``n`` ids of the sorted, disjoint ranges ``[lo[i], hi[i]]``: each page's share
        of a range is tested and set as bytes (whole bytes at C speed, masks at the two ends) instead of bit by
        bit.  None when the set is (or may turn) sparse: the caller's paths decide then.  O(ranges + pages
        touched + bytes of the ranges / 2^13 ...): O(n / 8) bytes at most."""
        segs: list[tuple[int, int, int]] = []  # (page, first bit, last bit) of each range's share of a page
        for a, b in zip(lo, hi, strict=True):
            pa, pb = a >> self.PAGE_BITS, b >> self.PAGE_BITS
            for pg in range(pa, pb + 1):
                segs.append((pg, a & 0xFFFF if pg == pa else 0, b & 0xFFFF if pg == pb else 0xFFFF))
        new = list(dict.fromkeys(pg for pg, _, _ in segs if pg not in self.pages))
        if self.sparse is not None or (new and self.may_turn_sparse(len(new))):
            return None
        for pg, x, y in segs:
            arr = self.pages.get(pg)
            if arr is None:
                continue
            if arr is self.FULL or _any_bit(arr, x, y):
                return False
        if new:
            self._sweep()
            for pg in new:
                self.pages[pg] = bytearray(8192)
                self.open.add(pg)
        for pg, x, y in segs:
            _set_bits(self.pages[pg], x, y)
        self.count += n
        return True

    def may_turn_sparse(self, opened: int) -> bool:
        """Whether adding ids that open ``opened`` new pages could switch to a plain set on the way, as ``add``
        one by one would: ``add`` switches when it opens a page with more than 64 pages held and fewer than 64
        ids a page.  While opening them the pages held are at most ``len(pages) + opened - 1`` and the count at
        least ``count``, so a False here is a proof.  (Before, any batch that opened a page past 64 pages took the
        one-by-one path, id by id in Python: 13.1 million dense ids in blocks of 2^16 took 4.1 s, 0.5 s now.)
        O(1)."""
        held = len(self.pages) + opened - 1
        return held > 64 and held * 64 > self.count

    def _to_sparse(self) -> None:
        s: set[int] = set()
        for page, arr in self.pages.items():
            base = page << self.PAGE_BITS
            for byte, v in enumerate(arr):
                if v:
                    for b in range(8):
                        if v >> b & 1:
                            s.add(base + byte * 8 + b)
        self.sparse = s
        self.pages.clear()
        self.open.clear()


def _masks(x: int, y: int) -> tuple[int, int, int, int]:
    """Bits ``x .. y`` (inclusive, within a page) as bytes: (first byte, last byte, mask of the first, mask of the
    last); one byte when they are equal (its mask is then the first's and the last's together)."""
    bx, by = x >> 3, y >> 3
    first = (0xFF << (x & 7)) & 0xFF
    last = (1 << ((y & 7) + 1)) - 1
    return bx, by, first, last


def _any_bit(arr: bytearray, x: int, y: int) -> bool:
    """Whether any of bits ``x .. y`` of the page ``arr`` is set.  O(y - x) / 8 at C speed."""
    bx, by, first, last = _masks(x, y)
    if bx == by:
        return bool(arr[bx] & first & last)
    return bool(arr[bx] & first or arr[by] & last or arr.count(0, bx + 1, by) != by - bx - 1)


def _set_bits(arr: bytearray, x: int, y: int) -> None:
    """Set bits ``x .. y`` of the page ``arr``.  O(y - x) / 8 at C speed."""
    bx, by, first, last = _masks(x, y)
    if bx == by:
        arr[bx] |= first & last
        return
    arr[bx] |= first
    arr[by] |= last
    arr[bx + 1 : by] = b"\xff" * (by - bx - 1)
