"""The offsets decode, per record: raw `__consumer_offsets` rows -> event rows.

The reference the vectorised path (streaming/offsets/vectorised/) must equal, and its third tier:
every record through the full decoder. Offset commits are reduced per (cluster, group, topic,
partition) (max offset, max commit time, count, the latest record's position), then packed: one
`offset_commits` row per (cluster, group, source, record time) holds the partitions whose latest
commit has that time, which is every partition of an auto-commit (one OffsetCommit request, one
append). The stateful step sees one row per commit request instead of one per record, max/sum
merge the same way whatever the batch cut, and event-time order is kept (a pack has one time).
"""
from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from state import events as E
from state.quarantine_reasons import QuarantineReason as R
from streaming.offsets.record_events import record_to_events
from streaming.quarantine import Quarantined
from streaming.rows import event_row, marker_row, quarantine_row


class ClusterNames(dict):
    """source_id -> cluster name, with a fallback for sources that are not listed (the partitions
    of a live topic): `.get(source_id, anything)` answers the fallback for unknown ids."""

    def __init__(self, mapping: dict | None = None, fallback: str = "default"):
        super().__init__(mapping or {})
        self.fallback = fallback

    def get(self, key, default=None):
        return super().get(key, self.fallback)

    def __reduce__(self):   # pickled into Spark's Python workers
        return (ClusterNames, (dict(self), self.fallback))


def record_outcome(key, value, result) -> tuple[str, str, str]:
    """(key_version, value_version, outcome) of one record for the decode-health counter.

    key_version: the key's int16 prefix (the record type), or "none" (null or < 2 bytes);
    value_version: the value's int16 prefix, "null" for a tombstone, or "none" (< 2 bytes);
    outcome: decoded | unknown_type | unknown_version | corrupt (every record type of Kafka 0.9-4.4
    is decoded; `counted_only`, which share and streams values had before, is no longer given)."""
    kv = str(int.from_bytes(key[:2], "big", signed=True)) if key is not None and len(key) >= 2 else "none"
    vv = "null" if value is None else str(int.from_bytes(value[:2], "big", signed=True)) if len(value) >= 2 else "none"
    if isinstance(result, Quarantined):
        outcomes: dict[str, str] = {R.UNKNOWN_RECORD_TYPE: "unknown_type", R.UNKNOWN_VALUE_VERSION: "unknown_version"}
        outcome = outcomes.get(result.reason, "corrupt")
    else:
        outcome = "decoded"
    return kv, vv, outcome


def decode_offsets_rows(rows: Iterable[tuple], clusters: dict[str, str],
                        stats: dict | None = None) -> list[tuple]:
    """(source_id, seq, partition, offset, timestamp_ms, key, value, error, eof[, error_reason])
    -> event rows. Pure Python, the reference the vectorised path (streaming/offsets/vectorised/) must equal.
    `stats`, when given, collects {cluster: {(key_version, value_version, outcome): n}}."""
    out: list[tuple] = []
    commits: dict[tuple, E.Event] = {}
    for row in rows:
        source_id, seq, partition, offset, timestamp_ms, key, value, error, eof = row[:9]
        error_reason = row[9] if len(row) > 9 else None
        if eof:
            out.append(marker_row(E.SOURCE_OFFSETS, timestamp_ms, source_id, seq))
            continue
        cluster = clusters.get(source_id, "default")
        if isinstance(error, str):
            q = Quarantined(source=E.SOURCE_OFFSETS, source_id=source_id, seq=int(seq),
                            reason=error_reason if isinstance(error_reason, str) else R.MALFORMED_DUMP_LINE,
                            detail=error, raw=None,
                            ts_ms=None if pd.isna(timestamp_ms) else int(timestamp_ms))
            out.append(quarantine_row(q, cluster, q.ts_ms))
            continue
        result = record_to_events(partition=int(partition), offset=int(offset),
                                  timestamp_ms=int(timestamp_ms), key=key, value=value)
        if stats is not None:
            k = record_outcome(key, value, result)
            per = stats.setdefault(cluster, {})
            per[k] = per.get(k, 0) + 1
        if isinstance(result, Quarantined):
            out.append(quarantine_row(result, cluster, int(timestamp_ms)))
            continue
        for ev in result:
            ev.cluster = cluster
            if ev.kind == E.OFFSET_COMMIT:
                _merge_commit(commits, ev)
            else:
                out.append(event_row(ev))
    out.extend(event_row(ev) for ev in pack_commits(commits.values()))
    return out


def pack_commits(commits: Iterable[E.Event]) -> list[E.Event]:
    """Commits reduced per partition -> one OFFSET_COMMITS event per (cluster, group, source, time),
    its entries sorted by (topic, partition), its seq the latest of them."""
    packs: dict[tuple, E.Event] = {}
    for ev in commits:
        key = (ev.cluster, ev.group, ev.source_id, ev.ts_ms)
        entry = [ev.data.get(name) for name in E.COMMIT_FIELDS] + list(E.earlier_commit_times(ev.data))
        pack = packs.get(key)
        if pack is None:
            packs[key] = E.Event(group=ev.group, ts_ms=ev.ts_ms, source=ev.source, source_id=ev.source_id,
                                 seq=ev.seq, kind=E.OFFSET_COMMITS, data={"commits": [entry]}, cluster=ev.cluster)
        else:
            pack.data["commits"].append(entry)
            pack.seq = max(pack.seq, ev.seq)
    for pack in packs.values():
        pack.data["commits"].sort(key=lambda entry: (entry[0], entry[1]))
    return list(packs.values())


def _merge_commit(commits: dict[tuple, E.Event], ev: E.Event) -> None:
    """Keep one commit per (cluster, group, topic, partition): count summed, offset maxed, the
    newest distinct commit times kept (commit_ts_ms, then earlier_ts_ms when there are more, up to
    E.COMMIT_TIMES_CARRIED), position of the latest record (by the event ordering key)."""
    key = (ev.cluster, ev.group, ev.data.get("topic"), ev.data.get("partition"))
    seen = commits.get(key)
    if seen is None:
        ev.data = {k: ev.data[k] for k in E.COMMIT_FIELDS}
        commits[key] = ev
        return
    seen.data["count"] += ev.data["count"]
    seen.data["offset"] = max(seen.data["offset"], ev.data["offset"])
    times = E.newest_commit_times([ev.data["commit_ts_ms"], seen.data["commit_ts_ms"],
                                   *E.earlier_commit_times(seen.data)], E.COMMIT_TIMES_CARRIED)
    seen.data["commit_ts_ms"] = times[0] if times else None
    if len(times) > 1:
        seen.data[E.EARLIER_COMMIT_TIMES] = times[1:]
    if ev.sort_key() > seen.sort_key():
        seen.ts_ms, seen.source_id, seen.seq = ev.ts_ms, ev.source_id, ev.seq

