"""The JSON Schemas of oij-jsonl v1 (shipped in ``oij/schemas``) and a validator for the subset they use.

The subset: ``type`` (a name or a list of names), ``const``, ``enum``,
``minimum``/``maximum``, ``anyOf``, for objects ``properties``,
``required`` and ``additionalProperties: false``, and for arrays ``items``,
``prefixItems``, ``minItems`` and ``maxItems`` (the kill plan's schema).  JSON booleans are not
integers or numbers here, as in JSON Schema.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

LINE_TYPES = ("query", "tuple", "watermark", "end", "pair", "aggregate", "late")
OUTPUT_TYPES = ("pair", "aggregate", "late")
RESTART_TYPES = ("checkpoint",)
"""The line an implementation adds to its output under the restart protocol (``oij conform --restarts``)."""
KILL_PLAN = "killplan"
"""The schema of a kill plan file (``oij conform --replay F --kill-plan P --restarts N``): not a line type."""


@cache
def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of line type ``name`` (one of :data:`LINE_TYPES`, ``checkpoint``), or of the kill plan file
    (:data:`KILL_PLAN`)."""
    text = resources.files("oij").joinpath("schemas", f"{name}.schema.json").read_text(encoding="utf-8")
    out: dict[str, Any] = json.loads(text)
    return out


def _is_type(x: Any, t: str) -> bool:
    if t == "integer":
        return type(x) is int
    if t == "number":
        return type(x) in (int, float)
    if t == "string":
        return type(x) is str
    if t == "boolean":
        return type(x) is bool
    if t == "null":
        return x is None
    if t == "object":
        return type(x) is dict
    if t == "array":
        return type(x) is list
    raise ValueError(f"schema type {t!r} is outside the supported subset")


def errors(x: Any, s: dict[str, Any], path: str = "") -> list[str]:
    """Every violation of schema ``s`` by value ``x``, as ``field: reason`` strings (empty: valid)."""
    where = path or "line"
    if "anyOf" in s:
        if not any(not errors(x, sub, path) for sub in s["anyOf"]):
            return [f"{where}: {json.dumps(x)} matches none of the allowed forms"]
        return []
    if "const" in s and x != s["const"]:
        return [f"{where}: must be {json.dumps(s['const'])}, got {json.dumps(x)}"]
    if "enum" in s and not any(type(x) is type(v) and x == v for v in s["enum"]):
        return [f"{where}: must be one of {', '.join(json.dumps(v) for v in s['enum'])}, got {json.dumps(x)}"]
    if "type" in s:
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_is_type(x, t) for t in types):
            return [f"{where}: must be {' or '.join(types)}, got {json.dumps(x)}"]
    if "minimum" in s and type(x) in (int, float) and x < s["minimum"]:
        return [f"{where}: must be >= {s['minimum']}, got {x}"]
    if "maximum" in s and type(x) in (int, float) and x > s["maximum"]:
        return [f"{where}: must be <= {s['maximum']}, got {x}"]
    out: list[str] = []
    if type(x) is dict:
        props: dict[str, Any] = s.get("properties", {})
        for name in s.get("required", []):
            if name not in x:
                out.append(f"{name}: missing")
        extra = s.get("additionalProperties")
        if extra is False:
            out += [f"{k}: unknown field" for k in x if k not in props]
        elif isinstance(extra, dict):
            for k in x:
                if k not in props:
                    out += errors(x[k], extra, f"{path}.{k}" if path else k)
        for k, sub in props.items():
            if k in x:
                out += errors(x[k], sub, k)
    if type(x) is list:
        if "minItems" in s and len(x) < s["minItems"]:
            return [f"{where}: must have at least {s['minItems']} items, got {len(x)}"]
        if "maxItems" in s and len(x) > s["maxItems"]:
            return [f"{where}: must have at most {s['maxItems']} items, got {len(x)}"]
        prefix: list[dict[str, Any]] = s.get("prefixItems", [])
        for i, item in enumerate(x):
            sub = prefix[i] if i < len(prefix) else s.get("items")
            if sub is not None:
                out += errors(item, sub, f"{where}[{i}]")
    return out


def validate_line(obj: Any, allowed: tuple[str, ...] = LINE_TYPES) -> list[str]:
    """Violations of one decoded line against the schema its ``type`` names (empty: valid)."""
    if type(obj) is not dict:
        return ["line: must be a JSON object"]
    t = obj.get("type")
    if t not in allowed:
        return [f"type: must be one of {', '.join(allowed)}, got {json.dumps(t)}"]
    return errors(obj, schema(str(t)))
