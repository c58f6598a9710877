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
    from streaming.app.settings.wiring import diagnosis_settings
    assert diagnosis_settings(DiagnosisConfig()) == DEFAULT_SETTINGS


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


@pytest.mark.parametrize("var, value, key, expected", [
    ("REBALANCE_MONITOR_KAFKA__LOG_TOPICS", "broker-logs", ("kafka", "log_topics"), ["broker-logs"]),
    ("REBALANCE_MONITOR_KAFKA__LOG_TOPICS", "a, b,c", ("kafka", "log_topics"), ["a", "b", "c"]),
    ("REBALANCE_MONITOR_KAFKA__LOG_TOPICS", '["a,b"]', ("kafka", "log_topics"), ["a,b"]),   # JSON as before
    ("REBALANCE_MONITOR_GROUP_DENY", "^_confluent", ("group_deny",), ["^_confluent"]),
    ("REBALANCE_MONITOR_GROUP_ALLOW", "sc0.*", ("group_allow",), ["sc0.*"]),
    ("REBALANCE_MONITOR_DURATION_BUCKETS", "1,2,3", ("duration_buckets",), (1.0, 2.0, 3.0)),
    ("REBALANCE_MONITOR_DURATION_BUCKETS", "5", ("duration_buckets",), (5.0,)),
    ("REBALANCE_MONITOR_DURATION_BUCKETS", "[0.5, 1]", ("duration_buckets",), (0.5, 1.0)),
    ("REBALANCE_MONITOR_KAFKA__CLIENT__SECURITY_PROTOCOL", "SSL", ("kafka", "client"), {"security_protocol": "SSL"}),
    ("REBALANCE_MONITOR_KAFKA__CLIENT", '{"security_protocol": "SSL"}', ("kafka", "client"),
     {"security_protocol": "SSL"}),
])
def test_list_values_from_the_environment_are_comma_separated_or_json(monkeypatch, var, value, key, expected):
    from streaming.app.settings import RunSettings, load
    monkeypatch.setenv(var, value)
    settings = load(RunSettings, kafka={"bootstrap_servers": "b:1"}, checkpoint_location="/c")
    got = settings
    for part in key:
        got = getattr(got, part)
    assert got == expected


def test_a_flag_still_beats_a_comma_separated_environment_list(monkeypatch, tmp_path):
    from streaming.app.cli.run import run_settings
    monkeypatch.setenv("REBALANCE_MONITOR_KAFKA__LOG_TOPICS", "env-a,env-b")
    cfg = _toml(tmp_path, KAFKA_TOML)
    assert run_settings(_run_args("--config", cfg)).kafka.log_topics == ["env-a", "env-b"]
    assert run_settings(_run_args("--config", cfg, "--log-topic", "flag")).kafka.log_topics == ["flag"]


def test_unknown_environment_variables_are_named_with_the_closest_setting():
    from streaming.app.settings import OTHER_ENV_VARIABLES, ConfigError, check_environment
    check_environment({"REBALANCE_MONITOR_CLUSTER": "x", "REBALANCE_MONITOR_KAFKA__BOOTSTRAP_SERVERS": "b:1",
                       "REBALANCE_MONITOR_KAFKA__CLIENT__SASL_MECHANISM": "PLAIN", "rebalance_monitor_cluster": "x",
                       "REBALANCE_MONITOR_DIAGNOSIS__STORM_WINDOW_SECONDS": "60", "PATH": "/bin",
                       **dict.fromkeys(OTHER_ENV_VARIABLES, "x")})
    with pytest.raises(ConfigError) as err:
        check_environment({"REBALANCE_MONITOR_CLUSTERR": "x", "REBALANCE_MONITOR_KAFKA__BOOTSTRAP_SERVER": "b",
                           "REBALANCE_MONITOR_DIAGNOSIS__STORM_WINDOW": "1"})
    assert str(err.value).splitlines() == [
        "environment: REBALANCE_MONITOR_CLUSTERR is not a setting; did you mean REBALANCE_MONITOR_CLUSTER? "
        "(docs/configuration.md lists them)",
        "environment: REBALANCE_MONITOR_DIAGNOSIS__STORM_WINDOW is not a setting; did you mean "
        "REBALANCE_MONITOR_DIAGNOSIS__STORM_WINDOW_SECONDS? (docs/configuration.md lists them)",
        "environment: REBALANCE_MONITOR_KAFKA__BOOTSTRAP_SERVER is not a setting; did you mean "
        "REBALANCE_MONITOR_KAFKA__BOOTSTRAP_SERVERS? (docs/configuration.md lists them)"]


def test_the_allowed_other_variables_are_documented():
    from pathlib import Path

    from streaming.app.settings import OTHER_ENV_VARIABLES
    text = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    assert [v for v in OTHER_ENV_VARIABLES if f"| `{v}` |" not in text] == []
