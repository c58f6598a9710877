"""Typed settings per command (pydantic-settings): CLI flags > environment > TOML file > defaults.

Each command accepts only its own keys (docs/configuration.md): `parse-logs` how to read log lines,
`replay` also the query's, `demo` also the /metrics server's, `run` also Kafka, the checkpoint and
the live service's. Environment variables use the prefix REBALANCE_MONITOR_ and `__` for nested
tables; the TOML file is a settings source of its own, so nested tables merge key by key across
the three. Every value is validated at start; an error names the field.
"""
from __future__ import annotations

import difflib
import errno
import itertools
import json
import os
import re
import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal, TypeVar, get_origin

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from state.diagnosis.rules import DEFAULT_SETTINGS as DIAGNOSIS_DEFAULTS
from state.diagnosis.rules import DiagnosisSettings
from streaming.logs.broker_config import consumer_session_timeout_ms
from streaming.logs.envelope import ENVELOPE_AUTO, parse_field_path
from streaming.logs.step import LogSourceSpec
from streaming.logs.timeutil import zone
from streaming.spark.query import KafkaRead, LogFile, OffsetsFile, QueryOptions
from streaming.spark.session import DEFAULT_DRIVER_MEMORY

# Rebalance durations run from milliseconds (a 2-member sync) to the 300 s default
# max.poll.interval.ms and beyond (a stuck member holds the JOIN phase that long).
DEFAULT_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                            60.0, 120.0, 300.0, 600.0, 1800.0)
Envelope = Literal["auto", "plain", "json"]


class ConfigError(Exception):
    """Raised with one line per bad field: `origin: field: message`."""


class StartupError(Exception):
    """A problem found at start that retrying cannot fix (Kafka refused the credentials or the
    certificate): one line that names it and the settings to check; the command exits 2."""


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

    def file(self) -> LogFile:
        return LogFile(self.path, LogSourceSpec.of(self))


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

    def file(self) -> OffsetsFile:
        return OffsetsFile(self.path, self.cluster)


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

    def client_config(self) -> dict[str, Any]:
        config = dict(self.client)
        for key, path in self.client_secret_files.items():
            config[key] = Path(path).read_text().strip()
        return config

    @property
    def idle_markers(self) -> bool:
        """Does every live source add markers when quiet? Spark's connector gets its clock source
        only without a batch cap (streaming/spark/sources/clock.py)."""
        return self.idle_flush and not self.max_rows_per_batch

    def read(self) -> KafkaRead:
        return KafkaRead(self.bootstrap_servers, tuple(self.log_topics), self.offsets_topic or None,
                         self.starting_offsets, self.max_rows_per_batch, self.idle_flush, self.idle_tick_seconds,
                         idle_tick_max_seconds=self.idle_tick_max_seconds,
                         commit_hold_seconds=self.commit_hold_seconds,
                         client_config=self.client_config(),
                         spark_options=dict(self.spark_options))


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

    def to_settings(self) -> DiagnosisSettings:
        return DiagnosisSettings(
            pause_rejoin_window_ms=int(self.pause_rejoin_window_seconds * 1000),
            poll_rejoin_min_window_ms=int(self.poll_rejoin_min_window_seconds * 1000),
            host_wide_min_removals=self.host_wide_min_removals,
            host_wide_window_ms=int(self.host_wide_window_seconds * 1000),
            host_wide_together_ms=int(self.host_wide_together_seconds * 1000),
            coordinator_wide_min_groups=self.coordinator_wide_min_groups,
            coordinator_wide_window_ms=int(self.coordinator_wide_window_seconds * 1000),
            coordinator_wide_background_factor=self.coordinator_wide_background_factor,
            coordinator_wide_baseline_ms=int(self.coordinator_wide_baseline_seconds * 1000),
            storm_window_ms=int(self.storm_window_seconds * 1000),
            consumer_session_timeout_ms=(_D.consumer_session_timeout_ms if self.consumer_session_timeout_seconds is None
                                         else int(self.consumer_session_timeout_seconds * 1000)))


# ---------------------------------------------------------------------------- sources
# The values of the TOML file being loaded (`load` sets it for the one construction).
_FILE_VALUES: ContextVar[dict[str, Any] | None] = ContextVar("rebalance_monitor_file_values", default=None)


class _FileSource(PydanticBaseSettingsSource):
    """The TOML file as a settings source of its own, ranked below the environment."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False   # not used: __call__ returns the whole table

    def __call__(self) -> dict[str, Any]:
        return dict(_FILE_VALUES.get() or {})


Source = PydanticBaseSettingsSource
ENV_PREFIX = "REBALANCE_MONITOR_"
# REBALANCE_MONITOR_* variables that are not settings: read by the scripts and the test bed
# (docs/configuration.md, "Environment"). Any other unknown one is an error.
OTHER_ENV_VARIABLES = {
    "REBALANCE_MONITOR_HELM": "the helm binary of the chart tests (scripts/test sets it)",
    "REBALANCE_MONITOR_CACHE": "cache root of the Kafka jars and bench/ab trees (~/.cache/rebalance-monitor)",
    "REBALANCE_MONITOR_SOURCES_CACHE": "cache of Kafka sources for scripts/extract-coordinator-templates",
}


class _EnvSource(EnvSettingsSource):
    """The environment, with lists also as comma-separated values: `REBALANCE_MONITOR_GROUP_DENY=^_confluent`,
    `..._DURATION_BUCKETS=1,2,3` (JSON arrays work as before, for values holding a comma)."""

    def decode_complex_value(self, field_name: str, field: FieldInfo | None, value: Any) -> Any:
        is_list = field is not None and get_origin(field.annotation) in (list, tuple)
        try:
            decoded = json.loads(value)
        except ValueError:
            if is_list:
                return [item.strip() for item in str(value).split(",") if item.strip()]
            var = next((k.upper() for k, v in self.env_vars.items()
                        if v == value and k.upper().endswith(field_name.upper())), field_name)
            raise ConfigError(f"environment: {var}: expected a JSON object such as '{{\"key\": \"value\"}}', "
                              f"got {value!r}; or set one key per variable: {var}__<KEY>=value") from None
        if is_list and not isinstance(decoded, list):
            return [item.strip() for item in str(value).split(",") if item.strip()]   # one value: `5`
        return decoded


class _Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__",
                                      extra="forbid")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: Source,
                                   env_settings: Source, dotenv_settings: Source, file_secret_settings: Source
                                   ) -> tuple[Source, ...]:
        # CLI flags (init kwargs) > environment > TOML file > defaults; pydantic-settings merges
        # nested tables key by key, so a flag for one kafka.* key keeps the file's other keys.
        return (init_settings, _EnvSource(settings_cls), _FileSource(settings_cls))


def _check_regexes(value: list[str]) -> list[str]:
    for pattern in value:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression {pattern!r}: {exc}") from None
    return value


# ---------------------------------------------------------------------------- per command
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
    lateness_seconds: float = Field(default=QueryOptions.lateness_seconds, ge=0,
                                    description="watermark delay per source")
    unknown_lines_sample_per_logger: int = Field(
        default=QueryOptions.unknown_lines_sample_per_logger, ge=0,
        description="unknown coordinator lines kept in quarantine per logger and parse task")
    state_buckets: int = Field(
        default=QueryOptions.state_buckets, ge=0, le=1_000_000,
        description="state keys the groups of a cluster share (0: one per group); a checkpoint keeps its own")
    shuffle_partitions: int = Field(default=2, ge=1)
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

    def metrics_sink_options(self) -> dict[str, Any]:
        """The MetricsSink arguments these settings determine."""
        return {"group_histograms": tuple(self.group_histograms)}

    def query_options(self, **extra: Any) -> QueryOptions:
        return QueryOptions(lateness_seconds=self.lateness_seconds,
                            unknown_lines_sample_per_logger=self.unknown_lines_sample_per_logger,
                            diagnosis=self.diagnosis.to_settings(), state_buckets=self.state_buckets, **extra)

    def log_spec(self) -> LogSourceSpec:
        """How to read the lines of a log source that has no per-file settings (a live topic)."""
        return LogSourceSpec(self.cluster, self.broker_timezone, None, self.log_envelope, self.broker_id_field)


class ReplaySettings(QuerySettings):
    """`replay`: the query over files."""
    max_rows_per_batch: int = Field(default=QueryOptions.max_rows_per_batch, ge=1,
                                    description="event rows per micro-batch (time slices of the staged events)")
    # A replay's outputs are its final state: applying the still-held events to a copy of every
    # changed group's model (state/live.py) would only cost CPU. The demo, which serves /metrics
    # while it replays, turns it on.
    live_view: bool = Field(default=False, description="snapshots include the events still held")

    def query_options(self, **extra: Any) -> QueryOptions:
        return super().query_options(max_rows_per_batch=self.max_rows_per_batch, live_view=self.live_view, **extra)


class _Serving(_Settings):
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=9108, ge=0, le=65535)

    def serve_metrics(self, registry: Any) -> Any:
        """Start /metrics (sinks/exposition.py); a port in use or an address that cannot be
        bound is a ConfigError naming the setting and its flag. Returns the HTTP server."""
        from sinks.exposition import serve
        try:
            server, _ = serve(registry, self.metrics_host, self.metrics_port)
        except OSError as exc:
            where = f"{self.metrics_host}:{self.metrics_port}"
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"metrics_port: port {self.metrics_port} is already in use on {self.metrics_host} "
                                  f"(another monitor or demo?); choose another with --port N (0 picks a free one), "
                                  f"metrics_port in the file or {ENV_PREFIX}METRICS_PORT") from None
            if exc.errno == errno.EACCES:
                raise ConfigError(f"metrics_port: port {self.metrics_port} needs privileges this process does not "
                                  f"have; use a port above 1023 (--port N)") from None
            raise ConfigError(f"metrics_host: cannot serve /metrics on {where}: {exc.strerror or exc}; "
                              f"choose another address with --host ADDR (metrics_host)") from None
        return server


class DemoSettings(ReplaySettings, _Serving):
    """`demo`: a replay of the bundled captures that serves /metrics."""
    # Small batches, so /metrics fills in while you watch.
    max_rows_per_batch: int = Field(default=300, ge=1,
                                    description="event rows per micro-batch (time slices of the staged events)")
    live_view: bool = Field(default=True, description="snapshots include the events still held")


RUN_LATENESS_SECONDS = 10.0
RUN_TRIGGER_INTERVAL_SECONDS = 0.5


class RunSettings(QuerySettings, _Serving):
    """`run`: the live service."""
    kafka: KafkaSettings
    checkpoint_location: str = Field(min_length=1, description="restarts resume from it")
    events_dir: str | None = Field(default=None, description="durable event sink (JSON lines per batch)")
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

    @field_validator("group_allow", "group_deny")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        return _check_regexes(value)

    def metrics_sink_options(self) -> dict[str, Any]:
        return {**super().metrics_sink_options(), "max_groups": self.max_groups,
                "dead_group_retention_seconds": self.dead_group_retention_seconds}

    def query_options(self, **extra: Any) -> QueryOptions:
        return super().query_options(group_allow=tuple(self.group_allow), group_deny=tuple(self.group_deny), **extra)


# ---------------------------------------------------------------------------- loading
S = TypeVar("S", bound=_Settings)


def _format(err: ValidationError, origin: str, command: str) -> str:
    lines = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(root)"
        message = f"required for `{command}`" if e["type"] == "missing" else e["msg"]
        lines.append(f"{origin}: {where}: {message}")
    return "\n".join(lines)


COMMANDS: dict[type[_Settings], str] = {ParseLogsSettings: "parse-logs", ReplaySettings: "replay",
                                        DemoSettings: "demo", RunSettings: "run"}


def _collect_env_names(env_name: str, annotation: Any, names: set[str], open_prefixes: list[str]) -> None:
    names.add(env_name)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for sub, field in annotation.model_fields.items():
            _collect_env_names(f"{env_name}__{sub.upper()}", field.annotation, names, open_prefixes)
    elif get_origin(annotation) is dict:      # kafka.client etc.: any key
        open_prefixes.append(f"{env_name}__")


def env_names() -> tuple[set[str], tuple[str, ...]]:
    """Every REBALANCE_MONITOR_* variable some command reads, and the prefixes of free-form
    tables (`REBALANCE_MONITOR_KAFKA__CLIENT__<any key>`)."""
    names: set[str] = set()
    open_prefixes: list[str] = []
    for settings_cls in COMMANDS:
        for name, field in settings_cls.model_fields.items():
            _collect_env_names(ENV_PREFIX + name.upper(), field.annotation, names, open_prefixes)
    return names, tuple(open_prefixes)


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """A REBALANCE_MONITOR_* variable that no command reads is a typo: an error naming it and
    the closest valid name (a setting of another command is fine: one environment may serve all)."""
    environ = os.environ if environ is None else environ
    names, open_prefixes = env_names()
    known = names | set(OTHER_ENV_VARIABLES)
    bad = []
    for var in sorted(environ):
        upper = var.upper()   # pydantic-settings reads the environment case-insensitively
        if not upper.startswith(ENV_PREFIX) or upper in known or upper.startswith(open_prefixes):
            continue
        close = difflib.get_close_matches(upper, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        bad.append(f"environment: {var} is not a setting{hint} (docs/configuration.md lists them)")
    if bad:
        raise ConfigError("\n".join(bad))


def load(settings_cls: type[S], config_file: str | None = None, **flags: Any) -> S:
    """Settings of one command from the TOML file (optional), the environment and the flags
    given (None values are not given)."""
    check_environment()
    file_values: dict[str, Any] = {}
    origin = "configuration"
    if config_file:
        origin = config_file
        try:
            with open(config_file, "rb") as handle:
                file_values = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigError(f"{config_file}: no such file") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{config_file}: not valid TOML: {exc}") from None
    token = _FILE_VALUES.set(file_values)
    try:
        return settings_cls(**{k: v for k, v in flags.items() if v is not None})
    except ValidationError as exc:
        raise ConfigError(_format(exc, origin, COMMANDS.get(settings_cls, "rebalance-monitor"))) from None
    except SettingsError as exc:   # a value the environment source could not read
        cause = exc.__cause__
        raise ConfigError(f"environment: {exc}" + (f": {cause}" if cause else "")) from None
    finally:
        _FILE_VALUES.reset(token)


def make_inputs(model: type[BaseModel], items: list[dict[str, Any]], flag: str) -> list[Any]:
    out = []
    for i, item in enumerate(items):
        try:
            out.append(model(**item))
        except ValidationError as exc:
            raise ConfigError(_format(exc, f"{flag}[{i}]", "replay")) from None
    return out
