"""Reader for on-disk `__consumer_offsets` log segments (`<dir>/__consumer_offsets-N/*.log`).

Pure Python; CRC-32C and decompression are in codecs.py. It yields the same raw records as the
JSONL dump path (partition, offset, timestamp, key, value), so everything after it is unchanged.

What it reads (Kafka's `DefaultRecordBatch`, `LegacyRecord` and `KafkaLZ4Block*Stream`):

* record batches, magic 2: 61-byte header, CRC-32C over attributes..end, varint-encoded records
  with headers; compression none/gzip/snappy/lz4/zstd; LogAppendTime batches give every record the
  batch's max timestamp;
* legacy message sets, magic 0 and 1: CRC32 over magic..end; a compressed wrapper message holds an
  inner message set (magic 1 inner offsets are relative to the wrapper's last offset; magic 0 ones
  are absolute). Magic 0 has no timestamp: its records carry -1 (Kafka's NO_TIMESTAMP);
* control batches: skipped. Records of transactional batches are held per producer id and become
  visible at the producer's COMMIT marker; an ABORT marker discards them. Records of a transaction
  that has no marker by the end of the partition are quarantined (`uncommitted_transaction`).

A batch that cannot be used (bad CRC, impossible field, failed decompression, file cut short) is
quarantined with the file, the absolute byte position and the name of the field that failed; reading
goes on at the next batch when the batch length is plausible, otherwise at the next position where a
well-formed batch with a valid CRC starts. Nothing raises on content.
"""
from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from state.events import SOURCE_OFFSETS
from state.quarantine_reasons import QuarantineReason as R
from streaming.offsets.codecs import COMPRESSION_NAMES, MAX_DECOMPRESSED, BatchError, crc32c, decompress
from streaming.offsets.wire import VarintError, read_uvarint
from streaming.quarantine import Quarantined

__all__ = [
    "MAX_DECOMPRESSED",
    "BatchError",
    "BatchInfo",
    "SegmentRecord",
    "SegmentStats",
    "crc32c",
    "find_partition_dirs",
    "is_segment_input",
    "iter_offsets_dir",
    "iter_partition",
    "scan_segment",
]

PARTITION_DIR = re.compile(r"^__consumer_offsets-(\d+)$")
SEGMENT_FILE = re.compile(r"^(\d{1,20})\.log$")

V2_HEADER = 61                  # baseOffset .. recordsCount
LOG_OVERHEAD = 12               # offset int64 + length int32
V2_MIN_LENGTH = V2_HEADER - LOG_OVERHEAD          # 49: batchLength of an empty batch
LEGACY_MIN_SIZE = {0: 14, 1: 22}                   # crc..value of a message with null key/value
MAX_BATCH = 1 << 30             # a batch longer than 1 GiB is taken as a corrupt length
CONTROL_ABORT, CONTROL_COMMIT = 0, 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_V2_HEAD = struct.Struct(">qiiBIhiqqqhii")  # the 61-byte batch header


@dataclass
class SegmentRecord:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list = field(default_factory=list)   # [(key str, value bytes | None)]
    # Where the record lives (re-read by the replay source): segment file, batch position, index.
    file: str = ""
    batch_pos: int = 0
    index: int = 0


@dataclass
class BatchInfo:
    """One batch (v2) or one top-level message (legacy) with its records, or the error."""
    pos: int
    base_offset: int
    last_offset: int
    magic: int
    producer_id: int = -1
    transactional: bool = False
    control: bool = False
    compression: int = 0
    records: list = field(default_factory=list)     # [SegmentRecord]
    error: BatchError | None = None
    end: int = 0                                    # position after the batch


@dataclass
class SegmentStats:
    batches: int = 0
    records: int = 0
    control_batches: int = 0
    aborted_records: int = 0
    duplicate_replica_records: int = 0
    quarantined: int = 0
    by_compression: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- varints
def _varint(buf: bytes, pos: int, end: int, name: str, base: int, max_bytes: int = 5) -> tuple[int, int]:
    """Zigzag-encoded signed varint (varlong with max_bytes=10). Returns (value, new pos)."""
    try:
        raw, pos = read_uvarint(buf, pos, end, max_bytes)
    except VarintError as e:
        raise BatchError(name, base + e.start, e.describe("varint")) from None
    return (raw >> 1) ^ -(raw & 1), pos


def _varbytes(buf: bytes, pos: int, end: int, name: str, base: int, nullable: bool = True
              ) -> tuple[bytes | None, int]:
    n, p = _varint(buf, pos, end, name, base)
    if n == -1 and nullable:
        return None, p
    if n < 0:
        raise BatchError(name, base + pos, f"negative length {n}")
    if p + n > end:
        raise BatchError(name, base + pos, f"length {n} exceeds the {end - p} bytes left")
    return bytes(buf[p:p + n]), p + n


# --------------------------------------------------------------------------- magic 2
def _parse_v2_records(data: bytes, count: int, base_offset: int, base_ts: int, max_ts: int,
                      log_append: bool, partition: int, file: str, batch_pos: int) -> list[SegmentRecord]:
    """Records of a v2 batch; error positions are relative to data[0] (the caller shifts them)."""
    out = []
    p, end = 0, len(data)
    for i in range(count):
        where = f"RecordBatch.records[{i}]"
        rpos = p
        length, p = _varint(data, p, end, where + ".length", 0)
        if length < 0 or p + length > end:
            raise BatchError(where + ".length", rpos, f"record length {length} exceeds the {end - p} bytes left")
        rend = p + length
        if p + 1 > rend:
            raise BatchError(where + ".attributes", p, "record is empty")
        p += 1   # attributes (unused)
        ts_delta, p = _varint(data, p, rend, where + ".timestampDelta", 0, 10)
        off_delta, p = _varint(data, p, rend, where + ".offsetDelta", 0)
        key, p = _varbytes(data, p, rend, where + ".key", 0)
        value, p = _varbytes(data, p, rend, where + ".value", 0)
        n_headers, p = _varint(data, p, rend, where + ".headers", 0)
        if n_headers < 0:
            raise BatchError(where + ".headers", p, f"negative header count {n_headers}")
        headers = []
        for h in range(n_headers):
            hk, p = _varbytes(data, p, rend, f"{where}.headers[{h}].key", 0, nullable=False)
            hv, p = _varbytes(data, p, rend, f"{where}.headers[{h}].value", 0)
            try:
                hk_text = (hk or b"").decode("utf-8")   # not nullable: never None
            except UnicodeDecodeError:
                raise BatchError(f"{where}.headers[{h}].key", p, "header key is not UTF-8") from None
            headers.append((hk_text, hv))
        if p != rend:
            raise BatchError(where + ".length", rpos,
                             f"record declares {length} bytes, its fields end {rend - p} bytes earlier")
        ts = max_ts if log_append else base_ts + ts_delta
        out.append(SegmentRecord(partition, base_offset + off_delta, ts, key, value, headers,
                                 file, batch_pos, i))
    if p != end:
        raise BatchError("RecordBatch.records", p, f"{end - p} bytes after the last of {count} records")
    return out


def _read_v2(buf: bytes, pos: int, partition: int, file: str) -> BatchInfo:
    (base_offset, length, _leader_epoch, magic, crc, attrs, last_delta, base_ts, max_ts,
     producer_id, _producer_epoch, _base_seq, count) = _V2_HEAD.unpack_from(buf, pos)
    end = pos + LOG_OVERHEAD + length
    info = BatchInfo(pos=pos, base_offset=base_offset, last_offset=base_offset + last_delta, magic=2,
                     producer_id=producer_id, transactional=bool(attrs & 0x10),
                     control=bool(attrs & 0x20), compression=attrs & 0x07, end=end)
    computed = crc32c(memoryview(buf)[pos + 21:end])
    if computed != crc:
        raise BatchError("RecordBatch.crc", pos + 17,
                         f"CRC-32C mismatch (stored {crc:#010x}, computed {computed:#010x})")
    if count < 0:
        raise BatchError("RecordBatch.recordsCount", pos + 57, f"negative record count {count}")
    if last_delta < 0:
        raise BatchError("RecordBatch.lastOffsetDelta", pos + 23, f"negative last offset delta {last_delta}")
    codec = attrs & 0x07
    body_pos = pos + V2_HEADER
    data = buf[body_pos:end]
    if codec:
        data = decompress(codec, data, "RecordBatch.records", body_pos)
    try:
        info.records = _parse_v2_records(data, count, base_offset, base_ts, max_ts, bool(attrs & 0x08),
                                         partition, file, pos)
    except BatchError as e:
        if codec:   # a position inside the decompressed bytes: say so, point at the records field
            e.message += f" (byte {e.pos} of the decompressed records)"
            e.pos = body_pos
        else:
            e.pos += body_pos
        raise
    return info


# --------------------------------------------------------------------------- magic 0/1
def _legacy_message(buf: bytes, pos: int, end: int, base: int, inner: bool) -> tuple:
    """One legacy message starting at its crc (pos) and ending at end.
    Returns (magic, attributes, timestamp, key, value). Positions in errors are base + pos."""
    name = "Message" if not inner else "Message.value(inner message)"
    if end - pos < LEGACY_MIN_SIZE[0]:
        raise BatchError(name + ".size", base + pos, f"message of {end - pos} bytes is too short")
    crc = _U32.unpack_from(buf, pos)[0]
    magic = buf[pos + 4]
    if magic not in (0, 1):
        raise BatchError(name + ".magic", base + pos + 4, f"unknown magic {magic}")
    if end - pos < LEGACY_MIN_SIZE[magic]:
        raise BatchError(name + ".size", base + pos, f"magic {magic} message of {end - pos} bytes is too short")
    computed = zlib.crc32(memoryview(buf)[pos + 4:end])
    if computed != crc:
        raise BatchError(name + ".crc", base + pos,
                         f"CRC32 mismatch (stored {crc:#010x}, computed {computed:#010x})")
    attrs = buf[pos + 5]
    p = pos + 6
    ts = -1
    if magic == 1:
        ts = _I64.unpack_from(buf, p)[0]
        p += 8
    parts: list[bytes | None] = []
    for fname in ("key", "value"):
        if p + 4 > end:
            raise BatchError(f"{name}.{fname}", base + p, "length is cut short")
        n = _I32.unpack_from(buf, p)[0]
        p += 4
        if n == -1:
            parts.append(None)
            continue
        if n < 0 or p + n > end:
            raise BatchError(f"{name}.{fname}", base + p - 4, f"length {n} exceeds the {end - p} bytes left")
        parts.append(bytes(buf[p:p + n]))
        p += n
    if p != end:
        raise BatchError(name + ".size", base + pos, f"{end - p} bytes after the value")
    return magic, attrs, ts, parts[0], parts[1]


def _read_legacy(buf: bytes, pos: int, partition: int, file: str) -> BatchInfo:
    offset, size = _I64.unpack_from(buf, pos)[0], _I32.unpack_from(buf, pos + 8)[0]
    end = pos + LOG_OVERHEAD + size
    magic = buf[pos + 16]
    info = BatchInfo(pos=pos, base_offset=offset, last_offset=offset, magic=magic, end=end)
    magic, attrs, ts, key, value = _legacy_message(buf, pos + LOG_OVERHEAD, end, 0, inner=False)
    codec = attrs & 0x07
    info.compression = codec
    if not codec:
        info.records = [SegmentRecord(partition, offset, ts, key, value, [], file, pos, 0)]
        return info
    if value is None:
        raise BatchError("Message.value", pos, "compressed wrapper message has a null value")
    value_pos = end - len(value)
    inner = decompress(codec, value, "Message.value", value_pos)
    log_append = magic == 1 and bool(attrs & 0x08)
    msgs = []
    p = 0
    while p < len(inner):
        if p + LOG_OVERHEAD > len(inner):
            raise BatchError("Message.value(inner message).offset", value_pos, f"inner message set cut at byte {p}")
        inner_offset, inner_size = _I64.unpack_from(inner, p)[0], _I32.unpack_from(inner, p + 8)[0]
        if inner_size < LEGACY_MIN_SIZE[0] or p + LOG_OVERHEAD + inner_size > len(inner):
            raise BatchError("Message.value(inner message).size", value_pos,
                             f"inner message size {inner_size} at inner byte {p + 8} is impossible")
        imagic, iattrs, its, ikey, ivalue = _legacy_message(inner, p + LOG_OVERHEAD,
                                                            p + LOG_OVERHEAD + inner_size, 0, inner=True)
        if iattrs & 0x07:
            raise BatchError("Message.value(inner message).attributes", value_pos, "nested compression")
        msgs.append((inner_offset, ts if log_append else its, ikey, ivalue))
        p += LOG_OVERHEAD + inner_size
    if not msgs:
        raise BatchError("Message.value", value_pos, "compressed wrapper message holds no message")
    if magic == 1:
        base_offset = offset - msgs[-1][0]     # inner offsets are relative (KIP-31)
        absolute = [base_offset + m[0] for m in msgs]
    else:
        absolute = [m[0] for m in msgs]
    info.base_offset = absolute[0]
    info.records = [SegmentRecord(partition, o, m[1], m[2], m[3], [], file, pos, i)
                    for i, (o, m) in enumerate(zip(absolute, msgs))]
    return info


def read_batch(buf: bytes, pos: int, partition: int, file: str = "") -> BatchInfo:
    """The batch at `pos` (a position scan_segment reported), read again; raises BatchError."""
    if buf[pos + 16] == 2:
        return _read_v2(buf, pos, partition, file)
    return _read_legacy(buf, pos, partition, file)


# --------------------------------------------------------------------------- framing
def _plausible_header(buf: bytes, pos: int, size: int) -> int | None:
    """End position of a batch/message whose header at pos is plausible, else None."""
    if pos + 17 > size:
        return None
    length = _I32.unpack_from(buf, pos + 8)[0]
    magic = buf[pos + 16]
    if magic == 2:
        ok = V2_MIN_LENGTH <= length <= MAX_BATCH and pos + LOG_OVERHEAD + length <= size \
            and pos + V2_HEADER <= size
    elif magic in (0, 1):
        ok = LEGACY_MIN_SIZE[magic] <= length <= MAX_BATCH and pos + LOG_OVERHEAD + length <= size
    else:
        return None
    return pos + LOG_OVERHEAD + length if ok else None


def _valid_at(buf: bytes, pos: int, size: int, min_offset: int) -> bool:
    """A batch/message with a valid CRC starts at pos (used to resynchronise after garbage)."""
    end = _plausible_header(buf, pos, size)
    if end is None or _I64.unpack_from(buf, pos)[0] < min_offset:
        return False
    magic = buf[pos + 16]
    if magic == 2:
        return crc32c(memoryview(buf)[pos + 21:end]) == _U32.unpack_from(buf, pos + 17)[0]
    return zlib.crc32(memoryview(buf)[pos + 16:end]) == _U32.unpack_from(buf, pos + 12)[0]


def _resync(buf: bytes, start: int, size: int) -> int:
    """Next position >= start where a well-formed batch with a valid CRC starts; size if none.
    Offsets are not used to judge: the CRC does not cover them, so a damaged earlier offset
    must not hide good batches after it."""
    for q in range(start, size - 16):
        if buf[q + 16] in (0, 1, 2) and _valid_at(buf, q, size, -1 << 63):
            return q
    return size


def scan_segment(buf: bytes, partition: int, file: str = "") -> Iterator[BatchInfo]:
    """Every batch (or top-level legacy message) of one segment file's bytes, in file order.
    A batch that cannot be used comes back with `error` set and no records."""
    size = len(buf)
    pos = 0
    next_offset = -1
    while pos < size:
        if size - pos < 17:
            yield _failed(pos, size, BatchError("RecordBatch.batchLength", pos + 8 if size - pos >= 12 else pos,
                                                 f"file ends {size - pos} bytes into a batch header",
                                                 R.TRUNCATED_BATCH))
            return
        base_offset = _I64.unpack_from(buf, pos)[0]
        length = _I32.unpack_from(buf, pos + 8)[0]
        magic = buf[pos + 16]
        end = _plausible_header(buf, pos, size)
        if end is None:
            if magic in (0, 1, 2) and length > 0 and pos + LOG_OVERHEAD + length > size \
                    and length <= MAX_BATCH and _resync(buf, pos + 1, size) == size:
                # The last batch of the file is cut short (e.g. a crash during the append).
                yield _failed(pos, size, BatchError("RecordBatch.batchLength", pos + 8,
                                                     f"batch of {length} bytes but only "
                                                     f"{size - pos - LOG_OVERHEAD} left in the file",
                                                     R.TRUNCATED_BATCH), base_offset)
                return
            field = "RecordBatch.magic" if magic not in (0, 1, 2) else "RecordBatch.batchLength"
            at = pos + 16 if magic not in (0, 1, 2) else pos + 8
            what = f"unknown magic {magic}" if magic not in (0, 1, 2) else f"impossible batch length {length}"
            nxt = _resync(buf, pos + 1, size)
            where = "the next valid batch" if nxt < size else "the end of the file"
            yield _failed(pos, nxt, BatchError(field, at, f"{what}; skipped {nxt - pos} bytes to {where}"), base_offset)
            pos = nxt
            continue
        try:
            info = _read_v2(buf, pos, partition, file) if magic == 2 else _read_legacy(buf, pos, partition, file)
        except BatchError as e:
            # The length looked plausible; if the next batch does not start where it says, the
            # length itself may be damaged: resynchronise on the next valid batch instead.
            nxt = end
            if end < size and not _valid_at(buf, end, size, -1 << 62):
                nxt = _resync(buf, pos + 1, size)
            yield _failed(pos, nxt, e, base_offset)
            pos = nxt
            continue
        except (struct.error, IndexError, ValueError, MemoryError, OverflowError) as e:
            yield _failed(pos, end, BatchError("RecordBatch", pos, f"unreadable batch: {type(e).__name__}: {e}"),
                          base_offset)
            pos = end
            continue
        next_offset = max(next_offset, info.last_offset + 1)
        yield info
        pos = end


def _failed(pos: int, end: int, error: BatchError, base_offset: int = -1) -> BatchInfo:
    return BatchInfo(pos=pos, base_offset=base_offset, last_offset=base_offset, magic=-1,
                     error=error, end=end)


# --------------------------------------------------------------------------- directories
def is_segment_input(path: str) -> bool:
    """A directory (partition dir or a parent of partition dirs) or a single `.log` file."""
    return os.path.isdir(path) or (os.path.isfile(path) and SEGMENT_FILE.match(os.path.basename(path)) is not None)


def find_partition_dirs(path: str) -> list[tuple[int, str]]:
    """(partition, dir) for `path` itself if it is a `__consumer_offsets-N` dir, else for every such
    dir below it (any depth, e.g. broker1/ and broker2/ copies), sorted by (partition, path)."""
    path = os.path.normpath(path)
    found = []
    m = PARTITION_DIR.match(os.path.basename(path))
    if m and os.path.isdir(path):
        return [(int(m.group(1)), path)]
    for root, dirs, _files in os.walk(path):
        dirs.sort()
        for d in list(dirs):
            m = PARTITION_DIR.match(d)
            if m:
                found.append((int(m.group(1)), os.path.join(root, d)))
                dirs.remove(d)   # do not descend into a partition dir
    return sorted(found)


def segment_files(partition_dir: str) -> list[str]:
    """The `.log` files of one partition dir, in base-offset order."""
    files = []
    for name in os.listdir(partition_dir):
        m = SEGMENT_FILE.match(name)
        if m and os.path.isfile(os.path.join(partition_dir, name)):
            files.append((int(m.group(1)), os.path.join(partition_dir, name)))
    return [p for _, p in sorted(files)]


def _quarantine(partition: int, seq: int, reason: str, detail: str, ts: int | None = None) -> Quarantined:
    return Quarantined(source=SOURCE_OFFSETS, source_id=f"__consumer_offsets-{partition}", seq=seq,
                       reason=reason, detail=detail, raw=None, ts_ms=ts)


def _batch_quarantine(partition: int, file: str, b: BatchInfo) -> Quarantined:
    e = b.error
    assert e is not None   # a batch that failed carries its error
    detail = (f"{e.field} at byte {e.pos} of __consumer_offsets-{partition}/{file}: {e.message} "
              f"(batch bytes {b.pos}..{b.end})")
    return _quarantine(partition, b.base_offset, e.reason, detail)


def iter_partition(partition: int, files: list[str], stats: SegmentStats | None = None,
                   min_offset: int = 0) -> Iterator[SegmentRecord | Quarantined]:
    """Visible records of one partition (its segment files in order) and quarantine items.

    Records with an offset below `min_offset` are skipped (used to merge replicas). Transactional
    records are held until their producer's marker: they are yielded at the COMMIT, so they may
    come after records with higher offsets."""
    stats = stats if stats is not None else SegmentStats()
    pending: dict[int, list[SegmentRecord]] = {}
    for path in files:
        try:
            with open(path, "rb") as handle:
                buf = handle.read()
        except OSError as e:
            stats.quarantined += 1
            yield _quarantine(partition, -1, R.UNREADABLE_SEGMENT, f"{path}: {e}")
            continue
        name = os.path.basename(path)
        for b in scan_segment(buf, partition, path):
            if b.error is not None:
                stats.quarantined += 1
                yield _batch_quarantine(partition, name, b)
                continue
            stats.batches += 1
            codec = COMPRESSION_NAMES.get(b.compression, str(b.compression))
            stats.by_compression[codec] = stats.by_compression.get(codec, 0) + 1
            if b.control:
                stats.control_batches += 1
                kind = _control_type(b)
                held = pending.pop(b.producer_id, [])
                if kind == CONTROL_COMMIT:
                    for r in held:
                        if r.offset >= min_offset:
                            stats.records += 1
                            yield r
                elif kind == CONTROL_ABORT:
                    stats.aborted_records += len(held)
                else:
                    pending[b.producer_id] = held   # other control records end no transaction
                continue
            if b.transactional:
                pending.setdefault(b.producer_id, []).extend(b.records)
                continue
            for r in b.records:
                if r.offset >= min_offset:
                    stats.records += 1
                    yield r
                else:
                    stats.duplicate_replica_records += 1
    for producer_id, held in sorted(pending.items()):
        held = [r for r in held if r.offset >= min_offset]
        if held:
            stats.quarantined += 1
            yield _quarantine(partition, held[0].offset, R.UNCOMMITTED_TRANSACTION,
                              f"{len(held)} record(s) of producer {producer_id} from offset "
                              f"{held[0].offset} to {held[-1].offset}: no COMMIT or ABORT marker "
                              f"before the end of the partition", held[0].timestamp)


def _control_type(b: BatchInfo) -> int | None:
    """Type of the control record of a control batch (0 ABORT, 1 COMMIT, others)."""
    for r in b.records:
        if r.key is not None and len(r.key) >= 4:
            return _I16.unpack_from(r.key, 2)[0]
    return None


def iter_offsets_dir(path: str, stats: SegmentStats | None = None
                     ) -> Iterator[SegmentRecord | Quarantined]:
    """Every visible record of every `__consumer_offsets-N` dir under `path` (or of the single
    segment file `path`), partition by partition.

    The same partition found more than once (copies of several replicas) is merged: each copy adds
    only the records past the highest offset read so far, so a replica that stopped early adds
    nothing and a longer one completes it."""
    stats = stats if stats is not None else SegmentStats()
    if os.path.isfile(path):
        parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
        m = PARTITION_DIR.match(parent)
        yield from iter_partition(int(m.group(1)) if m else -1, [path], stats)
        return
    by_partition: dict[int, list[str]] = {}
    for partition, d in find_partition_dirs(path):
        by_partition.setdefault(partition, []).append(d)
    for partition in sorted(by_partition):
        next_offset = 0
        for d in by_partition[partition]:
            highest = next_offset - 1
            for item in iter_partition(partition, segment_files(d), stats, min_offset=next_offset):
                if isinstance(item, SegmentRecord):
                    highest = max(highest, item.offset)
                yield item
            next_offset = max(next_offset, highest + 1)
