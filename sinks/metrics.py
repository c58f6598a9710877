"""Prometheus metrics of the records the monitor produces (metric logic only).

Exposition (HTTP server, text file) is in sinks/exposition.py; the monitor's own health metrics in
sinks/health.py; group gauges in sinks/group_gauges.py. Every metric is documented in
docs/metrics.md; labels stay low-cardinality (cluster, group, phase, trigger, outcome, cause,
root_cause, state, source, reason) and never carry member ids or hosts.

Counters and histograms are fed once per output record, routed by its OutputKind; group gauges
are computed at scrape time from the latest snapshot of each group (snapshot-on-scrape). Every
series of a group that has been Dead for `dead_group_retention_seconds` (processing time) is
removed; groups beyond `max_groups` are folded into group="__other__".

Series per group are bounded (docs/metrics.md, "Series per group"): the duration histograms are
per (cluster, protocol, phase); a group has its own histogram only when its id matches one of the
`group_histograms` patterns; per group there is the last duration of each phase as a gauge.
`_created` samples are not exported (prometheus_client.disable_created_metrics).
"""
from __future__ import annotations

import re
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

from sinks.exposition import OTHER_GROUPS
from sinks.incident_gauges import IncidentCollector
from sinks.lag_gauges import LagCollector
from sinks.group_gauges import GroupStateCollector
from sinks.group_series import SeriesFamily
from sinks.health import DecodeCounts, HealthMetrics, LogSourceLines
from state.events import SOURCE_LOG, SOURCE_OFFSETS
from sinks.log_sources import LogSourceMetrics
from state.lag import SAMPLE_ERROR_REASONS, LagBook
from state.model import DEAD
from state.outputs import OutputKind
from state.rebalance_cost import REASON_NOT_CAUGHT_UP
from state.vocabulary import METRIC_PREFIX as PREFIX, SOURCE_KIND_LOG, SOURCE_KIND_OFFSETS, Protocol
from state.quarantine_reasons import BROKER_LOG_REASONS, OFFSETS_REASONS, QuarantineReason as R

# The clock-skew gauge is the median of this many latest observations per (cluster, source).
CLOCK_SKEW_WINDOW = 15
# Catch-up after a rebalance: seconds to minutes (the deadline is lag.catch_up_deadline_seconds, 600).
CATCH_UP_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0)


# The documented reasons per quarantine source (docs/metrics.md). Their counters start at 0 for
# every cluster the sink has seen, so the first bad input is an increase Prometheus can see:
# increase()/rate() ignore a series' first sample, and an alert on a counter that appears at 1
# would never fire.
# The `source` label has one vocabulary across metrics: `broker_log` and `offsets`, the input
# kinds of state/vocabulary.py. Quarantine records name their source as events do ("log",
# state/events.py SOURCE_LOG, also in the event sinks and checkpoints of earlier versions), so
# the label is mapped here.
SOURCE_LABELS = {SOURCE_LOG: SOURCE_KIND_LOG, SOURCE_OFFSETS: SOURCE_KIND_OFFSETS}
QUARANTINE_REASONS = {
    SOURCE_KIND_LOG: BROKER_LOG_REASONS,
    SOURCE_KIND_OFFSETS: OFFSETS_REASONS,
}


PHASES = ("join", "sync", "total")


class MetricsSink:
    def __init__(self, duration_buckets: Iterable[float], registry: CollectorRegistry | None = None,
                 max_groups: int = 10_000, dead_group_retention_seconds: float = 600.0,
                 clock: Callable[[], float] = time.monotonic, log_silence_seconds: float = 1800.0,
                 group_histograms: Iterable[str] = ()):
        # `_created` samples would add one series per counter and histogram series; nothing reads
        # them (docs/metrics.md).
        disable_created_metrics()
        self.registry = registry or CollectorRegistry()
        patterns = tuple(group_histograms)
        self._histogram_groups = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
        self.max_groups = max_groups
        self.dead_group_retention_seconds = dead_group_retention_seconds
        self._clock = clock
        self._lock = threading.RLock()
        self._exported: set[tuple[str, str]] = set()          # groups with their own series
        # A group's series, for sweep(): (metric, labels) -> its prometheus_client child (found
        # without labels(), _child says why), or None for a SeriesFamily's series.
        self._series: dict[tuple[str, str], dict[tuple[Any, tuple], Any]] = {}
        self._shared: dict[tuple[Any, tuple], Any] = {}       # series of no one group: never removed
        # Insertion order is the order of `since` (the clock does not go back): sweep() stops at
        # the first group still within the retention.
        self._dead_since: dict[tuple[str, str], float] = {}
        self._next_sweep = float("-inf")
        self._forgotten: list[tuple[str, str]] = []           # swept groups not yet taken
        self._clusters: set[str] = set()                      # clusters whose counters exist
        self._over_cap: set[tuple[str, str]] = set()          # live groups folded into __other__
        r = self.registry
        self._duration_metrics(tuple(duration_buckets))
        self._impact_metrics(tuple(duration_buckets))
        self.rebalance_timeouts = self._group_series(
            "counter", f"{PREFIX}_rebalance_timeouts_total",
            "Rebalances whose JOIN phase ran into the group's rebalance timeout (a member did not rejoin).",
            ["cluster", "group"])
        self.rebalances = self._group_series(
            "counter", f"{PREFIX}_rebalances_total", "Rebalances that ended, by trigger and outcome.",
            ["cluster", "group", "protocol", "trigger", "outcome"])
        self.removals = self._group_series(
            "counter", f"{PREFIX}_member_removals_total", "Members removed from a group, by cause.",
            ["cluster", "group", "protocol", "cause", "root_cause"])
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
            "outcome (decoded, unknown_type, unknown_version, corrupt).",
            ["cluster", "key_version", "value_version", "outcome"], registry=r)
        self.health = HealthMetrics(r)
        self.log_sources = LogSourceMetrics(r, clock, log_silence_seconds)
        self.groups_over_cap = Gauge(f"{PREFIX}_groups_over_cap",
                                     "Groups whose series are folded into group=\"__other__\" (max_groups).",
                                     registry=r)
        self.clock_skew = Gauge(
            f"{PREFIX}_log_clock_skew_seconds",
            "Log line time minus offsets record time for the same coordinator action, median of the "
            f"last {CLOCK_SKEW_WINDOW} pairs per log source; near 0 when broker_timezone is right.",
            ["cluster", "source"], registry=r)
        self._skews: dict[tuple[str, str], deque] = {}
        self._scrape_time_collectors(r)
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            OutputKind.REBALANCE: self._rebalance, OutputKind.REMOVAL: self._removal,
            OutputKind.REBALANCE_TRIGGER: self._trigger_decided, OutputKind.REBALANCE_COST: self._rebalance_cost,
            OutputKind.CATCH_UP: self._catch_up, OutputKind.SNAPSHOT: self._snapshot, OutputKind.ANOMALY: self._anomaly,
            OutputKind.DECODE_STATS: self._decode_stats, OutputKind.CLOCK_SKEW: self._clock_skew,
            OutputKind.QUARANTINE: self._quarantine, OutputKind.LOG_STATS: self._log_stats,
        }

    def _scrape_time_collectors(self, r: CollectorRegistry) -> None:
        """The group gauges and the incidents (what pages, sinks/incident_gauges.py): computed at
        scrape time from the snapshots and removal records this sink is fed."""
        self.groups = GroupStateCollector()
        self.incidents = IncidentCollector(self._group_label)
        r.register(self.groups)
        r.register(self.incidents)
        # Consumer lag (sinks/lag_gauges.py): only `run` has it (attach_lag).
        self.lag = LagCollector(self.groups.snapshots)
        self.lag_sample_errors: Counter | None = None

    def attach_lag(self, book: LagBook, cluster: str) -> Counter:
        """`run`: the lag families on the page, showing `book`, with their error counters at 0
        (a replay has no lag: its page does not name the families). Returns the counter."""
        self.lag.book = book
        if self.lag_sample_errors is None:
            self.registry.register(self.lag)
            self.lag_sample_errors = Counter(
                f"{PREFIX}_lag_sample_errors_total",
                "Partitions whose end offset a lag sample could not get, by reason (topic_missing, "
                "partition_missing, broker_unavailable, not_authorized, list_offsets_error).",
                ["cluster", "reason"], registry=self.registry)
        for reason in SAMPLE_ERROR_REASONS:
            self.lag_sample_errors.labels(cluster, reason)
        return self.lag_sample_errors

    def _impact_metrics(self, buckets: tuple[float, ...]) -> None:
        """What the rebalances stopped (docs/impact.md): a counter per group, a histogram of stop
        time per partition per cluster and protocol."""
        r = self.registry
        self.partition_seconds = self._group_series(
            "counter", f"{PREFIX}_partition_seconds_stopped_total",
            "Partition-seconds of consumption the group's rebalances stopped: per rebalance, each "
            "partition it reassigned, from when it stopped to the new owner's assignment (docs/impact.md).",
            # no protocol label: a group that converts between protocols keeps one series (the
            # series budget per group, docs/metrics.md); the histogram has the protocol
            ["cluster", "group"])
        self.records_delayed = self._group_series(
            "counter", f"{PREFIX}_rebalance_records_delayed_total",
            "Records that arrived on the partitions the group's rebalances stopped while each was "
            "stopped (`run` only: from the sampled end offsets; measured classic and consumer rebalances).",
            ["cluster", "group"])
        self.not_caught_up = self._group_series(
            "counter", f"{PREFIX}_rebalances_not_caught_up_total",
            "Measured rebalances after which the group's lag on the partitions they stopped was not back "
            "to its level before within lag.catch_up_deadline_seconds (`run` only).",
            ["cluster", "group"])
        self.catch_up = Histogram(
            f"{PREFIX}_rebalance_catch_up_seconds",
            "Seconds from a measured rebalance's end until its group's lag on the partitions it stopped was "
            "back to its level before (`run` only; docs/impact.md, \"Records delayed and catch-up\").",
            ["cluster"], buckets=CATCH_UP_BUCKETS, registry=r)
        self.partition_stop = Histogram(
            f"{PREFIX}_partition_stop_seconds",
            "How long each partition a rebalance reassigned had stopped being consumed (docs/impact.md).",
            ["cluster", "protocol"], buckets=buckets, registry=r)

    def _duration_metrics(self, buckets: tuple[float, ...]) -> None:
        """Histograms per cluster; per group only for the allow-listed groups, and the last
        duration of each phase (docs/metrics.md, "Series per group")."""
        r = self.registry
        self.rebalance_duration = Histogram(
            f"{PREFIX}_rebalance_duration_seconds",
            "Rebalance phase durations over all groups of a cluster: join (start to join end), sync "
            "(join end to Stable), total (start to Stable, or to Empty).",
            ["cluster", "protocol", "phase"], buckets=buckets, registry=r)
        self.group_rebalance_duration = Histogram(
            f"{PREFIX}_group_rebalance_duration_seconds",
            "Rebalance phase durations of one group; only groups matching the group_histograms setting.",
            ["cluster", "group", "protocol", "phase"], buckets=buckets, registry=r)
        self.last_duration = self._group_series(
            "gauge", f"{PREFIX}_group_last_rebalance_duration_seconds",
            "Duration of the phase in the group's latest rebalance that had this phase (any protocol).",
            ["cluster", "group", "phase"])

    # ------------------------------------------------------------------ group series
    def _group_series(self, kind: str, name: str, documentation: str, labelnames: list[str]) -> SeriesFamily:
        """A family of per-group series kept as plain numbers (sinks/group_series.py), registered
        here so the page keeps its order of families."""
        family = SeriesFamily(kind, name, documentation, labelnames)
        self.registry.register(family)
        return family

    def _count(self, family: SeriesFamily, key: tuple[str, str], labels: tuple, amount: float = 1.0) -> None:
        """Add to a group's counter series (labels[1] is the group label); a new series of a group
        (not of the `__other__` fold) is remembered for sweep()."""
        if family.inc(labels, amount) and labels[1] != OTHER_GROUPS:
            self._remember(family, key, labels)

    def _set(self, family: SeriesFamily, key: tuple[str, str], labels: tuple, value: float) -> None:
        if family.set(labels, value) and labels[1] != OTHER_GROUPS:
            self._remember(family, key, labels)

    def _remember(self, metric: Any, key: tuple[str, str], labels: tuple) -> None:
        with self._lock:
            self._series.setdefault(key, {})[(metric, labels)] = None

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
        """The child of a group's series (labels[1] is the group label), kept: prometheus_client's
        labels() takes a lock, checks and str()s each label, 2 of the 4.6 s the driver spent
        counting bench/cost replay's 180,000 records. sweep() removes a group's children."""
        if labels[1] == OTHER_GROUPS:
            return self._shared_child(metric, labels)
        with self._lock:
            children = self._series.setdefault(key, {})
            child = children.get((metric, labels))
            if child is None:
                child = children[(metric, labels)] = metric.labels(*labels)
            return child

    def _shared_child(self, metric, labels: tuple):
        """The child of a series no sweep removes (per cluster, or the groups over the cap)."""
        child = self._shared.get((metric, labels))
        if child is None:
            with self._lock:
                child = self._shared[(metric, labels)] = metric.labels(*labels)
        return child

    def _cluster_seen(self, cluster: str) -> None:
        """Create the per-cluster error counters at 0 the first time a cluster shows up."""
        if cluster in self._clusters:
            return
        with self._lock:
            if cluster in self._clusters:
                return
            self._clusters.add(cluster)
            self.invalid_transitions.labels(cluster)
            for missing_in in ("offsets", "logs"):     # classic generations only (crosscheck.py)
                self.source_mismatches.labels(cluster, Protocol.CLASSIC, missing_in)
            for source, reasons in QUARANTINE_REASONS.items():
                for reason in reasons:
                    self.quarantined.labels(cluster, source, reason)

    def observe(self, kind: str, record: dict[str, Any]) -> None:
        """Count one output record (or take a group snapshot) of the given OutputKind."""
        cluster = record.get("cluster") or ("default" if kind == OutputKind.QUARANTINE else None)
        if cluster:
            self._cluster_seen(cluster)
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(record)

    def _rebalance(self, record: dict[str, Any]) -> None:
        key = (record["cluster"], record["group"])
        labels = (record["cluster"], self._group_label(*key), record["protocol"])
        own_histogram = (self._histogram_groups is not None and labels[1] != OTHER_GROUPS
                         and self._histogram_groups.fullmatch(record["group"]) is not None)
        for phase in PHASES:
            value = record.get(f"{phase}_seconds")
            if value is not None:
                value = max(0.0, value)
                cluster_labels = (record["cluster"], record["protocol"], phase)
                self._shared_child(self.rebalance_duration, cluster_labels).observe(value)
                if labels[1] != OTHER_GROUPS:
                    self._set(self.last_duration, key, labels[:2] + (phase,), value)
                if own_histogram:
                    self._child(self.group_rebalance_duration, key, labels + (phase,)).observe(value)
        if record.get("trigger_final", True):
            # Not final: counted once, with its decided trigger, from its rebalance_trigger record.
            self._count_rebalance(record)
        if record.get("hit_rebalance_timeout"):
            self._count(self.rebalance_timeouts, key, labels[:2])
        stopped = record.get("partition_seconds_stopped")
        if stopped is not None:       # measured (null: not measurable, impact_unknown_reason says why)
            self._count(self.partition_seconds, key, labels[:2], max(0.0, stopped))
            stops = self._shared_child(self.partition_stop, (record["cluster"], record["protocol"]))
            for seconds, partitions in record.get("partition_stop_seconds") or ():
                for _ in range(partitions):
                    stops.observe(max(0.0, seconds))

    def _trigger_decided(self, record: dict[str, Any]) -> None:
        """A rebalance_trigger record: the rebalance counted with its decided trigger, and what a
        leave decided a poll timeout adds to its cost (the stop histogram keeps the first measure)."""
        self._count_rebalance(record)
        added = record.get("partition_seconds_added")
        if added:
            key = (record["cluster"], record["group"])
            self._count(self.partition_seconds, key, (record["cluster"], self._group_label(*key)), max(0.0, added))

    def _rebalance_cost(self, record: dict[str, Any]) -> None:
        delayed = record.get("records_delayed")
        if delayed is not None:       # null: not measurable, records_delayed_unknown_reason says why
            key = (record["cluster"], record["group"])
            self._count(self.records_delayed, key, (record["cluster"], self._group_label(*key)), max(0, delayed))

    def _catch_up(self, record: dict[str, Any]) -> None:
        seconds = record.get("catch_up_seconds")
        if seconds is not None:
            self.catch_up.labels(record["cluster"]).observe(seconds)
        elif record.get("catch_up_unknown_reason") == REASON_NOT_CAUGHT_UP:
            key = (record["cluster"], record["group"])
            self._count(self.not_caught_up, key, (record["cluster"], self._group_label(*key)))

    def _count_rebalance(self, record: dict[str, Any]) -> None:
        key = (record["cluster"], record["group"])
        labels = (record["cluster"], self._group_label(*key), record["protocol"], record["trigger"], record["outcome"])
        self._count(self.rebalances, key, labels)

    def _removal(self, record: dict[str, Any]) -> None:
        self.incidents.note_removals((record,), decided=True)
        key = (record["cluster"], record["group"])
        labels = (record["cluster"], self._group_label(*key), record.get("protocol") or Protocol.CLASSIC,
                  record["cause"], record["root_cause"])
        self._count(self.removals, key, labels)

    def _anomaly(self, record: dict[str, Any]) -> None:
        if record.get("kind") == "source_mismatch":
            self.source_mismatches.labels(record["cluster"], record.get("protocol") or Protocol.CLASSIC,
                                          record.get("missing_in") or "unknown").inc()
        else:
            self.invalid_transitions.labels(record["cluster"]).inc()

    def count_statistics(self, decode_counts: Iterable[DecodeCounts], log_lines: Iterable[LogSourceLines]) -> None:
        """The parse and decode steps' statistics of a batch (its report: sinks/health.py)."""
        for counts in decode_counts:
            for key_version, value_version, outcome, n in counts.counts:
                self.offsets_records.labels(counts.cluster, key_version, value_version, outcome).inc(n)
            self.log_sources.observe_offsets(counts.cluster, sum(c[3] for c in counts.counts))
        for lines in log_lines:
            self.log_sources.observe_lines(lines)

    def _decode_stats(self, record: dict[str, Any]) -> None:
        self.count_statistics((DecodeCounts.of(record),), ())

    def _log_stats(self, record: dict[str, Any]) -> None:
        self.count_statistics((), (LogSourceLines.of(record),))

    def _clock_skew(self, record: dict[str, Any]) -> None:
        key = (record.get("cluster") or "default", record["source"])
        window = self._skews.setdefault(key, deque(maxlen=CLOCK_SKEW_WINDOW))
        window.append(record["skew_ms"] / 1000.0)
        self.clock_skew.labels(*key).set(statistics.median(window))

    def _quarantine(self, record: dict[str, Any]) -> None:
        count = int(record.get("count") or 1)
        cluster = record.get("cluster") or "default"
        source = SOURCE_LABELS.get(record["source"], record["source"])
        self.quarantined.labels(cluster, source, record["reason"]).inc(count)
        if record["reason"] == R.UNKNOWN_COORDINATOR_LINE:
            self.unknown_lines.labels(cluster, record.get("logger") or "unknown").inc(count)

    def _snapshot(self, record: dict[str, Any]) -> None:
        key = (record["cluster"], record["group"])
        with self._lock:
            if self._group_label(*key) == OTHER_GROUPS:
                record = dict(record, _over_cap=True)
                self._over_cap.add(key)
            else:
                self._over_cap.discard(key)
            if record.get("state") == DEAD:
                self._dead_since.setdefault(key, self._clock())
            else:
                self._dead_since.pop(key, None)
        self.groups.update(record)
        self.incidents.note_snapshot(record)
        # At most once per second from here (`run` also sweeps every second): a batch of
        # snapshots used to sweep once per snapshot, quadratic in Dead groups (a cold start over
        # 23,000 groups spent 10 s in it).
        if self._dead_since and self._clock() >= self._next_sweep:
            self.sweep()
        else:
            self.groups_over_cap.set(len(self._over_cap))

    def take_forgotten(self) -> list[tuple[str, str]]:
        """The groups swept since the last call (the collector drops their snapshots)."""
        with self._lock:
            taken, self._forgotten = self._forgotten, []
        return taken

    def sweep(self) -> None:
        """Drop every series of groups that have been Dead longer than the retention. Costs the
        number of groups it drops, not the number of groups."""
        now = self._clock()
        self._next_sweep = now + 1.0
        with self._lock:
            expired = []
            for k, since in self._dead_since.items():
                if now - since < self.dead_group_retention_seconds:
                    break
                expired.append(k)
            for key in expired:
                del self._dead_since[key]
                for metric, labels in self._series.pop(key, {}):
                    try:
                        metric.remove(*labels)
                    except KeyError:
                        pass
                self._exported.discard(key)
                self._over_cap.discard(key)
                self.groups.forget(key)
                self.incidents.forget(key)
                if self.lag.book is not None:
                    self.lag.book.forget_group(key)
                self._forgotten.append(key)
            over = len(self._over_cap)
        self.groups_over_cap.set(over)
