"""Registers the parallel engines (imported by :mod:`parallel.registry`): ``kp``, ``dp``, ``hp``, ``key``, ``scale``
(event at a time) and ``blocks-kp`` ... ``blocks-scale`` (a block at a time)."""

from __future__ import annotations

from parallel.blocks import engine as blocks
from parallel.patterns import dp, hp, kp
from parallel.shared import keyoij, scaleoij

__all__ = ["blocks", "dp", "hp", "keyoij", "kp", "scaleoij"]
