"""A replay: the query over files run to the end of its input (Trigger.AvailableNow), then the
outputs written (rebalances.jsonl, member_removals.jsonl, groups.jsonl, ..., metrics.prom)."""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Optional

from pyspark.sql import DataFrame, SparkSession

from sinks.exposition import write_textfile
from sinks.files import GROUPS_FILE, METRICS_FILE, SORT_KEYS, replay_file, write_jsonl
from sinks.metrics import MetricsSink
from state.outputs import OutputKind
from streaming.app.collector import ProgressCounter, RunCollector
from streaming.app.settings import LogInput, OffsetsInput, ReplaySettings
from streaming.spark.query import replay_query


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


def write_outputs(collector: RunCollector, out_dir: str) -> dict[str, int]:
    """The replay's files; returns the number of records per file."""
    os.makedirs(out_dir, exist_ok=True)
    records = {kind: list(collector.records[kind]) for kind in SORT_KEYS}
    records[OutputKind.REBALANCE] += collector.in_progress_rebalances()
    counts = {replay_file(kind): write_jsonl(os.path.join(out_dir, replay_file(kind)), sorted(rows, key=SORT_KEYS[kind]))
              for kind, rows in records.items()}
    counts[GROUPS_FILE] = write_jsonl(os.path.join(out_dir, GROUPS_FILE),
                                      [collector.snapshots[k] for k in sorted(collector.snapshots)])
    write_textfile(collector.metrics.registry, os.path.join(out_dir, METRICS_FILE))
    return counts


def replay(spark: SparkSession, settings: ReplaySettings, logs: list[LogInput], offsets: list[OffsetsInput],
           out_dir: Optional[str] = None, collector: Optional[RunCollector] = None,
           offsets_rows_per_batch: Optional[int] = None) -> RunCollector:
    collector = (collector or RunCollector(MetricsSink(settings.duration_buckets))).configure(
        settings.diagnosis.to_settings())
    outputs = replay_query(spark, settings.query_options(), [i.file() for i in logs], [i.file() for i in offsets],
                           offsets_rows_per_batch)
    run_to_end(spark, outputs, collector)
    collector.finish()
    if out_dir:
        write_outputs(collector, out_dir)
    return collector
