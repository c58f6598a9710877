"""Typed settings per command (pydantic-settings): CLI flags > environment > TOML file > defaults.

- schema.py: the models of each command's settings (fields, defaults, validators); no Spark;
- loading.py: the sources and their precedence, `load`, the environment check, ConfigError;
- wiring.py: the settings turned into the runtime's objects (QueryOptions, KafkaRead, LogFile,
  LogSourceSpec, DiagnosisSettings, the MetricsSink's options). It imports streaming.spark, so
  it is not imported here: `from streaming.app.settings.wiring import ...`.

The names of schema.py and loading.py are re-exported here.
"""
from __future__ import annotations

from streaming.app.settings.loading import (
    OTHER_ENV_VARIABLES,
    ConfigError,
    StartupError,
    check_environment,
    env_names,
    load,
    make_inputs,
)
from streaming.app.settings.schema import (
    COMMANDS,
    COMMIT_HOLD_SECONDS,
    DEFAULT_DRIVER_MEMORY,
    DEFAULT_DURATION_BUCKETS,
    ENV_PREFIX,
    IDLE_TICK_MAX_SECONDS,
    IDLE_TICK_SECONDS,
    LAG_SAMPLE_SECONDS,
    LATENESS_SECONDS,
    REPLAY_MAX_ROWS_PER_BATCH,
    RUN_LATENESS_SECONDS,
    RUN_TRIGGER_INTERVAL_SECONDS,
    STATE_BUCKETS,
    DemoSettings,
    DiagnosisConfig,
    Envelope,
    KafkaSettings,
    LagSettings,
    LogInput,
    OffsetsInput,
    ParseLogsSettings,
    QuerySettings,
    ReplaySettings,
    RunSettings,
    ServingSettings,
)

__all__ = [
    "COMMANDS", "COMMIT_HOLD_SECONDS", "DEFAULT_DRIVER_MEMORY", "DEFAULT_DURATION_BUCKETS", "ENV_PREFIX",
    "IDLE_TICK_MAX_SECONDS", "IDLE_TICK_SECONDS", "LAG_SAMPLE_SECONDS", "LATENESS_SECONDS", "OTHER_ENV_VARIABLES",
    "REPLAY_MAX_ROWS_PER_BATCH", "RUN_LATENESS_SECONDS", "RUN_TRIGGER_INTERVAL_SECONDS", "STATE_BUCKETS",
    "ConfigError", "DemoSettings", "DiagnosisConfig", "Envelope", "KafkaSettings", "LagSettings", "LogInput",
    "OffsetsInput",
    "ParseLogsSettings", "QuerySettings", "ReplaySettings", "RunSettings", "ServingSettings", "StartupError",
    "check_environment", "env_names", "load", "make_inputs",
]
