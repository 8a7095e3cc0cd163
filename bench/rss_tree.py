"""Run a command and record its peak memory: ``python bench/rss_tree.py OUT.json CMD [ARGS...]``.

Every 0.5 s it reads VmRSS from /proc for the command's process and all its descendants (for ``oij check``:
the oij process and the Spark JVM it starts), and writes the command, its exit code, its wall time, the oij
process's peak RSS, the largest descendant's peak and the peak of their sum to OUT.json (atomically).  Used
for ``bench/results/check-got-scale.json``.  Linux only (/proc).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def rss_mib(pid: int) -> int:
    """VmRSS of ``pid`` in MiB (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        return 0
    return 0


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python bench/rss_tree.py OUT.json CMD [ARGS...]", file=sys.stderr)
        return 2
    out, cmd = argv[0], argv[1:]
    t0 = time.time()
    proc = subprocess.Popen(cmd)
    main_peak = child_peak = total_peak = 0
    while proc.poll() is None:
        r = {p: rss_mib(p) for p in tree(proc.pid)}
        main_peak = max(main_peak, r.get(proc.pid, 0))
        child_peak = max(child_peak, max((v for p, v in r.items() if p != proc.pid), default=0))
        total_peak = max(total_peak, sum(r.values()))
        time.sleep(0.5)
    res = {"cmd": cmd, "rc": proc.returncode, "seconds": round(time.time() - t0, 1), "python_rss_mib": main_peak,
           "max_child_rss_mib": child_peak, "tree_rss_mib": total_peak}
    tmp = f"{out}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out)
    print(res)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
