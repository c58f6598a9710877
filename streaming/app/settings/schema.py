"""The settings of each command as pydantic models: their fields, defaults, validators and docs.

Each command accepts only its own keys (docs/configuration.md): `parse-logs` how to read log lines,
`replay` also the query's, `demo` also the /metrics server's, `run` also Kafka, the checkpoint and
the live service's. Every value is validated at start; an error names the field. How values reach
these models (CLI flags > environment > TOML file > defaults) is streaming/app/settings/loading.py;
what the runtime makes of them, streaming/app/settings/wiring.py. No Spark here: this module
imports neither pyspark nor streaming.spark.
"""
from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from state.at_risk import AT_RISK_FRACTION as _AT_RISK_FRACTION
from state.diagnosis.rules import DEFAULT_SETTINGS as DIAGNOSIS_DEFAULTS
from state.rebalance_cost import DEFAULT_CATCH_UP_DEADLINE_S
from streaming import defaults
from streaming.logs.broker_config import consumer_session_timeout_ms
from streaming.logs.envelope import ENVELOPE_AUTO, parse_field_path
from streaming.logs.step import DEFAULT_UNKNOWN_SAMPLE
from streaming.logs.timeutil import zone

ENV_PREFIX = "REBALANCE_MONITOR_"
# Rebalance durations run from milliseconds (a 2-member sync) to the 300 s default
# max.poll.interval.ms and beyond (a stuck member holds the JOIN phase that long).
DEFAULT_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                            60.0, 120.0, 300.0, 600.0, 1800.0)
Envelope = Literal["auto", "plain", "json"]

# The query's defaults, shared with the Spark side (streaming/defaults.py).
LATENESS_SECONDS, REPLAY_MAX_ROWS_PER_BATCH = defaults.LATENESS_SECONDS, defaults.REPLAY_MAX_ROWS_PER_BATCH
CATCH_UP_MAX_ROWS, CATCH_UP_BATCH_SECONDS = defaults.CATCH_UP_MAX_ROWS, defaults.CATCH_UP_BATCH_SECONDS
STATE_BUCKETS, DEFAULT_DRIVER_MEMORY = defaults.STATE_BUCKETS, defaults.DEFAULT_DRIVER_MEMORY


def _check_zone(value: str) -> str:
    zone(value)   # raises ValueError("unknown time zone ...")
    return value


def _check_field_path(value: str | None) -> str | None:
    if value is not None:
        parse_field_path(value)   # raises ValueError naming the bad path
    return value


# ---------------------------------------------------------------------------- inputs (replay)
class LogInput(BaseModel):
    """One broker log file (replay).

    envelope: `auto` (default; JSON documents are recognised by a leading `{`), `plain` or `json`
    (Filebeat / Fluent Bit / Vector documents, streaming/logs/envelope.py). broker_id_field: dotted
    path of the envelope field holding the broker id, used when the line's coordinator prefix
    does not name the broker; broker_id: the last fallback.
    """
    path: str
    cluster: str = "default"
    broker_timezone: str = "UTC"
    broker_id: int | None = Field(default=None, ge=0)
    envelope: Envelope = ENVELOPE_AUTO
    broker_id_field: str | None = None

    _zone = field_validator("broker_timezone")(_check_zone)
    _field = field_validator("broker_id_field")(_check_field_path)

    @field_validator("path")
    @classmethod
    def _exists(cls, value: str) -> str:
        if not Path(value).is_file():
            raise ValueError(f"no such file: {value}")
        return value


class OffsetsInput(BaseModel):
    """One `__consumer_offsets` input (replay): a JSONL dump, a copy of a broker's
    `__consumer_offsets-N` directory, a parent of such directories, or one `.log` segment file."""
    path: str
    cluster: str = "default"

    @field_validator("path")
    @classmethod
    def _exists(cls, value: str) -> str:
        if not Path(value).exists():
            raise ValueError(f"no such file or directory: {value}")
        if Path(value).is_dir():
            from streaming.offsets.segments import find_partition_dirs
            if not find_partition_dirs(value):
                raise ValueError(f"no __consumer_offsets-N directory in {value}")
        return value


# ---------------------------------------------------------------------------- tables
# kafka.idle_tick_seconds: a quiet cluster's micro-batches come this often, not every trigger
# (docs/benchmarks.md, "Quiet cluster").
IDLE_TICK_SECONDS = 5.0
IDLE_TICK_MAX_SECONDS = 60.0
COMMIT_HOLD_SECONDS = 5.0


class KafkaSettings(BaseModel):
    """Where the live query reads from (`rebalance-monitor run`)."""
    model_config = {"extra": "forbid"}

    bootstrap_servers: str = Field(min_length=1, description="host:port[,host:port...]")
    # kafka-python settings passed through as they are: security_protocol, sasl_mechanism,
    # sasl_plain_username, ssl_cafile, ssl_certfile, ... (see kafka-python's KafkaConsumer).
    client: dict[str, Any] = Field(default_factory=dict)
    # Settings whose value is read from a file at start (mounted secrets; never inline them),
    # e.g. {"sasl_plain_password" = "/etc/rebalance-monitor/kafka/password"}.
    client_secret_files: dict[str, str] = Field(default_factory=dict)
    # Extra options for Spark's built-in kafka source, as Spark names them
    # ("kafka.security.protocol", "kafka.sasl.jaas.config", ...).
    spark_options: dict[str, str] = Field(default_factory=dict)
    log_topics: list[str] = Field(default_factory=list, description="topics carrying broker log lines")
    offsets_topic: str | None = "__consumer_offsets"
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    source: Literal["auto", "python", "spark"] = "auto"
    # No cap by default: a batch reads every partition to its end, so partitions never drift
    # apart in event time (a capped catch-up can make one partition's rows late; they are counted
    # in rebalance_monitor_late_rows_total).
    max_rows_per_batch: int | None = Field(default=None, ge=1)
    # When every partition of a topic is read to its end, add a marker at wall-clock time so a
    # quiet topic does not hold events back (docs/design.md). Off only for replays of old data.
    idle_flush: bool = True
    # A caught-up source with no new records adds a new marker only when its last one is this old:
    # until then its offset stays put and Spark runs no micro-batch for it (a quiet cluster costs
    # a batch every this many seconds, not every trigger). Held records wait up to this much longer
    # on a quiet cluster; the live view does not wait for markers. 0: a marker every trigger.
    idle_tick_seconds: float = Field(default=IDLE_TICK_SECONDS, ge=0)
    # ... and only when something waits for the watermark (a group's held events or deadline, a
    # removal the driver holds: streaming/spark/sources/markers.py); with nothing waiting, a quiet
    # source adds one this often (it bounds rebalance_monitor_watermark_delay_seconds). 0: every slot.
    idle_tick_max_seconds: float = Field(default=IDLE_TICK_MAX_SECONDS, ge=0)
    # New `__consumer_offsets` records that are all offset commits wait up to this long (or until
    # a marker is due, or other records come) before they start a micro-batch: a fleet's
    # auto-commits do not cost a batch each on a quiet cluster (streaming/spark/sources/kafka.py,
    # "Commit holding"). kafka-python source only. 0: read them at once.
    commit_hold_seconds: float = Field(default=COMMIT_HOLD_SECONDS, ge=0)
    # Catching up (a new checkpoint on a full __consumer_offsets, a monitor that was down): a
    # backlog above this many records is read in capped batches instead of one, the bound on what
    # a batch holds; each sized to take about catch_up_batch_seconds at the rate the last ones
    # ran, so /metrics and rebalance_monitor_source_backlog_records move while it reads. 0: read
    # any backlog in one batch. Spark's connector: batches of this size while behind (its
    # maxOffsetsPerTrigger), its markers held until it is caught up (sources/clock.py).
    catch_up_max_rows_per_batch: int = Field(default=CATCH_UP_MAX_ROWS, ge=0)
    catch_up_batch_seconds: float = Field(default=CATCH_UP_BATCH_SECONDS, gt=0)

    @field_validator("client_secret_files")
    @classmethod
    def _secret_files_exist(cls, value: dict[str, str]) -> dict[str, str]:
        for key, path in value.items():
            if not Path(path).is_file():
                raise ValueError(f"{key}: no such file: {path}")
        return value

    @model_validator(mode="after")
    def _some_topic(self) -> KafkaSettings:
        if not self.log_topics and not self.offsets_topic:
            raise ValueError("give kafka.log_topics and/or kafka.offsets_topic")
        return self

    @property
    def idle_markers(self) -> bool:
        """Does every live source add markers when quiet? Spark's connector gets its clock source
        only without a batch cap (streaming/spark/sources/clock.py)."""
        return self.idle_flush and not self.max_rows_per_batch


LAG_SAMPLE_SECONDS = 10.0
AT_RISK_FRACTION = _AT_RISK_FRACTION       # state/at_risk.py


class LagSettings(BaseModel):
    """Consumer lag (`run`; state/lag.py): how often the driver samples the end offsets of the
    partitions the groups commit to (streaming/app/lag_sampler.py)."""
    model_config = {"extra": "forbid"}

    sample_seconds: float = Field(default=LAG_SAMPLE_SECONDS, gt=0,
                                  description="seconds between two ListOffsets rounds of the lag sampler")
    at_risk_fraction: float = Field(default=AT_RISK_FRACTION, gt=0, le=1,
                                    description="a member with records waiting and no commit for this fraction of "
                                                "its rebalance timeout is at risk of a poll timeout (state/at_risk.py)")
    catch_up_deadline_seconds: float = Field(default=DEFAULT_CATCH_UP_DEADLINE_S, gt=0,
                                             description="a rebalance whose group's lag is not back to its level "
                                                         "before it this long after it is reported as not caught "
                                                         "up (state/rebalance_cost.py)")
    partition_groups: str = Field(default="",
                                  description="groups (a regular expression matching the whole name) whose lag "
                                              "is also shown per partition, 2 series per partition; empty: none")

    @field_validator("partition_groups")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value


_D = DIAGNOSIS_DEFAULTS


class DiagnosisConfig(BaseModel):
    """Thresholds of the removal diagnosis (docs/diagnosis.md), in seconds; the defaults are
    state/diagnosis/rules.py's."""
    model_config = {"extra": "forbid"}

    pause_rejoin_window_seconds: float = Field(default=_D.pause_rejoin_window_ms / 1000, gt=0)
    poll_rejoin_min_window_seconds: float = Field(default=_D.poll_rejoin_min_window_ms / 1000, gt=0)
    host_wide_min_removals: int = Field(default=_D.host_wide_min_removals, ge=2)
    host_wide_window_seconds: float = Field(default=_D.host_wide_window_ms / 1000, ge=0,
                                            description="0: each removal's session timeout")
    host_wide_together_seconds: float = Field(default=_D.host_wide_together_ms / 1000, ge=0,
                                              description="two removals this close that were all of a host's "
                                                          "members in their groups are host-wide")
    coordinator_wide_min_groups: int = Field(default=_D.coordinator_wide_min_groups, ge=2)
    coordinator_wide_window_seconds: float = Field(default=_D.coordinator_wide_window_ms / 1000, gt=0)
    coordinator_wide_background_factor: float = Field(default=_D.coordinator_wide_background_factor, ge=0)
    coordinator_wide_baseline_seconds: float = Field(default=_D.coordinator_wide_baseline_ms / 1000, gt=0)
    heartbeat_interval_seconds: float = Field(default=_D.heartbeat_interval_ms / 1000, ge=0)
    consumer_heartbeat_interval_seconds: float = Field(default=_D.consumer_heartbeat_interval_ms / 1000, ge=0)
    broker_death_window_seconds: float = Field(default=_D.broker_death_window_ms / 1000, ge=0)
    coordinator_stall_min_groups: int = Field(default=_D.coordinator_stall_min_groups, ge=1)
    coordinator_stall_together_seconds: float = Field(default=_D.coordinator_stall_together_ms / 1000, ge=0)
    coordinator_stall_max_seconds: float = Field(default=_D.coordinator_stall_max_ms / 1000, ge=0)
    storm_window_seconds: float = Field(default=_D.storm_window_ms / 1000, gt=0)
    consumer_session_timeout_seconds: float | None = Field(
        default=None, gt=0, description="the brokers' group.consumer.session.timeout.ms; unset: what the broker "
                                        f"logs say at start (replay), else {_D.consumer_session_timeout_ms / 1000:g}")

    def with_broker_logs(self, paths: list[str]) -> DiagnosisConfig:
        """The session timeout of consumer-protocol groups from the brokers' own start-up lines
        when it was not given (streaming/logs/broker_config.py)."""
        if self.consumer_session_timeout_seconds is not None:
            return self
        found = consumer_session_timeout_ms(paths)
        return self if found is None else self.model_copy(update={"consumer_session_timeout_seconds": found[0] / 1000})


# ---------------------------------------------------------------------------- per command
Source = PydanticBaseSettingsSource


class _Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__",
                                      extra="forbid")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: Source,
                                   env_settings: Source, dotenv_settings: Source, file_secret_settings: Source
                                   ) -> tuple[Source, ...]:
        # The precedence lives with the sources (loading.py imports this module: imported here).
        from streaming.app.settings.loading import sources
        return sources(settings_cls, init_settings)


def _check_regexes(value: list[str]) -> list[str]:
    for pattern in value:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression {pattern!r}: {exc}") from None
    return value


class ParseLogsSettings(_Settings):
    """`parse-logs`: how to read broker log lines."""
    broker_timezone: str = "UTC"
    log_envelope: Envelope = ENVELOPE_AUTO
    broker_id_field: str | None = None

    _zone = field_validator("broker_timezone")(_check_zone)
    _field = field_validator("broker_id_field")(_check_field_path)


class QuerySettings(ParseLogsSettings):
    """What every command that runs the streaming query takes."""
    cluster: str = Field(default="default", min_length=1)
    lateness_seconds: float = Field(default=LATENESS_SECONDS, ge=0,
                                    description="watermark delay per source")
    unknown_lines_sample_per_logger: int = Field(
        default=DEFAULT_UNKNOWN_SAMPLE, ge=0,
        description="unknown coordinator lines kept in quarantine per logger and parse task")
    state_buckets: int = Field(
        default=STATE_BUCKETS, ge=0, le=1_000_000,
        description="state keys the groups of a cluster share (0: one per group); a checkpoint keeps its own")
    shuffle_partitions: int = Field(default=2, ge=1)
    state_store: Literal["hdfs", "rocksdb"] = Field(
        default=defaults.STATE_STORE,
        description="Spark's state store provider of a new checkpoint (an existing one keeps its own)")
    spark_master: str = "local[2]"
    # Spark settings for the session the monitor creates itself (not under spark-submit, which
    # takes --conf/--packages), e.g. spark.jars.packages for Spark's kafka connector.
    spark_conf: dict[str, str] = Field(default_factory=dict)
    driver_memory: str = Field(default=DEFAULT_DRIVER_MEMORY, pattern=r"^[1-9][0-9]*[kKmMgGtT]$",
                               description="heap of the Spark driver JVM in local mode, e.g. 2g")
    duration_buckets: tuple[float, ...] = DEFAULT_DURATION_BUCKETS
    group_histograms: list[str] = Field(
        default_factory=list, description="regexes of group ids that get their own duration histograms")
    diagnosis: DiagnosisConfig = Field(default_factory=DiagnosisConfig)

    @field_validator("spark_conf")
    @classmethod
    def _spark_keys(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [key for key in value if not key.startswith("spark.")]
        if bad:
            raise ValueError(f"not a Spark setting (they start with 'spark.'): {', '.join(bad)}")
        return value

    @field_validator("duration_buckets")
    @classmethod
    def _increasing(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or any(b <= a for a, b in itertools.pairwise(value)) or value[0] <= 0:
            raise ValueError("buckets must be positive and strictly increasing")
        return value

    @field_validator("group_histograms")
    @classmethod
    def _histogram_patterns(cls, value: list[str]) -> list[str]:
        return _check_regexes(value)


class ReplaySettings(QuerySettings):
    """`replay`: the query over files."""
    max_rows_per_batch: int = Field(default=REPLAY_MAX_ROWS_PER_BATCH, ge=1,
                                    description="event rows per micro-batch (time slices of the staged events)")
    # A replay's outputs are its final state: applying the still-held events to a copy of every
    # changed group's model (state/live_view.py) would only cost CPU. The demo, which serves /metrics
    # while it replays, turns it on.
    live_view: bool = Field(default=False, description="snapshots include the events still held")
    # A replay has no broker to sample end offsets from: a file of them gives it lag and
    # records_delayed (streaming/app/end_offsets_file.py).
    end_offsets: str | None = Field(default=None, min_length=1,
                                    description="file of the partitions' end offsets over time (JSON lines or a "
                                                "Prometheus query_range answer): lag and records_delayed")


class ServingSettings(_Settings):
    """Where /metrics is served (`demo`, `run`; streaming/app/serving.py starts the server)."""
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=9108, ge=0, le=65535)


class DemoSettings(ReplaySettings, ServingSettings):
    """`demo`: a replay of the bundled captures that serves /metrics."""
    # Small batches, so /metrics fills in while you watch.
    max_rows_per_batch: int = Field(default=300, ge=1,
                                    description="event rows per micro-batch (time slices of the staged events)")
    live_view: bool = Field(default=True, description="snapshots include the events still held")


RUN_LATENESS_SECONDS = 10.0
EVENTS_RETENTION_DAYS = 30.0
EVENTS_MAX_BYTES = 5 * 1024 ** 3
RUN_TRIGGER_INTERVAL_SECONDS = 0.5


class RunSettings(QuerySettings, ServingSettings):
    """`run`: the live service."""
    kafka: KafkaSettings
    checkpoint_location: str = Field(min_length=1, description="restarts resume from it")
    events_dir: str | None = Field(default=None, description="durable event sink (JSON lines per batch)")
    # Retention of the event sink (sinks/event_sink.py): its rolled files older than this, then the
    # oldest until it is within the size. The size's default is half the chart's 10 GiB volume,
    # which the checkpoint shares (helm/rebalance-monitor/values.yaml, persistence.size).
    events_retention_days: float = Field(default=EVENTS_RETENTION_DAYS, gt=0,
                                         description="event sink records kept this long (rolled files, by age)")
    events_max_bytes: int = Field(default=EVENTS_MAX_BYTES, gt=0,
                                  description="event sink size kept (the oldest rolled files go first)")
    # Live defaults (docs/configuration.md, "Live defaults"): the live view shows events in the
    # batch that reads them, so the trigger bounds /metrics latency; the lateness only delays
    # final records and must cover how far one broker's lines lag another's in the log topic.
    lateness_seconds: float = Field(default=RUN_LATENESS_SECONDS, ge=0, description="watermark delay per source")
    trigger_interval_seconds: float = Field(default=RUN_TRIGGER_INTERVAL_SECONDS, gt=0)
    group_allow: list[str] = Field(default_factory=list, description="regexes; empty = all groups")
    group_deny: list[str] = Field(default_factory=list, description="regexes")
    max_groups: int = Field(default=10_000, ge=1, description="cap on groups exported as series")
    dead_group_retention_seconds: float = Field(default=600.0, ge=0)
    log_silence_seconds: float = Field(default=1800.0, gt=0,
                                       description="a log source without coordinator lines this long is flagged")
    lag: LagSettings = Field(default_factory=LagSettings)

    @field_validator("group_allow", "group_deny")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        return _check_regexes(value)


COMMANDS: dict[type[_Settings], str] = {ParseLogsSettings: "parse-logs", ReplaySettings: "replay",
                                        DemoSettings: "demo", RunSettings: "run"}
