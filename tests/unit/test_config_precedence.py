"""Settings precedence CLI > environment > TOML > defaults, with nested tables merged key by key."""
from __future__ import annotations

import pytest


def _toml(tmp_path, text):
    path = tmp_path / "monitor.toml"
    path.write_text(text)
    return str(path)


def test_environment_beats_the_file(tmp_path, monkeypatch):
    from streaming.app.settings import ReplaySettings, load
    cfg = _toml(tmp_path, "lateness_seconds = 5\n")
    monkeypatch.setenv("REBALANCE_MONITOR_LATENESS_SECONDS", "99")
    assert load(ReplaySettings, cfg).lateness_seconds == 99
    assert load(ReplaySettings, cfg, lateness_seconds=7).lateness_seconds == 7      # a flag beats both
    monkeypatch.delenv("REBALANCE_MONITOR_LATENESS_SECONDS")
    assert load(ReplaySettings, cfg).lateness_seconds == 5
    assert load(ReplaySettings).lateness_seconds == 30                              # the default


KAFKA_TOML = """
checkpoint_location = "/tmp/ckpt"
[kafka]
bootstrap_servers = "file:9092"
log_topics = ["file-logs"]
[kafka.client]
security_protocol = "SASL_SSL"
sasl_mechanism = "SCRAM-SHA-512"
"""


def _run_args(*argv):
    from streaming.app.cli import build_parser
    return build_parser().parse_args(["run", *argv])


def test_a_kafka_flag_keeps_the_rest_of_the_files_kafka_table(tmp_path):
    from streaming.app.cli.run import run_settings
    cfg = _toml(tmp_path, KAFKA_TOML)
    s = run_settings(_run_args("--config", cfg, "--bootstrap-servers", "flag:9092"))
    assert s.kafka.bootstrap_servers == "flag:9092"
    assert s.kafka.client == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512"}
    assert s.kafka.log_topics == ["file-logs"]
    s = run_settings(_run_args("--config", cfg, "--log-topic", "flag-logs"))
    assert s.kafka.bootstrap_servers == "file:9092" and s.kafka.log_topics == ["flag-logs"]
    assert s.kafka.client["security_protocol"] == "SASL_SSL"


def test_environment_merges_into_the_files_kafka_table(tmp_path, monkeypatch):
    from streaming.app.settings import RunSettings, load
    monkeypatch.setenv("REBALANCE_MONITOR_KAFKA__BOOTSTRAP_SERVERS", "env:9092")
    s = load(RunSettings, _toml(tmp_path, KAFKA_TOML))
    assert s.kafka.bootstrap_servers == "env:9092" and s.kafka.log_topics == ["file-logs"]
    assert s.kafka.client["sasl_mechanism"] == "SCRAM-SHA-512"


def test_a_kafka_flag_without_a_file_still_needs_bootstrap_servers(tmp_path):
    from streaming.app.cli.run import run_settings
    from streaming.app.settings import ConfigError
    with pytest.raises(ConfigError, match="kafka.bootstrap_servers"):
        run_settings(_run_args("--log-topic", "x", "--checkpoint", str(tmp_path)))
