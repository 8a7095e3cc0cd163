"""What ``oij check`` found and how it is shown: a :class:`Row` per engine, oracle and ``--got`` output, the
:class:`CheckReport` (``report.json`` and the text the command prints), the table and ``report.md``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Row:
    """One line of the report: an engine's agreement and performance."""

    engine: str
    agrees: bool | None = None
    missing: int = 0
    extra: int = 0
    wrong: int = 0
    wall_s: float = 0.0
    throughput: float | None = None
    p99_ms: float | None = None
    load_balance: float | None = None
    error: str | None = None
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    differences: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckReport:
    """What ``oij check`` found: one ``Row`` per engine, oracle and ``--got`` output, the reference they were
    compared with, the replay cases and attributions of the ``--got`` outputs; :meth:`json` is ``report.json``,
    :meth:`text` what the command prints."""

    workload: dict[str, Any]
    reference: str
    results: str  # the directory of the outputs, one partition per engine
    out: str
    rows: list[Row]
    spark_plan: dict[str, Any] = field(default_factory=dict)
    replays: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    profile: str = "canonical"
    attribution: list[Any] = field(default_factory=list)  # oij.testing._attribute.Attribution
    profile_how: list[str] = field(default_factory=list)  # how the profile's result was computed
    checked_engines: bool = True  # an engine or a --got output was checked, not only the oracles
    spark_steps: list[dict[str, Any]] = field(default_factory=list)  # oij.spark.metrics: where Spark's time went
    spark_start_s: float | None = None  # starting the session (the JVM, unless the process had one)
    schedule: list[Any] = field(default_factory=list)  # oij.testing._schedule.ScheduleVerdict, with --schedule

    @property
    def all_agree(self) -> bool:
        return all(r.agrees for r in self.rows)

    def row(self, engine: str) -> Row:
        """The row of ``engine`` (KeyError if none)."""
        for r in self.rows:
            if r.engine == engine:
                return r
        raise KeyError(engine)

    def json(self) -> dict[str, Any]:
        """The report as ``OUT/report.json`` holds it."""
        return {
            "workload": self.workload,
            "reference": self.reference,
            "results": self.results,
            "spark_plan": self.spark_plan,
            "engines": [r.__dict__ for r in self.rows],
            "all_agree": self.all_agree,
            "replays": self.replays,
            "profile": self.profile,
            "attribution": [a.__dict__ for a in self.attribution],
            "spark_start_s": self.spark_start_s,
            "spark_steps": self.spark_steps,
            "schedule": [v.json() for v in self.schedule],
        }

    def text(self) -> str:
        """What ``oij check`` prints on stdout: the table, where the report is, the replay cases, the attribution."""
        lines: list[str] = []
        for v in self.schedule:
            lines += v.lines()
        if self.profile != "canonical":
            lines.append(f"reference: the {self.profile} profile (oij.spec.profiles), {' and '.join(self.profile_how)}")
        lines.append(table(self.rows, self.reference))
        lines.append(f"report: {os.path.join(self.out, 'report.md')}, {os.path.join(self.out, 'report.json')}"
                     + ("" if self.schedule else f"; outputs: {os.path.join(self.out, 'results')}/engine=*"))
        for name, cases in self.replays.items():
            for case_info in cases:
                kept = (f", the stream's own terms: a system that follows {case_info['follows']} reproduces it"
                        if case_info["follows"] else "")
                lines.append(f"\n{name}: {case_info['difference']}: replay case {case_info['file']} "
                             f"({case_info['events']} events{kept})")
                lines.append("\n".join("  " + x for x in case_info["timeline"]))
        if self.attribution:
            lines.append("")
            lines += ["attribution: " + a.line() for a in self.attribution]
        if not self.checked_engines:
            lines.append("note: no engine was checked (none registered, none chosen, or the workload exceeds "
                         "--seq-limit); only the oracles were compared")
        return "\n".join(lines)


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def table(rows: list[Row], reference: str) -> str:
    """The report table: engine, agrees, missing, extra, wrong, throughput, p99 latency, load balance."""
    head = ["engine", "agrees", "missing", "extra", "wrong", "tuples/s", "p99 ms", "load balance"]
    body = []
    for r in rows:
        agrees = "reference" if r.engine == reference else ("yes" if r.agrees else "NO")
        body.append([
            r.engine, agrees, str(r.missing), str(r.extra), str(r.wrong),
            _fmt(r.throughput, ",.0f"), _fmt(r.p99_ms, ".2f"), _fmt(r.load_balance, ".2f"),
        ])
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    rest = ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join([line, rule, *rest])


def markdown(report: dict[str, Any], rows: list[Row]) -> str:
    """The short Markdown report: workload, table, and the first differences of each disagreeing engine."""
    w = report["workload"]
    lines = [
        "# oij check",
        "",
        f"Workload: {w['source']} -- {w['events']} events, query `{json.dumps(w['query'])}`.",
        f"Reference: `{report['reference']}`. Outputs: `{report['results']}` (partitioned by engine).",
        "",
        "**All engines agree.**" if report["all_agree"] else "**Some engines disagree with the oracle.**",
        "",
        "| " + " | ".join(["engine", "agrees", "missing", "extra", "wrong", "tuples/s", "p99 ms", "load balance"])
        + " |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        agrees = "reference" if r.engine == report["reference"] else ("yes" if r.agrees else "**no**")
        lines.append(
            f"| {r.engine} | {agrees} | {r.missing} | {r.extra} | {r.wrong} | {_fmt(r.throughput, ',.0f')} | "
            f"{_fmt(r.p99_ms, '.2f')} | {_fmt(r.load_balance, '.2f')} |"
        )
    for r in rows:
        if r.error or r.differences:
            lines += ["", f"## {r.engine}: first differences", ""]
            if r.error:
                lines.append(f"- the engine failed: `{r.error}`")
            for d in r.differences:
                what = {"pair": f"pair ({d['base']}, {d['probe']})", "late": f"late id {d['id']}",
                        "aggregate": f"aggregate of base {d['base']}"}[d["kind"]]
                extra = f": expected {d['expected']}, got {d['got']}" if d["issue"] == "wrong" else ""
                times = f" x{d['n']}" if d["n"] > 1 else ""
                lines.append(f"- {d['issue']} {what}{times}{extra}")
    if report.get("spark_plan"):
        lines += ["", f"Spark plan: `{json.dumps(report['spark_plan'])}`"]
    if report.get("spark_steps"):
        from oij.spark.metrics import steps_table

        lines += ["", "## Where Spark's time went", "",
                  f"Starting the session: {report['spark_start_s']:.1f} s. Per step, from Spark's task metrics "
                  "(task s: the executors' run time, summed over parallel tasks):", "",
                  *steps_table(report["spark_steps"],
                               report["workload"].get("tuples") or report["workload"]["events"])]
    return "\n".join(lines) + "\n"


__all__ = ["CheckReport", "Row", "markdown", "table"]
