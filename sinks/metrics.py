"""Prometheus metrics of the records the monitor produces (metric logic only).

Exposition (HTTP server, text file) is in sinks/exposition.py; the monitor's own health metrics in
sinks/health.py; group gauges in sinks/group_gauges.py. Every metric is documented in
docs/metrics.md; labels stay low-cardinality (cluster, group, phase, trigger, outcome, cause,
root_cause, state, source, reason) and never carry member ids or hosts.

Counters and histograms are fed once per output record, routed by its OutputKind to the
recorders of sinks/recorders.py (one per family of metrics); group gauges
are computed at scrape time from the latest snapshot of each group (snapshot-on-scrape). Every
series of a group that has been Dead for `dead_group_retention_seconds` (processing time) is
removed; groups beyond `max_groups` are folded into group="__other__" (GroupSeriesBook,
sinks/group_series.py).

Series per group are bounded (docs/metrics.md, "Series per group"): the duration histograms are
per (cluster, protocol, phase); a group has its own histogram only when its id matches one of the
`group_histograms` patterns; per group there is the last duration of each phase as a gauge.
`_created` samples are not exported (prometheus_client.disable_created_metrics).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics

from sinks.group_gauges import GroupStateCollector
from sinks.group_series import GroupKey, GroupSeriesBook
from sinks.health import DecodeCounts, HealthMetrics, LogSourceLines
from sinks.incident_gauges import IncidentCollector
from sinks.lag_gauges import LagCollector
from sinks.log_sources import LogSourceMetrics
from sinks.recorders import (
    ClockSkewRecorder, Handler, ImpactRecorder, InputRecorder, RebalanceRecorder, RemovalRecorder,
    StatisticsRecorder,
)
from state.lag import SAMPLE_ERROR_REASONS, LagBook
from state.model import DEAD
from state.outputs import OutputKind
from state.vocabulary import METRIC_PREFIX as PREFIX


class MetricsSink:
    def __init__(self, duration_buckets: Iterable[float], registry: CollectorRegistry | None = None,
                 max_groups: int = 10_000, dead_group_retention_seconds: float = 600.0,
                 clock: Callable[[], float] = time.monotonic, log_silence_seconds: float = 1800.0,
                 group_histograms: Iterable[str] = ()):
        # `_created` samples would add one series per counter and histogram series; nothing reads
        # them (docs/metrics.md).
        disable_created_metrics()
        self.registry = r = registry or CollectorRegistry()
        buckets = tuple(duration_buckets)
        self.book = GroupSeriesBook(max_groups, dead_group_retention_seconds, clock)
        # Computed at scrape time from the snapshots and removal records this sink is fed; on the
        # page after the counted families (_scrape_time_collectors).
        self.groups = GroupStateCollector()
        self.incidents = IncidentCollector(self.book.label)
        self.rebalance = RebalanceRecorder(r, self.book, buckets, group_histograms)
        self.impact = ImpactRecorder(r, self.book, buckets)
        self.removal = RemovalRecorder(r, self.book,
                                       lambda record: self.incidents.note_removals((record,), decided=True))
        self.inputs = InputRecorder(r)
        self.health = HealthMetrics(r)
        self.log_sources = LogSourceMetrics(r, clock, log_silence_seconds)
        self.statistics = StatisticsRecorder(r, self.log_sources)
        self.groups_over_cap = Gauge(f"{PREFIX}_groups_over_cap",
                                     "Groups whose series are folded into group=\"__other__\" (max_groups).",
                                     registry=r)
        self.skew = ClockSkewRecorder(r)
        self._scrape_time_collectors(r)
        self._handlers: dict[str, list[Handler]] = {OutputKind.SNAPSHOT: [self._snapshot]}
        for recorder in (self.rebalance, self.impact, self.removal, self.inputs, self.statistics, self.skew):
            for kind, handler in recorder.handlers.items():
                self._handlers.setdefault(kind, []).append(handler)

    def _scrape_time_collectors(self, r: CollectorRegistry) -> None:
        """The group gauges and the incidents (what pages, sinks/incident_gauges.py)."""
        r.register(self.groups)
        r.register(self.incidents)
        # Consumer lag (sinks/lag_gauges.py): only `run` has it (attach_lag).
        self.lag = LagCollector(self.groups.snapshots)
        self.lag_sample_errors: Counter | None = None

    def attach_lag(self, book: LagBook, cluster: str) -> Counter:
        """`run`: the lag families on the page, showing `book`, with their error counters at 0
        (a replay has no lag unless given end offsets: show_lag alone). Returns the counter."""
        self.show_lag(book)
        if self.lag_sample_errors is None:
            self.lag_sample_errors = Counter(
                f"{PREFIX}_lag_sample_errors_total",
                "Partitions whose end offset a lag sample could not get, by reason (topic_missing, "
                "partition_missing, broker_unavailable, not_authorized, list_offsets_error).",
                ["cluster", "reason"], registry=self.registry)
        for reason in SAMPLE_ERROR_REASONS:
            self.lag_sample_errors.labels(cluster, reason)
        return self.lag_sample_errors

    def show_lag(self, book: LagBook, clock: Callable[[], float] | None = None) -> None:
        """The lag families on the page, showing `book` as of `clock` (default: now; a replay's: the
        end of its end-offset samples, and it samples nothing, so it has no sample errors to count)."""
        if self.lag.book is None:
            self.registry.register(self.lag)
        self.lag.book = book
        if clock is not None:
            self.lag.clock = clock

    def observe(self, kind: str, record: dict[str, Any]) -> None:
        """Count one output record (or take a group snapshot) of the given OutputKind."""
        cluster = record.get("cluster") or ("default" if kind == OutputKind.QUARANTINE else None)
        if cluster:
            self.inputs.cluster_seen(cluster)
        for handler in self._handlers.get(kind, ()):
            handler(record)

    def count_statistics(self, decode_counts: Iterable[DecodeCounts], log_lines: Iterable[LogSourceLines]) -> None:
        """The parse and decode steps' statistics of a batch (its report: sinks/health.py)."""
        self.statistics.count(decode_counts, log_lines)

    def _snapshot(self, record: dict[str, Any]) -> None:
        key = (record["cluster"], record["group"])
        if self.book.note_state(key, record.get("state") == DEAD):
            record = dict(record, _over_cap=True)
        self.groups.update(record)
        self.incidents.note_snapshot(record)
        if self.book.sweep_due():
            self.sweep()
        else:
            self.groups_over_cap.set(len(self.book.over_cap))

    def take_forgotten(self) -> list[GroupKey]:
        """The groups swept since the last call (the collector drops their snapshots)."""
        return self.book.take_forgotten()

    def sweep(self) -> None:
        """Drop every series of groups that have been Dead longer than the retention: their
        counted series, gauges, incident board entries and lag."""
        self.book.sweep(self._forget)
        self.groups_over_cap.set(len(self.book.over_cap))

    def _forget(self, key: GroupKey) -> None:
        self.groups.forget(key)
        self.incidents.forget(key)
        if self.lag.book is not None:
            self.lag.book.forget_group(key)
