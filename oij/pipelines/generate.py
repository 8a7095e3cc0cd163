"""A workload from a preset and ``NAME=VALUE`` overrides, written to a file: ``oij generate``
(:func:`generate_file`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from oij.errors import UsageError
from oij.options import option
from oij.pipelines.files import check_outputs


def workload_params(preset: str | None, params: Sequence[str] = ()) -> Any:
    """The :class:`oij.workloads.WorkloadParams` of ``preset`` (None: the plain defaults of every parameter) with
    the overrides ``params`` (``NAME=VALUE``, as ``--param`` takes them); ``UsageError`` names a bad one."""
    from oij.workloads import PRESETS, ParamError, WorkloadParams, parse_value, resolve, with_overrides

    try:
        base = resolve(preset) if preset else WorkloadParams(description="custom")
        overrides: dict[str, Any] = {}
        for item in params:
            if "=" not in item:
                raise UsageError(f"--param {item!r}: expected NAME=VALUE")
            name, raw = item.split("=", 1)
            name = name.strip().replace("-", "_")
            overrides[name] = parse_value(name, raw)
        return with_overrides(base, overrides)
    except ParamError as e:
        where = "preset" if e.field == "preset" else f"--param {e.field}"
        if e.field == "preset":
            raise UsageError(f"unknown preset {preset!r} (known: {', '.join(PRESETS)})") from None
        raise UsageError(f"{where}: {e.message}") from None


OUTPUT_REQUIRED = "generate: -o/--output FILE is required (.parquet, oij-jsonl, or - for stdout)"


@dataclass
class GenerateOptions:
    """The options of ``oij generate``, each with its flag, help and default (:mod:`oij.options`); ``list_presets``,
    ``show`` and ``no_progress`` are the command's own (it lists, shows or draws a bar)."""

    preset: str | None = option(None, positional=True, nargs="?",
                                help="preset name (default: the plain defaults of every parameter)")
    param: list[str] = option(
        factory=list, flags=("-p", "--param"), action="append", metavar="NAME=VALUE",
        help="override a parameter (repeatable), e.g. --param keys=50 --param key_dist=zipf --param skew=1.1")
    events: int | None = option(None, flags=("-n", "--events"), help="number of tuples (default: the preset's)")
    seed: int = option(0, flags=("-s", "--seed"), help="random seed (default 0)")
    output: str | None = option(None, flags=("-o", "--output"),
                                help="output file (.parquet or oij-jsonl; - for stdout)")
    format: str | None = option(None, choices=["jsonl", "parquet"],
                                help="force the format instead of the extension")
    list_presets: bool = option(False, flags=("--list",), help="list the presets and exit")
    show: bool = option(False, help="print the resolved parameters as JSON and exit")
    no_progress: bool = option(False, help="no progress bar")


def generate_file(opts: GenerateOptions, on_block: Callable[[int], Any] | None = None) -> Any:
    """Write the workload ``opts`` describe to ``opts.output`` (``-``: stdout; Parquet by the extension or
    ``format``); its :class:`oij.workloads` write statistics.  ``on_block(n)`` is called as tuples are written
    (a progress bar)."""
    from oij.workloads import ParamError, write_workload

    p = workload_params(opts.preset, opts.param)
    events = tuple_count(opts)
    if not 0 <= opts.seed < 1 << 64:
        raise UsageError(f"--seed: must be in [0, 2^64), got {opts.seed}")
    if opts.output is None:
        raise UsageError(OUTPUT_REQUIRED)
    fmt = opts.format or ("parquet" if opts.output.endswith(".parquet") else "jsonl")
    if fmt == "parquet" and opts.output == "-":
        raise UsageError("--output -: Parquet cannot be written to stdout; give a .parquet file")
    check_outputs([opts.output])
    try:
        return write_workload(opts.output, p, events, opts.seed, fmt=fmt, on_block=on_block)
    except ParamError as e:
        raise UsageError(f"{e.field}: {e.message}") from None


def tuple_count(opts: GenerateOptions) -> int:
    """The tuples ``opts`` ask for: ``events``, else the preset's."""
    events: int = workload_params(opts.preset, opts.param).events if opts.events is None else opts.events
    if events < 0:
        raise UsageError(f"--events: must be >= 0, got {events}")
    return events


__all__ = ["GenerateOptions", "generate_file", "tuple_count", "workload_params"]
