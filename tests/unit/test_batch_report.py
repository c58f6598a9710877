"""streaming/app/batch_report.py: Spark's progress report of a micro-batch, typed once, and the
health metrics it sets (sinks/health.py record_batch). The reports are trimmed from Spark's own
(a replay's end-of-input batch and a live batch of bench/cost's steady state, 2026-11-29)."""
from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry

from sinks.health import BatchReport, DecodeCounts, EventTimes, HealthMetrics, LogSourceLines, SourceBatch
from streaming.app.batch_report import batch_report, iso_ms

LIVE: dict[str, Any] = {
    "batchId": 1, "durationMs": {"triggerExecution": 1312, "queryPlanning": 326, "addBatch": 954},
    "eventTime": {"watermark": "2026-11-29T02:45:28.562Z"},
    "stateOperators": [{"numRowsTotal": 7, "numRowsDroppedByWatermark": 2},
                       {"numRowsTotal": 5, "numRowsDroppedByWatermark": 0}],
    "sources": [
        {"startOffset": '{"source": "broker_log", "topics": {"logs": {"0": 0}}, "tick": 1795920338562, "gap": 0, '
                        '"error": null}',
         "endOffset": '{"source": "broker_log", "topics": {"logs": {"0": 0}}, "tick": 1795920399005, "gap": 0, '
                      '"error": null}',
         "numInputRows": 1, "inputRowsPerSecond": 2.0},
        {"startOffset": '{"source": "offsets", "topics": {"o": {"0": 10}}, "tick": 1, "gap": 3, "error": null}',
         "endOffset": '{"source": "offsets", "topics": {"o": {"0": 50}}, "tick": 1, "gap": 4, '
                      '"error": "NoBrokersAvailable"}',
         "numInputRows": 40, "inputRowsPerSecond": 20.5},
    ],
    "observedMetrics": {
        "source_broker_log": {"newest_event_ms": None, "oldest_event_ms": None, "statistics": [
            '{"classes":{"coordinator":2,"not_coordinator":5},"cluster":"c","layouts":{"strimzi4":7},"source":"b1"}']},
        "source_offsets": {"newest_event_ms": 1795920398000, "oldest_event_ms": 1795920390000, "statistics": [
            '{"cluster":"c","counts":[[1,3,"decoded",30],[1,4,"unknown_version",1]]}',
            '{"cluster":"c","counts":[[1,3,"decoded",9]]}']},
        "other_metric": {"x": 1}},
}

REPLAY_END: dict[str, Any] = {
    "batchId": 1, "durationMs": {"triggerExecution": 1039},
    "eventTime": {"watermark": "2099-12-31T23:59:30.000Z"},
    "stateOperators": [{"numRowsTotal": 0, "numRowsDroppedByWatermark": 0}],
    "sources": [
        {"startOffset": '{"source": "broker_log", "i": 0, "lines": 0, "of": 360000, "eof": false}',
         "endOffset": '{"source": "broker_log", "i": 1, "lines": 360000, "of": 360000, "eof": true}',
         "numInputRows": 5000, "inputRowsPerSecond": 0.0},
        {"startOffset": '{"source": "staged", "i": 0, "eof": false}',
         "endOffset": '{"source": "staged", "i": 1, "eof": true}', "numInputRows": 11},
        {"startOffset": None, "endOffset": "null", "numInputRows": 3},
    ],
}


def test_a_live_batch() -> None:
    report = batch_report(LIVE)
    log, offsets = report.sources
    # the caught-up marker is not input; Kafka answered (error null); no gap
    assert log == SourceBatch("broker_log", 0, 2.0, json.loads(LIVE["sources"][0]["endOffset"]), 1795920399005.0,
                              True, 0)
    # the same tick twice is no marker; an error says Kafka did not answer
    assert (offsets.kind, offsets.rows, offsets.tick_ms, offsets.answered, offsets.gap) == \
        ("offsets", 40, None, False, 4)
    assert report.event_times == (EventTimes("broker_log", None, None),
                                  EventTimes("offsets", 1795920398000, 1795920390000))
    assert report.duration_s == 1.312
    assert report.watermark_ms == iso_ms("2026-11-29T02:45:28.562Z") == 1795920328562.0
    assert (report.state_rows, report.late_rows) == (12, 2)
    assert report.tick_of("broker_log") == 1795920399005.0 and report.tick_of("offsets") is None


def test_a_replays_end_of_input_batch() -> None:
    report = batch_report(REPLAY_END)
    log, staged, unknown = report.sources
    assert log.rows == 360000                      # every line the reader read, not its event rows
    assert staged.rows == 10                       # the end-of-input marker is not input
    assert (unknown.kind, unknown.rows, unknown.offset) == ("other", 3, {})
    assert report.watermark_ms is None             # 2099: the end-of-input watermark, no delay
    assert (report.state_rows, report.late_rows, report.event_times) == (0, 0, ())


def test_before_the_first_watermark_and_without_a_stateful_operator() -> None:
    report = batch_report({"eventTime": {"watermark": "1970-01-01T00:00:00.000Z"}})
    assert report == BatchReport()


def test_pysparks_progress_object_is_read_through_its_json() -> None:
    assert batch_report(SimpleNamespace(json=json.dumps(LIVE))) == batch_report(LIVE)


def test_the_health_metrics_of_a_report() -> None:
    registry = CollectorRegistry()
    health = HealthMetrics(registry, wall_clock=lambda: 1795920400.0)
    health.record_batch(batch_report(LIVE))

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)
    assert value("rebalance_monitor_source_up", source="broker_log") == 1.0
    assert value("rebalance_monitor_source_up", source="offsets") == 0.0
    assert value("rebalance_monitor_source_errors_total", source="offsets") == 1.0
    assert value("rebalance_monitor_source_offset_gap_records", source="offsets") == 4.0
    assert value("rebalance_monitor_input_records_total", source="offsets") == 40.0
    assert value("rebalance_monitor_input_records_total", source="broker_log") is None   # only a marker
    assert value("rebalance_monitor_input_rows_per_second", source="offsets") == 20.5
    assert value("rebalance_monitor_batch_duration_seconds") == 1.312
    assert math.isclose(value("rebalance_monitor_watermark_delay_seconds") or 0, 71.438)
    assert value("rebalance_monitor_state_rows") == 12.0
    assert value("rebalance_monitor_late_rows_total") == 2.0
    assert value("rebalance_monitor_source_newest_event_age_seconds", source="offsets") == 2.0


def test_the_statistics_of_the_parse_and_decode_steps() -> None:
    """Statistics rows pass no stateful step: their data come in the report (spark/steps.py observed)."""
    report = batch_report(LIVE)
    assert report.batch_id == 1
    assert report.decode_counts == (DecodeCounts("c", (("1", "3", "decoded", 30), ("1", "4", "unknown_version", 1))),
                                    DecodeCounts("c", (("1", "3", "decoded", 9),)))
    assert report.log_lines == (LogSourceLines("c", "b1", {"strimzi4": 7}, {"coordinator": 2, "not_coordinator": 5}),)
    # the event sink's record form (docs/output.md) reads back to the same
    assert all(DecodeCounts.of(c.record()) == c for c in report.decode_counts)
    assert LogSourceLines.of(report.log_lines[0].record()) == report.log_lines[0]
    assert (batch_report(REPLAY_END).decode_counts, batch_report(REPLAY_END).log_lines) == ((), ())


def test_spark_connector_sources_take_the_kind_of_their_topic() -> None:
    """Spark's connector writes {topic: {partition: offset}} and no kind: the collector's topic map
    names it, so rebalance_monitor_input_records_total counts the connector's records as offsets
    and broker_log (it counted them as "other" before, and a catch-up looked like no input)."""
    progress = {"batchId": 3, "sources": [
        {"description": "KafkaV2[Assign[cold-offsets-0, cold-offsets-1]]",
         "startOffset": '{"cold-offsets": {"0": 0, "1": 5}}', "endOffset": '{"cold-offsets": {"0": 7, "1": 9}}',
         "numInputRows": 11},
        {"description": "KafkaV2[Assign[logs-0]]", "startOffset": None, "endOffset": '{"logs": {"0": 3}}',
         "numInputRows": 3},
        {"description": "KafkaV2[Assign[elsewhere-0]]", "startOffset": None, "endOffset": '{"elsewhere": {"0": 1}}',
         "numInputRows": 1}]}
    kinds = {"cold-offsets": "offsets", "logs": "broker_log"}
    assert [(s.kind, s.rows) for s in batch_report(progress, kinds).sources] == [
        ("offsets", 11), ("broker_log", 3), ("other", 1)]
    assert [s.kind for s in batch_report(progress).sources] == ["other"] * 3


def test_the_backlog_of_each_source_kind():
    """`behind` of the kafka-python source; the connector's latest offsets minus its batch's end;
    nothing for a source that says neither (a replay's files)."""
    progress = {"sources": [
        {"endOffset": '{"source": "offsets", "topics": {"o": {"0": 5}}, "behind": 1200}', "numInputRows": 5},
        {"endOffset": '{"o": {"0": 100, "1": 40}}', "latestOffset": '{"o": {"0": 150, "1": 40, "2": 7}}',
         "numInputRows": 140},
        {"endOffset": '{"source": "broker_log", "i": 1, "lines": 10, "of": 10, "eof": true}', "numInputRows": 1},
        {"endOffset": '{"tick": 1795920399005}', "latestOffset": '{"tick": 1795920399005}', "numInputRows": 1}]}
    assert [s.backlog for s in batch_report(progress, {"o": "offsets"}).sources] == [1200, 50, None, None]


def test_the_catch_up_gauges_and_log_lines(caplog):
    """A source behind by more than it reads in one trigger is catching up: gauges, a line with
    the ETA (at most every 30 s), and a line when it is back at the head."""
    import logging
    clock = [1000.0]
    health = HealthMetrics(CollectorRegistry(), wall_clock=lambda: clock[0])
    caplog.set_level(logging.INFO, logger="rebalance_monitor.run")
    health.note_backlog("offsets", 900_000, 100_000, 1.0)
    assert health.catching_up.labels("offsets")._value.get() == 1
    assert health.backlog.labels("offsets")._value.get() == 900_000
    clock[0] += 10
    health.note_backlog("offsets", 800_000, 100_000, 1.0)          # no second line within 30 s
    clock[0] += 30
    health.note_backlog("offsets", 60_000, 100_000, 1.0)           # still more than half a second's worth
    clock[0] += 1
    health.note_backlog("offsets", 30, 40_000, 1.0)                 # at the head
    assert health.catching_up.labels("offsets")._value.get() == 0
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "run: catching up on offsets: 900,000 records behind, reading 100,000 records/s; about 9 s to the head",
        "run: catching up on offsets: 60,000 records behind, reading 100,000 records/s; about 1 s to the head",
        "run: caught up on offsets after 42 s: 340,000 records read, 8,095 records/s"]
