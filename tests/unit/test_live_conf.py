"""The live query's Spark settings (streaming/spark/session.py live_conf)."""
from __future__ import annotations

from typing import Any

import pytest

from streaming.spark.session import is_local_path, live_conf

MANAGER = "spark.sql.streaming.checkpointFileManagerClass"


@pytest.mark.parametrize("location, local", [
    ("/var/lib/monitor/checkpoint", True), ("checkpoint", True), ("file:/tmp/cp", True),
    ("file:///tmp/cp", True), ("s3a://bucket/cp", False), ("hdfs://nn:8020/cp", False),
    ("abfss://c@acct.dfs.core.windows.net/cp", False),
])
def test_only_a_local_checkpoint_changes_the_file_system(location, local):
    assert is_local_path(location) is local
    conf = live_conf(location)
    assert conf["spark.sql.codegen.wholeStage"] == "false"
    assert (MANAGER in conf) is local
    assert ("spark.hadoop.fs.file.impl" in conf) is local


def test_the_settings_spark_conf_wins(monkeypatch, tmp_path):
    """run() passes live_conf first and the user's spark_conf on top."""
    from streaming.app import service
    seen: dict[str, str] = {}

    def fake_get_spark(master, partitions, conf=None, driver_memory=None):
        seen.update(conf or {})
        raise RuntimeError("stop here")
    monkeypatch.setattr("streaming.spark.session.get_spark", fake_get_spark)
    monkeypatch.setattr(service, "_wait_for_kafka", lambda *a, **k: None)
    from streaming.app.settings import KafkaSettings, RunSettings
    settings = RunSettings(checkpoint_location=str(tmp_path / "cp"), events_dir=str(tmp_path / "ev"),
                           metrics_port=0, spark_conf={"spark.sql.codegen.wholeStage": "true"},
                           kafka=KafkaSettings(bootstrap_servers="127.0.0.1:1", log_topics=["logs"]))
    with pytest.raises(RuntimeError, match="stop here"):
        service.run(settings)
    assert seen["spark.sql.codegen.wholeStage"] == "true"
    assert seen[MANAGER].endswith("FileSystemBasedCheckpointFileManager")


def test_no_data_batches_only_where_no_marker_comes():
    """With idle markers every quiet source brings a batch each idle tick, which fires the state
    timeouts: Spark's extra no-data batch after each watermark move is not run. Without markers
    (idle_flush off, or the connector with a batch cap: no clock source) it releases the last
    records, so it stays."""
    from streaming.app.settings import KafkaSettings
    key = "spark.sql.streaming.noDataMicroBatches.enabled"
    assert live_conf("/cp", idle_markers=True)[key] == "false"
    assert key not in live_conf("/cp")
    base: dict[str, Any] = {"bootstrap_servers": "127.0.0.1:9092", "log_topics": ["logs"]}
    assert KafkaSettings(**base).idle_markers
    assert not KafkaSettings(**base, idle_flush=False).idle_markers
    assert not KafkaSettings(**base, max_rows_per_batch=1000).idle_markers


def test_the_collector_knows_the_kind_of_each_topic(tmp_path):
    """The connector's progress offsets name topics, not kinds: build_collector maps them."""
    from prometheus_client import CollectorRegistry

    from sinks.metrics import MetricsSink
    from streaming.app.service import build_collector
    from streaming.app.settings import KafkaSettings, RunSettings
    settings = RunSettings(checkpoint_location=str(tmp_path / "cp"), events_dir=str(tmp_path / "ev"),
                           kafka=KafkaSettings(bootstrap_servers="127.0.0.1:1", log_topics=["a", "b"],
                                               offsets_topic="offs"))
    collector = build_collector(settings, MetricsSink([1.0], registry=CollectorRegistry()))
    assert collector.topic_kinds == {"a": "broker_log", "b": "broker_log", "offs": "offsets"}
