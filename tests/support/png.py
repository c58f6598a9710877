"""A tiny PNG reader for the report's screenshot test (no PIL): size and pixel rows of 8-bit RGB or
RGBA images, non-interlaced (what Chromium writes)."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def read_png(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of pixels as bytes, RGB or RGBA interleaved)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    assert header is not None, "no IHDR"
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, previous = [], np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, row = line[0], np.frombuffer(line[1:], dtype=np.uint8).copy()
        if kind == 1:      # sub: a running sum per channel
            row = (row.reshape(-1, bpp).astype(np.int64).cumsum(axis=0) % 256).astype(np.uint8).ravel()
        elif kind == 2:    # up
            row = row + previous
        elif kind in (3, 4):
            out = bytearray(row.tobytes())
            up = previous.tobytes()
            for i in range(stride):
                left = out[i - bpp] if i >= bpp else 0
                corner = up[i - bpp] if i >= bpp else 0
                pred = (left + up[i]) // 2 if kind == 3 else _paeth(left, up[i], corner)
                out[i] = (out[i] + pred) & 0xFF
            row = np.frombuffer(bytes(out), dtype=np.uint8)
        rows.append(row.tobytes())
        previous = row
    return width, height, rows


def distinct_colours(rows: list[bytes], bpp: int, every: int = 4) -> set[bytes]:
    """The colours of every `every`-th pixel of every `every`-th row."""
    out = set()
    for row in rows[::every]:
        for x in range(0, len(row), bpp * every):
            out.add(row[x:x + 3])
    return out
