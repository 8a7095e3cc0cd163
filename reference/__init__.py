"""The reference oracle: a fast, sequential streaming OIJ operator that mirrors :mod:`oij.spec`."""

from oij.reference.oracle import Oracle, run_events

__all__ = ["Oracle", "run_events"]
