"""The log parse step: raw log rows -> event rows (streaming/rows.py), in mapInArrow.

Only coordinator-marked log lines get here (the JVM filters the rest, streaming/spark/steps.py),
plus a sample of every source's lines for the layout report. Anything that cannot be used becomes a
quarantine row, so it travels with the data, is counted, and lands in quarantine.jsonl; it never
stops the query. Each parse task also counts, per log source, the lines it saw by layout and by
class (LogSourceStats), one `log_stats` row per source at the end of the task (no group: a
statistics row, streaming/rows.py): the driver turns them into the layout report and the
silent-source check (sinks/log_sources.py).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import Any, NamedTuple

import pyarrow as pa

from state import events as E
from state.quarantine_reasons import QuarantineReason as R
from state.vocabulary import UNKNOWN_LAYOUT
from streaming.logs.envelope import ENVELOPE_AUTO, unwrap
from streaming.logs.header import Header, strip_prefixes
from streaming.logs.parser import (
    OUTCOME_BROKER, OUTCOME_CONTINUATION, OUTCOME_DEBUG, OUTCOME_EVENTS, OUTCOME_IGNORED, OUTCOME_NOT_COORDINATOR,
    OUTCOME_UNKNOWN, OUTCOME_UNKNOWN_LAYOUT, OUTCOME_UNPARSEABLE, UNPARSEABLE_LINE, LineParse, parse_line_detailed
)
from streaming.logs.timeutil import zone
from streaming.logs.wrapped import WrappedEntries
from streaming.quarantine import RAW_LIMIT, Quarantined
from streaming.rows import (
    EVENT_ARROW_SCHEMA, event_row, is_missing, log_stats_row, marker_row, quarantine_row, rows_to_arrow
)


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


class LogRow(NamedTuple):
    """One row of a log source for the parse: a line as the envelope step left it (in the JVM,
    streaming/spark/steps.py unwrap_frame, or in Python, unwrap_rows)."""
    source_id: str
    seq: int
    line: str | None            # the unwrapped log line; None when the row's envelope could not be read
    raw: Any                    # the row as read
    broker_hint: Any            # the broker the envelope or the line's prefix names (may be missing)
    host_hint: Any              # the host the envelope names (may be missing)
    ts_hint_ms: Any             # the time the source gives the row (may be missing)
    eof: bool                   # the source's end-of-input marker (ts_hint_ms: its time)
    fields: Header | None = None    # a JSON layout's time/level/logger (envelope.py)


UNKNOWN_LINE = R.UNKNOWN_COORDINATOR_LINE
DEFAULT_UNKNOWN_SAMPLE = 10

# The classes of lines a log source is counted in (rebalance_monitor_log_lines_total{class}).
CLASS_OF_OUTCOME = {
    OUTCOME_EVENTS: "coordinator", OUTCOME_IGNORED: "coordinator", OUTCOME_DEBUG: "coordinator",
    OUTCOME_BROKER: "broker",
    OUTCOME_NOT_COORDINATOR: "not_coordinator", OUTCOME_CONTINUATION: "not_coordinator",
    OUTCOME_UNKNOWN: "unknown_template", OUTCOME_UNKNOWN_LAYOUT: "unknown_layout",
    OUTCOME_UNPARSEABLE: "unparseable",
}


class UnknownLineSampler:
    """Keeps at most `keep` unknown coordinator lines per (cluster, reason, logger) as quarantine
    rows: lines no catalog entry matches (unknown_coordinator_line) and coordinator lines whose
    layout is not understood (unparseable_line, logger "unknown" unless the line names one).

    Every such line is counted: the kept ones carry `count` 1, and `summary_rows()` gives one
    more quarantine row per key with the number of lines that were not kept (`count`,
    `sampled_out` true, no raw text). One sampler lives for one parse task, that is one
    partition of one micro-batch.
    """

    def __init__(self, keep: int = DEFAULT_UNKNOWN_SAMPLE):
        self.keep = keep
        self.kept: dict[tuple[str, str, str], int] = {}
        self.dropped: dict[tuple[str, str, str], list] = {}   # key -> [count, last Quarantined, ts, host]

    def offer(self, q: Quarantined, cluster: str, ts_hint: int | None, host: str | None,
              logger: str | None = None) -> tuple | None:
        logger = logger or "unknown"
        key = (cluster, q.reason, logger)
        if self.kept.get(key, 0) < self.keep:
            self.kept[key] = self.kept.get(key, 0) + 1
            return quarantine_row(q, cluster, ts_hint, host, extra={"logger": logger, "count": 1})
        entry = self.dropped.setdefault(key, [0, None, None, None])
        entry[0] += 1
        entry[1:] = [q, ts_hint, host]
        return None

    def summary_rows(self) -> list[tuple]:
        rows = []
        for (cluster, reason, logger), (count, q, ts_hint, host) in sorted(self.dropped.items()):
            what = ("matched no catalog entry" if reason == UNKNOWN_LINE
                    else "are in a layout that is not understood")
            summary = Quarantined(
                source=q.source, source_id=q.source_id, seq=q.seq, reason=reason,
                detail=f"{count} more INFO/WARN/ERROR lines of {logger} {what} in this batch; not kept "
                       f"(at most {self.keep} per logger and batch); the last one is at source_id/seq",
                raw=None, ts_ms=q.ts_ms)
            rows.append(quarantine_row(summary, cluster, ts_hint, host,
                                       extra={"logger": logger, "count": count, "sampled_out": True}))
        self.dropped.clear()
        return rows


class LogSourceStats:
    """Per (cluster, log source) of one parse task: lines by layout and by class, newest time.

    The source is the host the envelope names, else the source id (a file, a topic partition):
    the same name the clock-skew metric uses.
    """

    def __init__(self) -> None:
        self.sources: dict[tuple[str, str], list] = {}   # key -> [layouts {name: n}, classes {name: n}, ts]

    def add(self, cluster: str, source: str, layout: str | None, outcome: str, ts: int | None) -> None:
        entry = self.sources.get((cluster, source))
        if entry is None:
            entry = self.sources[(cluster, source)] = [{}, {}, None]
        if outcome != OUTCOME_CONTINUATION:
            name = layout or UNKNOWN_LAYOUT
            entry[0][name] = entry[0].get(name, 0) + 1
        cls = CLASS_OF_OUTCOME[outcome]
        entry[1][cls] = entry[1].get(cls, 0) + 1
        if ts is not None and (entry[2] is None or ts > entry[2]):
            entry[2] = ts

    def rows(self) -> list[tuple]:
        out = [log_stats_row(cluster, source, ts, layouts, classes)
               for (cluster, source), (layouts, classes, ts) in sorted(self.sources.items()) if ts is not None]
        self.sources.clear()
        return out


def _layout_name(layout: str | None, line: str, raw: str | None, fields: Header | None) -> str | None:
    """The layout of a row as reported: the line's, behind the envelope or prefixes around it."""
    if layout is None or raw is None or raw == line:
        return layout
    if fields is None or (layout != fields.layout and not layout.startswith("envelope+")):
        layout = "envelope+" + layout       # a shipper's JSON document around the line
    if raw[:1] != "{" and not raw.lstrip().startswith("{"):
        layout = "+".join(strip_prefixes(raw)[0] + (layout,))   # JSON behind transport prefixes
    return layout


def parse_log_rows(rows: Iterable[LogRow], specs: dict[str, LogSourceSpec],
                   sampler: UnknownLineSampler | None = None,
                   default_spec: LogSourceSpec | None = None, stats: LogSourceStats | None = None,
                   wrapped: WrappedEntries | None = None) -> list[tuple]:
    """Log rows -> event rows.

    Unknown coordinator lines and lines of an unknown layout go through `sampler` (quarantine rows
    for the first few per logger, counts for the rest; the caller adds `sampler.summary_rows()` at
    the end); without one every such line is quarantined. `stats` counts every line per source (the
    caller adds `stats.rows()`). `specs` maps a replay file's source_id to its settings; rows of
    other sources (partitions of a live log topic) use `default_spec`. `wrapped`: a message that
    continues over rows is read as one (wrapped.py); the caller emits `flush_wrapped` at the end
    (without it, the rows of this call are joined among themselves only). Pure Python, testable.
    """
    out: list[tuple] = []
    fallback = default_spec or LogSourceSpec(cluster="default")
    joiner = wrapped if wrapped is not None else WrappedEntries()
    for row in rows:
        source_id, seq, line, raw, broker_hint, host_hint, ts_hint, eof, fields = row
        if eof:
            _emit_all(joiner.flush_source(source_id), out, sampler, stats)
            out.append(marker_row(E.SOURCE_LOG, ts_hint, source_id, seq))
            continue
        spec = specs.get(source_id) or fallback
        hint = None if is_missing(ts_hint) else int(ts_hint)
        host_hint = None if is_missing(host_hint) else host_hint
        if line is None or is_missing(line):
            _emit_all(joiner.flush_source(source_id), out, sampler, stats)
            detail = unwrap(raw or "", spec.envelope, spec.broker_id_field).error or "envelope has no log line"
            q = Quarantined(source=E.SOURCE_LOG, source_id=source_id, seq=int(seq), reason=UNPARSEABLE_LINE,
                            detail=detail, raw=(raw or "")[:RAW_LIMIT])
            out.append(quarantine_row(q, spec.cluster, hint, host_hint))
            if stats is not None:
                stats.add(spec.cluster, host_hint or source_id, None, OUTCOME_UNPARSEABLE, hint)
            continue
        broker = spec.broker_id if is_missing(broker_hint) else int(broker_hint)
        context = _RowContext(spec, source_id, line, raw, hint, host_hint, fields)
        read = partial(parse_line_detailed, source_id=source_id, seq=int(seq), tz=zone(spec.broker_timezone),
                       default_broker=broker, fields=fields)
        _emit_all(joiner.feed(source_id, int(seq), line, read, context), out, sampler, stats)
    if wrapped is None:
        _emit_all(joiner.flush(), out, sampler, stats)
    return out


def flush_wrapped(wrapped: WrappedEntries, sampler: UnknownLineSampler | None = None,
                  stats: LogSourceStats | None = None) -> list[tuple]:
    """The rows of lines still waiting for a continuation (the end of a task)."""
    out: list[tuple] = []
    _emit_all(wrapped.flush(), out, sampler, stats)
    return out


class _RowContext(NamedTuple):
    spec: LogSourceSpec
    source_id: str
    line: str
    raw: Any
    hint: int | None
    host_hint: str | None
    fields: Header | None


def _emit_all(readings: list[tuple[_RowContext, LineParse]], out: list[tuple], sampler: UnknownLineSampler | None,
              stats: LogSourceStats | None) -> None:
    for context, parsed in readings:
        _emit(context, parsed, out, sampler, stats)


def _emit(c: _RowContext, parsed: LineParse, out: list[tuple], sampler: UnknownLineSampler | None,
          stats: LogSourceStats | None) -> None:
    """The rows of one line's reading: its events, or its quarantine row (sampled when unknown)."""
    result = parsed.result
    if stats is not None:
        stats.add(c.spec.cluster, c.host_hint or c.source_id, _layout_name(parsed.layout, c.line, c.raw, c.fields),
                  parsed.outcome, result[0].ts_ms if isinstance(result, list) else c.hint)
    if result is None:
        return
    if isinstance(result, Quarantined):
        if result.reason == UNKNOWN_LINE or parsed.outcome == OUTCOME_UNKNOWN_LAYOUT:
            sampler = sampler if sampler is not None else UnknownLineSampler(keep=1 << 62)
            row_out = sampler.offer(result, c.spec.cluster, c.hint, c.host_hint, parsed.logger)
            if row_out is not None:
                out.append(row_out)
        else:
            out.append(quarantine_row(result, c.spec.cluster, c.hint, c.host_hint))
        return
    for ev in result:
        ev.cluster = c.spec.cluster
        if c.host_hint is not None:
            ev.data["log_host"] = c.host_hint
        out.append(event_row(ev))


def unwrap_rows(rows: Iterable[tuple], specs: dict[str, LogSourceSpec],
                default_spec: LogSourceSpec | None = None) -> Iterator[LogRow]:
    """Replay rows (source_id, seq, raw, ts_hint_ms, eof) -> log rows, in Python.

    The same envelope step the query runs in the JVM; used by the Spark-free pipeline and the CLI.
    """
    for source_id, seq, raw, ts_hint, eof in rows:
        if eof:
            yield LogRow(source_id, seq, None, None, None, None, ts_hint, True)
            continue
        spec = specs.get(source_id) or default_spec or LogSourceSpec(cluster="default")
        u = unwrap(raw, spec.envelope, spec.broker_id_field)
        yield LogRow(source_id, seq, u.line, raw, u.broker, u.host, ts_hint, False, u.fields)


def _batch(rows: list) -> pa.RecordBatch:
    return rows_to_arrow(rows, EVENT_ARROW_SCHEMA)


def _fields_column(batch: pa.RecordBatch) -> Iterable[Header | None]:
    """The JSON layout fields the JVM envelope step found (streaming/spark/steps.py unwrap_frame)."""
    if batch.schema.get_field_index("layout_field") < 0:
        return [None] * batch.num_rows
    return [None if layout is None else Header(layout, ts, level, logger, "")
            for layout, ts, level, logger in zip(*_columns(batch, "layout_field", "ts_field", "level_field",
                                                           "logger_field"))]


def _columns(batch: pa.RecordBatch, *names: str) -> list[list]:
    """Columns as Python lists, straight from Arrow (pandas in between cost about a fifth of the
    step: object columns both ways)."""
    return [batch.column(name).to_pylist() for name in names]


def log_rows_to_events(batches: Iterator[pa.RecordBatch], specs: dict[str, LogSourceSpec],
                       unknown_sample: int = DEFAULT_UNKNOWN_SAMPLE,
                       default_spec: LogSourceSpec | None = None) -> Iterator[pa.RecordBatch]:
    """The parse step's mapInArrow function: unwrapped rows (steps.py unwrap_frame) -> event batches."""
    chunks = (map(LogRow, *_columns(batch, *LogRow._fields[:-1]), _fields_column(batch)) for batch in batches)
    yield from _parsed_batches(chunks, specs, unknown_sample, default_spec)


def replay_rows_to_events(rows: Iterable[tuple], specs: dict[str, LogSourceSpec],
                          unknown_sample: int = DEFAULT_UNKNOWN_SAMPLE, chunk_rows: int = 10_000
                          ) -> Iterator[pa.RecordBatch]:
    """A replay read task's rows (source_id, seq, raw, ts_hint_ms, eof) -> event batches: the
    envelope step in Python (unwrap_rows), then the parse, in the task that read them."""
    unwrapped = unwrap_rows(rows, specs)
    chunks = iter(lambda: list(islice(unwrapped, chunk_rows)), [])
    yield from _parsed_batches(chunks, specs, unknown_sample, None)


def _parsed_batches(chunks: Iterable[Iterable[LogRow]], specs: dict[str, LogSourceSpec], unknown_sample: int,
                    default_spec: LogSourceSpec | None) -> Iterator[pa.RecordBatch]:
    sampler = UnknownLineSampler(unknown_sample)     # one per task
    stats = LogSourceStats()
    wrapped = WrappedEntries()
    for rows in chunks:
        yield _batch(parse_log_rows(rows, specs, sampler, default_spec, stats, wrapped))
    summary = flush_wrapped(wrapped, sampler, stats) + sampler.summary_rows() + stats.rows()
    if summary:
        yield _batch(summary)
