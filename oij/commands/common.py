"""Flags shared by the commands, and the option objects the library functions take."""

from __future__ import annotations

import argparse
from typing import Any, TypeVar

from oij.errors import UsageError
from oij.options import add_options, from_args

T = TypeVar("T")


def add_query_flags(p: argparse.ArgumentParser) -> None:
    """Flags that give (or override) the query of a Parquet input: the fields of
    :class:`oij.pipelines.files.QueryFlags`."""
    from oij.pipelines.files import QueryFlags

    add_options(p, QueryFlags)


def options(cls: type[T], args: argparse.Namespace, **given: Any) -> T:
    """A library function's options dataclass ``cls`` filled from the parsed flags of the same names (and
    ``given``, which win)."""
    return from_args(cls, args, **given)


__all__ = ["UsageError", "add_query_flags", "options"]
