"""Vectorised decoding of `__consumer_offsets` rows, one Arrow batch at a time (`mapInArrow`).

Three tiers, each equal in output to the per-record reference (`streaming.logs.step.decode_offsets_rows`
with `offsets_decoder`), which tests check on the real dumps, awkward records and random bytes:

1. NumPy over the binary columns' buffers, no per-record Python:
   - offset commits (key types 0/1, most of the topic) of a plain, exactly-sized layout, reduced
     per (cluster, group, topic, partition) with Arrow's hash aggregation;
   - offset tombstones, tombstones of every other record type, and KIP-848 records of types 3,
     6, 7 and 8 in their common layouts (one-byte varints, at most one topic per array, no
     tagged fields): one event each, JSON built with Arrow string kernels.
2. Direct struct readers in Python for GroupMetadata values v0-v3 and KIP-848 type 5 (with or
   without the classic-member tag): `fast_group_metadata`, `fast_consumer_group_record`. Only
   group, kind, generation, member and data come from Python; the other columns of their event
   batch are taken from the input batch (`_direct_rows`).
3. The full decoder for everything else: unknown versions, trailing bytes, tagged fields,
   non-ASCII metadata, long varints, anything corrupt. It names the failing field and byte offset
   in the quarantine record; tiers 1 and 2 never quarantine, they hand such records down.

Commit rows of the same (cluster, group, topic, partition) from tier 1 and tier 3 are not merged
with each other: a batch has at most one per tier and key (sum and max merge the same way later).

Decode health: every batch also yields one `decode_stats` row per cluster (state key
`STATS_GROUP`) with record counts by key version, value version and outcome; the driver adds
them to `rebalance_monitor_offsets_records_total`.
"""
from __future__ import annotations

import json
import struct
from typing import Iterable, Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state import events as E
from streaming.spark.schema import EVENT_ARROW_SCHEMA, EVENT_COLUMNS, STATS_GROUP, STATS_KIND

__all__ = ["decode_arrow_batch", "offsets_arrow_to_events", "fast_commit_mask", "stats_row"]

_SOURCE_PREFIX = "__consumer_offsets-"
# One encoder for every event's data (json.dumps with arguments builds a new one per call).
_JSON = json.JSONEncoder(separators=(",", ":"), sort_keys=True, default=str).encode


# --------------------------------------------------------------------------- buffer access
def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _safe(data: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    return np.clip(pos, 0, max(0, len(data) - width))


def _be(data: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """Big-endian signed ints of `width` bytes at `pos` (positions are clipped into the buffer;
    callers mask the rows where they were out of range)."""
    if len(pos) == 0:
        return np.zeros(0, dtype=np.int64)
    if len(data) < width:
        return np.zeros(len(pos), dtype=np.int64)
    # An overlapping view: element i is the `width` bytes starting at byte i, so one gather reads
    # every value (a 2-D gather of single bytes costs 2-4x more).
    windows = np.ndarray(shape=(len(data) - width + 1,), dtype=dtype, buffer=data, strides=(1,))
    return windows[_safe(data, pos, width)].astype(np.int64)


def _repeated(text: str, n: int) -> pa.Array:
    """A string array of n copies of `text`, built from its buffers (pa.array over a NumPy object
    array converts every element)."""
    raw = text.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _bool(arr, n: int, default: bool) -> np.ndarray:
    if arr is None:
        return np.full(n, default)
    if arr.null_count:
        arr = pc.fill_null(arr, default)
    return arr.to_numpy(zero_copy_only=False).astype(bool)


def _int(arr, fill: int = -1) -> np.ndarray:
    if arr.null_count:
        arr = pc.fill_null(arr, fill)
    return arr.to_numpy(zero_copy_only=False).astype(np.int64)


# --------------------------------------------------------------------------- fast path
def fast_commit_mask(batch: pa.RecordBatch) -> dict:
    """Decode the plain offset commits of a batch with NumPy.

    Returns {"mask": rows taken by the fast path, "offset", "commit_ts", "key_type",
    "value_version"} (arrays over all rows; meaningful where mask is set)."""
    n = batch.num_rows
    names = batch.schema.names
    col = batch.column
    eof = _bool(col(names.index("eof")), n, False)
    error_ok = col(names.index("error")).is_null().to_numpy(zero_copy_only=False)
    key = col(names.index("key"))
    value = col(names.index("value"))
    kvalid = key.is_valid().to_numpy(zero_copy_only=False)
    vvalid = value.is_valid().to_numpy(zero_copy_only=False)
    ks, kl, kd = _binary_parts(key)
    vs, vl, vd = _binary_parts(value)
    key_ok = ~eof & error_ok & kvalid & (kl >= 10)
    # key: type, group, topic, partition (exact length: anything else goes to the full decoder)
    ktype = _be(kd, ks, 2, ">i2")
    key_ok &= (ktype == 0) | (ktype == 1)
    glen = _be(kd, ks + 2, 2, ">i2")
    key_ok &= (glen >= 0) & (4 + glen + 2 <= kl)
    tpos = ks + 4 + np.where(key_ok, glen, 0)
    tlen = _be(kd, tpos, 2, ">i2")
    key_ok &= (tlen >= 0) & (kl == 4 + glen + 2 + tlen + 4)
    tomb = key_ok & ~vvalid
    mask = key_ok & vvalid & (vl >= 20)
    # value: version, offset, metadata, commit timestamp
    vver = _be(vd, vs, 2, ">i2")
    mask &= (vver >= 0) & (vver <= 4)
    offset = _be(vd, vs + 2, 8, ">i8")
    flexible = vver == 4
    mlen_pos = vs + np.where(vver >= 3, 14, 10)
    mlen16 = _be(vd, mlen_pos, 2, ">i2")
    mvar = vd[_safe(vd, mlen_pos, 1)].astype(np.int64)          # v4: compact length (1 byte)
    mlen = np.where(flexible, mvar - 1, mlen16)
    mask &= np.where(flexible, (mvar >= 1) & (mvar < 0x80), mlen16 >= 0)
    mlen = np.where(mask, mlen, 0)
    mstart = mlen_pos + np.where(flexible, 1, 2)
    cts_pos = mstart + mlen
    expected = (cts_pos - vs) + 8 + np.where(vver == 1, 8, 0) + np.where(flexible, 1, 0)
    mask &= vl == expected
    cts = _be(vd, cts_pos, 8, ">i8")
    if flexible.any():   # v4: the tagged-field section must be empty (tags -> full decoder)
        tags = vd[_safe(vd, cts_pos + 8, 1)]
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


def _gather_strings(data: np.ndarray, starts: np.ndarray, lens: np.ndarray, binary: bool = False) -> pa.Array:
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


# binary_slice needs an explicit stop (None fails in pyarrow 26); keys are far shorter.
_MAX_KEY = 1 << 30

_JSON_SAFE = np.zeros(256, dtype=bool)
_JSON_SAFE[0x20:0x7F] = True
_JSON_SAFE[[0x22, 0x5C]] = False   # '"' and '\\' need escaping


def _look_up_clusters(batch: pa.RecordBatch, fast: dict, clusters: dict[str, str]) -> None:
    """Map the batch's source ids to cluster names once (a batch usually has one source)."""
    enc = pc.fill_null(batch.column(batch.schema.names.index("source_id")), "").dictionary_encode()
    fast["sources"] = enc.dictionary.to_pylist()
    names = [clusters.get(x, "default") for x in fast["sources"]]
    fast["source_index"] = enc.indices
    fast["source_index_np"] = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    fast["cluster_dict"] = pa.array(names, pa.string())
    fast["single_cluster"] = names[0] if len(set(names)) == 1 else None


def _cluster_column(batch: pa.RecordBatch, fast: dict, clusters: dict[str, str], rows: np.ndarray) -> pa.Array:
    """The cluster name of each of `rows`, from its input's source id (fast_commit_mask looked the
    batch's source ids up once)."""
    if fast["single_cluster"] is not None:
        return _repeated(fast["single_cluster"], len(rows))
    return fast["cluster_dict"].take(fast["source_index"].take(pa.array(rows)))


def _source_ranks(part: np.ndarray) -> tuple[np.ndarray, int]:
    """Rank of each row's source string `__consumer_offsets-<partition>` among the batch's
    (string order: "-10" sorts before "-2"), and how many there are."""
    small = len(part) and part.min() >= 0 and part.max() < (1 << 20)
    if small:                                   # partitions are small numbers: no sort
        present = np.zeros(int(part.max()) + 1, dtype=bool)
        present[part] = True
        uniq = np.flatnonzero(present)
    else:
        uniq = np.unique(part)
    order = sorted(range(len(uniq)), key=lambda i: _SOURCE_PREFIX + str(uniq[i]))
    rank_of = np.empty(len(uniq), dtype=np.int64)
    rank_of[order] = np.arange(len(uniq))
    if small:
        by_value = np.zeros(len(present), dtype=np.int64)
        by_value[uniq] = rank_of
        return by_value[part], len(uniq)
    return rank_of[np.searchsorted(uniq, part)], len(uniq)


def _reference_order(ts: np.ndarray, prank: np.ndarray, offset: np.ndarray, n_ranks: int) -> np.ndarray:
    """The permutation sorting rows by (ts, prank, offset). Rows of one partition arrive in offset
    order, so a stable sort of one packed (ts, prank) key is enough (several times cheaper than a
    three-key lexsort); lexsort when the key would overflow or the arrival order is not that."""
    if len(ts) == 0:
        return np.zeros(0, dtype=np.int64)
    t0 = int(ts.min())
    if (int(ts.max()) - t0 + 1) * max(1, n_ranks) < (1 << 62):
        packed = (ts - t0) * max(1, n_ranks) + prank
        perm = np.argsort(packed, kind="stable")
        p, o = packed[perm], offset[perm]
        if not ((p[1:] == p[:-1]) & (o[1:] < o[:-1])).any():
            return perm
    return np.lexsort((offset, prank, ts))


def _commit_rows(batch: pa.RecordBatch, fast: dict, clusters: dict[str, str]) -> Optional[pa.RecordBatch]:
    """Aggregate the fast rows per (cluster, group, topic, partition): one event row each."""
    mask = fast["mask"]
    rows = np.flatnonzero(mask)
    if len(rows) == 0:
        return None
    names = batch.schema.names
    sel = pa.array(rows)
    part = _int(batch.column(names.index("partition")).take(sel))
    rec_offset = _int(batch.column(names.index("offset")).take(sel))
    ts = _int(batch.column(names.index("timestamp_ms")).take(sel), 0)
    cluster = _cluster_column(batch, fast, clusters, rows)
    # the position of each row in the reference's ordering (ts, source_id string, offset)
    prank, n_ranks = _source_ranks(part)
    perm = _reference_order(ts, prank, rec_offset, n_ranks)
    position = np.empty(len(rows), dtype=np.int64)
    position[perm] = np.arange(len(rows))
    # the key without its type prefix identifies (group, topic, partition)
    ks, kd = fast["key_starts"][rows], fast["key_data"]
    kbody = pc.binary_slice(batch.column(names.index("key")).take(sel), 2, _MAX_KEY)
    table = pa.table({"cluster": cluster, "kbody": kbody, "offset": fast["offset"][rows],
                      "cts": fast["commit_ts"][rows], "pos": position,
                      "first": np.arange(len(rows))})
    single = fast["single_cluster"]
    # One cluster (the usual batch): hashing the key alone is a third cheaper.
    agg = table.group_by(["kbody"] if single is not None else ["cluster", "kbody"], use_threads=False).aggregate(
        [("offset", "max"), ("cts", "max"), ("pos", "max"), ("pos", "count"), ("first", "min")])
    agg = pa.RecordBatch.from_arrays([c.combine_chunks() for c in agg.columns], names=agg.column_names)
    agg_cluster = _repeated(single, agg.num_rows) if single is not None else agg.column("cluster")
    # decode group / topic / partition of each aggregated key from its first row
    first = agg.column("first_min").to_numpy()
    k0 = ks[first]
    glen = fast["glen"][rows][first]
    tlen = fast["tlen"][rows][first]
    group = _gather_strings(kd, k0 + 4, glen)
    topic = _gather_strings(kd, k0 + 6 + glen, tlen)
    kpart = _be(kd, k0 + 6 + glen + tlen, 4, ">i4")
    last = perm[agg.column("pos_max").to_numpy()]
    n_out = agg.num_rows
    topic_safe = _topic_json_safe(kd, k0 + 6 + glen, tlen)
    cts_s = pc.cast(agg.column("cts_max"), pa.string())
    cnt_s = pc.cast(agg.column("pos_count"), pa.string())
    off_s = pc.cast(agg.column("offset_max"), pa.string())
    kpart_s = pc.cast(pa.array(kpart), pa.string())
    data_json = pc.binary_join_element_wise(
        '{"commit_ts_ms":', cts_s, ',"count":', cnt_s, ',"offset":', off_s, ',"partition":', kpart_s,
        ',"topic":"', topic, '"}', "")
    if not topic_safe.all():
        py = data_json.to_pylist()
        t_py, c_py, n_py, o_py = topic.to_pylist(), agg.column("cts_max").to_pylist(), \
            agg.column("pos_count").to_pylist(), agg.column("offset_max").to_pylist()
        for i in np.flatnonzero(~topic_safe):
            py[i] = json.dumps({"topic": t_py[i], "partition": int(kpart[i]), "offset": o_py[i],
                                "commit_ts_ms": c_py[i], "count": n_py[i]}, separators=(",", ":"),
                               sort_keys=True)
        data_json = pa.array(py, pa.string())
    if isinstance(data_json, pa.ChunkedArray):
        data_json = data_json.combine_chunks()
    last_part = pa.array(part[last])
    null_i32 = pa.nulls(n_out, pa.int32())
    null_s = pa.nulls(n_out, pa.string())
    return pa.RecordBatch.from_arrays([
        agg_cluster, group, pa.array(ts[last]),
        _repeated(E.SOURCE_OFFSETS, n_out),
        pc.binary_join_element_wise(_SOURCE_PREFIX, pc.cast(last_part, pa.string()), ""),
        pa.array(rec_offset[last]), _repeated(E.OFFSET_COMMIT, n_out),
        null_i32, null_i32, null_s, null_s, data_json,
    ], schema=EVENT_ARROW_SCHEMA)


def _tombstone_rows(batch: pa.RecordBatch, fast: dict, clusters: dict[str, str]) -> Optional[pa.RecordBatch]:
    """Offset tombstones (key types 0/1, null value): one `offset_tombstone` event each."""
    rows = np.flatnonzero(fast["tomb"])
    if len(rows) == 0:
        return None
    names = batch.schema.names
    sel = pa.array(rows)
    cluster = _cluster_column(batch, fast, clusters, rows)
    kd, k0 = fast["key_data"], fast["key_starts"][rows]
    glen, tlen = fast["glen"][rows], fast["tlen"][rows]
    group = _gather_strings(kd, k0 + 4, glen)
    topic = _gather_strings(kd, k0 + 6 + glen, tlen)
    kpart = pa.array(_be(kd, k0 + 6 + glen + tlen, 4, ">i4"))
    data_json = pc.binary_join_element_wise('{"partition":', pc.cast(kpart, pa.string()), ',"topic":"', topic,
                                            '"}', "")
    safe = _topic_json_safe(kd, k0 + 6 + glen, tlen)
    if not safe.all():
        py, t_py, p_py = data_json.to_pylist(), topic.to_pylist(), kpart.to_pylist()
        for i in np.flatnonzero(~safe):
            py[i] = json.dumps({"topic": t_py[i], "partition": p_py[i]}, separators=(",", ":"), sort_keys=True)
        data_json = pa.array(py, pa.string())
    part = batch.column(names.index("partition")).take(sel)
    n = len(rows)
    null_i32, null_s = pa.nulls(n, pa.int32()), pa.nulls(n, pa.string())
    return pa.RecordBatch.from_arrays([
        cluster, group, batch.column(names.index("timestamp_ms")).take(sel).cast(pa.int64()),
        _repeated(E.SOURCE_OFFSETS, n),
        pc.binary_join_element_wise(_SOURCE_PREFIX, pc.cast(part, pa.string()), ""),
        batch.column(names.index("offset")).take(sel).cast(pa.int64()),
        _repeated(E.OFFSET_TOMBSTONE, n),
        null_i32, null_i32, null_s, null_s, data_json,
    ], schema=EVENT_ARROW_SCHEMA)


# KIP-848 records (types 3, 6, 7, 8 with the common one-topic layouts) and tombstones of types
# 2-23: per-row events built from the buffers. Kinds and data as offsets_decoder._event_fields.
_KIND_BY_TYPE = [E.CG_OTHER] * 24
_KIND_BY_TYPE[2] = E.GROUP_TOMBSTONE
_KIND_BY_TYPE[3], _KIND_BY_TYPE[5], _KIND_BY_TYPE[6] = E.CG_EPOCH, E.CG_MEMBER, E.CG_TARGET_EPOCH
_KIND_BY_TYPE[7], _KIND_BY_TYPE[8] = E.CG_TARGET_MEMBER, E.CG_MEMBER_ASSIGNMENT
_MEMBER_KEY = np.zeros(24, dtype=bool)
_MEMBER_KEY[[5, 7, 8, 10, 13, 14, 19, 21, 22]] = True


def _tombstone_json_by_type() -> list:
    from streaming.offsets.decoder import RECORD_TYPE_NAMES
    out = []
    for t in range(24):
        if t == 2 or t not in RECORD_TYPE_NAMES:
            out.append(None)
        elif t in (3, 5, 6, 7, 8):
            out.append('{"tombstone":true}')
        else:
            out.append(json.dumps({"type": t, "type_name": RECORD_TYPE_NAMES[t], "tombstone": True},
                                  separators=(",", ":"), sort_keys=True))
    return out


_TOMBSTONE_JSON = _tombstone_json_by_type()
_STATE_JSON = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS", 127: "UNKNOWN"}


def _consumer_group_rows(batch: pa.RecordBatch, fast: dict, clusters: dict[str, str]
                         ) -> tuple[list, np.ndarray]:
    n_all = batch.num_rows
    kt = fast["key_type"]
    kl = fast["key_lengths"]
    known = (kt >= 2) & (kt <= 23) & (kt != 16) & (kt != 18)
    cand_rows = np.flatnonzero(fast["base_ok"] & (kl >= 4) & known)
    taken = np.zeros(n_all, dtype=bool)
    if len(cand_rows) == 0:
        return [], taken
    # From here on every array covers the candidate rows only (commits are most of a batch).
    n = len(cand_rows)
    cand = np.ones(n, dtype=bool)
    kt, kl = kt[cand_rows], kl[cand_rows]
    ks, kd = fast["key_starts"][cand_rows], fast["key_data"]
    member_keyed = _MEMBER_KEY[np.clip(kt, 0, 23)]
    glen = _be(kd, ks + 2, 2, ">i2")
    cand &= (glen >= 0) & (4 + glen <= kl)
    mpos = ks + 4 + np.where(cand, glen, 0)
    mlen = np.where(member_keyed, _be(kd, mpos, 2, ">i2"), 0)
    cand &= np.where(member_keyed, (mlen >= 0) & (kl == 4 + glen + 2 + mlen), kl == 4 + glen)
    vvalid = fast["vvalid"][cand_rows]
    vs, vl, vd = fast["value_starts"][cand_rows], fast["value_lengths"][cand_rows], fast["value_data"]
    tomb = cand & ~vvalid
    val = cand & vvalid & (vl >= 3) & (fast["value_version"][cand_rows] == 0)
    b = lambda off: vd[_safe(vd, vs + off, 1)].astype(np.int64)   # noqa: E731 - one byte at vs+off
    # types 3 and 6: Epoch / AssignmentEpoch int32, no tags
    epoch_rows = val & ((kt == 3) | (kt == 6)) & (vl == 7) & (b(6) == 0)
    # type 7: one topic, one-byte partition count, no tags
    k7 = b(19) - 1
    t7 = val & (kt == 7) & (b(2) == 2) & (k7 >= 0) & (b(19) < 0x80) & (vl == 22 + 4 * k7)
    t7 &= (b(20 + 4 * np.where(t7, k7, 0)) == 0) & (b(21 + 4 * np.where(t7, k7, 0)) == 0)
    # type 8: epochs, state, then two arrays of zero or one topic each
    p = np.full(n, 11, dtype=np.int64)
    ok8 = val & (kt == 8) & (vl >= 14)
    counts = []
    for _ in range(2):
        c = b(p)
        one = c == 2
        k = np.where(one, b(p + 17) - 1, 0)
        ok8 &= ((c == 1) | (one & (b(p + 17) >= 1) & (b(p + 17) < 0x80)))
        after = np.where(one, p + 18 + 4 * k, p + 1)
        ok8 &= np.where(one, (after < vl) & (b(np.where(ok8, after, 0)) == 0), True)
        counts.append(np.where(one, k, 0))
        p = np.where(one, after + 1, after)
    ok8 &= (vl == p + 1) & (b(np.where(ok8, p, 0)) == 0)
    take = tomb | epoch_rows | t7 | ok8
    rows = np.flatnonzero(take)
    if len(rows) == 0:
        return [], taken
    took = cand_rows[rows]
    taken[took] = True
    group = _gather_strings(kd, ks[rows] + 4, glen[rows])
    mk = member_keyed[rows]
    member = _gather_strings(kd, np.where(mk, mpos[rows] + 2, 0), np.where(mk, mlen[rows], 0))
    member = pc.if_else(pa.array(mk), member, pa.nulls(len(rows), pa.string()))
    ktr = kt[rows]
    kind = pa.array(_KIND_BY_TYPE, pa.string()).take(pa.array(ktr))
    generation = pa.array(np.where(epoch_rows[rows], _be(vd, vs[rows] + 2, 4, ">i4"), 0).astype(np.int32),
                          mask=~epoch_rows[rows])
    # data_json per category
    tomb_json = pa.array(_TOMBSTONE_JSON, pa.string()).take(pa.array(ktr))
    s8 = _be(vd, vs[rows] + 10, 1, ">i1")
    names = pa.array([_STATE_JSON.get(int(x), "UNKNOWN") for x in range(-128, 128)], pa.string())
    j8 = pc.binary_join_element_wise(
        '{"assigned":', pc.cast(pa.array(counts[0][rows]), pa.string()),
        ',"member_epoch":', pc.cast(pa.array(_be(vd, vs[rows] + 2, 4, ">i4")), pa.string()),
        ',"pending_revocation":', pc.cast(pa.array(counts[1][rows]), pa.string()),
        ',"previous_member_epoch":', pc.cast(pa.array(_be(vd, vs[rows] + 6, 4, ">i4")), pa.string()),
        ',"state":', pc.cast(pa.array(s8), pa.string()),
        ',"state_name":"', names.take(pa.array(s8 + 128)), '","tombstone":false}', "")
    j7 = pc.binary_join_element_wise('{"partitions":', pc.cast(pa.array(k7[rows]), pa.string()),
                                     ',"tombstone":false}', "")
    data = pc.if_else(pa.array(tomb[rows]), tomb_json,
                      pc.if_else(pa.array(epoch_rows[rows]), pa.scalar('{"tombstone":false}'),
                                 pc.if_else(pa.array(t7[rows]), j7, j8)))
    names_ = batch.schema.names
    sel = pa.array(took)
    cluster = _cluster_column(batch, fast, clusters, took)
    part = batch.column(names_.index("partition")).take(sel)
    m = len(rows)
    out = pa.RecordBatch.from_arrays([
        cluster, group, batch.column(names_.index("timestamp_ms")).take(sel).cast(pa.int64()),
        _repeated(E.SOURCE_OFFSETS, m),
        pc.binary_join_element_wise(_SOURCE_PREFIX, pc.cast(part, pa.string()), ""),
        batch.column(names_.index("offset")).take(sel).cast(pa.int64()), kind,
        pa.nulls(m, pa.int32()), generation, member, pa.nulls(m, pa.string()), data,
    ], schema=EVENT_ARROW_SCHEMA)
    return [out], taken


def _topic_json_safe(data: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    ok = np.ones(len(lens), dtype=bool)
    total = int(lens.sum())
    if total == 0:
        return ok
    offs = np.concatenate(([0], np.cumsum(lens)[:-1]))
    idx = np.repeat(starts - offs, lens) + np.arange(total)
    bad = ~_JSON_SAFE[data[idx]]
    if bad.any():
        owner = np.repeat(np.arange(len(lens)), lens)
        ok[np.unique(owner[bad])] = False
    return ok


# --------------------------------------------------------------------------- slow path
def _direct_rows(batch: pa.RecordBatch, rows: np.ndarray, fast: dict, clusters: dict[str, str],
                 stats: dict) -> tuple[Optional[pa.RecordBatch], np.ndarray]:
    """Tier 2 over `rows`: the records the direct readers take, as one event batch (only group,
    kind, generation, member and data come from Python; the other columns are taken from the
    batch), and the rows left for the full decoder."""
    if len(rows) == 0:
        return None, rows
    cand = rows[fast["base_ok"][rows] & (fast["key_lengths"][rows] >= 4)]
    names = batch.schema.names
    sel = pa.array(cand)
    keys = batch.column(names.index("key")).take(sel).to_pylist()
    values = batch.column(names.index("value")).take(sel).to_pylist()
    source = fast["source_index_np"][cand].tolist()
    taken, groups, kinds, generations, members, datas = [], [], [], [], [], []
    counts: dict = {}
    for i, (key, value) in enumerate(zip(keys, values)):
        if value is not None and key[0] == 0 and key[1] == 2:
            gm = fast_group_metadata(key, value)
            if gm is not None:
                group, generation, data = gm
                taken.append(i)
                groups.append(group)
                kinds.append(E.GROUP_METADATA)
                generations.append(generation)
                members.append(None)
                datas.append(_JSON(data))
                k = (source[i], "2", str(data["value_version"]))
                counts[k] = counts.get(k, 0) + 1
                continue
        cg = fast_consumer_group_record(key, value)        # KIP-848 records, tombstones
        if cg is not None:
            group, kind, generation, member_id, data, kv, vv = cg
            taken.append(i)
            groups.append(group)
            kinds.append(kind)
            generations.append(generation)
            members.append(member_id)
            datas.append(_JSON(data) if data else None)
            k = (source[i], str(kv), "null" if vv is None else str(vv))
            counts[k] = counts.get(k, 0) + 1
    for (si, kv, vv), c in counts.items():
        per = stats.setdefault(clusters.get(fast["sources"][si], "default"), {})
        per[(kv, vv, "decoded")] = per.get((kv, vv, "decoded"), 0) + c
    if not taken:
        return None, rows
    took = cand[taken]
    sel = pa.array(took)
    m = len(took)
    out = pa.RecordBatch.from_arrays([
        _cluster_column(batch, fast, clusters, took), pa.array(groups, pa.string()),
        batch.column(names.index("timestamp_ms")).take(sel).cast(pa.int64()),
        _repeated(E.SOURCE_OFFSETS, m),
        pc.binary_join_element_wise(_SOURCE_PREFIX, pc.cast(batch.column(names.index("partition")).take(sel),
                                                            pa.string()), ""),
        batch.column(names.index("offset")).take(sel).cast(pa.int64()), pa.array(kinds, pa.string()),
        pa.nulls(m, pa.int32()), pa.array(generations, pa.int32()), pa.array(members, pa.string()),
        pa.nulls(m, pa.string()), pa.array(datas, pa.string()),
    ], schema=EVENT_ARROW_SCHEMA)
    left = np.ones(len(rows), dtype=bool)
    left[np.searchsorted(rows, took)] = False
    return out, rows[left]


def _slow_rows(batch: pa.RecordBatch, rows: np.ndarray, clusters: dict[str, str],
               stats: dict) -> list[tuple]:
    """Tier 3: the full decoder, per record."""
    from streaming.logs.step import decode_offsets_rows   # the reference (per-record Python)
    if len(rows) == 0:
        return []
    sub = batch.take(pa.array(rows))
    cols = [sub.column(sub.schema.names.index(c)).to_pylist() for c in
            ("source_id", "seq", "partition", "offset", "timestamp_ms", "key", "value", "error", "eof")]
    reasons = sub.column(sub.schema.names.index("error_reason")).to_pylist() \
        if "error_reason" in sub.schema.names else [None] * len(rows)
    return decode_offsets_rows(list(zip(*cols, reasons)), clusters, stats=stats)


def stats_row(cluster: str, ts_ms: int, counts: dict) -> tuple:
    """One decode-health row: counts {(key_version, value_version, outcome): n}."""
    payload = {"counts": sorted([k[0], k[1], k[2], n] for k, n in counts.items())}
    return (cluster, STATS_GROUP, int(ts_ms), E.SOURCE_OFFSETS, "decode-stats", 0, STATS_KIND,
            None, None, None, None, json.dumps(payload, separators=(",", ":")))


def _rows_to_batch(rows: list[tuple]) -> pa.RecordBatch:
    columns = list(zip(*rows)) if rows else [[] for _ in EVENT_COLUMNS]
    return pa.RecordBatch.from_arrays([pa.array(list(c), f.type) for c, f in zip(columns, EVENT_ARROW_SCHEMA)],
                                      schema=EVENT_ARROW_SCHEMA)


def decode_arrow_batch(batch: pa.RecordBatch, clusters: dict[str, str], with_stats: bool = True
                       ) -> list[pa.RecordBatch]:
    """One raw-offsets Arrow batch -> event batches (fast commits, everything else, stats)."""
    n = batch.num_rows
    if n == 0:
        return []
    fast = fast_commit_mask(batch)
    _look_up_clusters(batch, fast, clusters)
    out: list[pa.RecordBatch] = []
    try:
        fast_batches = [b for b in (_commit_rows(batch, fast, clusters), _tombstone_rows(batch, fast, clusters))
                        if b is not None]
        mask = fast["mask"] | fast["tomb"]
        cg_batches, cg_mask = _consumer_group_rows(batch, fast, clusters)
        fast_batches += cg_batches
        mask = mask | cg_mask
    except (pa.ArrowInvalid, UnicodeDecodeError):
        # a group or topic name that is not UTF-8: let the full decoder quarantine those records
        mask = np.zeros(n, dtype=bool)
        fast_batches = []
    out.extend(fast_batches)
    stats: dict = {}
    direct, rest = _direct_rows(batch, np.flatnonzero(~mask), fast, clusters, stats)
    if direct is not None:
        out.append(direct)
    slow = _slow_rows(batch, rest, clusters, stats)
    if with_stats:
        _fast_stats(batch, fast, mask, clusters, stats)
        ts = _int(batch.column(batch.schema.names.index("timestamp_ms")), 0)
        eof = _bool(batch.column(batch.schema.names.index("eof")), n, False)
        real = ts[~eof]
        if len(real) and stats:
            when = int(real.max())
            for cluster, counts in sorted(stats.items()):
                slow.append(stats_row(cluster, when, counts))
    if slow:
        out.append(_rows_to_batch(slow))
    return out


def _fast_stats(batch: pa.RecordBatch, fast: dict, mask: np.ndarray, clusters: dict, stats: dict) -> None:
    rows = np.flatnonzero(mask)
    if len(rows) == 0:
        return
    sources = fast["sources"]
    n_src = max(1, len(sources))
    idx = fast["source_index_np"][rows]
    vv = fast["value_version"][rows] + 1                  # -1 (tombstone) .. 4 -> 0 .. 5
    code = (fast["key_type"][rows] * 6 + vv) * n_src + idx
    counts = np.bincount(code)                              # codes are small: no sort needed
    values = np.flatnonzero(counts)
    for v, c in zip(values.tolist(), counts[values].tolist()):
        rest, si = divmod(v, n_src)
        kt, vcode = divmod(rest, 6)
        key = (str(kt), "null" if vcode == 0 else str(vcode - 1), "decoded")
        per = stats.setdefault(clusters.get(sources[si], "default"), {})
        per[key] = per.get(key, 0) + c


def offsets_arrow_to_events(batches: Iterable[pa.RecordBatch], clusters: dict[str, str]
                            ) -> Iterator[pa.RecordBatch]:
    """The `mapInArrow` function of the offsets stream."""
    for batch in batches:
        yield from decode_arrow_batch(batch, clusters)


# --------------------------------------------------------------------------- group metadata
# GroupMetadata values (type 2, v0-v3) are the second largest share of the topic after commits in
# rebalance-heavy clusters. This reader builds the same event as offsets_decoder + parse (the
# full decoder stays the reference; tests compare the two on real, awkward and random records)
# with direct struct reads and no per-field bookkeeping. Anything unusual (flexible v4, trailing
# bytes, a blob that does not decode, bad UTF-8, any bound overrun) returns None and the record
# goes to the full decoder, which names the failing field.

_H = struct.Struct(">h").unpack_from
_I = struct.Struct(">i").unpack_from
_Q = struct.Struct(">q").unpack_from


class _Bad(Exception):
    pass


def _str(b: bytes, p: int, nullable: bool = False):
    if p + 2 > len(b):
        raise _Bad
    n = _H(b, p)[0]
    p += 2
    if n < 0:
        if n == -1 and nullable:
            return None, p
        raise _Bad
    if p + n > len(b):
        raise _Bad
    return b[p:p + n].decode("utf-8"), p + n


def _i32(b: bytes, p: int):
    if p + 4 > len(b):
        raise _Bad
    return _I(b, p)[0], p + 4


def _topic_partitions(b: bytes, p: int, end: int):
    """[]{topic string, partitions []int32} in b[:end]: ([(topic, partition count, position of
    the ids)], new position). Overruns inside raise struct.error, the last one _Bad."""
    n = _I(b, p)[0]
    p += 4
    if n < 0:
        raise _Bad
    out = []
    for _ in range(n):
        sl = _H(b, p)[0]
        q = p + 2 + sl
        k = _I(b, q)[0]
        if sl < 0 or k < 0:
            raise _Bad
        out.append((b[p + 2:q].decode("utf-8"), k, q + 4))
        p = q + 4 + 4 * k
    if p > end:
        raise _Bad
    return out, p


def _read_subscription(s: bytes, em: dict) -> None:
    """ConsumerProtocolSubscription v0-v3 (trailing bytes tolerated, as the reference does)."""
    end = len(s)
    version, n = _H(s, 0)[0], _I(s, 2)[0]
    if version < 0 or n < 0:
        raise _Bad
    p = 6
    topics = []
    for _ in range(n):
        sl = _H(s, p)[0]
        q = p + 2 + sl
        if sl < 0 or q > end:
            raise _Bad
        topics.append(s[p + 2:q].decode("utf-8"))
        p = q
    n = _I(s, p)[0]                       # user data (nullable bytes)
    p += 4
    if n >= 0:
        p += n
        if p > end:
            raise _Bad
    elif n != -1:
        raise _Bad
    owned = generation = rack = None
    if version >= 1:
        tps, p = _topic_partitions(s, p, end)
        owned = 0
        for tp in tps:
            owned += tp[1]
    if version >= 2:
        generation = _I(s, p)[0]
        p += 4
        if generation < 0:
            generation = None
    if version >= 3:
        if _H(s, p)[0] == -1:             # the usual: no rack
            p += 2
        else:
            rack, p = _str(s, p, nullable=True)
    em["topics"] = topics
    em["owned_partitions"] = owned
    em["member_generation"] = generation
    em["rack_id"] = rack


_INT32S: dict = {}   # partition count -> unpack_from of that many int32s


def _read_assignment(a: bytes, em: dict) -> None:
    """ConsumerProtocolAssignment v0-v3: partition count, topics and the sorted `topic:partition`
    ids (the reference decoder's member field `partitions`, which the diagnosis' commit evidence
    uses)."""
    end = len(a)
    if _H(a, 0)[0] < 0:
        raise _Bad
    tps, p = _topic_partitions(a, 2, end)
    n = _I(a, p)[0]                       # user data (nullable bytes)
    if (n < 0 and n != -1) or p + 4 + max(n, 0) > end:
        raise _Bad
    total = 0
    ids: list = []
    for topic, k, at in tps:
        total += k
        if k:
            unpack = _INT32S.get(k)
            if unpack is None:
                unpack = _INT32S[k] = struct.Struct(f">{k}i").unpack_from
            prefix = topic + ":"
            ids += [prefix + str(i) for i in unpack(a, at)]
    ids.sort()
    em["assigned_partitions"] = total
    em["partitions"] = ids
    em["assigned_topics"] = [tps[0][0]] if len(tps) == 1 else sorted({tp[0] for tp in tps})


def fast_group_metadata(key: bytes, value: bytes):
    """(group, generation, data) as the full decoder would give them, or None.

    The string reads are written out in line rather than calling a helper per field: this loop
    runs for every member of every GroupMetadata record, and a call per field cost a third of it."""
    try:
        kl = len(key)
        if kl < 4 or key[0] != 0 or key[1] != 2:
            return None
        n = _H(key, 2)[0]
        if n < 0 or 4 + n != kl:
            return None
        group = key[4:].decode("utf-8")
        b = value
        end = len(b)
        version = _H(b, 0)[0]
        if not 0 <= version <= 3:
            return None
        n = _H(b, 2)[0]
        p = 4 + n
        if n < 0 or p > end:
            return None
        protocol_type = b[4:p].decode("utf-8")
        generation = _I(b, p)[0]
        p += 4
        protocol, p = _str(b, p, nullable=True)
        leader, p = _str(b, p, nullable=True)
        state_ts = None
        if version >= 2:
            state_ts = _Q(b, p)[0]
            p += 8
            if state_ts == -1:
                state_ts = None
        count = _I(b, p)[0]
        p += 4
        if count < 0:
            return None
        consumer = protocol_type == "consumer"
        members = []
        for _ in range(count):
            n = _H(b, p)[0]               # member id
            p += 2
            if n < 0 or p + n > end:
                return None
            member_id = b[p:p + n].decode("utf-8")
            p += n
            instance = None
            if version >= 3:
                if _H(b, p)[0] == -1:         # the usual: a dynamic member
                    p += 2
                else:
                    instance, p = _str(b, p, nullable=True)
            n = _H(b, p)[0]               # client id
            p += 2
            if n < 0 or p + n > end:
                return None
            client_id = b[p:p + n].decode("utf-8")
            p += n
            n = _H(b, p)[0]               # client host
            p += 2
            if n < 0 or p + n > end:
                return None
            client_host = b[p:p + n].decode("utf-8")
            p += n
            rebalance = None
            if version >= 1:
                rebalance = _I(b, p)[0]
                p += 4
            session = _I(b, p)[0]
            n = _I(b, p + 4)[0]           # subscription bytes
            p += 8
            if n < 0 or p + n > end:
                return None
            sub_at, sub_end = p, p + n
            n = _I(b, sub_end)[0]         # assignment bytes
            p = sub_end + 4
            if n < 0 or p + n > end:
                return None
            asg_at, p = p, p + n
            em = {"member_id": member_id, "group_instance_id": instance, "client_id": client_id,
                  "client_host": client_host, "session_timeout_ms": session,
                  "rebalance_timeout_ms": rebalance, "assigned_partitions": None, "partitions": None}
            if consumer:
                if sub_end > sub_at:
                    _read_subscription(b[sub_at:sub_end], em)
                if p > asg_at:
                    _read_assignment(b[asg_at:p], em)
                else:
                    em["assigned_partitions"] = 0
            members.append(em)
        if p != end:
            return None   # trailing bytes: the full decoder reports them
        data = {"protocol_type": protocol_type, "protocol": protocol, "leader": leader,
                "current_state_ts_ms": state_ts, "members": members, "value_version": version}
        return group, generation, data
    except (_Bad, UnicodeDecodeError, struct.error):
        return None


# --------------------------------------------------------------------------- KIP-848 and tombstones
# Same idea for the KIP-848 consumer-group records (types 3, 5, 6, 7, 8; flexible value version 0)
# and for tombstones of every type: direct reads of the common shapes (one-byte varints, no tagged
# fields), None for anything else so the full decoder handles it.

_MEMBER_KEYED = frozenset({5, 7, 8, 10, 13, 14, 19, 21, 22})
_TOMBSTONE_KINDS = {3: E.CG_EPOCH, 5: E.CG_MEMBER, 6: E.CG_TARGET_EPOCH, 7: E.CG_TARGET_MEMBER,
                    8: E.CG_MEMBER_ASSIGNMENT}
_STATE_NAMES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS", 127: "UNKNOWN"}


def _cstr(b: bytes, p: int, nullable: bool = False):
    """Compact string with a one-byte length (anything longer: _Bad, the full decoder reads it)."""
    if p >= len(b):
        raise _Bad
    n = b[p]
    if n >= 0x80:
        raise _Bad
    p += 1
    if n == 0:
        if nullable:
            return None, p
        raise _Bad
    n -= 1
    if p + n > len(b):
        raise _Bad
    return b[p:p + n].decode("utf-8"), p + n


def _no_tags(b: bytes, p: int) -> int:
    if p >= len(b) or b[p] != 0:
        raise _Bad
    return p + 1


def _cg_partitions(b: bytes, p: int):
    """[]{TopicId uuid, Partitions []int32, tags}: (partition count, new position)."""
    if p >= len(b) or not 0 < b[p] < 0x80:
        raise _Bad
    n = b[p] - 1
    p += 1
    total = 0
    for _ in range(n):
        p += 16
        if p >= len(b) or not 0 < b[p] < 0x80:
            raise _Bad
        k = b[p] - 1
        p += 1 + 4 * k
        if p > len(b):
            raise _Bad
        p = _no_tags(b, p)
        total += k
    return total, p


def _classic_member_tag(b: bytes, p: int):
    """Tag 0 of ConsumerGroupMemberMetadataValue (a member that joined with the classic protocol)
    at p, after the tag count: (classic, session timeout, position after the tag).
    Like the full decoder, reads within the tag's declared size, skips what it does not read and
    leaves the embedded subscriptions alone (their errors never fail the record)."""
    if p + 2 > len(b) or b[p] != 0 or b[p + 1] >= 0x80:
        raise _Bad                        # another tag, or a size varint longer than one byte
    stop = p + 2 + b[p + 1]
    if stop > len(b):
        raise _Bad
    p += 2
    if p >= stop or b[p] > 1:
        raise _Bad                        # nullable-struct marker: 0 = null, 1 = present
    if b[p] == 0:
        return False, None, stop
    session, p = _i32(b, p + 1)
    if p >= stop or not 0 < b[p] < 0x80:
        raise _Bad
    n = b[p] - 1
    p += 1
    for _ in range(n):                    # SupportedProtocols
        _, p = _cstr(b, p)                # Name
        if p >= len(b) or not 0 < b[p] < 0x80:
            raise _Bad                    # Metadata: compact bytes, one-byte length
        p += b[p]
        p = _no_tags(b, p)
    p = _no_tags(b, p)
    if p > stop:
        raise _Bad
    return True, session, stop


def _key_group_member(key: bytes, member: bool):
    group, p = _str(key, 2)
    member_id = None
    if member:
        member_id, p = _str(key, p)
    if p != len(key):
        raise _Bad
    return group, member_id


def fast_consumer_group_record(key: bytes, value):
    """(group, kind, generation, member_id, data, key_version, value_version) as the full decoder
    would give them for KIP-848 records (types 3, 5, 6, 7, 8) and tombstones of types 2-23, or
    None."""
    from streaming.offsets.decoder import RECORD_TYPE_NAMES
    try:
        if len(key) < 4:
            return None
        t = _H(key, 0)[0]
        name = RECORD_TYPE_NAMES.get(t)
        if name is None or t < 2 or t == 16:
            return None
        group, member_id = _key_group_member(key, t in _MEMBER_KEYED)
        if value is None:
            if t == 2:
                return group, E.GROUP_TOMBSTONE, None, None, {}, t, None
            kind = _TOMBSTONE_KINDS.get(t)
            if kind is None:
                return group, E.CG_OTHER, None, member_id, {"type": t, "type_name": name, "tombstone": True}, t, None
            return group, kind, None, member_id, {"tombstone": True}, t, None
        if t not in (3, 4, 5, 6, 7, 8) or len(value) < 3 or _H(value, 0)[0] != 0:
            return None
        b = value
        if t == 4:
            # ConsumerGroupPartitionMetadata: validated field by field, reported as cg_other.
            if not 0 < b[2] < 0x80:
                return None
            p = 3
            for _ in range(b[2] - 1):
                p += 16                                   # TopicId
                _, p = _cstr(b, p)                        # TopicName
                _, p = _i32(b, p)                         # NumPartitions
                if p >= len(b) or not 0 < b[p] < 0x80:
                    return None
                count = b[p] - 1
                p += 1
                for _ in range(count):                    # PartitionMetadata
                    _, p = _i32(b, p)
                    if p >= len(b) or not 0 < b[p] < 0x80:
                        return None
                    racks = b[p] - 1
                    p += 1
                    for _ in range(racks):
                        _, p = _cstr(b, p)
                    p = _no_tags(b, p)
                p = _no_tags(b, p)
            if _no_tags(b, p) != len(b):
                return None
            return group, E.CG_OTHER, None, None, {"type": 4, "type_name": name, "tombstone": False}, t, 0
        if t in (3, 6):
            if len(b) != 7 or b[6] != 0:
                return None
            epoch = _I(b, 2)[0]
            return group, E.CG_EPOCH if t == 3 else E.CG_TARGET_EPOCH, epoch, None, {"tombstone": False}, t, 0
        if t == 7:
            count, p = _cg_partitions(b, 2)
            if _no_tags(b, p) != len(b):
                return None
            return group, E.CG_TARGET_MEMBER, None, member_id, {"partitions": count, "tombstone": False}, t, 0
        if t == 8:
            if len(b) < 11:
                return None
            epoch, prev = _I(b, 2)[0], _I(b, 6)[0]
            state = struct.unpack_from(">b", b, 10)[0]
            assigned, p = _cg_partitions(b, 11)
            pending, p = _cg_partitions(b, p)
            if _no_tags(b, p) != len(b):
                return None
            return group, E.CG_MEMBER_ASSIGNMENT, None, member_id, {
                "member_epoch": epoch, "previous_member_epoch": prev, "state": state,
                "state_name": _STATE_NAMES.get(state, "UNKNOWN"), "assigned": assigned,
                "pending_revocation": pending, "tombstone": False}, t, 0
        # t == 5: member metadata, with or without the classic-member tag
        instance, p = _cstr(b, 2, True)
        rack, p = _cstr(b, p, True)
        client_id, p = _cstr(b, p)
        client_host, p = _cstr(b, p)
        if p >= len(b) or not 0 < b[p] < 0x80:
            return None
        n = b[p] - 1
        p += 1
        topics = []
        for _ in range(n):
            topic, p = _cstr(b, p)
            topics.append(topic)
        _, p = _cstr(b, p, True)            # SubscribedTopicRegex
        rebalance, p = _i32(b, p)
        _, p = _cstr(b, p, True)            # ServerAssignor
        classic, session = False, None
        if p < len(b) and b[p] == 1:        # one tagged field: ClassicMemberMetadata (tag 0)
            classic, session, p = _classic_member_tag(b, p + 1)
        else:
            p = _no_tags(b, p)
        if p != len(b):
            return None
        return group, E.CG_MEMBER, None, member_id, {
            "client_id": client_id, "client_host": client_host, "instance_id": instance, "rack_id": rack,
            "rebalance_timeout_ms": rebalance, "subscribed_topics": topics, "classic": classic,
            "session_timeout_ms": session, "tombstone": False}, t, 0
    except (_Bad, UnicodeDecodeError, struct.error):
        return None
