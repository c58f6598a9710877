"""The monitor's own health: input rows, micro-batches, watermark delay, sources up/down, offset
gaps, late rows, state size, restarts. Fed from Spark's progress reports and the live service."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

PREFIX = "rebalance_monitor"


class HealthMetrics:
    def __init__(self, r: CollectorRegistry) -> None:
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
                                     "Wall clock minus the query's event-time watermark.", registry=r)
        self.newest_event_age = Gauge(f"{PREFIX}_source_newest_event_age_seconds",
                                      "Wall clock minus the newest event time seen per source.",
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
        self.state_rows = Gauge(f"{PREFIX}_state_rows", "Rows in Spark's state store (one per group).",
                                registry=r)
        self.query_restarts = Counter(f"{PREFIX}_query_restarts_total",
                                      "Times the streaming query failed and was restarted.", registry=r)

    def count_input(self, source: str, rows: int) -> None:
        if rows:
            self.input_records.labels(source).inc(rows)
