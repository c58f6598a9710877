"""The idle flush of Spark's kafka connector: one "caught up" marker per micro-batch.

The kafka-python source adds a marker row at wall-clock time when it has read every partition
to its end (kafka.py, "Idle flush"), so a quiet topic does not hold events back. The connector
cannot add rows, so the live query unions its rows with this source's: every micro-batch gets
one marker of the same shape at the time Spark planned it. Without a per-batch cap the
connector reads every partition to its latest offset in that same batch, so the marker never
runs ahead of records that were already in Kafka; the query adds this source only then
(query.py: `idle_flush` and no `max_rows_per_batch`).

Catching up (`holdWhileBehind`): the connector's batches are capped at
`kafka.catch_up_max_rows_per_batch` (the bound on what a batch holds), so a batch may leave
records behind; a marker then would move the watermark past them. The clock adds markers only
while the driver's plan says the source's last batch read everything waiting (markers.py
`caught_up`): not before the driver has seen a batch of this query, and not while a catch-up
goes on.
"""
from __future__ import annotations

import time
from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit

from state.vocabulary import SOURCE_KIND_LOG, SOURCE_KIND_OFFSETS
from streaming.spark.schema import RAW_LOG_SCHEMA, RAW_OFFSETS_SCHEMA
from streaming.spark.sources.kafka import TickPartition, tick_row
from streaming.spark.sources.markers import caught_up, marker_due, read_plan
from streaming.spark.worker_gc import freeze_worker_heap

CLOCK_SOURCE_NAME = "rebalance_clock"


class ClockStreamReader(DataSourceStreamReader):
    def __init__(self, kind: str, idle_tick_ms: int = 0, max_idle_ms: int = 0, marker_plan: str | None = None,
                 hold_while_behind: bool = False):
        self.kind, self.idle_tick_ms = kind, idle_tick_ms
        self.max_idle_ms, self.marker_plan = max_idle_ms, marker_plan
        self.hold_while_behind = hold_while_behind

    def initialOffset(self) -> dict:
        return {"tick": None}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        # One marker per wall-clock slot of idle_tick_ms when a deadline waits (markers.py; kafka.py
        # idle_tick_held): the connector's own rows start their micro-batches whenever records
        # arrive; the marker only moves a quiet topic's watermark.
        now = int(time.time() * 1000)
        plan = read_plan(self.marker_plan)
        if self.hold_while_behind and not caught_up(plan, self.kind):
            return start
        if not marker_due(start.get("tick"), now, self.idle_tick_ms, plan, self.max_idle_ms):
            return start
        return {"tick": now}

    def partitions(self, start: dict, end: dict) -> list:
        if end.get("tick") and end.get("tick") != start.get("tick"):
            return [TickPartition(int(end["tick"]))]
        return []

    def read(self, partition) -> Iterator[tuple]:
        freeze_worker_heap()
        yield tick_row(self.kind, partition.tick_ms)

    def commit(self, end: dict) -> None:
        pass


class ClockSource(DataSource):
    """options: kind (broker_log|offsets): the raw schema of the markers; idleTickMs: at most one
    marker per this many ms (0: one per micro-batch); markerPlan, maxIdleMs: markers.py;
    holdWhileBehind (true|false): no marker unless the plan says the source is caught up."""

    @classmethod
    def name(cls) -> str:
        return CLOCK_SOURCE_NAME

    def schema(self):
        return RAW_OFFSETS_SCHEMA if self.options.get("kind") == SOURCE_KIND_OFFSETS else RAW_LOG_SCHEMA

    def streamReader(self, schema) -> DataSourceStreamReader:
        return ClockStreamReader(self.options.get("kind", SOURCE_KIND_LOG), int(self.options.get("idleTickMs") or 0),
                                 int(self.options.get("maxIdleMs") or 0), self.options.get("markerPlan") or None,
                                 self.options.get("holdWhileBehind") == "true")
