"""Per log source: lines by class, the layout found, and the silent-source check.

Fed by the `log_stats` records of the log parse step (one per source and parse task: lines by
layout and by class, streaming/logs/step.py) and by the offsets decoder's `decode_stats` records
(group activity per cluster).

A log source is *silent* when it has yielded lines but no group-coordinator line for
`silence_seconds` (processing time) while `__consumer_offsets` of its cluster showed records in that
time: its coordinator lines are most likely lost on the way. The likely cause is named from what the
source's lines look like: `layout` when lines name a coordinator logger but their layout is not
understood, or most of the source's lines are in no layout the monitor reads; `level_or_logger`
when the lines are read fine but none is a group-coordinator line (the coordinator loggers are below
INFO, filtered by the log4j configuration or the shipper, or this broker coordinates no active group).
A replay checks once at the end of its input, over the whole run.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge

from sinks.health import LogSourceLines
from state.vocabulary import LINE_CLASSES, UNKNOWN_LAYOUT
from state.vocabulary import METRIC_PREFIX as PREFIX

CAUSES = ("layout", "level_or_logger")
LOG = logging.getLogger("rebalance_monitor.logs")


@dataclass
class _Source:
    first_seen: float
    last_coordinator: float | None = None
    layout: str | None = None                        # the layout reported (rebalance_monitor_log_layout_info)
    lines_since: int = 0                             # lines since the last coordinator line
    unknown_layout_since: int = 0                    # of those: no layout understood, or unknown_layout
    layouts_since: dict[str, int] = field(default_factory=dict)
    flagged: str | None = None                       # the cause while flagged


@dataclass(frozen=True)
class SilentSource:
    cluster: str
    source: str
    cause: str
    lines: int
    seconds: float
    layout: str | None


class LogSourceMetrics:
    def __init__(self, registry: CollectorRegistry, clock: Callable[[], float],
                 silence_seconds: float = 1800.0) -> None:
        self.clock = clock
        self.silence_seconds = silence_seconds
        self._lock = threading.RLock()
        self._sources: dict[tuple[str, str], _Source] = {}
        self._activity: dict[str, float] = {}        # cluster -> last time __consumer_offsets had records
        self.lines = Counter(
            f"{PREFIX}_log_lines",
            "Log lines that reached the parse step (they name a coordinator class, or were sampled for "
            "the layout report), by log source and class.",
            ["cluster", "source", "class"], registry=registry)
        self.layout_info = Gauge(
            f"{PREFIX}_log_layout_info",
            "1 for the layout found in the latest lines of each log source (docs/broker-logs.md, \"Layouts\").",
            ["cluster", "source", "layout"], registry=registry)
        self.silent = Gauge(
            f"{PREFIX}_log_source_silent",
            "1 while a log source yields lines but no group-coordinator line although __consumer_offsets "
            "shows group activity (cause: layout, level_or_logger).",
            ["cluster", "source", "cause"], registry=registry)

    # ------------------------------------------------------------------ input
    def observe_lines(self, lines: LogSourceLines) -> None:
        """One parse task's lines of one source (a `log_stats` record)."""
        cluster, name, classes, layouts = lines.cluster, lines.source, lines.classes, lines.layouts
        now = self.clock()
        with self._lock:
            source = self._sources.get((cluster, name))
            if source is None:
                source = self._sources[(cluster, name)] = _Source(first_seen=now)
                for cls in LINE_CLASSES:
                    self.lines.labels(cluster, name, cls)
                for cause in CAUSES:
                    self.silent.labels(cluster, name, cause).set(0)
            for cls, n in classes.items():
                self.lines.labels(cluster, name, cls).inc(int(n))
            if classes.get("coordinator"):
                source.last_coordinator = now
                source.lines_since, source.unknown_layout_since, source.layouts_since = 0, 0, {}
                self._clear(cluster, name, source)
            else:
                source.lines_since += sum(int(n) for n in classes.values())
                source.unknown_layout_since += max(int(classes.get("unknown_layout", 0)),
                                                   int(layouts.get(UNKNOWN_LAYOUT, 0)))
                for layout, n in layouts.items():
                    source.layouts_since[layout] = source.layouts_since.get(layout, 0) + int(n)
            self._report_layout(cluster, name, source, layouts)

    def observe_offsets(self, cluster: str, records: int) -> None:
        """__consumer_offsets records of a cluster were decoded (group activity)."""
        if records > 0:
            with self._lock:
                self._activity[cluster] = self.clock()

    def _report_layout(self, cluster: str, name: str, source: _Source, layouts: dict[str, int]) -> None:
        known = {k: v for k, v in layouts.items() if k != UNKNOWN_LAYOUT}
        if not layouts:
            return
        layout = max(sorted(known), key=lambda k: known[k]) if known else UNKNOWN_LAYOUT
        if layout == source.layout:
            return
        if source.layout is not None:
            try:
                self.layout_info.remove(cluster, name, source.layout)
            except KeyError:
                pass
        source.layout = layout
        self.layout_info.labels(cluster, name, layout).set(1)
        LOG.info("log source %s (cluster %s): layout %s", name, cluster, layout)

    def _clear(self, cluster: str, name: str, source: _Source) -> None:
        if source.flagged is not None:
            self.silent.labels(cluster, name, source.flagged).set(0)
            source.flagged = None

    # ------------------------------------------------------------------ the check
    def check(self, final: bool = False) -> list[SilentSource]:
        """Flag the sources that are silent now (module docstring); returns the newly flagged ones.
        `final`: the end of a replay, where the whole run is the stretch (no minimum duration)."""
        now = self.clock()
        newly = []
        with self._lock:
            for (cluster, name), source in sorted(self._sources.items()):
                since = source.last_coordinator if source.last_coordinator is not None else source.first_seen
                active = self._activity.get(cluster)
                quiet_for = now - since
                if (source.lines_since == 0 or active is None or (not final and active < since)
                        or (not final and quiet_for < self.silence_seconds)
                        or (final and source.last_coordinator is not None)):
                    continue
                cause = "layout" if source.unknown_layout_since * 2 >= source.lines_since else "level_or_logger"
                if source.flagged == cause:
                    continue
                self._clear(cluster, name, source)
                source.flagged = cause
                self.silent.labels(cluster, name, cause).set(1)
                layout = (max(sorted(source.layouts_since), key=lambda k: source.layouts_since[k])
                          if source.layouts_since else None)
                newly.append(SilentSource(cluster, name, cause, source.lines_since, quiet_for, layout))
        return newly


def warning_text(s: SilentSource) -> str:
    """The operator's warning for a newly silent source."""
    if s.cause == "layout":
        why = ("its lines are in a layout the monitor does not understand (docs/broker-logs.md, \"Layouts\"; "
               "the quarantine has samples as unparseable_line)")
    else:
        why = (f"its lines are read fine (layout {s.layout}) but none comes from a group-coordinator logger: "
               "the log4j level of kafka.coordinator.group / org.apache.kafka.coordinator.group is above INFO, "
               "a log4j or shipper filter drops them, or this broker coordinates no active group")
    return (f"log source {s.source} (cluster {s.cluster}) yielded {s.lines} lines but no group-coordinator line "
            f"for {s.seconds:.0f} s while __consumer_offsets shows group activity; likely cause: {why} "
            f"(rebalance_monitor_log_source_silent)")
