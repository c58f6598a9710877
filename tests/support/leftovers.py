"""No process outlives the test run that started it (issue 52): a pytest plugin (tests/conftest.py
imports its hooks; `-p tests.support.leftovers` loads it elsewhere).

At the start of the session it marks the run: REBALANCE_TEST_RUN=<uuid> in os.environ, which
every process the tests start inherits (monitors, Kafka brokers, Spark JVMs, spark-submit and the
drivers it starts, the executors of a standalone cluster's workers). After the last test, when
every fixture has been torn down, it looks for what is left: the processes below this one (parent
pids in /proc) and the processes whose environment carries the mark (a daemon, or a child whose
parent exited, has init as its parent). What is still running after a bounded grace period
(LEFTOVER_GRACE_SECONDS, default 10: a JVM finishing its shutdown) fails the session, listed with
pid and command line, and is then killed so that it does not outlive CI either.

Not counted: zombies (they only wait to be reaped) and the JVM that pyspark starts for this
process's SparkSessions (the `spark` fixture's), with its children: pyspark ends it when this
process exits (it exits when its stdin closes); stopping the session does not end it.
"""
from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass

import pytest

MARK = "REBALANCE_TEST_RUN"
GRACE_ENV = "LEFTOVER_GRACE_SECONDS"


@dataclass(frozen=True)
class Leftover:
    pid: int
    ppid: int
    cmdline: str

    def __str__(self) -> str:
        return f"pid {self.pid} (parent {self.ppid}): {self.cmdline}"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _table() -> dict[int, tuple[str, int]]:
    """pid -> (state, parent pid) of every process."""
    from testbed.proc import proc_stats
    return {pid: (fields[0], int(fields[1])) for pid, fields in proc_stats()}


def _below(roots: set[int], table: dict[int, tuple[str, int]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (_, ppid) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [child for root in roots for child in children.get(root, [])]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def _spark_gateway() -> set[int]:
    """The pid of the JVM pyspark started in this process, if any."""
    context = sys.modules.get("pyspark.context")
    gateway = getattr(getattr(context, "SparkContext", None), "_gateway", None)
    proc = getattr(gateway, "proc", None)
    return {proc.pid} if proc is not None and proc.poll() is None else set()


def leftovers(mark: str) -> list[Leftover]:
    """The running processes below this one or carrying `MARK=mark` in their environment, except
    this process and pyspark's JVM (with its children)."""
    me = os.getpid()
    table = _table()
    gateway = _spark_gateway()
    excluded = {me} | gateway | _below(gateway, table)
    needle = f"{MARK}={mark}".encode()
    candidates = _below({me}, table)
    for pid in table:
        if pid not in candidates and needle in _read(f"/proc/{pid}/environ").split(b"\0"):
            candidates.add(pid)
    return [Leftover(pid, table[pid][1], _read(f"/proc/{pid}/cmdline").replace(b"\0", b" ").decode(errors="replace")
                     .strip()) for pid in sorted(candidates - excluded) if table[pid][0] != "Z"]


def settle(mark: str, grace_s: float) -> list[Leftover]:
    """leftovers(), polled until none is left or `grace_s` passed."""
    deadline = time.monotonic() + grace_s
    found = leftovers(mark)
    while found and time.monotonic() < deadline:
        time.sleep(0.2)
        found = leftovers(mark)
    return found


def kill(found: list[Leftover]) -> None:
    for leftover in found:
        try:
            os.kill(leftover.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def pytest_configure(config: pytest.Config) -> None:
    # A new mark for every session, nested ones too (a test that runs pytest checks its own run).
    os.environ[MARK] = uuid.uuid4().hex


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After every session fixture's teardown: fail the run when any process it started is left."""
    mark = os.environ.get(MARK)
    if not mark or not os.path.isdir("/proc") or hasattr(session.config, "workerinput"):
        return      # an xdist worker's children are its controller's to check
    found = settle(mark, float(os.environ.get(GRACE_ENV, "10")))
    if not found:
        return
    kill(found)
    lines = [f"{len(found)} process(es) left running by the test run (killed now; issue 52):",
             *(f"  {leftover}" for leftover in found)]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write("\n")
        for line in lines:
            reporter.write_line(line, red=True, bold=True)
    else:
        print("\n".join(lines), file=sys.stderr)
    if session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
