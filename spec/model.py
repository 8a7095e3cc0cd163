"""The data model: tuples, watermarks, the end of the stream, and the query.

Everything in the specification is a function of these values.  Events are
immutable named tuples (cheap to build: the reference oracle and the readers
use the same classes, millions of times a second); the query is a frozen
dataclass.

Notation used in every docstring of :mod:`oij.spec`:

* ``a`` is a base tuple (stream A), ``b`` a probe tuple (stream B);
* ``a.ts``, ``a.key``, ``a.id`` are its fields;
* ``q`` is the query, with bounds ``q.lower <= q.upper``;
* ``W`` is the effective watermark (see :mod:`oij.spec.watermark`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, NamedTuple, TypeAlias

Side: TypeAlias = Literal["base", "probe"]
"""Which stream a tuple belongs to: ``"base"`` (A) or ``"probe"`` (B)."""

BASE: Final = "base"
PROBE: Final = "probe"
SIDES: Final = (BASE, PROBE)

Key: TypeAlias = int | str
"""A join key.  ``1`` and ``"1"`` are different keys (Python equality)."""

AggregateKind: TypeAlias = Literal["count", "sum", "avg", "min", "max"]
AGGREGATES: Final[tuple[AggregateKind, ...]] = ("count", "sum", "avg", "min", "max")

JoinKind: TypeAlias = Literal["inner", "left"]
JOINS: Final = ("inner", "left")

CondOp: TypeAlias = Literal["<", "<=", ">", ">=", "==", "!="]
COND_OPS: Final = ("<", "<=", ">", ">=", "==", "!=")

BUILTIN_FIELDS: Final = ("ts", "value")
"""Tuple attributes a cond may name besides the named ``fields``."""

FIELD_LIMIT: Final = 1 << 53
r"""Bound on integer cond operands and on cond constants: :math:`|x| \le 2^{53}`.

Within it every integer is exactly a double, so a field is one float64 in every
engine, and a sum :math:`b.y + c` never overflows (see :func:`oij.spec.match.is_cond_true`)."""

TS_LIMIT: Final = (1 << 62) - 1
r"""Bound on every timestamp and query bound: :math:`|ts|, |lower|, |upper| < 2^{62}`.

With it, every sum the engines form (``ts + lower'``, ``ts + upper' + 1``,
``W + lower'``, ``b.ts - lower'``) stays inside a signed 64-bit integer, which
is what the parallel engines and Spark store.  The bound is strict: with
:math:`\le 2^{62}`, ``ts = 2^62`` and ``upper = 2^62 - 1`` give a wake time of
:math:`2^{63}`, one past int64 (``proofs/manifest.toml`` keeps that model,
and z3 finds exactly this counterexample)."""

NO_WATERMARK: Final = -(1 << 64)
r"""The watermark before any watermark was seen: :math:`-\infty`.

It is an integer below every valid timestamp, and it stays below every valid
timestamp after any valid bound is added to it, so comparisons with it need
no special case."""


class SpecError(ValueError):
    """A value violates the data model.  ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class StreamTuple(NamedTuple):
    """One tuple of the base or the probe stream.

    Fields: ``side`` in {base, probe}; ``id`` an integer unique in the input
    (across both sides); ``ts`` a signed 64-bit event time with
    :math:`|ts| < 2^{62}`; ``key`` an int or a str; ``value`` a finite float
    (default 0.0, the payload that aggregates read); ``channel`` the upstream
    channel it arrived on, :math:`0 \\le channel < q.channels`.
    ``fields`` are the named numeric fields a :class:`Comparison` of ``q.cond``
    may read, as ``(name, value)`` pairs sorted by name (default: none).
    """

    side: Side
    id: int
    ts: int
    key: Key
    value: float = 0.0
    channel: int = 0
    fields: tuple[tuple[str, float], ...] = ()


class Watermark(NamedTuple):
    r"""A watermark of channel ``channel``: no later tuple of that channel has ``ts < self.ts``.

    Watermarks of one channel may regress; a regression is ignored because the
    per-channel watermark is a running maximum (:func:`oij.spec.watermark.on_watermark`).
    """

    ts: int
    channel: int = 0


class End(NamedTuple):
    """The end of the input: every pending result becomes final."""


Event: TypeAlias = StreamTuple | Watermark | End
"""An event of the arrival sequence."""


class Comparison(NamedTuple):
    r"""One conjunct of the joining condition: :math:`a.\mathit{left}\ \mathit{op}\ b.\mathit{right} + add`.

    ``left`` names a field of the base tuple, ``right`` a field of the probe
    tuple (a name of ``fields``, or ``ts`` or ``value``); ``op`` is one of
    ``< <= > >= == !=``; ``add`` is a constant with :math:`|add| \le 2^{53}`.
    The comparison is exact, over the reals (:func:`oij.spec.match.is_cond_true`).
    """

    left: str
    op: CondOp
    right: str
    add: float = 0.0


@dataclass(frozen=True, slots=True)
class Query:
    r"""An online interval join query.

    ``lower``/``upper`` are the window bounds relative to a base tuple's ts
    (:math:`lower \le upper`); the two flags make each bound inclusive (default)
    or exclusive.  ``aggregate`` is ``None`` for the pairs mode or one of
    count/sum/avg/min/max for OpenMLDB's per-base-tuple window aggregate.
    ``join`` is inner or left.  ``channels`` is the number N of upstream
    channels whose watermarks are combined.  ``lateness`` switches to the
    Scale-OIJ lateness mode: the watermark is ``max ts seen - lateness`` and
    watermark events are not allowed.  ``cond`` is PPOIJ's optional joining
    condition ([PPOIJ]_, Eq. 1): a conjunction of :class:`Comparison` (empty: true).
    """

    lower: int
    upper: int
    lower_inclusive: bool = True
    upper_inclusive: bool = True
    aggregate: AggregateKind | None = None
    join: JoinKind = "inner"
    channels: int = 1
    lateness: int | None = None
    cond: tuple[Comparison, ...] = ()


def _is_int(x: object) -> bool:
    return type(x) is int


def check_ts(field: str, ts: object) -> int:
    r"""Return ``ts`` if it is an int with :math:`|ts| < 2^{62}`, else raise :class:`SpecError`."""
    if not _is_int(ts):
        raise SpecError(field, f"must be an integer, got {ts!r}")
    assert isinstance(ts, int)
    if not -TS_LIMIT <= ts <= TS_LIMIT:
        raise SpecError(field, f"out of range: |{field}| must be < 2^62, got {ts}")
    return ts


def check_query(q: Query) -> Query:
    """Return ``q`` if it is a valid query, else raise :class:`SpecError` naming the field.

    Valid: integer bounds within :data:`TS_LIMIT`; ``lower <= upper``; boolean
    flags; a known aggregate and join; ``channels >= 1``; ``lateness`` absent
    or an integer in ``[0, 2^62)``; every comparison of ``cond`` as in
    :func:`check_comparison`.
    """
    check_ts("lower", q.lower)
    check_ts("upper", q.upper)
    if q.lower > q.upper:
        raise SpecError("lower", f"lower ({q.lower}) must be <= upper ({q.upper})")
    for name in ("lower_inclusive", "upper_inclusive"):
        if type(getattr(q, name)) is not bool:
            raise SpecError(name, f"must be true or false, got {getattr(q, name)!r}")
    if q.aggregate is not None and q.aggregate not in AGGREGATES:
        raise SpecError("aggregate", f"must be null or one of {', '.join(AGGREGATES)}; got {q.aggregate!r}")
    if q.join not in JOINS:
        raise SpecError("join", f"must be one of {', '.join(JOINS)}; got {q.join!r}")
    if not _is_int(q.channels) or q.channels < 1:
        raise SpecError("channels", f"must be an integer >= 1, got {q.channels!r}")
    if q.lateness is not None:
        check_ts("lateness", q.lateness)
        if q.lateness < 0:
            raise SpecError("lateness", f"must be >= 0, got {q.lateness}")
    if type(q.cond) is not tuple:
        raise SpecError("cond", f"must be a list of comparisons, got {q.cond!r}")
    for i, c in enumerate(q.cond):
        check_comparison(f"cond[{i}]", c)
    return q


def is_field_name(name: object) -> bool:
    """True iff ``name`` is an identifier ``[A-Za-z_][A-Za-z0-9_]*`` (ASCII)."""
    return type(name) is str and name.isascii() and name.isidentifier()


def check_number(field: str, x: object) -> float:
    r"""``x`` as a float if it is finite (an int with :math:`|x| \le 2^{53}`), else raise :class:`SpecError`."""
    if type(x) is int:
        if not -FIELD_LIMIT <= x <= FIELD_LIMIT:
            raise SpecError(field, f"out of range: an integer must have |x| <= 2^53, got {x}")
        return float(x)
    if type(x) is not float or x != x or x in (float("inf"), float("-inf")):
        raise SpecError(field, f"must be a finite number, got {x!r}")
    return x


def check_comparison(field: str, c: object) -> Comparison:
    r"""Return ``c`` if it is a :class:`Comparison` with field names, a known op and :math:`|add| \le 2^{53}`."""
    if not isinstance(c, Comparison):
        raise SpecError(field, f"must be a comparison, got {c!r}")
    for part in ("left", "right"):
        if not is_field_name(getattr(c, part)):
            raise SpecError(f"{field}.{part}", f"must be a field name, got {getattr(c, part)!r}")
    if c.op not in COND_OPS:
        raise SpecError(f"{field}.op", f"must be one of {' '.join(COND_OPS)}; got {c.op!r}")
    add = check_number(f"{field}.add", c.add)
    if abs(add) > FIELD_LIMIT:
        raise SpecError(f"{field}.add", f"out of range: |add| must be <= 2^53, got {c.add!r}")
    return c


def cond_fields(q: Query, side: Side) -> tuple[str, ...]:
    """The field names ``q.cond`` reads from a tuple of ``side`` (base: the lefts, probe: the rights), in order."""
    return tuple(c.left if side == BASE else c.right for c in q.cond)


def field_value(t: StreamTuple, name: str) -> float:
    """The value of field ``name`` of ``t``: ``t.ts`` or ``t.value`` or the named field (KeyError if absent)."""
    if name == "ts":
        return float(t.ts)
    if name == "value":
        return t.value
    for k, v in t.fields:
        if k == name:
            return v
    raise KeyError(name)


def check_tuple(t: StreamTuple, q: Query) -> StreamTuple:
    r"""Return ``t`` if its fields are valid for ``q``, else raise :class:`SpecError`.

    Valid: side in {base, probe}; int id; ts as in :func:`check_ts`; key an int
    or a str (not a bool); value a finite float; ``0 <= channel < q.channels``;
    ``fields`` sorted (name, finite float) pairs with distinct names other than
    ``ts`` and ``value``, including every field ``q.cond`` reads from this side
    (and :math:`|ts| \le 2^{53}` if it reads ``ts``).
    """
    if t.side not in SIDES:
        raise SpecError("side", f"must be 'base' or 'probe', got {t.side!r}")
    if not _is_int(t.id):
        raise SpecError("id", f"must be an integer, got {t.id!r}")
    check_ts("ts", t.ts)
    if type(t.key) is not int and type(t.key) is not str:
        raise SpecError("key", f"must be an integer or a string, got {t.key!r}")
    if type(t.value) is not float or t.value != t.value or t.value in (float("inf"), float("-inf")):
        raise SpecError("value", f"must be a finite number, got {t.value!r}")
    check_channel(t.channel, q)
    if t.fields or q.cond:
        check_fields(t, q)
    return t


def check_fields(t: StreamTuple, q: Query) -> None:
    """The ``fields`` part of :func:`check_tuple`."""
    if type(t.fields) is not tuple:
        raise SpecError("fields", f"must be an object of named numbers, got {t.fields!r}")
    names = [f[0] for f in t.fields]
    for name, v in t.fields:
        if not is_field_name(name) or name in BUILTIN_FIELDS:
            raise SpecError("fields", f"bad field name {name!r}: an identifier other than ts and value")
        if type(v) is not float or check_number(f"fields.{name}", v) != v:
            raise SpecError(f"fields.{name}", f"must be a finite float, got {v!r}")
    if names != sorted(set(names)):
        raise SpecError("fields", "names must be distinct and sorted")
    for name in cond_fields(q, t.side):
        if name == "ts":
            if abs(t.ts) > FIELD_LIMIT:
                raise SpecError("ts", f"out of range for cond: |ts| must be <= 2^53, got {t.ts}")
        elif name != "value" and name not in names:
            side = "a" if t.side == BASE else "b"
            raise SpecError(f"fields.{name}", f"missing: the query's cond reads {side}.{name}")


def check_channel(channel: object, q: Query) -> int:
    """Return ``channel`` if it is an int in ``[0, q.channels)``, else raise :class:`SpecError`."""
    if not _is_int(channel):
        raise SpecError("channel", f"must be an integer, got {channel!r}")
    assert isinstance(channel, int)
    if not 0 <= channel < q.channels:
        raise SpecError("channel", f"out of range: must be in [0, {q.channels}), got {channel}")
    return channel


def check_watermark(w: Watermark, q: Query) -> Watermark:
    """Return ``w`` if valid for ``q`` (ts as :func:`check_ts`, channel in range, not in lateness mode)."""
    if q.lateness is not None:
        raise SpecError("type", "watermark events are not allowed when the query sets a lateness")
    check_ts("ts", w.ts)
    check_channel(w.channel, q)
    return w
