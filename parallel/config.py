"""The engines' settings, each defined once: the pattern list and :class:`EngineConfig` with every default.

Data flow::

    oij run's argparse (defaults and choices read here) --> RunOptions --engine_config(cls, args)-->
        JobOptions (event engine: KP/DP/HP)  |  TeamOptions (key, scale)  |  BlockOptions (block engine)

Each of the three option classes *is* an :class:`EngineConfig` with the few settings only its engine has
added; the settings every engine shares, with their defaults (Alg. 1's ``theta``, Alg. 3's ``partitions`` and
``delta``, ...), are declared here and nowhere else.  Pure data: no process, no segment.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

PATTERN_NAMES = {"kp": "KP-OIJ", "dp": "DP-OIJ", "hp": "HP-OIJ", "key": "Key-OIJ", "scale": "Scale-OIJ"}
"""Every parallel pattern: its name on the command line -> its name in the papers."""

PATTERNS = tuple(PATTERN_NAMES)
"""Every parallel pattern, as ``oij run --pattern`` names them (``oij check --engines`` takes these names for
the event engine and ``blocks-<pattern>`` for the block engine)."""

ROUTED_PATTERNS = ("kp", "dp", "hp")
"""The patterns of the paper's routing rules (emitters route each tuple to its replicas); ``key`` and ``scale``
route to teams of joiners."""

TEAM_PATTERNS = ("key", "scale")
"""The patterns that route a key to a team of joiners (Key-OIJ, Scale-OIJ)."""

COLLECTORS = ("standard", "round-robin", "naive")
"""The replicas' collectors (:mod:`oij.parallel.runtime.collector`), one name each wherever they are named
(``oij run --collector``, the replica's job, the model checker of ``proofs/model.py``): ``standard`` takes any
channel's next batch, ``round-robin`` is PPOIJ's epoch collector (b0, p0, b1, p1, ... a channel's whole epoch in
one turn), ``naive`` a seeded random order (a negative control)."""

COLLECTOR_ALIASES = {"rr": "round-robin"}
"""Older spellings that ``oij run --collector`` still accepts, and the name each stands for."""

THETA = 1.05
"""Alg. 1's balance threshold (HP's hot-key split; the block engine's HP routing)."""

PARTITIONS = 64
"""Scale-OIJ: key partitions (hash ranges) of the team map."""

DELTA = 0.01
"""Scale-OIJ: Alg. 3's rescheduling threshold."""

REPLICAS = 2
"""Replica processes (joiners) of a run: ``oij run --replicas``, the benchmarks' default."""

BATCH = 32
"""Tuples per batch of an engine configured directly in Python (PPOIJ's b; the papers' experiments)."""

EVENT_BATCH = 256
"""The event engine's tuples per batch on the command line, ``oij run --batch`` and ``oij check --batch`` alike
(PPOIJ's b=32 pays numpy's per-call cost per 32 tuples: docs/results.rst)."""

CALIBRATION = 4096
"""HP: tuples counted before Alg. 1 runs."""

DECAY = 0.5
"""Scale-OIJ: Alg. 3's statistics decay (lambda)."""

SCHEDULE_EVERY = 4096
"""Scale-OIJ: tuples between two runs of Alg. 3 (0: never)."""


@dataclass
class EngineConfig:
    """The settings every parallel engine shares (an engine ignores those it has no use for).

    ``pattern``: one of :data:`PATTERNS`; ``replicas``: worker processes (joiners); ``emitters`` and ``batch``:
    the event engine's routing threads and tuples per message; ``theta``, ``max_split``: Alg. 1 (HP);
    ``partitions``, ``delta``: Alg. 3 (Scale-OIJ); ``epoch``: events per epoch (default from batch, replicas
    and emitters); ``rate``: tuples per second of wall clock (None: as fast as possible); ``seed``: the
    routing's random choices.  Test hooks: ``fail_after`` (replica -> batches or rounds before it raises) and
    ``stall`` (replicas that stop consuming).
    """

    pattern: str = "kp"
    replicas: int = REPLICAS
    emitters: int = 1
    batch: int = BATCH
    slots: int = 64
    result_width: int = 4096
    theta: float = THETA
    max_split: int | None = None
    partitions: int = PARTITIONS
    delta: float = DELTA
    epoch: int | None = None
    rate: float | None = None
    seed: int = 0
    fail_after: dict[int, int] = field(default_factory=dict)
    stall: tuple[int, ...] = ()


EPOCH_MIN = 8192
"""The fewest events in an epoch of the event engine."""


def epoch_size(opt: EngineConfig) -> int:
    """Events per epoch of the event engine: ``opt.epoch``, else enough for a few full batches per channel and
    replica (at least :data:`EPOCH_MIN`)."""
    return opt.epoch or max(EPOCH_MIN, 4 * opt.batch * opt.replicas * opt.emitters)


C = TypeVar("C", bound=EngineConfig)
"""Any engine's option class."""


def engine_config(cls: type[C], source: Any, **changes: Any) -> C:
    """An option object of class ``cls`` (an :class:`EngineConfig`) with each of its settings taken from the
    attribute of that name of ``source`` where ``source`` has one (a command's options; None there means "not
    given" for a setting whose default is not None), then ``changes``."""
    kw: dict[str, Any] = {}
    for f in fields(cls):
        v = getattr(source, f.name, None)
        if v is not None or (hasattr(source, f.name) and f.default is None):
            kw[f.name] = v
    kw.update(changes)
    return cls(**kw)
