"""The machine a benchmark runs on, as its result files record it (:func:`machine`)."""

from __future__ import annotations

import contextlib
import os
import platform
from typing import Any


def machine() -> dict[str, Any]:
    """The machine the numbers come from (times vary between machines; the counted figures do not)."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    mem = None
    with contextlib.suppress(ValueError, OSError):
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"cores": os.cpu_count(), "cpu": cpu, "memory_bytes": mem, "python": platform.python_version(),
            "platform": platform.platform(), "load_avg": list(os.getloadavg())}
