"""Log envelopes: plain log4j lines and the JSON documents of Filebeat, Fluent Bit and Vector.

The JSON documents below have the shape each shipper writes (field names from their default
outputs); the log lines inside are real lines of the Kafka 2.7 capture.
"""
from __future__ import annotations

import json

import pytest

from streaming.logs.envelope import (
    ENVELOPE_AUTO, ENVELOPE_JSON, ENVELOPE_PLAIN, broker_from_value, parse_field_path, spark_json_path, unwrap
)
from streaming.logs.step import LogSourceSpec, parse_log_rows, unwrap_rows
from streaming.rows import EVENT_COLUMNS
from tests.support.envelopes import LINE, MEMBER_GONE_NO_PREFIX, NO_PREFIX, filebeat, fluent_bit, vector


def test_plain_line_is_the_line():
    assert unwrap(LINE) == unwrap(LINE, ENVELOPE_PLAIN) == unwrap(LINE, ENVELOPE_JSON.replace("json", "auto"))
    assert unwrap(LINE).line == LINE and unwrap(LINE).host is None and unwrap(LINE).broker is None


@pytest.mark.parametrize("doc, host", [
    (filebeat(LINE), "kafka-broker-1"),
    (fluent_bit(LINE), "my-cluster-kafka-2"),
    (vector(LINE), "kafka-broker-3"),
])
@pytest.mark.parametrize("mode", [ENVELOPE_AUTO, ENVELOPE_JSON])
def test_shipper_documents(doc, host, mode):
    u = unwrap(doc, mode)
    assert (u.line, u.host, u.broker, u.error) == (LINE, host, None, None)


def test_multiline_message_gives_its_first_line():
    trace = LINE + "\njava.lang.IllegalStateException: x\n\tat kafka.coordinator.group.GroupCoordinator.f(GC.scala:1)"
    assert unwrap(filebeat(trace)).line == LINE
    assert unwrap(json.dumps({"log": LINE + "\r\n"})).line == LINE


@pytest.mark.parametrize("doc, field, broker", [
    (filebeat(LINE, fields={"broker_id": 7}), "fields.broker_id", 7),
    (filebeat(LINE, fields={"broker_id": "7"}), "fields.broker_id", 7),
    (fluent_bit(LINE), "kubernetes.pod_name", 2),
    (fluent_bit(LINE, pod="kafka-13"), "kubernetes.labels['statefulset.kubernetes.io/pod-name']", 13),
    (vector(LINE), "host", 3),
    (vector(LINE), "no.such.field", None),
    (filebeat(LINE, fields={"broker_id": "none"}), "fields.broker_id", None),
])
def test_broker_id_from_envelope_field(doc, field, broker):
    assert unwrap(doc, ENVELOPE_AUTO, field).broker == broker


@pytest.mark.parametrize("raw, error", [
    ("{not json kafka.coordinator.group.GroupCoordinator", "not a JSON document"),
    ('["a", "list"]', None),
    ('{"msg_missing": 1}', "no string field message/log/msg"),
    ('{"message": {"nested": "object"}}', "no string field"),
])
def test_unreadable_envelopes_say_why(raw, error):
    u = unwrap(raw, ENVELOPE_JSON)
    assert u.line is None
    assert error is None or (u.error is not None and error in u.error)


def test_plain_mode_never_reads_json():
    doc = filebeat(LINE)
    assert unwrap(doc, ENVELOPE_PLAIN).line == doc


@pytest.mark.parametrize("path, parts, spark", [
    ("host.name", ["host", "name"], "$['host']['name']"),
    ("kubernetes.labels['statefulset.kubernetes.io/pod-name']",
     ["kubernetes", "labels", "statefulset.kubernetes.io/pod-name"],
     "$['kubernetes']['labels']['statefulset.kubernetes.io/pod-name']"),
    ("fields.broker_id", ["fields", "broker_id"], "$['fields']['broker_id']"),
])
def test_field_paths(path, parts, spark):
    assert parse_field_path(path) == parts
    assert spark_json_path(path) == spark


@pytest.mark.parametrize("bad", ["", "a..b", ".a", "a.", "a['x"])
def test_bad_field_paths_are_rejected(bad):
    with pytest.raises(ValueError):
        parse_field_path(bad)


@pytest.mark.parametrize("value, broker", [
    (3, 3), ("kafka-3", 3), ("3", 3), ("broker 12 ", 12), (-1, None), ("-1", None), (True, None), (None, None),
    ("kafka", None), ({"a": 1}, None),
])
def test_broker_from_value(value, broker):
    assert broker_from_value(value) == broker


def _parse(raws: list[str], spec: LogSourceSpec) -> list[dict]:
    rows = [("c:x", i + 1, raw, 1795288993000, False) for i, raw in enumerate(raws)]
    return [dict(zip(EVENT_COLUMNS, r)) for r in parse_log_rows(unwrap_rows(rows, {"c:x": spec}), {"c:x": spec})]


def test_broker_prefix_wins_over_envelope_and_config():
    spec = LogSourceSpec(cluster="c", broker_id=9, broker_id_field="fields.broker_id")
    [from_prefix] = _parse([filebeat(LINE, fields={"broker_id": 7})], spec)
    assert from_prefix["broker"] == 1                       # `[GroupCoordinator 1]:`
    [from_envelope] = _parse([filebeat(MEMBER_GONE_NO_PREFIX, fields={"broker_id": 7})], spec)
    assert from_envelope["broker"] == 7
    [from_config] = _parse([filebeat(MEMBER_GONE_NO_PREFIX)], spec)
    assert from_config["broker"] == 9
    [plain] = _parse([MEMBER_GONE_NO_PREFIX], spec)
    assert plain["broker"] == 9


def test_host_travels_with_events_and_quarantine():
    spec = LogSourceSpec(cluster="c")
    [event] = _parse([vector(LINE)], spec)
    assert json.loads(event["data_json"])["log_host"] == "kafka-broker-3"
    [plain] = _parse([LINE], spec)
    assert plain["data_json"] is None      # no data at all: member_failed carries only member_id
    [bad] = _parse(["{broken kafka.coordinator.group.GroupCoordinator"], spec)
    record = json.loads(bad["data_json"])
    assert (bad["kind"], bad["reason"]) == ("quarantine", "unparseable_line")
    assert "not a JSON document" in record["detail"] and record["raw"].startswith("{broken")
    unknown = vector("[2026-11-21 19:23:13,794] INFO [GroupCoordinator 1]: Frobnicated (kafka.coordinator.group.GroupCoordinator)")
    [q] = _parse([unknown], spec)
    assert json.loads(q["data_json"])["host"] == "kafka-broker-3"


def test_ignored_lines_stay_ignored_in_envelopes():
    assert _parse([fluent_bit(NO_PREFIX)], LogSourceSpec(cluster="c")) == []


