"""The option objects the library functions take, filled from parsed flags."""

from __future__ import annotations

import argparse
from typing import Any, TypeVar

from oij.errors import UsageError
from oij.options import from_args

T = TypeVar("T")


def options(cls: type[T], args: argparse.Namespace, **given: Any) -> T:
    """A library function's options dataclass ``cls`` filled from the parsed flags of the same names (and
    ``given``, which win)."""
    return from_args(cls, args, **given)


__all__ = ["UsageError", "options"]
