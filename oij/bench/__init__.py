"""The benchmarks behind ``oij bench``, one module per concern.

* :mod:`oij.bench.experiment`: the papers' experiments (:class:`~oij.bench.experiment.Experiment`, cells per size,
  :func:`~oij.bench.experiment.run_experiment`, :func:`~oij.bench.experiment.plot_dir`); the experiments
  themselves in ``oij.bench.papers`` and ``oij.bench.tools``;
* :mod:`oij.bench.host`: the machine a result was measured on;
* :mod:`oij.bench.results`: where every measured number comes from (provenance, the manifest, staleness, the
  generated tables);
* the other modules: one benchmark each (``oij bench peers``, ``shapes``, ``kit-power``, ...).

No module of the package imports this one (pyproject.toml's import contracts and
``tests/project/test_architecture.py`` forbid an import cycle): the names below are re-exported for callers
outside the package only.
"""

from __future__ import annotations

from oij.bench.experiment import (
    EXPERIMENTS,
    Cell,
    Context,
    Experiment,
    Row,
    by_size,
    experiments,
    plot_dir,
    register,
    run_experiment,
    to_csv,
)
from oij.bench.host import machine
from oij.bench.results import provenance

__all__ = ["EXPERIMENTS", "Cell", "Context", "Experiment", "Row", "by_size", "experiments", "machine", "plot_dir",
           "provenance", "register", "run_experiment", "to_csv"]
