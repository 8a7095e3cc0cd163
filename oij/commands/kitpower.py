"""``oij bench kit-power``: the conformance kit's power, measured with mutants it was not built around.

The method, the targets and the data flow are :mod:`oij.bench.kitpower`'s (docs/conformance.rst, "How the kit
checks itself", has the table); this module parses the flags.
"""

from __future__ import annotations

import argparse
import dataclasses

from oij.bench.kitpower.measure import KitPowerOptions, kit_power
from oij.bench.kitpower.mutants import TARGETS


def register(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = bsub.add_parser("kit-power", help="mutation score of oij conform: mutants of independent implementations "
                        "run under oij conform at its defaults (needs oij[mutation])")
    p.add_argument("--targets", default="accum,oracle", help=f"comma-separated: {', '.join(TARGETS)}")
    p.add_argument("--repo", default=".", help="a checkout of oij (the targets are read from it; default .)")
    p.add_argument("--manifest", default=None, help="equivalent mutants (default REPO/tests/impls/mutants.toml)")
    p.add_argument("--sample", default="0",
                   help="run only N mutants per target, spread evenly over the list (0: all); or TARGET=N,... "
                   "(a target not named runs all)")
    p.add_argument("--only", default="", help="comma-separated TARGET:OPERATOR:OCCURRENCE to run alone")
    p.add_argument("-j", "--jobs", type=int, default=2, help="mutants run at once (default 2)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant before it counts as timeout")
    p.add_argument("--out", default="kit-power.json", help="where the raw numbers go (default ./kit-power.json)")
    p.add_argument("--docs", default=None, help="also write the table (--table) to this directory")
    p.add_argument("--table", default="kit-power-table.rst",
                   help="the name of the table --docs writes (default kit-power-table.rst)")
    p.add_argument("--rescore", metavar="JSON", default=None,
                   help="run nothing: apply the manifest again to the survivors of an earlier result (after an entry "
                   "was added or removed) and write --out and --docs")
    p.add_argument("--rerun", metavar="JSON", default=None,
                   help="run again, under the kit as it is now, the survivors of an earlier result (after "
                   "the generation was strengthened) and write the merged result; kills are kept as measured")
    p.add_argument("--no-replay", action="store_true",
                   help="run every mutant through oij conform (slow): no recorded run, no in-process replay, no "
                   "coverage shortcut")
    p.add_argument("--judge-in-replay", action="store_true",
                   help="decide kills from the in-process replay too: the first differing answer the kit's judge "
                   "rejects (confirmed by one fresh run of that case) is where oij conform would fail; fast, but "
                   "such kills have no seconds or replay size (a real run of a sample gives those)")
    p.add_argument("--deep", metavar="JSON", default=None,
                   help="run nothing through oij conform: replay the survivors of an earlier result against "
                   "--deep-cases more generated cases; those they tell apart are gaps of the kit, not equivalent "
                   "(their first differing case goes to --deep-out)")
    p.add_argument("--exhaustive", metavar="JSON", default=None,
                   help="run nothing through oij conform: run the oracle's survivors (and equivalents) of an earlier "
                   "result on every small case of oij/testing/_exhaustive.py (bounded-exhaustive: up to 3 events); "
                   "those told apart go to --deep-out")
    p.add_argument("--deep-cases", type=int, default=2000, help="cases of --deep (default 2000)")
    p.add_argument("--deep-out", default="kit-power-gaps", help="where --deep puts the cases (default "
                   "./kit-power-gaps)")
    p.add_argument("--state-bound", action="store_true",
                   help="also run every survivor on the long cases of oij conform --state-bound (in this process, "
                   "the cases and the oracle's answers made once): a mutant whose state grows with the stream, or "
                   "whose output on them is wrong, is killed there (found by 'state-bound')")
    p.add_argument("--state-events", type=int, default=100_000, help="events per long case (default 100000)")
    p.add_argument("--no-shapes", action="store_true",
                   help="leave out the eight bug shapes of tests/impls/accum_bugs.py (run after the mutants)")
    p.add_argument("--restarts", action="store_true",
                   help="measure the restart mode instead: every state-drop mutant of the oracle's checkpoint "
                   "(tests/impls/state_drop.py) and every recovery bug of tests/impls/restart_bugs.py under "
                   "oij conform --restarts 1 at its defaults; exit 1 unless each is killed or, with its "
                   "argument, equivalent")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    opts = KitPowerOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(KitPowerOptions)})
    return kit_power(opts)
