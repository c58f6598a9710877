"""The envelope step in the JVM (Spark columns) gives what the Python one gives."""
from __future__ import annotations

import json

import pytest

from streaming.logs.envelope import ENVELOPE_JSON, ENVELOPE_PLAIN, unwrap
from streaming.logs.step import LogSourceSpec
from tests.support.envelopes import LINE, filebeat, fluent_bit, vector


@pytest.mark.spark
def test_jvm_envelope_step_equals_python(spark):
    """streaming/spark/steps.py unwrap_columns (get_json_object in the JVM) == envelope.unwrap."""
    from streaming.spark.steps import unwrap_columns
    raws = [LINE, filebeat(LINE, fields={"broker_id": 7}), fluent_bit(LINE), vector(LINE),
            filebeat(LINE + "\nsecond line"), json.dumps({"log": LINE + "\r\n"}), fluent_bit(LINE, pod="kafka"),
            "{not json kafka.coordinator.group.GroupCoordinator", json.dumps({"other": 1}), "   " + vector(LINE),
            filebeat(LINE, fields={"broker_id": "-1"})]
    specs = {"auto": LogSourceSpec("c", broker_id_field="fields.broker_id"),
             "json": LogSourceSpec("c", envelope=ENVELOPE_JSON, broker_id_field="kubernetes.pod_name"),
             "plain": LogSourceSpec("c", envelope=ENVELOPE_PLAIN)}
    rows = [(sid, raw) for sid in specs for raw in raws]
    df = spark.createDataFrame(rows, "source_id string, raw string")
    got = [tuple(r) for r in df.select("source_id", "raw", *unwrap_columns("raw", specs)).collect()]
    expected = []
    for sid, raw in rows:
        spec = specs[sid]
        u = unwrap(raw, spec.envelope, spec.broker_id_field)
        expected.append((sid, raw, u.line, u.broker, u.host))
    assert got == expected
    assert any(g[3] == 7 for g in got) and any(g[3] == 2 for g in got) and any(g[2] is None for g in got)
