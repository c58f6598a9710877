"""CRC-32C and the decompression of record batches, as Kafka writes them.

`cramjam` (snappy, lz4, zstd) and `crc32c`; gzip comes from the standard library.
Snappy: Java producers write xerial's framing (`\\x82SNAPPY\\x00` header, then int32-length-prefixed
raw blocks); raw snappy and the snappy framing format are accepted too. LZ4: Kafka's frame writer
(and, for magic 0, its header checksum bug) is handled by parsing the frame here and decompressing
block by block; header and block checksums are not verified (the batch CRC covers the bytes).
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

from state.quarantine_reasons import QuarantineReason as R

_crc32c_c: Callable[[bytes | memoryview], int] | None
try:  # hardware/C CRC-32C; the pure-Python table below is the fallback
    from crc32c import crc32c as _crc32c_c
except ImportError:  # pragma: no cover - the package is a dependency
    _crc32c_c = None

MAX_DECOMPRESSED = 256 << 20    # refuse to inflate a batch beyond 256 MiB (corrupt or hostile)
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_I32 = struct.Struct(">i")


# --------------------------------------------------------------------------- errors
class BatchError(Exception):
    """A batch cannot be used. `field` names the format field, `pos` the absolute file position."""

    def __init__(self, field: str, pos: int, message: str, reason: str = R.CORRUPT_BATCH):
        super().__init__(field, pos, message)
        self.field, self.pos, self.message, self.reason = field, pos, message, reason


# --------------------------------------------------------------------------- CRC-32C
def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE: list[int] | None = None


def crc32c(data: bytes | memoryview) -> int:
    """CRC-32C (Castagnoli), as Kafka's record batch v2 uses."""
    if _crc32c_c is not None:
        return _crc32c_c(data)
    global _CRC_TABLE
    if _CRC_TABLE is None:
        _CRC_TABLE = _crc32c_table()
    table, crc = _CRC_TABLE, 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# --------------------------------------------------------------------------- decompression
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _cramjam():
    import cramjam  # imported lazily: plain uncompressed segments need no native module
    return cramjam


def _check_size(n: int, field: str, pos: int) -> None:
    if n > MAX_DECOMPRESSED:
        raise BatchError(field, pos, f"decompressed size {n} exceeds the {MAX_DECOMPRESSED}-byte limit")


def _gunzip(data: bytes, field: str, pos: int) -> bytes:
    d = zlib.decompressobj(wbits=47)   # gzip or zlib header
    out = d.decompress(data, MAX_DECOMPRESSED + 1)
    _check_size(len(out), field, pos)
    if not d.eof:
        raise BatchError(field, pos, "gzip stream is truncated")
    return out


def _snappy(data: bytes, field: str, pos: int) -> bytes:
    cj = _cramjam()
    if data[:8] == _XERIAL_MAGIC and len(data) >= 16:
        out = bytearray()
        p = 16
        while p < len(data):
            if p + 4 > len(data):
                raise BatchError(field, pos, f"xerial snappy block length cut at byte {p}")
            n = _I32.unpack_from(data, p)[0]
            p += 4
            if n < 0 or p + n > len(data):
                raise BatchError(field, pos, f"xerial snappy block length {n} at byte {p - 4} is impossible")
            block = data[p:p + n]
            _check_size(len(out) + cj.snappy.decompress_raw_len(block), field, pos)
            out += bytes(cj.snappy.decompress_raw(block))
            p += n
        return bytes(out)
    if data[:1] == b"\xff":   # snappy framing format (stream identifier chunk)
        return bytes(cj.snappy.decompress(data))
    _check_size(cj.snappy.decompress_raw_len(data), field, pos)
    return bytes(cj.snappy.decompress_raw(data))


_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def _lz4(data: bytes, field: str, pos: int) -> bytes:
    """LZ4 frame (magic 0x184D2204), block by block; checksums are not verified."""
    cj = _cramjam()
    if len(data) < 7 or data[:4] != b"\x04\x22\x4d\x18":
        raise BatchError(field, pos, "not an LZ4 frame (bad magic)")
    flg, bd = data[4], data[5]
    if flg >> 6 != 1:
        raise BatchError(field, pos, f"unsupported LZ4 frame version {flg >> 6}")
    block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 7)
    if block_max is None:
        raise BatchError(field, pos, f"bad LZ4 block max size code {(bd >> 4) & 7}")
    independent = bool(flg & 0x20)
    block_checksum = bool(flg & 0x10)
    p = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1   # + header checksum byte
    if not independent:
        # Linked blocks: hand the whole frame to the frame decoder (Kafka writes independent ones).
        return bytes(cj.lz4.decompress(data))
    out = bytearray()
    while True:
        if p + 4 > len(data):
            raise BatchError(field, pos, "LZ4 frame is truncated (no end mark)")
        size = struct.unpack_from("<I", data, p)[0]
        p += 4
        if size == 0:
            break
        uncompressed = bool(size & 0x80000000)
        size &= 0x7FFFFFFF
        if p + size > len(data):
            raise BatchError(field, pos, f"LZ4 block of {size} bytes at frame byte {p - 4} is cut short")
        block = data[p:p + size]
        p += size + (4 if block_checksum else 0)
        if uncompressed:
            out += block
        else:
            target = bytearray(block_max)
            n = cj.lz4.decompress_block_into(block, target)
            out += memoryview(target)[:n]
        _check_size(len(out), field, pos)
    return bytes(out)


def _zstd(data: bytes, field: str, pos: int) -> bytes:
    out = bytes(_cramjam().zstd.decompress(data))
    _check_size(len(out), field, pos)
    return out


_DECOMPRESS = {1: _gunzip, 2: _snappy, 3: _lz4, 4: _zstd}


def decompress(codec: int, data: bytes, field: str, pos: int) -> bytes:
    fn = _DECOMPRESS.get(codec)
    if fn is None:
        raise BatchError(field, pos, f"unknown compression codec {codec}")
    try:
        return fn(bytes(data), field, pos)
    except BatchError:
        raise
    except Exception as e:   # the libraries raise their own types on bad input
        raise BatchError(field, pos, f"{COMPRESSION_NAMES[codec]} decompression failed: "
                                     f"{type(e).__name__}: {e}") from None
