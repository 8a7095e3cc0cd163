"""Registers the parallel engines (imported by :mod:`oij.parallel.registry`): ``kp``, ``dp``, ``hp``, ``key``, ``scale``
(event at a time) and ``blocks-kp`` ... ``blocks-scale`` (a block at a time)."""

from __future__ import annotations

from oij.parallel.blocks import registered as blocks
from oij.parallel.patterns import dp, hp, kp
from oij.parallel.shared import keyoij, scaleoij

__all__ = ["blocks", "dp", "hp", "keyoij", "kp", "scaleoij"]
