"""The conformance kit's features: the one list, read by the kit, ``oij conform``'s help and the docs.

Standard library only, so that ``oij``'s argument parser can name the features without loading the kit.
"""

from __future__ import annotations

FEATURES: dict[str, str] = {
    "left": "left joins: (a, null) rows for bases that match nothing",
    "aggregates": "per-base aggregates (count, sum, avg, min, max)",
    "channels": "more than one upstream channel, W = min over channels",
    "exclusive": "exclusive window bounds",
    "watermarks": "watermark mode: watermark lines",
    "lateness": "lateness mode: W = max ts - lateness, no watermark lines",
    "late-report": "late tuples reported as late lines (absent: late lines are not compared)",
    "regressions": "watermarks that go backwards on a channel",
    "mixed-keys": "int and str keys that print alike (1 and \"1\")",
    "extreme-ts": "timestamps near +/-2^62",
    "negative-ts": "negative timestamps",
    "representation": "values where other languages and systems change how they hold them: timestamps, ids and "
                      "int keys at and across +/-2^31, 2^32, 2^53 and the int64 edge; string keys that differ only "
                      "by case, Unicode normalization or a trailing space (with mixed-keys); values of 17 "
                      "significant digits, -0.0, subnormals, the largest double",
    "cond": "a joining condition: comparisons of named fields, ts and value (format 1.1; opt-in: all,cond)",
}
"""Every feature a case can exercise; ``oij conform --features`` restricts generation to a subset."""

OPT_IN = frozenset({"cond"})
"""Features that ``all`` and the default leave out: format 1.1 additions an implementation of format 1.0 cannot know.
Claim them by name (``--features all,cond``)."""

DEFAULT_FEATURES = frozenset(FEATURES) - OPT_IN
"""The features of ``all``: every feature of format 1.0."""


__all__ = ["DEFAULT_FEATURES", "FEATURES", "OPT_IN"]
