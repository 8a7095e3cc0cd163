"""Every option of ``oij`` is written once (issue 66).

A command declares its options as the fields of a dataclass (:mod:`oij.options`: the field carries its flag,
help and choices; the parser is made from it).  This test walks EVERY subcommand of the parser of
:mod:`oij.cli` and compares each parser action with the field or parameter it stands for: same ``dest``, same
default, same choices; no flag without a field and no field without a flag.  A command built from a dataclass
is compared with it; a command whose flags went straight to a library function (:func:`by_hand`: none now)
would be compared with the function's signature defaults, and the flags the command handles itself named there
with a reason.  A dataclass kept in the command's module, not beside the library function
it feeds (:func:`beside_commands`), is also compared with that function's defaults.  The negative controls change
one default (of the parser, and of a dataclass in a copy) and see it reported.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from oij.parallel.config import BATCH, CALIBRATION, DECAY, EVENT_BATCH, REPLICAS, SCHEDULE_EVERY, THETA
from oij.parallel.runtime.pool import JobOptions
from oij.parallel.shared.teamrun import TeamOptions

from oij.check import CheckOptions
from oij.cli import build_parser
from oij.options import classes_of, default_of, option_of
from oij.pipelines.run import RunOptions

Path = tuple[str, ...]


def command_parser(*path: str) -> argparse.ArgumentParser:
    """The subparser of ``oij PATH...``."""
    parser = build_parser(path[0])
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def leaves(parser: argparse.ArgumentParser, path: Path = ()) -> Iterator[tuple[Path, argparse.ArgumentParser]]:
    """Every subcommand without subcommands of its own, with its path (``("bench", "memory")``)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from leaves(child, (*path, name))


@dataclass(frozen=True)
class ByHand:
    """A command whose flags are not (all) fields of a dataclass made into a parser: ``classes`` (options
    dataclasses compared field by field though the parser was written by hand), ``functions`` (the library
    functions whose parameters, by name or through ``renames`` -- dest -> (parameter, value of the flag's default
    as the parameter takes it) --, the flags are passed to), ``own`` (dest -> why the command keeps the flag to
    itself: it prints, lists, chooses a mode)."""

    functions: tuple[Callable[..., Any], ...] = ()
    renames: dict[str, tuple[str, Callable[[Any], Any]]] = field(default_factory=dict)
    own: dict[str, str] = field(default_factory=dict)
    classes: tuple[type[Any], ...] = ()


def _split(s: str) -> tuple[str, ...]:
    return tuple(x for x in s.split(",") if x)


def by_hand() -> dict[Path, ByHand]:
    """The commands compared with library signatures, whose flags go straight to a library function without an
    options dataclass: none now (``oij bench schedule`` was the last; a new one must be listed here)."""
    return {}


def beside_commands() -> dict[Path, ByHand]:
    """The commands whose options dataclass sits in the command's module (``oij/commands/``), not beside the
    library function it feeds (whose module a fresh benchmark result measures, so it stays as measured): their
    parsers are also compared with that function's signature defaults, as :func:`by_hand` does."""
    from oij.bench.conformtime import measure as conform_time
    from oij.bench.experiment import experiments, plot_dir, run_experiment
    from oij.bench.schedule import run_schedule_bench
    from oij.bench.shapes import floor
    from oij.flink.userjob import run_flink_user_job
    from oij.pipelines.files import QueryFlags
    from oij.spark.userjob import run_spark_user_job
    from oij.testing._verify import verify_vectors
    from oij.workloads.describe import describe_events

    printing = "how the result is printed"
    table: dict[Path, ByHand] = {
        ("describe",): ByHand((describe_events,), own={"file": "the input", "json": printing,
                                                       "no_progress": "a progress bar on a terminal"},
                              classes=(QueryFlags,)),
        ("bench", "floor"): ByHand((floor,), {"input": ("path", lambda v: v)}),
        ("bench", "plot"): ByHand((plot_dir,), {"dir": ("src", lambda v: v), "to": ("dst", lambda v: v)}),
        ("bench", "conform-time"): ByHand((conform_time,), {"adapters": ("adapters", _split)},
                                          {"out": "where the raw numbers go (a required parameter)"}),
        ("vectors", "verify"): ByHand((verify_vectors,), {"dir": ("directory", lambda v: v)},
                                      {"cmd": "the command under test", "features": "parsed by the command",
                                       "timeout": "given to the runner the command builds"}),
        ("userjob",): ByHand((run_spark_user_job, run_flink_user_job), {"checkpoint": ("checkpoint_dir", lambda v: v)},
                             {"engine": "which function", "events": "the input", "output": "the output",
                              "json": printing}),
    }
    table[("bench", "schedule")] = ByHand((run_schedule_bench,), {"engines": ("engines", _split)},
                                          {"out": "where the raw numbers go (a required parameter)"})
    for e in experiments().values():
        table[("bench", e.name)] = ByHand((run_experiment,), {"no_progress": ("progress", lambda v: not v)},
                                          {"size": "quick, default or full", "out": "the directory written",
                                           "plot": "the command draws the plots"})
    return table


_NOTHING = object()


def _fields(classes: tuple[type[Any], ...] | list[type[Any]]) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for cls in classes for f in dataclasses.fields(cls)}


def _parameters(functions: tuple[Callable[..., Any], ...]) -> dict[str, Any]:
    """Parameter -> default (``_NOTHING`` when it has none) over ``functions``."""
    out: dict[str, Any] = {}
    for fn in functions:
        for name, p in inspect.signature(fn).parameters.items():
            out.setdefault(name, _NOTHING if p.default is inspect.Parameter.empty else p.default)
    return out


def _same(want: Any, got: Any) -> bool:
    """A dataclass default and a parser default are the same (a field without a default and a flag whose default
    is None both mean "not given"; a list and a tuple of the same items are the same)."""
    if want is dataclasses.MISSING:
        return got is None
    if isinstance(want, list | tuple) and isinstance(got, list | tuple):
        return list(want) == list(got)
    return bool(want == got and type(want) is type(got)) or (want == got and {type(want), type(got)} <= {int, float})


def differences(parser: argparse.ArgumentParser, classes: list[type[Any]] | tuple[type[Any], ...],
                hand: ByHand | None = None) -> list[str]:
    """Where ``parser`` and its dataclasses (and ``hand``'s functions) disagree: a flag with no field, parameter
    or stated reason; a field with no flag; a default or choices that differ."""
    hand = hand or ByHand()
    classes = [*classes, *hand.classes]
    names = "+".join(c.__name__ for c in classes) or "no dataclass"
    fields = _fields(classes)
    params = _parameters(hand.functions)
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
               and a.default is not argparse.SUPPRESS]
    out: list[str] = []
    for a in actions:
        flag = a.option_strings[-1] if a.option_strings else a.dest
        if a.dest in fields:
            f = fields[a.dest]
            if not _same(default_of(f), a.default):
                out.append(f"{a.dest}: {names} says {default_of(f)!r}, the parser {a.default!r}")
            want = option_of(f).choices
            if want is not None and list(want) != list(a.choices or []):
                out.append(f"{a.dest}: choices {list(want)} in {names}, {a.choices} in the parser")
        elif a.dest in hand.own:
            continue
        else:
            param, convert = hand.renames.get(a.dest, (a.dest, lambda v: v))
            if param not in params:
                out.append(f"option {flag} has no field in {names}")
            elif params[param] is not _NOTHING and not _same(params[param], convert(a.default)):
                out.append(f"{a.dest}: the function's {param}={params[param]!r}, the parser {a.default!r}")
    dests = {a.dest for a in parser._actions}
    out += [f"field {n} of {names} has no option" for n in sorted(set(fields) - dests)]
    return out


def test_every_subcommand_is_compared_with_its_options() -> None:
    """Each subcommand of ``oij``: built from its dataclasses (:func:`oij.options.classes_of`), or listed in
    :func:`by_hand`; and no difference in any."""
    table = by_hand()
    found: dict[Path, list[str]] = {}
    for path, parser in leaves(build_parser()):
        classes = classes_of(parser)
        hand = table.get(path)
        assert classes or hand is not None, f"oij {' '.join(path)}: no options dataclass and not in by_hand()"
        diff = differences(parser, classes, hand)
        if diff:
            found[path] = diff
    assert found == {}
    walked = {path for path, _ in leaves(build_parser())}
    assert {"run", "check", "conform", "join", "generate"} <= {p[0] for p in walked}
    assert set(table) <= walked, f"by_hand() names commands that do not exist: {set(table) - walked}"


def test_the_flags_beside_commands_give_the_library_defaults() -> None:
    """The dataclasses kept in ``oij/commands/`` (:func:`beside_commands`) agree with the defaults of the library
    functions they feed; negative control: one default of such a parser changed is reported."""
    table = beside_commands()
    parsers = dict(leaves(build_parser()))
    assert set(table) <= set(parsers), f"beside_commands() names missing commands: {set(table) - set(parsers)}"
    assert {path: d for path in table if (d := differences(parsers[path], [], table[path]))} == {}
    parser = command_parser("vectors", "verify")
    next(a for a in parser._actions if a.dest == "show").default = 4
    assert differences(parser, [], table[("vectors", "verify")]) == ["show: the function's show=3, the parser 4"]


def test_the_commands_with_options_are_made_from_them() -> None:
    """``oij run``, ``check``, ``conform``, ``join``, ``generate`` are built from their dataclasses."""
    from oij.commands.conform import ConformFlags
    from oij.pipelines.generate import GenerateOptions
    from oij.pipelines.join import JoinOptions

    for path, cls in [(("run",), RunOptions), (("check",), CheckOptions), (("conform",), ConformFlags),
                      (("join",), JoinOptions), (("generate",), GenerateOptions)]:
        assert cls in classes_of(command_parser(*path))
        assert differences(command_parser(*path), [cls]) == []


@pytest.mark.parametrize(("dest", "value"), [("replicas", 3), ("decay", 0.25), ("collector", "standard")])
def test_a_changed_default_is_found(dest: str, value: Any) -> None:
    """Negative control: one default of the parser changed is reported, by name."""
    parser = command_parser("run")
    action = next(a for a in parser._actions if a.dest == dest)
    action.default = value
    assert [d for d in differences(parser, [RunOptions]) if d.startswith(f"{dest}:")] != []


def _altered(cls: type[Any], name: str, value: Any) -> type[Any]:
    """A copy of the options dataclass ``cls`` (same name, same metadata) whose field ``name`` defaults to
    ``value``."""
    return dataclasses.make_dataclass(
        cls.__name__, [(f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory,
                                                          metadata=f.metadata))
                       if f.name != name else (f.name, f.type, dataclasses.field(default=value, metadata=f.metadata))
                       for f in dataclasses.fields(cls)], kw_only=True)


def test_a_changed_dataclass_default_is_found() -> None:
    """Negative control: a copy of ``CheckOptions`` with one default altered (``batch``), compared with the
    parser made from the real one, is reported; so is a changed choice, and a signature default that differs."""
    altered = _altered(CheckOptions, "batch", EVENT_BATCH + 1)
    assert differences(command_parser("check"), [altered]) == [
        f"batch: CheckOptions says {EVENT_BATCH + 1}, the parser {EVENT_BATCH}"]
    parser = command_parser("check")
    next(a for a in parser._actions if a.dest == "method").choices = ["salted", "plain"]
    assert [d for d in differences(parser, [CheckOptions]) if d.startswith("method: choices")] != []

    def measure(out: str, max_examples: int = 3) -> None: ...

    by_hand_parser = argparse.ArgumentParser()
    by_hand_parser.add_argument("--max-examples", type=int, default=4)
    assert differences(by_hand_parser, [], ByHand((measure,))) == [
        "max_examples: the function's max_examples=3, the parser 4"]


@pytest.mark.parametrize(("path", "module", "name", "dest", "value"), [
    (("bench", "recovery"), "oij.bench.recovery:RecoveryOptions", "RecoveryOptions", "max_examples", 4),
    (("bench", "kit-power"), "oij.bench.kitpower.measure:KitPowerOptions", "KitPowerOptions", "jobs", 3),
    (("bench", "scale-window"), "oij.commands.bench:ExperimentFlags", "ExperimentFlags", "size", "quick"),
    (("bench", "spark"), "oij.commands.bench:ExperimentFlags", "ExperimentFlags", "out", "elsewhere"),
    (("bench", "plot"), "oij.commands.bench:PlotFlags", "PlotFlags", "to", "."),
    (("prove",), "oij.proofs.run:ProveOptions", "ProveOptions", "bounds", "full"),
    (("vectors", "verify"), "oij.commands.vectors:VerifyFlags", "VerifyFlags", "timeout", 31.0),
    (("bench", "status"), "oij.bench.results:ResultsOptions", "ResultsOptions", "repo", ".."),
    (("bench", "conform-time"), "oij.commands.results:ConformTimeFlags", "ConformTimeFlags", "adapters", "x"),
    (("describe",), "oij.commands.generate:DescribeFlags", "DescribeFlags", "limit", 10),
    (("explain",), "oij.commands.explain:ExplainFlags", "ExplainFlags", "lower", 0),
    (("adapter",), "oij.commands.adapter:AdapterFlags", "AdapterFlags", "file", "case.jsonl"),
    (("userjob",), "oij.commands.userjob:UserJobFlags", "UserJobFlags", "files", 21),
])
def test_a_converted_command_is_compared(path: Path, module: str, name: str, dest: str, value: Any) -> None:
    """Negative control on the commands converted last (issue 66): their dataclass with one default altered is
    reported against their parser; so is their parser with that default altered."""
    import importlib

    mod, _, attr = module.partition(":")
    cls = getattr(importlib.import_module(mod), attr)
    parser = dict(leaves(build_parser()))[path]
    assert cls in classes_of(parser)
    was = next(a.default for a in parser._actions if a.dest == dest)
    # a set: a field with several flags (--quick, --full) is reported once per flag
    assert set(differences(parser, [_altered(cls, dest, value)])) == {
        f"{dest}: {name} says {value!r}, the parser {was!r}"}
    next(a for a in parser._actions if a.dest == dest).default = value
    assert set(differences(parser, [cls])) == {f"{dest}: {name} says {was!r}, the parser {value!r}"}


def test_a_missing_option_is_found() -> None:
    """Negative control: an option the dataclass lacks, and a field the parser lacks."""
    parser = command_parser("run")
    parser.add_argument("--made-up", type=int, default=1)
    assert "option --made-up has no field in RunOptions" in differences(parser, [RunOptions])

    @dataclasses.dataclass
    class Wider(RunOptions):
        extra: int = 0

    assert "field extra of Wider has no option" in differences(command_parser("run"), [Wider])


def test_an_unlisted_command_is_found() -> None:
    """Negative control: a subcommand built by hand and not in :func:`by_hand` fails the walk's first check."""
    parser = build_parser("prove")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.add_parser("made-up").add_argument("--n", type=int, default=1)
    table = by_hand()
    unlisted = [path for path, p in leaves(parser) if not classes_of(p) and path not in table]
    assert unlisted == [("made-up",)]


def test_the_engine_defaults_are_the_configs() -> None:
    """The defaults typed in several places once (``replicas=2`` in 5, ``calibration=4096``, ``decay=0.5``,
    ``schedule_every=4096``, ``batch=32`` in 3 each) are :mod:`oij.parallel.config`'s; ``oij check --batch`` is
    the event engine's tuples per batch, as in ``oij run``, with the same default (``EVENT_BATCH``)."""
    assert (RunOptions.replicas, RunOptions.calibration, RunOptions.decay, RunOptions.schedule_every,
            RunOptions.theta) == (REPLICAS, CALIBRATION, DECAY, SCHEDULE_EVERY, THETA)
    assert (CheckOptions.replicas, CheckOptions.batch) == (REPLICAS, EVENT_BATCH)
    assert RunOptions.batch is None  # None: the event engine's EVENT_BATCH (giving it selects the event engine)
    job, team = JobOptions(), TeamOptions()
    assert (job.replicas, job.batch, job.calibration) == (REPLICAS, BATCH, CALIBRATION)
    assert (team.replicas, team.batch, team.decay, team.schedule_every) == (REPLICAS, BATCH, DECAY, SCHEDULE_EVERY)


def test_conform_flags_give_the_kits_defaults() -> None:
    """``oij conform``'s flags, not given, make :class:`oij.testing.ConformOptions`'s defaults."""
    from oij.commands.conform import ConformFlags
    from oij.testing import ConformOptions

    assert ConformFlags().conform_options() == ConformOptions()


def test_a_required_field_and_exclusive_values() -> None:
    """A field without a default is a required argument (no ``MISSING`` handed to argparse); ``consts`` flags set
    one field, one of them at a time.  Negative control: the same flags given together are refused."""
    from oij.options import add_options, from_args, option

    @dataclass
    class Flags:
        out: str = option(flags=("-o",))
        size: str = option("default", consts=(("--quick", "quick", None), ("--full", "full", None)))

    parser = add_options(argparse.ArgumentParser(exit_on_error=False), Flags)
    assert from_args(Flags, parser.parse_args(["-o", "x"])) == Flags("x", "default")
    assert from_args(Flags, parser.parse_args(["-o", "x", "--full"])) == Flags("x", "full")
    assert differences(parser, [Flags]) == []
    with pytest.raises(argparse.ArgumentError, match="not allowed with"):
        parser.parse_args(["-o", "x", "--quick", "--full"])
    with pytest.raises(SystemExit):  # required: argparse exits even with exit_on_error=False
        parser.parse_args([])
