"""The monitor's own health: input rows, micro-batches, watermark delay, sources up/down, offset
gaps, late rows, state size, restarts. Fed from Spark's progress reports and the live service."""
from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from state.vocabulary import METRIC_PREFIX as PREFIX


# The source event skew gauge is the largest lag seen within this much wall time.
SKEW_WINDOW_SECONDS = 600.0
# Catching up: a source is behind when what it left unread would take its reading rate longer
# than one trigger (`run`'s 0.5 s); while it is, a log line with the ETA at most this often.
CATCH_UP_TRIGGER_SECONDS = 0.5
CATCH_UP_LOG_EVERY_SECONDS = 30.0
LOG = logging.getLogger("rebalance_monitor.run")


@dataclass(frozen=True)
class SourceBatch:
    """What one micro-batch read from one source (streaming/app/batch_report.py reads it from
    Spark's progress report)."""
    kind: str                          # the input kind its offsets name ("broker_log", "offsets"), or "other"
    rows: int                          # input rows: every log line read, no end-of-input or caught-up marker
    rows_per_second: float | None = None
    offset: dict[str, Any] = field(default_factory=dict)   # its end offset (streaming/app/source_offsets.py)
    tick_ms: float | None = None       # a live source's caught-up marker read in this batch
    answered: bool | None = None       # whether Kafka answered (None: the source does not say)
    gap: int | None = None             # records lost to retention or compaction (None: not said)
    backlog: int | None = None         # records left unread when the batch was planned (None: not said)


@dataclass(frozen=True)
class EventTimes:
    """The event-time range of one source's rows in a micro-batch (Spark's observed metrics)."""
    kind: str
    newest_ms: float | None
    oldest_ms: float | None


@dataclass(frozen=True)
class DecodeCounts:
    """The offsets decoder's records of one cluster in one decode task, by key version, value
    version and outcome (a `decode_stats` record: docs/output.md)."""
    cluster: str
    counts: tuple[tuple[str, str, str, int], ...]    # (key_version, value_version, outcome, records)

    @classmethod
    def of(cls, record: dict[str, Any]) -> DecodeCounts:
        return cls(record.get("cluster") or "default",
                   tuple((str(k), str(v), str(outcome), int(n)) for k, v, outcome, n in record.get("counts") or []))

    def record(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "counts": [list(c) for c in self.counts]}


@dataclass(frozen=True)
class LogSourceLines:
    """The lines one parse task saw of one log source, by layout and by class (a `log_stats`
    record: docs/output.md)."""
    cluster: str
    source: str
    layouts: dict[str, int] = field(default_factory=dict)
    classes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, record: dict[str, Any]) -> LogSourceLines:
        return cls(record.get("cluster") or "default", record["source"],
                   {k: int(n) for k, n in (record.get("layouts") or {}).items()},
                   {k: int(n) for k, n in (record.get("classes") or {}).items()})

    def record(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "source": self.source, "layouts": self.layouts, "classes": self.classes}


@dataclass(frozen=True)
class BatchReport:
    """One micro-batch as Spark's progress report tells it, typed once for the health metrics,
    the statistics of the parse and decode steps, and the replay's progress line."""
    batch_id: int | None = None
    sources: tuple[SourceBatch, ...] = ()
    event_times: tuple[EventTimes, ...] = ()
    duration_s: float | None = None    # the trigger's wall time
    watermark_ms: float | None = None  # None: no real watermark yet, or the replay's end-of-input one
    state_rows: int | None = None      # None: no stateful operator reported
    late_rows: int = 0
    decode_counts: tuple[DecodeCounts, ...] = ()
    log_lines: tuple[LogSourceLines, ...] = ()

    def tick_of(self, kind: str) -> float | None:
        return next((s.tick_ms for s in reversed(self.sources) if s.kind == kind and s.tick_ms is not None), None)


@dataclass
class CatchUp:
    """One source catching up: since when, the records it read since, and its last log line."""
    since: float
    rows: int
    logged: float


class HealthMetrics:
    def __init__(self, r: CollectorRegistry, wall_clock: Callable[[], float] = time.time) -> None:
        self._wall = wall_clock
        self._catching_up: dict[str, CatchUp] = {}
        self._newest_ms: dict[str, float] = {}     # newest event time per source
        self._front_ms: dict[str, float] = {}      # newest event or caught-up tick per source
        self._skews: dict[str, deque] = {}
        self.input_records = Counter(
            f"{PREFIX}_input_records_total",
            "Raw input rows read per source (log lines before the coordinator filter, offsets records).",
            ["source"], registry=r)
        self.batches = Counter(f"{PREFIX}_batches_total", "Micro-batches applied.", registry=r)
        self.input_rate = Gauge(f"{PREFIX}_input_rows_per_second",
                                "Input rows per second of the last micro-batch, per source.",
                                ["source"], registry=r)
        self.batch_duration = Gauge(f"{PREFIX}_batch_duration_seconds",
                                    "Wall time of the last micro-batch.", registry=r)
        self.watermark_delay = Gauge(f"{PREFIX}_watermark_delay_seconds",
                                     "Wall clock minus the query's event-time watermark (NaN until the "
                                     "query has one).", registry=r)
        self.watermark_delay.set(math.nan)
        self.newest_event_age = Gauge(f"{PREFIX}_source_newest_event_age_seconds",
                                      "Wall clock (at scrape time) minus the newest event time seen per source.",
                                      ["source"], registry=r)
        self.event_skew = Gauge(f"{PREFIX}_source_event_skew_seconds",
                                "Largest lag, over the last 10 minutes, of a source's rows behind the newest "
                                "event time that source had already delivered (set lateness_seconds above it).",
                                ["source"], registry=r)
        self.source_up = Gauge(f"{PREFIX}_source_up",
                               "1 when the last attempt to read the source worked, 0 when it failed.",
                               ["source"], registry=r)
        self.source_errors = Counter(f"{PREFIX}_source_errors_total",
                                     "Failed attempts to reach a source (broker down, topic gone).",
                                     ["source"], registry=r)
        self.offset_gaps = Gauge(f"{PREFIX}_source_offset_gap_records",
                                 "Records removed by retention or compaction before the monitor read "
                                 "them (since the query started from its checkpoint).",
                                 ["source"], registry=r)
        self.late_rows = Counter(f"{PREFIX}_late_rows_total",
                                 "Events Spark dropped because they arrived after the watermark had "
                                 "passed them (raise lateness_seconds if this grows).", registry=r)
        self.state_rows = Gauge(f"{PREFIX}_state_rows",
                                "Rows in Spark's state store (one per state bucket that holds a group).", registry=r)
        # The stateful step's work (the clock row of each call, streaming/spark/stateful.py).
        self.stateful_calls = Counter(f"{PREFIX}_stateful_calls_total",
                                      "Calls of the stateful step (one per state bucket with work).", registry=r)
        self.group_turns = Counter(f"{PREFIX}_group_turns_total",
                                   "State-machine turns: groups with coordinator events or something due.",
                                   registry=r)
        self.commit_folds = Counter(f"{PREFIX}_commit_folds_total",
                                    "Groups whose rows in a batch were only offset commits, folded into "
                                    "their commit digest without a state-machine turn.", registry=r)
        self.query_restarts = Counter(f"{PREFIX}_query_restarts_total",
                                      "Times the streaming query failed and was restarted.", registry=r)
        # A full disk under the event sink or the checkpoint (sinks/disk_full.py); `run` creates
        # both series at 0.
        self.disk_full = Gauge(f"{PREFIX}_disk_full",
                               "1 while the monitor's writes to a path (sink: events_dir, checkpoint: "
                               "checkpoint_location) fail for want of space and it waits with the batch "
                               "uncommitted, 0 otherwise.", ["path"], registry=r)
        self.disk_full_writes = Counter(f"{PREFIX}_disk_full_writes_total",
                                        "Writes (and query starts) that failed for want of space, per path; "
                                        "each is tried again.", ["path"], registry=r)
        # The event sink's size, so retention can be watched working before a disk fills.
        self.event_sink_bytes = Gauge(f"{PREFIX}_event_sink_bytes",
                                      "Bytes of records in the event sink (rolled files and parts), after "
                                      "the last roll and retention.", registry=r)
        self.event_sink_files = Gauge(f"{PREFIX}_event_sink_files",
                                      "Files of records in the event sink (rolled files and parts).", registry=r)
        self.backlog = Gauge(f"{PREFIX}_source_backlog_records",
                             "Records a source had left unread in Kafka when the last micro-batch was "
                             "planned (a catch-up reads it in capped batches).", ["source"], registry=r)
        self.catching_up = Gauge(f"{PREFIX}_source_catching_up",
                                 "1 while a source is further behind than it reads in one trigger, "
                                 "0 once it is back at the head.", ["source"], registry=r)
        # `run` serves /metrics with the counters restored, then loads the state file's groups.
        self.restoring_groups = Gauge(f"{PREFIX}_restoring_groups",
                                      "1 while a starting run loads its groups from the checkpoint's state "
                                      "file (their gauges are not all there yet), 0 otherwise.", registry=r)

    def record_batch(self, report: BatchReport) -> None:
        """The health metrics of one micro-batch's report."""
        for source in report.sources:
            if source.answered is not None:
                self.source_up.labels(source.kind).set(1 if source.answered else 0)
                if not source.answered:
                    self.source_errors.labels(source.kind).inc()
            if source.gap is not None:
                self.offset_gaps.labels(source.kind).set(source.gap)
            self.count_input(source.kind, source.rows)
            if source.rows_per_second is not None:
                self.input_rate.labels(source.kind).set(source.rows_per_second)
            if source.backlog is not None:
                self.note_backlog(source.kind, source.backlog, source.rows, report.duration_s)
        if report.duration_s is not None:
            self.batch_duration.set(report.duration_s)
        if report.watermark_ms is not None:
            self.watermark_delay.set(max(0.0, self._wall() - report.watermark_ms / 1000.0))
        for times in report.event_times:
            self.saw_events(times.kind, times.newest_ms, times.oldest_ms, report.tick_of(times.kind))
        if report.state_rows is not None:
            self.state_rows.set(report.state_rows)
        if report.late_rows:
            self.late_rows.inc(report.late_rows)

    def note_backlog(self, kind: str, backlog: int, rows: int, duration_s: float | None) -> None:
        """A source's backlog after a batch: the gauges, and a log line when it starts catching up,
        every CATCH_UP_LOG_EVERY_SECONDS while it is (with the ETA at the rate it reads), and when
        it is back at the head."""
        self.backlog.labels(kind).set(backlog)
        per_second = rows / duration_s if rows and duration_s else 0.0
        behind = backlog > max(1.0, per_second * CATCH_UP_TRIGGER_SECONDS)
        self.catching_up.labels(kind).set(1 if behind else 0)
        now = self._wall()
        state = self._catching_up.get(kind)
        if behind and (state is None or now - state.logged >= CATCH_UP_LOG_EVERY_SECONDS):
            eta = f"about {backlog / per_second:,.0f} s to the head" if per_second else "rate not known yet"
            LOG.info("run: catching up on %s: %s records behind, reading %s records/s; %s", kind, f"{backlog:,}",
                     f"{per_second:,.0f}", eta)
            if state is None:
                state = self._catching_up[kind] = CatchUp(now - (duration_s or 0.0), 0, now)
            state.logged = now
        if state is not None:
            state.rows += rows
        if not behind and state is not None:
            seconds = max(1e-3, now - state.since)
            LOG.info("run: caught up on %s after %.0f s: %s records read, %s records/s", kind, seconds,
                     f"{state.rows:,}", f"{state.rows / seconds:,.0f}")
            del self._catching_up[kind]

    def count_stateful_work(self, clocks: list[dict]) -> None:
        """A batch's clock rows: one per stateful call, with the turns and folds it gave."""
        self.stateful_calls.inc(len(clocks))
        self.group_turns.inc(sum(int(c.get("turns") or 0) for c in clocks))
        self.commit_folds.inc(sum(int(c.get("folds") or 0) for c in clocks))

    def saw_events(self, source: str, newest_ms: float | None, oldest_ms: float | None,
                   tick_ms: float | None = None) -> None:
        """A batch's event-time range of one source (and its caught-up tick, which moves its
        watermark like an event): the newest-event age (computed at scrape time, so it keeps
        growing while the source is quiet) and the source's skew: how far the batch's oldest row
        is behind the event time the source had reached before it (the watermark trails that
        front by lateness_seconds, so a skew above the lateness is a dropped row)."""
        previous = self._front_ms.get(source)
        if tick_ms is not None:
            self._front_ms[source] = max(previous or tick_ms, tick_ms)
        if newest_ms is not None:
            self._front_ms[source] = max(self._front_ms.get(source) or newest_ms, newest_ms)
        if oldest_ms is not None and previous is not None:
            now = self._wall()
            window = self._skews.setdefault(source, deque())
            window.append((now, max(0.0, (previous - oldest_ms) / 1000.0)))
            while window and window[0][0] < now - SKEW_WINDOW_SECONDS:
                window.popleft()
            self.event_skew.labels(source).set(max(v for _, v in window))
        if newest_ms is None:
            return
        if source not in self._newest_ms:
            self.newest_event_age.labels(source).set_function(lambda: self._age(source))
        self._newest_ms[source] = max(self._newest_ms.get(source) or newest_ms, newest_ms)

    def _age(self, source: str) -> float:
        return max(0.0, self._wall() - self._newest_ms[source] / 1000.0)

    def count_input(self, source: str, rows: int) -> None:
        if rows:
            self.input_records.labels(source).inc(rows)
