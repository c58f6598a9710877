"""The log parse step: raw log rows -> event rows (streaming/rows.py), in mapInPandas.

Only coordinator-marked log lines get here (the JVM filters the rest, streaming/spark/steps.py).
Anything that cannot be used becomes a quarantine row, so it travels with the data, is counted,
and lands in quarantine.jsonl; it never stops the query.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from state import events as E
from streaming.logs.envelope import ENVELOPE_AUTO, unwrap
from streaming.logs.layout import HEADER_RE
from streaming.logs.parser import parse_line
from streaming.logs.timeutil import zone
from streaming.quarantine import RAW_LIMIT, Quarantined
from streaming.rows import EVENT_COLUMNS, event_row, is_missing, marker_row, quarantine_row


@dataclass(frozen=True)
class LogSourceSpec:
    """Per-file (or per-topic) settings of a broker-log source."""
    cluster: str
    broker_timezone: str = "UTC"
    broker_id: int | None = None   # used when neither the line's prefix nor the envelope names the broker
    envelope: str = ENVELOPE_AUTO     # auto | plain | json (streaming/logs/envelope.py)
    broker_id_field: str | None = None   # JSON envelope field with the broker id

    @classmethod
    def of(cls, i: Any) -> LogSourceSpec:
        """The parse settings of a log input (streaming.app.settings.LogInput)."""
        return cls(i.cluster, i.broker_timezone, i.broker_id, i.envelope, i.broker_id_field)


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

    def offer(self, q: Quarantined, cluster: str, ts_hint: int | None, host: str | None) -> tuple | None:
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
                   sampler: UnknownLineSampler | None = None,
                   default_spec: LogSourceSpec | None = None) -> list[tuple]:
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
        hint = None if is_missing(ts_hint) else int(ts_hint)
        host_hint = None if is_missing(host_hint) else host_hint
        if is_missing(line):
            detail = unwrap(raw or "", spec.envelope, spec.broker_id_field).error or "envelope has no log line"
            q = Quarantined(source=E.SOURCE_LOG, source_id=source_id, seq=int(seq), reason="unparseable_line",
                            detail=detail, raw=(raw or "")[:RAW_LIMIT])
            out.append(quarantine_row(q, spec.cluster, hint, host_hint))
            continue
        broker = spec.broker_id if is_missing(broker_hint) else int(broker_hint)
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
                default_spec: LogSourceSpec | None = None) -> Iterator[tuple]:
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


def _frame(rows: list) -> pd.DataFrame:
    return pd.DataFrame.from_records(rows, columns=EVENT_COLUMNS)


def log_rows_to_events(batches: Iterator[pd.DataFrame], specs: dict[str, LogSourceSpec],
                       unknown_sample: int = DEFAULT_UNKNOWN_SAMPLE,
                       default_spec: LogSourceSpec | None = None) -> Iterator[pd.DataFrame]:
    sampler = UnknownLineSampler(unknown_sample)     # one per task: partition of a micro-batch
    for pdf in batches:
        rows = zip(pdf["source_id"], pdf["seq"], pdf["line"], pdf["raw"], pdf["broker_hint"],
                   pdf["host_hint"], pdf["ts_hint_ms"], pdf["eof"])
        yield _frame(parse_log_rows(rows, specs, sampler, default_spec))
    summary = sampler.summary_rows()
    if summary:
        yield _frame(summary)


