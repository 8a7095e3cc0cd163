"""A command's options written once: an options dataclass whose fields carry their flags.

Each field of a library function's options dataclass (``RunOptions``, ``CheckOptions``, ...) is declared with
:func:`option`: its default, and in the field's metadata its help, choices, metavar, flag spelling, hidden aliases
and whether it is positional.  :func:`add_options` adds the fields to an ``argparse`` parser, the defaults taken
from the dataclass; :func:`from_args` builds the dataclass back from the parsed namespace.  A field declared
without :func:`option` becomes ``--its-name`` with no help.

The parser is made from the dataclass, so the two cannot disagree (``tests/project/test_options.py`` walks every
subcommand of ``oij`` and compares each parser with its dataclass, issue 66).  Imports nothing of the project.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

KEY = "oij.option"
"""The metadata key under which a field's :class:`Option` is kept."""


@dataclass(frozen=True)
class Option:
    """How one field of an options dataclass appears on the command line (``argparse.add_argument``'s words).

    ``flags``: its spellings (default ``--field-name``); ``aliases``: older spellings, accepted but left out of
    ``--help``; ``positional``: an argument without a flag (``nargs`` then says how many); ``negation``: for a
    boolean whose default is True, the flag that sets it False (``--no-spark`` beside ``--spark``), with
    ``negation_help``; ``group``: the title of the argument group it is listed under; ``consts``: instead of a flag
    of its own, flags that each set the field to a value, of which one may be given (``--quick`` and ``--full``:
    ``(flag, value, help)`` each).  ``type`` defaults to the field's annotation when that is ``int`` or ``float``
    (or one of them or None).  A field without a default is a required argument (a flag given ``required``)."""

    help: str | None = None
    flags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    choices: Sequence[Any] | None = None
    metavar: str | None = None
    type: Callable[[str], Any] | None = None
    action: str | None = None
    nargs: str | int | None = None
    const: Any = None
    positional: bool = False
    negation: str | None = None
    negation_help: str | None = None
    group: str | None = None
    consts: tuple[tuple[str, Any, str | None], ...] = ()


def option(default: Any = dataclasses.MISSING, *, factory: Callable[[], Any] | None = None,
           help: str | None = None, flags: tuple[str, ...] = (), aliases: tuple[str, ...] = (),
           choices: Sequence[Any] | None = None, metavar: str | None = None, type: Callable[[str], Any] | None = None,
           action: str | None = None, nargs: str | int | None = None, const: Any = None, positional: bool = False,
           negation: str | None = None, negation_help: str | None = None, group: str | None = None,
           consts: tuple[tuple[str, Any, str | None], ...] = ()) -> Any:
    """A dataclass field with default ``default`` (or ``factory()``) that :func:`add_options` turns into a flag
    (:class:`Option` says what each keyword means)."""
    meta = {KEY: Option(help, flags, aliases, choices, metavar, type, action, nargs, const, positional, negation,
                        negation_help, group, consts)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def option_of(f: dataclasses.Field[Any]) -> Option:
    """The :class:`Option` of field ``f`` (an empty one for a field declared without :func:`option`)."""
    found = f.metadata.get(KEY)
    return found if isinstance(found, Option) else Option()


def default_of(f: dataclasses.Field[Any]) -> Any:
    """The default of field ``f`` (``dataclasses.MISSING`` when it has none)."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def ordered_fields(cls: type[Any]) -> list[dataclasses.Field[Any]]:
    """The fields of dataclass ``cls`` in the order they are added to a parser: its own first, then those of
    each base class (so that the query flags of a base come last, as a group)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out: list[dataclasses.Field[Any]] = []
    for klass in cls.__mro__:
        for name in vars(klass).get("__annotations__", {}):
            if name in fields and fields[name] not in out:
                out.append(fields[name])
    return out


def _scalar(hint: Any) -> Callable[[str], Any] | None:
    """``int`` or ``float`` when the annotation is one of them (or one of them or None); else None."""
    if hint in (int, float):
        return typing.cast(Callable[[str], Any], hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and args[0] in (int, float):
            return typing.cast(Callable[[str], Any], args[0])
    return None


_CLASSES: weakref.WeakKeyDictionary[argparse.ArgumentParser, list[type[Any]]] = weakref.WeakKeyDictionary()


def add_options(parser: argparse.ArgumentParser, cls: type[Any]) -> argparse.ArgumentParser:
    """Add every field of the options dataclass ``cls`` to ``parser`` as an argument (in :func:`ordered_fields`'s
    order, with the field's default); ``parser``."""
    hints = typing.get_type_hints(cls)
    groups: dict[str, argparse._ArgumentGroup] = {}
    for f in ordered_fields(cls):
        o = option_of(f)
        default = default_of(f)
        where: argparse.ArgumentParser | argparse._ArgumentGroup = parser
        if o.group is not None:
            where = groups.setdefault(o.group, parser.add_argument_group(o.group))
        kw: dict[str, Any] = {"help": o.help}
        if o.action is None and hints.get(f.name) is bool and not o.positional:
            kw["action"] = "store_false" if default and o.negation is None else "store_true"
        else:
            scalar = _scalar(hints.get(f.name)) if o.action in (None, "append") else None
            kw.update(action=o.action, type=o.type or scalar, choices=o.choices, metavar=o.metavar, nargs=o.nargs,
                      const=o.const)
        kw = {k: v for k, v in kw.items() if v is not None}
        if default is not dataclasses.MISSING:
            kw["default"] = default
        elif not o.positional:
            kw["required"] = True
        if o.positional:
            where.add_argument(f.name, **kw)
            continue
        if o.consts:
            one = where.add_mutually_exclusive_group()
            for flag, value, text in o.consts:
                one.add_argument(flag, dest=f.name, action="store_const", const=value, help=text,
                                 default=kw.get("default"))
            continue
        flags = o.flags or (f"--{f.name.replace('_', '-')}",)
        where.add_argument(*flags, dest=f.name, **kw)
        if o.negation is not None:
            where.add_argument(o.negation, dest=f.name, action="store_false", help=o.negation_help)
        for alias in o.aliases:
            where.add_argument(alias, **(kw | {"dest": f.name, "default": argparse.SUPPRESS,
                                               "help": argparse.SUPPRESS, "required": False}))
    _CLASSES.setdefault(parser, []).append(cls)
    return parser


def classes_of(parser: argparse.ArgumentParser) -> list[type[Any]]:
    """The options dataclasses :func:`add_options` added to ``parser`` (none for a parser built by hand)."""
    return list(_CLASSES.get(parser, []))


def from_args(cls: type[T], args: argparse.Namespace, **given: Any) -> T:
    """The options dataclass ``cls`` filled from the parsed arguments of the same names (and ``given``, which
    win); a field the namespace lacks keeps its default."""
    # T is any class here (the commands pass theirs through a TypeVar of their own); fields() wants a dataclass
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    return cls(**{n: getattr(args, n) for n in names if hasattr(args, n)} | given)


__all__ = ["Option", "add_options", "classes_of", "default_of", "from_args", "option", "option_of",
           "ordered_fields"]
