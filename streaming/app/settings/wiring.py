"""Settings into the runtime's plain objects: what the query (streaming/spark/query.py), the log
parse step (streaming/logs/step.py), the diagnosis (state/diagnosis/rules.py) and the metrics sink
(sinks/metrics.py) take. The models are streaming/app/settings/schema.py; this module is the only
part of the settings that imports streaming.spark."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from state.diagnosis.rules import DEFAULT_SETTINGS as DIAGNOSIS_DEFAULTS
from state.diagnosis.rules import DiagnosisSettings
from streaming.app.settings.schema import (
    DiagnosisConfig,
    KafkaSettings,
    LogInput,
    OffsetsInput,
    QuerySettings,
    ReplaySettings,
    RunSettings,
)
from streaming.logs.step import LogSourceSpec
from streaming.spark.query import KafkaRead, LogFile, OffsetsFile, QueryOptions


# ---------------------------------------------------------------------------- inputs (replay)
def log_file(log: LogInput) -> LogFile:
    return LogFile(log.path, LogSourceSpec.of(log))


def offsets_file(offsets: OffsetsInput) -> OffsetsFile:
    return OffsetsFile(offsets.path, offsets.cluster)


# ---------------------------------------------------------------------------- Kafka (run)
def client_config(kafka: KafkaSettings) -> dict[str, Any]:
    """kafka-python's settings: kafka.client, with the secrets read from their files."""
    config = dict(kafka.client)
    for key, path in kafka.client_secret_files.items():
        config[key] = Path(path).read_text().strip()
    return config


def kafka_read(kafka: KafkaSettings) -> KafkaRead:
    return KafkaRead(kafka.bootstrap_servers, tuple(kafka.log_topics), kafka.offsets_topic or None,
                     kafka.starting_offsets, kafka.max_rows_per_batch, kafka.idle_flush, kafka.idle_tick_seconds,
                     idle_tick_max_seconds=kafka.idle_tick_max_seconds,
                     commit_hold_seconds=kafka.commit_hold_seconds,
                     catch_up_max_rows=kafka.catch_up_max_rows_per_batch,
                     catch_up_batch_seconds=kafka.catch_up_batch_seconds,
                     client_config=client_config(kafka),
                     spark_options=dict(kafka.spark_options))


# ---------------------------------------------------------------------------- the query
def diagnosis_settings(config: DiagnosisConfig) -> DiagnosisSettings:
    """The diagnosis thresholds in milliseconds; an unset session timeout is the rules' default."""
    return DiagnosisSettings(
        pause_rejoin_window_ms=int(config.pause_rejoin_window_seconds * 1000),
        poll_rejoin_min_window_ms=int(config.poll_rejoin_min_window_seconds * 1000),
        host_wide_min_removals=config.host_wide_min_removals,
        host_wide_window_ms=int(config.host_wide_window_seconds * 1000),
        host_wide_together_ms=int(config.host_wide_together_seconds * 1000),
        coordinator_wide_min_groups=config.coordinator_wide_min_groups,
        coordinator_wide_window_ms=int(config.coordinator_wide_window_seconds * 1000),
        coordinator_wide_background_factor=config.coordinator_wide_background_factor,
        coordinator_wide_baseline_ms=int(config.coordinator_wide_baseline_seconds * 1000),
        heartbeat_interval_ms=int(config.heartbeat_interval_seconds * 1000),
        consumer_heartbeat_interval_ms=int(config.consumer_heartbeat_interval_seconds * 1000),
        broker_death_window_ms=int(config.broker_death_window_seconds * 1000),
        coordinator_stall_min_groups=config.coordinator_stall_min_groups,
        coordinator_stall_together_ms=int(config.coordinator_stall_together_seconds * 1000),
        coordinator_stall_max_ms=int(config.coordinator_stall_max_seconds * 1000),
        storm_window_ms=int(config.storm_window_seconds * 1000),
        consumer_session_timeout_ms=(DIAGNOSIS_DEFAULTS.consumer_session_timeout_ms
                                     if config.consumer_session_timeout_seconds is None
                                     else int(config.consumer_session_timeout_seconds * 1000)))


def query_options(settings: QuerySettings, **extra: Any) -> QueryOptions:
    """The query's options: every command's, a replay's (and the demo's) batch size and live view,
    `run`'s group filters; `extra` adds others (naming one of those twice is a TypeError)."""
    own: dict[str, Any] = {}
    if isinstance(settings, ReplaySettings):
        own.update(max_rows_per_batch=settings.max_rows_per_batch, live_view=settings.live_view,
                   committed_offsets=settings.end_offsets is not None)
    if isinstance(settings, RunSettings):
        own.update(group_allow=tuple(settings.group_allow), group_deny=tuple(settings.group_deny),
                   committed_offsets=True)
    return QueryOptions(lateness_seconds=settings.lateness_seconds,
                        unknown_lines_sample_per_logger=settings.unknown_lines_sample_per_logger,
                        diagnosis=diagnosis_settings(settings.diagnosis), state_buckets=settings.state_buckets,
                        **own, **extra)


def log_spec(settings: QuerySettings) -> LogSourceSpec:
    """How to read the lines of a log source that has no per-file settings (a live topic)."""
    return LogSourceSpec(settings.cluster, settings.broker_timezone, None, settings.log_envelope,
                         settings.broker_id_field)


# ---------------------------------------------------------------------------- metrics
def metrics_sink_options(settings: QuerySettings) -> dict[str, Any]:
    """The MetricsSink arguments these settings determine."""
    options: dict[str, Any] = {"group_histograms": tuple(settings.group_histograms)}
    if isinstance(settings, RunSettings):
        options.update(max_groups=settings.max_groups,
                       dead_group_retention_seconds=settings.dead_group_retention_seconds)
    return options
