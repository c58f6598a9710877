"""The driver's half of the quiet sources' markers (streaming/spark/sources/markers.py): the
event-time timeout of every state key, which sources have caught up, and the plan file the
sources read.

The timeouts come from each batch's CLOCK rows ("cluster\\tkey" -> ms) and are saved with the
state file (its journal takes the keys a batch changed); with the correlator's next deadline they
say when a marker is next due. Both the batch thread and the progress listener plan, under a lock.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sinks.health import BatchReport
from streaming.spark.sources.markers import due_ms, write_plan


@dataclass
class MarkerPlanner:
    # The plan file (None: no live source reads a plan, e.g. replay).
    path: str | None = None
    lateness_ms: int = 0
    timeouts: dict[str, int] = field(default_factory=dict)
    # The keys whose timeout the current batch changed (the state file's journal), cleared by `saved`.
    changed: set[str] = field(default_factory=set)
    # The input kinds whose sources read everything waiting at their last batch (their backlog
    # 0): a capped connector's markers wait for it (sources/clock.py). Empty when a query starts.
    caught_up: set[str] = field(default_factory=set)
    # The correlator's next deadline (the collector's correlator, which `configure` may replace).
    correlator_deadline_ms: Callable[[], int | None] = lambda: None
    planned: tuple[int | None, tuple[str, ...]] | None = None     # the plan last written (none yet: None)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note_timeouts(self, clocks: Iterable[dict[str, Any]]) -> None:
        """Each called state key's timeout after its call (CLOCK rows)."""
        for clock in clocks:
            if clock.get("key") is None:
                continue
            key = f"{clock.get('cluster')}\t{clock['key']}"
            self.changed.add(key)
            if clock.get("timeout_ms") is None:
                self.timeouts.pop(key, None)
            else:
                self.timeouts[key] = int(clock["timeout_ms"])

    def plan(self) -> None:
        """When the quiet live sources' next marker is due; the file is written only when that changed."""
        if self.path is None:
            return
        with self.lock:
            due = due_ms(self.timeouts.values(), self.correlator_deadline_ms(), self.lateness_ms)
            plan = (due, tuple(sorted(self.caught_up)))
            if self.planned != plan:      # most batches leave it as it was: no write
                write_plan(self.path, due, list(plan[1]))
                self.planned = plan

    def query_started(self) -> None:
        """A (re)started query may be behind: no source counts as caught up until a batch says so."""
        self.caught_up.clear()
        self.plan()

    def note_caught_up(self, report: BatchReport) -> None:
        """Which sources read everything waiting in this batch (their backlog after it is 0)."""
        was = set(self.caught_up)
        for source in report.sources:
            if source.backlog is not None:
                (self.caught_up.add if source.backlog == 0 else self.caught_up.discard)(source.kind)
        if self.caught_up != was:
            self.plan()
