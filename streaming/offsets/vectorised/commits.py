"""Tier 1 of the vectorised decode for offset commits and their tombstones (key types 0/1):
NumPy over the buffers, commits reduced per (cluster, group, topic, partition) with Arrow's hash
aggregation, then packed per (cluster, group, source partition, record time) with a second one.
Each output row equals what the per-record reference gives after its own merge and pack
(streaming/offsets/per_record.py): per partition the max offset, max commit time, count, and the
position of the latest record in the reference's (time, source id, offset) order, and its next
two newest distinct commit times when it had more."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state import events as E
from streaming.offsets.records import OFFSETS_SOURCE_PREFIX
from streaming.offsets.vectorised.arrays import be, gather_strings, int_column, topic_json_safe
from streaming.offsets.vectorised.view import BatchView
from streaming.rows import event_batch, repeated

# binary_slice needs an explicit stop (None fails in pyarrow 26); keys are far shorter.
_MAX_KEY = 1 << 30


def source_ranks(part: np.ndarray) -> tuple[np.ndarray, int]:
    """Rank of each row's source string `__consumer_offsets-<partition>` among the batch's
    (string order: "-10" sorts before "-2"), and how many there are."""
    small = len(part) and part.min() >= 0 and part.max() < (1 << 20)
    if small:                                   # partitions are small numbers: no sort
        present = np.zeros(int(part.max()) + 1, dtype=bool)
        present[part] = True
        uniq = np.flatnonzero(present)
    else:
        uniq = np.unique(part)
    order = sorted(range(len(uniq)), key=lambda i: OFFSETS_SOURCE_PREFIX + str(uniq[i]))
    rank_of = np.empty(len(uniq), dtype=np.int64)
    rank_of[order] = np.arange(len(uniq))
    if small:
        by_value = np.zeros(len(present), dtype=np.int64)
        by_value[uniq] = rank_of
        return by_value[part], len(uniq)
    return rank_of[np.searchsorted(uniq, part)], len(uniq)


def reference_order(ts: np.ndarray, prank: np.ndarray, offset: np.ndarray, n_ranks: int) -> np.ndarray:
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


def _with_unsafe_topics(data_json: Any, safe: np.ndarray, docs: Any) -> pa.Array:
    """The JSON column with the rows whose topic name needs escaping rebuilt by json.dumps
    (`docs(i)`: the dict of row i)."""
    if not safe.all():
        py = data_json.to_pylist()
        for i in np.flatnonzero(~safe):
            py[i] = json.dumps(docs(i), separators=(",", ":"), sort_keys=True)
        data_json = pa.array(py, pa.string())
    if isinstance(data_json, pa.ChunkedArray):
        data_json = data_json.combine_chunks()
    return data_json


def commit_rows(view: BatchView) -> pa.RecordBatch | None:
    """Aggregate the tier-1 commits per (cluster, group, topic, partition): one event row each."""
    rows = np.flatnonzero(view.mask)
    if len(rows) == 0:
        return None
    sel = pa.array(rows)
    part = int_column(view.column("partition").take(sel))
    rec_offset = int_column(view.column("offset").take(sel))
    ts = int_column(view.column("timestamp_ms").take(sel), 0)
    # the position of each row in the reference's ordering (ts, source_id string, offset)
    prank, n_ranks = source_ranks(part)
    perm = reference_order(ts, prank, rec_offset, n_ranks)
    position = np.empty(len(rows), dtype=np.int64)
    position[perm] = np.arange(len(rows))
    # the key without its type prefix identifies (group, topic, partition)
    ks, kd = view.key_starts[rows], view.key_data
    kbody = pc.binary_slice(view.column("key").take(sel), 2, _MAX_KEY)
    table = pa.table({"cluster": view.cluster_column(rows), "kbody": kbody, "offset": view.offset[rows],
                      "cts": view.commit_ts[rows], "pos": position, "first": np.arange(len(rows))})
    single = view.single_cluster
    # One cluster (the usual batch): hashing the key alone is a third cheaper.
    agg = table.group_by(["kbody"] if single is not None else ["cluster", "kbody"], use_threads=False).aggregate(
        [("offset", "max"), ("cts", "max"), ("pos", "max"), ("pos", "count"), ("first", "min")])
    agg = pa.RecordBatch.from_arrays([c.combine_chunks() for c in agg.columns], names=agg.column_names)
    # decode group / topic / partition of each aggregated key from its first row
    first = agg.column("first_min").to_numpy()
    k0 = ks[first]
    glen = view.glen[rows][first]
    tlen = view.tlen[rows][first]
    topic = gather_strings(kd, k0 + 6 + glen, tlen)
    kpart = be(kd, k0 + 6 + glen + tlen, 4, ">i4")
    last = perm[agg.column("pos_max").to_numpy()]
    safe = topic_json_safe(kd, k0 + 6 + glen, tlen)
    cts, cnt, off = (agg.column(c) for c in ("cts_max", "pos_count", "offset_max"))
    earlier = _earlier_times([table.column("kbody")] if single is not None else
                             [table.column("cluster"), table.column("kbody")],
                             view.commit_ts[rows], first, cnt.to_numpy())
    topic_json = pc.binary_join_element_wise('"', topic, '"', "")
    if not safe.all():
        literal = topic_json.to_pylist()
        for i in np.flatnonzero(~safe):
            literal[i] = json.dumps(topic[i].as_py())
        topic_json = pa.array(literal, pa.string())
    # One entry per partition, as the reference packs it: [topic, partition, offset, commit_ts_ms, count]
    entry = pc.binary_join_element_wise(
        "[", topic_json, ",", pc.cast(pa.array(kpart), pa.string()), ",", pc.cast(off, pa.string()), ",",
        pc.cast(cts, pa.string()), ",", pc.cast(cnt, pa.string()), *earlier, "]", "")
    return _packed(agg.column("cluster") if single is None else None, single,
                   gather_strings(kd, k0 + 4, glen), ts[last], part[last], rec_offset[last], topic, kpart, entry)


def _earlier_times(keys: list[Any], cts: np.ndarray, first: np.ndarray, count: np.ndarray) -> list[pa.Array]:
    """The entry's optional fields after its count (E.COMMIT_FIELDS): per aggregated key (its first
    row `first`), ",<time>" for each of its next newest distinct commit times (up to
    E.COMMIT_TIMES_CARRIED in all), as one column: "" where it has no more; no column when no key
    had two commits (the usual live batch)."""
    if len(count) == 0 or int(count.max()) < 2:
        return []
    gid = np.zeros(len(cts), dtype=np.int64)
    for key in keys:
        enc = pc.dictionary_encode(key)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        gid = gid * len(enc.dictionary) + enc.indices.to_numpy().astype(np.int64)
    c0, span = int(cts.min()), int(cts.max()) - int(cts.min()) + 1
    if (int(gid.max()) + 1) * span < (1 << 62):     # one packed key: a plain sort
        packed = np.unique(gid * span + (cts - c0))  # sorted, distinct (group, time)
        g, c = packed // span, packed % span + c0
    else:
        order = np.lexsort((cts, gid))
        g, c = gid[order], cts[order]
        keep = np.ones(len(g), dtype=bool)
        keep[1:] = (g[1:] != g[:-1]) | (c[1:] != c[:-1])
        g, c = g[keep], c[keep]
    # Newest first: each group's times run from its newest down; its earlier times are the next
    # up to COMMIT_TIMES_CARRIED - 1 of its run, kept as one list per group, joined in one pass.
    g, c = g[::-1], c[::-1]
    start = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])        # each group's newest time
    length = np.diff(np.r_[start, len(g)])
    back = np.arange(len(g)) - np.repeat(start, length)        # 0 at the newest
    kept = np.minimum(length - 1, E.COMMIT_TIMES_CARRIED - 1)
    times = pa.ListArray.from_arrays(pa.array(np.r_[0, np.cumsum(kept)], pa.int32()),
                                     pc.cast(pa.array(c[(back >= 1) & (back < E.COMMIT_TIMES_CARRIED)]), pa.string()))
    # ... for each aggregated key (groups run in descending order here)
    run = len(start) - 1 - np.searchsorted(g[start][::-1], gid[first])
    text = pc.binary_join_element_wise(",", pc.binary_join(times, ","), "").take(pa.array(run))
    return [pc.if_else(pa.array(kept[run] > 0), text, "")]


def _packed(cluster: Any, single: str | None, group: pa.Array, ts: np.ndarray, source: np.ndarray, seq: np.ndarray,
            topic: pa.Array, partition: np.ndarray, entry: pa.Array) -> pa.RecordBatch:
    """The per-partition commits packed per (cluster, group, source partition, record time): one
    `offset_commits` event each, its entries in (topic, partition) order, its seq the latest
    (streaming/offsets/per_record.py pack_commits is the reference)."""
    columns = {"group": group, "ts": ts, "source": source, "seq": seq, "topic": topic, "partition": partition,
               "entry": entry}
    keys = ["group", "source", "ts"]
    if cluster is not None:
        columns["cluster"], keys = cluster, ["cluster", *keys]
    table = pa.table(columns)
    table = table.take(pc.sort_indices(table, [(k, "ascending") for k in keys + ["topic", "partition"]]))
    grouped = table.group_by(keys, use_threads=False).aggregate([("entry", "list"), ("seq", "max")])
    agg = pa.RecordBatch.from_arrays([c.combine_chunks() for c in grouped.columns], names=grouped.column_names)
    n_out = agg.num_rows
    data_json = pc.binary_join_element_wise('{"commits":[', pc.binary_join(agg.column("entry_list"), ","), "]}", "")
    return event_batch(
        n_out, cluster=repeated(single, n_out) if single is not None else agg.column("cluster"),
        group=agg.column("group"), ts_ms=agg.column("ts"), source=E.SOURCE_OFFSETS,
        source_id=pc.binary_join_element_wise(OFFSETS_SOURCE_PREFIX, pc.cast(agg.column("source"), pa.string()), ""),
        seq=agg.column("seq_max"), kind=E.OFFSET_COMMITS, data_json=data_json)


def tombstone_rows(view: BatchView) -> pa.RecordBatch | None:
    """Offset tombstones (key types 0/1, null value): one `offset_tombstone` event each."""
    rows = np.flatnonzero(view.tomb)
    if len(rows) == 0:
        return None
    kd, k0 = view.key_data, view.key_starts[rows]
    glen, tlen = view.glen[rows], view.tlen[rows]
    topic = gather_strings(kd, k0 + 6 + glen, tlen)
    kpart = pa.array(be(kd, k0 + 6 + glen + tlen, 4, ">i4"))
    data_json = pc.binary_join_element_wise('{"partition":', pc.cast(kpart, pa.string()), ',"topic":"', topic,
                                            '"}', "")
    data_json = _with_unsafe_topics(data_json, topic_json_safe(kd, k0 + 6 + glen, tlen),
                                    lambda i: {"topic": topic[i].as_py(), "partition": kpart[i].as_py()})
    return view.record_events(rows, group=gather_strings(kd, k0 + 4, glen), kind=E.OFFSET_TOMBSTONE,
                              data_json=data_json)
