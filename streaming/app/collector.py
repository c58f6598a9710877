"""The driver side of the query: each micro-batch's output rows fanned out to the metrics, the
records kept (replay) or written to the durable event sink (run), and the cross-group correlator.

Output rows are few (rebalances, removals, snapshots), so each micro-batch is collected on the
driver. A batch id already applied is skipped: foreachBatch can run a batch again after a
failure, and histograms must not be fed twice.

Its parts by concern: the stop gate and the writes that wait for disk space (batch_gate.py), the
state keys' timeouts and the quiet sources' marker plan (marker_planner.py), a restart's restore
from the state file and the event sink (restart.py). This module applies a batch and counts.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sinks.disk_full import CHECKPOINT, SINK, DiskWatch
from sinks.event_sink import EventSink
from sinks.files import GroupStateFile
from sinks.health import BatchReport
from sinks.log_sources import warning_text
from sinks.metrics import MetricsSink
from sinks.metrics_state import counter_state
from state.diagnosis.correlate import Correlator
from state.diagnosis.rules import DiagnosisSettings
from state.lag import LagBook
from state.rebalance_cost import RebalanceCosts
from state.model import DEAD
from state.vocabulary import SOURCE_KIND_OFFSETS
from state.outputs import (
    OUTPUT_RECORD_KINDS, RECORD_KINDS, STATISTICS_KINDS, OutputKind, apply_trigger_decisions,
    in_progress_rebalance_record,
)
from streaming.app.batch_gate import QueryStopping, StopGate, durably
from streaming.app.batch_report import batch_report
from streaming.app.marker_planner import MarkerPlanner
from streaming.app.source_offsets import topic_positions
from streaming.spark.batch_rows import collected_rows
from streaming.rows import loads_json

# A log source whose lines are this far from the offsets records of the same actions is reported
# on stderr once (the metric rebalance_monitor_log_clock_skew_seconds has the value).
CLOCK_SKEW_WARN_MS = 60_000
# The counters' snapshot is written with each roll of the event sink and at least this often, so
# a restart replays at most this long of records (and the parts not rolled yet).
SNAPSHOT_SECONDS = 60.0
LOG = logging.getLogger("rebalance_monitor.events")


def enforce_retention(sink: EventSink) -> None:
    """The sink's retention (events_retention_days, events_max_bytes), each deleted file logged."""
    for path in sink.enforce_retention():
        LOG.info("events_dir: %s deleted (events_retention_days, events_max_bytes)", path)


def _records_of(kind: OutputKind) -> Any:
    """A read-only attribute: the records of one kind the collector keeps."""
    return property(lambda self: self.records[kind])


@dataclass
class RunCollector:
    """What the query produced, fanned out to the metrics sink and (optionally) durable files.

    `keep_records` keeps every record in memory (replay, demo); the live service keeps only the
    latest snapshot per group and writes records to the event sink.
    """
    metrics: MetricsSink
    keep_records: bool = True
    event_sink: EventSink | None = None
    state_file: GroupStateFile | None = None
    records: dict[str, list[dict]] = field(default_factory=lambda: {k: [] for k in RECORD_KINDS})
    snapshots: dict[tuple[str, str], dict] = field(default_factory=dict)
    skew_warned: set = field(default_factory=set)
    # Decode health of __consumer_offsets records: (cluster, key_version, value_version, outcome) -> n
    decode_stats: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    last_batch_id: int = -1
    # Batches whose records are already in the counters (restored from the event sink): a batch
    # Spark re-runs after a crash updates snapshots but is not counted again.
    counted_through: int = -1
    on_batch: Callable[[RunCollector, int], None] | None = None
    # Called with every progress report after it was counted (the replay's progress line).
    on_progress: Callable[[BatchReport], None] | None = None
    # Cross-group root causes: removal records wait here until the watermark (CLOCK rows) has
    # passed them far enough (state/diagnosis/correlate.py); its state is saved with the state file.
    correlator: Correlator = field(default_factory=Correlator)
    # Last batch whose removals went through the correlator (restored from the state file): a
    # re-run batch at or below it neither feeds it again nor rewrites the event sink.
    correlated_through: int = -1
    gate: StopGate = field(default_factory=StopGate)
    # The state keys' timeouts and the quiet live sources' marker plan (streaming/app/marker_planner.py).
    markers: MarkerPlanner = field(default_factory=MarkerPlanner)
    # The input kind of each topic Spark's connector reads (its offsets do not name one).
    topic_kinds: dict[str, str] = field(default_factory=dict)
    # How a batch's output rows reach this driver (streaming/spark/batch_rows.py): one Arrow
    # collect, or (replay) written by the tasks and read back piece by piece.
    batch_rows: Callable[[Any, int], Iterable[tuple[str, str]]] = collected_rows
    # The last batch whose statistics (count_statistics) are in the counters: the counters'
    # snapshot says it, so a restart replays only the statistics after it. Both threads (the
    # batch's and the progress listener's) count under `count_lock`.
    statistics_through: int = -1
    count_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    snapshot_seconds: float = SNAPSHOT_SECONDS
    snapshot_at: float = field(default_factory=time.monotonic)
    # The groups this batch changed, for the state file's journal (GroupStateFile.save).
    changed_groups: set[tuple[str, str]] = field(default_factory=set)
    # `run`: a write that fails for want of space is retried in place (sinks/disk_full.py); None
    # (replay, demo): it raises.
    disk: DiskWatch | None = None
    # `run`: the committed half of the lag (state/lag.py), from each batch's COMMITTED_OFFSETS rows.
    lag: LagBook | None = None
    # `run`: the rebalances waiting for the end offsets around their stops (state/rebalance_cost.py).
    costs: RebalanceCosts | None = None
    # The moment the costs are judged at: now (`run`); a replay's, the end of its end-offset samples.
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self.markers.correlator_deadline_ms = lambda: self.correlator.next_deadline_ms()

    # The records kept per kind (replay, demo).
    removals = _records_of(OutputKind.REMOVAL)
    anomalies = _records_of(OutputKind.ANOMALY)
    quarantine = _records_of(OutputKind.QUARANTINE)
    clock_skew = _records_of(OutputKind.CLOCK_SKEW)

    def handle(self, kind: str, record: dict[str, Any]) -> None:
        if kind == OutputKind.SNAPSHOT:
            key = (record["cluster"], record["group"])
            self.snapshots[key] = record
            self.changed_groups.add(key)
        elif self.keep_records:
            self.records[kind].append(record)
        if kind == OutputKind.CLOCK_SKEW:
            self._warn_skew(record)
        self.metrics.observe(kind, record)

    def _warn_skew(self, record: dict[str, Any]) -> None:
        key = (record["cluster"], record["source"])
        if abs(record["skew_ms"]) >= CLOCK_SKEW_WARN_MS and key not in self.skew_warned:
            self.skew_warned.add(key)
            print(f"rebalance-monitor: warning: log times of {record['source']} (cluster {record['cluster']}) "
                  f"are {record['skew_ms'] / 1000:+.0f} s off the __consumer_offsets record of the same "
                  f"action (group {record['group']}, generation {record['generation']}); check its "
                  f"broker_timezone (see rebalance_monitor_log_clock_skew_seconds)", file=sys.stderr)

    def warn_silent_sources(self, final: bool = False) -> None:
        """Log sources that yield lines but no coordinator line (sinks/log_sources.py): one warning each."""
        for silent in self.metrics.log_sources.check(final):
            print(f"rebalance-monitor: warning: {warning_text(silent)}", file=sys.stderr)

    def correlate(self, by_kind: dict[str, list[dict]]) -> None:
        """Removals of this batch into the correlator; the decided ones (any batch's) out."""
        self.correlator.note_brokers(by_kind.get(OutputKind.BROKER_EVENT) or [])
        self.correlator.add(by_kind.get(OutputKind.REMOVAL) or [])
        clocks = [c["watermark_ms"] for c in by_kind.get(OutputKind.CLOCK) or [] if c.get("watermark_ms") is not None]
        by_kind[OutputKind.REMOVAL] = self.correlator.advance(max(clocks) if clocks else None)

    def foreach_batch(self, df: Any, batch_id: int) -> None:
        """foreachBatch of the query: `df` holds the batch's output rows (OUTPUT_SCHEMA). Runs
        inside the stop gate: `run` stops the query only while no foreachBatch runs."""
        with self.gate.running():
            if self.disk is not None:
                # Spark wrote the batch's offsets to the checkpoint before it called this
                self.disk.wrote(CHECKPOINT, batch_id)
            self._apply_batch(df, batch_id)

    def _apply_batch(self, df: Any, batch_id: int) -> None:
        if batch_id <= self.last_batch_id:
            return   # Spark re-ran a batch this process already applied
        by_kind: dict[str, list[dict]] = {}
        for kind, text in self.batch_rows(df, batch_id):
            by_kind.setdefault(kind, []).append(loads_json(text))
        if self.lag is not None:
            # the newest commit per partition wins: a batch Spark runs again changes nothing
            for record in by_kind.pop(OutputKind.COMMITTED_OFFSETS, None) or ():
                self.lag.note_commits(record)
        stops = by_kind.pop(OutputKind.PARTITION_STOPS, None) or ()
        if self.lag is not None and self.costs is not None and batch_id > self.correlated_through:
            now_s = self.clock()
            self.costs.note_rebalancing(by_kind.get(OutputKind.SNAPSHOT) or [], self.lag, now_s)
            for record in stops:
                self.costs.note(record, self.lag)
            # written with this batch's records: once, whichever batch measures them
            by_kind[OutputKind.REBALANCE_COST], by_kind[OutputKind.CATCH_UP] = self.costs.due(self.lag, now_s)
        if batch_id <= self.correlated_through:
            # already in the sink and counters
            by_kind = {OutputKind.SNAPSHOT: by_kind.get(OutputKind.SNAPSHOT) or []}
        else:
            self.correlate(by_kind)
            if self.event_sink is not None:
                # Files first: a crash after this point re-runs the batch and rewrites the same files
                # (the correlator state of the previous batch is what the state file holds).
                sink = self.event_sink
                self._durably(SINK, batch_id, lambda: sink.write_batch(batch_id, by_kind, OUTPUT_RECORD_KINDS))
        self._count_batch(by_kind, replayed=batch_id <= self.counted_through)
        self.metrics.groups.set_correlating(self.correlator.pending)
        self.note_incidents()
        self.markers.note_timeouts(by_kind.get(OutputKind.CLOCK) or [])
        self.forget_dead_groups()
        if (state_file := self.state_file) is not None:
            # A failed append makes the retry write the whole file (GroupStateFile.save).
            self._durably(CHECKPOINT, batch_id, lambda: state_file.save(
                batch_id, self.snapshots, self.correlator.to_state(), self.markers.timeouts,
                self.changed_groups, self.markers.changed))
        self.changed_groups.clear()
        self.markers.changed.clear()
        self.markers.plan()
        self.correlated_through = max(self.correlated_through, batch_id)
        self.warn_silent_sources()
        self.metrics.health.batches.inc()
        self.last_batch_id = batch_id
        self.maintain_sink(batch_id)
        if self.on_batch is not None:
            self.on_batch(self, batch_id)

    def _durably(self, where: str, batch_id: int, write: Callable[[], object], waits: str | None = None) -> None:
        """`write`, waiting inside the batch while the disk is full (batch_gate.durably)."""
        durably(self.disk, self.gate, where, batch_id, write, waits)

    def _count_batch(self, by_kind: dict[str, list[dict]], replayed: bool) -> None:
        """The batch's records into the metrics (a batch the restored counters hold: its snapshots only)."""
        with self.count_lock:
            if not replayed:
                self.metrics.health.count_stateful_work(by_kind.get(OutputKind.CLOCK) or [])
            for kind in RECORD_KINDS + (OutputKind.SNAPSHOT,):
                if replayed and kind != OutputKind.SNAPSHOT:
                    continue
                for record in by_kind.get(kind, []):
                    self.handle(kind, record)

    def maintain_sink(self, batch_id: int, now: float | None = None) -> None:
        """After batch `batch_id`: the counters' snapshot when due, then the roll of the committed
        batches it covers, then retention. In that order, so a rolled file never holds a record the
        snapshot lacks (a restart never needs a part of one) and retention deletes only counted records."""
        sink = self.event_sink
        if sink is None:
            return
        now = time.monotonic() if now is None else now
        roll = sink.roll_due()
        if not roll and now - self.snapshot_at < self.snapshot_seconds:
            return
        with self.count_lock:
            statistics = self.statistics_through      # the roll of statistics stops there too
            snapshot = {"records_through": max(batch_id, self.counted_through), "statistics_through": statistics,
                        "metrics": counter_state(self.metrics)}
        # The snapshot and a roll (which writes the rolled file before it deletes its parts)
        # need space too: a full disk holds the batch here (stopped meanwhile, its re-run after
        # the restart only updates snapshots: the state file has it), and retention, after the
        # roll, deletes only counted records.
        self._durably(SINK, batch_id, lambda: sink.save_counters(snapshot))
        self.snapshot_at = now
        if roll:
            # batches before this one are committed (Spark runs a batch after committing the last)
            committed = batch_id - 1
            through: dict[str, int] = {kind: committed if kind not in STATISTICS_KINDS else min(committed, statistics)
                                       for kind in RECORD_KINDS}
            self._durably(SINK, batch_id, lambda: sink.roll(through))
            enforce_retention(sink)
        self.note_sink_usage()

    def note_sink_usage(self) -> None:
        """The sink's bytes and files on /metrics (the parts written since are counted at the next roll)."""
        if self.event_sink is not None:
            size, files = self.event_sink.usage()
            self.metrics.health.event_sink_bytes.set(size)
            self.metrics.health.event_sink_files.set(files)

    def note_incidents(self) -> None:
        """The incident board (sinks/incident_gauges.py) after a batch: the removals the correlator
        holds, the brokers' deaths and the watermark."""
        self.metrics.incidents.note_removals(self.correlator.pending, decided=False)
        self.metrics.incidents.refresh(self.correlator.brokers, self.correlator.clock_ms)

    def forget_dead_groups(self) -> None:
        """The live service keeps no snapshot of a group whose series the metrics dropped (Dead
        for `dead_group_retention_seconds`): groups that come and go leave the state file too. One
        that came back since keeps its new snapshot. A replay keeps every group (groups.jsonl)."""
        forgotten = self.metrics.take_forgotten()
        if self.keep_records:
            return
        for key in forgotten:
            snapshot = self.snapshots.get(key)
            if snapshot is not None and snapshot.get("state") == DEAD:
                del self.snapshots[key]
                self.changed_groups.add(key)

    def configure(self, diagnosis: DiagnosisSettings) -> RunCollector:
        """Use the configured diagnosis thresholds (correlator, storm window of the gauges)."""
        self.correlator = Correlator(diagnosis)      # the marker planner asks the new one (__post_init__)
        self.metrics.groups.storm_window_ms = diagnosis.storm_window_ms
        self.metrics.incidents.configure(diagnosis)
        return self

    def finish(self) -> None:
        """End of a finite input: every removal still held by the correlator is decided."""
        for record in self.correlator.advance(2 ** 62):
            self.handle(OutputKind.REMOVAL, record)
        if self.lag is not None and self.costs is not None:
            # a replay's rebalances still waiting for samples that the file does not have
            costs, catch_ups = self.costs.due(self.lag, self.clock() + self.costs.max_wait_s + 1)
            for kind, records in ((OutputKind.REBALANCE_COST, costs), (OutputKind.CATCH_UP, catch_ups)):
                for record in records:
                    self.handle(kind, record)
        self.metrics.groups.set_correlating(self.correlator.pending)
        self.metrics.incidents.refresh(self.correlator.brokers)     # not the end's clock: no input is that late
        self.warn_silent_sources(final=True)

    def count_progress(self, progress: Any) -> None:
        """One of Spark's progress reports (one per micro-batch): the health metrics, then the
        replay's progress line."""
        report = batch_report(progress, self.topic_kinds)
        if self.disk is not None and report.batch_id is not None:
            # Spark reports a batch once its offsets and commit are in the checkpoint
            self.disk.wrote(CHECKPOINT, report.batch_id)
        self.metrics.health.record_batch(report)
        if self.lag is not None:
            self.note_offsets_read(self.lag, report)
        self.markers.note_caught_up(report)
        self.count_statistics(report)
        if self.on_progress is not None:
            self.on_progress(report)

    @staticmethod
    def note_offsets_read(book: LagBook, report: BatchReport) -> None:
        """Where the batch left the offsets source, for the lag book's view of the monitor's own
        reading (state/lag.py commits_read_through): a silence is measured only that far."""
        for source in report.sources:
            if source.kind == SOURCE_KIND_OFFSETS:
                positions = topic_positions(source.offset)
                if positions:
                    book.note_read(positions, None if source.tick_ms is None else source.tick_ms / 1000.0)

    def count_statistics(self, report: BatchReport) -> None:
        """The parse and decode steps' statistics of a batch, which its progress report carries
        (they pass no stateful step): into the metrics and the event sink. A batch whose
        statistics the restored counters hold already (statistics_through) is not counted again."""
        if report.batch_id is not None and report.batch_id <= self.statistics_through:
            return
        with self.count_lock:
            # into the sink first: statistics counted but not kept would be lost at a restart
            if (self.event_sink is not None and report.batch_id is not None
                    and not self._write_statistics(self.event_sink, report.batch_id, report)):
                return
            for counts in report.decode_counts:
                for key_version, value_version, outcome, n in counts.counts:
                    k = (counts.cluster, key_version, value_version, outcome)
                    self.decode_stats[k] = self.decode_stats.get(k, 0) + n
            self.metrics.count_statistics(report.decode_counts, report.log_lines)
            if report.batch_id is not None:
                self.statistics_through = max(self.statistics_through, report.batch_id)

    def _write_statistics(self, sink: EventSink, batch_id: int, report: BatchReport) -> bool:
        """A report's statistics into the sink (the progress listener's thread; the batch is
        committed already, so Spark will not run it again). On a full disk it waits like a
        batch's writes; False when the query stops first (the statistics of that batch are
        lost, as at a crash, with a line that says so)."""
        records: dict[str, list[dict]] = {
            OutputKind.DECODE_STATS: [c.record() for c in report.decode_counts],
            OutputKind.LOG_STATS: [lines.record() for lines in report.log_lines]}
        try:
            self._durably(SINK, batch_id, lambda: sink.write_batch(batch_id, records, STATISTICS_KINDS),
                          waits=f"the statistics of batch {batch_id} wait in memory")
        except QueryStopping:
            LOG.warning("events_dir: stopping while the disk is full: the decode and log-line statistics of "
                        "batch %d are not kept (rebalance_monitor_offsets_records_total and "
                        "rebalance_monitor_log_lines_total miss them after the restart)", batch_id)
            return False
        return True

    @property
    def rebalances(self) -> list[dict]:
        """The rebalances that ended, with their decided triggers (rebalance_trigger records)."""
        return apply_trigger_decisions(self.records[OutputKind.REBALANCE], self.records[OutputKind.REBALANCE_TRIGGER])

    def in_progress_rebalances(self) -> list[dict]:
        """Rebalances still open when the input ended (outcome "in_progress")."""
        return [r for r in (in_progress_rebalance_record(s) for s in self.snapshots.values()) if r is not None]
