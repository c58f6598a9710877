"""Test-side writer of Kafka log segments, written from the format description (Kafka's
DefaultRecordBatch / LegacyRecord) and independent of streaming/offsets/segments.py: its own
bitwise CRC-32C, varints (the tests' offsets_encoder.py) and compression framing. Used to build
batches the captures lack (compression, legacy magic 0/1, transactions, control batches, headers)
and corrupt ones."""
from __future__ import annotations

import gzip
import struct
import zlib

import cramjam

from tests.support.offsets_encoder import uvarint


def crc32c_bitwise(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def zigzag_varint(n: int) -> bytes:
    return uvarint(((n << 1) ^ (n >> 63)) & ((1 << 64) - 1))


def _vbytes(b):
    return zigzag_varint(-1) if b is None else zigzag_varint(len(b)) + b


def v2_record(offset_delta: int, ts_delta: int, key, value, headers=()) -> bytes:
    body = (b"\x00" + zigzag_varint(ts_delta) + zigzag_varint(offset_delta) + _vbytes(key) + _vbytes(value)
            + zigzag_varint(len(headers)) + b"".join(_vbytes(k.encode()) + _vbytes(v) for k, v in headers))
    return zigzag_varint(len(body)) + body


# codec ids: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
def compress(codec: int, data: bytes, legacy_lz4: bool = False) -> bytes:
    if codec == 1:
        return gzip.compress(data)
    if codec == 2:   # xerial framing, as the Java producer writes it
        out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        for i in range(0, len(data), 32 * 1024):
            block = bytes(cramjam.snappy.compress_raw(data[i:i + 32 * 1024]))
            out += struct.pack(">i", len(block)) + block
        return out
    if codec == 3:   # LZ4 frame with independent 64 KiB blocks, as KafkaLZ4BlockOutputStream
        flg, bd = 0x60, 0x40
        hc = 0x00 if legacy_lz4 else 0x82   # checksums are not checked by the reader
        out = b"\x04\x22\x4d\x18" + bytes([flg, bd, hc])
        for i in range(0, len(data), 64 * 1024):
            chunk = data[i:i + 64 * 1024]
            block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
            if len(block) >= len(chunk):
                out += struct.pack("<I", len(chunk) | 0x80000000) + chunk
            else:
                out += struct.pack("<I", len(block)) + block
        return out + struct.pack("<I", 0)
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    return data


def record_batch(base_offset: int, records: list, *, base_ts: int = 1_700_000_000_000, codec: int = 0,
                 transactional: bool = False, control: bool = False, log_append_time: bool = False,
                 producer_id: int = -1, max_ts: int | None = None, last_offset_delta: int | None = None,
                 corrupt_crc: bool = False) -> bytes:
    """records: [(offset_delta, ts_delta, key, value, headers)]."""
    raw = b"".join(v2_record(*r) for r in records)
    payload = compress(codec, raw) if codec else raw
    attrs = codec | (0x08 if log_append_time else 0) | (0x10 if transactional else 0) | (0x20 if control else 0)
    if last_offset_delta is None:
        last_offset_delta = max((r[0] for r in records), default=0)
    if max_ts is None:
        max_ts = base_ts + max((r[1] for r in records), default=0)
    after_crc = (struct.pack(">hiqqqhii", attrs, last_offset_delta, base_ts, max_ts, producer_id, 0, -1,
                             len(records)) + payload)
    crc = crc32c_bitwise(after_crc) ^ (1 if corrupt_crc else 0)
    batch_length = 4 + 1 + 4 + len(after_crc)   # partitionLeaderEpoch + magic + crc + rest
    return struct.pack(">qiibI", base_offset, batch_length, 0, 2, crc) + after_crc


def control_batch(offset: int, producer_id: int, commit: bool, ts: int = 1_700_000_000_000) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 5)
    return record_batch(offset, [(0, 0, key, value, ())], base_ts=ts, transactional=True, control=True,
                        producer_id=producer_id)


def legacy_message(offset: int, key, value, *, magic: int = 1, ts: int = 1_700_000_000_000,
                   codec: int = 0, log_append_time: bool = False) -> bytes:
    attrs = codec | (0x08 if log_append_time else 0)
    body = bytes([magic, attrs]) + (struct.pack(">q", ts) if magic == 1 else b"")
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def legacy_wrapper(last_offset: int, inner: list, *, magic: int = 1, codec: int = 1,
                   ts: int = 1_700_000_000_000, log_append_time: bool = False) -> bytes:
    """inner: [(key, value, ts)]; magic 1 uses relative inner offsets, magic 0 absolute ones."""
    n = len(inner)
    msgs = b""
    for i, (k, v, its) in enumerate(inner):
        off = i if magic == 1 else last_offset - (n - 1) + i
        msgs += legacy_message(off, k, v, magic=magic, ts=its)
    return legacy_message(last_offset, None, compress(codec, msgs, legacy_lz4=magic == 0), magic=magic,
                          ts=ts, codec=codec, log_append_time=log_append_time)
