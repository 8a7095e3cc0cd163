"""kit-power's mutants: the targets, the operator set, every mutant of a target in a fixed order, and the
source of one (cosmic-ray's operators and AST machinery; the method is the package's, :mod:`oij.bench.kitpower`)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from oij.errors import UsageError

ARITH = frozenset({"Add", "Sub", "Mul", "Div", "FloorDiv", "Mod"})
ORDER = frozenset({"Eq", "NotEq", "Lt", "LtE", "Gt", "GtE"})


@dataclass(frozen=True)
class Target:
    """A file to mutate and the command that runs it under ``oij conform``."""

    name: str
    path: str  # relative to the repository
    package: str | None  # copy this package (its folder: path's) into {tmp}, laid out as installed
    # ({tmp}/oij/reference/...), and mutate the file inside the copy
    command: tuple[str, ...]  # {python}, {mutant}, {repo}, {tmp} are filled in
    features: str


TARGETS = {
    "accum": Target("accum", "tests/impls/accum_oij.py", None, ("{python}", "{mutant}"), "all"),
    "oracle": Target("oracle", "reference/oracle.py", "oij.reference",
                     ("{python}", "{repo}/tests/impls/oracle_cmd.py", "--prefer", "{tmp}"), "all,cond"),
    "sorted": Target("sorted", "tests/impls/sorted_oij.py", None, ("{python}", "{mutant}"), "all,cond"),
    "bucket": Target("bucket", "tests/impls/bucket_oij.py", None, ("{python}", "{mutant}"), "all,cond"),
}


@dataclass
class Mutant:
    """One mutant and, once run, its verdict."""

    target: str
    operator: str
    occurrence: int
    line_no: int
    line: str  # the original line, stripped
    mutated: str = ""  # the mutated line, stripped (set when the mutant is made)
    verdict: str = ""  # killed | survived | equivalent | timeout | error
    seconds: float = 0.0
    replay_events: int | None = None
    found_by: str = ""
    kind: str = ""  # mismatch, protocol, crash, hang
    decided: str = ""  # "replay": killed by the judged replay (no real run; no seconds or replay size)
    reason: str = ""  # for equivalent mutants: the manifest's reason
    tail: str = field(default="", repr=False)  # the last lines of the output of a survivor or error


def keep_operator(name: str) -> bool:
    """The operator set of the module docstring."""
    m = re.fullmatch(r"core/ReplaceBinaryOperator_(\w+)_(\w+)", name)
    if m:
        return m[1] in ARITH and m[2] in ARITH
    m = re.fullmatch(r"core/ReplaceComparisonOperator_(\w+)_(\w+)", name)
    if m:
        pair = {m[1], m[2]}
        return pair <= ORDER or pair == {"Is", "IsNot"} or pair == {"In", "NotIn"}
    return name not in ("core/VariableInserter", "core/VariableReplacer")


def _cosmic() -> tuple[Any, Any, Any, Any]:
    try:
        import cosmic_ray.plugins as plugins
        from cosmic_ray.ast import Visitor, get_ast
        from cosmic_ray.mutating import mutate_code
    except ImportError:
        raise UsageError("kit-power needs the mutation tool: pip install 'oij[mutation]' (cosmic-ray)") from None
    return plugins, Visitor, get_ast, mutate_code


def enumerate_mutants(target: Target, source: str) -> list[Mutant]:
    """Every mutant of ``source`` under the kept operators, in a fixed order (one parse, one walk per operator; the
    mutated source is made when the mutant runs, by :func:`mutant_source`).  Fresh :class:`Mutant` objects each
    call; the positions are found once per source text in a process (:func:`_positions`)."""
    lines = source.splitlines()
    return [Mutant(target.name, name, occ, row, lines[row - 1].strip()) for name, occ, row in _positions(source)]


@functools.lru_cache(maxsize=4)
def _positions(source: str) -> tuple[tuple[str, int, int], ...]:
    """(operator, occurrence, line number) of every mutant of ``source``, in :func:`enumerate_mutants`' order."""
    plugins, visitor_cls, get_ast, _ = _cosmic()

    class Count(visitor_cls):  # type: ignore[misc, valid-type]  # cosmic-ray ships no type hints
        def __init__(self, op: Any) -> None:
            self.op = op
            self.rows: list[int] = []

        def visit(self, node: Any) -> Any:
            self.rows += [node.start_pos[0]] * len(list(self.op.mutation_positions(node)))
            return node

    out: list[tuple[str, int, int]] = []
    tree = get_ast(source)  # one parse: a counting walk returns every node as it is, so the tree is unchanged
    for name in sorted(plugins.operator_names()):
        if not keep_operator(name):
            continue
        counter = Count(plugins.get_operator(name)())
        counter.walk(tree)
        out += [(name, occ, row) for occ, row in enumerate(counter.rows)]
    return tuple(out)


def mutant_source(m: Mutant, source: str) -> str | None:
    """The source of mutant ``m`` (None if the operator makes no change there); sets ``m.mutated``, the changed
    line."""
    plugins, _, _, mutate_code = _cosmic()
    code: str | None = mutate_code(source, plugins.get_operator(m.operator)(), m.occurrence)
    if code is None or code == source:
        return None
    old, new = source.splitlines(), code.splitlines()
    i = next((k for k, (x, y) in enumerate(zip(old, new, strict=False)) if x != y), min(len(old), len(new)) - 1)
    m.mutated = new[i].strip() if i < len(new) else ""
    return code


def pick_evenly(items: list[Any], n: int) -> list[Any]:
    """``n`` items spread evenly over ``items`` (all of them when n is 0 or too large)."""
    if n <= 0 or n >= len(items):
        return items
    return [items[(i * len(items)) // n] for i in range(n)]
