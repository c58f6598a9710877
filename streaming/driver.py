"""Driver side of the query: foreachBatch fan-out of output rows, and the replay runner.

Output rows are few (rebalances, removals, snapshots), so each micro-batch is collected on the
driver and handed to the sinks. A batch id already applied is skipped: foreachBatch can run a
batch again after a failure, and histograms must not be fed twice.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from pyspark.sql import DataFrame, SparkSession

from sinks import event_files
from sinks.exposition import write_textfile
from sinks.prometheus import MetricsSink
from streaming.config import LogInput, MonitorSettings, OffsetsInput
from streaming.query import replay_query

# END_OF_INPUT_TS_MS is 2100-01-01; the watermark after it is 2099-12-31 minus the lateness.
END_OF_INPUT_WATERMARK_YEAR = "2099"


@dataclass
class RunCollector:
    """Everything the query produced, plus the metrics sink fed from it."""
    metrics: MetricsSink
    rebalances: list[dict] = field(default_factory=list)
    removals: list[dict] = field(default_factory=list)
    anomalies: list[dict] = field(default_factory=list)
    quarantine: list[dict] = field(default_factory=list)
    snapshots: dict[tuple[str, str], dict] = field(default_factory=dict)
    # Decode health of __consumer_offsets records: (cluster, key_version, value_version, outcome) -> n
    decode_stats: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    last_batch_id: int = -1
    on_batch: Optional[Callable[["RunCollector", int], None]] = None

    def handle(self, kind: str, record: dict[str, Any]) -> None:
        if kind == "rebalance":
            self.rebalances.append(record)
        elif kind == "removal":
            self.removals.append(record)
        elif kind == "anomaly":
            self.anomalies.append(record)
        elif kind == "quarantine":
            self.quarantine.append(record)
        elif kind == "snapshot":
            self.snapshots[(record["cluster"], record["group"])] = record
        elif kind == "decode_stats":
            for key_version, value_version, outcome, n in record.get("counts") or []:
                k = (record.get("cluster") or "default", str(key_version), str(value_version), str(outcome))
                self.decode_stats[k] = self.decode_stats.get(k, 0) + int(n)
        self.metrics.observe(kind, record)

    def foreach_batch(self, df: DataFrame, batch_id: int) -> None:
        if batch_id <= self.last_batch_id:
            return
        for row in df.collect():
            self.handle(row["kind"], json.loads(row["record_json"]))
        self.metrics.batches.inc()
        self.last_batch_id = batch_id
        if self.on_batch is not None:
            self.on_batch(self, batch_id)

    def count_progress(self, progress: dict) -> None:
        """Raw input rows per source kind, from Spark's own progress report."""
        for source in progress.get("sources") or []:
            rows = int(source.get("numInputRows") or 0)
            kind = "other"
            try:
                # Spark reports the first batch's start as the string "null".
                start = json.loads(source.get("startOffset") or "null") or {}
                end = json.loads(source.get("endOffset") or "null") or {}
                kind = end.get("source") or kind
                if end.get("eof") and not start.get("eof"):
                    rows -= 1   # the end-of-input marker is not input
            except (TypeError, ValueError, AttributeError):
                pass
            self.metrics.count_input(kind, max(0, rows))

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
        }
        write_textfile(self.metrics.registry, os.path.join(out_dir, "metrics.prom"))
        return counts


def run_to_end(spark: SparkSession, outputs: DataFrame, collector: RunCollector,
               checkpoint_dir: Optional[str] = None, timeout_s: float = 1800.0) -> None:
    """Run a finite (replay) query with Trigger.AvailableNow until all input is processed.

    The sources cap each micro-batch (admission control), so AvailableNow still runs many
    batches. Done is checked, not assumed: the last batch must have run with the watermark moved
    by the end-of-input markers, which is the batch that flushes every held event.
    """
    own_checkpoint = checkpoint_dir is None
    checkpoint = checkpoint_dir or tempfile.mkdtemp(prefix="rebalance-monitor-ckpt-")
    query = (outputs.writeStream.foreachBatch(collector.foreach_batch)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    try:
        finished = query.awaitTermination(timeout_s)
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")
        if not finished:
            raise TimeoutError(f"replay did not finish within {timeout_s:.0f} s")
    finally:
        query.stop()
        if own_checkpoint:
            shutil.rmtree(checkpoint, ignore_errors=True)
    final_watermark_seen = False
    for progress in query.recentProgress:
        collector.count_progress(progress)
        watermark = (progress.get("eventTime") or {}).get("watermark", "")
        final_watermark_seen |= watermark.startswith(END_OF_INPUT_WATERMARK_YEAR)
    if not final_watermark_seen:
        raise RuntimeError("replay ended before the end-of-input watermark flushed held events")


def replay(spark: SparkSession, settings: MonitorSettings, logs: list[LogInput],
           offsets: list[OffsetsInput], out_dir: Optional[str] = None,
           max_rows_per_batch: Optional[int] = None, collector: Optional[RunCollector] = None,
           offsets_rows_per_batch: Optional[int] = None) -> RunCollector:
    collector = collector or RunCollector(MetricsSink(settings.duration_buckets))
    outputs = replay_query(spark, settings, logs, offsets, max_rows_per_batch, offsets_rows_per_batch)
    run_to_end(spark, outputs, collector)
    if out_dir:
        collector.write_outputs(out_dir)
    return collector
