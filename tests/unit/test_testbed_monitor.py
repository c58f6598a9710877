"""The configuration file testbed/monitor.MonitorProcess writes is one `run` accepts, with the
bed's profile (MonitorSettings()) and with the product's defaults (MonitorSettings.defaults)."""
from __future__ import annotations

from streaming.app.settings import RUN_LATENESS_SECONDS, RUN_TRIGGER_INTERVAL_SECONDS, RunSettings, load
from testbed.monitor import MonitorProcess, MonitorSettings


def test_the_beds_profile_is_a_valid_run_configuration(tmp_path):
    monitor = MonitorProcess("127.0.0.1:9092", ["logs-a", "logs-b"], tmp_path,
                             MonitorSettings(shuffle_partitions=8, diagnosis={"pause_rejoin_window_seconds": 20}),
                             cluster="kafka-4.4.0", name="local")
    settings = load(RunSettings, str(monitor.write_config()))
    assert monitor.config == tmp_path / "local.toml"
    assert (settings.lateness_seconds, settings.trigger_interval_seconds, settings.shuffle_partitions) == (2.0, 1.0, 8)
    assert (settings.cluster, settings.metrics_host, settings.metrics_port) == ("kafka-4.4.0", "127.0.0.1", 0)
    assert settings.checkpoint_location == str(tmp_path / "checkpoint")
    assert settings.events_dir == str(tmp_path / "events")
    assert settings.kafka.log_topics == ["logs-a", "logs-b"]
    assert (settings.kafka.offsets_topic, settings.kafka.source, settings.kafka.idle_tick_max_seconds) == \
        ("__consumer_offsets", "python", 10.0)
    assert monitor.command()[1:] == ["run", "--config", str(monitor.config)]


def test_the_defaults_profile_leaves_every_other_setting_at_the_products_default(tmp_path):
    monitor = MonitorProcess("127.0.0.1:9092", "logs", tmp_path, MonitorSettings.defaults(lateness_s=30.0),
                             offsets_topic="offsets", top_toml="max_groups = 11\n",
                             extra_toml='[spark_conf]\n"spark.ui.enabled" = "false"\n')
    settings = load(RunSettings, str(monitor.write_config()))
    assert (settings.lateness_seconds, settings.trigger_interval_seconds) == (30.0, RUN_TRIGGER_INTERVAL_SECONDS)
    assert settings.max_groups == 11 and settings.kafka.offsets_topic == "offsets"
    assert settings.spark_conf["spark.ui.enabled"] == "false"
    assert "[diagnosis]" not in monitor.config.read_text() and "idle_tick_max" not in monitor.config.read_text()
    assert MonitorSettings.defaults().record_delay_s() > RUN_LATENESS_SECONDS
    submitted = MonitorProcess("b:9092", "logs", tmp_path, submit=lambda argv: ["spark-submit", *argv])
    assert submitted.command() == ["spark-submit", "run", "--config", str(submitted.config)]
