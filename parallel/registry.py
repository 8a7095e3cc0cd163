"""The engine registry: every online engine that ``oij check`` compares with the oracle.

An engine is a callable ``(query, events, options) -> EngineRun``.  It reads
the whole event sequence (ending with End) and returns everything it
emitted plus its metrics.  Engines register under a short name (``kp``,
``dp``, ``hp``, ``scale``, ``key``, ...); ``oij check --patterns`` defaults to
every registered name.

Nothing here creates processes or shared memory; engines that do say so in
their own module docstrings.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from oij.spec.batch import Results
from oij.spec.model import Event, Query


@dataclass(frozen=True)
class EngineOptions:
    """Options common to the engines; an engine ignores those it has no use for."""

    replicas: int = 2
    batch: int = 32
    emitters: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class EngineRun:
    """What an engine emitted (canonical order is not required) and its metrics (JSON-serialisable)."""

    results: Results
    metrics: dict[str, Any] = field(default_factory=dict)


Engine = Callable[[Query, Sequence[Event], EngineOptions], EngineRun]

_ENGINES: dict[str, Engine] = {}
_DESCRIPTIONS: dict[str, str] = {}

# Modules that register engines when imported.
ENGINE_MODULES: tuple[str, ...] = (
    "oij.parallel.engines",
)


def register(name: str, description: str) -> Callable[[Engine], Engine]:
    """Decorator: register ``fn`` as engine ``name``."""

    def deco(fn: Engine) -> Engine:
        _ENGINES[name] = fn
        _DESCRIPTIONS[name] = description
        return fn

    return deco


def load_all() -> None:
    """Import every engine module so that it registers."""
    for mod in ENGINE_MODULES:
        importlib.import_module(mod)


def engines() -> dict[str, Engine]:
    """Name -> engine, for every registered engine."""
    load_all()
    return dict(_ENGINES)


def describe() -> dict[str, str]:
    """Name -> one-line description."""
    load_all()
    return dict(_DESCRIPTIONS)


def get(name: str) -> Engine:
    """The engine called ``name``; KeyError lists the known names."""
    load_all()
    try:
        return _ENGINES[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r}; known: {', '.join(sorted(_ENGINES)) or 'none'}") from None
