"""A replay: the query over files run to the end of its input (Trigger.AvailableNow), then the
outputs written (rebalances.jsonl, member_removals.jsonl, groups.jsonl, ..., metrics.prom)."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from typing import TYPE_CHECKING

from sinks.exposition import write_textfile
from sinks.files import GROUPS_FILE, METRICS_FILE, SORT_KEYS, replay_file, write_jsonl
from sinks.metrics import MetricsSink
from state.lag import LagBook
from state.outputs import OutputKind
from state.rebalance_cost import RebalanceCosts, apply_rebalance_costs
from streaming.app.collector import RunCollector
from streaming.app.end_offsets_file import EndOffsets, EndOffsetsError, read_end_offsets
from streaming.app.progress import ReplayProgress
from streaming.app.settings import ConfigError, LogInput, OffsetsInput, ReplaySettings
from streaming.app.settings.wiring import (
    diagnosis_settings,
    log_file,
    metrics_sink_options,
    offsets_file,
    query_options,
)
from streaming.spark.batch_rows import SpilledRows
from streaming.spark.query import replay_query, stage_replay
from streaming.spark.run import run_to_end

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def load_end_offsets(settings: ReplaySettings) -> EndOffsets:
    """The samples of settings.end_offsets; a file without one is a ConfigError naming the setting,
    and lines that are not samples are counted in one warning."""
    assert settings.end_offsets is not None
    try:
        ends = read_end_offsets(settings.end_offsets, settings.cluster)
    except EndOffsetsError as exc:
        raise ConfigError(f"end_offsets (--end-offsets): {exc}") from None
    if ends.skipped:
        print(f"rebalance-monitor: warning: {settings.end_offsets}: {ends.skipped} entries are not end-offset "
              f"samples and were skipped (first: {ends.first_skip})", file=sys.stderr)
    return ends


def replay_records(collector: RunCollector) -> tuple[dict[str, list[dict]], list[dict]]:
    """(records per kind, group snapshots) as the replay's files hold them, in their order; with
    end offsets, the rebalances carry their records_delayed."""
    records = {kind: list(collector.records[kind]) for kind in SORT_KEYS}
    records[OutputKind.REBALANCE] = collector.rebalances + collector.in_progress_rebalances()
    if records[OutputKind.REBALANCE_COST]:
        records[OutputKind.REBALANCE] = apply_rebalance_costs(records[OutputKind.REBALANCE],
                                                              records[OutputKind.REBALANCE_COST])
    return ({kind: sorted(rows, key=SORT_KEYS[kind]) for kind, rows in records.items()},
            [collector.snapshots[k] for k in sorted(collector.snapshots)])


def write_record_files(out_dir: str, records: tuple[dict[str, list[dict]], list[dict]]) -> dict[str, int]:
    """The replay's JSON-lines files of `records` (replay_records); the number of records per file."""
    os.makedirs(out_dir, exist_ok=True)
    records_by_kind, snapshots = records
    counts = {replay_file(kind): write_jsonl(os.path.join(out_dir, replay_file(kind)), rows)
              for kind, rows in records_by_kind.items()}
    counts[GROUPS_FILE] = write_jsonl(os.path.join(out_dir, GROUPS_FILE), snapshots)
    return counts


def write_metrics_file(collector: RunCollector, out_dir: str) -> None:
    """The replay's metrics.prom: the registry at the end of the run."""
    os.makedirs(out_dir, exist_ok=True)
    write_textfile(collector.metrics.registry, os.path.join(out_dir, METRICS_FILE))


def write_outputs(collector: RunCollector, out_dir: str) -> dict[str, int]:
    """The replay's files; returns the number of records per JSON-lines file."""
    counts = write_record_files(out_dir, replay_records(collector))
    write_metrics_file(collector, out_dir)
    return counts


def _size(path: str) -> int:
    """Bytes of an input file, or of the files under a segment directory."""
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def progress_line(label: str) -> ReplayProgress:
    """The progress line of a replay on stderr."""
    return ReplayProgress(label=label)


def attach_end_offsets(collector: RunCollector, ends: EndOffsets, cluster: str) -> None:
    """A replay's end offsets (`--end-offsets`): lag as of the newest sample on its page, and
    records_delayed for its rebalances (state/rebalance_cost.py; no catch-up in a replay)."""
    interval = ends.interval_s()
    book = LagBook(interval)
    book.load_history(cluster, ends.samples)
    end_s = ends.span_s[1]

    def at_the_end() -> float:
        return end_s
    collector.metrics.show_lag(book, at_the_end)
    collector.lag = book
    collector.costs = RebalanceCosts(interval, catch_up=False)
    collector.clock = at_the_end


def replay(spark: SparkSession, settings: ReplaySettings, logs: list[LogInput], offsets: list[OffsetsInput],
           out_dir: str | None = None, collector: RunCollector | None = None,
           progress: ReplayProgress | None = None, checkpoint_dir: str | None = None,
           end_offsets: EndOffsets | None = None) -> RunCollector:
    """`progress`: the progress line on stderr (streaming/app/progress.py, `progress_line`);
    `checkpoint_dir`: the query's checkpoint, kept (default: a temporary one, removed);
    `end_offsets`: the samples of settings.end_offsets (load_end_offsets), read before Spark started."""
    if collector is None:
        collector = RunCollector(MetricsSink(settings.duration_buckets, **metrics_sink_options(settings)))
    if settings.end_offsets is not None:
        attach_end_offsets(collector, end_offsets or load_end_offsets(settings), settings.cluster)
    settings = settings.model_copy(update={"diagnosis": settings.diagnosis.with_broker_logs([i.path for i in logs])})
    collector.configure(diagnosis_settings(settings.diagnosis))
    options = query_options(settings)
    staging = tempfile.mkdtemp(prefix="rebalance-monitor-stage-")
    try:
        began = time.monotonic()
        if progress is not None:
            paths = [i.path for i in logs] + [i.path for i in offsets]
            progress.staging(len(paths), sum(_size(p) for p in paths))
        staged = stage_replay(spark, options, [log_file(i) for i in logs], [offsets_file(i) for i in offsets], staging)
        if progress is not None:
            progress.staged(sum(sum(s.rows) for s in staged), max((len(s.slices) for s in staged), default=0),
                            time.monotonic() - began)
        outputs = replay_query(spark, options, staged)
        if progress is not None:
            collector.on_progress = progress.update
        # The end-of-input batch can hold every record of the replay: written, not collected.
        collected, collector.batch_rows = collector.batch_rows, SpilledRows(os.path.join(staging, "outputs"))
        try:
            run_to_end(spark, outputs, collector, checkpoint_dir=checkpoint_dir)
        finally:
            collector.batch_rows = collected
            if progress is not None:
                progress.finish()
                collector.on_progress = None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    collector.finish()
    if out_dir:
        write_outputs(collector, out_dir)
    return collector
