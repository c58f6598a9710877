"""The replay source of `__consumer_offsets` inputs (a Python Data Source): every record of the
JSONL dumps and segment directories in record-time order (streaming/offsets/reader.py), then one
end-of-input row. Offsets ({"i": index}) fully determine a batch; "of" (the number of records) is
for the replay's progress line."""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, cast

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from streaming.offsets.reader import OffsetsRowReader
from streaming.rows import END_OF_INPUT_TS_MS
from streaming.spark.schema import RAW_OFFSETS_SCHEMA
from streaming.spark.sources.base import RowsPartition, rows_allowed
from streaming.spark.worker_gc import freeze_worker_heap

OFFSETS_SOURCE_NAME = "rebalance_offsets_replay"


class OffsetsReplayStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, str]):   # case-insensitive: keep it as given
        self.files = json.loads(options["files"])
        self.max_rows = int(options["maxRowsPerBatch"])
        self.reader = OffsetsRowReader(self.files)

    def initialOffset(self) -> dict:
        return {"source": "offsets", "i": 0, "of": len(self.reader), "eof": False}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if start["eof"]:
            return start
        allowed = rows_allowed(limit)
        i = min(len(self.reader), start["i"] + allowed)
        # The end-of-input marker takes one row of the budget, after the last record.
        eof = i == len(self.reader) and (i - start["i"]) < allowed
        return {"source": "offsets", "i": i, "of": len(self.reader), "eof": eof}

    def prepareForTriggerAvailableNow(self) -> None:
        pass   # a dump does not grow during a replay

    def partitions(self, start: dict, end: dict) -> list:
        rows = self.reader.rows(start["i"], end["i"])
        if end["eof"] and not start["eof"]:
            rows.append(("end-of-input", 0, None, None, END_OF_INPUT_TS_MS, None, None, None, True, None))
        return [RowsPartition(rows)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        freeze_worker_heap()
        yield from cast(RowsPartition, partition).rows   # this reader's partitions carry their rows

    def commit(self, end: dict) -> None:
        pass


class OffsetsReplaySource(DataSource):
    """options: files = JSON list of {path, source_id, kind: "jsonl" | "segments"}; maxRowsPerBatch."""

    @classmethod
    def name(cls) -> str:
        return OFFSETS_SOURCE_NAME

    def schema(self):
        return RAW_OFFSETS_SCHEMA

    def streamReader(self, schema) -> DataSourceStreamReader:
        return OffsetsReplayStreamReader(self.options)
