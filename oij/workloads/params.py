"""Workload parameters: one frozen dataclass, its validation, and ``name=value`` overrides.

Units: timestamps are integer **microseconds** of event time; ``rate`` is
tuples per second of event time.  Every field is documented on
:class:`WorkloadParams`; :func:`oij.workloads.check_params` states the valid ranges and
raises :class:`ParamError` naming the field.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any, cast

from oij.spec.model import (
    COND_OPS,
    TS_LIMIT,
    AggregateKind,
    Comparison,
    CondOp,
    JoinKind,
    Query,
    SpecError,
    check_query,
)

_COMPARISON = re.compile(r"^a\.(\w+)\s*(<=|>=|==|!=|<|>)\s*b\.(\w+)\s*(?:([+-])\s*([0-9][0-9_.eE+-]*))?$")


def parse_cond_text(text: str) -> tuple[Comparison, ...]:
    """``a.x<b.y+5,a.z>=b.z`` as comparisons (a regular expression, never ``eval``).  Raises ParamError."""
    out = []
    for i, part in enumerate(x.strip() for x in text.split(",")):
        m = _COMPARISON.match(part)
        if m is None:
            raise ParamError("cond", f"comparison {i + 1} ({part!r}) is not a.<field> OP b.<field> [+|- number] "
                                     f"with OP in {' '.join(COND_OPS)}")
        left, op, right, sign, num = m.groups()
        try:
            add = float(num.replace("_", "")) if num else 0.0
        except ValueError:
            raise ParamError("cond", f"comparison {i + 1}: bad constant {num!r}") from None
        out.append(Comparison(left, cast("CondOp", op), right, -add if sign == "-" else add))
    return tuple(out)

KEY_DISTS = ("uniform", "zipf", "self-similar", "rotating")
ARRIVALS = ("poisson", "regular")
DELAYS = ("none", "uniform", "exponential")
WATERMARKS = ("lateness", "count", "interval", "none")
KEY_TYPES = ("int", "str")

US_PER_S = 1_000_000


class ParamError(ValueError):
    """A workload parameter is invalid.  ``field`` names it; the message says what is allowed."""

    def __init__(self, field_: str, message: str) -> None:
        super().__init__(f"{field_}: {message}")
        self.field = field_
        self.message = message


@dataclass(frozen=True)
class WorkloadParams:
    """Everything that defines a generated workload (with the seed and the number of tuples).

    Keys
      ``keys`` u distinct keys (0..u-1, or ``"k0"``.. with ``key_type="str"``);
      ``key_dist`` uniform | zipf (P(k) ∝ (k+1)^-skew, skew > 0) |
      self-similar (Gray et al./Korn et al.: a fraction ``skew`` = h of the keys
      gets 1-h of the tuples, recursively; h in (0,1), 0.5 is uniform, smaller is
      more skewed; PPOIJ's skew factor s) | rotating (Scale-OIJ Fig. 14: a share
      ``hot_share`` of the tuples goes to a hot set of ``hot_keys`` keys, the rest
      is uniform; the hot set changes every ``hot_period`` us of event time and
      walks through a random permutation of the keys, so every key is hot equally
      often and all keys get the same expected total).

    Time
      ``rate`` v base tuples per second of event time; ``probe_ratio`` probe
      tuples per base tuple (probe rate = v * ratio); ``arrivals`` poisson
      (exponential gaps) or regular (constant gaps) for the merged stream, each
      tuple being base with probability 1/(1+ratio); bursts: the rate is
      multiplied by ``burst_factor`` during the first ``burst_duty`` fraction of
      every ``burst_period`` us (factor 1 = no bursts); ``start_ts`` the first
      event time.

    Disorder
      a tuple arrives at ts + delay (integer us; ties in generation order).  A
      fraction ``delay_fraction`` of the tuples is delayed: ``delay`` uniform
      (integers in [0, ``delay_max``]) or exponential (mean ``delay_mean``,
      truncated to [0, ``delay_max``] unless ``delay_max`` is None); the others
      arrive at their ts.  A fraction ``stragglers`` gets instead a delay
      beyond the lateness bound l, uniform in [l+1, l+``straggler_max``], so
      they are (very likely) late on purpose.

    Progress
      ``watermark`` lateness (Scale-OIJ lateness mode: the query sets
      ``lateness`` = l, no watermark events) | count (each channel emits
      max-ts-seen - l after every ``watermark_every`` of its tuples) | interval
      (every channel emits max-ts-seen - l whenever the arrival clock crosses a
      multiple of ``watermark_interval`` us) | none (no watermarks, no
      lateness: nothing is late, nothing is purged).  A channel only emits a
      watermark that is above its previous one.  ``base_channels`` and
      ``probe_channels`` are the upstream channels of each stream (PPOIJ Fig. 3);
      the query's channels is their sum, base channels first.

    Query
      ``lower``, ``upper`` (us, relative to the base tuple's ts), the two
      inclusive flags, ``aggregate`` (None = pairs), ``join``.

    Joining condition (PPOIJ's cond, SPO-Join's Q1 shape)
      ``cond`` comparisons ``a.<f> OP b.<g> [+c]`` separated by commas, e.g.
      ``a.power<b.power,a.cool>b.cool`` (``parse_cond_text``; data, never
      evaluated).  Every tuple gets every named field the cond reads, an
      integer in [0, ``field_range``).  ``field_correlation`` rho in [-1, 1]
      correlates a tuple's fields: field j is ``|rho| z_j' + (1 - |rho|) u_j``
      scaled, with z a uniform shared by the tuple's fields, ``z_j' = z``
      (rho >= 0, or j even) or ``1 - z`` (rho < 0, j odd: anti-correlated),
      and u_j independent uniforms.  ``cond_selectivity`` s: if set, the
      constant of every ``<``/``<=``/``>``/``>=`` comparison is replaced so
      that it alone holds for a fraction :math:`s^{1/k}` (k comparisons) of
      candidate pairs with independent uniform fields (x - y is triangular
      on (-R, R)), so the whole cond holds for about s of them when
      rho = 0; correlation moves the joint selectivity away from s
      (``oij generate --describe`` does not measure it; the benchmark does).

    Guarantee (tested): a tuple with delay <= l is never late; the observable
    disorder max_{i<j}(ts_i - ts_j) is at most the largest delay given.
    """

    description: str = ""
    source: str = ""
    # keys
    keys: int = 100
    key_dist: str = "uniform"
    skew: float = 0.5
    hot_keys: int = 10
    hot_share: float = 0.5
    hot_period: int = 100_000
    key_type: str = "int"
    # time
    rate: float = 1_000_000.0
    probe_ratio: float = 1.0
    arrivals: str = "poisson"
    burst_factor: float = 1.0
    burst_period: int = 1_000_000
    burst_duty: float = 0.1
    start_ts: int = 0
    # disorder
    delay: str = "uniform"
    delay_max: int | None = 100
    delay_mean: float = 10.0
    delay_fraction: float = 1.0
    stragglers: float = 0.0
    straggler_max: int = 1000
    # progress
    watermark: str = "lateness"
    lateness: int = 100
    watermark_every: int = 64
    watermark_interval: int = 1000
    base_channels: int = 1
    probe_channels: int = 1
    # query
    lower: int = -1000
    upper: int = 0
    lower_inclusive: bool = True
    upper_inclusive: bool = True
    aggregate: str | None = None
    join: str = "inner"
    # joining condition
    cond: str | None = None
    field_range: int = 1000
    field_correlation: float = 0.0
    cond_selectivity: float | None = None
    # metadata
    arrival_rate: float | None = None
    events: int = 1_000_000
    extra: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def channels(self) -> int:
        """The query's number of channels: base channels then probe channels."""
        return self.base_channels + self.probe_channels

    def query(self) -> Query:
        """The query the generated stream is meant for."""
        return Query(
            lower=self.lower,
            upper=self.upper,
            lower_inclusive=self.lower_inclusive,
            upper_inclusive=self.upper_inclusive,
            aggregate=cast("AggregateKind | None", self.aggregate),  # check_params admits only these names
            join=cast("JoinKind", self.join),
            channels=self.channels,
            lateness=self.lateness if self.watermark == "lateness" else None,
            cond=self.comparisons(),
        )

    def comparisons(self) -> tuple[Comparison, ...]:
        """The cond's comparisons, their constants set for ``cond_selectivity`` if given."""
        cs = parse_cond_text(self.cond) if self.cond else ()
        s = self.cond_selectivity
        if s is None or not cs:
            return cs
        per = s ** (1.0 / len(cs))
        r = float(self.field_range)

        def below(p: float) -> float:  # c with P(x - y < c) = p, x, y ~ U(0, r)
            return r * math.sqrt(2 * p) - r if p <= 0.5 else r - r * math.sqrt(2 * (1 - p))

        out = []
        for c in cs:
            if c.op in ("<", "<="):
                c = c._replace(add=float(round(below(per))))
            elif c.op in (">", ">="):
                c = c._replace(add=float(round(below(1.0 - per))))
            out.append(c)
        return tuple(out)

    def field_names(self) -> tuple[str, ...]:
        """The named fields every generated tuple carries (those the cond reads, ts and value excluded), sorted."""
        return tuple(sorted({n for c in self.comparisons() for n in (c.left, c.right)} - {"ts", "value"}))

    def key_label(self, i: int) -> int | str:
        """The key with index ``i``: ``i`` or ``"k<i>"``."""
        return i if self.key_type == "int" else f"k{i}"

    def summary(self) -> dict[str, Any]:
        """The parameters as a JSON-able dict (without metadata)."""
        d = dataclasses.asdict(self)
        d.pop("extra")
        return d


def _num(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _int(x: object) -> bool:
    return type(x) is int


def check_params(p: WorkloadParams) -> WorkloadParams:
    """Return ``p`` if every field is valid, else raise :class:`ParamError` naming the first bad field."""

    def need(ok: bool, name: str, what: str) -> None:
        if not ok:
            raise ParamError(name, f"{what}, got {getattr(p, name)!r}")

    need(_int(p.keys) and p.keys >= 1, "keys", "must be an integer >= 1")
    need(p.keys <= 1 << 30, "keys", "must be <= 2^30")
    need(p.key_dist in KEY_DISTS, "key_dist", f"must be one of {', '.join(KEY_DISTS)}")
    need(p.key_type in KEY_TYPES, "key_type", "must be int or str")
    if p.key_dist == "zipf":
        need(_num(p.skew) and math.isfinite(p.skew) and p.skew > 0, "skew", "zipf: must be > 0")
        need(p.keys <= 1 << 24, "keys", "zipf: must be <= 2^24 (the CDF is tabulated)")
    if p.key_dist == "self-similar":
        need(_num(p.skew) and 0 < p.skew < 1, "skew", "self-similar: must be in (0, 1) (0.5 = uniform)")
    if p.key_dist == "rotating":
        need(_int(p.hot_keys) and 1 <= p.hot_keys <= p.keys, "hot_keys", f"must be an integer in [1, keys={p.keys}]")
        need(_num(p.hot_share) and 0 <= p.hot_share <= 1, "hot_share", "must be in [0, 1]")
        need(_int(p.hot_period) and p.hot_period >= 1, "hot_period", "must be an integer >= 1 (us)")
    need(_num(p.rate) and math.isfinite(p.rate) and p.rate > 0, "rate", "must be a number > 0 (tuples/s)")
    need(p.rate <= 1e12, "rate", "must be <= 1e12 tuples/s")
    need(_num(p.probe_ratio) and math.isfinite(p.probe_ratio) and p.probe_ratio > 0, "probe_ratio", "must be > 0")
    need(p.arrivals in ARRIVALS, "arrivals", f"must be one of {', '.join(ARRIVALS)}")
    need(_num(p.burst_factor) and math.isfinite(p.burst_factor) and p.burst_factor >= 1, "burst_factor", "must be >= 1")
    need(_int(p.burst_period) and p.burst_period >= 1, "burst_period", "must be an integer >= 1 (us)")
    need(_num(p.burst_duty) and 0 < p.burst_duty < 1, "burst_duty", "must be in (0, 1)")
    half, quarter = TS_LIMIT // 2, TS_LIMIT // 4
    need(_int(p.start_ts) and abs(p.start_ts) <= half, "start_ts", f"must be an integer, |start_ts| <= {half}")
    need(p.delay in DELAYS, "delay", f"must be one of {', '.join(DELAYS)}")
    dmax_ok = p.delay_max is None or (_int(p.delay_max) and p.delay_max >= 0)
    need(dmax_ok, "delay_max", "must be an integer >= 0 or none")
    if p.delay == "uniform":
        need(p.delay_max is not None, "delay_max", "uniform delays need a bound")
    if p.delay == "exponential":
        need(_num(p.delay_mean) and math.isfinite(p.delay_mean) and p.delay_mean > 0, "delay_mean", "must be > 0")
    need(_num(p.delay_fraction) and 0 <= p.delay_fraction <= 1, "delay_fraction", "must be in [0, 1]")
    need(_num(p.stragglers) and 0 <= p.stragglers < 1, "stragglers", "must be in [0, 1)")
    need(_int(p.straggler_max) and p.straggler_max >= 1, "straggler_max", "must be an integer >= 1 (us)")
    need(p.watermark in WATERMARKS, "watermark", f"must be one of {', '.join(WATERMARKS)}")
    need(_int(p.lateness) and 0 <= p.lateness <= quarter, "lateness", f"must be an integer in [0, {quarter}] (us)")
    if p.stragglers > 0:
        need(p.watermark != "none", "stragglers", "need watermark != none (nothing is late without watermarks)")
    need(_int(p.watermark_every) and p.watermark_every >= 1, "watermark_every", "must be an integer >= 1")
    need(_int(p.watermark_interval) and p.watermark_interval >= 1, "watermark_interval", "must be an integer >= 1 (us)")
    need(_int(p.base_channels) and 1 <= p.base_channels <= 1024, "base_channels", "must be an integer in [1, 1024]")
    need(_int(p.probe_channels) and 1 <= p.probe_channels <= 1024, "probe_channels", "must be an integer in [1, 1024]")
    need(_int(p.events) and p.events >= 0, "events", "must be an integer >= 0")
    need(p.cond is None or isinstance(p.cond, str), "cond", "must be text like a.x<b.y,a.z>b.z or none")
    need(_int(p.field_range) and 1 <= p.field_range <= 1 << 53, "field_range", "must be an integer in [1, 2^53]")
    need(_num(p.field_correlation) and -1 <= p.field_correlation <= 1, "field_correlation", "must be in [-1, 1]")
    sel_ok = p.cond_selectivity is None or (_num(p.cond_selectivity) and 0 < p.cond_selectivity <= 1)
    need(sel_ok, "cond_selectivity", "must be in (0, 1] or none")
    try:
        check_query(p.query())
    except SpecError as e:
        raise ParamError(e.field, e.message) from None
    return p


# --------------------------------------------------------------- overrides


def _field_types() -> dict[str, str]:
    return {f.name: str(f.type) for f in fields(WorkloadParams) if f.name != "extra"}


def parse_value(name: str, raw: str) -> Any:
    """Parse the text ``raw`` for field ``name`` (``none``/``null`` for optional fields)."""
    types = _field_types()
    if name not in types:
        close = sorted(types)
        raise ParamError(name, f"unknown parameter (known: {', '.join(close)})")
    t = types[name]
    low = raw.strip().lower()
    if "None" in t and low in ("none", "null", ""):
        return None
    try:
        if t.startswith("bool"):
            if low in ("true", "1", "yes"):
                return True
            if low in ("false", "0", "no"):
                return False
            raise ValueError(raw)
        if t.startswith("int"):
            v = float(raw.replace("_", ""))
            if not v.is_integer():
                raise ValueError(raw)
            return int(raw.replace("_", "")) if raw.strip().lstrip("-").replace("_", "").isdigit() else int(v)
        if t.startswith("float"):
            return float(raw.replace("_", ""))
    except ValueError:
        kind = t.split(" ")[0]
        raise ParamError(name, f"must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}, got {raw!r}") from None
    return raw


def with_overrides(p: WorkloadParams, overrides: dict[str, Any]) -> WorkloadParams:
    """``p`` with fields replaced (values already parsed), validated."""
    unknown = [k for k in overrides if k not in _field_types()]
    if unknown:
        raise ParamError(unknown[0], "unknown parameter")
    return check_params(replace(p, **overrides))
