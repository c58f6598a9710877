"""NumPy over Arrow buffers: the byte-level reads every vectorised tier uses."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, lengths, data) of a binary array as NumPy views; null slots have length 0."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    bufs = arr.buffers()
    off_type = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    if bufs[1] is None:
        offsets = np.zeros(n + 1, dtype=np.int64)
    else:
        offsets = np.frombuffer(bufs[1], dtype=off_type)[arr.offset:arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(1, np.uint8)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    return starts, lengths, data


def safe(data: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    return np.clip(pos, 0, max(0, len(data) - width))


def be(data: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """Big-endian signed ints of `width` bytes at `pos` (positions are clipped into the buffer;
    callers mask the rows where they were out of range)."""
    if len(pos) == 0:
        return np.zeros(0, dtype=np.int64)
    if len(data) < width:
        return np.zeros(len(pos), dtype=np.int64)
    # An overlapping view: element i is the `width` bytes starting at byte i, so one gather reads
    # every value (a 2-D gather of single bytes costs 2-4x more).
    windows = np.ndarray(shape=(len(data) - width + 1,), dtype=dtype, buffer=data, strides=(1,))
    return windows[safe(data, pos, width)].astype(np.int64)


def bool_column(arr, n: int, default: bool) -> np.ndarray:
    if arr is None:
        return np.full(n, default)
    if arr.null_count:
        arr = pc.fill_null(arr, default)
    return arr.to_numpy(zero_copy_only=False).astype(bool)


def int_column(arr, fill: int = -1) -> np.ndarray:
    if arr.null_count:
        arr = pc.fill_null(arr, fill)
    return arr.to_numpy(zero_copy_only=False).astype(np.int64)


def gather_strings(data: np.ndarray, starts: np.ndarray, lens: np.ndarray, binary: bool = False) -> pa.Array:
    """A string array of the slices data[starts[i]:starts[i]+lens[i]]; raises on invalid UTF-8
    (binary=True: a binary array, not validated)."""
    offs = np.zeros(len(lens) + 1, dtype=np.int32)
    np.cumsum(lens, out=offs[1:])
    total = int(offs[-1])
    if total:
        idx = np.repeat(starts - offs[:-1], lens) + np.arange(total)
        payload = data[idx]
    else:
        payload = np.zeros(0, np.uint8)
    arr = pa.Array.from_buffers(pa.binary() if binary else pa.string(), len(lens),
                                [None, pa.py_buffer(offs), pa.py_buffer(payload)])
    if not binary:
        arr.validate(full=True)
    return arr


JSON_SAFE = np.zeros(256, dtype=bool)
JSON_SAFE[0x20:0x7F] = True
JSON_SAFE[[0x22, 0x5C]] = False   # '"' and '\\' need escaping


def topic_json_safe(data: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Per slice: can it go into a JSON string as it is (printable ASCII, no quote or backslash)?"""
    ok = np.ones(len(lens), dtype=bool)
    total = int(lens.sum())
    if total == 0:
        return ok
    offs = np.concatenate(([0], np.cumsum(lens)[:-1]))
    idx = np.repeat(starts - offs, lens) + np.arange(total)
    bad = ~JSON_SAFE[data[idx]]
    if bad.any():
        owner = np.repeat(np.arange(len(lens)), lens)
        ok[np.unique(owner[bad])] = False
    return ok
