"""How a command's settings are loaded: CLI flags > environment > TOML file > defaults.

Environment variables use the prefix REBALANCE_MONITOR_ and `__` for nested tables; the TOML file
is a settings source of its own, so nested tables merge key by key across the three (pydantic-
settings). A REBALANCE_MONITOR_* variable no command reads is an error, and so is any invalid
value: ConfigError, one line per bad field (`origin: field: message`). The models themselves are
streaming/app/settings/schema.py.
"""
from __future__ import annotations

import difflib
import json
import os
import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, TypeVar, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource
from pydantic_settings.exceptions import SettingsError

from streaming.app.settings.schema import COMMANDS, ENV_PREFIX, _Settings


class ConfigError(Exception):
    """Raised with one line per bad field: `origin: field: message`."""


class StartupError(Exception):
    """A problem found at start that retrying cannot fix (Kafka refused the credentials or the
    certificate): one line that names it and the settings to check; the command exits 2."""


# ---------------------------------------------------------------------------- sources
# The values of the TOML file being loaded (`load` sets it for the one construction).
_FILE_VALUES: ContextVar[dict[str, Any] | None] = ContextVar("rebalance_monitor_file_values", default=None)


class _FileSource(PydanticBaseSettingsSource):
    """The TOML file as a settings source of its own, ranked below the environment."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False   # not used: __call__ returns the whole table

    def __call__(self) -> dict[str, Any]:
        return dict(_FILE_VALUES.get() or {})


# REBALANCE_MONITOR_* variables that are not settings: read by the scripts and the test bed
# (docs/configuration.md, "Environment"). Any other unknown one is an error.
OTHER_ENV_VARIABLES = {
    "REBALANCE_MONITOR_HELM": "the helm binary of the chart tests (scripts/test sets it)",
    "REBALANCE_MONITOR_CACHE": "cache root of the Kafka jars and bench/ab trees (~/.cache/rebalance-monitor)",
    "REBALANCE_MONITOR_SOURCES_CACHE": "cache of Kafka sources for scripts/extract-coordinator-templates",
    "REBALANCE_MONITOR_JVM_ARCHIVE_DUMP": "internal: where the JVM class archive's training run dumps it "
                                          "(streaming/app/class_archive.py)",
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


def sources(settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource
            ) -> tuple[PydanticBaseSettingsSource, ...]:
    """The sources of every command's settings, first wins (schema._Settings uses them).

    CLI flags (init kwargs) > environment > TOML file > defaults; pydantic-settings merges nested
    tables key by key, so a flag for one kafka.* key keeps the file's other keys."""
    return (init_settings, _EnvSource(settings_cls), _FileSource(settings_cls))


# ---------------------------------------------------------------------------- loading
S = TypeVar("S", bound=_Settings)


def _format(err: ValidationError, origin: str, command: str) -> str:
    lines = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(root)"
        message = f"required for `{command}`" if e["type"] == "missing" else e["msg"]
        lines.append(f"{origin}: {where}: {message}")
    return "\n".join(lines)


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
