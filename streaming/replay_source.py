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
                rows.append(("end-of-input", 0, None, END_OF_INPUT_TS_MS, True))
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
    """Every line of every dump as (ts, file_index, partition, offset, line_no, byte_start,
    byte_len), time-sorted.

    Records of one `__consumer_offsets` partition are in time order but a dump lists partition
    after partition, so the index restores the global order. A malformed line takes the time
    of the line before it (or after it, at the top of a file) so it is quarantined in place.
    """
    entries: list[tuple] = []
    for file_index, spec in enumerate(files):
        if spec.get("kind") == "segments":
            continue
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


def index_segments(files: list[dict]) -> tuple[list[tuple], dict, dict]:
    """Every visible record of every segment input as (ts, file_index, partition, offset,
    segment_no, batch_pos, record_index), plus {(file_index, n): Quarantined} for what could not
    be used (indexed with segment_no -1 and record_index n) and {(file_index, segment_no): path}.

    Records without a timestamp (magic 0: -1) and quarantine items take the time of the record
    before them in the same partition (the first one after it at the start of a partition)."""
    from streaming.segments import SegmentRecord, iter_offsets_dir
    entries: list[tuple] = []
    quarantined: dict = {}
    seg_paths: dict = {}
    for file_index, spec in enumerate(files):
        if spec.get("kind") != "segments":
            continue
        seg_no: dict[str, int] = {}
        last_ts: dict[int, Optional[int]] = {}
        waiting: dict[int, list] = {}
        for item in iter_offsets_dir(spec["path"]):
            if isinstance(item, SegmentRecord):
                p = item.partition
                no = seg_no.setdefault(item.file, len(seg_no))
                seg_paths[(file_index, no)] = item.file
                ts = item.timestamp if item.timestamp >= 0 else None
                if ts is None:
                    ts = last_ts.get(p)
                if ts is None:
                    waiting.setdefault(p, []).append((file_index, p, item.offset, no, item.batch_pos, item.index))
                    continue
                for w in waiting.pop(p, []):
                    entries.append((ts,) + w)
                last_ts[p] = ts
                entries.append((ts, file_index, p, item.offset, no, item.batch_pos, item.index))
            else:
                p = int(item.source_id.rsplit("-", 1)[1]) if item.source_id.rsplit("-", 1)[-1].isdigit() else -1
                n = len(quarantined)
                quarantined[(file_index, n)] = item
                entry = (file_index, p, item.seq, -1, 0, n)
                ts = item.ts_ms if item.ts_ms is not None else last_ts.get(p)
                if ts is None:
                    waiting.setdefault(p, []).append(entry)
                else:
                    entries.append((ts,) + entry)
        for p, items in waiting.items():   # nothing with a time after them in the partition
            entries.extend((last_ts.get(p) or 1,) + w for w in items)
    entries.sort()
    return entries, quarantined, seg_paths


def dump_line_to_row(source_id: str, line_no: int, raw: bytes, fallback_ts: int) -> tuple:
    """One dump line -> RAW_OFFSETS_SCHEMA row; problems go into `error`, never raise."""
    try:
        rec = parse_dump_line(raw.decode("utf-8"))
        return (source_id, line_no, rec["partition"], rec["offset"], rec["timestamp"],
                rec["key"], rec["value"], None, False, None)
    except Exception as exc:
        text = raw[:500].decode("utf-8", "replace").rstrip("\r\n")
        return (source_id, line_no, None, None, fallback_ts, None, None,
                f"{type(exc).__name__}: {exc}"[:500] + " | " + text, False, "malformed_dump_line")


class OffsetsRowReader:
    """Index of all offsets inputs (JSONL dumps and segment directories) in event-time order, and
    the rows of any slice of it."""

    def __init__(self, files: list[dict]):
        self.files = files
        dumps = index_offsets_dump(files)
        segs, self.quarantined, self.seg_paths = index_segments(files)
        self.index = dumps if not segs else sorted(dumps + segs)

    def __len__(self) -> int:
        return len(self.index)

    def rows(self, start: int, end: int) -> list[tuple]:
        from streaming.segments import BatchError, read_batch
        rows = []
        handles: dict = {}
        contents: dict = {}
        batches: dict = {}
        try:
            for ts, file_index, partition, offset, a, b, c in self.index[start:end]:
                spec = self.files[file_index]
                sid = spec["source_id"]
                if spec.get("kind") != "segments":
                    handle = handles.get(file_index) or handles.setdefault(file_index, open(spec["path"], "rb"))
                    handle.seek(b)
                    rows.append(dump_line_to_row(sid, a, handle.read(c), ts))
                    continue
                if a == -1:
                    q = self.quarantined[(file_index, c)]
                    rows.append((sid, q.seq, partition, None, ts, None, None, q.detail, False, q.reason))
                    continue
                path = self.seg_paths[(file_index, a)]
                batch = batches.get((path, b))
                if batch is None:
                    # Read just this batch (a segment can be 1 GiB; a micro-batch needs a slice).
                    handle = contents.get(path) or contents.setdefault(path, open(path, "rb"))
                    handle.seek(b)
                    head = handle.read(12)
                    length = int.from_bytes(head[8:12], "big", signed=True) if len(head) == 12 else -1
                    try:
                        if length < 0:
                            raise BatchError("RecordBatch.batchLength", b, "cannot read the batch header")
                        batch = read_batch(head + handle.read(length), 0, partition, path)
                    except (BatchError, IndexError) as e:   # the file changed under the replay
                        raise RuntimeError(f"segment {path} changed during the replay: {e}") from None
                    batches[(path, b)] = batch
                r = batch.records[c]
                rows.append((sid, r.offset, partition, r.offset, ts, r.key, r.value, None, False, None))
        finally:
            for h in list(handles.values()) + list(contents.values()):
                h.close()
        return rows


class OffsetsReplayStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict):
        self.files = json.loads(options["files"])
        self.max_rows = int(options.get("maxRowsPerBatch", DEFAULT_MAX_ROWS))
        self.reader = OffsetsRowReader(self.files)

    def initialOffset(self) -> dict:
        return {"source": "offsets", "i": 0, "eof": False}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if start["eof"]:
            return start
        allowed = _rows_allowed(limit)
        i = min(len(self.reader), start["i"] + allowed)
        # The end-of-input marker takes one row of the budget, after the last record.
        eof = i == len(self.reader) and (i - start["i"]) < allowed
        return {"source": "offsets", "i": i, "eof": eof}

    def prepareForTriggerAvailableNow(self) -> None:
        pass   # a dump does not grow during a replay

    def partitions(self, start: dict, end: dict) -> list:
        rows = self.reader.rows(start["i"], end["i"])
        if end["eof"] and not start["eof"]:
            rows.append(("end-of-input", 0, None, None, END_OF_INPUT_TS_MS, None, None, None, True, None))
        return [RowsPartition(rows)]

    def read(self, partition: RowsPartition) -> Iterator[tuple]:
        yield from partition.rows

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


def file_source_id(cluster: str, path: str) -> str:
    return f"{cluster}:{os.path.basename(os.path.normpath(path))}"


def offsets_input_kind(path: str) -> str:
    """"segments" for a directory or a `.log` segment file, "jsonl" for a dump."""
    from streaming.segments import is_segment_input
    return "segments" if is_segment_input(path) else "jsonl"
