"""The replay source of broker log files (a Python Data Source): the kept lines of the files in
event-time order (streaming/logs/merge.py), then one end-of-input row.

Offsets are JSON and fully determine a batch: `partitions(start, end)` recomputes the rows, so a
restarted query replays the same batches. Each offset names its source kind ("broker_log"):
Spark's progress report echoes offsets, which is how input rows are counted per kind.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, cast

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from streaming.logs.merge import LogMergeCursor
from streaming.rows import RAW_LOG_ARROW_SCHEMA
from streaming.spark.schema import RAW_LOG_SCHEMA
from streaming.spark.sources.base import RowsPartition, arrow_batches, rows_allowed
from streaming.spark.worker_gc import freeze_worker_heap

LOG_SOURCE_NAME = "rebalance_log_replay"


def split_rows(rows: list, parts: int) -> list:
    """Contiguous slices for `parts` partitions (order inside a batch does not matter downstream:
    the stateful step sorts every group's events)."""
    parts = max(1, min(parts, len(rows)))
    size = -(-len(rows) // parts) if rows else 0
    return [RowsPartition(rows[k * size:(k + 1) * size]) for k in range(parts)] or [RowsPartition([])]


class LogReplayStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, str]):   # case-insensitive: keep it as given
        self.cursor = LogMergeCursor(json.loads(options["files"]))
        self.max_rows = int(options["maxRowsPerBatch"])
        self.num_partitions = int(options["numPartitions"])
        self._cached: tuple[str, list, dict] | None = None   # latestOffset -> partitions

    def initialOffset(self) -> dict:
        return self.cursor.initial()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        rows, end = self.cursor.advance(start, rows_allowed(limit))
        self._cached = (json.dumps(start, sort_keys=True), rows, end)
        return end

    def prepareForTriggerAvailableNow(self) -> None:
        pass   # files do not grow during a replay: "available now" is up to end of input

    def partitions(self, start: dict, end: dict) -> list:
        cached = self._cached
        if cached is not None and cached[0] == json.dumps(start, sort_keys=True) and cached[2] == end:
            rows = cached[1]
        else:
            rows, reached = self.cursor.advance(start, end["emitted"] - start["emitted"])
            if reached["emitted"] != end["emitted"] or reached["pos"] != end["pos"]:
                raise RuntimeError("log files changed under a replay (offsets no longer reproducible)")
        self._cached = None
        return split_rows(rows, self.num_partitions)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        freeze_worker_heap()
        # This reader's partitions carry their rows.
        yield from arrow_batches(cast(RowsPartition, partition).rows, RAW_LOG_ARROW_SCHEMA)

    def commit(self, end: dict) -> None:
        pass


class LogReplaySource(DataSource):
    """options: files = JSON list of {path, source_id, tz, envelope}; maxRowsPerBatch (kept lines
    per micro-batch); numPartitions."""

    @classmethod
    def name(cls) -> str:
        return LOG_SOURCE_NAME

    def schema(self):
        return RAW_LOG_SCHEMA

    def streamReader(self, schema) -> DataSourceStreamReader:
        return LogReplayStreamReader(self.options)
