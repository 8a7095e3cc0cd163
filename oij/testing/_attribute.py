"""Which semantic profiles explain an implementation's output: the one answer behind ``oij conform``'s semantic
fingerprint (``oij.testing._runner.fingerprint``, over the cases of a run) and ``oij check --got``'s
attribution (:func:`attribute`, over one whole stream).

For a system S observed on some inputs (an :class:`Observation` each: a case or a whole stream, its canonical
result and S's output), and a named profile P of :mod:`oij.spec.profiles` (its result on each input computed by
:func:`oij.spec.profiles.compute_profile_result`, a step-by-step simulation in memory), let :math:`D_C` be the
differences of S from the canonical results and :math:`D_P` those from P's results, each difference an item
tagged with its input (a missing or extra pair, aggregate row or late id, or a wrong aggregate: the
``differences`` function decides what an item is).  P *explains* a difference d of :math:`D_C` iff
:math:`d \\notin D_P` (under P, S is right there), and P *explains S* iff :math:`D_P = \\emptyset`.  The
report (:class:`Attribution`) gives, per system, the profiles that explain it and, for the others, how many
of :math:`D_C` they explain and how many differences of their own (:math:`|D_P \\setminus D_C|`) they bring,
so that one line says whether a user sees a documented semantic choice or a bug ("all 1,204 differences are
explained by spark-ss").

Cost: one simulation per profile and input, about 0.3-0.4 ms per event each on this machine (16 profiles:
about 6 s per 1,000 events); the caller bounds it (``--sim-limit``).  :func:`attribute_in_spark` is the same
question past that bound, each profile's result from the Spark oracle.  Creates no file and no process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oij.spec.batch import Results
from oij.spec.model import Event, Query
from oij.spec.profiles import PROFILES, compute_profile_result

Item = tuple[Any, ...]
"""A difference as a hashable item, e.g. (kind, issue, base, probe, id)."""

Differences = Callable[[Results, Results], set[Item]]
"""The differences of an output (second) from a reference result (first), as items."""


def difference_items(ref: Results, got: Results) -> set[Item]:
    """Every difference of ``got`` from ``ref`` (``oij check``'s comparison, with the kit's tolerance), as
    (kind, issue, base, probe, id) items."""
    from oij.spark.compare import compare_results

    c = compare_results(ref, got, first=1 << 62)
    return {(d["kind"], d["issue"], d["base"], d["probe"], d["id"]) for d in c.differences}


def kit_differences(features: Iterable[str]) -> Differences:
    """The kit's comparison (``oij.testing._protocol.compare``) of the parts of two results that an
    implementation claiming ``features`` is held to, as (missing | unexpected, row) items."""
    from oij.testing._protocol import compare, restrict

    feats = frozenset(features)

    def items(ref: Results, got: Results) -> set[Item]:
        d = compare(restrict(ref, feats), restrict(got, feats))
        return {("missing", r) for r in d.missing} | {("unexpected", r) for r in d.unexpected}

    return items


@dataclass
class Observation:
    """One input (a query and its arrival sequence), its canonical result, and each system's output on it."""

    query: Query
    events: Sequence[Event]
    canonical: Results
    outputs: Mapping[str, Results]


@dataclass
class Attribution:
    """The profiles against one system's output: its differences from canonical and what each profile makes of them."""

    system: str
    differences: int
    explained_by: list[str] = field(default_factory=list)  # profiles under which the output is right
    partly: list[dict[str, Any]] = field(default_factory=list)  # {profile, explains, own}: the others, best first
    duplicated: int = 0  # rows repeated, when repeats are every difference (the at-least-once signature)

    def line(self) -> str:
        """One sentence for the terminal."""
        n = self.differences
        if n == 0:
            return f"{self.system}: no difference from the canonical result"
        noun = "difference" if n == 1 else "differences"
        if self.duplicated:
            return (f"{self.system}: every difference is a repeat of a row the result has ({self.duplicated:,} "
                    "extra copies), none missing or wrong: the at-least-once signature (rows replayed after a "
                    "restore, or a sink that is not idempotent), not a semantic choice")
        if self.explained_by:
            return (f"{self.system}: all {n:,} {noun} from the canonical result are explained by "
                    f"{', '.join(self.explained_by)} (the output is that profile's result exactly)")
        best = [p for p in self.partly if p["explains"] > 0][:3]
        if not best:
            return (f"{self.system}: none of the {n:,} {noun} is explained by a named profile: not a documented "
                    "semantic choice (a bug, or a profile oij does not name yet)")
        parts = "; ".join(f"{p['profile']} explains {p['explains']:,} of {n:,} and differs in {p['own']:,} of its own"
                          for p in best)
        return f"{self.system}: no named profile explains all {n:,} {noun}: {parts}"


def attribute_observations(observations: Sequence[Observation], *, differences: Differences = difference_items,
                           profiles: Sequence[str] | None = None, complete: bool = True,
                           say: Callable[[str], None] | None = None) -> dict[str, Attribution]:
    """Attribute each system's differences from the canonical results to the named profiles (``profiles``:
    these names only; the canonical profile is never tried), over every observation (module docstring).

    ``complete=False``: only which profiles explain a system matters; a profile is left at the first
    observation where it leaves a difference (its ``partly`` counts then cover the observations up to there).
    Cost: O(profiles x observations x simulation)."""
    systems = list(dict.fromkeys(name for obs in observations for name in obs.outputs))
    d_c: dict[str, set[Item]] = {name: set() for name in systems}
    for i, obs in enumerate(observations):
        for name, got in obs.outputs.items():
            d_c[name] |= {(i, *x) for x in differences(obs.canonical, got)}
    per: dict[str, dict[str, set[Item]]] = {name: {} for name in systems}
    for pname, prof in PROFILES.items():
        if pname == "canonical" or (profiles is not None and pname not in profiles):
            continue
        if say is not None:
            say(f"attribution: simulating the {pname} profile ...")
        d_p: dict[str, set[Item]] = {name: set() for name in systems}
        for i, obs in enumerate(observations):
            res = compute_profile_result(list(obs.events), obs.query, prof).canonical()
            for name, got in obs.outputs.items():
                d_p[name] |= {(i, *x) for x in differences(res, got)}
            if not complete and all(d_p.values()):
                break
        for name in systems:
            per[name][pname] = d_p[name]
    out = {}
    for name in systems:
        a = Attribution(name, len(d_c[name]))
        for pname, d in per[name].items():
            if not d:
                a.explained_by.append(pname)
            else:
                a.partly.append({"profile": pname, "explains": len(d_c[name] - d), "own": len(d - d_c[name])})
        a.partly.sort(key=lambda p: (-p["explains"], p["own"], p["profile"]))
        out[name] = a
    return out


def attribute(q: Query, events: Sequence[Event], gots: dict[str, Results], canonical: Results,
              profiles: Sequence[str] | None = None, say: Callable[[str], None] | None = None) -> list[Attribution]:
    """``oij check --got``'s attribution: each output's differences from ``canonical`` on one whole stream
    (:func:`attribute_observations` with :func:`difference_items`); no profile is simulated for an output with
    no difference (its :class:`Attribution` lists none), nor at all if no output differs.

    Requires: ``events`` the whole stream, ``canonical`` its canonical result.  O(profiles x simulation).
    """
    differing = {name: got for name, got in gots.items() if difference_items(canonical, got)}
    dups = {name: duplicates_only(canonical, got) for name, got in differing.items()}
    rest = {name: got for name, got in differing.items() if not dups[name]}
    found = attribute_observations([Observation(q, events, canonical, rest)], profiles=profiles,
                                   say=say) if rest else {}
    for name, n in dups.items():
        if n:
            found[name] = Attribution(name, len(difference_items(canonical, gots[name])), duplicated=n)
    return [found.get(name, Attribution(name, 0)) for name in gots]


def duplicates_only(ref: Results, got: Results) -> int:
    r"""The number of extra copies when ``got`` is ``ref`` with some rows repeated and nothing else (every
    row of ``ref`` present, every extra row a copy of one of them: :math:`got \supsetneq ref` as multisets with
    :math:`\mathrm{set}(got) = \mathrm{set}(ref)`); 0 otherwise.  An aggregate row is keyed by its base and
    must carry the same count and value as the result's.  O(rows)."""
    from collections import Counter

    from oij.testing._protocol import same_value

    extra = 0
    for kind in ("pairs", "late"):
        r, g = Counter[Any](getattr(ref, kind)), Counter[Any](getattr(got, kind))
        if r - g or set(g) - set(r):
            return 0
        extra += sum((g - r).values())
    by_base = {a[0]: a for a in ref.aggregates}
    seen: Counter[Any] = Counter()
    for b, n, v in got.aggregates:
        want = by_base.get(b)
        if want is None or want[1] != n or not same_value(want[2], v):
            return 0
        seen[b] += 1
    if set(seen) != set(by_base):
        return 0
    extra += sum(c - 1 for c in seen.values())
    return extra


def attribute_in_spark(spark: Any, frame: Any, q: Query, results_dir: str, reference: str, systems: Sequence[str],
                       profiles: Sequence[str], opts: Any = None,
                       say: Callable[[str], None] | None = None) -> list[Attribution]:
    """:func:`attribute` past ``--sim-limit``: each profile's result from the Spark oracle
    (``oij.spark.profiles.spark_profile_oracle``), the differences as distinct (kind, issue, base, probe, id)
    rows compared by joins; only counts reach the driver.

    ``results_dir`` holds the canonical result (engine ``reference``) and each system's output; ``profiles`` are
    the names to try.  O(profiles x Spark oracle run).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from oij.spark.compare import TOLERANCE, _diff_frame, reference_rows
    from oij.spark.profiles import spark_profile_oracle

    items = ["kind", "issue", "base", "probe", "id"]
    res = spark.read.parquet(os.path.abspath(results_dir))
    ref = reference_rows(spark, results_dir, reference)  # every row, also when only fingerprints were kept
    d_c = {s: _diff_frame(ref, res.where(F.col("engine") == s), TOLERANCE).select(*items).distinct()
           .persist(StorageLevel.MEMORY_AND_DISK) for s in systems}
    counts = {s: d.count() for s, d in d_c.items()}
    out = {s: Attribution(s, counts[s]) for s in systems}
    try:
        for pname in profiles:
            if not any(counts.values()):
                break
            if say is not None:
                say(f"attribution: the {pname} profile in Spark ...")
            pr = spark_profile_oracle(spark, q, frame, PROFILES[pname], opts)
            try:
                p_ref = pr.frame().persist(StorageLevel.MEMORY_AND_DISK)
                for s in systems:
                    if not counts[s]:
                        continue
                    d_p = _diff_frame(p_ref, res.where(F.col("engine") == s), TOLERANCE).select(*items).distinct()
                    on = [F.col(f"c.{c}").eqNullSafe(F.col(f"p.{c}")) for c in items]
                    cond = on[0]
                    for c in on[1:]:
                        cond = cond & c
                    n_p = d_p.count()
                    both = d_c[s].alias("c").join(d_p.alias("p"), cond, "inner").count()
                    if n_p == 0:
                        out[s].explained_by.append(pname)
                    else:
                        out[s].partly.append({"profile": pname, "explains": counts[s] - both, "own": n_p - both})
                p_ref.unpersist()
            finally:
                pr.release()
    finally:
        for d in d_c.values():
            d.unpersist()
    for a in out.values():
        a.partly.sort(key=lambda p: (-p["explains"], p["own"], p["profile"]))
    return list(out.values())


__all__ = ["Attribution", "Differences", "Item", "Observation", "attribute", "attribute_in_spark",
           "attribute_observations", "difference_items", "kit_differences"]
