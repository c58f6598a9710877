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

from streaming.logs.parser import COORDINATOR_LOGGER_MARKERS
from streaming.logs.envelope import EMBEDDED_HEADER_RE, ENVELOPE_AUTO, is_json_row
from streaming.offsets.decoder import parse_dump_line
from streaming.spark.schema import END_OF_INPUT_TS_MS, RAW_LOG_SCHEMA, RAW_OFFSETS_SCHEMA
from streaming.logs.timeutil import header_timestamp_ms, log4j_to_epoch_ms, zone

LOG_SOURCE_NAME = "rebalance_log_replay"
OFFSETS_SOURCE_NAME = "rebalance_offsets_replay"
DEFAULT_MAX_ROWS = 200_000
DEFAULT_PARTITIONS = 2     # parse runs in this many tasks per micro-batch


@dataclass
class RowsPartition(InputPartition):
    rows: list


def _rows_allowed(limit: ReadLimit) -> int:
    """Rows a batch may take under Spark's admission control (AvailableNow asks for all)."""
    if isinstance(limit, ReadMaxRows):
        return max(1, int(limit.max_rows))
    return 1 << 62


# ---------------------------------------------------------------------------- broker logs
# Every coordinator marker (COORDINATOR_LOGGER_MARKERS) contains this core: one bytes.find pass
# finds candidate lines, which are then checked against the markers themselves.
_MARKER_CORE = b"kafka.coordinator."
# Each marker as (bytes before the core, bytes after it), checked in place around a core hit.
_MARKER_PARTS = tuple((m.encode()[:m.encode().index(_MARKER_CORE)],
                       m.encode()[m.encode().index(_MARKER_CORE) + len(_MARKER_CORE):])
                      for m in COORDINATOR_LOGGER_MARKERS)
CHUNK_BYTES = 8 << 20


def _line_ts(line: str, tz, json_row: bool) -> Optional[int]:
    """Header time of a plain line, or of the log4j line inside a JSON envelope row."""
    if not json_row:
        return header_timestamp_ms(line, tz)
    m = EMBEDDED_HEADER_RE.search(line)
    if m is None:
        return None
    try:
        return log4j_to_epoch_ms(m.group(1), tz)
    except ValueError:
        return None


class _KeptLines:
    """The lines of one file that may be group-coordinator lines, read in large chunks.

    Only lines containing a coordinator marker are decoded (or every line with keep_all); the
    rest are counted with bytes.count and skipped. Each kept line gets its header time, or, for
    a line without a header, the time of the nearest header line before it in the file (1 before
    the first header), exactly as if every line had been read.
    """

    def __init__(self, path: str, pos: int, line_no: int, carry_ts: Optional[int], tz, envelope: str,
                 keep_all: bool = False):
        self.handle = open(path, "rb")
        self.handle.seek(pos)
        self.tz, self.envelope, self.keep_all = tz, envelope, keep_all
        self.buf = b""
        self.end = 0                # buf[:end] is the current chunk (whole lines); the rest is reread
        self.buf_pos = pos          # file offset of buf[0]
        self.cursor = 0             # index in buf of the first line not yet counted
        self.line_no = line_no      # lines counted up to buf_pos + cursor
        self.carry_ts = carry_ts    # header time in force at buf[0]
        self.mark = (0, carry_ts)   # (index, time of the nearest header line starting before index)
        self.eof = False

    def close(self) -> None:
        self.handle.close()

    def _refill(self) -> bool:
        """Next chunk, cut after its last newline. The current buffer must be fully counted."""
        if self.end:
            self.carry_ts = self._header_ts_before(self.end)
        self.buf_pos += self.end
        self.buf, self.cursor, self.end = b"", 0, 0
        self.mark = (0, self.carry_ts)
        if self.eof:
            return False
        data = self.handle.read(CHUNK_BYTES)
        if not data:
            self.eof = True
            return False
        cut = data.rfind(b"\n")
        while cut < 0:                        # a line longer than a chunk: keep reading
            more = self.handle.read(CHUNK_BYTES)
            if not more:                      # last line without a newline
                data += b"\n"
                self.eof = True
                cut = len(data) - 1
                break
            data += more
            cut = data.rfind(b"\n")
        if not self.eof:
            self.handle.seek(self.buf_pos + cut + 1)
        self.buf, self.end = data, cut + 1     # no copy: searches are bounded by `end`
        return True

    def _header_ts_before(self, index: int) -> Optional[int]:
        """Time of the nearest header line that starts before `index` (a line start) in buf.

        Scans backwards line by line down to the last position already answered (`mark`), so the
        scans of one buffer cost O(buffer) in total.
        """
        mark_index, mark_ts = self.mark
        end = index
        result = mark_ts
        while end > mark_index:
            start = self.buf.rfind(b"\n", 0, end - 1) + 1
            if start < mark_index:
                break
            line = self.buf[start:end].decode("utf-8", errors="replace").rstrip("\r\n")
            ts = _line_ts(line, self.tz, is_json_row(line, self.envelope))
            if ts is not None:
                result = ts
                break
            end = start
        self.mark = (index, result)
        return result

    def _next_hit(self) -> int:
        """Index of a byte inside the next line (from cursor) to keep, or -1 if none in buf."""
        if self.keep_all:
            return self.cursor if self.cursor < self.end else -1
        buf, at, end_of_chunk = self.buf, self.cursor, self.end
        core = len(_MARKER_CORE)
        while True:
            hit = buf.find(_MARKER_CORE, at, end_of_chunk)
            if hit < 0:
                return -1
            for before, after in _MARKER_PARTS:
                if buf.startswith(after, hit + core) and (
                        not before or (hit >= len(before) and buf.startswith(before, hit - len(before)))):
                    return hit
            at = hit + 1          # e.g. kafka.coordinator.transaction.*: not a group coordinator

    def next(self) -> Optional[tuple[int, int, str, int]]:
        """(ts_ms, line number, line, file offset after the line) of the next kept line, or None."""
        while True:
            hit = self._next_hit()
            if hit >= 0:
                break
            self.line_no += self.buf.count(b"\n", self.cursor, self.end)
            self.cursor = self.end
            if not self._refill():
                return None
        buf = self.buf
        start = buf.rfind(b"\n", 0, hit) + 1
        end = buf.find(b"\n", hit)
        self.line_no += buf.count(b"\n", self.cursor, start) + 1
        self.cursor = end + 1
        line = buf[start:end].decode("utf-8", errors="replace").rstrip("\r\n")
        ts = _line_ts(line, self.tz, is_json_row(line, self.envelope))
        if ts is None:
            ts = self._header_ts_before(start)
            if ts is None:
                # Lines before the first header get 1 ms, not 0: the first batch's watermark
                # is 0 and Spark drops rows at or below it.
                ts = 1
        else:
            self.mark = (self.cursor, ts)
        return ts, self.line_no, line, self.buf_pos + self.cursor

    def count_rest(self) -> int:
        """Count the lines left in the file (consumes it); returns the final line number."""
        while True:
            self.line_no += self.buf.count(b"\n", self.cursor, self.end)
            self.cursor = self.end
            if not self._refill():
                return self.line_no


class LogMergeCursor:
    """Merges several log files by header time, emitting only lines that may be coordinator lines.

    Each batch is the next `max_rows` kept lines in event-time order across all files (a k-way
    merge). A line without a header (stack trace, multi-line config dump) keeps the time of the
    header line before it in the same file, so it stays right behind its entry. Lines without a
    coordinator marker are counted (offset field `lines`, which the driver reports as input rows)
    but never decoded or emitted: the JVM filter would drop them anyway.
    """

    def __init__(self, files: list[dict], keep_all: bool = False):
        self.files = files
        self.zones = [zone(f.get("tz") or "UTC") for f in files]
        self.envelopes = [f.get("envelope") or ENVELOPE_AUTO for f in files]
        self.keep_all = keep_all

    def initial(self) -> dict:
        n = len(self.files)
        return {"source": "broker_log", "pos": [0] * n, "seq": [0] * n, "last_ts": [None] * n,
                "lines": 0, "emitted": 0, "eof": False}

    def advance(self, start: dict, max_rows: int) -> tuple[list, dict]:
        pos, seq, last_ts = list(start["pos"]), list(start["seq"]), list(start["last_ts"])
        lines = int(start.get("lines", 0))
        rows: list = []
        if start["eof"]:
            return rows, start
        scanners = [_KeptLines(f["path"], pos[i], seq[i], last_ts[i], self.zones[i], self.envelopes[i],
                               self.keep_all) for i, f in enumerate(self.files)]
        try:
            heap: list = []
            for i, scanner in enumerate(scanners):
                item = scanner.next()
                if item is not None:
                    heap.append((item[0], i, item))
            heapq.heapify(heap)
            while heap and len(rows) < max_rows:
                ts, i, (_, line_no, line, after) = heapq.heappop(heap)
                lines += line_no - seq[i]
                pos[i], seq[i], last_ts[i] = after, line_no, ts
                rows.append((self.files[i]["source_id"], line_no, line, ts, False))
                item = scanners[i].next()
                if item is not None:
                    heapq.heappush(heap, (item[0], i, item))
            eof = False
            if not heap and len(rows) < max_rows:
                for i, scanner in enumerate(scanners):   # the lines after the last kept line
                    total = scanner.count_rest()
                    lines += total - seq[i]
                    seq[i] = total
                    pos[i] = os.path.getsize(self.files[i]["path"])
                rows.append(("end-of-input", 0, None, END_OF_INPUT_TS_MS, True))
                eof = True
        finally:
            for scanner in scanners:
                scanner.close()
        return rows, {"source": "broker_log", "pos": pos, "seq": seq, "last_ts": last_ts,
                      "lines": lines, "emitted": start["emitted"] + len(rows), "eof": eof}


def split_rows(rows: list, parts: int) -> list:
    """Contiguous slices for `parts` partitions (order inside a batch does not matter downstream:
    the stateful step sorts every group's events)."""
    parts = max(1, min(parts, len(rows)))
    size = -(-len(rows) // parts) if rows else 0
    return [RowsPartition(rows[k * size:(k + 1) * size]) for k in range(parts)] or [RowsPartition([])]


class LogReplayStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict):
        self.cursor = LogMergeCursor(json.loads(options["files"]))
        self.max_rows = int(options.get("maxRowsPerBatch", DEFAULT_MAX_ROWS))
        self.num_partitions = int(options.get("numPartitions", DEFAULT_PARTITIONS))
        self._cached: Optional[tuple[str, list, dict]] = None   # latestOffset -> partitions

    def initialOffset(self) -> dict:
        return self.cursor.initial()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        rows, end = self.cursor.advance(start, _rows_allowed(limit))
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

    def read(self, partition: RowsPartition) -> Iterator:
        # One Arrow batch per chunk instead of tuples: PySpark converts tuples value by value.
        for start in range(0, len(partition.rows), ARROW_BATCH_ROWS):
            yield rows_to_arrow(partition.rows[start:start + ARROW_BATCH_ROWS], _raw_log_arrow_schema())

    def commit(self, end: dict) -> None:
        pass


ARROW_BATCH_ROWS = 10_000
_ARROW_SCHEMAS: dict = {}


def _raw_log_arrow_schema():
    schema = _ARROW_SCHEMAS.get("log")
    if schema is None:
        from pyspark.sql.pandas.types import to_arrow_schema
        schema = _ARROW_SCHEMAS["log"] = to_arrow_schema(RAW_LOG_SCHEMA, timezone="UTC")
    return schema


def rows_to_arrow(rows: list, schema):
    """Rows (tuples in schema order) -> one pyarrow.RecordBatch with exactly `schema`."""
    import pyarrow as pa
    columns = list(zip(*rows)) if rows else [[] for _ in schema]
    return pa.RecordBatch.from_arrays([pa.array(col, type=field.type) for col, field in zip(columns, schema)],
                                      schema=schema)


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
    from streaming.offsets.segments import SegmentRecord, iter_offsets_dir
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
        from streaming.offsets.segments import BatchError, read_batch
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


def file_source_ids(inputs: list[tuple[str, str]]) -> list[str]:
    """"<cluster>:<name>" per (cluster, path) input of a replay, one per distinct file.

    The name is the file's base name, or as many trailing path components as it takes to tell
    files with the same base name apart (`broker1/server.log`, `broker2/server.log`): the source
    id keys the per-file settings (--broker-id, time zone), the clock-skew series and the event
    order, so two files must never share one.
    """
    parts = [os.path.normpath(os.path.abspath(path)).split(os.sep) for _, path in inputs]
    depth = [1] * len(inputs)

    def ids() -> list[str]:
        return [f"{cluster}:{'/'.join(p[-d:])}" for (cluster, _), p, d in zip(inputs, parts, depth)]

    while True:
        current = ids()
        grew = False
        for i, sid in enumerate(current):
            clash = any(sid == other and parts[i] != parts[j] for j, other in enumerate(current) if j != i)
            if clash and depth[i] < len(parts[i]):
                depth[i] += 1
                grew = True
        if not grew:
            return current


def offsets_input_kind(path: str) -> str:
    """"segments" for a directory or a `.log` segment file, "jsonl" for a dump."""
    from streaming.offsets.segments import is_segment_input
    return "segments" if is_segment_input(path) else "jsonl"
