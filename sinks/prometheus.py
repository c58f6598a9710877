"""Prometheus metrics for rebalances, removals and group state (metric logic only).

Exposition (HTTP server, text file) is in sinks/exposition.py. Every metric here is documented
in docs/metrics.md; labels stay low-cardinality (cluster, group, phase, trigger, outcome, cause,
root_cause, state, source, reason) and never carry member ids or hosts.

Counters and histograms are fed once per output record; gauges are computed at scrape time from
the latest snapshot of each group (snapshot-on-scrape), so a dead group's gauges disappear.
"""
from __future__ import annotations

import threading
from typing import Any, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from state.model import ALL_STATES, DEAD

PREFIX = "rebalance_monitor"


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
        self.invalid_transitions = Counter(
            f"{PREFIX}_invalid_transitions_total",
            "Observed transitions Kafka's state table forbids (missed or misordered input).",
            ["cluster"], registry=r)
        self.source_mismatches = Counter(
            f"{PREFIX}_source_mismatches_total",
            "Generations seen in one source and not the other once the grace has passed "
            "(missing_in: logs or offsets).",
            ["cluster", "protocol", "missing_in"], registry=r)
        self.offsets_records = Counter(
            f"{PREFIX}_offsets_records_total",
            "__consumer_offsets records by key version (record type), value version and decode "
            "outcome (decoded, counted_only, unknown_type, unknown_version, corrupt).",
            ["cluster", "key_version", "value_version", "outcome"], registry=r)
        self.batches = Counter(f"{PREFIX}_batches_total", "Micro-batches applied.", registry=r)
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
            if record.get("kind") == "source_mismatch":
                self.source_mismatches.labels(record["cluster"], record.get("protocol") or "classic",
                                              record.get("missing_in") or "unknown").inc()
            else:
                self.invalid_transitions.labels(record["cluster"]).inc()
        elif kind == "decode_stats":
            for key_version, value_version, outcome, n in record.get("counts") or []:
                self.offsets_records.labels(record.get("cluster") or "default", str(key_version),
                                            str(value_version), str(outcome)).inc(int(n))
        elif kind == "quarantine":
            self.quarantined.labels(record.get("cluster") or "default", record["source"],
                                    record["reason"]).inc()

    def count_input(self, source: str, rows: int) -> None:
        if rows:
            self.input_records.labels(source).inc(rows)
