"""A full disk under the event sink or the checkpoint: recognised, said once, and waited out.

The monitor writes two places: the event sink (`events_dir`: parts, rolled files, the counters'
snapshot) and the checkpoint (`checkpoint_location`: Spark's offsets and commits, the state
store, and the monitor's group state file). When a write there fails for want of space (ENOSPC,
or EDQUOT for a quota), nothing is lost as long as the micro-batch is not committed: Spark runs it
again from the checkpoint. So the collector retries its own writes in place, every
`retry_seconds`, inside the uncommitted batch (streaming/app/batch_gate.py durably), and `run` restarts a
query that Spark's own checkpoint writes stopped (streaming/app/service.py). /metrics keeps
serving meanwhile.

DiskWatch says so once per episode (one log line when the first write fails, one when a write
succeeds again), not per retry, and keeps the gauge rebalance_monitor_disk_full{path} and the
counter rebalance_monitor_disk_full_writes_total{path} (sinks/health.py).
"""
from __future__ import annotations

import errno
import logging
import threading
from dataclasses import dataclass, field

from sinks.health import HealthMetrics

LOG = logging.getLogger("rebalance_monitor.run")
SINK = "sink"
CHECKPOINT = "checkpoint"
DISK_PATHS = (SINK, CHECKPOINT)          # the values of the `path` label
# How often a write that failed for want of space is tried again (and a query restarted).
DISK_FULL_RETRY_SECONDS = 15.0
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# How the JVM (Spark's checkpoint writes) words the same errors: Linux's strerror texts.
_FULL_TEXTS = ("No space left on device", "Disk quota exceeded")


def is_disk_full(exc: BaseException) -> bool:
    """An OSError for want of space: the disk (ENOSPC) or the user's quota (EDQUOT) is full."""
    return isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS


def disk_full_text(text: str) -> str | None:
    """The words of a full disk in an error's text (a failed query's), or None."""
    return next((words for words in _FULL_TEXTS if words in text), None)


@dataclass
class Episode:
    """A path whose writes fail for want of space, since the write of batch `batch_id` failed."""
    reason: str
    batch_id: int


@dataclass
class DiskWatch:
    """Which of the monitor's two places is full now; the log lines and the metrics of it."""
    health: HealthMetrics
    paths: dict[str, str]                 # SINK / CHECKPOINT -> the configured directory
    retry_seconds: float = DISK_FULL_RETRY_SECONDS
    episodes: dict[str, Episode] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        for where in DISK_PATHS:            # both series from the start: the alert's probe sees them
            self.health.disk_full.labels(where).set(0)
            self.health.disk_full_writes.labels(where)

    def full(self, where: str) -> bool:
        with self.lock:
            return where in self.episodes

    def failed(self, where: str, reason: str, batch_id: int, meanwhile: str) -> None:
        """A write to `where` for batch `batch_id` failed for want of space; `meanwhile` says what
        happens until there is space (the log line's end). Logged once per episode."""
        self.health.disk_full_writes.labels(where).inc()
        with self.lock:
            if where in self.episodes:
                return
            self.episodes[where] = Episode(reason, batch_id)
        self.health.disk_full.labels(where).set(1)
        LOG.error("run: disk full at %s (%s): %s", self.paths.get(where, where), reason, meanwhile)

    def wrote(self, where: str, batch_id: int) -> None:
        """A write to `where` for batch `batch_id` succeeded: the end of an episode that began at
        or before that batch (a later report of an earlier batch does not end it)."""
        with self.lock:
            episode = self.episodes.get(where)
            if episode is None or batch_id < episode.batch_id:
                return
            del self.episodes[where]
        self.health.disk_full.labels(where).set(0)
        LOG.warning("run: disk space is back at %s: resumed at batch %d", self.paths.get(where, where), batch_id)
