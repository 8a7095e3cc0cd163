"""The claims of ``manifest.toml`` in z3, one function each, returning the formula that must be valid.

Each function builds a claim over unbounded integers (timestamps and bounds are
integers in the spec).  :func:`check` decides it: *valid* when the negation is
unsatisfiable, *invalid* with a counterexample model otherwise.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

import z3

MANIFEST = Path(__file__).with_name("manifest.toml")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _offsets() -> tuple[z3.ArithRef, z3.ArithRef, z3.BoolRef]:
    """The inclusive offsets lower', upper' of oij.spec.match, and the query's validity lower <= upper."""
    lower, upper = z3.Ints("lower upper")
    li, ui = z3.Bools("lower_inclusive upper_inclusive")
    lo = z3.If(li, lower, lower + 1)
    hi = z3.If(ui, upper, upper - 1)
    return lo, hi, lower <= upper


def final_means_no_future_match() -> z3.BoolRef:
    a, b, w = z3.Ints("a_ts b_ts W")
    lo, hi, valid = _offsets()
    return z3.Implies(z3.And(valid, w > a + hi, b >= w), z3.Not(z3.And(a + lo <= b, b <= a + hi)))


def not_final_means_a_future_match_exists() -> z3.BoolRef:
    a, w = z3.Ints("a_ts W")
    lo, hi, _ = _offsets()
    b = a + hi  # the witness: a probe at the last timestamp of the window
    return z3.Implies(z3.And(lo <= hi, w <= a + hi), z3.And(b >= w, a + lo <= b, b <= a + hi))


def probe_purge_is_sound() -> z3.BoolRef:
    a, b, w = z3.Ints("a_ts b_ts W")
    lo, hi, _ = _offsets()
    return z3.Implies(z3.And(b < w + lo, a >= w), z3.Not(z3.And(a + lo <= b, b <= a + hi)))


def probe_purge_is_exact() -> z3.BoolRef:
    b, w = z3.Ints("b_ts W")
    lo, hi, _ = _offsets()
    a = b - lo  # the witness: the earliest future base that reaches b
    return z3.Implies(z3.And(lo <= hi, b >= w + lo), z3.And(a >= w, a + lo <= b, b <= a + hi))


def base_purge_is_sound() -> z3.BoolRef:
    a, b, w = z3.Ints("a_ts b_ts W")
    lo, hi, _ = _offsets()
    return z3.Implies(z3.And(a + hi < w, b >= w), z3.Not(z3.And(a + lo <= b, b <= a + hi)))


def probe_purge_with_upper_offset_is_unsound() -> z3.BoolRef:
    a, b, w = z3.Ints("a_ts b_ts W")
    lo, hi, _ = _offsets()
    return z3.Implies(z3.And(b < w + hi, a >= w), z3.Not(z3.And(a + lo <= b, b <= a + hi)))


def exclusive_bound_is_neighbouring_inclusive() -> z3.BoolRef:
    x, lower, upper = z3.Ints("x lower upper")
    return z3.And((lower < x) == (lower + 1 <= x), (x < upper) == (x <= upper - 1))


def _lateness_claim(enough: bool) -> z3.BoolRef:
    # Three earlier tuples and the arriving one; disorder D bounds ts_i - ts_j for i < j.
    t = z3.Ints("t0 t1 t2 t3")
    d, lateness = z3.Ints("D l")
    disorder = z3.And(*[t[i] - t[j] <= d for i in range(4) for j in range(i + 1, 4)], d >= 0)
    w = z3.If(t[0] > t[1], t[0], t[1])
    w = z3.If(w > t[2], w, t[2]) - lateness
    bound = lateness >= d if enough else z3.And(lateness >= 0, lateness < d)
    return z3.Implies(z3.And(disorder, bound), z3.Not(t[3] < w))


def enough_lateness_means_nothing_late() -> z3.BoolRef:
    return _lateness_claim(True)


def too_little_lateness_can_make_a_tuple_late() -> z3.BoolRef:
    return _lateness_claim(False)


def _sums_fit(limit_ok: Callable[[z3.ArithRef], z3.BoolRef]) -> z3.BoolRef:
    a, b, w = z3.Ints("a_ts b_ts W")
    lower, upper = z3.Ints("lower upper")
    lo, hi, valid = _offsets()
    pre = z3.And(limit_ok(a), limit_ok(b), limit_ok(w), limit_ok(lower), limit_ok(upper), valid)
    sums = [a + lo, a + hi, a + hi + 1, w + lo, b - lo, b - hi, b - lo + 1]
    return z3.Implies(pre, z3.And(*[z3.And(s >= INT64_MIN, s <= INT64_MAX) for s in sums]))


def window_sums_fit_int64() -> z3.BoolRef:
    return _sums_fit(lambda x: z3.And(x > -(2**62), x < 2**62))


def window_sums_fit_int64_with_bounds_up_to_2_62() -> z3.BoolRef:
    return _sums_fit(lambda x: z3.And(x >= -(2**62), x <= 2**62))


def watermark_min_is_monotone() -> z3.BoolRef:
    m0, m1, m2, x = z3.Ints("m0 m1 m2 new")

    def mn(p: z3.ArithRef, q: z3.ArithRef, r: z3.ArithRef) -> z3.ArithRef:
        pq = z3.If(p < q, p, q)
        return z3.If(pq < r, pq, r)

    raised = z3.If(x > m1, x, m1)
    return mn(m0, raised, m2) >= mn(m0, m1, m2)


def _late_rules_agree(off_the_watermark: bool) -> z3.BoolRef:
    ts, w = z3.Ints("ts w")
    same = (ts < w) == (ts <= w)
    return z3.Implies(ts != w, same) if off_the_watermark else same


def late_rules_agree_off_the_watermark() -> z3.BoolRef:
    """Profiles: ``ts < W`` (canonical) and ``ts <= W`` (spark-ss) judge every tuple alike unless ts = W."""
    return _late_rules_agree(True)


def late_rules_always_agree() -> z3.BoolRef:
    """Must fail: the two late rules differ on a tuple exactly at the watermark."""
    return _late_rules_agree(False)


def _purges_agree(off_the_edge: bool) -> z3.BoolRef:
    w, edge = z3.Ints("w edge")
    same = (w > edge) == (w >= edge)
    return z3.Implies(w != edge, same) if off_the_edge else same


def exact_and_early_purge_agree_off_the_edge() -> z3.BoolRef:
    """Profiles: purge ``exact`` (W > edge) and ``early`` (W >= edge) drop the same tuples unless W = edge."""
    return _purges_agree(True)


def exact_and_early_purge_always_agree() -> z3.BoolRef:
    """Must fail: at W = edge the early purge drops a tuple a later one still matches."""
    return _purges_agree(False)


# -- The bucketed range join of the Spark oracle (oij/spark/oracle.py) --------
# Spark's ``div`` truncates toward zero; the oracle's ``_floor_div`` builds the
# floor from it with a CASE on the sign.  z3's integer ``/`` is Euclidean (for
# a positive divisor: the floor), used here only on non-negative dividends,
# where truncation and floor agree.


def _trunc_div(x: z3.ArithRef, w: z3.ArithRef) -> z3.ArithRef:
    """Spark's ``x div w`` for w > 0: the quotient rounded toward zero."""
    return z3.If(x >= 0, x / w, -((-x) / w))


def _sql_floor_div(e: z3.ArithRef, w: z3.ArithRef) -> z3.ArithRef:
    """The oracle's ``_floor_div``: ``CASE WHEN e >= 0 THEN e div w ELSE -((-e - 1) div w) - 1 END``."""
    return z3.If(e >= 0, _trunc_div(e, w), -_trunc_div(-e - 1, w) - 1)


def spark_floor_div_is_floor() -> z3.BoolRef:
    """The oracle's SQL floor division is the floor, for every sign of the dividend: q*w <= e < (q+1)*w."""
    e, w = z3.Ints("e width")
    q = _sql_floor_div(e, w)
    return z3.Implies(w >= 1, z3.And(q * w <= e, e < (q + 1) * w))


def _buckets_find(probe_bucket: Callable[[z3.ArithRef, z3.ArithRef], z3.ArithRef]) -> z3.BoolRef:
    a, b, w = z3.Ints("a_ts b_ts width")
    lo, hi, valid = _offsets()
    first, last = _sql_floor_div(a + lo, w), _sql_floor_div(a + hi, w)
    k = probe_bucket(b, w)
    return z3.Implies(z3.And(valid, w >= 1, a + lo <= b, b <= a + hi), z3.And(first <= k, k <= last))


def spark_buckets_find_every_pair() -> z3.BoolRef:
    """Every matching pair meets in a joined (key, bucket): the probe's bucket is among the base's.

    For every bucket width >= 1 and every sign of bounds and timestamps.  Since
    a probe has one bucket and the base's buckets ``sequence(first, last)`` are
    distinct, the pair meets in exactly one group: found, and found once.
    """
    return _buckets_find(_sql_floor_div)


def spark_buckets_with_truncating_division_miss_a_pair() -> z3.BoolRef:
    """Must fail: bucketing probes with Spark's plain ``div`` (toward zero) loses pairs at negative times."""
    return _buckets_find(_trunc_div)


def _buckets_covered(width_ok: Callable[[z3.ArithRef, z3.ArithRef], z3.BoolRef]) -> z3.BoolRef:
    a, w = z3.Ints("a_ts width")
    lo, hi, valid = _offsets()
    first, last = _sql_floor_div(a + lo, w), _sql_floor_div(a + hi, w)
    return z3.Implies(z3.And(valid, lo <= hi, w >= 1, width_ok(w, hi - lo + 1)), last - first <= 1)


def spark_window_covers_at_most_two_buckets() -> z3.BoolRef:
    """With the default width (at least the window length L), a base is replicated into at most two buckets."""
    return _buckets_covered(lambda w, length: w >= length)


def spark_narrower_buckets_cover_at_most_two() -> z3.BoolRef:
    """Must fail: buckets narrower than the window (the width cap) can put a base into three or more."""
    return _buckets_covered(lambda w, length: w < length)


def check(name: str) -> tuple[str, str]:
    """Decide claim ``name``: ("valid", "") or ("invalid", a counterexample)."""
    claim = globals()[name]()
    s = z3.Solver()
    s.add(z3.Not(claim))
    r = s.check()
    if r == z3.unsat:
        return "valid", ""
    if r == z3.sat:
        return "invalid", str(s.model())
    return "unknown", str(r)


def manifest() -> list[dict[str, str]]:
    """The manifest's claims, in order."""
    with MANIFEST.open("rb") as f:
        claims: list[dict[str, str]] = tomllib.load(f)["claim"]
    return claims


def main() -> int:
    bad = 0
    for c in manifest():
        verdict, model = check(c["name"])
        ok = verdict == c["verdict"]
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {c['name']}: {verdict} (expected {c['verdict']}) {model}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
