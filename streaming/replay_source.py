"""Replay sources: captured broker logs and `__consumer_offsets` dumps as Spark streams.

Python Data Sources (`pyspark.sql.datasource`) in the shape of allisonwang-db/pyspark-data-sources:
a DataSource that names its schema and returns a DataSourceStreamReader.

Each reader emits its rows in event-time order across all of its files (a k-way merge for logs,
a sorted index for offsets dumps): a source's watermark therefore never runs ahead of rows it has
not emitted yet, and the result does not depend on how the input is cut into micro-batches
(`maxRowsPerBatch`). After the last row each reader emits one end-of-input row, which the parse
step turns into an END_OF_INPUT event far in the future so the watermark flushes held events.

Offsets are JSON and fully determine a batch: `partitions(start, end)` recomputes the rows, so a
restarted query replays the same batches. Each offset names its source kind ("broker_log" or
"offsets"): Spark's progress report echoes offsets, which is how input rows are counted per kind.
"""
from __future__ import annotations

import heapq
import json
import os
from dataclasses import dataclass
from typing import Iterator, Optional

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from streaming.offsets_decoder import parse_dump_line
from streaming.schema import END_OF_INPUT_TS_MS, RAW_LOG_SCHEMA, RAW_OFFSETS_SCHEMA
from streaming.timeutil import header_timestamp_ms, zone

LOG_SOURCE_NAME = "rebalance_log_replay"
OFFSETS_SOURCE_NAME = "rebalance_offsets_replay"
DEFAULT_MAX_ROWS = 200_000


@dataclass
class RowsPartition(InputPartition):
    rows: list


def _rows_allowed(limit: ReadLimit) -> int:
    """Rows a batch may take under Spark's admission control (AvailableNow asks for all)."""
    if isinstance(limit, ReadMaxRows):
        return max(1, int(limit.max_rows))
    return 1 << 62


# ---------------------------------------------------------------------------- broker logs
class LogMergeCursor:
    """Reads several log files line by line, merged by header timestamp.

    A line without a header (stack trace, multi-line config dump) keeps the time of the line
    before it in the same file, so it stays right behind its entry.
    """

    def __init__(self, files: list[dict]):
        self.files = files
        self.zones = [zone(f.get("tz") or "UTC") for f in files]

    def initial(self) -> dict:
        n = len(self.files)
        return {"source": "broker_log", "pos": [0] * n, "seq": [0] * n, "last_ts": [None] * n,
                "emitted": 0, "eof": False}

    def advance(self, start: dict, max_rows: int) -> tuple[list, dict]:
        pos, seq, last_ts = list(start["pos"]), list(start["seq"]), list(start["last_ts"])
        rows: list = []
        if start["eof"]:
            return rows, start
        handles = [open(f["path"], "rb") for f in self.files]
        try:
            heap: list = []

            def push(i: int) -> None:
                handles[i].seek(pos[i])
                raw = handles[i].readline()
                if not raw:
                    return
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                ts = header_timestamp_ms(line, self.zones[i])
                if ts is None:
                    # Lines before the first header get 1 ms, not 0: the first batch's
                    # watermark is 0 and Spark drops rows at or below it.
                    ts = last_ts[i] if last_ts[i] is not None else 1
                heapq.heappush(heap, (ts, i, len(raw), line))

            for i in range(len(self.files)):
                push(i)
            while heap and len(rows) < max_rows:
                ts, i, size, line = heapq.heappop(heap)
                pos[i] += size
                seq[i] += 1
                last_ts[i] = ts
                rows.append((self.files[i]["source_id"], seq[i], line, ts, False))
                push(i)
            eof = False
            if not heap and len(rows) < max_rows:
                rows.append(("end-of-input", 0, None, END_OF_INPUT_TS_MS, True))   # marker row
                eof = True
        finally:
            for h in handles:
                h.close()
        return rows, {"source": "broker_log", "pos": pos, "seq": seq, "last_ts": last_ts,
                      "emitted": start["emitted"] + len(rows), "eof": eof}


class LogReplayStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict):
        self.cursor = LogMergeCursor(json.loads(options["files"]))
        self.max_rows = int(options.get("maxRowsPerBatch", DEFAULT_MAX_ROWS))

    def initialOffset(self) -> dict:
        return self.cursor.initial()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        _, end = self.cursor.advance(start, _rows_allowed(limit))
        return end

    def prepareForTriggerAvailableNow(self) -> None:
        pass   # files do not grow during a replay: "available now" is up to end of input

    def partitions(self, start: dict, end: dict) -> list:
        rows, reached = self.cursor.advance(start, end["emitted"] - start["emitted"])
        if reached["emitted"] != end["emitted"]:
            raise RuntimeError("log files changed under a replay (offsets no longer reproducible)")
        return [RowsPartition(rows)]

    def read(self, partition: RowsPartition) -> Iterator[tuple]:
        yield from partition.rows

    def commit(self, end: dict) -> None:
        pass


class LogReplaySource(DataSource):
    """options: files = JSON list of {path, source_id, tz}; maxRowsPerBatch."""

    @classmethod
    def name(cls) -> str:
        return LOG_SOURCE_NAME

    def schema(self):
        return RAW_LOG_SCHEMA

    def streamReader(self, schema) -> DataSourceStreamReader:
        return LogReplayStreamReader(self.options)


# ---------------------------------------------------------------------------- offsets dumps
def index_offsets_dump(files: list[dict]) -> list[tuple]:
    """Every line of every dump as (ts, file_index, line_no, byte_start, byte_len), time-sorted.

    Records of one `__consumer_offsets` partition are in time order but a dump lists partition
    after partition, so the index restores the global order. A malformed line takes the time
    of the line before it (or after it, at the top of a file) so it is quarantined in place.
    """
    entries: list[tuple] = []
    for file_index, spec in enumerate(files):
        pending: list[list] = []   # malformed lines waiting for a time
        last_ts: Optional[int] = None
        start = 0
        with open(spec["path"], "rb") as handle:
            for line_no, raw in enumerate(handle, start=1):
                size = len(raw)
                if not raw.strip():      # blank lines carry nothing (the decoder skips them too)
                    start += size
                    continue
                ts: Optional[int] = None
                partition = offset = -1
                try:
                    rec = parse_dump_line(raw.decode("utf-8"))
                    ts, partition, offset = rec["timestamp"], rec["partition"], rec["offset"]
                except Exception:
                    ts = None
                if ts is None:
                    if last_ts is None:
                        pending.append([line_no, start, size])
                    else:
                        entries.append((last_ts, file_index, -1, -1, line_no, start, size))
                else:
                    for p_line, p_start, p_size in pending:
                        entries.append((ts, file_index, -1, -1, p_line, p_start, p_size))
                    pending = []
                    last_ts = ts
                    entries.append((ts, file_index, partition, offset, line_no, start, size))
                start += size
        for p_line, p_start, p_size in pending:   # a file with no good line at all
            entries.append((1, file_index, -1, -1, p_line, p_start, p_size))
    entries.sort()
    return entries


def dump_line_to_row(source_id: str, line_no: int, raw: bytes, fallback_ts: int) -> tuple:
    """One dump line -> RAW_OFFSETS_SCHEMA row; problems go into `error`, never raise."""
    try:
        rec = parse_dump_line(raw.decode("utf-8"))
        return (source_id, line_no, rec["partition"], rec["offset"], rec["timestamp"],
                rec["key"], rec["value"], None, False)
    except Exception as exc:
        text = raw[:500].decode("utf-8", "replace").rstrip("\r\n")
        return (source_id, line_no, None, None, fallback_ts, None, None,
                f"{type(exc).__name__}: {exc}"[:500] + " | " + text, False)


class OffsetsReplayStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict):
        self.files = json.loads(options["files"])
        self.max_rows = int(options.get("maxRowsPerBatch", DEFAULT_MAX_ROWS))
        self.index = index_offsets_dump(self.files)

    def initialOffset(self) -> dict:
        return {"source": "offsets", "i": 0, "eof": False}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if start["eof"]:
            return start
        allowed = _rows_allowed(limit)
        i = min(len(self.index), start["i"] + allowed)
        # The end-of-input marker takes one row of the budget, after the last record.
        eof = i == len(self.index) and (i - start["i"]) < allowed
        return {"source": "offsets", "i": i, "eof": eof}

    def prepareForTriggerAvailableNow(self) -> None:
        pass   # a dump does not grow during a replay

    def partitions(self, start: dict, end: dict) -> list:
        rows = []
        handles = {}
        try:
            for ts, file_index, _, _, line_no, byte_start, size in self.index[start["i"]:end["i"]]:
                spec = self.files[file_index]
                handle = handles.get(file_index) or handles.setdefault(file_index, open(spec["path"], "rb"))
                handle.seek(byte_start)
                rows.append(dump_line_to_row(spec["source_id"], line_no, handle.read(size), ts))
        finally:
            for h in handles.values():
                h.close()
        if end["eof"] and not start["eof"]:
            rows.append(("end-of-input", 0, None, None, END_OF_INPUT_TS_MS, None, None, None, True))
        return [RowsPartition(rows)]

    def read(self, partition: RowsPartition) -> Iterator[tuple]:
        yield from partition.rows

    def commit(self, end: dict) -> None:
        pass


class OffsetsReplaySource(DataSource):
    """options: files = JSON list of {path, source_id}; maxRowsPerBatch."""

    @classmethod
    def name(cls) -> str:
        return OFFSETS_SOURCE_NAME

    def schema(self):
        return RAW_OFFSETS_SCHEMA

    def streamReader(self, schema) -> DataSourceStreamReader:
        return OffsetsReplayStreamReader(self.options)


def file_source_id(cluster: str, path: str) -> str:
    return f"{cluster}:{os.path.basename(path)}"
