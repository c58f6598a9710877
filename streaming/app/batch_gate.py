"""Where a micro-batch's driver work may stop: the gate `run` closes to stop the query between
two foreachBatch calls, and the writes that wait for disk space inside an uncommitted batch."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sinks.disk_full import DiskWatch, is_disk_full


class QueryStopping(RuntimeError):
    """A micro-batch reached foreachBatch after the stop request: it fails, so Spark does not
    commit it and the next start runs it again."""


class StopGate:
    """Lets `run` stop the query between two foreachBatch calls.

    `query.stop()` interrupts the stream thread. Inside Spark's own code that is a clean stop;
    inside the Python foreachBatch (a py4j callback running `collect()`) the InterruptedException
    comes back wrapped in a Python error that Spark does not recognise as a stop: it logs it,
    and matching its long message overflowed the stream thread's stack (issue 14). Under load
    the next micro-batch starts as soon as one ends, so waiting for "no trigger active" is not
    enough; the gate is held for exactly the foreachBatch part.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.closed = False
        # Set as the stop begins: a foreachBatch waiting for disk space gives up (uncommitted).
        self.stopping = threading.Event()

    @contextmanager
    def running(self) -> Iterator[None]:
        with self._lock:
            if self.closed:
                raise QueryStopping("rebalance-monitor is stopping; this micro-batch runs again at the next start")
            yield

    def close(self, timeout_s: float) -> bool:
        """No foreachBatch runs from now on; False if the running one did not end in time."""
        self.stopping.set()
        acquired = self._lock.acquire(timeout=timeout_s)
        self.closed = True
        if acquired:
            self._lock.release()
        return acquired


def durably(disk: DiskWatch | None, gate: StopGate, where: str, batch_id: int, write: Callable[[], object],
            waits: str | None = None) -> None:
    """`write` for uncommitted batch `batch_id`; while it fails for want of space at `where`
    (sinks/disk_full.py), it is tried again every disk.retry_seconds, inside the batch: the
    batch stays uncommitted, /metrics keeps serving, and it goes on where it stopped once
    there is space. A stop meanwhile ends the batch uncommitted (QueryStopping): the next
    start runs it again from the checkpoint. Every write retried here is idempotent. Without
    `disk` (replay, demo) a failed write raises."""
    while True:
        try:
            write()
        except OSError as exc:
            if disk is None or not is_disk_full(exc):
                raise
            waits = waits or f"batch {batch_id} waits uncommitted (nothing is lost)"
            disk.failed(where, exc.strerror or str(exc), batch_id,
                        f"{waits}; /metrics keeps serving; retrying every {disk.retry_seconds:g} s")
            if gate.stopping.wait(disk.retry_seconds):
                raise QueryStopping(f"rebalance-monitor is stopping while the disk is full; batch {batch_id} "
                                    "runs again at the next start") from None
            continue
        if disk is not None:
            disk.wrote(where, batch_id)
        return
