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
from streaming.logs.parser import HEADER_RE, parse_line
from streaming.logs.envelope import ENVELOPE_AUTO, unwrap
from streaming.offsets.decoder import UNDECODED_TYPES, record_to_events
from streaming.quarantine import Quarantined
from streaming.spark.schema import END_OF_INPUT_TS_MS, EVENT_COLUMNS, QUARANTINE_GROUP
from streaming.logs.timeutil import zone

QUARANTINE_KIND = "quarantine"


@dataclass(frozen=True)
class LogSourceSpec:
    """Per-file (or per-topic) settings of a broker-log source."""
    cluster: str
    broker_timezone: str = "UTC"
    broker_id: Optional[int] = None   # used when neither the line's prefix nor the envelope names the broker
    envelope: str = ENVELOPE_AUTO     # auto | plain | json (streaming/envelope.py)
    broker_id_field: Optional[str] = None   # JSON envelope field with the broker id


def log_spec(i) -> LogSourceSpec:
    """The parse settings of a streaming.app.settings.LogInput."""
    return LogSourceSpec(i.cluster, i.broker_timezone, i.broker_id, i.envelope, i.broker_id_field)


# json.dumps with arguments builds a new encoder per call; one shared encoder is ~1.5x faster.
_DATA_JSON = json.JSONEncoder(separators=(",", ":"), sort_keys=True, default=str).encode


def event_row(ev: E.Event) -> tuple:
    return (ev.cluster, ev.group, int(ev.ts_ms), ev.source, ev.source_id, int(ev.seq), ev.kind,
            ev.broker, ev.generation, ev.member_id, ev.reason,
            _DATA_JSON(ev.data) if ev.data else None)


def quarantine_row(q: Quarantined, cluster: str, ts_hint_ms: Optional[int], host: Optional[str] = None,
                   extra: Optional[dict] = None) -> tuple:
    ts = q.ts_ms if q.ts_ms is not None else (ts_hint_ms if ts_hint_ms is not None else 1)
    record = {"cluster": cluster, **q.to_dict(), "ts_ms": ts, **(extra or {})}
    if host is not None:
        record["host"] = host
    return (cluster, QUARANTINE_GROUP, int(ts), q.source, q.source_id, int(q.seq), QUARANTINE_KIND,
            None, None, None, q.reason, json.dumps(record, separators=(",", ":"), default=str))


class ClusterNames(dict):
    """source_id -> cluster name, with a fallback for sources that are not listed (the partitions
    of a live topic): `.get(source_id, anything)` answers the fallback for unknown ids."""

    def __init__(self, mapping: Optional[dict] = None, fallback: str = "default"):
        super().__init__(mapping or {})
        self.fallback = fallback

    def get(self, key, default=None):   # noqa: D401 - dict API
        return super().get(key, self.fallback)

    def __reduce__(self):   # pickled into Spark's Python workers
        return (ClusterNames, (dict(self), self.fallback))


def marker_row(source: str, ts_ms: Optional[int]) -> tuple:
    """A row that only moves its source's watermark: the replay's end of input (far future) or a
    live source's "caught up at wall-clock time T" tick. It reaches the stateful step under a
    null group and is ignored there."""
    ts = END_OF_INPUT_TS_MS if ts_ms is None or pd.isna(ts_ms) else int(ts_ms)
    return ("", None, ts, source, "marker", 0, E.END_OF_INPUT, None, None, None, None, None)


def _missing(value) -> bool:
    """None, or the NaN pandas puts in a numeric column for null."""
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _frame(rows: list) -> pd.DataFrame:
    return pd.DataFrame.from_records(rows, columns=EVENT_COLUMNS)


UNKNOWN_LINE = "unknown_coordinator_line"
DEFAULT_UNKNOWN_SAMPLE = 10


class UnknownLineSampler:
    """Keeps at most `keep` unknown coordinator lines per (cluster, logger) as quarantine rows.

    Every unknown line is counted: the kept ones carry `count` 1, and `summary_rows()` gives one
    more quarantine row per (cluster, logger) with the number of lines that were not kept
    (`count`, `sampled_out` true, no raw text). One sampler lives for one parse task, that is
    one partition of one micro-batch.
    """

    def __init__(self, keep: int = DEFAULT_UNKNOWN_SAMPLE):
        self.keep = keep
        self.kept: dict[tuple[str, str], int] = {}
        self.dropped: dict[tuple[str, str], list] = {}   # key -> [count, last Quarantined, ts, host]

    def offer(self, q: Quarantined, cluster: str, ts_hint: Optional[int], host: Optional[str]) -> Optional[tuple]:
        header = HEADER_RE.match(q.raw or "")
        logger = header.group(4) if header else "unknown"
        key = (cluster, logger)
        if self.kept.get(key, 0) < self.keep:
            self.kept[key] = self.kept.get(key, 0) + 1
            return quarantine_row(q, cluster, ts_hint, host, extra={"logger": logger, "count": 1})
        entry = self.dropped.setdefault(key, [0, None, None, None])
        entry[0] += 1
        entry[1:] = [q, ts_hint, host]
        return None

    def summary_rows(self) -> list[tuple]:
        rows = []
        for (cluster, logger), (count, q, ts_hint, host) in sorted(self.dropped.items()):
            summary = Quarantined(
                source=q.source, source_id=q.source_id, seq=q.seq, reason=UNKNOWN_LINE,
                detail=f"{count} more INFO/WARN/ERROR lines of {logger} matched no catalog entry in this "
                       f"batch; not kept (at most {self.keep} per logger and batch); the last one is at "
                       f"source_id/seq", raw=None, ts_ms=q.ts_ms)
            rows.append(quarantine_row(summary, cluster, ts_hint, host,
                                       extra={"logger": logger, "count": count, "sampled_out": True}))
        self.dropped.clear()
        return rows


def parse_log_rows(rows: Iterable[tuple], specs: dict[str, LogSourceSpec],
                   sampler: Optional[UnknownLineSampler] = None,
                   default_spec: Optional[LogSourceSpec] = None) -> list[tuple]:
    """(source_id, seq, line, raw, broker_hint, host_hint, ts_hint_ms, eof) tuples -> event rows.

    `line` is the unwrapped log4j line (None when the row's envelope could not be read), `raw` the
    row as read. Unknown coordinator lines go through `sampler` (quarantine rows for the first few
    per logger, counts for the rest; the caller adds `sampler.summary_rows()` at the end); without
    one every unknown line is quarantined. `specs` maps a replay file's source_id to its settings;
    rows of other sources (partitions of a live log topic) use `default_spec`. Pure Python, testable.
    """
    out: list[tuple] = []
    fallback = default_spec or LogSourceSpec(cluster="default")
    for source_id, seq, line, raw, broker_hint, host_hint, ts_hint, eof in rows:
        if eof:
            out.append(marker_row(E.SOURCE_LOG, ts_hint))
            continue
        spec = specs.get(source_id) or fallback
        hint = None if _missing(ts_hint) else int(ts_hint)
        host_hint = None if _missing(host_hint) else host_hint
        if _missing(line):
            detail = unwrap(raw or "", spec.envelope, spec.broker_id_field).error or "envelope has no log line"
            q = Quarantined(source=E.SOURCE_LOG, source_id=source_id, seq=int(seq), reason="unparseable_line",
                            detail=detail, raw=(raw or "")[:2000])
            out.append(quarantine_row(q, spec.cluster, hint, host_hint))
            continue
        broker = spec.broker_id if _missing(broker_hint) else int(broker_hint)
        result = parse_line(line, source_id=source_id, seq=int(seq), tz=zone(spec.broker_timezone),
                            default_broker=broker)
        if result is None:
            continue
        if isinstance(result, Quarantined):
            if result.reason == UNKNOWN_LINE:
                sampler = sampler if sampler is not None else UnknownLineSampler(keep=1 << 62)
                row = sampler.offer(result, spec.cluster, hint, host_hint)
                if row is not None:
                    out.append(row)
            else:
                out.append(quarantine_row(result, spec.cluster, hint, host_hint))
            continue
        for ev in result:
            ev.cluster = spec.cluster
            if host_hint is not None:
                ev.data["log_host"] = host_hint
            out.append(event_row(ev))
    return out


def unwrap_rows(rows: Iterable[tuple], specs: dict[str, LogSourceSpec],
                default_spec: Optional[LogSourceSpec] = None) -> Iterator[tuple]:
    """Replay rows (source_id, seq, raw, ts_hint_ms, eof) -> parse_log_rows input, in Python.

    The same envelope step the query runs in the JVM; used by the Spark-free pipeline and the CLI.
    """
    for source_id, seq, raw, ts_hint, eof in rows:
        if eof:
            yield source_id, seq, None, None, None, None, ts_hint, True
            continue
        spec = specs.get(source_id) or default_spec or LogSourceSpec(cluster="default")
        u = unwrap(raw, spec.envelope, spec.broker_id_field)
        yield source_id, seq, u.line, raw, u.broker, u.host, ts_hint, False


def log_rows_to_events(batches: Iterator[pd.DataFrame], specs: dict[str, LogSourceSpec],
                       unknown_sample: int = DEFAULT_UNKNOWN_SAMPLE,
                       default_spec: Optional[LogSourceSpec] = None) -> Iterator[pd.DataFrame]:
    sampler = UnknownLineSampler(unknown_sample)     # one per task: partition of a micro-batch
    for pdf in batches:
        rows = zip(pdf["source_id"], pdf["seq"], pdf["line"], pdf["raw"], pdf["broker_hint"],
                   pdf["host_hint"], pdf["ts_hint_ms"], pdf["eof"])
        yield _frame(parse_log_rows(rows, specs, sampler, default_spec))
    summary = sampler.summary_rows()
    if summary:
        yield _frame(summary)


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
            out.append(marker_row(E.SOURCE_OFFSETS, timestamp_ms))
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
