"""Example counts per test: the default keeps the test command short, ``OIJ_TESTS=full`` runs the full counts.

A few tests drive a real JVM per example (a Spark micro-batch per tuple, a Spark job per workload): their
Hypothesis or kit example counts are chosen here, per test, so that the default command stays short, and the
full counts stay one environment variable away (``OIJ_TESTS=full python -m pytest -n 2``, README).  The checks
and their negative controls are the same at both counts; only how many generated examples each one sees
differs.
"""

from __future__ import annotations

import os

FULL = os.environ.get("OIJ_TESTS", "") == "full"


def examples(default: int, full: int) -> int:
    """``full`` under ``OIJ_TESTS=full``, else ``default``."""
    return full if FULL else default
