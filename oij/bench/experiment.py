"""The papers' experiments as ``oij bench EXPERIMENT``: one way to run each, raw numbers to files, plots redrawn
from them.

An :class:`Experiment` is a list of *cells* (one measured configuration
each, e.g. ``{"pattern": "hp", "keys": 10}``) per size (``quick`` for CI,
``default``, ``full`` for the docs' figures) and a function that measures
one cell and returns a flat row of numbers.  :func:`run_experiment` runs the
cells with a progress bar and writes ``DIR/NAME.json`` (machine, size,
rows) and ``DIR/NAME.csv`` (the rows); :func:`plot_dir` turns every
``*.json`` of a directory into ``NAME.png`` and ``NAME.svg``.

Every row carries counted figures that do not depend on the machine
(comparisons, tuples stored per replica, splitting degree, aggregation
work) next to the times, because this machine is shared and noisy.

Processes and shared memory: experiments that run engines create one
:class:`oij.parallel.runtime.pool.Runtime` per run (its replica processes and
segments) and close it before returning, also on error.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oij.bench.host import machine
from oij.bench.results import capture

Row = dict[str, Any]
Cell = dict[str, Any]


@dataclass
class Context:
    """What the cells of one run share: the size and, made on first use, a replica pool."""

    size: str
    replicas: int = 0
    _runtime: Any = None
    notes: list[str] = field(default_factory=list)
    cache: dict[str, Any] = field(default_factory=dict)  # e.g. a Spark session, made by the first cell
    closers: list[Callable[[], None]] = field(default_factory=list)

    def runtime(self, replicas: int) -> Any:
        """A :class:`~oij.parallel.runtime.pool.Runtime` with at least ``replicas`` processes (reused)."""
        from oij.parallel.runtime.pool import Runtime

        if self._runtime is None or self.replicas < replicas:
            self.close()
            self._runtime = Runtime(replicas)
            self._runtime.__enter__()
            self.replicas = replicas
        return self._runtime

    def close(self) -> None:
        while self.closers:
            self.closers.pop()()
        if self._runtime is not None:
            rt, self._runtime = self._runtime, None
            rt.__exit__(None, None, None)


@dataclass(frozen=True)
class Experiment:
    """One figure of a paper (or a benchmark of this project) as cells and a measurement."""

    name: str
    figure: str  # e.g. "PPOIJ Fig. 10/11"
    title: str
    cells: Callable[[str], list[Cell]]
    measure: Callable[[Cell, Context], Row]
    plot: Callable[[dict[str, Any], Any], None] | None = None  # (result, matplotlib Figure)


EXPERIMENTS: dict[str, Experiment] = {}


def by_size(size: str, quick: Any, default: Any, full: Any) -> Any:
    """The value of a parameter at ``size`` (quick, default or full)."""
    return {"quick": quick, "default": default, "full": full}[size]


def register(e: Experiment) -> Experiment:
    EXPERIMENTS[e.name] = e
    return e


def _load_all() -> None:
    import importlib

    for mod in ("oij.bench.papers", "oij.bench.tools"):  # they register their experiments
        importlib.import_module(mod)


def experiments() -> dict[str, Experiment]:
    """Every experiment, by name."""
    _load_all()
    return dict(EXPERIMENTS)


def run_experiment(e: Experiment, size: str, out_dir: str, *, progress: bool = True) -> dict[str, Any]:
    """Measure every cell of ``e`` at ``size``; write ``out_dir/NAME.json`` and ``.csv`` atomically."""
    from tqdm import tqdm

    from oij.io.atomic import write_text

    cells = e.cells(size)
    ctx = Context(size)
    rows: list[Row] = []
    t0 = time.perf_counter()
    try:
        for cell in tqdm(cells, desc=e.name, unit="run", disable=not progress, leave=False):
            row = dict(cell)
            row.update(e.measure(cell, ctx))
            rows.append(row)
    finally:
        ctx.close()
    result = {"experiment": e.name, "figure": e.figure, "title": e.title, "size": size, "machine": machine(),
              "provenance": capture(),
              "when": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": round(time.perf_counter() - t0, 1),
              "notes": ctx.notes, "rows": rows}
    os.makedirs(out_dir, exist_ok=True)
    write_text(os.path.join(out_dir, f"{e.name}.json"), json.dumps(result, indent=1) + "\n")
    write_text(os.path.join(out_dir, f"{e.name}.csv"), to_csv(rows))
    return result


def to_csv(rows: list[Row]) -> str:
    """The rows as CSV: one column per key seen (nested values as JSON)."""
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([json.dumps(r[c]) if isinstance(r.get(c), dict | list) else r.get(c, "") for c in cols])
    return buf.getvalue()


def plot_dir(src: str, dst: str | None = None, formats: tuple[str, ...] = ("png", "svg")) -> list[str]:
    """Draw ``NAME.png`` and ``NAME.svg`` (``formats``) for every experiment result ``NAME.json`` in ``src``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from oij.io.atomic import atomic_path

    dst = dst or src
    os.makedirs(dst, exist_ok=True)
    exps = experiments()
    written = []
    for name in sorted(os.listdir(src)):
        stem, ext = os.path.splitext(name)
        e = exps.get(stem)
        if ext != ".json" or e is None or e.plot is None:
            continue
        with open(os.path.join(src, name)) as f:
            result = json.load(f)
        if result.get("experiment") != stem:
            continue
        fig = plt.figure(figsize=(9, 3.4))
        e.plot(result, fig)
        m = result["machine"]
        commit = str(result.get("provenance", {}).get("commit") or "commit not recorded")[:10]
        fig.text(0.01, 0.01, f"{e.figure} -- {result['size']} run, {m['cores']} cores ({m['cpu'] or '?'}), "
                 f"{result['when']}, bench/results/{stem}.json at {commit}", fontsize=7, color="#555")
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        for fmt in formats:
            target = os.path.join(dst, f"{stem}.{fmt}")
            with atomic_path(target) as tmp:
                fig.savefig(tmp, format=fmt, dpi=110, metadata={"Date": None} if fmt == "svg" else None)
            written.append(target)
        plt.close(fig)
    return written
