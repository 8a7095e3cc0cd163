"""Reading a workload for the user jobs (:mod:`oij.spark.userjob`, :mod:`oij.flink.userjob`): the query and
its tuples in arrival order, lateness mode only.  Opens and closes the file; starts nothing."""

from __future__ import annotations

from oij.errors import UsageError
from oij.io.errors import InputError
from oij.io.jsonlread import read_jsonl
from oij.spec.model import Query, StreamTuple, Watermark


def read_workload(events_path: str) -> tuple[Query, list[StreamTuple]]:
    """The query and the tuples (arrival order) of an oij-jsonl file in lateness mode.

    Raises UsageError for watermark lines, no lateness, aggregates or joining conditions (this job maps none);
    InputError for a file that cannot be opened or is malformed."""
    try:
        fh = open(events_path, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as err:
        raise InputError(events_path, 0, "file", err.strerror or str(err)) from None
    with fh:
        q, it = read_jsonl(fh, events_path)
        tuples: list[StreamTuple] = []
        for e in it:
            if isinstance(e, StreamTuple):
                tuples.append(e)
            elif isinstance(e, Watermark):
                raise UsageError(f"{events_path}: watermark lines: the user jobs derive watermarks from event "
                                 "times (lateness mode only)")
    if q.lateness is None:
        raise UsageError(f"{events_path}: the query has no lateness: the user jobs need lateness mode")
    if q.aggregate is not None:
        raise UsageError(f"{events_path}: per-base aggregates are not mapped by the user jobs")
    if q.cond:
        raise UsageError(f"{events_path}: joining conditions are not mapped by the user jobs")
    return q, tuples


__all__ = ["read_workload"]
