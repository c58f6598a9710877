"""One recorder per family of metrics the output records feed (as kminion has one collector per
metric family): each makes its metrics, in the page's order, and counts the record kinds it names
in `handlers`. MetricsSink (sinks/metrics.py) routes every record to them; the per-group series
go through the GroupSeriesBook (sinks/group_series.py), which caps and sweeps them.

Every metric is documented in docs/metrics.md.
"""
from __future__ import annotations

import re
import statistics
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sinks.exposition import OTHER_GROUPS
from sinks.group_series import GroupSeriesBook, SeriesFamily
from sinks.health import DecodeCounts, LogSourceLines
from sinks.log_sources import LogSourceMetrics
from state.events import SOURCE_LOG, SOURCE_OFFSETS
from state.outputs import OutputKind
from state.quarantine_reasons import BROKER_LOG_REASONS, OFFSETS_REASONS, QuarantineReason as R
from state.rebalance_cost import REASON_NOT_CAUGHT_UP
from state.vocabulary import METRIC_PREFIX as PREFIX, SOURCE_KIND_LOG, SOURCE_KIND_OFFSETS, Protocol

Handler = Callable[[dict[str, Any]], None]
PHASES = ("join", "sync", "total")
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


def group_series(registry: CollectorRegistry, kind: str, name: str, documentation: str,
                 labelnames: list[str]) -> SeriesFamily:
    """A family of per-group series kept as plain numbers (sinks/group_series.py), registered
    where it is made so the page keeps its order of families."""
    family = SeriesFamily(kind, name, documentation, labelnames)
    registry.register(family)
    return family


class RebalanceRecorder:
    """Rebalances: their phases' durations (per cluster; per group only for the allow-listed
    groups, and the last duration of each phase: docs/metrics.md, "Series per group"), their
    count by trigger and outcome, and those that ran into the rebalance timeout."""

    def __init__(self, r: CollectorRegistry, book: GroupSeriesBook, buckets: tuple[float, ...],
                 group_histograms: Iterable[str]) -> None:
        self.book = book
        patterns = tuple(group_histograms)
        self._histogram_groups = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
        self.rebalance_duration = Histogram(
            f"{PREFIX}_rebalance_duration_seconds",
            "Rebalance phase durations over all groups of a cluster: join (start to join end), sync "
            "(join end to Stable), total (start to Stable, or to Empty).",
            ["cluster", "protocol", "phase"], buckets=buckets, registry=r)
        self.group_rebalance_duration = Histogram(
            f"{PREFIX}_group_rebalance_duration_seconds",
            "Rebalance phase durations of one group; only groups matching the group_histograms setting.",
            ["cluster", "group", "protocol", "phase"], buckets=buckets, registry=r)
        self.last_duration = group_series(
            r, "gauge", f"{PREFIX}_group_last_rebalance_duration_seconds",
            "Duration of the phase in the group's latest rebalance that had this phase (any protocol).",
            ["cluster", "group", "phase"])
        self.rebalance_timeouts = group_series(
            r, "counter", f"{PREFIX}_rebalance_timeouts_total",
            "Rebalances whose JOIN phase ran into the group's rebalance timeout (a member did not rejoin).",
            ["cluster", "group"])
        self.rebalances = group_series(
            r, "counter", f"{PREFIX}_rebalances_total", "Rebalances that ended, by trigger and outcome.",
            ["cluster", "group", "protocol", "trigger", "outcome"])
        self.handlers: dict[str, Handler] = {OutputKind.REBALANCE: self._rebalance,
                                             OutputKind.REBALANCE_TRIGGER: self._count}

    def _rebalance(self, record: dict[str, Any]) -> None:
        key = (record["cluster"], record["group"])
        labels = (record["cluster"], self.book.label(*key), record["protocol"])
        own_histogram = (self._histogram_groups is not None and labels[1] != OTHER_GROUPS
                         and self._histogram_groups.fullmatch(record["group"]) is not None)
        for phase in PHASES:
            value = record.get(f"{phase}_seconds")
            if value is not None:
                value = max(0.0, value)
                cluster_labels = (record["cluster"], record["protocol"], phase)
                self.book.shared_child(self.rebalance_duration, cluster_labels).observe(value)
                if labels[1] != OTHER_GROUPS:
                    self.book.set(self.last_duration, key, labels[:2] + (phase,), value)
                if own_histogram:
                    self.book.child(self.group_rebalance_duration, key, labels + (phase,)).observe(value)
        if record.get("trigger_final", True):
            # Not final: counted once, with its decided trigger, from its rebalance_trigger record.
            self._count(record)
        if record.get("hit_rebalance_timeout"):
            self.book.count(self.rebalance_timeouts, key, labels[:2])

    def _count(self, record: dict[str, Any]) -> None:
        key = (record["cluster"], record["group"])
        labels = (record["cluster"], self.book.label(*key), record["protocol"], record["trigger"], record["outcome"])
        self.book.count(self.rebalances, key, labels)


class ImpactRecorder:
    """What the rebalances stopped (docs/impact.md): partition-seconds per group and a histogram
    of stop time per partition per cluster and protocol; with `run`'s end offsets, the records
    delayed and the catch-up."""

    def __init__(self, r: CollectorRegistry, book: GroupSeriesBook, buckets: tuple[float, ...]) -> None:
        self.book = book
        self.partition_seconds = group_series(
            r, "counter", f"{PREFIX}_partition_seconds_stopped_total",
            "Partition-seconds of consumption the group's rebalances stopped: per rebalance, each "
            "partition it reassigned, from when it stopped to the new owner's assignment (docs/impact.md).",
            # no protocol label: a group that converts between protocols keeps one series (the
            # series budget per group, docs/metrics.md); the histogram has the protocol
            ["cluster", "group"])
        self.records_delayed = group_series(
            r, "counter", f"{PREFIX}_rebalance_records_delayed_total",
            "Records that arrived on the partitions the group's rebalances stopped while each was "
            "stopped (`run` only: from the sampled end offsets; measured classic and consumer rebalances).",
            ["cluster", "group"])
        self.not_caught_up = group_series(
            r, "counter", f"{PREFIX}_rebalances_not_caught_up_total",
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
        self.handlers: dict[str, Handler] = {
            OutputKind.REBALANCE: self._rebalance, OutputKind.REBALANCE_TRIGGER: self._trigger_decided,
            OutputKind.REBALANCE_COST: self._rebalance_cost, OutputKind.CATCH_UP: self._catch_up}

    def _per_group(self, family: SeriesFamily, record: dict[str, Any], amount: float = 1.0) -> None:
        key = (record["cluster"], record["group"])
        self.book.count(family, key, (record["cluster"], self.book.label(*key)), amount)

    def _rebalance(self, record: dict[str, Any]) -> None:
        stopped = record.get("partition_seconds_stopped")
        if stopped is None:       # not measurable (impact_unknown_reason says why)
            return
        self._per_group(self.partition_seconds, record, max(0.0, stopped))
        stops = self.book.shared_child(self.partition_stop, (record["cluster"], record["protocol"]))
        for seconds, partitions in record.get("partition_stop_seconds") or ():
            for _ in range(partitions):
                stops.observe(max(0.0, seconds))

    def _trigger_decided(self, record: dict[str, Any]) -> None:
        """What a leave decided a poll timeout adds to its cost (the stop histogram keeps the first measure)."""
        added = record.get("partition_seconds_added")
        if added:
            self._per_group(self.partition_seconds, record, max(0.0, added))

    def _rebalance_cost(self, record: dict[str, Any]) -> None:
        delayed = record.get("records_delayed")
        if delayed is not None:       # null: not measurable, records_delayed_unknown_reason says why
            self._per_group(self.records_delayed, record, max(0, delayed))

    def _catch_up(self, record: dict[str, Any]) -> None:
        seconds = record.get("catch_up_seconds")
        if seconds is not None:
            self.book.shared_child(self.catch_up, (record["cluster"],)).observe(seconds)
        elif record.get("catch_up_unknown_reason") == REASON_NOT_CAUGHT_UP:
            self._per_group(self.not_caught_up, record)


class RemovalRecorder:
    """Members removed from a group, by cause and root cause; each also goes to the incident
    board (sinks/incident_gauges.py), which pages on them."""

    def __init__(self, r: CollectorRegistry, book: GroupSeriesBook, note_removal: Handler) -> None:
        self.book = book
        self._note_removal = note_removal
        self.removals = group_series(
            r, "counter", f"{PREFIX}_member_removals_total", "Members removed from a group, by cause.",
            ["cluster", "group", "protocol", "cause", "root_cause"])
        self.handlers: dict[str, Handler] = {OutputKind.REMOVAL: self._removal}

    def _removal(self, record: dict[str, Any]) -> None:
        self._note_removal(record)
        key = (record["cluster"], record["group"])
        labels = (record["cluster"], self.book.label(*key), record.get("protocol") or Protocol.CLASSIC,
                  record["cause"], record["root_cause"])
        self.book.count(self.removals, key, labels)


class InputRecorder:
    """What the inputs held that could not be used or was suspect: quarantined inputs, unknown
    coordinator lines, forbidden transitions, generations missing from one source. Per cluster,
    never per group; the error counters start at 0 the first time a cluster shows up
    (`cluster_seen`)."""

    def __init__(self, r: CollectorRegistry) -> None:
        self._lock = threading.Lock()
        self.clusters: set[str] = set()                      # clusters whose counters exist
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
        self.handlers: dict[str, Handler] = {OutputKind.ANOMALY: self._anomaly,
                                             OutputKind.QUARANTINE: self._quarantine}

    def cluster_seen(self, cluster: str) -> None:
        """Create the per-cluster error counters at 0 the first time a cluster shows up."""
        if cluster in self.clusters:
            return
        with self._lock:
            if cluster in self.clusters:
                return
            self.clusters.add(cluster)
            self.invalid_transitions.labels(cluster)
            for missing_in in ("offsets", "logs"):     # classic generations only (crosscheck.py)
                self.source_mismatches.labels(cluster, Protocol.CLASSIC, missing_in)
            for source, reasons in QUARANTINE_REASONS.items():
                for reason in reasons:
                    self.quarantined.labels(cluster, source, reason)

    def _anomaly(self, record: dict[str, Any]) -> None:
        if record.get("kind") == "source_mismatch":
            self.source_mismatches.labels(record["cluster"], record.get("protocol") or Protocol.CLASSIC,
                                          record.get("missing_in") or "unknown").inc()
        else:
            self.invalid_transitions.labels(record["cluster"]).inc()

    def _quarantine(self, record: dict[str, Any]) -> None:
        count = int(record.get("count") or 1)
        cluster = record.get("cluster") or "default"
        source = SOURCE_LABELS.get(record["source"], record["source"])
        self.quarantined.labels(cluster, source, record["reason"]).inc(count)
        if record["reason"] == R.UNKNOWN_COORDINATOR_LINE:
            self.unknown_lines.labels(cluster, record.get("logger") or "unknown").inc(count)


class StatisticsRecorder:
    """The parse and decode steps' statistics (decode_stats and log_stats records, or a batch's
    progress report: sinks/health.py) into the offsets records' counter and the log sources'
    metrics (sinks/log_sources.py)."""

    def __init__(self, r: CollectorRegistry, log_sources: LogSourceMetrics) -> None:
        self.offsets_records = Counter(
            f"{PREFIX}_offsets_records_total",
            "__consumer_offsets records by key version (record type), value version and decode "
            "outcome (decoded, unknown_type, unknown_version, corrupt).",
            ["cluster", "key_version", "value_version", "outcome"], registry=r)
        self.log_sources = log_sources
        self.handlers: dict[str, Handler] = {
            OutputKind.DECODE_STATS: lambda record: self.count((DecodeCounts.of(record),), ()),
            OutputKind.LOG_STATS: lambda record: self.count((), (LogSourceLines.of(record),))}

    def count(self, decode_counts: Iterable[DecodeCounts], log_lines: Iterable[LogSourceLines]) -> None:
        for counts in decode_counts:
            for key_version, value_version, outcome, n in counts.counts:
                self.offsets_records.labels(counts.cluster, key_version, value_version, outcome).inc(n)
            self.log_sources.observe_offsets(counts.cluster, sum(c[3] for c in counts.counts))
        for lines in log_lines:
            self.log_sources.observe_lines(lines)


class ClockSkewRecorder:
    """Log line time minus offsets record time for the same coordinator action: the median of
    the last CLOCK_SKEW_WINDOW pairs per (cluster, log source)."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.clock_skew = Gauge(
            f"{PREFIX}_log_clock_skew_seconds",
            "Log line time minus offsets record time for the same coordinator action, median of the "
            f"last {CLOCK_SKEW_WINDOW} pairs per log source; near 0 when broker_timezone is right.",
            ["cluster", "source"], registry=r)
        self.windows: dict[tuple[str, str], deque] = {}
        self.handlers: dict[str, Handler] = {OutputKind.CLOCK_SKEW: self._clock_skew}

    def _clock_skew(self, record: dict[str, Any]) -> None:
        self.load(record.get("cluster") or "default", record["source"], [record["skew_ms"] / 1000.0])

    def load(self, cluster: str, source: str, values: Iterable[float]) -> None:
        """Observations (seconds) appended to a source's window, and its gauge set."""
        window = self.windows.setdefault((cluster, source), deque(maxlen=CLOCK_SKEW_WINDOW))
        window.extend(values)
        if window:
            self.clock_skew.labels(cluster, source).set(statistics.median(window))
