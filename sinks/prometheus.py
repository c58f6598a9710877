"""Prometheus metrics for rebalances, removals and group state (metric logic only).

Exposition (HTTP server, text file) is in sinks/exposition.py. Every metric here is documented
in docs/metrics.md; labels stay low-cardinality (cluster, group, phase, trigger, outcome, cause,
root_cause, state, source, reason) and never carry member ids or hosts.

Counters and histograms are fed once per output record; gauges are computed at scrape time from
the latest snapshot of each group (snapshot-on-scrape), so a dead group's gauges disappear.
"""
from __future__ import annotations

import statistics
import threading
from collections import deque
from typing import Any, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from state.model import ALL_STATES, DEAD

PREFIX = "rebalance_monitor"
# The clock-skew gauge is the median of this many latest observations per (cluster, source).
CLOCK_SKEW_WINDOW = 15


class GroupStateCollector(Collector):
    """Gauges from the latest snapshot per (cluster, group)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshots: dict[tuple[str, str], dict[str, Any]] = {}

    def update(self, snapshot: dict[str, Any]) -> None:
        key = (snapshot["cluster"], snapshot["group"])
        with self._lock:
            if snapshot.get("state") == DEAD:
                self._snapshots.pop(key, None)   # deleted/expired groups leave no series behind
            else:
                self._snapshots[key] = snapshot

    def collect(self) -> Iterable[GaugeMetricFamily]:
        with self._lock:
            snapshots = list(self._snapshots.values())
        state = GaugeMetricFamily(f"{PREFIX}_group_state",
                                  "1 for the group's current state, 0 for the others.",
                                  labels=["cluster", "group", "protocol", "state"])
        generation = GaugeMetricFamily(f"{PREFIX}_group_generation",
                                       "Current generation (classic) or group epoch (consumer).",
                                       labels=["cluster", "group", "protocol"])
        members = GaugeMetricFamily(f"{PREFIX}_group_members", "Members in the current generation.",
                                    labels=["cluster", "group", "protocol"])
        since = GaugeMetricFamily(f"{PREFIX}_group_state_since_timestamp_seconds",
                                  "Event time of the group's last state transition (Unix seconds).",
                                  labels=["cluster", "group", "protocol"])
        groups = GaugeMetricFamily(f"{PREFIX}_groups", "Groups tracked, by state.",
                                   labels=["cluster", "state"])
        per_state: dict[tuple[str, str], int] = {}
        for snap in sorted(snapshots, key=lambda s: (s["cluster"], s["group"])):
            labels = [snap["cluster"], snap["group"], snap["protocol"]]
            for name in ALL_STATES:
                state.add_metric(labels + [name], 1.0 if snap["state"] == name else 0.0)
            if snap.get("generation") is not None:
                generation.add_metric(labels, float(snap["generation"]))
            members.add_metric(labels, float(snap.get("member_count") or 0))
            if snap.get("state_since_ms") is not None:
                since.add_metric(labels, snap["state_since_ms"] / 1000.0)
            k = (snap["cluster"], snap["state"])
            per_state[k] = per_state.get(k, 0) + 1
        for (cluster, name), count in sorted(per_state.items()):
            groups.add_metric([cluster, name], float(count))
        return [state, generation, members, since, groups]


class MetricsSink:
    def __init__(self, duration_buckets: Iterable[float], registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.rebalance_duration = Histogram(
            f"{PREFIX}_rebalance_duration_seconds",
            "Rebalance phase durations: join (start to join end), sync (join end to Stable), "
            "total (start to Stable, or to Empty).",
            ["cluster", "group", "protocol", "phase"], buckets=tuple(duration_buckets), registry=r)
        self.rebalances = Counter(
            f"{PREFIX}_rebalances_total", "Rebalances that ended, by trigger and outcome.",
            ["cluster", "group", "protocol", "trigger", "outcome"], registry=r)
        self.removals = Counter(
            f"{PREFIX}_member_removals_total", "Members removed from a group, by cause.",
            ["cluster", "group", "cause", "root_cause"], registry=r)
        self.input_records = Counter(
            f"{PREFIX}_input_records_total",
            "Raw input rows read per source (log lines before the coordinator filter, offsets records).",
            ["source"], registry=r)
        self.quarantined = Counter(
            f"{PREFIX}_quarantined_records_total", "Inputs that could not be used, by reason.",
            ["cluster", "source", "reason"], registry=r)
        self.unknown_lines = Counter(
            f"{PREFIX}_unknown_coordinator_lines",
            "INFO/WARN/ERROR group-coordinator lines no catalog entry matches, by logger (a sample of "
            "them is kept in quarantine).",
            ["cluster", "logger"], registry=r)
        self.invalid_transitions = Counter(
            f"{PREFIX}_invalid_transitions_total",
            "Observed transitions Kafka's state table forbids (missed or misordered input).",
            ["cluster"], registry=r)
        self.batches = Counter(f"{PREFIX}_batches_total", "Micro-batches applied.", registry=r)
        self.clock_skew = Gauge(
            f"{PREFIX}_log_clock_skew_seconds",
            "Log line time minus offsets record time for the same coordinator action, median of the "
            f"last {CLOCK_SKEW_WINDOW} pairs per log source; near 0 when broker_timezone is right.",
            ["cluster", "source"], registry=r)
        self._skews: dict[tuple[str, str], deque] = {}
        self.groups = GroupStateCollector()
        r.register(self.groups)

    def observe(self, kind: str, record: dict[str, Any]) -> None:
        if kind == "rebalance":
            labels = (record["cluster"], record["group"], record["protocol"])
            for phase in ("join", "sync", "total"):
                value = record.get(f"{phase}_seconds")
                if value is not None:
                    self.rebalance_duration.labels(*labels, phase).observe(max(0.0, value))
            self.rebalances.labels(*labels, record["trigger"], record["outcome"]).inc()
        elif kind == "removal":
            self.removals.labels(record["cluster"], record["group"], record["cause"],
                                 record["root_cause"]).inc()
        elif kind == "snapshot":
            self.groups.update(record)
        elif kind == "anomaly":
            self.invalid_transitions.labels(record["cluster"]).inc()
        elif kind == "clock_skew":
            key = (record.get("cluster") or "default", record["source"])
            window = self._skews.setdefault(key, deque(maxlen=CLOCK_SKEW_WINDOW))
            window.append(record["skew_ms"] / 1000.0)
            self.clock_skew.labels(*key).set(statistics.median(window))
        elif kind == "quarantine":
            count = int(record.get("count") or 1)
            cluster = record.get("cluster") or "default"
            self.quarantined.labels(cluster, record["source"], record["reason"]).inc(count)
            if record["reason"] == "unknown_coordinator_line":
                self.unknown_lines.labels(cluster, record.get("logger") or "unknown").inc(count)

    def count_input(self, source: str, rows: int) -> None:
        if rows:
            self.input_records.labels(source).inc(rows)
