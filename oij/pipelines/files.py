"""Opening inputs and writing outputs as every ``oij`` command does: the query flags applied to an input,
one reader for oij-jsonl, Parquet and stdin, outputs refused when they are an input or cannot be written, and
written atomically (the file appears whole, or the old one stays), a progress bar on a terminal.

:class:`QueryFlags` are the flags that give (or override) the query of a Parquet input; the options of the
pipelines (:mod:`oij.pipelines.join`, :mod:`oij.pipelines.run`) extend it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from typing import IO, TYPE_CHECKING, Any, TypeVar, cast

from oij.errors import UsageError
from oij.io import open_blocks, open_events
from oij.io.atomic import atomic_text, check_writable, is_special
from oij.io.errors import InputError
from oij.options import option
from oij.spec.model import AGGREGATES, JOINS, Event, Query, SpecError, check_query

if TYPE_CHECKING:
    from oij.io.columnar import EventBlock

T = TypeVar("T")


QUERY_GROUP = "query (for Parquet input without a stored query, or to override it)"


@dataclass
class QueryFlags:
    """The query flags of a command (``--lower``, ``--upper``, ...): None or False where not given."""

    lower: int | None = option(None, help="lower bound of the window, relative to the base tuple's ts",
                               group=QUERY_GROUP)
    upper: int | None = option(None, help="upper bound of the window", group=QUERY_GROUP)
    lower_exclusive: bool = option(False, help="exclude the lower bound", group=QUERY_GROUP)
    upper_exclusive: bool = option(False, help="exclude the upper bound", group=QUERY_GROUP)
    aggregate: str | None = option(None, choices=["none", *AGGREGATES], help="per-base aggregate", group=QUERY_GROUP)
    join: str | None = option(None, choices=list(JOINS), help="join kind (default inner)", group=QUERY_GROUP)
    channels: int | None = option(None, help="number of upstream channels (default 1)", group=QUERY_GROUP)
    lateness: int | None = option(None, help="lateness mode: W = max ts - LATENESS", group=QUERY_GROUP)


def flags_given(args: QueryFlags) -> bool:
    """Whether any query flag is given."""
    return any(getattr(args, f.name) not in (None, False) for f in fields(QueryFlags))


def query_from_flags(args: QueryFlags, base: Query | None, path: str) -> Query | None:
    """The query the flags describe, on top of ``base`` (the stored one), or None if no flag is given."""
    if not flags_given(args):
        return None
    if base is None and (args.lower is None or args.upper is None):
        raise InputError(path, 0, "query", "--lower and --upper are both needed when the file stores no query")
    b = base or Query(lower=0, upper=0)
    agg = b.aggregate if args.aggregate is None else (None if args.aggregate == "none" else args.aggregate)
    q = Query(
        lower=b.lower if args.lower is None else args.lower,
        upper=b.upper if args.upper is None else args.upper,
        lower_inclusive=b.lower_inclusive and not args.lower_exclusive,
        upper_inclusive=b.upper_inclusive and not args.upper_exclusive,
        aggregate=cast(Any, agg),
        join=b.join if args.join is None else cast(Any, args.join),
        channels=b.channels if args.channels is None else args.channels,
        lateness=b.lateness if args.lateness is None else args.lateness,
    )
    try:
        return check_query(q)
    except SpecError as e:
        raise InputError(path, 0, f"--{e.field.replace('_', '-')}", e.message) from None


@contextlib.contextmanager
def input_events(path: str, args: QueryFlags,
                 int64_ids: bool = False) -> Iterator[tuple[Query, Iterator[Event]]]:
    """Open ``path`` (oij-jsonl, Parquet or ``-``), apply query flags, and close it afterwards.
    ``int64_ids``: ids beyond 64 bits are input errors (for the engines and Arrow)."""
    with open_input(path, args, functools.partial(open_events, int64_ids=int64_ids)) as got:
        yield got


@contextlib.contextmanager
def open_input(path: str, args: QueryFlags, opener: Any) -> Iterator[tuple[Query, Any]]:
    """``path`` opened by ``opener`` (``(path) -> (query, items, file)``, or ``(path, query)`` for Parquet, which
    then gets the query the flags give), the flags applied; the file closed afterwards."""
    if path.endswith(".parquet") or os.path.isdir(path):  # a file or a dataset (oij.io.parquet.is_parquet)
        from oij.io.parquet import parquet_query

        if not os.path.exists(path):
            raise InputError(path, 0, "file", "No such file or directory")
        override = query_from_flags(args, parquet_query(path), path)
        q, events, f = opener(path, override)
    else:
        q, events, f = opener(path)
        if query_from_flags(args, q, path) is not None:
            raise InputError(path, 1, "query", "query flags apply to Parquet input; oij-jsonl carries its query")
    try:
        yield q, events
    finally:
        if f is not None:
            f.close()


def is_parquet_path(path: str) -> bool:
    """``path`` names a Parquet file or dataset (a directory), by its name: what the readers go by."""
    return path.endswith(".parquet") or os.path.isdir(path)


def plan_input(path: str, args: QueryFlags) -> tuple[Query | None, Query | None]:
    """The query ``path`` will be read with, the flags applied, and the override to open it with: for Parquet the
    flags' query on top of the stored one (both the same; None: none given, the stored one is read); for
    oij-jsonl the query line (read now: its errors come first, as on opening) with no override, flags refused;
    for stdin (``-``) no query yet.  Raises :class:`InputError`.  O(1) reads."""
    if is_parquet_path(path):
        from oij.io.parquet import parquet_query

        if not os.path.exists(path):
            raise InputError(path, 0, "file", "No such file or directory")
        stored = parquet_query(path)
        override = query_from_flags(args, stored, path)
        return override or stored, override
    if path == "-":
        if flags_given(args):
            raise InputError(path, 1, "query", "query flags apply to Parquet input; oij-jsonl carries its query")
        return None, None
    from oij.io.jsonlread import read_query_line

    try:
        with open(path, "rb") as f:
            q = read_query_line(f, path)
    except OSError as e:
        raise InputError(path, 0, "file", e.strerror or str(e)) from None
    if query_from_flags(args, q, path) is not None:
        raise InputError(path, 1, "query", "query flags apply to Parquet input; oij-jsonl carries its query")
    return q, None


@dataclass(frozen=True)
class FilePlan:
    """A pipeline's files, resolved from its options in one step (:func:`plan_files`), before any work: every
    output checked (not an input, writable), the input's query with the flags applied, the sort directory.
    The pipeline opens its files through this object and does not go back to its options."""

    input: str | None  # None: no input file (a generated preset)
    query: Query | None  # the query the input is read with (None: stdin's, read on opening; or no input)
    override: Query | None  # the flags' query for a Parquet input (None: its stored one)
    output: str | None  # result lines (None or "-": stdout)
    sort_dir: str | None  # the canonical order's sorted runs (:func:`sort_dir`)

    def open_output(self) -> contextlib.AbstractContextManager[IO[str]]:
        """The result file, written atomically (:func:`output_file`)."""
        return output_file(self.output, [self.input])

    @contextlib.contextmanager
    def open_blocks(self) -> Iterator[tuple[Query, Iterator[EventBlock]]]:
        """The input's query and its events in column blocks (ids within 64 bits), the file closed afterwards."""
        assert self.input is not None
        q, blocks, f = open_blocks(self.input, self.override, int64_ids=True)
        try:
            yield q, blocks
        finally:
            if f is not None:
                f.close()


def plan_files(args: QueryFlags, input: str | None, output: str | None, others: Iterable[str | None] = (),
               *, results: bool = True) -> FilePlan:
    """Resolve a pipeline's files from its options (``args``: query flags, ``tmp_dir``): refuse an output
    (``output`` when ``results``, and ``others``) that is an input or cannot be written, read the input's query
    with the flags (:func:`plan_input`), choose the sort directory.  Raises :class:`UsageError` or
    :class:`InputError` before any work."""
    check_outputs([output if results else None, *others], [input])
    q, override = plan_input(input, args) if input is not None else (None, None)
    return FilePlan(input, q, override, output, sort_dir(args) if results else None)


def progress(it: Iterable[T], *, enabled: bool, desc: str, total: int | None = None) -> Iterable[T]:
    """Wrap ``it`` in a progress bar on stderr when ``enabled`` and stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        return it
    from tqdm import tqdm

    bar: Iterable[T] = tqdm(it, desc=desc, unit=" ev", unit_scale=True, mininterval=0.5, total=total, file=sys.stderr)
    return bar


def refuse_same_file(output: str | None, inputs: Iterable[str | None]) -> None:
    """Raise :class:`UsageError` if ``output`` is one of ``inputs`` (same device and inode: through symlinks and
    hard links too), before anything is opened for writing."""
    if output is None or output == "-" or not os.path.exists(output):
        return
    out = os.stat(output)
    for p in inputs:
        if p and p != "-" and os.path.exists(p):
            st = os.stat(p)
            if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
                raise UsageError(f"output {output} is the input {p}: refusing to overwrite it")


def check_outputs(outputs: Iterable[str | None], inputs: Iterable[str | None] = ()) -> None:
    """Refuse, before any work, an output that is an input or that cannot be written (:class:`UsageError`)."""
    ins = list(inputs)
    for path in outputs:
        if path is None or path == "-":
            continue
        refuse_same_file(path, ins)
        why = check_writable(path)
        if why is not None:
            raise UsageError(f"{path}: cannot write: {why}")


@contextlib.contextmanager
def output_file(path: str | None, inputs: Iterable[str | None] = ()) -> Iterator[IO[str]]:
    """``path`` opened for writing, atomically (``-`` or None: stdout); refused if it is one of ``inputs``.

    The file appears whole when the block completes; on any exception the
    old ``path`` is left as it was (``oij.io.atomic``).
    """
    check_outputs([path], inputs)
    if path is None or path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    try:
        cm = atomic_text(path)
        f = cm.__enter__()
    except OSError as e:
        raise UsageError(f"{path}: cannot write: {e.strerror or e}") from None
    try:
        yield f
    except BaseException:
        if not cm.__exit__(*sys.exc_info()):
            raise
    else:
        cm.__exit__(None, None, None)


def is_stdout(path: str | None) -> bool:
    """``path`` names stdout (None or ``-``)."""
    return path is None or path == "-"


def sort_dir(args: Any) -> str | None:
    """Where the canonical order's sorted runs go (oij/io/extsort.py): ``--tmp-dir``, else beside the output
    file, else (stdout, or an output that is a device or a pipe such as ``/dev/null``) ``$TMPDIR`` (``args``:
    options with ``tmp_dir`` and ``output``)."""
    d: str | None = getattr(args, "tmp_dir", None)
    if d:
        if not os.path.isdir(d) or not os.access(d, os.W_OK):
            raise UsageError(f"--tmp-dir {d}: not a writable directory")
        return d
    out: str | None = getattr(args, "output", None)
    if out and out != "-" and not is_special(out):
        return os.path.dirname(os.path.abspath(out))
    return None


__all__ = ["FilePlan", "QueryFlags", "UsageError", "check_outputs", "flags_given", "input_events",
           "is_parquet_path", "is_stdout", "open_input", "output_file", "plan_files", "plan_input", "progress",
           "query_from_flags", "refuse_same_file", "sort_dir"]
