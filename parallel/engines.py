"""Registers the parallel engines (imported by :mod:`parallel.registry`): ``kp``, ``dp``, ``hp``, ``key``, ``scale``."""

from __future__ import annotations

from parallel.patterns import dp, hp, kp
from parallel.shared import keyoij, scaleoij

__all__ = ["dp", "hp", "keyoij", "kp", "scaleoij"]
