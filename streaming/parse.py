"""Parse step: raw rows (log lines, offsets records) -> EVENT_SCHEMA rows, in mapInPandas.

Only coordinator-marked log lines get here (the JVM filters the rest, see query.py). Anything
that cannot be used becomes a row of kind "quarantine" keyed by QUARANTINE_GROUP, so it travels
with the data, is counted, and lands in quarantine.jsonl; it never stops the query.

Offset commits are reduced per Arrow batch to one row per (cluster, group, topic, partition)
(max offset, max commit time, count): the stateful step sees one row per partition instead of
every commit, and max/sum merge the same way whatever the batch cut.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional

import pandas as pd

from state import events as E
from streaming.broker_log import parse_line
from streaming.offsets_decoder import UNDECODED_TYPES, record_to_events
from streaming.quarantine import Quarantined
from streaming.schema import END_OF_INPUT_TS_MS, EVENT_COLUMNS, QUARANTINE_GROUP
from streaming.timeutil import zone

QUARANTINE_KIND = "quarantine"


@dataclass(frozen=True)
class LogSourceSpec:
    """Per-file (or per-topic) settings of a broker-log source."""
    cluster: str
    broker_timezone: str = "UTC"
    broker_id: Optional[int] = None   # used when the line's prefix does not name the broker


# json.dumps with arguments builds a new encoder per call; one shared encoder is ~1.5x faster.
_DATA_JSON = json.JSONEncoder(separators=(",", ":"), sort_keys=True, default=str).encode


def event_row(ev: E.Event) -> tuple:
    return (ev.cluster, ev.group, int(ev.ts_ms), ev.source, ev.source_id, int(ev.seq), ev.kind,
            ev.broker, ev.generation, ev.member_id, ev.reason,
            _DATA_JSON(ev.data) if ev.data else None)


def quarantine_row(q: Quarantined, cluster: str, ts_hint_ms: Optional[int]) -> tuple:
    ts = q.ts_ms if q.ts_ms is not None else (ts_hint_ms if ts_hint_ms is not None else 1)
    record = {"cluster": cluster, **q.to_dict(), "ts_ms": ts}
    return (cluster, QUARANTINE_GROUP, int(ts), q.source, q.source_id, int(q.seq), QUARANTINE_KIND,
            None, None, None, q.reason, json.dumps(record, separators=(",", ":"), default=str))


def end_of_input_row(source: str) -> tuple:
    return ("", None, END_OF_INPUT_TS_MS, source, "end-of-input", 0, E.END_OF_INPUT,
            None, None, None, None, None)


def _frame(rows: list) -> pd.DataFrame:
    return pd.DataFrame.from_records(rows, columns=EVENT_COLUMNS)


def parse_log_rows(rows: Iterable[tuple], specs: dict[str, LogSourceSpec]) -> list[tuple]:
    """(source_id, seq, line, ts_hint_ms, eof) tuples -> event rows. Pure Python, testable."""
    out: list[tuple] = []
    for source_id, seq, line, ts_hint, eof in rows:
        if eof:
            out.append(end_of_input_row(E.SOURCE_LOG))
            continue
        spec = specs.get(source_id) or LogSourceSpec(cluster="default")
        result = parse_line(line, source_id=source_id, seq=int(seq), tz=zone(spec.broker_timezone),
                            default_broker=spec.broker_id)
        if result is None:
            continue
        if isinstance(result, Quarantined):
            out.append(quarantine_row(result, spec.cluster, None if pd.isna(ts_hint) else int(ts_hint)))
            continue
        for ev in result:
            ev.cluster = spec.cluster
            out.append(event_row(ev))
    return out


def log_rows_to_events(batches: Iterator[pd.DataFrame], specs: dict[str, LogSourceSpec]
                       ) -> Iterator[pd.DataFrame]:
    for pdf in batches:
        rows = zip(pdf["source_id"], pdf["seq"], pdf["line"], pdf["ts_hint_ms"], pdf["eof"])
        yield _frame(parse_log_rows(rows, specs))


def record_outcome(key, value, result) -> tuple[str, str, str]:
    """(key_version, value_version, outcome) of one record for the decode-health counter.

    key_version: the key's int16 prefix (the record type), or "none" (null or < 2 bytes);
    value_version: the value's int16 prefix, "null" for a tombstone, or "none" (< 2 bytes);
    outcome: decoded | counted_only (share/streams values: recognised, not decoded) |
    unknown_type | unknown_version | corrupt."""
    kv = str(int.from_bytes(key[:2], "big", signed=True)) if key is not None and len(key) >= 2 else "none"
    if value is None:
        vv = "null"
    else:
        vv = str(int.from_bytes(value[:2], "big", signed=True)) if len(value) >= 2 else "none"
    if isinstance(result, Quarantined):
        outcome = {"unknown_record_type": "unknown_type",
                   "unknown_value_version": "unknown_version"}.get(result.reason, "corrupt")
    elif value is not None and kv != "none" and int(kv) in UNDECODED_TYPES:
        outcome = "counted_only"
    else:
        outcome = "decoded"
    return kv, vv, outcome


def decode_offsets_rows(rows: Iterable[tuple], clusters: dict[str, str],
                        stats: Optional[dict] = None) -> list[tuple]:
    """(source_id, seq, partition, offset, timestamp_ms, key, value, error, eof[, error_reason])
    -> event rows. Pure Python, the reference the vectorised path (offsets_arrow.py) must equal.
    `stats`, when given, collects {cluster: {(key_version, value_version, outcome): n}}."""
    out: list[tuple] = []
    commits: dict[tuple, E.Event] = {}
    for row in rows:
        source_id, seq, partition, offset, timestamp_ms, key, value, error, eof = row[:9]
        error_reason = row[9] if len(row) > 9 else None
        if eof:
            out.append(end_of_input_row(E.SOURCE_OFFSETS))
            continue
        cluster = clusters.get(source_id, "default")
        if isinstance(error, str):
            q = Quarantined(source=E.SOURCE_OFFSETS, source_id=source_id, seq=int(seq),
                            reason=error_reason if isinstance(error_reason, str) else "malformed_dump_line",
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
    out.extend(event_row(ev) for ev in commits.values())
    return out


def _merge_commit(commits: dict[tuple, E.Event], ev: E.Event) -> None:
    """Keep one commit per (cluster, group, topic, partition): count summed, offset and commit
    time maxed, position of the latest record (by the event ordering key)."""
    key = (ev.cluster, ev.group, ev.data.get("topic"), ev.data.get("partition"))
    seen = commits.get(key)
    if seen is None:
        ev.data = {k: ev.data[k] for k in ("topic", "partition", "offset", "commit_ts_ms", "count")}
        commits[key] = ev
        return
    seen.data["count"] += ev.data["count"]
    seen.data["offset"] = max(seen.data["offset"], ev.data["offset"])
    seen.data["commit_ts_ms"] = max(seen.data["commit_ts_ms"], ev.data["commit_ts_ms"])
    if ev.sort_key() > seen.sort_key():
        seen.ts_ms, seen.source_id, seen.seq = ev.ts_ms, ev.source_id, ev.seq


def offsets_rows_to_events(batches: Iterator[pd.DataFrame], clusters: dict[str, str]
                           ) -> Iterator[pd.DataFrame]:
    """Per-record pandas path (kept for comparison; the query uses offsets_arrow)."""
    for pdf in batches:
        rows = zip(pdf["source_id"], pdf["seq"], pdf["partition"], pdf["offset"],
                   pdf["timestamp_ms"], pdf["key"], pdf["value"], pdf["error"], pdf["eof"],
                   pdf["error_reason"] if "error_reason" in pdf else [None] * len(pdf))
        yield _frame(decode_offsets_rows(rows, clusters))
