"""CPU time of a process tree, for the benches and the bed's monitor (testbed/monitor.py): on a
machine shared with other work, wall time swings with their load, CPU time much less."""
from __future__ import annotations

import os


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds (user + system, including reaped children) of `root` (default: this process)
    and every process below it: the driver, the Spark JVM it started and the Python workers the
    JVM forks. Linux /proc only; 0.0 elsewhere."""
    if not os.path.isdir("/proc"):
        return 0.0
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        ticks[pid] = sum(int(v) for v in fields[11:15])   # utime, stime, cutime, cstime
        children.setdefault(int(fields[1]), []).append(pid)
    total, todo, seen = 0, [os.getpid() if root is None else root], set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in ticks:
            continue
        seen.add(pid)
        total += ticks[pid]
        todo.extend(children.get(pid, []))
    return total / os.sysconf("SC_CLK_TCK")
