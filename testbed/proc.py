"""CPU time of a process tree, for the benches and the bed's monitor (testbed/monitor.py): on a
machine shared with other work, wall time swings with their load, CPU time much less."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator


def proc_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/PID/stat after the command name) of every process: [0] state,
    [1] parent pid, [2] process group, [11:15] CPU ticks. Linux /proc only; nothing elsewhere."""
    if not os.path.isdir("/proc"):
        return
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                yield int(entry), handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds (user + system, including reaped children) of `root` (default: this process)
    and every process below it: the driver, the Spark JVM it started and the Python workers the
    JVM forks. Linux /proc only; 0.0 elsewhere."""
    if not os.path.isdir("/proc"):
        return 0.0
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for pid, fields in proc_stats():
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


def group_members(pgid: int) -> list[int]:
    """The processes of process group `pgid` still running (zombies, which only wait to be reaped,
    are not)."""
    return [pid for pid, fields in proc_stats() if fields[2] == str(pgid) and fields[0] != "Z"]


def end_group(pgid: int, grace: float = 10.0) -> list[int]:
    """Ends what is left of process group `pgid` (a child started with start_new_session=True has
    its pid as group): SIGTERM, SIGKILL of whatever still runs after `grace` s, then a bounded wait
    until the group is empty. Returns the pids it found. Needed after the group's leader exited:
    spark-submit's JVM exits on SIGTERM and leaves the Python driver it started (issue 52)."""
    found = group_members(pgid)
    for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        if not group_members(pgid):
            break
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            break
        deadline = time.monotonic() + wait_s
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
    return found


def stop_group(proc: subprocess.Popen, timeout: float = 60.0, kill: bool = False) -> int:
    """Stops a child started in its own session and everything in its process group: SIGTERM to
    the child (a monitor stops its query, its JVM follows) and its exit within `timeout` s, else
    (or with `kill` at once) SIGKILL of the group; then end_group() for what the child left behind.
    Returns the child's exit code."""
    if proc.poll() is None:
        if not kill:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(30)
    end_group(proc.pid)
    return proc.returncode
