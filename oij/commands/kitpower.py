"""``oij bench kit-power``: the conformance kit's power, measured with mutants it was not built around.

The method, the targets and the data flow are :mod:`oij.bench.kitpower`'s (docs/conformance.rst, "How the kit
checks itself", has the table); this module makes its parser from
:class:`~oij.bench.kitpower.measure.KitPowerOptions`.
"""

from __future__ import annotations

import argparse

from oij.bench.kitpower.measure import KitPowerOptions, kit_power
from oij.commands.common import options
from oij.options import add_options


def register(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = bsub.add_parser("kit-power", help="mutation score of oij conform: mutants of independent implementations "
                        "run under oij conform at its defaults (needs oij[mutation])")
    add_options(p, KitPowerOptions)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return kit_power(options(KitPowerOptions, args))
