"""Registers the parallel engines (imported by :mod:`oij.parallel.registry`): ``kp``, ``dp``, ``hp``."""

from __future__ import annotations

from . import dp, hp, keyoij, kp, scaleoij

__all__ = ["dp", "hp", "keyoij", "kp", "scaleoij"]
