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
    with pytest.raises(ConfigError, match=r"kafka\.bootstrap_servers"):
        run_settings(_run_args("--log-topic", "x", "--checkpoint", str(tmp_path)))


@pytest.mark.parametrize("key, value", [("kafka", '{bootstrap_servers = "b:1"}'), ("group_allow", '["a"]'),
                                        ("max_groups", "5"), ("metrics_port", "1")])
def test_replay_refuses_the_keys_of_other_commands(tmp_path, key, value):
    from streaming.app.settings import ConfigError, ReplaySettings, load
    with pytest.raises(ConfigError, match=rf"{key}: Extra inputs are not permitted"):
        load(ReplaySettings, _toml(tmp_path, f"{key} = {value}\n"))


def test_run_names_what_it_requires(tmp_path):
    from streaming.app.settings import ConfigError, RunSettings, load
    with pytest.raises(ConfigError) as err:
        load(RunSettings, _toml(tmp_path, "cluster = \"prod\"\n"))
    assert "kafka: required for `run`" in str(err.value)
    assert "checkpoint_location: required for `run`" in str(err.value)


def test_enum_like_settings_are_checked(tmp_path):
    from streaming.app.settings import ConfigError, ParseLogsSettings, RunSettings, load
    with pytest.raises(ConfigError, match="log_envelope: Input should be 'auto', 'plain' or 'json'"):
        load(ParseLogsSettings, _toml(tmp_path, 'log_envelope = "xml"\n'))
    with pytest.raises(ConfigError, match=r"kafka\.source: Input should be 'auto', 'python' or 'spark'"):
        load(RunSettings, _toml(tmp_path, 'checkpoint_location = "/c"\n[kafka]\nbootstrap_servers = "b:1"\n'
                                          'source = "java"\n'))


def test_the_defaults_of_the_diagnosis_table_are_the_state_machines():
    from state.diagnosis.rules import DEFAULT_SETTINGS
    from streaming.app.settings import DiagnosisConfig
    assert DiagnosisConfig().to_settings() == DEFAULT_SETTINGS


def test_spark_conf_flags_merge_into_the_files_table_and_keys_must_be_spark_settings(tmp_path):
    from streaming.app.cli.run import run_settings
    from streaming.app.settings import ConfigError, RunSettings, load
    cfg = _toml(tmp_path, KAFKA_TOML.replace("[kafka]", '[spark_conf]\n"spark.jars.ivy" = "/var/cache/ivy"\n[kafka]'))
    s = run_settings(_run_args("--config", cfg, "--spark-conf",
                               "spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
                               "--spark-conf", "spark.driver.memory=2g"))
    assert s.spark_conf == {"spark.jars.ivy": "/var/cache/ivy", "spark.driver.memory": "2g",
                            "spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"}
    with pytest.raises(SystemExit):
        _run_args("--spark-conf", "no-equals-sign")
    with pytest.raises(ConfigError, match=r"spark_conf: Value error, not a Spark setting \(they start with 'spark\.'\): "
                                          r"jars\.packages"):
        load(RunSettings, cfg, spark_conf={"jars.packages": "x"})
