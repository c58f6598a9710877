"""`run` at start: which missing topics are a configuration error and which are waited for."""
from __future__ import annotations

import re
import threading

import pytest

from sinks.metrics import MetricsSink
from streaming.app import service
from streaming.app.settings import ConfigError, RunSettings, load
from streaming.spark.sources.kafka import TopicsMissing


def _settings(offsets_topic: str) -> RunSettings:
    return load(RunSettings, None, checkpoint_location="/nonexistent/checkpoint", kafka={"bootstrap_servers": "127.0.0.1:9",
                                          "log_topics": ["broker-logs"], "offsets_topic": offsets_topic})


def _answers(*outcomes):
    calls = []

    def check(bootstrap, topics, config, timeout_s=30.0, stop=None):
        calls.append(topics)
        assert config["bootstrap_timeout_ms"] == 10_000 and timeout_s == 10.0   # an attempt gives up after 10 s
        outcome = outcomes[min(len(calls), len(outcomes)) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome
    return check, calls


def test_a_missing_log_topic_is_a_configuration_error(monkeypatch):
    check, _ = _answers(TopicsMissing("127.0.0.1:9", ["broker-logs"]))
    monkeypatch.setattr(service, "check_topics", check)
    with pytest.raises(ConfigError, match=re.escape("topic(s) not found at 127.0.0.1:9: broker-logs")):
        service._wait_for_kafka(_settings("__consumer_offsets"), MetricsSink([1.0]), threading.Event())


def test_a_missing_renamed_offsets_topic_is_a_configuration_error(monkeypatch):
    check, _ = _answers(TopicsMissing("127.0.0.1:9", ["offsets-copy"]))
    monkeypatch.setattr(service, "check_topics", check)
    with pytest.raises(ConfigError, match="offsets-copy"):
        service._wait_for_kafka(_settings("offsets-copy"), MetricsSink([1.0]), threading.Event())


def test_a_cluster_no_group_has_used_yet_is_waited_for(monkeypatch, caplog):
    check, calls = _answers(TopicsMissing("127.0.0.1:9", ["__consumer_offsets"]), None)
    monkeypatch.setattr(service, "check_topics", check)
    stop = threading.Event()
    monkeypatch.setattr(stop, "wait", lambda seconds: False)    # no back-off in the test
    metrics = MetricsSink([1.0])
    with caplog.at_level("WARNING"):
        service._wait_for_kafka(_settings("__consumer_offsets"), metrics, stop)
    assert len(calls) == 2
    assert "__consumer_offsets does not exist yet (no consumer group has used this cluster) (attempt 1, " \
           in caplog.text
    assert "); next attempt in 1 s" in caplog.text
    assert metrics.health.source_up.labels("offsets")._value.get() == 1


def test_stopping_a_query_whose_jvm_is_gone_is_logged_not_raised(caplog):
    class GoneQuery:
        def stop(self):
            raise ConnectionRefusedError("[Errno 111] Connection refused")   # what py4j raises then

    with caplog.at_level("WARNING"):
        service._stop_query(GoneQuery())
    assert "Spark had already stopped (ConnectionRefusedError)" in caplog.text
