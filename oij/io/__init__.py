"""Reading and writing oij events and results: oij-jsonl v1 and Parquet."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from oij.io.errors import InputError
from oij.io.jsonl import read_jsonl
from spec.model import Event, Query

__all__ = ["InputError", "open_events"]


def open_events(path: str, q: Query | None = None) -> tuple[Query, Iterator[Event], IO[bytes] | None]:
    """Open an event file by extension (``.parquet`` or oij-jsonl; ``-`` is stdin).

    Returns the query, the event iterator and the open stream to close (None for Parquet).
    For oij-jsonl the query comes from the file; ``q`` must then be None.
    """
    import sys

    if path.endswith(".parquet"):
        from oij.io.parquet import read_parquet

        query, events = read_parquet(path, q)
        return query, events, None
    if path == "-":
        return (*read_jsonl(sys.stdin.buffer, "<stdin>"), None)
    try:
        f = open(path, "rb")  # noqa: SIM115 -- returned to the caller, who closes it
    except OSError as e:
        raise InputError(path, 0, "file", e.strerror or str(e)) from None
    query, events = read_jsonl(f, path)
    return query, events, f
