"""Flags shared by the commands, and the option objects the library functions take."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, TypeVar

from oij.errors import UsageError

T = TypeVar("T")


def add_query_flags(p: argparse.ArgumentParser) -> None:
    """Flags that give (or override) the query of a Parquet input."""
    g = p.add_argument_group("query (for Parquet input without a stored query, or to override it)")
    g.add_argument("--lower", type=int, help="lower bound of the window, relative to the base tuple's ts")
    g.add_argument("--upper", type=int, help="upper bound of the window")
    g.add_argument("--lower-exclusive", action="store_true", help="exclude the lower bound")
    g.add_argument("--upper-exclusive", action="store_true", help="exclude the upper bound")
    g.add_argument("--aggregate", choices=["none", "count", "sum", "avg", "min", "max"], help="per-base aggregate")
    g.add_argument("--join", choices=["inner", "left"], help="join kind (default inner)")
    g.add_argument("--channels", type=int, help="number of upstream channels (default 1)")
    g.add_argument("--lateness", type=int, help="lateness mode: W = max ts - LATENESS")


def options(cls: type[T], args: argparse.Namespace, **given: Any) -> T:
    """A library function's options dataclass ``cls`` filled from the parsed flags of the same names (and
    ``given``, which win)."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    return cls(**{f.name: getattr(args, f.name) for f in fields if hasattr(args, f.name)} | given)


__all__ = ["UsageError", "add_query_flags", "options"]
