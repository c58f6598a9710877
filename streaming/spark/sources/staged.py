"""The second stage of a replay (streaming/spark/replay_stage.py): the staged event rows of one
input kind as a stream (a Python Data Source), one time slice per micro-batch.

Every kind's source is cut at the same times, and each takes exactly one slice per micro-batch,
so micro-batch i holds the events of slice i of every kind and no later batch holds an earlier
event: the watermark never passes an event that is still to come, whatever order the input files
were in. The last slice's batch also carries the end-of-input marker that flushes held events.

Offsets: {"source": kind, "i": slices read, "lines": input lines or records counted so far (the
kind's total spread over the slices by their rows), "of": the kind's total, "eof"}.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from state.events import END_OF_INPUT
from streaming.rows import COMPLETE_THROUGH, EVENT_SOURCE_ARROW_SCHEMA, marker_row, rows_to_arrow
from streaming.spark.schema import STAGED_EVENT_SCHEMA
from streaming.spark.sources.base import event_batches
from streaming.spark.worker_gc import freeze_worker_heap

STAGED_SOURCE_NAME = "rebalance_staged_events"


@dataclass
class SlicePartition(InputPartition):
    paths: list            # Parquet files of the slice (none: the kind has no event in it)
    marker_source: str     # with a source ("log" | "offsets"): end the read with its end-of-input marker
    complete_through: int | None = None   # the slice's COMPLETE_THROUGH (replay_stage.py)


class StagedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, str]):   # case-insensitive: keep it as given
        self.kind = options["kind"]
        self.event_source = options["eventSource"]
        self.slices: list[list[str]] = json.loads(options["slices"])
        self.rows: list[int] = json.loads(options["rows"])
        self.inputs = int(options["inputs"])
        self.complete_through: list[int | None] = json.loads(options.get("completeThrough") or "[]")

    def _offset(self, i: int) -> dict:
        total = sum(self.rows)
        done = sum(self.rows[:i])
        lines = self.inputs if i >= len(self.slices) else (self.inputs * done // total if total else 0)
        return {"source": self.kind, "i": i, "lines": lines, "of": self.inputs, "eof": i >= len(self.slices)}

    def initialOffset(self) -> dict:
        return self._offset(0)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(1)     # not rows: a slice per micro-batch, always

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return start if start["eof"] else self._offset(start["i"] + 1)

    def prepareForTriggerAvailableNow(self) -> None:
        pass   # staged slices do not grow

    def partitions(self, start: dict, end: dict) -> list:
        through = self.complete_through[end["i"] - 1] if start["i"] < end["i"] <= len(self.complete_through) else None
        parts = [SlicePartition([p for i in range(start["i"], end["i"]) for p in self.slices[i]], "", through)]
        if end["eof"] and not start["eof"]:
            parts[-1].marker_source = self.event_source
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow.parquet as pq
        freeze_worker_heap()
        assert isinstance(partition, SlicePartition)
        for path in partition.paths:
            for batch in event_batches(_events_only(pq.ParquetFile(path).iter_batches(batch_size=50_000))):
                yield _with_complete_through(batch, partition.complete_through)
        if partition.marker_source:
            marker = rows_to_arrow([marker_row(partition.marker_source, None)], EVENT_SOURCE_ARROW_SCHEMA)
            yield _with_complete_through(marker, partition.complete_through)

    def commit(self, end: dict) -> None:
        pass


def _events_only(batches: Iterator[Any]) -> Iterator[Any]:
    """A one-slice replay reads its files as the first stage wrote them, with each read's count row
    (kind end_of_input, replay_stage.py): the stream's own end-of-input marker is the one it needs."""
    import pyarrow.compute as pc
    for batch in batches:
        is_end = pc.fill_null(pc.equal(batch.column("kind"), END_OF_INPUT), False)
        yield batch.filter(pc.invert(is_end)) if pc.any(is_end).as_py() else batch


def _with_complete_through(batch: Any, through: int | None) -> Any:
    import pyarrow as pa
    return batch.append_column(pa.field(COMPLETE_THROUGH, pa.int64()),
                               pa.repeat(pa.scalar(through, pa.int64()), batch.num_rows))


class StagedSource(DataSource):
    """options: kind (broker_log | offsets), eventSource (log | offsets), slices (JSON list of
    Parquet file lists, one per slice), rows (JSON list of event rows per slice), inputs,
    completeThrough (JSON list, per slice: replay_stage.py StagedKind.complete_through)."""

    @classmethod
    def name(cls) -> str:
        return STAGED_SOURCE_NAME

    def schema(self):
        return STAGED_EVENT_SCHEMA

    def streamReader(self, schema) -> DataSourceStreamReader:
        return StagedStreamReader(self.options)
