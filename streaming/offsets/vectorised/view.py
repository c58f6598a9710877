"""A raw-offsets Arrow batch as the vectorised tiers read it: the key and value buffers as NumPy
views, what the commit reader found (tier 1: key types 0/1 of a plain layout), and the cluster of
each row's source. One typed view per batch replaces passing a dict of arrays around."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state import events as E
from streaming.offsets.records import OFFSETS_SOURCE_PREFIX
from streaming.offsets.vectorised.arrays import be, binary_parts, bool_column, safe
from streaming.rows import event_batch, repeated


@dataclass
class BatchView:
    batch: pa.RecordBatch
    clusters: dict[str, str]
    # Buffers of the key and value columns (starts, lengths, bytes), valid masks.
    key_starts: np.ndarray
    key_lengths: np.ndarray
    key_data: np.ndarray
    value_starts: np.ndarray
    value_lengths: np.ndarray
    value_data: np.ndarray
    vvalid: np.ndarray
    base_ok: np.ndarray        # a record (not end-of-input, not a read error) with a key
    key_type: np.ndarray
    value_version: np.ndarray  # -1 for tombstones
    # Tier 1 commits: rows taken (mask), offset tombstones (tomb), and their fields.
    mask: np.ndarray
    tomb: np.ndarray
    offset: np.ndarray
    commit_ts: np.ndarray
    glen: np.ndarray           # group name length in the key
    tlen: np.ndarray           # topic name length in the key
    # Source ids of the batch (dictionary-encoded) and their clusters.
    sources: list[str]
    source_index: pa.Array
    source_index_np: np.ndarray
    cluster_dict: pa.Array
    single_cluster: str | None   # the batch's one cluster, None when it has several

    def column(self, name: str) -> Any:
        return self.batch.column(self.batch.schema.names.index(name))

    def cluster_column(self, rows: np.ndarray) -> pa.Array:
        """The cluster name of each of `rows`, from its input's source id."""
        if self.single_cluster is not None:
            return repeated(self.single_cluster, len(rows))
        return self.cluster_dict.take(self.source_index.take(pa.array(rows)))

    def record_events(self, rows: np.ndarray, **columns: Any) -> pa.RecordBatch:
        """The event batch of one event per record of `rows` (tiers 1-2 outside commits): cluster,
        time, source and position come from the input; the rest is given by name."""
        sel = pa.array(rows)
        source_id = pc.binary_join_element_wise(
            OFFSETS_SOURCE_PREFIX, pc.cast(self.column("partition").take(sel), pa.string()), "")
        return event_batch(len(rows), cluster=self.cluster_column(rows), ts_ms=self.column("timestamp_ms").take(sel),
                           source=E.SOURCE_OFFSETS, source_id=source_id, seq=self.column("offset").take(sel),
                           **columns)


def read_batch(batch: pa.RecordBatch, clusters: dict[str, str]) -> BatchView:
    """The view of a batch: tier 1's commit reader over every row (NumPy, no per-record Python)
    and the clusters of its source ids, looked up once (a batch usually has one source)."""
    fields = _commit_fields(batch)
    enc = pc.fill_null(batch.column(batch.schema.names.index("source_id")), "").dictionary_encode()
    sources = enc.dictionary.to_pylist()
    names = [clusters.get(x, "default") for x in sources]
    return BatchView(batch=batch, clusters=clusters, **fields, sources=sources, source_index=enc.indices,
                     source_index_np=enc.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                     cluster_dict=pa.array(names, pa.string()),
                     single_cluster=names[0] if len(set(names)) == 1 else None)


def _commit_fields(batch: pa.RecordBatch) -> dict[str, np.ndarray]:
    """Decode the plain offset commits of a batch with NumPy (exact layouts only; anything else
    is left to the other tiers)."""
    n = batch.num_rows
    names = batch.schema.names
    col = batch.column
    eof = bool_column(col(names.index("eof")), n, False)
    error_ok = col(names.index("error")).is_null().to_numpy(zero_copy_only=False)
    key = col(names.index("key"))
    value = col(names.index("value"))
    kvalid = key.is_valid().to_numpy(zero_copy_only=False)
    vvalid = value.is_valid().to_numpy(zero_copy_only=False)
    ks, kl, kd = binary_parts(key)
    vs, vl, vd = binary_parts(value)
    key_ok = ~eof & error_ok & kvalid & (kl >= 10)
    # key: type, group, topic, partition (exact length: anything else goes to the full decoder)
    ktype = be(kd, ks, 2, ">i2")
    key_ok &= (ktype == 0) | (ktype == 1)
    glen = be(kd, ks + 2, 2, ">i2")
    key_ok &= (glen >= 0) & (4 + glen + 2 <= kl)
    tpos = ks + 4 + np.where(key_ok, glen, 0)
    tlen = be(kd, tpos, 2, ">i2")
    key_ok &= (tlen >= 0) & (kl == 4 + glen + 2 + tlen + 4)
    tomb = key_ok & ~vvalid
    mask = key_ok & vvalid & (vl >= 20)
    # value: version, offset, metadata, commit timestamp
    vver = be(vd, vs, 2, ">i2")
    mask &= (vver >= 0) & (vver <= 4)
    offset = be(vd, vs + 2, 8, ">i8")
    flexible = vver == 4
    mlen_pos = vs + np.where(vver >= 3, 14, 10)
    mlen16 = be(vd, mlen_pos, 2, ">i2")
    mvar = vd[safe(vd, mlen_pos, 1)].astype(np.int64)          # v4: compact length (1 byte)
    mlen = np.where(flexible, mvar - 1, mlen16)
    mask &= np.where(flexible, (mvar >= 1) & (mvar < 0x80), mlen16 >= 0)
    mlen = np.where(mask, mlen, 0)
    mstart = mlen_pos + np.where(flexible, 1, 2)
    cts_pos = mstart + mlen
    expected = (cts_pos - vs) + 8 + np.where(vver == 1, 8, 0) + np.where(flexible, 1, 0)
    mask &= vl == expected
    cts = be(vd, cts_pos, 8, ">i8")
    if flexible.any():   # v4: the tagged-field section must be empty (tags -> full decoder)
        tags = vd[safe(vd, cts_pos + 8, 1)]
        mask &= ~flexible | (tags == 0)
    # metadata must be ASCII (the decoder checks UTF-8; non-ASCII goes to it)
    with_md = mask & (mlen > 0)
    if with_md.any():
        lens = mlen[with_md]
        starts = mstart[with_md]
        idx = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens) + np.arange(lens.sum())
        high = np.zeros(len(lens), dtype=bool)
        bad_bytes = vd[idx] >= 0x80
        if bad_bytes.any():
            owner = np.repeat(np.arange(len(lens)), lens)
            high[np.unique(owner[bad_bytes])] = True
        rows = np.flatnonzero(with_md)
        mask[rows[high]] = False
    return {"mask": mask, "tomb": tomb, "offset": offset, "commit_ts": cts, "key_type": ktype,
            "value_version": np.where(vvalid, vver, -1), "base_ok": ~eof & error_ok & kvalid,
            "vvalid": vvalid, "value_starts": vs, "value_lengths": vl, "value_data": vd,
            "key_starts": ks, "key_lengths": kl, "key_data": kd, "glen": glen, "tlen": tlen}
