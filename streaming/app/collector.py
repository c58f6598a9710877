"""Driver side of the query: foreachBatch fan-out of output rows, and the replay runner.

Output rows are few (rebalances, removals, snapshots), so each micro-batch is collected on the
driver and handed to the sinks. A batch id already applied is skipped: foreachBatch can run a
batch again after a failure, and histograms must not be fed twice.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from datetime import datetime
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from sinks import files as event_files
from sinks.event_sink import EventSink, GroupStateFile
from sinks.exposition import write_textfile
from sinks.metrics import MetricsSink
from state.diagnosis.correlate import Correlator
from state.machine.core import slow_rebalance_fields
from streaming.app.settings import LogInput, MonitorSettings, OffsetsInput
from streaming.spark.query import replay_query

# END_OF_INPUT_TS_MS is 2100-01-01; the watermark after it is 2099-12-31 minus the lateness.
END_OF_INPUT_WATERMARK_YEAR = "2099"
# A log source whose lines are this far from the offsets records of the same actions is reported
# on stderr once (the metric rebalance_monitor_log_clock_skew_seconds has the value).
CLOCK_SKEW_WARN_MS = 60_000


def _offset(value) -> dict:
    """A source offset from a progress report: a dict, a JSON string, or "null" (first batch)."""
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value or "null")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _iso_ms(text: str) -> float:
    """Spark's progress timestamps (`2026-11-21T19:33:21.663Z`) -> epoch ms."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


@dataclass
class RunCollector:
    """What the query produced, fanned out to the metrics sink and (optionally) durable files.

    `keep_records` keeps every record in memory (replay, demo); the live service keeps only the
    latest snapshot per group and writes records to the event sink.
    """
    metrics: MetricsSink
    keep_records: bool = True
    event_sink: Optional[EventSink] = None
    state_file: Optional[GroupStateFile] = None
    rebalances: list[dict] = field(default_factory=list)
    removals: list[dict] = field(default_factory=list)
    anomalies: list[dict] = field(default_factory=list)
    quarantine: list[dict] = field(default_factory=list)
    snapshots: dict[tuple[str, str], dict] = field(default_factory=dict)
    clock_skew: list[dict] = field(default_factory=list)
    skew_warned: set = field(default_factory=set)
    # Decode health of __consumer_offsets records: (cluster, key_version, value_version, outcome) -> n
    decode_stats: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    last_batch_id: int = -1
    # Batches whose records are already in the counters (restored from the event sink): a batch
    # Spark re-runs after a crash updates snapshots but is not counted again.
    counted_through: int = -1
    on_batch: Optional[Callable[["RunCollector", int], None]] = None
    # Cross-group root causes: removal records wait here until the watermark ("clock" rows) has
    # passed them far enough (state/correlate.py); its state is saved with the state file.
    correlator: Correlator = field(default_factory=Correlator)
    # Last batch whose removals went through the correlator (restored from the state file): a
    # re-run batch at or below it neither feeds it again nor rewrites the event sink.
    correlated_through: int = -1

    def handle(self, kind: str, record: dict[str, Any]) -> None:
        if kind == "snapshot":
            self.snapshots[(record["cluster"], record["group"])] = record
        elif kind == "clock_skew":
            if self.keep_records:
                self.clock_skew.append(record)
            key = (record["cluster"], record["source"])
            if abs(record["skew_ms"]) >= CLOCK_SKEW_WARN_MS and key not in self.skew_warned:
                self.skew_warned.add(key)
                print(f"rebalance-monitor: warning: log times of {record['source']} (cluster {record['cluster']}) "
                      f"are {record['skew_ms'] / 1000:+.0f} s off the __consumer_offsets record of the same "
                      f"action (group {record['group']}, generation {record['generation']}); check its "
                      f"broker_timezone (see rebalance_monitor_log_clock_skew_seconds)", file=sys.stderr)
        elif kind == "decode_stats":
            for key_version, value_version, outcome, n in record.get("counts") or []:
                k = (record.get("cluster") or "default", str(key_version), str(value_version), str(outcome))
                self.decode_stats[k] = self.decode_stats.get(k, 0) + int(n)
        elif self.keep_records:
            {"rebalance": self.rebalances, "removal": self.removals, "anomaly": self.anomalies,
             "quarantine": self.quarantine}.get(kind, []).append(record)
        self.metrics.observe(kind, record)

    def correlate(self, by_kind: dict[str, list[dict]]) -> None:
        """Removals of this batch into the correlator; the decided ones (any batch's) out."""
        self.correlator.add(by_kind.get("removal") or [])
        clocks = [c["watermark_ms"] for c in by_kind.get("clock") or [] if c.get("watermark_ms") is not None]
        by_kind["removal"] = self.correlator.advance(max(clocks) if clocks else None)

    def foreach_batch(self, df: DataFrame, batch_id: int) -> None:
        if batch_id <= self.last_batch_id:
            return   # Spark re-ran a batch this process already applied
        by_kind: dict[str, list[dict]] = {}
        for row in df.collect():
            by_kind.setdefault(row["kind"], []).append(json.loads(row["record_json"]))
        if batch_id <= self.correlated_through:
            by_kind = {"snapshot": by_kind.get("snapshot") or []}   # already in the sink and counters
        else:
            self.correlate(by_kind)
            if self.event_sink is not None:
                # Files first: a crash after this point re-runs the batch and rewrites the same files
                # (the correlator state of the previous batch is what the state file holds).
                self.event_sink.write_batch(batch_id, by_kind)
        replayed = batch_id <= self.counted_through
        for kind in ("rebalance", "removal", "anomaly", "quarantine", "clock_skew", "decode_stats", "snapshot"):
            if replayed and kind != "snapshot":
                continue
            for record in by_kind.get(kind, []):
                self.handle(kind, record)
        if self.state_file is not None:
            self.state_file.save(batch_id, self.snapshots, self.correlator.to_state())
        self.correlated_through = max(self.correlated_through, batch_id)
        self.metrics.batches.inc()
        self.last_batch_id = batch_id
        if self.on_batch is not None:
            self.on_batch(self, batch_id)

    def configure(self, settings: MonitorSettings) -> "RunCollector":
        """Use the configured diagnosis thresholds (correlator, storm window of the gauges)."""
        diagnosis = settings.diagnosis.to_settings()
        self.correlator = Correlator(diagnosis)
        self.metrics.groups.storm_window_ms = diagnosis.storm_window_ms
        return self

    def restore(self) -> int:
        """After a restart: group gauges from the state file, counters and histograms from the
        event sink, so /metrics shows what an uninterrupted run would. Returns the last batch id."""
        last = -1
        if self.state_file is not None:
            last, snapshots = self.state_file.load()
            self.correlator.load_state(self.state_file.load_extra())
            self.correlated_through = last
            for snap in snapshots:
                self.snapshots[(snap["cluster"], snap["group"])] = snap
                self.metrics.observe("snapshot", snap)
        if self.event_sink is not None:
            for kind in ("rebalance", "removal", "anomaly", "quarantine", "clock_skew", "decode_stats"):
                for record in self.event_sink.records(kind):
                    self.metrics.observe(kind, record)
            self.counted_through = max(last, self.event_sink.last_batch_id())
        return last

    def finish(self) -> None:
        """End of a finite input: every removal still held by the correlator is decided."""
        for record in self.correlator.advance(2 ** 62):
            self.handle("removal", record)

    def count_progress(self, progress: dict) -> None:
        """Health metrics from one of Spark's progress reports (one per micro-batch)."""
        m = self.metrics
        now_ms = time.time() * 1000
        if hasattr(progress, "json"):   # PySpark's StreamingQueryProgress (nested Rows): use its JSON
            progress = json.loads(progress.json)
        for source in progress.get("sources") or []:
            rows = int(source.get("numInputRows") or 0)
            kind = "other"
            start, end = _offset(source.get("startOffset")), _offset(source.get("endOffset"))
            if isinstance(end, dict):
                kind = end.get("source") or kind
                if "lines" in end:
                    # The log reader emits only lines with a coordinator marker; its offsets
                    # count every line it read.
                    rows = int(end["lines"]) - int(start.get("lines") or 0)
                elif end.get("eof") and not start.get("eof"):
                    rows -= 1   # the replay's end-of-input marker is not input
                if end.get("tick") and end.get("tick") != start.get("tick"):
                    rows -= 1   # nor is a live source's caught-up marker
                if "error" in end:   # live sources say whether Kafka answered
                    m.source_up.labels(kind).set(0 if end["error"] else 1)
                    if end["error"]:
                        m.source_errors.labels(kind).inc()
                if "gap" in end:
                    m.offset_gaps.labels(kind).set(int(end.get("gap") or 0))
            m.count_input(kind, max(0, rows))
            rate = source.get("inputRowsPerSecond")
            if rate is not None:
                m.input_rate.labels(kind).set(float(rate))
        duration = (progress.get("durationMs") or {}).get("triggerExecution")
        if duration is not None:
            m.batch_duration.set(duration / 1000.0)
        watermark = (progress.get("eventTime") or {}).get("watermark")
        if watermark and not watermark.startswith(END_OF_INPUT_WATERMARK_YEAR):
            m.watermark_delay.set(max(0.0, (now_ms - _iso_ms(watermark)) / 1000.0))
        for name, values in (progress.get("observedMetrics") or {}).items():
            newest = (values or {}).get("newest_event_ms")
            if name.startswith("source_") and newest is not None:
                m.newest_event_age.labels(name[len("source_"):]).set(max(0.0, (now_ms - newest) / 1000.0))
        operators = progress.get("stateOperators") or []
        if operators:
            m.state_rows.set(sum(int(op.get("numRowsTotal") or 0) for op in operators))
            late = sum(int(op.get("numRowsDroppedByWatermark") or 0) for op in operators)
            if late:
                m.late_rows.inc(late)

    def in_progress_rebalances(self) -> list[dict]:
        """Rebalances still open when the input ended (outcome "in_progress")."""
        out = []
        for snap in self.snapshots.values():
            o = snap.get("rebalance_in_progress")
            if not o or snap.get("state") == "Dead":
                continue
            out.append({
                "cluster": snap["cluster"], "group": snap["group"], "protocol": o["protocol"],
                "generation": o["generation"], "previous_generation": o["previous_generation"],
                "coordinator": o["coordinator"], "started_at_ms": o["started_at_ms"],
                "join_completed_at_ms": o["join_completed_at_ms"], "completed_at_ms": None,
                "ended_at_ms": None, "join_seconds": None, "sync_seconds": None,
                "total_seconds": None, "trigger": o["trigger"], "trigger_member": o["trigger_member"],
                "reason_text": o["reason_text"], "outcome": "in_progress", "members": None,
                "removed_members": list(o["removals"]),
                # as far as they are known while the JOIN phase is open (no join_seconds yet)
                **slow_rebalance_fields(o["protocol"], o["previous_generation"], o["timeout_removals"],
                                        [snap.get("rebalance_timeout_ms"), o.get("max_rebalance_timeout_ms")],
                                        None),
            })
        return out

    def write_outputs(self, out_dir: str) -> dict[str, int]:
        os.makedirs(out_dir, exist_ok=True)
        rebalances = sorted(self.rebalances + self.in_progress_rebalances(),
                            key=event_files.rebalance_sort_key)
        counts = {
            event_files.REBALANCES: event_files.write_jsonl(
                os.path.join(out_dir, event_files.REBALANCES), rebalances),
            event_files.REMOVALS: event_files.write_jsonl(
                os.path.join(out_dir, event_files.REMOVALS),
                sorted(self.removals, key=event_files.removal_sort_key)),
            event_files.GROUPS: event_files.write_jsonl(
                os.path.join(out_dir, event_files.GROUPS),
                [self.snapshots[k] for k in sorted(self.snapshots)]),
            event_files.QUARANTINE: event_files.write_jsonl(
                os.path.join(out_dir, event_files.QUARANTINE),
                sorted(self.quarantine, key=lambda q: (q.get("cluster") or "", q["source_id"], q["seq"]))),
            event_files.ANOMALIES: event_files.write_jsonl(
                os.path.join(out_dir, event_files.ANOMALIES),
                sorted(self.anomalies, key=lambda a: (a["cluster"], a["group"], a["ts_ms"], a["seq"]))),
            event_files.CLOCK_SKEW: event_files.write_jsonl(
                os.path.join(out_dir, event_files.CLOCK_SKEW),
                sorted(self.clock_skew, key=lambda c: (c["cluster"], c["source"], c["log_ts_ms"], c["group"],
                                                       c["pair"], c["generation"]))),
        }
        write_textfile(self.metrics.registry, os.path.join(out_dir, "metrics.prom"))
        return counts


class ProgressCounter(StreamingQueryListener):
    """Feeds every progress report of one query to the collector as Spark publishes it.

    `query.recentProgress` keeps only the last `spark.sql.streaming.numRecentProgressUpdates`
    (100) reports, so reading it after a long replay lost the input counts of earlier batches.
    Listener events of a query arrive in order, and its terminated event comes last: `wait_done`
    returns once every report has been counted.
    """

    def __init__(self, collector: "RunCollector") -> None:
        self.collector = collector
        self.query_id: Optional[str] = None
        self.final_watermark_seen = False
        self._done = threading.Event()
        self._lock = threading.Lock()

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        progress = json.loads(event.progress.json)
        if self.query_id is not None and progress.get("id") != self.query_id:
            return   # another query of the session
        with self._lock:
            self.collector.count_progress(progress)
            watermark = (progress.get("eventTime") or {}).get("watermark", "")
            self.final_watermark_seen |= watermark.startswith(END_OF_INPUT_WATERMARK_YEAR)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        if self.query_id is None or str(event.id) == self.query_id:
            self._done.set()

    def watch(self, query) -> None:
        self.query_id = str(query.id)

    def wait_done(self, timeout_s: float = 30.0) -> bool:
        return self._done.wait(timeout_s)


def run_to_end(spark: SparkSession, outputs: DataFrame, collector: RunCollector,
               checkpoint_dir: Optional[str] = None, timeout_s: float = 1800.0) -> None:
    """Run a finite (replay) query with Trigger.AvailableNow until all input is processed.

    The sources cap each micro-batch (admission control), so AvailableNow still runs many
    batches. Done is checked, not assumed: the last batch must have run with the watermark moved
    by the end-of-input markers, which is the batch that flushes every held event.
    """
    own_checkpoint = checkpoint_dir is None
    checkpoint = checkpoint_dir or tempfile.mkdtemp(prefix="rebalance-monitor-ckpt-")
    counter = ProgressCounter(collector)
    spark.streams.addListener(counter)
    query = (outputs.writeStream.foreachBatch(collector.foreach_batch)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    counter.watch(query)
    try:
        finished = query.awaitTermination(timeout_s)
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")
        if not finished:
            raise TimeoutError(f"replay did not finish within {timeout_s:.0f} s")
    finally:
        query.stop()
        counted = counter.wait_done()
        spark.streams.removeListener(counter)
        if own_checkpoint:
            shutil.rmtree(checkpoint, ignore_errors=True)
    if not counted:
        raise RuntimeError("replay: Spark did not report the end of the query within 30 s")
    if not counter.final_watermark_seen:
        raise RuntimeError("replay ended before the end-of-input watermark flushed held events")


def replay(spark: SparkSession, settings: MonitorSettings, logs: list[LogInput],
           offsets: list[OffsetsInput], out_dir: Optional[str] = None,
           max_rows_per_batch: Optional[int] = None, collector: Optional[RunCollector] = None,
           offsets_rows_per_batch: Optional[int] = None) -> RunCollector:
    collector = (collector or RunCollector(MetricsSink(settings.duration_buckets))).configure(settings)
    outputs = replay_query(spark, settings, logs, offsets, max_rows_per_batch, offsets_rows_per_batch)
    run_to_end(spark, outputs, collector)
    collector.finish()
    if out_dir:
        collector.write_outputs(out_dir)
    return collector
