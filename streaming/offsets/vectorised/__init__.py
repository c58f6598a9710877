"""Vectorised decoding of `__consumer_offsets` rows, one Arrow batch at a time (`mapInArrow`).

Three tiers, each equal in output to the per-record reference (streaming/offsets/per_record.py), which
tests check on the real dumps, awkward records and random bytes:

1. NumPy over the binary columns' buffers, no per-record Python:
   - offset commits (key types 0/1, most of the topic) of a plain, exactly-sized layout, reduced
     per (cluster, group, topic, partition) with Arrow's hash aggregation;
   - offset tombstones, tombstones of every other record type, and KIP-848 records of types 3,
     6, 7 and 8 in their common layouts (one-byte varints, at most one topic per array, no
     tagged fields): one event each, JSON built with Arrow string kernels.
2. Direct struct readers in Python for GroupMetadata values v0-v3 and KIP-848 type 5 (with or
   without the classic-member tag): direct.py. Only group, kind, generation, member and data come
   from Python; the other columns of their event batch are taken from the input batch.
3. The full decoder for everything else: unknown versions, trailing bytes, tagged fields,
   non-ASCII metadata, long varints, anything corrupt. It names the failing field and byte offset
   in the quarantine record; tiers 1 and 2 never quarantine, they hand such records down.

Commit rows of the same (cluster, group, topic, partition) from tier 1 and tier 3 are not merged
with each other: a batch has at most one per tier and key (sum and max merge the same way later).

Decode health: every batch also yields one `decode_stats` row per cluster (no group: a statistics
row, streaming/rows.py) with record counts by key version, value version and outcome; they reach
the driver in the batch's progress report, which adds them to
`rebalance_monitor_offsets_records_total`.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from streaming.offsets.per_record import decode_offsets_rows
from streaming.offsets.vectorised.arrays import bool_column, int_column
from streaming.offsets.vectorised.commits import commit_rows, tombstone_rows
from streaming.offsets.vectorised.consumer_groups import consumer_group_rows
from streaming.offsets.vectorised.direct import direct_rows
from streaming.offsets.vectorised.view import BatchView, read_batch
from streaming.rows import EVENT_ARROW_SCHEMA, RAW_OFFSETS_NAMES, rows_to_arrow, stats_row


def _slow_rows(view: BatchView, rows: np.ndarray, stats: dict) -> list[tuple]:
    """Tier 3: the full decoder, per record."""
    if len(rows) == 0:
        return []
    sub = view.batch.take(pa.array(rows))
    names = sub.schema.names
    cols = [sub.column(names.index(c)).to_pylist() if c in names else [None] * len(rows)
            for c in RAW_OFFSETS_NAMES]
    return decode_offsets_rows(list(zip(*cols)), view.clusters, stats=stats)


def _fast_stats(view: BatchView, mask: np.ndarray, stats: dict) -> None:
    """Decode-health counts of the rows tier 1 took, by key type and value version."""
    rows = np.flatnonzero(mask)
    if len(rows) == 0:
        return
    n_src = max(1, len(view.sources))
    idx = view.source_index_np[rows]
    vv = view.value_version[rows] + 1                  # -1 (tombstone) .. 4 -> 0 .. 5
    code = (view.key_type[rows] * 6 + vv) * n_src + idx
    counts = np.bincount(code)                          # codes are small: no sort needed
    values = np.flatnonzero(counts)
    for v, c in zip(values.tolist(), counts[values].tolist()):
        rest, si = divmod(v, n_src)
        kt, vcode = divmod(rest, 6)
        key = (str(kt), "null" if vcode == 0 else str(vcode - 1), "decoded")
        per = stats.setdefault(view.clusters.get(view.sources[si], "default"), {})
        per[key] = per.get(key, 0) + c


def _tier1(view: BatchView) -> tuple[list[pa.RecordBatch], np.ndarray]:
    """Tier 1's event batches and the rows it took."""
    try:
        batches = [b for b in (commit_rows(view), tombstone_rows(view)) if b is not None]
        cg_batches, cg_mask = consumer_group_rows(view)
        return batches + cg_batches, view.mask | view.tomb | cg_mask
    except (pa.ArrowInvalid, UnicodeDecodeError):
        # a group or topic name that is not UTF-8: let the full decoder quarantine those records
        return [], np.zeros(view.batch.num_rows, dtype=bool)


def decode_arrow_batch(batch: pa.RecordBatch, clusters: dict[str, str], with_stats: bool = True
                       ) -> list[pa.RecordBatch]:
    """One raw-offsets Arrow batch -> event batches (tier 1, tier 2, tier 3 with the stats rows)."""
    n = batch.num_rows
    if n == 0:
        return []
    view = read_batch(batch, clusters)
    out, mask = _tier1(view)
    stats: dict = {}
    direct, rest = direct_rows(view, np.flatnonzero(~mask), stats)
    if direct is not None:
        out.append(direct)
    slow = _slow_rows(view, rest, stats)
    if with_stats:
        _fast_stats(view, mask, stats)
        ts = int_column(view.column("timestamp_ms"), 0)
        eof = bool_column(view.column("eof"), n, False)
        real = ts[~eof]
        if len(real) and stats:
            when = int(real.max())
            for cluster, counts in sorted(stats.items()):
                slow.append(stats_row(cluster, when, counts))
    if slow:
        out.append(rows_to_arrow(slow, EVENT_ARROW_SCHEMA))
    return out


def offsets_arrow_to_events(batches: Iterable[pa.RecordBatch], clusters: dict[str, str]
                            ) -> Iterator[pa.RecordBatch]:
    """The `mapInArrow` function of the offsets stream."""
    for batch in batches:
        yield from decode_arrow_batch(batch, clusters)
