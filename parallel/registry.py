"""The engine registry: every online engine that ``oij check`` compares with the oracle.

An engine is a callable ``(query, events, options) -> EngineRun``.  It reads
the whole event sequence (ending with End) and returns everything it
emitted plus its metrics.  Engines register under a short name (``kp``,
``dp``, ``hp``, ``scale``, ``key``, ...); ``oij check --engines`` defaults to
every registered name.

Nothing here creates processes or shared memory; engines that do say so in
their own module docstrings.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from oij.parallel.config import C, EngineConfig, engine_config
from oij.spec.batch import Results
from oij.spec.model import Event, Query


@dataclass
class EngineOptions(EngineConfig):
    """What a registered engine is given besides the query and the events: the settings every engine shares
    (:class:`~oij.parallel.config.EngineConfig`, with its defaults), where its processes come from, and the
    settings only one engine has.

    ``runtime``: a :class:`~oij.parallel.runtime.pool.Runtime` the caller owns and keeps (tests reuse one pool
    across many runs), or None: the engine starts its own and stops it before returning.  ``start_method``: how
    an engine that starts its own processes starts them.  ``settings``: field name -> value for the engine's own
    option class (``collector`` of the event engine, ``piece_events`` of the block engine, ...); a name that class
    does not have is ignored, so one dictionary can serve every engine.
    """

    runtime: Any = None
    start_method: str = "spawn"
    settings: dict[str, Any] = field(default_factory=dict)


def options_for(cls: type[C], pattern: str, options: EngineOptions) -> C:
    """The engine's own option object (``cls``, an :class:`~oij.parallel.config.EngineConfig`) for ``pattern``:
    every shared setting from ``options``, then those of ``options.settings`` that ``cls`` has.  O(fields)."""
    own = {f.name for f in fields(cls)}
    return engine_config(cls, options, pattern=pattern,
                         **{k: v for k, v in options.settings.items() if k in own})


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
