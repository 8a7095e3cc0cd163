"""The adapters: a real stream processor as an implementation under test (``oij adapter NAME [FILE] [--session]``).

Reads one oij-jsonl case (FILE or stdin), runs it through the named system
and writes the result lines the system produced, so the command can stand
after ``--`` in ``oij conform`` and ``oij vectors verify``.

With ``--session`` (or ``OIJ_SESSION=1`` in the environment, as ``oij conform
--session`` starts it) one process serves many cases: it reads complete cases
one after another (FILE or stdin), and after each case's end line writes that
case's result lines, then ``{"type":"end"}``, and flushes; each case starts
from nothing.  At EOF it exits 0.  The system starts once, at the first case
(Spark's session, PyFlink's gateway and Pathway live in this process anyway;
``flink-ds`` keeps its JVM, ``oij.flink.datastream.Session``, until EOF).
The adapters:

* ``spark-ss``: Spark Structured Streaming's stream-stream join with a time
  range condition (:mod:`oij.spark.streaming`), ``multipleWatermarkPolicy=min``;
* ``spark-ss-max``: the same with ``multipleWatermarkPolicy=max``;
* ``spark-ss-agg``: per-base aggregates as Spark states them, the left outer
  join followed by a ``groupBy`` on the base's id and event time;
* ``flink-sql``: Flink SQL's interval join through PyFlink (:mod:`oij.flink.sql`,
  the optional extra ``oij[flink]``); ``flink-sql-agg``: per-base aggregates
  as a ``GROUP BY`` over its left join, an updating table consolidated;
* ``flink-ds``: Flink DataStream's ``intervalJoin`` with its late side
  outputs, through a small Java job (:mod:`oij.flink.datastream`);
* ``pathway``, ``pathway-cutoff``, ``pathway-forget``, ``pathway-delay``:
  Pathway's ``interval_join`` with no behavior or one of its
  ``common_behavior`` settings, and ``pathway-agg``, the per-base aggregate
  through Pathway's groupby/reduce (:mod:`oij.pathway.join`, the optional
  extra ``oij[pathway]``).

A case outside what the adapter can express (watermark lines, aggregates where not mapped,
timestamps beyond Spark's years) exits 2 with one line saying why (in a
session too: the cases before it have had their answers); the adapter's
features (``oij adapter NAME --features``) keep ``oij conform`` from
generating such cases.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import orjson

from oij.errors import UsageError
from oij.io.adapt import LATENESS_FEATURES
from oij.io.errors import InputError
from oij.io.recovery import RestartRequest
from oij.pathway.join import Behavior
from oij.spec.batch import Results
from oij.spec.model import Event, Query
from oij.testing import ConformAdapter

Runner = Callable[[Query, Sequence[Event]], Results]
"""A started adapter: one case in, its results out."""


@dataclass(frozen=True)
class Adapter:
    """A named adapter: what it claims, which profile should explain it, and how to start it.

    ``session``, when set, starts the system for many cases and stops it on leaving the context (a system that
    is a child process); without it, a session calls ``start`` once and keeps the runner.
    """

    name: str
    system: str
    features: tuple[str, ...]
    profile: str
    start: Callable[[str | None], Runner]
    check: Callable[[Query, Sequence[Event]], None]
    session: Callable[[str | None], AbstractContextManager[Runner]] | None = None
    restart: Callable[[RestartRequest], int] | None = None
    """Runs one incarnation under the restart protocol (``oij adapter NAME --restart-protocol``, docs/recovery.rst):
    the engine restarted from its own checkpoint, its sink's committed rows printed; None where not mapped."""

    def open_session(self, master: str | None) -> AbstractContextManager[Runner]:
        """The system started for many cases: a context whose value runs one case."""
        if self.session is not None:
            return self.session(master)
        return contextlib.nullcontext(self.start(master))


def _spark(policy: str) -> Callable[[str | None], Callable[[Query, Sequence[Event]], Results]]:
    def start(master: str | None) -> Callable[[Query, Sequence[Event]], Results]:
        from oij.spark.session import spark_session
        from oij.spark.streaming import run_case, spark_conf

        spark: Any = spark_session(master or "local[2]", app_name="oij-adapter", driver_memory="1g",
                                   conf=spark_conf(policy))
        return lambda q, events: run_case(spark, q, events, policy)
    return start


def _spark_check(q: Query, events: Sequence[Event]) -> None:
    from oij.spark.streaming import check_supported

    check_supported(q, events)


def _flink_sql(master: str | None) -> Callable[[Query, Sequence[Event]], Results]:
    if importlib.util.find_spec("pyflink") is None:
        raise UsageError("the flink-sql adapter needs PyFlink: pip install 'oij[flink]' (apache-flink)")
    if master is not None:
        raise UsageError("the flink-sql adapter runs Flink's embedded MiniCluster: --master does not apply")
    from oij.flink.sql import run_case

    return run_case


def _flink_check(q: Query, events: Sequence[Event]) -> None:
    from oij.flink.sql import check_supported

    check_supported(q, events)


def _flink_ds(master: str | None) -> Callable[[Query, Sequence[Event]], Results]:
    if importlib.util.find_spec("pyflink") is None:
        raise UsageError("the flink-ds adapter needs PyFlink: pip install 'oij[flink]' (apache-flink)")
    if master is not None:
        raise UsageError("the flink-ds adapter runs Flink's embedded MiniCluster: --master does not apply")
    from oij.flink.datastream import command, run_case

    try:
        command()  # compile once, before the first case
    except ValueError as e:
        raise UsageError(str(e)) from None
    return run_case


@contextlib.contextmanager
def _flink_ds_session(master: str | None) -> Iterator[Runner]:
    """One JVM for every case of the session, stopped when the context ends (``oij.flink.datastream.Session``)."""
    _flink_ds(master)  # the same checks, and the compile
    from oij.flink.datastream import Session

    with Session() as s:
        yield s.run_case


def _flink_ds_check(q: Query, events: Sequence[Event]) -> None:
    from oij.flink.datastream import check_supported

    check_supported(q, events)


def _pathway(behavior: Behavior) -> Callable[[str | None], Callable[[Query, Sequence[Event]], Results]]:
    def start(master: str | None) -> Callable[[Query, Sequence[Event]], Results]:
        if importlib.util.find_spec("pathway") is None:
            raise UsageError("the pathway adapters need Pathway: pip install 'oij[pathway]'")
        if master is not None:
            raise UsageError("the pathway adapters run Pathway in this process: --master does not apply")
        from oij.pathway.join import run_case

        def run_one(q: Query, events: Sequence[Event]) -> Results:
            return run_case(q, events, behavior).results
        return run_one
    return start


def _pathway_check(behavior: Behavior) -> Callable[[Query, Sequence[Event]], None]:
    def check(q: Query, events: Sequence[Event]) -> None:
        from oij.pathway.join import check_supported

        check_supported(q, events, behavior)
    return check


def _restart(module: str, **kw: str) -> Callable[[RestartRequest], int]:
    """The restartable drive ``module.run_restart(req, **kw)``, imported when an incarnation starts."""
    def run(req: RestartRequest) -> int:
        return int(importlib.import_module(module).run_restart(req, **kw))
    return run


_PATHWAY_EXACT = ("left", "exclusive", "lateness", "watermarks", "channels", "regressions", "mixed-keys",
                  "negative-ts", "extreme-ts")

ADAPTERS: dict[str, Adapter] = {a.name: a for a in [
    Adapter("spark-ss", "Spark Structured Streaming stream-stream join (multipleWatermarkPolicy=min)",
            LATENESS_FEATURES, "spark-ss", _spark("min"), _spark_check,
            restart=_restart("oij.spark.recovery", policy="min")),
    Adapter("spark-ss-max", "Spark Structured Streaming stream-stream join (multipleWatermarkPolicy=max)",
            LATENESS_FEATURES, "spark-ss-max", _spark("max"), _spark_check,
            restart=_restart("oij.spark.recovery", policy="max")),
    Adapter("spark-ss-agg", "Spark Structured Streaming left outer join, then groupBy(base id, base ts) in append "
            "mode (count, sum, min, max; multipleWatermarkPolicy=min)",
            ("aggregates", *LATENESS_FEATURES), "spark-ss", _spark("min"), _spark_check,
            restart=_restart("oij.spark.recovery", policy="min")),
    Adapter("flink-sql", "Flink SQL interval join (PyFlink, tuples paced 0.4 s apart; the oij[flink] extra)",
            LATENESS_FEATURES, "flink-sql", _flink_sql, _flink_check),
    Adapter("flink-sql-agg", "Flink SQL GROUP BY base id over the LEFT interval join (an updating table, "
            "consolidated; count, sum, min, max)",
            ("aggregates", *LATENESS_FEATURES), "flink-sql", _flink_sql, _flink_check),
    Adapter("flink-ds", "Flink DataStream intervalJoin with both late side outputs (a Java job on PyFlink's jars, "
            "events paced 30 ms apart; the oij[flink] extra and a JDK)",
            ("exclusive", "lateness", "watermarks", "channels", "regressions", "late-report", "mixed-keys",
             "negative-ts"), "flink-datastream", _flink_ds, _flink_ds_check, _flink_ds_session,
            restart=_restart("oij.flink.recovery")),
    Adapter("pathway", "Pathway interval_join, no behavior (exact, revising; the oij[pathway] extra)",
            _PATHWAY_EXACT, "pathway", _pathway("none"), _pathway_check("none"),
            restart=_restart("oij.pathway.recovery", behavior="none")),
    Adapter("pathway-cutoff", "Pathway interval_join with common_behavior(cutoff=lateness)",
            tuple(f for f in LATENESS_FEATURES if f != "left"), "pathway-cutoff", _pathway("cutoff"),
            _pathway_check("cutoff")),
    Adapter("pathway-forget", "Pathway interval_join with common_behavior(cutoff=lateness, keep_results=False)",
            LATENESS_FEATURES, "pathway-forget", _pathway("forget"), _pathway_check("forget")),
    Adapter("pathway-delay", "Pathway interval_join with common_behavior(delay=lateness)",
            LATENESS_FEATURES, "pathway", _pathway("delay"), _pathway_check("delay")),
    Adapter("pathway-agg", "Pathway interval_join_left, then groupby(base).reduce (count, sum, min, max)",
            ("aggregates", *_PATHWAY_EXACT), "pathway", _pathway("none"), _pathway_check("none")),
]}


def get_adapter(name: str) -> Adapter:
    """The adapter called ``name``; :class:`UsageError` lists the known ones."""
    try:
        return ADAPTERS[name]
    except KeyError:
        raise UsageError(f"unknown adapter {name!r}; known: {', '.join(ADAPTERS)}") from None


def read_case(adapter: Adapter, text: str, path: str) -> tuple[Query, list[Event]]:
    """The case in ``text``, checked against what the adapter can express (:class:`InputError` if not)."""
    from oij.testing._case import Case

    case = Case.from_jsonl(text, path)
    events = list(case.events)
    try:
        adapter.check(case.query, events)
    except ValueError as e:  # the case needs what the system cannot express: said before the system starts
        raise InputError(path, 1, "query", f"{adapter.name} cannot run this case: {e}") from None
    return case.query, events


def revisions(adapter: Adapter) -> list[str]:
    """After a case: what the system revised, as lines for stderr (Pathway's retractions, the GROUP BY's
    changelog)."""
    out: list[str] = []
    if adapter.name.startswith("pathway"):  # Pathway revises its output: say what it took back
        from oij.pathway.join import last_run

        run_ = last_run()
        if run_ is not None:
            out.append(run_.revision_summary())
    if adapter.name == "flink-sql-agg":  # the GROUP BY's changelog: say how much it replaced
        from oij.flink.sql import revision_summary

        line = revision_summary()
        if line is not None:
            out.append(line)
    return out


END_LINE = '{"type":"end"}\n'
"""The line that closes a case's answer in a session."""


def session_cases(lines: Iterable[bytes]) -> Iterator[str]:
    """The cases of a session's input, each as its text up to and with its end line, yielded as soon as that
    line is read; at EOF, the lines after the last end line, if any are not blank (an unfinished case, which
    the reader then refuses)."""
    buf: list[bytes] = []
    for line in lines:
        buf.append(line)
        if b'"end"' in line and _is_end(line):
            yield b"".join(buf).decode("utf-8", errors="replace")
            buf = []
    if any(line.strip() for line in buf):
        yield b"".join(buf).decode("utf-8", errors="replace")


def _is_end(line: bytes) -> bool:
    """The line is ``{"type":"end"}`` (in any spacing)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and obj.get("type") == "end"


def restart_command(adapter: Adapter, options: Sequence[str] = ()) -> list[str]:
    """The command the kit runs for ``oij conform --restarts N --adapter NAME``: one process per incarnation,
    since a crash is a SIGKILL of the process (and of the engine's JVM with it); ``options`` are ``KEY=VALUE``."""
    import sys

    if adapter.restart is None:
        known = ", ".join(a.name for a in ADAPTERS.values() if a.restart is not None) or "none"
        raise UsageError(f"the {adapter.name} adapter does not speak the restart protocol; those that do: {known}")
    cmd = [sys.executable, "-m", "oij.cli", "adapter", adapter.name, "--restart-protocol"]
    for o in options:
        cmd += ["-o", o]
    return cmd


def conform_adapter(name: str) -> ConformAdapter:
    """The adapter called ``name`` as :func:`oij.testing.conform` runs it (``oij conform --adapter NAME``)."""

    adapter = get_adapter(name)
    return ConformAdapter(adapter.name, frozenset(adapter.features), adapter.profile,
                          lambda: adapter.open_session(None), lambda options: restart_command(adapter, options))


def parse_options(items: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings as a mapping; :class:`UsageError` for one without ``=``."""
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"-o {item}: KEY=VALUE")
        out[key] = value
    return out


__all__ = [
    "ADAPTERS",
    "END_LINE",
    "Adapter",
    "Runner",
    "conform_adapter",
    "get_adapter",
    "parse_options",
    "read_case",
    "restart_command",
    "revisions",
    "session_cases",
]
