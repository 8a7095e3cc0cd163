"""The error a bad value given by the user raises, in the commands and in the library functions behind them."""

from __future__ import annotations


class UsageError(Exception):
    """A bad value given by the user: a command-line flag, or the argument of a library function that stands for
    one (a preset name, a list of targets).  ``oij`` prints it on one line and exits with code 2."""


__all__ = ["UsageError"]
