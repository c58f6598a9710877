"""Reading `__consumer_offsets` inputs in record-time order (replay): an index of every record of
the JSONL dumps and segment directories, and the raw rows (streaming/rows.py) of any slice of it."""
from __future__ import annotations

from collections.abc import Iterator

from state.quarantine_reasons import QuarantineReason as R
from streaming.offsets.codecs import BatchError
from streaming.offsets.dump import parse_dump_line
from streaming.offsets.segments import SegmentRecord, is_segment_input, iter_offsets_dir, read_batch
from streaming.quarantine import Quarantined


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
        last_ts: int | None = None
        start = 0
        with open(spec["path"], "rb") as handle:
            for line_no, raw in enumerate(handle, start=1):
                size = len(raw)
                if not raw.strip():      # blank lines carry nothing (the decoder skips them too)
                    start += size
                    continue
                ts: int | None = None
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


def _partition_of(source_id: str) -> int:
    """The partition a quarantined item's source id ("...-<partition>") names, -1 if none."""
    tail = source_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def timed_segment_items(path: str) -> Iterator[tuple[int, int, SegmentRecord | Quarantined]]:
    """(time, partition, item) of every record and quarantined item of one segment input. Records
    without a timestamp (magic 0: -1) and quarantine items take the time of the record before them
    in the same partition (the first record after it at the start of a partition; 1 if none); a
    held item comes out when its time is known, so the order is not the file's."""
    last_ts: dict[int, int | None] = {}
    waiting: dict[int, list] = {}
    for item in iter_offsets_dir(path):
        if isinstance(item, SegmentRecord):
            p = item.partition
            ts = item.timestamp if item.timestamp >= 0 else last_ts.get(p)
            if ts is None:
                waiting.setdefault(p, []).append(item)
                continue
            for w in waiting.pop(p, []):
                yield ts, p, w
            last_ts[p] = ts
            yield ts, p, item
        else:
            p = _partition_of(item.source_id)
            ts = item.ts_ms if item.ts_ms is not None else last_ts.get(p)
            if ts is None:
                waiting.setdefault(p, []).append(item)
            else:
                yield ts, p, item
    for p, items in waiting.items():   # nothing with a time after them in the partition
        for w in items:
            yield last_ts.get(p) or 1, p, w


def index_segments(files: list[dict]) -> tuple[list[tuple], dict, dict]:
    """Every visible record of every segment input as (ts, file_index, partition, offset,
    segment_no, batch_pos, record_index), plus {(file_index, n): Quarantined} for what could not
    be used (indexed with segment_no -1 and record_index n) and {(file_index, segment_no): path}.
    Times: timed_segment_items."""
    entries: list[tuple] = []
    quarantined: dict = {}
    seg_paths: dict = {}
    for file_index, spec in enumerate(files):
        if spec.get("kind") != "segments":
            continue
        seg_no: dict[str, int] = {}
        for ts, p, item in timed_segment_items(spec["path"]):
            if isinstance(item, SegmentRecord):
                no = seg_no.setdefault(item.file, len(seg_no))
                seg_paths[(file_index, no)] = item.file
                entries.append((ts, file_index, p, item.offset, no, item.batch_pos, item.index))
            else:
                n = len(quarantined)
                quarantined[(file_index, n)] = item
                entries.append((ts, file_index, p, item.seq, -1, 0, n))
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
                f"{type(exc).__name__}: {exc}"[:500] + " | " + text, False, R.MALFORMED_DUMP_LINE)


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
        rows = []
        handles: dict = {}
        contents: dict = {}
        batches: dict = {}
        try:
            for ts, file_index, partition, _offset, a, b, c in self.index[start:end]:
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


def offsets_input_kind(path: str) -> str:
    """"segments" for a directory or a `.log` segment file, "jsonl" for a dump."""
    return "segments" if is_segment_input(path) else "jsonl"
