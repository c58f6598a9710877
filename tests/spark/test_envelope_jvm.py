"""The envelope step in the JVM (Spark columns) gives what the Python one gives: the line, broker,
host, and a JSON layout's time, level and logger."""
from __future__ import annotations

import json

import pytest

from streaming.logs.envelope import ENVELOPE_JSON, ENVELOPE_PLAIN, unwrap
from streaming.logs.step import LogSourceSpec
from tests.support.envelopes import LINE, filebeat, fluent_bit, vector

GC = "kafka.coordinator.group.GroupCoordinator"
MSG = "[GroupCoordinator 1]: Stabilized group g generation 2 (__consumer_offsets-3) with 1 members"
# log4j2 JSON layouts (streaming/logs/envelope.py JSON_LAYOUTS), and near misses
JSON_LAYOUT_DOCS = [
    {"@timestamp": "2026-11-21T19:23:13.794Z", "ecs.version": "1.2.0", "log.level": "INFO", "message": MSG,
     "process.thread.name": "executor-Rebalance", "log.logger": GC},
    {"@timestamp": "2026-11-21T19:23:13.794Z", "log": {"level": "info", "logger": GC}, "message": MSG},
    {"instant": {"epochSecond": 1795288993, "nanoOfSecond": 794123456}, "thread": "t", "level": "INFO",
     "loggerName": GC, "message": MSG, "endOfBatch": False},
    {"instant": {"epochSecond": 1795288993}, "level": "WARN", "loggerName": GC, "message": MSG},
    {"timeMillis": 1795288993794, "level": "INFO", "loggerName": GC, "message": MSG},
    {"@timestamp": "2026-11-21T19:23:13.794+00:00", "level": "INFO", "logger_name": GC, "message": MSG},
    {"instant": {"epochSecond": -5, "nanoOfSecond": "x"}, "level": "INFO", "loggerName": GC, "message": MSG},
    {"timeMillis": "soon", "@timestamp": 12, "level": "INFO", "loggerName": GC, "message": MSG},
    {"log.level": 3, "log.logger": GC, "message": MSG},
    {"log.level": "INFO", "log.logger": ["x"], "message": MSG},
    {"level": "INFO", "message": MSG},
]
# generic JSON (envelope.py generic_json_fields): every time form, levels, loggers, and near misses
GENERIC_DOCS = [
    {"instant": "2026-11-21T19:23:13.794Z", "someConstant": 1, "message": MSG},          # Strimzi's template
    {"instant": {"epochSecond": 1795288993, "nanoOfSecond": 794999999}, "message": MSG},
    {"instant": {"epochSecond": "1795288993"}, "severity": "warning", "message": MSG},
    {"instant": {"epochSecond": 10**16}, "time": 1795288993, "message": MSG},
    {"@timestamp": "2026-11-21T20:23:13.794+01:00", "log": {"level": "error", "logger": 5}, "message": MSG},
    {"timestamp": 1795288993, "level": "I", "log.level": "debug", "logger": GC, "msg": MSG},
    {"time": 1795288993.794, "logger_name": "GroupCoordinator", "level": 30, "message": MSG},
    {"time": 1.795288993794e9, "message": MSG}, {"time": 1795288993794, "message": MSG},
    {"time": "1795288993794", "message": MSG}, {"time": "1795288993.794", "message": MSG},
    {"timeMillis": "1795288993794", "message": MSG}, {"timestamp": 9999999999.9999, "message": MSG},
    {"time": 35, "message": MSG}, {"time": -1795288993, "message": MSG}, {"time": 1e20, "message": MSG},
    {"time": "1e400", "message": MSG}, {"time": True, "message": MSG}, {"time": [1795288993], "message": MSG},
    {"time": {"epochSecond": 1795288993}, "message": MSG}, {"time": "soon", "timestamp": 1795288993, "message": MSG},
    {"time": "2026-11-21T19:23:13Z", "text": MSG},
    {"time": "2026-11-21T19:23:13Z", "log": MSG + "\n", "stream": "stdout"},             # docker json-file
]


@pytest.mark.spark
def test_jvm_envelope_step_equals_python(spark):
    """streaming/spark/steps.py unwrap_frame (get_json_object in the JVM) == envelope.unwrap."""
    from streaming.spark.steps import unwrap_frame
    raws = [LINE, filebeat(LINE, fields={"broker_id": 7}), fluent_bit(LINE), vector(LINE),
            filebeat(LINE + "\nsecond line"), json.dumps({"log": LINE + "\r\n"}), fluent_bit(LINE, pod="kafka"),
            "{not json kafka.coordinator.group.GroupCoordinator", json.dumps({"other": 1}), "   " + vector(LINE),
            filebeat(LINE, fields={"broker_id": "-1"})] + [json.dumps(d) for d in JSON_LAYOUT_DOCS] + [
            # JSON layouts behind container prefixes and inside a shipper's message
            "2026-11-21T19:23:13.794123456Z stdout F " + json.dumps(JSON_LAYOUT_DOCS[0]),
            "2026-11-21T19:23:13.794123456Z " + json.dumps(JSON_LAYOUT_DOCS[2]),
            "kafka-1  | " + json.dumps(JSON_LAYOUT_DOCS[4]),
            fluent_bit(json.dumps(JSON_LAYOUT_DOCS[0])), filebeat(json.dumps(JSON_LAYOUT_DOCS[2])),
            fluent_bit(json.dumps({"level": "INFO", "loggerName": GC})),
            "2026-11-21T19:23:13.794Z stdout F {not json " + GC, "kafka-1  | " + json.dumps({"other": 1}),
            "2026-11-21T19:23:13.794Z stdout F " + LINE] + [json.dumps(d) for d in GENERIC_DOCS] + [
            # generic JSON behind container prefixes and inside a shipper's message (which wins over the
            # shipper's own time), and a JSON layout inside a document that would be generic JSON itself
            "2026-11-21T19:23:13.794123456Z stdout F " + json.dumps(GENERIC_DOCS[0]),
            fluent_bit(json.dumps(GENERIC_DOCS[5])), vector(json.dumps(GENERIC_DOCS[0])),
            vector(json.dumps(JSON_LAYOUT_DOCS[2])), vector(json.dumps({"instant": "soon", "message": MSG}))]
    specs = {"auto": LogSourceSpec("c", broker_id_field="fields.broker_id"),
             "json": LogSourceSpec("c", envelope=ENVELOPE_JSON, broker_id_field="kubernetes.pod_name"),
             "plain": LogSourceSpec("c", envelope=ENVELOPE_PLAIN)}
    rows = [(sid, raw) for sid in specs for raw in raws]
    df = spark.createDataFrame(rows, "source_id string, raw string")
    got = [tuple(r) for r in unwrap_frame(df, "raw", specs).select(
        "source_id", "raw", "line", "broker_hint", "host_hint", "layout_field", "ts_field", "level_field",
        "logger_field").collect()]
    expected = []
    for sid, raw in rows:
        spec = specs[sid]
        u = unwrap(raw, spec.envelope, spec.broker_id_field)
        f = u.fields
        expected.append((sid, raw, u.line, u.broker, u.host) + (
            (f.layout, f.ts, f.level, f.logger) if f is not None else (None, None, None, None)))
    assert got == expected
    layouts = {g[5] for g in got if g[0] == "auto"}
    assert layouts == {None, "ecs-json", "log4j2-json", "logstash-json", "envelope+ecs-json", "envelope+log4j2-json",
                       "generic-json", "envelope+generic-json"}
    generic = {(g[6], g[7], g[8]) for g in got if g[0] == "auto" and g[5] == "generic-json"}
    assert {("1795288993794", None, None), ("1795288993000", "DEBUG", GC), ("1795288993794", None, "GroupCoordinator"),
            ("9999999999999", None, None), ("2026-11-21T20:23:13.794+01:00", "ERROR", None)} <= generic
    assert [g[2] for g in got if g[0] == "auto" and g[1].startswith("kafka-1  | ")] == [MSG, "kafka-1  | {\"other\": 1}"]
    assert ("log4j2-json", "1795288993794", "INFO") in {(g[5], g[6], g[7]) for g in got}
    assert any(g[3] == 7 for g in got) and any(g[3] == 2 for g in got) and any(g[2] is None for g in got)
