"""Measure `rebalance-monitor run` (testbed/monitor.MonitorProcess) against the real-Kafka bed: when
does a broker line that is in the log topic show on /metrics, live (group gauges) and final
(counters)? The rounds of rebalances to time are testbed/bed/workload.py's.

- `Scraper` scrapes /metrics every `interval_s` in a thread and keeps, per scrape, the group
  series below of the groups under test (testbed/metrics.py);
- `line_events` turns the shipper's lines of a group into the events to time (parsed with the
  monitor's own parser): rebalance start, JOIN end, rebalance end, removal, each with the
  moment the line was acknowledged by the log topic (`acked_ms`);
- `latencies` finds, for each, the first scrape that shows it live and the first that shows it
  final.

Visibility rules (group G; series of the live view, docs/metrics.md):
  start (Preparing to rebalance at t):   group_state_since_timestamp_seconds >= t
  JOIN end (Stabilized generation N):    group_generation >= N
  end (Assignment received for gen N):   generation >= N and not rebalancing in N (or newer)
  empty (Group G ... is now empty at t):  group_state_since_timestamp_seconds >= t
  k-th removal line:                     pending_removals + member_removals_total >= k
  final, k-th rebalance start:           rebalances_total >= k (timed from the line that ended it)
  final, k-th removal:                   member_removals_total >= k
"""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from datetime import timezone
from typing import Any

from testbed.metrics import PREFIX, Samples, family_names, parse
from testbed.monitor import MonitorProcess

KEEP = {"group_state", "group_generation", "group_state_since_timestamp_seconds", "group_pending_removals",
        "member_removals_total", "rebalances_total", "group_rebalance_started_timestamp_seconds"}
BATCH_DURATION = "rebalance_monitor_batch_duration_seconds"
SCRAPED = frozenset({PREFIX + name for name in KEEP} | {BATCH_DURATION})
REBALANCING = ("PreparingRebalance", "CompletingRebalance")


@dataclass
class Scrape:
    """One scrape: its wall time, the series it kept (`of`) and the last batch's duration."""
    wall_ms: int
    samples: Samples
    batch_s: float | None = None

    @classmethod
    def of(cls, wall_ms: int, page: str, groups_prefix: str) -> Scrape:
        """The KEEP series of the groups whose name starts with `groups_prefix`."""
        samples = parse(page, names=SCRAPED)
        kept = samples.where(lambda name, labels: name != BATCH_DURATION
                             and labels.get("group", "").startswith(groups_prefix))
        return cls(wall_ms, kept, samples.value(BATCH_DURATION))

    def values(self, name: str, group: str, **labels: str) -> list[float]:
        """The values of the group's series of `name` (without the rebalance_monitor_ prefix)."""
        return [v for _, v in self.samples.series(PREFIX + name, group=group, **labels)]

    def one(self, name: str, group: str) -> float | None:
        vals = self.values(name, group)
        return vals[0] if vals else None

    def state(self, group: str) -> str | None:
        return next((lab["state"] for lab, v in self.samples.series(PREFIX + "group_state", group=group)
                     if v == 1.0), None)


FULL_CHECK_EVERY = 50


# The families of the SCRAPED samples, as the parser names them (a counter without `_total`).
SCRAPED_FAMILIES = frozenset(name.removesuffix("_total") for name in SCRAPED)


def families(page: str) -> set[str]:
    """The SCRAPED families a page declares (with or without samples)."""
    return family_names(page) & SCRAPED_FAMILIES


class Scraper(threading.Thread):
    def __init__(self, monitor: MonitorProcess, groups_prefix: str, interval_s: float = 0.1):
        super().__init__(name="live-probe-scraper", daemon=True)
        self.monitor, self.prefix, self.interval_s = monitor, groups_prefix, interval_s
        self.scrapes: list[Scrape] = []
        self._halt = threading.Event()

    def run(self) -> None:
        # Only the SCRAPED families (`?name[]=`): the whole page, asked for 10 times a second,
        # made the monitor's exposition a part of the CPU the quiet cluster's bench measures,
        # where Prometheus asks every 15-30 s. Every FULL_CHECK_EVERY scrapes the whole page is
        # asked for too: a monitor whose collectors the filter cannot find by name (44e1eeb, the
        # cost bench's base) is then scraped whole.
        whole = False
        n = 0
        while not self._halt.is_set():
            t = time.time_ns() // 1_000_000
            try:
                page = self.monitor.scrape() if whole else self.monitor.scrape(*sorted(SCRAPED))
                if not whole and n % FULL_CHECK_EVERY == 0:
                    full = self.monitor.scrape()
                    if families(full) - families(page):
                        whole, page = True, full
            except OSError:
                page = None
            n += 1
            if page is not None:
                self.scrapes.append(Scrape.of(t, page, self.prefix))
            self._halt.wait(self.interval_s)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


@dataclass
class LineEvent:
    what: str            # start | join_end | end | removal
    group: str
    ts_ms: int           # broker log time
    acked_ms: int        # in the log topic
    generation: int | None = None
    index: int = 0       # k-th start / removal of the group (1-based)
    cause: str | None = None
    live_ms: int | None = None
    final_ms: int | None = None

    @property
    def live_s(self) -> float | None:
        return None if self.live_ms is None else max(0.0, (self.live_ms - self.acked_ms) / 1000.0)

    @property
    def final_s(self) -> float | None:
        return None if self.final_ms is None else max(0.0, (self.final_ms - self.acked_ms) / 1000.0)


def line_events(shipper, group: str, since: dict | None = None) -> list[LineEvent]:
    """The timed events of `group` in the shipper's lines (acknowledged lines only)."""
    from state import events as E
    from streaming.logs.parser import parse_line
    lines = [ln for ln in shipper.find(re.escape(group), since) if ln.acked_ms is not None]
    found: list[tuple[int, int, int, int, Any]] = []
    for ln in lines:
        result = parse_line(ln.text, source_id=f"broker{ln.broker_id}", seq=ln.seq, tz=timezone.utc)
        for ev in result if isinstance(result, list) else []:
            if ev.group == group:
                found.append((ev.ts_ms, ln.broker_id, ln.seq, ln.acked_ms, ev))
    out: list[LineEvent] = []
    starts = removals = 0
    for ts, _b, _s, acked, ev in sorted(found, key=lambda f: (f[0], f[1], f[2])):
        if ev.kind == E.PREPARE_REBALANCE:
            starts += 1
            out.append(LineEvent("start", group, ts, acked, ev.generation, starts))
        elif ev.kind == E.JOIN_COMPLETE:
            out.append(LineEvent("join_end", group, ts, acked, ev.generation))
        elif ev.kind == E.ASSIGNMENT_RECEIVED:
            out.append(LineEvent("end", group, ts, acked, ev.generation))
        elif ev.kind == E.GROUP_EMPTY:
            out.append(LineEvent("empty", group, ts, acked, ev.generation))
        elif ev.kind in (E.MEMBER_FAILED, E.MEMBER_LEFT):
            removals += 1
            cause = "heartbeat_expiry" if ev.kind == E.MEMBER_FAILED else "leave_group"
            out.append(LineEvent("removal", group, ts, acked, None, removals, cause))
    return out


def _live(e: LineEvent, s: Scrape) -> bool:
    g = e.group
    if e.what == "start":
        since = s.one("group_state_since_timestamp_seconds", g)
        return since is not None and since * 1000 >= e.ts_ms - 1
    gen = s.one("group_generation", g)
    if e.what == "join_end":
        return gen is not None and e.generation is not None and gen >= e.generation
    if e.what == "end":
        if gen is None or e.generation is None or gen < e.generation:
            return False
        if gen > e.generation or s.state(g) not in REBALANCING:
            return True
        # Rebalancing again in the same generation: a rebalance that began at or after the end
        # (a member joining right after the assignment; the view may never show Stable between).
        since = s.one("group_state_since_timestamp_seconds", g)
        return s.state(g) == "PreparingRebalance" and since is not None and since * 1000 >= e.ts_ms - 1
    if e.what == "empty":
        since = s.one("group_state_since_timestamp_seconds", g)
        return since is not None and since * 1000 >= e.ts_ms - 1
    seen = sum(s.values("group_pending_removals", g)) + sum(s.values("member_removals_total", g))
    return seen >= e.index


def _final(e: LineEvent, s: Scrape) -> bool:
    if e.what == "start":
        return sum(s.values("rebalances_total", e.group)) >= e.index
    if e.what == "removal":
        return sum(s.values("member_removals_total", e.group)) >= e.index
    return False


def latencies(events: list[LineEvent], scrapes: list[Scrape]) -> list[LineEvent]:
    """Fill live_ms / final_ms with the first scrape (at or after the ack) that shows each event."""
    for e in events:
        for s in scrapes:
            if s.wall_ms < e.acked_ms:
                continue
            if e.live_ms is None and _live(e, s):
                e.live_ms = s.wall_ms
            if e.final_ms is None and _final(e, s):
                e.final_ms = s.wall_ms
            if e.live_ms is not None and (e.final_ms is not None or e.what in ("join_end", "end", "empty")):
                break
    return events


def rebalance_final_seconds(events: list[LineEvent]) -> list[float | None]:
    """Per rebalance: from the line that ended it (Assignment received, or "is now empty") being
    in the log topic to its record being counted (None: not counted within the run)."""
    out: list[float | None] = []
    for e in events:
        if e.what != "start":
            continue
        closing = next((c for c in events if c.group == e.group and c.what in ("end", "empty")
                        and c.ts_ms >= e.ts_ms), None)
        if closing is None or e.final_ms is None:
            out.append(None)
        else:
            out.append(max(0.0, (e.final_ms - closing.acked_ms) / 1000.0))
    return out
