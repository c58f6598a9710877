"""Prometheus metrics for rebalances, removals and group state (metric logic only).

Exposition (HTTP server, text file) is in sinks/exposition.py. Every metric here is documented
in docs/metrics.md; labels stay low-cardinality (cluster, group, phase, trigger, outcome, cause,
root_cause, state, source, reason) and never carry member ids or hosts.

Counters and histograms are fed once per output record; group gauges are computed at scrape time
from the latest snapshot of each group (snapshot-on-scrape). Every series of a group that has
been Dead for `dead_group_retention_seconds` (processing time) is removed; groups beyond
`max_groups` are folded into group="__other__".
"""
from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from typing import Any, Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from state.model import ALL_STATES, DEAD

PREFIX = "rebalance_monitor"
# The clock-skew gauge is the median of this many latest observations per (cluster, source).
CLOCK_SKEW_WINDOW = 15


class GroupStateCollector(Collector):
    """Gauges from the latest snapshot per (cluster, group)."""

    # States in which a group is rebalancing (classic) or converging (KIP-848).
    IN_PROGRESS = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")

    def __init__(self, storm_window_ms: int = 600_000) -> None:
        self._lock = threading.Lock()
        self._snapshots: dict[tuple[str, str], dict[str, Any]] = {}
        self.storm_window_ms = storm_window_ms

    def update(self, snapshot: dict[str, Any]) -> None:
        key = (snapshot["cluster"], snapshot["group"])
        with self._lock:
            self._snapshots[key] = snapshot

    def forget(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._snapshots.pop(key, None)

    def snapshots(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._snapshots.values())

    def collect(self) -> Iterable[GaugeMetricFamily]:
        snapshots = self.snapshots()
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
        in_progress = GaugeMetricFamily(
            f"{PREFIX}_group_rebalance_in_progress_seconds",
            "Event-time seconds the group has been rebalancing (PreparingRebalance/CompletingRebalance, "
            "or Assigning/Reconciling for consumer groups): newest event time of the cluster minus the "
            "group's last transition. Only groups that are rebalancing have a series.",
            labels=["cluster", "group", "protocol"])
        timeout = GaugeMetricFamily(
            f"{PREFIX}_group_rebalance_timeout_seconds",
            "The group's rebalance timeout: the largest rebalance timeout (max.poll.interval.ms) of its members.",
            labels=["cluster", "group", "protocol"])
        in_window = GaugeMetricFamily(
            f"{PREFIX}_group_rebalances_in_window",
            "Rebalances the group started within the storm window (event time, default 10 min) before "
            "the newest event time of the cluster.", labels=["cluster", "group", "protocol"])
        member_total = GaugeMetricFamily(f"{PREFIX}_state_members",
                                         "Members held in the monitor's state, over all groups.",
                                         labels=["cluster"])
        per_state: dict[tuple[str, str], int] = {}
        per_cluster_members: dict[str, int] = {}
        cluster_now: dict[str, int] = {}
        for snap in snapshots:
            if snap.get("last_event_ms") is not None:
                cluster_now[snap["cluster"]] = max(cluster_now.get(snap["cluster"], 0), snap["last_event_ms"])
        for snap in sorted(snapshots, key=lambda s: (s["cluster"], s["group"])):
            per_cluster_members[snap["cluster"]] = per_cluster_members.get(snap["cluster"], 0) \
                + int(snap.get("member_count") or 0)
            if snap.get("_over_cap"):
                k = (snap["cluster"], snap["state"])
                per_state[k] = per_state.get(k, 0) + 1
                continue
            labels = [snap["cluster"], snap["group"], snap["protocol"]]
            for name in ALL_STATES:
                state.add_metric(labels + [name], 1.0 if snap["state"] == name else 0.0)
            if snap.get("generation") is not None:
                generation.add_metric(labels, float(snap["generation"]))
            members.add_metric(labels, float(snap.get("member_count") or 0))
            if snap.get("state_since_ms") is not None:
                since.add_metric(labels, snap["state_since_ms"] / 1000.0)
            now = cluster_now.get(snap["cluster"])
            if snap["state"] in self.IN_PROGRESS and snap.get("state_since_ms") is not None and now:
                in_progress.add_metric(labels, max(0.0, (now - snap["state_since_ms"]) / 1000.0))
            if snap.get("rebalance_timeout_ms"):
                timeout.add_metric(labels, snap["rebalance_timeout_ms"] / 1000.0)
            if now:
                starts = snap.get("recent_rebalance_starts_ms") or []
                in_window.add_metric(labels, float(sum(1 for t in starts if now - t < self.storm_window_ms)))
            k = (snap["cluster"], snap["state"])
            per_state[k] = per_state.get(k, 0) + 1
        for (cluster, name), count in sorted(per_state.items()):
            groups.add_metric([cluster, name], float(count))
        for cluster, count in sorted(per_cluster_members.items()):
            member_total.add_metric([cluster], float(count))
        return [state, generation, members, since, groups, member_total, in_progress, timeout, in_window]


OTHER_GROUPS = "__other__"   # label for groups beyond max_groups

# The documented reasons per quarantine source (docs/metrics.md). Their counters start at 0 for
# every cluster the sink has seen, so the first bad input is an increase Prometheus can see:
# increase()/rate() ignore a series' first sample, and an alert on a counter that appears at 1
# would never fire.
QUARANTINE_REASONS = {
    "log": ("unparseable_line", "unknown_coordinator_line"),
    "offsets": ("malformed_dump_line", "null_key", "unknown_record_type", "unknown_value_version",
                "corrupt_record", "corrupt_batch", "truncated_batch", "uncommitted_transaction",
                "unreadable_segment"),
}


class MetricsSink:
    def __init__(self, duration_buckets: Iterable[float], registry: CollectorRegistry | None = None,
                 max_groups: int = 10_000, dead_group_retention_seconds: float = 600.0,
                 clock: Callable[[], float] = time.monotonic):
        self.registry = registry or CollectorRegistry()
        self.max_groups = max_groups
        self.dead_group_retention_seconds = dead_group_retention_seconds
        self._clock = clock
        self._lock = threading.RLock()
        self._exported: set[tuple[str, str]] = set()          # groups with their own series
        self._series: dict[tuple[str, str], set[tuple[Any, tuple]]] = {}
        self._dead_since: dict[tuple[str, str], float] = {}
        self._clusters: set[str] = set()                      # clusters whose counters exist
        r = self.registry
        self.rebalance_duration = Histogram(
            f"{PREFIX}_rebalance_duration_seconds",
            "Rebalance phase durations: join (start to join end), sync (join end to Stable), "
            "total (start to Stable, or to Empty).",
            ["cluster", "group", "protocol", "phase"], buckets=tuple(duration_buckets), registry=r)
        self.rebalance_timeouts = Counter(
            f"{PREFIX}_rebalance_timeouts_total",
            "Rebalances whose JOIN phase ran into the group's rebalance timeout (a member did not rejoin).",
            ["cluster", "group"], registry=r)
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
        # --- health of the monitor itself (fed from Spark's progress reports) ---
        self.input_rate = Gauge(f"{PREFIX}_input_rows_per_second",
                                "Input rows per second of the last micro-batch, per source.",
                                ["source"], registry=r)
        self.batch_duration = Gauge(f"{PREFIX}_batch_duration_seconds",
                                    "Wall time of the last micro-batch.", registry=r)
        self.watermark_delay = Gauge(f"{PREFIX}_watermark_delay_seconds",
                                     "Wall clock minus the query's event-time watermark.", registry=r)
        self.newest_event_age = Gauge(f"{PREFIX}_source_newest_event_age_seconds",
                                      "Wall clock minus the newest event time seen per source.",
                                      ["source"], registry=r)
        self.source_up = Gauge(f"{PREFIX}_source_up",
                               "1 when the last attempt to read the source worked, 0 when it failed.",
                               ["source"], registry=r)
        self.source_errors = Counter(f"{PREFIX}_source_errors_total",
                                     "Failed attempts to reach a source (broker down, topic gone).",
                                     ["source"], registry=r)
        self.offset_gaps = Gauge(f"{PREFIX}_source_offset_gap_records",
                                 "Records removed by retention or compaction before the monitor read "
                                 "them (since the query started from its checkpoint).",
                                 ["source"], registry=r)
        self.late_rows = Counter(f"{PREFIX}_late_rows_total",
                                 "Events Spark dropped because they arrived after the watermark had "
                                 "passed them (raise lateness_seconds if this grows).", registry=r)
        self.state_rows = Gauge(f"{PREFIX}_state_rows", "Rows in Spark's state store (one per group).",
                                registry=r)
        self.query_restarts = Counter(f"{PREFIX}_query_restarts_total",
                                      "Times the streaming query failed and was restarted.", registry=r)
        self.groups_over_cap = Gauge(f"{PREFIX}_groups_over_cap",
                                     "Groups whose series are folded into group=\"__other__\" (max_groups).",
                                     registry=r)
        self.clock_skew = Gauge(
            f"{PREFIX}_log_clock_skew_seconds",
            "Log line time minus offsets record time for the same coordinator action, median of the "
            f"last {CLOCK_SKEW_WINDOW} pairs per log source; near 0 when broker_timezone is right.",
            ["cluster", "source"], registry=r)
        self._skews: dict[tuple[str, str], deque] = {}
        self.groups = GroupStateCollector()
        r.register(self.groups)

    # ------------------------------------------------------------------ group series
    def _group_label(self, cluster: str, group: str) -> str:
        key = (cluster, group)
        with self._lock:
            if key in self._exported:
                return group
            if len(self._exported) < self.max_groups:
                self._exported.add(key)
                return group
        return OTHER_GROUPS

    def _child(self, metric, key: tuple[str, str], labels: tuple):
        with self._lock:
            if labels[1] != OTHER_GROUPS:
                self._series.setdefault(key, set()).add((metric, labels))
        return metric.labels(*labels)

    def _cluster_seen(self, cluster: str) -> None:
        """Create the per-cluster error counters at 0 the first time a cluster shows up."""
        if cluster in self._clusters:
            return
        with self._lock:
            if cluster in self._clusters:
                return
            self._clusters.add(cluster)
            self.invalid_transitions.labels(cluster)
            for source, reasons in QUARANTINE_REASONS.items():
                for reason in reasons:
                    self.quarantined.labels(cluster, source, reason)

    def observe(self, kind: str, record: dict[str, Any]) -> None:
        cluster = record.get("cluster") or ("default" if kind == "quarantine" else None)
        if cluster:
            self._cluster_seen(cluster)
        if kind == "rebalance":
            key = (record["cluster"], record["group"])
            labels = (record["cluster"], self._group_label(*key), record["protocol"])
            for phase in ("join", "sync", "total"):
                value = record.get(f"{phase}_seconds")
                if value is not None:
                    self._child(self.rebalance_duration, key, labels + (phase,)).observe(max(0.0, value))
            self._child(self.rebalances, key, labels + (record["trigger"], record["outcome"])).inc()
            if record.get("hit_rebalance_timeout"):
                self._child(self.rebalance_timeouts, key, labels[:2]).inc()
        elif kind == "removal":
            key = (record["cluster"], record["group"])
            labels = (record["cluster"], self._group_label(*key), record["cause"], record["root_cause"])
            self._child(self.removals, key, labels).inc()
        elif kind == "snapshot":
            self._snapshot(record)
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

    def _snapshot(self, record: dict[str, Any]) -> None:
        key = (record["cluster"], record["group"])
        if self._group_label(*key) == OTHER_GROUPS:
            record = dict(record, _over_cap=True)
        with self._lock:
            if record.get("state") == DEAD:
                self._dead_since.setdefault(key, self._clock())
            else:
                self._dead_since.pop(key, None)
        self.groups.update(record)
        self.sweep()

    def sweep(self) -> None:
        """Drop every series of groups that have been Dead longer than the retention."""
        now = self._clock()
        with self._lock:
            expired = [k for k, since in self._dead_since.items()
                       if now - since >= self.dead_group_retention_seconds]
            for key in expired:
                del self._dead_since[key]
                for metric, labels in self._series.pop(key, set()):
                    try:
                        metric.remove(*labels)
                    except KeyError:
                        pass
                self._exported.discard(key)
                self.groups.forget(key)
            over = sum(1 for s in self.groups.snapshots() if s.get("_over_cap"))
        self.groups_over_cap.set(over)

    def count_input(self, source: str, rows: int) -> None:
        if rows:
            self.input_records.labels(source).inc(rows)
