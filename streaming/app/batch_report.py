"""Spark's progress report of a micro-batch (its JSON, one per batch) read once into a typed
BatchReport (sinks/health.py): the health metrics and the replay's progress line take that, and
nothing else reads the report's JSON.

What the report's figures mean for the monitor: a log source's rows are the lines its reader read
(its offsets count them; the reader emits only coordinator lines), and neither the replay's
end-of-input marker nor a live source's caught-up marker is input. Before its first real watermark
Spark reports epoch 0, and a replay's end-of-input marker moves it to 2099: neither is a watermark
to measure a delay against.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sinks.health import BatchReport, DecodeCounts, EventTimes, LogSourceLines, SourceBatch
from state.vocabulary import SOURCE_KIND_OFFSETS
from streaming.app.source_offsets import source_offset
from streaming.rows import (
    END_OF_INPUT_WATERMARK_YEAR, OBSERVED_NEWEST, OBSERVED_OLDEST, OBSERVED_SOURCE_PREFIX, OBSERVED_STATISTICS,
    loads_json,
)


def iso_ms(text: str) -> float:
    """Spark's progress timestamps (`2026-11-21T19:33:21.663Z`) -> epoch ms."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def _source(source: dict[str, Any], topic_kinds: dict[str, str]) -> SourceBatch:
    rows = int(source.get("numInputRows") or 0)
    start, end = source_offset(source.get("startOffset")), source_offset(source.get("endOffset"))
    kind = end.get("source") or _connector_kind(end, topic_kinds)
    if "lines" in end:
        rows = int(end["lines"]) - int(start.get("lines") or 0)
    elif end.get("eof") and not start.get("eof"):
        rows -= 1       # the replay's end-of-input marker
    tick = None
    if end.get("tick") and end.get("tick") != start.get("tick"):
        rows -= 1       # a live source's caught-up marker
        tick = float(end["tick"])
    rate = source.get("inputRowsPerSecond")
    return SourceBatch(kind=kind, rows=max(0, rows), rows_per_second=None if rate is None else float(rate),
                       offset=end, tick_ms=tick, answered=(not end["error"]) if "error" in end else None,
                       gap=int(end.get("gap") or 0) if "gap" in end else None,
                       backlog=_backlog(end, source_offset(source.get("latestOffset"))))


def _backlog(end: dict[str, Any], latest: dict[str, Any]) -> int | None:
    """Records left unread when the batch was planned: the kafka-python source's `behind`; for
    Spark's connector its latest offsets ({topic: {partition: offset}}) minus where the batch
    ended. None: the source does not say (a replay's files, an offsets file)."""
    if "behind" in end:
        return int(end["behind"] or 0)
    topics = {topic: partitions for topic, partitions in latest.items() if isinstance(partitions, dict)}
    if "source" in end or not topics:       # not the connector (its clock source: {"tick": ...})
        return None
    behind = 0
    for topic, partitions in topics.items():
        ended: dict[str, Any] = end.get(topic) or {}
        for partition, offset in partitions.items():
            behind += max(0, int(offset) - int(ended.get(partition, offset) or 0))
    return behind


def _connector_kind(end: dict[str, Any], topic_kinds: dict[str, str]) -> str:
    """The input kind of a Spark connector source, whose offsets are {topic: {partition: offset}}
    and name no kind: that of its (first) topic; "other" for a topic the monitor was not given."""
    topics = [name for name, value in end.items() if isinstance(value, dict)]
    return next((topic_kinds[t] for t in topics if t in topic_kinds), "other")


def _statistics(observed: dict[str, Any]) -> tuple[tuple[DecodeCounts, ...], tuple[LogSourceLines, ...]]:
    """The statistics rows' data of every source (spark/steps.py `observed`), typed: the offsets
    source's are the decoder's counts, a log source's its lines."""
    decode: list[DecodeCounts] = []
    lines: list[LogSourceLines] = []
    for name, values in observed.items():
        if not name.startswith(OBSERVED_SOURCE_PREFIX):
            continue
        texts = (values or {}).get(OBSERVED_STATISTICS) or []
        if name[len(OBSERVED_SOURCE_PREFIX):] == SOURCE_KIND_OFFSETS:
            decode.extend(DecodeCounts.of(loads_json(text)) for text in texts)
        else:
            lines.extend(LogSourceLines.of(loads_json(text)) for text in texts)
    return tuple(decode), tuple(lines)


def batch_report(progress: Any, topic_kinds: dict[str, str] | None = None) -> BatchReport:
    """A progress report (its JSON as a dict, or PySpark's StreamingQueryProgress) as a BatchReport.
    `topic_kinds`: the input kind of each Kafka topic read by Spark's connector ({topic: kind})."""
    if hasattr(progress, "json"):       # PySpark's StreamingQueryProgress (nested Rows): its JSON
        progress = json.loads(progress.json)
    duration = (progress.get("durationMs") or {}).get("triggerExecution")
    watermark: str | None = (progress.get("eventTime") or {}).get("watermark")
    if watermark and watermark.startswith((END_OF_INPUT_WATERMARK_YEAR, "1970-01-01T00:00:00")):
        watermark = None
    operators = progress.get("stateOperators") or []
    observed = progress.get("observedMetrics") or {}
    decode_counts, log_lines = _statistics(observed)
    batch_id = progress.get("batchId")
    return BatchReport(
        batch_id=None if batch_id is None else int(batch_id),
        sources=tuple(_source(s, topic_kinds or {}) for s in progress.get("sources") or []),
        event_times=tuple(EventTimes(name[len(OBSERVED_SOURCE_PREFIX):], (values or {}).get(OBSERVED_NEWEST),
                                     (values or {}).get(OBSERVED_OLDEST))
                          for name, values in observed.items() if name.startswith(OBSERVED_SOURCE_PREFIX)),
        duration_s=None if duration is None else duration / 1000.0,
        watermark_ms=iso_ms(watermark) if watermark else None,
        state_rows=sum(int(op.get("numRowsTotal") or 0) for op in operators) if operators else None,
        late_rows=sum(int(op.get("numRowsDroppedByWatermark") or 0) for op in operators),
        decode_counts=decode_counts, log_lines=log_lines,
    )
