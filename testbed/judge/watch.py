"""`MetricsWatch` scrapes a monitor's /metrics every 250 ms and remembers when each group's
counters first reached each value (the "broker line -> /metrics" latency of the verdicts), the
monitor's event-time watermark (when the judging may start) and the members each group had at risk
of a poll timeout."""
from __future__ import annotations

import threading

from testbed.metrics import Samples, parse
from testbed.monitor import MonitorProcess, now_ms


class MetricsWatch(threading.Thread):
    """Scrapes /metrics every `interval` s; `first_reached(metric, group, n)` is the wall time
    (epoch ms) of the first scrape where the group's total of `metric` was >= n."""

    WATCHED = ("rebalance_monitor_rebalances_total", "rebalance_monitor_member_removals_total")
    # Only these series are scraped (a page of every group's series would cost more to parse).
    AT_RISK = "rebalance_monitor_group_members_at_risk"
    SCRAPED = (*WATCHED, "rebalance_monitor_watermark_delay_seconds", "rebalance_monitor_batches_total",
               "rebalance_monitor_late_rows_total", AT_RISK)

    def __init__(self, monitor: MonitorProcess, interval: float = 0.25):
        super().__init__(name="kafkabed-metrics-watch", daemon=True)
        self.monitor, self.interval = monitor, interval
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self.reached: dict[tuple, int] = {}      # (metric, group, n) -> first scrape ms
        self.at_risk: dict[str, tuple[float, int]] = {}     # group -> (most members at risk, first scrape ms)
        self.last = Samples()
        self.scrapes = self.errors = 0
        self._batches = 0
        self._watermark = 0

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            try:
                page = self.monitor.scrape(*self.SCRAPED)
            except OSError:
                self.errors += 1
                continue
            t = now_ms()
            samples = parse(page)
            totals: dict[tuple, float] = {}
            for name in self.WATCHED:
                for labels, value in samples.series(name):
                    g = labels.get("group")
                    totals[(name, g)] = totals.get((name, g), 0.0) + value
            delay = samples.value("rebalance_monitor_watermark_delay_seconds")
            with self._lock:
                self.scrapes += 1
                self.last = samples
                batches = int(samples.value("rebalance_monitor_batches_total") or 0)
                # The gauge is wall clock minus the watermark *when a batch ended*: only the first
                # scrape after a new batch dates it (within one scrape interval); a later scrape
                # would move the estimate ahead of the monitor's real event time.
                fresh = batches != self._batches
                self._batches = batches
                if fresh and delay is not None and delay == delay:      # NaN before the first watermark
                    self._watermark = max(self._watermark, t - int(delay * 1000))
                for (name, g), total in totals.items():
                    for n in range(1, int(total) + 1):
                        self.reached.setdefault((name, g, n), t)
                for labels, value in samples.series(self.AT_RISK):
                    g = labels.get("group") or ""
                    if value > self.at_risk.get(g, (0.0, 0))[0]:
                        self.at_risk[g] = (value, self.at_risk.get(g, (0.0, t))[1])

    def first_reached(self, metric: str, group: str, n: int) -> int | None:
        with self._lock:
            return self.reached.get((metric, group, n))

    def most_at_risk(self, group: str) -> tuple[float, int] | None:
        """The most members of `group` a scrape counted at risk of a poll timeout, and when the first
        scrape showed one (epoch ms); None when none did."""
        with self._lock:
            return self.at_risk.get(group)

    def watermark_ms(self) -> int:
        """The monitor's event-time watermark (epoch ms) at the last scrape."""
        with self._lock:
            return self._watermark

    def batches(self) -> int:
        with self._lock:
            return self._batches

    def samples(self) -> Samples:
        """The scraped series (SCRAPED) of the last scrape."""
        with self._lock:
            return Samples(self.last)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)
