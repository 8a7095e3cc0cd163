"""Keys as strings for systems with one key column type (Spark frames, the Spark and Flink adapters)."""

from __future__ import annotations


def tag_key(k: int | str) -> str:
    """The tagged string of a key: ``i:<int>`` or ``s:<str>`` (distinct for 1 and "1")."""
    return f"i:{k}" if type(k) is int else f"s:{k}"


def untag_key(s: str) -> int | str:
    """The key of a tagged string (:func:`tag_key`'s inverse)."""
    return int(s[2:]) if s.startswith("i:") else s[2:]


__all__ = ["tag_key", "untag_key"]
