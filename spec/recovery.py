"""Exactly-once across crashes and restores: what a run with restarts commits, and how it is judged.

A run is a sequence of *incarnations* :math:`0, 1, \\dots, n` of one implementation on one case with
events :math:`e_1, \\dots, e_N`.  Incarnation :math:`i` starts from the state it saved through event
:math:`k_i` (:math:`k_0 = 0`: nothing saved), reads :math:`e_{k_i+1}, \\dots`, and writes a sequence
:math:`o_i` of result rows and checkpoint marks :math:`\\mathit{cp}(k)` ("my state through event :math:`k`
is durable").  Every incarnation but the last is killed; the last reads the end and exits.

* The rows of :math:`o_i` before its last checkpoint mark are *committed*; the rest are *provisional*
  (lost with the crash), except that the last incarnation commits everything when it completes.
* :math:`k_{i+1}` is the events count of the last checkpoint mark of :math:`o_i`, or :math:`k_i` when
  :math:`o_i` has none.
* The run is *exactly-once* for a result :math:`R` (the whole stream's rows, canonical or under a
  profile) when :math:`\\biguplus_i \\mathrm{committed}(o_i) = R` as multisets.  Otherwise
  :math:`R \\setminus C` is *lost* and :math:`C \\setminus R` is *duplicated* (rows of :math:`R` committed
  more often than :math:`R` has them) or *unexpected* (rows not in :math:`R` at all), where :math:`C` is
  the committed multiset.  A run with duplicates and nothing lost or unexpected is *at-least-once*.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple


class Checkpoint(NamedTuple):
    """The mark :math:`\\mathit{cp}(k)`: the implementation's state through input event ``events`` is durable."""

    events: int


Line = Hashable
"""One line of an incarnation's output: a result row (any hashable value) or a :class:`Checkpoint`."""


def committed(output: Sequence[Line], completed: bool) -> list[Line]:
    """:math:`\\mathrm{committed}(o)`: the rows of ``output`` before its last checkpoint mark; every row of
    it when the incarnation ``completed`` (read the end and exited 0)."""
    rows = [x for x in output if not isinstance(x, Checkpoint)]
    if completed:
        return rows
    last = max((i for i, x in enumerate(output) if isinstance(x, Checkpoint)), default=0)
    return [x for x in output[:last] if not isinstance(x, Checkpoint)]


def restart_point(output: Sequence[Line], previous: int) -> int:
    """:math:`k_{i+1}`: the events count of the last checkpoint mark of ``output``, else ``previous``."""
    marks = [x.events for x in output if isinstance(x, Checkpoint)]
    return marks[-1] if marks else previous


def is_valid_checkpoint(k: int, previous: int, fed: int) -> bool:
    """A mark :math:`\\mathit{cp}(k)` is valid when :math:`\\mathit{previous} \\le k \\le \\mathit{fed}`:
    never behind an earlier mark, never ahead of the events the incarnation was given."""
    return previous <= k <= fed


@dataclass
class RecoveryVerdict:
    """The committed multiset against :math:`R`: rows lost, duplicated and unexpected (each as often as
    it is off)."""

    lost: list[Line] = field(default_factory=list)
    duplicated: list[Line] = field(default_factory=list)
    unexpected: list[Line] = field(default_factory=list)

    @property
    def exactly_once(self) -> bool:
        return not (self.lost or self.duplicated or self.unexpected)

    @property
    def kind(self) -> str:
        """``exactly-once``, ``at-least-once`` (duplicates only), ``lossy`` (lost rows only) or ``wrong``."""
        if self.exactly_once:
            return "exactly-once"
        if self.duplicated and not self.lost and not self.unexpected:
            return "at-least-once"
        if self.lost and not self.duplicated and not self.unexpected:
            return "lossy"
        return "wrong"


def judge_committed(expected: Sequence[Line], outputs: Sequence[Sequence[Line]], last_completed: bool = True,
                    ) -> RecoveryVerdict:
    """Compare :math:`C = \\biguplus_i \\mathrm{committed}(o_i)` with :math:`R` = ``expected``; every
    incarnation but the last was killed, the last completed when ``last_completed``."""
    c: Counter[Line] = Counter()
    for i, o in enumerate(outputs):
        c.update(committed(o, last_completed and i == len(outputs) - 1))
    r: Counter[Line] = Counter(expected)
    v = RecoveryVerdict()
    v.lost = sorted((r - c).elements(), key=repr)
    over = c - r
    v.duplicated = sorted((x for x in over.elements() if x in r), key=repr)
    v.unexpected = sorted((x for x in over.elements() if x not in r), key=repr)
    return v
