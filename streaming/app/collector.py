"""The driver side of the query: each micro-batch's output rows fanned out to the metrics, the
records kept (replay) or written to the durable event sink (run), and the cross-group correlator.

Output rows are few (rebalances, removals, snapshots), so each micro-batch is collected on the
driver. A batch id already applied is skipped: foreachBatch can run a batch again after a
failure, and histograms must not be fed twice.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sinks.disk_full import CHECKPOINT, SINK, DiskWatch, is_disk_full
from sinks.event_sink import EventSink, SinkError
from sinks.files import GroupStateFile
from sinks.health import BatchReport
from sinks.log_sources import warning_text
from sinks.metrics import MetricsSink
from sinks.metrics_state import counter_state, load_counter_state
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
from streaming.app.batch_report import batch_report
from streaming.app.source_offsets import topic_positions
from streaming.spark.batch_rows import collected_rows
from streaming.spark.sources.markers import due_ms, write_plan
from streaming.rows import loads_json

# A log source whose lines are this far from the offsets records of the same actions is reported
# on stderr once (the metric rebalance_monitor_log_clock_skew_seconds has the value).
CLOCK_SKEW_WARN_MS = 60_000
# The counters' snapshot is written with each roll of the event sink and at least this often, so
# a restart replays at most this long of records (and the parts not rolled yet).
SNAPSHOT_SECONDS = 60.0
LOG = logging.getLogger("rebalance_monitor.events")


def _records_of(kind: OutputKind) -> Any:
    """A read-only attribute: the records of one kind the collector keeps."""
    return property(lambda self: self.records[kind])


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
    # The event-time timeout of every state key (the CLOCK rows: "cluster\tkey" -> ms), saved with
    # the state file; with the correlator's next deadline they say when a quiet live source's
    # next marker is due, which the collector writes to `marker_plan` (sources/markers.py).
    timeouts: dict[str, int] = field(default_factory=dict)
    marker_plan: str | None = None
    lateness_ms: int = 0
    planned: tuple[int | None, tuple[str, ...]] | None = None     # the plan last written (none yet: None)
    # The input kinds whose sources read everything waiting at their last batch (their backlog
    # 0): a capped connector's markers wait for it (sources/clock.py). Empty when a query starts.
    caught_up: set[str] = field(default_factory=set)
    plan_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
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
    # What this batch changed, for the state file's journal (GroupStateFile.save).
    changed_groups: set[tuple[str, str]] = field(default_factory=set)
    changed_timeouts: set[str] = field(default_factory=set)
    # `run`: a write that fails for want of space is retried in place (sinks/disk_full.py); None
    # (replay, demo): it raises.
    disk: DiskWatch | None = None
    # `run`: the committed half of the lag (state/lag.py), from each batch's COMMITTED_OFFSETS rows.
    lag: LagBook | None = None
    # `run`: the rebalances waiting for the end offsets around their stops (state/rebalance_cost.py).
    costs: RebalanceCosts | None = None

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
            now_s = time.time()
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
        self.note_timeouts(by_kind.get(OutputKind.CLOCK) or [])
        self.forget_dead_groups()
        if (state_file := self.state_file) is not None:
            # A failed append makes the retry write the whole file (GroupStateFile.save).
            self._durably(CHECKPOINT, batch_id, lambda: state_file.save(
                batch_id, self.snapshots, self.correlator.to_state(), self.timeouts,
                self.changed_groups, self.changed_timeouts))
        self.changed_groups.clear()
        self.changed_timeouts.clear()
        self.plan_markers()
        self.correlated_through = max(self.correlated_through, batch_id)
        self.warn_silent_sources()
        self.metrics.health.batches.inc()
        self.last_batch_id = batch_id
        self.maintain_sink(batch_id)
        if self.on_batch is not None:
            self.on_batch(self, batch_id)

    def _durably(self, where: str, batch_id: int, write: Callable[[], object], waits: str | None = None) -> None:
        """`write` for uncommitted batch `batch_id`; while it fails for want of space at `where`
        (sinks/disk_full.py), it is tried again every disk.retry_seconds, inside the batch: the
        batch stays uncommitted, /metrics keeps serving, and it goes on where it stopped once
        there is space. A stop meanwhile ends the batch uncommitted (QueryStopping): the next
        start runs it again from the checkpoint. Every write retried here is idempotent."""
        while True:
            try:
                write()
            except OSError as exc:
                if self.disk is None or not is_disk_full(exc):
                    raise
                waits = waits or f"batch {batch_id} waits uncommitted (nothing is lost)"
                self.disk.failed(where, exc.strerror or str(exc), batch_id,
                                 f"{waits}; /metrics keeps serving; retrying every {self.disk.retry_seconds:g} s")
                if self.gate.stopping.wait(self.disk.retry_seconds):
                    raise QueryStopping(f"rebalance-monitor is stopping while the disk is full; batch {batch_id} "
                                        "runs again at the next start") from None
                continue
            if self.disk is not None:
                self.disk.wrote(where, batch_id)
            return

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
            for path in sink.enforce_retention():
                LOG.info("events_dir: %s deleted (events_retention_days, events_max_bytes)", path)
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

    def note_timeouts(self, clocks: list[dict[str, Any]]) -> None:
        """Each called state key's timeout after its call (CLOCK rows)."""
        for clock in clocks:
            if clock.get("key") is None:
                continue
            key = f"{clock.get('cluster')}\t{clock['key']}"
            self.changed_timeouts.add(key)
            if clock.get("timeout_ms") is None:
                self.timeouts.pop(key, None)
            else:
                self.timeouts[key] = int(clock["timeout_ms"])

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

    def plan_markers(self) -> None:
        """When the quiet live sources' next marker is due (sources/markers.py)."""
        if self.marker_plan is None:
            return
        with self.plan_lock:        # the batch thread and the progress listener both plan
            due = due_ms(self.timeouts.values(), self.correlator.next_deadline_ms(), self.lateness_ms)
            plan = (due, tuple(sorted(self.caught_up)))
            if self.planned != plan:      # most batches leave it as it was: no write
                write_plan(self.marker_plan, due, list(plan[1]))
                self.planned = plan

    def query_started(self) -> None:
        """A (re)started query may be behind: no source counts as caught up until a batch says so."""
        self.caught_up.clear()
        self.plan_markers()

    def note_caught_up(self, report: BatchReport) -> None:
        """Which sources read everything waiting in this batch (their backlog after it is 0)."""
        was = set(self.caught_up)
        for source in report.sources:
            if source.backlog is not None:
                (self.caught_up.add if source.backlog == 0 else self.caught_up.discard)(source.kind)
        if self.caught_up != was:
            self.plan_markers()

    def configure(self, diagnosis: DiagnosisSettings) -> RunCollector:
        """Use the configured diagnosis thresholds (correlator, storm window of the gauges)."""
        self.correlator = Correlator(diagnosis)
        self.metrics.groups.storm_window_ms = diagnosis.storm_window_ms
        self.metrics.incidents.configure(diagnosis)
        return self

    def restore(self) -> int:
        """After a restart: group gauges from the state file, counters and histograms from the
        event sink, so /metrics shows what an uninterrupted run would. Returns the last batch id."""
        last = -1
        if self.state_file is not None:
            saved = self.state_file.read()
            last = saved.batch_id
            self.correlator.load_state(saved.correlator)
            self.timeouts = saved.timeouts
            self.metrics.groups.set_correlating(self.correlator.pending)
            self.correlated_through = last
            for key, snap in saved.groups.items():
                self.snapshots[key] = snap
                self.metrics.observe(OutputKind.SNAPSHOT, snap)
        if self.event_sink is not None:
            self.restore_counters(self.event_sink)
            self.counted_through = max(last, self.event_sink.last_batch_id(), self.counted_through)
            # Statistics count as counted through the last batch whose statistics the sink holds,
            # not through counted_through: a batch whose records reached the sink but which was not
            # committed (a crash, or a stop while the checkpoint's disk was full) runs again, and
            # its progress report, the first for that batch, carries statistics nobody counted.
            self.statistics_through = max(self.statistics_through, self.event_sink.last_batch_id(STATISTICS_KINDS))
            # Retention at start too, not only after a roll: lowering events_max_bytes and
            # restarting frees a full disk, where the next roll would first need room.
            for path in self.event_sink.enforce_retention():
                LOG.info("events_dir: %s deleted (events_retention_days, events_max_bytes)", path)
            self.note_sink_usage()
        self.note_incidents()
        return last

    def restore_counters(self, sink: EventSink) -> None:
        """Counters and histograms from the sink's snapshot, then the records after it. A sink
        without one (written before snapshots existed, or its snapshot unreadable) is replayed
        whole, as before. The incident board gets the removals of the newest files too (it looks
        at the last minutes of event time, which the snapshot does not hold)."""
        records_through = statistics_through = -1
        try:
            doc = sink.load_counters()
            if doc is not None:
                through = int(doc["records_through"]), int(doc["statistics_through"])
                load_counter_state(self.metrics, doc.get("metrics"))
                records_through, statistics_through = through
        except (KeyError, TypeError, ValueError) as exc:     # SinkError is a ValueError
            LOG.warning("events_dir: the counters' snapshot is unusable (%s); counting every record kept instead",
                        exc if isinstance(exc, SinkError) else f"{type(exc).__name__}: {exc}")
        for kind in RECORD_KINDS:
            after = statistics_through if kind in STATISTICS_KINDS else records_through
            for record in sink.records(kind, after=after):
                self.metrics.observe(kind, record)
        if records_through >= 0:
            files = sink.files(OutputKind.REMOVAL)
            rolled = [f for f in files if f.rolled]
            start = (rolled[-1] if rolled else files[0]).first if files else records_through + 1
            self.metrics.incidents.note_removals(
                sink.records(OutputKind.REMOVAL, after=start - 1, through=records_through), decided=True)
        self.statistics_through = statistics_through
        self.counted_through = records_through

    def finish(self) -> None:
        """End of a finite input: every removal still held by the correlator is decided."""
        for record in self.correlator.advance(2 ** 62):
            self.handle(OutputKind.REMOVAL, record)
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
        self.note_caught_up(report)
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
