"""The kafka-python source's tasks: ranges grouped into at most `readTasks` tasks, the marker
with them, and one KafkaConsumer per Python worker kept across tasks (sources/kafka.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from streaming.spark.schema import RAW_LOG_SCHEMA, RAW_OFFSETS_SCHEMA
from streaming.spark.sources import base
from streaming.spark.sources import kafka as source
from streaming.spark.sources.catch_up import CatchUpBudget, proportional_takes
from streaming.spark.sources.kafka import KafkaRange, KafkaStreamReader, KafkaTask, TickPartition, split_ranges


def _rows(batches) -> list[tuple]:
    """The rows of the Arrow batches a read task yields, checked against the schema PySpark
    compares them with (DATA_SOURCE_RETURN_SCHEMA_MISMATCH otherwise)."""
    rows: list[tuple] = []
    for batch in batches:
        assert batch.schema.equals(to_arrow_schema(RAW_LOG_SCHEMA, timezone="UTC"))
        assert batch.num_rows <= base.ARROW_BATCH_ROWS
        rows.extend(tuple(r.values()) for r in batch.to_pylist())
    return rows


@dataclass
class Record:
    offset: int
    partition: int
    timestamp: int = 1_700_000_000_000
    key: bytes | None = None
    value: bytes | None = b"line"


class FakeConsumer:
    """Partitions of 100 records each at offsets 0..99; poll returns up to 7 from the position."""
    made = 0

    def __init__(self, fail_on: int | None = None, **extra) -> None:
        FakeConsumer.made += 1
        self.fail_on = fail_on
        self.assigned: list = []
        self.pos: dict = {}
        self.closed = False
        self.extra = extra
        self.config = {"api_version": extra.get("api_version") or (3, 9, 0)}   # what kafka-python found
        self.metadata_for: list[str] = []

    def partitions_for_topic(self, topic: str) -> set[int]:
        self.metadata_for.append(topic)
        return {0, 1, 2, 3}

    def assign(self, tps: list) -> None:
        self.assigned = list(tps)

    def seek(self, tp, offset: int) -> None:
        self.pos[tp] = offset

    def position(self, tp) -> int:
        return self.pos[tp]

    def poll(self, timeout_ms: int = 0) -> dict:
        out = {}
        for tp in self.assigned:
            if tp.partition == self.fail_on:
                raise ConnectionError("broker gone")
            start = self.pos[tp]
            recs = [Record(o, tp.partition) for o in range(start, min(100, start + 7))]
            self.pos[tp] = start + len(recs)
            out[tp] = recs
        return out

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def reader(monkeypatch):
    FakeConsumer.made = 0
    made: list[FakeConsumer] = []

    def consumer(options, **extra):
        made.append(FakeConsumer(int(options["failOn"]) if options.get("failOn") else None, **extra))
        return made[-1]
    monkeypatch.setattr(source, "_consumer", consumer)
    monkeypatch.setattr(source, "_WORKER_CONSUMERS", {})
    r = KafkaStreamReader({"bootstrapServers": "127.0.0.1:1", "topics": "logs", "kind": "broker_log",
                           "readTasks": "2"})
    r.made = made  # type: ignore[attr-defined]  # the fixture hands the tests its fake consumers on the reader
    return r


def _ranges(sizes: list[int]) -> list[KafkaRange]:
    return [KafkaRange("t", i, 10, 10 + n) for i, n in enumerate(sizes)]


def test_ranges_are_split_into_at_most_the_task_count_with_balanced_records():
    ranges = _ranges([50, 40, 30, 20, 10, 5, 1])
    groups = split_ranges(ranges, 2)
    assert len(groups) == 2
    assert sorted(r.partition for g in groups for r in g) == list(range(7))     # each range once
    sizes = [sum(r.end - r.start for r in g) for g in groups]
    assert max(sizes) - min(sizes) <= 10
    assert all(g == sorted(g, key=lambda r: r.partition) for g in groups)
    assert split_ranges(ranges[:1], 4) == [ranges[:1]]
    assert split_ranges([], 2) == []


def test_the_marker_rides_with_the_first_task_or_alone(reader):
    start = {"topics": {"logs": {"0": 0, "1": 5, "2": 9}}, "tick": 1}
    end = {"topics": {"logs": {"0": 4, "1": 5, "2": 12}}, "tick": 2}
    tasks = reader.partitions(start, end)
    assert len(tasks) == 2 and all(isinstance(t, KafkaTask) for t in tasks)
    assert [t.tick_ms for t in tasks] == [2, None]
    assert sorted((r.partition, r.start, r.end) for t in tasks for r in t.ranges) == [(0, 0, 4), (2, 9, 12)]
    idle = reader.partitions({"topics": {"logs": {"0": 4}}, "tick": 2}, {"topics": {"logs": {"0": 4}}, "tick": 3})
    assert [(t.ranges, t.tick_ms) for t in idle] == [([], 3)]
    assert reader.partitions({"topics": {}, "tick": 3}, {"topics": {}, "tick": 3}) == []


def test_one_consumer_serves_every_task_of_the_worker(reader):
    first = _rows(reader.read(KafkaTask([KafkaRange("logs", 0, 0, 20), KafkaRange("logs", 1, 95, 100)], 77)))
    second = _rows(reader.read(KafkaTask([KafkaRange("logs", 0, 20, 30)])))
    assert [(r[0], r[1]) for r in first[:-1]] == [("logs-0", o) for o in range(20)] + [("logs-1", o) for o in range(95, 100)]
    assert first[-1][0] == "tick" and first[-1][3] == 77          # the marker last
    assert [r[1] for r in second] == list(range(20, 30))
    assert len(reader.made) == 1 and not reader.made[0].closed


def test_a_failed_read_closes_the_consumer_and_the_next_task_makes_a_new_one(reader):
    reader.options = {**reader.options, "failOn": "3"}
    with pytest.raises(ConnectionError):
        _rows(reader.read(KafkaTask([KafkaRange("logs", 3, 0, 5)])))
    assert reader.made[0].closed and source._WORKER_CONSUMERS == {}
    reader.options = {k: v for k, v in reader.options.items() if k != "failOn"}
    assert [r[1] for r in _rows(reader.read(KafkaTask([KafkaRange("logs", 0, 0, 3)])))] == [0, 1, 2]
    assert len(reader.made) == 2


def test_a_workers_new_consumer_takes_the_drivers_api_version_and_asks_for_metadata_at_once(reader):
    """kafka-python probes the brokers' API version and, without the topics' metadata, waits its
    retry backoff in the first poll: a new worker's first read took 210 ms where a reused
    consumer's takes 5. The driver's consumer found the version; the tasks carry it."""
    tasks = reader.partitions({"topics": {"logs": {"0": 0, "1": 0}}}, {"topics": {"logs": {"0": 4, "1": 6}}})
    assert {t.api_version for t in tasks} == {(3, 9, 0)}        # the driver's (metadata) consumer's
    _rows(reader.read(tasks[0]))
    worker = reader.made[-1]
    assert worker.extra["api_version"] == (3, 9, 0) and worker.metadata_for == ["logs"]
    _rows(reader.read(tasks[1]))                                  # the same worker's consumer, no new request
    assert reader.made[-1] is worker and worker.metadata_for == ["logs"]
    # an api_version in the user's client config is theirs to set
    source._WORKER_CONSUMERS.clear()
    reader.options = {**reader.options, "clientConfig": '{"api_version": [2, 8]}'}
    _rows(reader.read(tasks[0]))
    assert "api_version" not in reader.made[-1].extra
    # a task planned before this (no api_version) still reads
    source._WORKER_CONSUMERS.clear()
    old = KafkaTask([KafkaRange("logs", 0, 0, 2)])
    del old.__dict__["api_version"]
    assert [r[1] for r in _rows(reader.read(old))] == [0, 1]


def test_partitions_planned_by_the_previous_version_are_still_read(reader):
    """A checkpoint's planned batch is re-planned on restart from its offsets, but the old
    partition types must still read if Spark hands them over."""
    assert [r[1] for r in _rows(reader.read(KafkaRange("logs", 0, 5, 8)))] == [5, 6, 7]
    assert [r[0] for r in _rows(reader.read(TickPartition(9)))] == ["tick"]


def test_offsets_rows_come_in_batches_of_the_schema_spark_checks(reader, monkeypatch):
    monkeypatch.setattr(base, "ARROW_BATCH_ROWS", 8)
    reader.kind = source.SOURCE_KIND_OFFSETS
    batches = list(reader.read(KafkaTask([KafkaRange("offsets", 0, 0, 20)], 5)))
    assert [b.num_rows for b in batches] == [8, 8, 5]
    assert all(b.schema.equals(to_arrow_schema(RAW_OFFSETS_SCHEMA, timezone="UTC")) for b in batches)
    rows = [r for b in batches for r in b.to_pylist()]
    assert [r["offset"] for r in rows[:-1]] == list(range(20)) and rows[0]["value"] == b"line"
    assert rows[-1]["source_id"] == "tick" and rows[-1]["eof"] and rows[-1]["timestamp_ms"] == 5


def test_a_caught_up_source_without_new_records_repeats_its_offset_until_the_idle_tick(reader, monkeypatch):
    """kafka.idle_tick_seconds: no new records and a marker in the current 2 s slot of wall-clock
    time: latestOffset answers the start offset itself, so Spark runs no micro-batch; new records,
    or the next slot, move it."""
    from kafka import TopicPartition
    tp = TopicPartition("logs", 0)
    ends = {tp: 10}
    monkeypatch.setattr(reader, "_bounds", lambda: ({tp: 0}, dict(ends)))
    clock = [1_000.0]
    monkeypatch.setattr(source.time, "time", lambda: clock[0])
    reader.idle_tick_ms = 2_000
    first = reader.latestOffset({"source": "broker_log", "topics": {"logs": {"0": 0}}, "tick": None, "gap": 0,
                                 "error": None}, reader.getDefaultReadLimit())
    assert first["topics"] == {"logs": {"0": 10}} and first["tick"] == 1_000_000
    clock[0] += 0.5
    assert reader.latestOffset(first, reader.getDefaultReadLimit()) is first        # quiet, marker recent
    ends[tp] = 12
    moved = reader.latestOffset(first, reader.getDefaultReadLimit())                 # a new record: a batch
    assert moved["topics"] == {"logs": {"0": 12}} and moved["tick"] == 1_000_500
    clock[0] += 1.4
    assert reader.latestOffset(moved, reader.getDefaultReadLimit()) is moved         # 1_001_900: same slot
    clock[0] += 0.1
    due = reader.latestOffset(moved, reader.getDefaultReadLimit())                   # 1_002_000: the next slot
    assert due["topics"] == moved["topics"] and due["tick"] == 1_002_000
    reader.idle_tick_ms = 0                                                          # 0: a marker every trigger
    clock[0] += 0.1
    assert reader.latestOffset(due, reader.getDefaultReadLimit())["tick"] == 1_002_100


def test_the_connectors_clock_ticks_at_most_once_per_idle_tick(monkeypatch):
    from streaming.spark.sources import clock as clock_source
    now = [5_000.0]
    monkeypatch.setattr(clock_source.time, "time", lambda: now[0])
    reader = clock_source.ClockStreamReader("offsets", idle_tick_ms=2_000)
    limit = reader.getDefaultReadLimit()
    first = reader.latestOffset(reader.initialOffset(), limit)
    assert first == {"tick": 5_000_000}
    now[0] += 1.5
    assert reader.latestOffset(first, limit) is first               # 5_001_500: the slot of 5_000_000
    now[0] += 0.5
    assert reader.latestOffset(first, limit) == {"tick": 5_002_000}  # the next slot, as the topics' sources
    assert clock_source.ClockStreamReader("offsets").latestOffset(first, limit) == {"tick": 5_002_000}


def test_with_the_drivers_plan_a_quiet_source_ticks_only_when_a_deadline_is_due(reader, monkeypatch, tmp_path):
    """sources/markers.py: with a plan, a caught-up source without new records adds a marker only
    once the plan's time has come (then one per slot, until the plan moves), or when its last
    marker is `maxIdleMs` old; new records still move the offset at once."""
    from kafka import TopicPartition

    from streaming.spark.sources.markers import write_plan
    tp = TopicPartition("logs", 0)
    monkeypatch.setattr(reader, "_bounds", lambda: ({tp: 0}, {tp: 10}))
    clock = [1_000.0]
    monkeypatch.setattr(source.time, "time", lambda: clock[0])
    reader.idle_tick_ms, reader.max_idle_ms, reader.marker_plan = 2_000, 60_000, str(tmp_path / "plan.json")
    limit = reader.getDefaultReadLimit()
    first = reader.latestOffset({"source": "broker_log", "topics": {"logs": {"0": 0}}, "tick": None, "gap": 0,
                                 "error": None}, limit)
    assert first["tick"] == 1_000_000                     # no plan yet: a marker per slot
    write_plan(reader.marker_plan, None)                  # nothing waits
    clock[0] += 30
    assert reader.latestOffset(first, limit) is first     # 1_030_000: a new slot, nothing due
    write_plan(reader.marker_plan, 1_040_000)             # a deadline fires with a marker from then on
    clock[0] += 9.9
    assert reader.latestOffset(first, limit) is first
    clock[0] += 0.1
    due = reader.latestOffset(first, limit)
    assert due["tick"] == 1_040_000
    clock[0] += 1
    assert reader.latestOffset(due, limit) is due         # one per slot
    clock[0] += 1
    last = reader.latestOffset(due, limit)
    assert last["tick"] == 1_042_000
    write_plan(reader.marker_plan, None)
    clock[0] += 59.9
    assert reader.latestOffset(last, limit) is last       # 1_101_900: 59.9 s after the last marker
    clock[0] += 0.1
    assert reader.latestOffset(last, limit)["tick"] == 1_102_000  # maxIdleMs


def test_the_plan_is_the_earliest_deadline_plus_the_lateness():
    """A timeout at event time T fires once the watermark (newest event time - lateness) is above
    it: a marker at wall-clock T + lateness + 1. The correlator's held removals count; timeouts of
    a replay's end of input do not."""
    from streaming.rows import FINAL_SNAPSHOT_TS_MS
    from streaming.spark.sources.markers import due_ms
    assert due_ms([5_000, 3_000, None], None, 10_000) == 13_001
    assert due_ms([5_000], 2_000, 10_000) == 12_001
    assert due_ms([FINAL_SNAPSHOT_TS_MS], None, 10_000) is None
    assert due_ms([], None, 10_000) is None


class KeyedConsumer(FakeConsumer):
    """Records whose keys are given by offset: b"\\x00\\x01..." (a commit) unless listed in `other`."""
    other: ClassVar[set[int]] = set()
    polls = 0

    def poll(self, timeout_ms: int = 0) -> dict:
        KeyedConsumer.polls += 1
        out = {}
        for tp in self.assigned:
            start = self.pos[tp]
            recs = [Record(o, tp.partition, key=(b"\x00\x02g" if o in self.other else b"\x00\x01g"))
                    for o in range(start, min(100, start + 7))]
            self.pos[tp] = start + len(recs)
            out[tp] = recs
        return out


def test_new_records_that_are_only_commits_wait_until_the_hold_ends_or_other_records_come(monkeypatch, tmp_path):
    """kafka.commit_hold_seconds ("Commit holding", sources/kafka.py): a caught-up offsets source
    whose new records are all offset commits keeps its offset (no micro-batch) for up to the hold;
    a record of another type, a due marker, the hold's end or a backlog over PEEK_MAX_RECORDS move
    it at once. Each record's key is read once."""
    from kafka import TopicPartition

    from streaming.spark.sources.markers import write_plan
    monkeypatch.setattr(source, "_consumer", lambda options, **extra: KeyedConsumer())
    KeyedConsumer.other, KeyedConsumer.polls = set(), 0
    tp = TopicPartition("__consumer_offsets", 0)
    ends = {tp: 10}
    monkeypatch.setattr(source.KafkaStreamReader, "_bounds", lambda self: ({tp: 0}, dict(ends)))
    clock = [1_000.0]
    monkeypatch.setattr(source.time, "time", lambda: clock[0])
    r = KafkaStreamReader({"bootstrapServers": "127.0.0.1:1", "topics": "__consumer_offsets", "kind": "offsets",
                           "idleTickMs": "5000", "maxIdleMs": "60000", "commitHoldMs": "4000",
                           "markerPlan": str(tmp_path / "plan.json")})
    assert r.marker_plan is not None
    limit = r.getDefaultReadLimit()
    write_plan(r.marker_plan, None)
    start = {"source": "offsets", "topics": {"__consumer_offsets": {"0": 10}}, "tick": 1_000_000, "gap": 0,
             "error": None}
    ends[tp] = 20                                          # ten commits
    clock[0] += 0.5
    assert r.latestOffset(start, limit) is start           # held
    polls = KeyedConsumer.polls
    ends[tp] = 22
    clock[0] += 0.5
    assert r.latestOffset(start, limit) is start           # still held; only offsets 20-21 read
    assert KeyedConsumer.polls == polls + 1
    clock[0] += 2.9
    assert r.latestOffset(start, limit) is start           # 1_003_900: 3.4 s into the hold
    clock[0] += 0.6                                        # 1_004_500: 4 s after the hold began
    released = r.latestOffset(start, limit)
    assert released["topics"] == {"__consumer_offsets": {"0": 22}} and released["tick"] == 1_004_500

    ends[tp] = 30                                          # commits, then a group-metadata record
    KeyedConsumer.other = {27}
    clock[0] += 0.5
    assert r.latestOffset(released, limit)["topics"] == {"__consumer_offsets": {"0": 30}}

    KeyedConsumer.other = set()
    write_plan(r.marker_plan, 1_005_000)                   # a deadline is due: commits go with the marker
    clock[0] += 1.0
    assert r.latestOffset(released, limit)["topics"] == {"__consumer_offsets": {"0": 30}}

    write_plan(r.marker_plan, None)
    ends[tp] = 22 + source.PEEK_MAX_RECORDS + 1            # a backlog: read at once, keys unread
    polls = KeyedConsumer.polls
    assert r.latestOffset(released, limit)["topics"] == {"__consumer_offsets": {"0": ends[tp]}}
    assert KeyedConsumer.polls == polls

    log = KafkaStreamReader({"bootstrapServers": "127.0.0.1:1", "topics": "logs", "kind": "broker_log",
                             "idleTickMs": "5000", "commitHoldMs": "4000"})
    assert log.commit_hold_ms == 0                         # log topics are never held


def test_a_backlog_above_the_catch_up_cap_is_read_in_capped_batches_sized_by_the_rate(reader, monkeypatch):
    """Catching up (sources/kafka.py): 3 partitions with 600,000 records waiting against a cap of
    200,000: the first batch takes a quarter of the cap, shared out in proportion to what each
    partition has waiting; the next is sized by the rate the first ran at (50,000 rows in 1 s,
    10 s a batch: 500,000, cut to the cap); no marker while capped; `behind` says what is left.
    Once no more than the cap waits, the batch reads it all and ticks."""
    from kafka import TopicPartition
    tps = [TopicPartition("logs", p) for p in range(3)]
    ends = {tps[0]: 300_000, tps[1]: 200_000, tps[2]: 100_000}
    monkeypatch.setattr(reader, "_bounds", lambda: (dict.fromkeys(tps, 0), dict(ends)))
    clock = [1_000.0]
    monkeypatch.setattr(source.time, "time", lambda: clock[0])
    reader.catch_up = CatchUpBudget(200_000, 10_000)
    start = {"source": "broker_log", "topics": {"logs": {"0": 0, "1": 0, "2": 0}}, "tick": None, "gap": 0,
             "error": None}
    first = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert first["topics"]["logs"] == {"0": 25_000, "1": 16_667, "2": 8_333}
    assert sum(first["topics"]["logs"].values()) == 50_000
    assert first["tick"] is None and first["behind"] == 550_000
    clock[0] += 1.0
    second = reader.latestOffset(first, reader.getDefaultReadLimit())
    assert sum(second["topics"]["logs"].values()) == 250_000 and second["behind"] == 350_000
    clock[0] += 20.0                          # 200,000 rows in 20 s: 10 s is 100,000
    third = reader.latestOffset(second, reader.getDefaultReadLimit())
    assert sum(third["topics"]["logs"].values()) == 350_000 and third["behind"] == 250_000
    clock[0] += 1.0
    fourth = reader.latestOffset(third, reader.getDefaultReadLimit())
    assert fourth["behind"] == 50_000          # the cap again (100,000 rows in 1 s)
    last = reader.latestOffset(fourth, reader.getDefaultReadLimit())
    assert last["topics"]["logs"] == {"0": 300_000, "1": 200_000, "2": 100_000}
    assert last["behind"] == 0 and last["tick"] == 1_022_000


def test_without_a_catch_up_cap_any_backlog_is_one_batch(reader, monkeypatch):
    from kafka import TopicPartition
    tp = TopicPartition("logs", 0)
    monkeypatch.setattr(reader, "_bounds", lambda: ({tp: 0}, {tp: 5_000_000}))
    reader.catch_up = CatchUpBudget(0, 10_000)
    end = reader.latestOffset({"source": "broker_log", "topics": {"logs": {"0": 0}}, "tick": None, "gap": 0,
                               "error": None}, reader.getDefaultReadLimit())
    assert end["topics"] == {"logs": {"0": 5_000_000}} and end["behind"] == 0


def test_proportional_takes_share_the_budget_exactly():
    waiting = {"a": 7, "b": 0, "c": 13, "d": 1}
    for budget in range(0, 22):
        takes = proportional_takes(waiting, budget)
        assert sum(takes.values()) == min(budget, 21)
        assert all(0 <= takes[k] <= waiting[k] for k in waiting)


def test_a_capped_connectors_clock_ticks_only_once_the_driver_saw_it_caught_up(monkeypatch, tmp_path):
    """holdWhileBehind (the connector capped at kafka.catch_up_max_rows_per_batch): no marker
    before the driver's plan exists, nor while it says the source left records behind; markers
    as usual once it says the source read everything waiting."""
    from streaming.spark.sources import clock as clock_source
    from streaming.spark.sources.markers import write_plan
    now = [5_000.0]
    monkeypatch.setattr(clock_source.time, "time", lambda: now[0])
    plan = str(tmp_path / "plan.json")
    reader = clock_source.ClockStreamReader("offsets", marker_plan=plan, hold_while_behind=True)
    limit = reader.getDefaultReadLimit()
    start = reader.initialOffset()
    assert reader.latestOffset(start, limit) is start                 # no plan yet
    write_plan(plan, None, [])                                          # a query started: nothing known
    assert reader.latestOffset(start, limit) is start
    write_plan(plan, None, ["broker_log"])                              # another source is caught up
    assert reader.latestOffset(start, limit) is start
    write_plan(plan, None, ["broker_log", "offsets"])
    assert reader.latestOffset(start, limit) == {"tick": 5_000_000}
    unheld = clock_source.ClockStreamReader("offsets", marker_plan=plan)
    write_plan(plan, None, [])
    assert unheld.latestOffset(start, limit) == {"tick": 5_000_000}    # without the hold: as before
