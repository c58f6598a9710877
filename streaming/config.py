"""Typed configuration (pydantic-settings): defaults < TOML file < environment < CLI flags.

Environment variables use the prefix REBALANCE_MONITOR_ (e.g. REBALANCE_MONITOR_BROKER_TIMEZONE).
Every value is validated at start; an error names the field that is wrong.
"""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from streaming.timeutil import zone

# Rebalance durations run from milliseconds (a 2-member sync) to the 300 s default
# max.poll.interval.ms and beyond (a stuck member holds the JOIN phase that long).
DEFAULT_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                            60.0, 120.0, 300.0, 600.0, 1800.0)


def _check_zone(value: str) -> str:
    zone(value)   # raises ValueError("unknown time zone ...")
    return value


class LogInput(BaseModel):
    """One broker log file (replay)."""
    path: str
    cluster: str = "default"
    broker_timezone: str = "UTC"
    broker_id: Optional[int] = Field(default=None, ge=0)

    _zone = field_validator("broker_timezone")(_check_zone)

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
            from streaming.segments import find_partition_dirs
            if not find_partition_dirs(value):
                raise ValueError(f"no __consumer_offsets-N directory in {value}")
        return value


class MonitorSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="REBALANCE_MONITOR_", extra="forbid")

    cluster: str = Field(default="default", min_length=1)
    broker_timezone: str = "UTC"
    lateness_seconds: float = Field(default=30.0, ge=0, description="watermark delay per source")
    max_rows_per_batch: int = Field(default=200_000, ge=1)
    shuffle_partitions: int = Field(default=2, ge=1)
    spark_master: str = "local[2]"
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=9108, ge=0, le=65535)
    duration_buckets: tuple[float, ...] = DEFAULT_DURATION_BUCKETS

    _zone = field_validator("broker_timezone")(_check_zone)

    @field_validator("duration_buckets")
    @classmethod
    def _increasing(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or any(b <= a for a, b in zip(value, value[1:])) or value[0] <= 0:
            raise ValueError("buckets must be positive and strictly increasing")
        return value


class ConfigError(Exception):
    """Raised with one line per bad field: `field: message`."""


def _format(err: ValidationError, origin: str) -> str:
    lines = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(root)"
        lines.append(f"{origin}: {where}: {e['msg']}")
    return "\n".join(lines)


def load_settings(config_file: Optional[str] = None, **overrides: Any) -> MonitorSettings:
    """Build settings from an optional TOML file, the environment and explicit overrides."""
    values: dict[str, Any] = {}
    origin = "configuration"
    if config_file:
        origin = config_file
        try:
            with open(config_file, "rb") as handle:
                values.update(tomllib.load(handle))
        except FileNotFoundError:
            raise ConfigError(f"{config_file}: no such file") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{config_file}: not valid TOML: {exc}") from None
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        # Explicit values win over the environment (pydantic-settings: init kwargs first).
        return MonitorSettings(**values)
    except ValidationError as exc:
        raise ConfigError(_format(exc, origin)) from None


def make_inputs(model: type[BaseModel], items: list[dict[str, Any]], flag: str) -> list:
    out = []
    for i, item in enumerate(items):
        try:
            out.append(model(**item))
        except ValidationError as exc:
            raise ConfigError(_format(exc, f"{flag}[{i}]")) from None
    return out
