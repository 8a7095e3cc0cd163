"""kit-power's scores: one target's counts, seconds per kill and replay sizes, and an earlier result scored again
under the manifest as it is now."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from oij.bench.kitpower.evidence import missing_evidence
from oij.bench.kitpower.mutants import Mutant


def summarize(mutants: list[Mutant]) -> dict[str, Any]:
    """Counts, seconds per kill and replay sizes of one target's mutants."""
    killed = [m for m in mutants if m.verdict == "killed"]
    secs = [m.seconds for m in killed if m.decided != "replay"]
    sizes = [m.replay_events for m in killed if m.replay_events is not None]
    count = {v: sum(1 for m in mutants if m.verdict == v)
             for v in ("killed", "equivalent", "survived", "timeout", "error")}
    return {
        "mutants": len(mutants), **count,
        "score": round(count["killed"] / max(1, len(mutants) - count["equivalent"]), 4),
        "seconds_per_kill_median": round(statistics.median(secs), 2) if secs else None,
        "seconds_per_kill_max": round(max(secs), 2) if secs else None,
        "kills_over_60s": sum(1 for s in secs if s > 60),
        "replay_events_median": statistics.median(sizes) if sizes else None,
        "replay_events_max": max(sizes) if sizes else None,
        "replays_over_6_events": sum(1 for s in sizes if s > 6),
        "found_by_vectors": sum(1 for m in killed if m.found_by.startswith("vector")),
        "found_by_search": sum(1 for m in killed if m.found_by.startswith("search")),
        "killed_in_replay": sum(1 for m in killed if m.decided == "replay"),
        "survived_unreached": sum(1 for m in mutants if m.verdict == "survived" and m.kind == "unreached"),
    }


def rescore(path: str, manifest: dict[tuple[str, str, int], dict[str, Any]]) -> dict[str, Any]:
    """An earlier result with the manifest applied again: a survivor listed (same line) is equivalent, an
    equivalent one no longer listed is a survivor; kills are kept as measured."""
    import json

    result: dict[str, Any] = json.loads(Path(path).read_text())
    for m in result["mutants"]:
        if m["verdict"] not in ("survived", "equivalent"):
            continue
        if m["verdict"] == "equivalent" and m.get("kind") == "unreached" and str(m.get("reason", "")).startswith(
                "never run by the command"):
            continue  # an [[unreached]] entry's verdict, not the [[equivalent]] table's
        e = manifest.get((m["target"], m["operator"], m["occurrence"]))
        if e is not None and e.get("line", "").strip() == m["line"]:
            m["verdict"], m["reason"] = "equivalent", str(e.get("reason", ""))
        else:
            m["verdict"], m["reason"] = "survived", ""
    result["entries_without_evidence"] = missing_evidence(manifest)
    names = list(result["targets"])
    result["targets"] = {n: summarize([Mutant(**{k: v for k, v in m.items()}) for m in result["mutants"]
                                       if m["target"] == n]) for n in names}
    return result
