"""The replay's input files read by Spark's tasks (Python Data Sources, batch): the first stage of a
replay (streaming/spark/replay_stage.py).

The driver only plans: one read per broker log file, one per slice of a `__consumer_offsets` dump
(cut at line starts, about SLICE_BYTES each, with the line number it starts at), one per segment
directory. Each task opens its file, keeps the coordinator lines or reads the records (raw rows,
streaming/rows.py), and parses or decodes them itself with the functions of the live query's
steps (streaming/logs/step.py, streaming/offsets/vectorised/): it yields event rows. Parsing in
a separate mapInArrow step would send every raw row into the JVM and back out to Python again,
which cost the JVM more than the whole parse (docs/design.md, "Replay in two stages").

Each read ends with one end-of-input marker whose `seq` is the number of input lines or records
it read: the replay counts its input from them.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from streaming.logs.envelope import ENVELOPE_AUTO, is_json_row
from streaming.logs.merge import KeptLines, file_shape, line_ts
from streaming.logs.step import LogSourceSpec, replay_rows_to_events
from streaming.logs.timeutil import zone
from streaming.offsets.dump_arrow import dump_slice_batch
from streaming.offsets.reader import dump_line_to_row, timed_segment_items
from streaming.offsets.segments import SegmentRecord
from streaming.offsets.vectorised import offsets_arrow_to_events
from streaming.rows import END_OF_INPUT_TS_MS, RAW_OFFSETS_ARROW_SCHEMA, rows_to_arrow
from streaming.spark.schema import EVENT_SCHEMA
from streaming.spark.sources.base import arrow_batches, event_batches
from streaming.spark.worker_gc import freeze_worker_heap

LOG_FILES_SOURCE = "rebalance_log_files"
OFFSETS_FILES_SOURCE = "rebalance_offsets_files"
# A dump is read in slices of about this many bytes, so a large dump keeps every core busy.
SLICE_BYTES = 32 << 20
_COUNT_BLOCK = 8 << 20
_ARROW_ROWS = 50_000     # rows per Arrow batch of a column-wide dump read


@dataclass
class FileRead(InputPartition):
    """One read task: a whole log file or segment input, or the bytes [start, end) of a dump
    whose first line is line `line` (1-based)."""
    kind: str              # "broker_log" | "jsonl" | "segments"
    path: str              # absolute: executors do not run in the driver's working directory
    source_id: str
    tz: str = "UTC"
    envelope: str = ENVELOPE_AUTO
    full_names: bool = True         # merge.FileShape of the log file
    wrapped: bool = True
    start: int = 0
    end: int = -1
    line: int = 1
    carry_ts: int | None = None     # a log slice: the header time in force at `start`


# Counts started ahead (plan_ahead): (absolute path, slice_bytes, size, mtime_ns) -> their slices.
_AHEAD: dict[tuple[str, int, int, int], Future] = {}


def _file_key(path: str, slice_bytes: int) -> tuple[str, int, int, int]:
    st = os.stat(path)
    return os.path.abspath(path), slice_bytes, st.st_size, st.st_mtime_ns


def plan_ahead(paths: Iterable[str], slice_bytes: int = SLICE_BYTES) -> None:
    """Start cutting these files into slices (line_slices) on a thread of their own. The replay
    calls it before its Spark session starts: counting the newlines of a day's dump took its driver
    0.7-2.9 s, alone, after the JVM's start, which leaves the driver's thread waiting. Best effort:
    a path that cannot be read now is cut (and its error raised) when the plan asks for it."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-plan")
    for path in paths:
        try:
            key = _file_key(path, slice_bytes)
        except OSError:
            continue
        if os.path.isfile(path) and key not in _AHEAD:
            _AHEAD[key] = pool.submit(_count_slices, path, slice_bytes)
    pool.shutdown(wait=False)


def line_slices(path: str, slice_bytes: int = SLICE_BYTES) -> list[tuple[int, int, int]]:
    """A file cut at line starts into (start, end, first line number) of about slice_bytes each:
    the cut plan_ahead started, if the file is unchanged since, else cut now."""
    try:
        ahead = _AHEAD.pop(_file_key(path, slice_bytes), None)
    except OSError:
        ahead = None
    if ahead is not None:
        try:
            return ahead.result()
        except OSError:
            pass        # cut again below, which raises the error where the plan expects it
    return _count_slices(path, slice_bytes)


def _count_slices(path: str, slice_bytes: int) -> list[tuple[int, int, int]]:
    """line_slices' work: newlines counted block by block (bytes.count, no decoding)."""
    size = os.path.getsize(path)
    slices: list[tuple[int, int, int]] = []
    start, line = 0, 1                  # the slice being cut
    pos, lines_before = 0, 0            # file offset of the block, newlines before it
    next_cut = slice_bytes
    with open(path, "rb") as handle:
        while block := handle.read(_COUNT_BLOCK):
            while next_cut < pos + len(block):
                nl = block.find(b"\n", max(next_cut - pos, 0))
                if nl < 0:
                    break               # the line goes on in the next block: cut at its end there
                cut = pos + nl + 1
                if cut < size:
                    slices.append((start, cut, line))
                    start, line = cut, lines_before + block.count(b"\n", 0, nl + 1) + 1
                next_cut = cut + slice_bytes
            lines_before += block.count(b"\n")
            pos += len(block)
    slices.append((start, size, line))
    return slices


def dump_slices(path: str, source_id: str, slice_bytes: int = SLICE_BYTES) -> list[FileRead]:
    """A dump's reads, one per slice of about slice_bytes (line_slices)."""
    return [FileRead("jsonl", path, source_id, start=a, end=b, line=n) for a, b, n in line_slices(path, slice_bytes)]


def header_time_before(path: str, offset: int, tz: str, envelope: str) -> int | None:
    """The time of the last line before `offset` (a line start) that has one: what a continuation
    line at `offset` inherits (merge.py KeptLines). Reads backwards, 64 KB at a time."""
    zone_ = zone(tz)
    with open(path, "rb") as handle:
        end, tail = offset, b""
        while end > 0:
            start = max(0, end - (64 << 10))
            handle.seek(start)
            lines = (handle.read(end - start) + tail).split(b"\n")
            # Unless the block starts the file, its first piece may be part of a line: keep it for the next round.
            tail, complete = (b"", lines) if start == 0 else (lines[0], lines[1:])
            for raw in reversed(complete):
                line = raw.decode("utf-8", errors="replace").rstrip("\r")
                if line:
                    ts = line_ts(line, zone_, is_json_row(line, envelope))
                    if ts is not None:
                        return ts
            end = start
    return None


def plan_log_reads(files: list[dict], slice_bytes: int = SLICE_BYTES) -> list[FileRead]:
    """files: {path, source_id, tz, envelope} per broker log file. A file of more than slice_bytes
    is read in slices (cut at line starts, each with the header time in force where it starts), so
    one large file keeps every core parsing."""
    reads = []
    for f in files:
        envelope = f.get("envelope") or ENVELOPE_AUTO
        tz = f.get("tz") or "UTC"
        path = os.path.abspath(f["path"])
        shape = file_shape(path, envelope)
        for a, b, n in line_slices(path, slice_bytes):
            reads.append(FileRead("broker_log", path, f["source_id"], tz=tz, envelope=envelope,
                                  full_names=shape.full_names, wrapped=shape.wrapped, start=a, end=b, line=n,
                                  carry_ts=header_time_before(path, a, tz, envelope) if a else None))
    return reads


def plan_offsets_reads(files: list[dict], slice_bytes: int = SLICE_BYTES) -> list[FileRead]:
    """files: {path, source_id, kind: "jsonl" | "segments"}."""
    reads: list[FileRead] = []
    for f in files:
        path = os.path.abspath(f["path"])     # executors do not run in the driver's directory
        if f.get("kind") == "segments":
            reads.append(FileRead("segments", path, f["source_id"]))
        else:
            reads.extend(dump_slices(path, f["source_id"], slice_bytes))
    return reads


def read_log_file(r: FileRead) -> Iterator[tuple]:
    """Raw log rows (source_id, line number, line, time, eof) of the kept lines of a log file or
    slice, then the count row (the lines it read)."""
    lines = KeptLines(r.path, r.start, r.line - 1, r.carry_ts, zone(r.tz), r.envelope, full_names=r.full_names,
                       end=None if r.end < 0 else r.end, wrapped=r.wrapped)
    try:
        while (item := lines.next()) is not None:
            ts, line_no, line = item[:3]
            yield r.source_id, line_no, line, ts, False
        total = lines.count_rest()
    finally:
        lines.close()
    yield r.source_id, total - (r.line - 1), None, END_OF_INPUT_TS_MS, True


def _slice_bytes(r: FileRead) -> bytes:
    with open(r.path, "rb") as handle:
        handle.seek(r.start)
        return handle.read(r.end - r.start)


def _count_row(r: FileRead, count: int) -> tuple:
    return r.source_id, count, None, None, END_OF_INPUT_TS_MS, None, None, None, True, None


def read_dump_slice(r: FileRead, data: bytes | None = None) -> Iterator[tuple]:
    """Raw offsets rows of a dump slice, line by line, then the count row (its non-blank lines). A
    malformed line takes the time of the line before it, or of the first good line after it at
    the slice's top (at the file's top: the reference reader, streaming/offsets/reader.py)."""
    pending: list[tuple[int, bytes]] = []
    last_ts: int | None = None
    count = 0
    data = _slice_bytes(r) if data is None else data
    line_no = r.line - 1
    for raw in data.split(b"\n"):
        line_no += 1
        if not raw.strip():
            continue
        count += 1
        row = dump_line_to_row(r.source_id, line_no, raw, last_ts if last_ts is not None else 1)
        if row[7] is not None and last_ts is None:     # malformed before any time in the slice
            pending.append((line_no, raw))
            continue
        if row[7] is None:
            if pending:
                yield from (dump_line_to_row(r.source_id, n, p, row[4]) for n, p in pending)
                pending = []
            last_ts = row[4]
        yield row
    yield from (dump_line_to_row(r.source_id, n, p, 1) for n, p in pending)
    yield _count_row(r, count)


def dump_slice_batches(r: FileRead) -> Iterator[Any]:
    """A dump slice as Arrow batches: column-wide (streaming/offsets/dump_arrow.py) when every line
    is a plain record, else line by line (read_dump_slice)."""
    data = _slice_bytes(r)
    batch = dump_slice_batch(data, r.source_id, r.line)
    if batch is None:
        yield from arrow_batches(read_dump_slice(r, data), RAW_OFFSETS_ARROW_SCHEMA)
        return
    for start in range(0, batch.num_rows, _ARROW_ROWS):
        yield batch.slice(start, _ARROW_ROWS)
    yield rows_to_arrow([_count_row(r, batch.num_rows)], RAW_OFFSETS_ARROW_SCHEMA)


def read_segments(r: FileRead) -> Iterator[tuple]:
    """Raw offsets rows of a segment input (times: reader.timed_segment_items), then the count row."""
    count = 0
    for ts, p, item in timed_segment_items(r.path):
        count += 1
        if isinstance(item, SegmentRecord):
            yield r.source_id, item.offset, p, item.offset, ts, item.key, item.value, None, False, None
        else:
            yield r.source_id, item.seq, p, None, ts, None, None, item.detail, False, item.reason
    yield _count_row(r, count)


class _FilesReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str]):   # case-insensitive: keep it as given
        self.reads = [FileRead(**r) for r in json.loads(options["reads"])]
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return list(self.reads)


class LogFilesReader(_FilesReader):
    def read(self, partition: InputPartition) -> Iterator[Any]:
        freeze_worker_heap()
        assert isinstance(partition, FileRead)
        specs = {sid: LogSourceSpec(**spec) for sid, spec in json.loads(self.options["specs"]).items()}
        yield from event_batches(replay_rows_to_events(read_log_file(partition), specs,
                                                       int(self.options["unknownSample"])))


class OffsetsFilesReader(_FilesReader):
    def read(self, partition: InputPartition) -> Iterator[Any]:
        freeze_worker_heap()
        assert isinstance(partition, FileRead)
        if partition.kind == "segments":
            raw = arrow_batches(read_segments(partition), RAW_OFFSETS_ARROW_SCHEMA)
        else:
            raw = dump_slice_batches(partition)
        yield from event_batches(offsets_arrow_to_events(raw, json.loads(self.options["clusters"])))


class LogFilesSource(DataSource):
    """options: reads = JSON list of FileRead fields (plan_log_reads); specs = JSON {source id:
    LogSourceSpec fields}; unknownSample."""

    @classmethod
    def name(cls) -> str:
        return LOG_FILES_SOURCE

    def schema(self):
        return EVENT_SCHEMA

    def reader(self, schema) -> DataSourceReader:
        return LogFilesReader(self.options)


class OffsetsFilesSource(DataSource):
    """options: reads = JSON list of FileRead fields (plan_offsets_reads); clusters = JSON {source
    id: cluster}."""

    @classmethod
    def name(cls) -> str:
        return OFFSETS_FILES_SOURCE

    def schema(self):
        return EVENT_SCHEMA

    def reader(self, schema) -> DataSourceReader:
        return OffsetsFilesReader(self.options)
