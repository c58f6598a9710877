"""Log envelopes: a raw input row -> (log4j line, broker hint, host hint).

Broker logs arrive either as plain log4j/log4j2 lines (`server.log`, or a log topic fed by a
plain forwarder) or wrapped in the JSON documents log shippers write:

| shipper    | log line in          | host / pod metadata                                        |
|------------|----------------------|------------------------------------------------------------|
| Filebeat   | `message`            | `host.name`, `agent.*`, `log.file.path`, `fields.*`        |
| Fluent Bit | `log`                | `kubernetes.pod_name`, `kubernetes.host`, `kubernetes.labels` |
| Vector     | `message`            | `host` (a string), `source_type`, `file`, `kubernetes.*`   |

Envelope modes (`LogInput.envelope`, `--log-envelope`):

- `plain`: the row is the log line.
- `json`: the row is one JSON document; the log line is its `message`, `log` or `msg` field.
- `auto` (default): a row whose first non-blank character is `{` is read as JSON, any other row
  as plain.

A shipper that joins multi-line entries (stack traces, config dumps) into one document puts
them in one multi-line `message`; only its first line is the log4j line, the rest belongs to it.

Broker id: taken from the coordinator prefix of the line when it has one (streaming/logs/layout.py);
otherwise from the envelope field named by `broker_id_field` (a dotted path; a key that itself
contains dots goes in brackets: `kubernetes.labels['statefulset.kubernetes.io/pod-name']`);
otherwise from the source's `broker_id`. A number is used as is; a string uses its trailing
digits, so a StatefulSet pod name `kafka-2` gives broker 2.

JSON layouts: log4j2 can write each entry as one JSON document with the message alone in
`message` and the time, level and logger in fields of their own (`JSON_LAYOUTS`): JsonTemplateLayout
with its ECS template (`@timestamp`, `log.level`, `log.logger`; flat dotted keys, or nested as ECS
shippers write them), JsonLayout and JsonTemplateLayout's JsonLayout.json (`instant` {epochSecond,
nanoOfSecond} or `timeMillis`, `level`, `loggerName`), and the Logstash layout (`@timestamp`,
`level`, `logger_name`). Such a document gives `Unwrapped.fields` (a header.Header: time text,
level, logger, layout name) next to the message; the parser reads the message with them (unless the
message is itself a whole log4j line, which a shipper that adds fields may keep).

Generic JSON (`GENERIC_JSON`, layout `generic-json`): any other document with a message (the same
`message`/`log`/`msg` as above) and a time in `instant` (JsonLayout's {epochSecond, nanoOfSecond},
or a text), `timeMillis`, `@timestamp`, `timestamp` or `time` (the first one present that reads:
ISO-8601 text as written, or a number or a text of one, epoch seconds or epoch milliseconds told
apart by magnitude, `EPOCH_SECONDS_RANGE`, `EPOCH_MILLIS_RANGE`), with a level (`level`,
`log.level`, `severity`: TRACE ... FATAL, WARNING) and a logger (`loggerName`, `logger`,
`log.logger`, `logger_name`) when it has them. That is a log4j2 JsonTemplateLayout with a template
of its own, such as Strimzi's test template (`{"instant": "2026-...Z", "someConstant": 1,
"message": ...}`: time and message only), but also every shipper's document (Filebeat's
`@timestamp`, Vector's `timestamp`, docker json-file's `time`), whose time is when the shipper read
the line. So these fields are weaker than a JSON layout's: the parser reads the message by its own
layout first (a whole log4j line in `message` keeps its own time, level and logger) and takes the
document's fields only for a message that has none and is no continuation (a `%m` line, as a
time-less line behind a CRI prefix takes the prefix's time). Without a logger field, a message is a
coordinator message only by its prefix (`[GroupCoordinator id=1 ...] `, layout.py), as in any
layout without a logger; without a level field it is taken as INFO. A document with a message but
no time field that reads is not generic JSON: its message is read as a line, as before.

Host hint: the first string among `host.name`, `kubernetes.pod_name`, `host`, `hostname`,
`kubernetes.host`. It is kept with quarantine records and, as `data.log_host`, with the events
of that line (the clock-skew metric names it as the source).

The Spark query does the same in the JVM (streaming/spark/steps.py `unwrap_frame`); both
implementations are tested against each other.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Final

from streaming.logs.header import PREFIXED_JSON_RE, Header

ENVELOPE_AUTO: Final = "auto"
ENVELOPE_PLAIN: Final = "plain"
ENVELOPE_JSON: Final = "json"
ENVELOPES = (ENVELOPE_AUTO, ENVELOPE_PLAIN, ENVELOPE_JSON)

MESSAGE_FIELDS = ("message", "log", "msg")
HOST_FIELDS = ("host.name", "kubernetes.pod_name", "host", "hostname", "kubernetes.host")

_PATH_PART = re.compile(r"\[\s*'([^']*)'\s*\]|\[\s*\"([^\"]*)\"\s*\]|([^.\[\]]+)")
_PATH_RE = re.compile(r"(?:[^.\[\]'\"]+|\['[^']*'\]|\[\"[^\"]*\"\])(?:\.[^.\[\]'\"]+|\['[^']*'\]|\[\"[^\"]*\"\])*")
_TRAILING_DIGITS = re.compile(r"(\d+)\s*$")
# The log4j header inside a JSON string: `"[2026-11-21 19:21:58,686] INFO ` (used for ordering).
EMBEDDED_HEADER_RE = re.compile(
    r'"\s*\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (?:TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ')


# (layout name, level fields, logger fields, time fields): the first layout whose level and logger
# are both strings wins. A field name is looked up as a flat key first, then as a dotted path.
JSON_LAYOUTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = (
    ("ecs-json", ("log.level",), ("log.logger",), ("@timestamp",)),
    ("log4j2-json", ("level",), ("loggerName",), ("instant", "timeMillis")),
    ("logstash-json", ("level",), ("logger_name",), ("@timestamp",)),
)
# Generic JSON (module docstring): the fields looked for, in order.
GENERIC_JSON = "generic-json"
GENERIC_LEVELS = ("level", "log.level", "severity")
GENERIC_LOGGERS = ("loggerName", "logger", "log.logger", "logger_name")
GENERIC_TIMES = ("instant", "timeMillis", "@timestamp", "timestamp", "time")
LEVEL_WORDS = {"TRACE": "TRACE", "DEBUG": "DEBUG", "INFO": "INFO", "WARN": "WARN", "WARNING": "WARN",
               "ERROR": "ERROR", "FATAL": "FATAL"}
# An epoch time in a generic JSON document: a number as JSON writes it (and as Spark's get_json_object
# gives a number back: `1.795288886163E9`), unsigned, of epoch seconds or epoch milliseconds, told
# apart by magnitude: both ranges are 2001-09-09 to 2286-11-20, 10 digits of seconds and 13 of
# milliseconds. Anything else (a duration in `time`, microseconds, nanoseconds) is not a time.
EPOCH_NUMBER = r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_EPOCH_NUMBER_RE = re.compile(EPOCH_NUMBER)
EPOCH_SECONDS_RANGE = (1e9, 1e10)
EPOCH_MILLIS_RANGE = (1e12, 1e13)
INSTANT_PART_LIMIT = 10**15
_NAME_START = re.compile(r"[A-Za-z_$]")
_DATE_START = re.compile(r"\d{4}-")
_ISO_START = re.compile(r"[0-9]{4}-")     # ASCII digits only, as the JVM's `[0-9]`


def parse_field_path(path: str) -> list[str]:
    """`a.b['c.d']` -> ['a', 'b', 'c.d']; raises ValueError for an empty or malformed path."""
    if not path or not _PATH_RE.fullmatch(path):
        raise ValueError(f"not a field path: {path!r} (use a.b.c, with ['key.with.dots'] for such keys)")
    return [m.group(1) if m.group(1) is not None else m.group(2) if m.group(2) is not None else m.group(3)
            for m in _PATH_PART.finditer(path)]


def spark_json_path(path: str) -> str:
    """The same path for Spark's get_json_object: `$['a']['b']['c.d']`."""
    return "$" + "".join("['" + part.replace("'", "\\'") + "']" for part in parse_field_path(path))


def lookup(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def broker_from_value(value: Any) -> int | None:
    """A broker id from an envelope value: an int, or the trailing digits of a string."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str):
        m = _TRAILING_DIGITS.search(value)
        return int(m.group(1)) if m and not value.startswith("-") else None
    return None


def first_line(message: str) -> str:
    end = message.find("\n")
    line = message if end < 0 else message[:end]
    return line[:-1] if line.endswith("\r") else line


@dataclass(frozen=True)
class Unwrapped:
    line: str | None              # the log4j line (a JSON layout's message); None when unreadable
    broker: int | None = None     # broker id from envelope metadata
    host: str | None = None       # host / pod name from envelope metadata
    error: str | None = None      # why `line` is None
    fields: Header | None = None  # a JSON layout's time, level and logger (module docstring)


def _field(doc: dict, name: str) -> Any:
    """A flat key (`"log.level": ...`) or the dotted path (`"log": {"level": ...}`)."""
    if doc.get(name) is not None:
        return doc[name]
    return lookup(doc, name.split(".")) if "." in name else None


def _name_field(doc: dict, names: tuple[str, ...]) -> str | None:
    for name in names:
        value = _field(doc, name)
        if isinstance(value, str) and _NAME_START.match(value):
            return value
    return None


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.isdigit() and value.isascii():
        return int(value)
    return None


def _instant_part(value: Any) -> int | None:
    """epochSecond or nanoOfSecond of an `instant`: up to 15 digits (the JVM computes the time in a
    long, which more would overflow)."""
    if isinstance(value, str) and len(value) > 15:
        return None
    number = _integer(value)
    return number if number is not None and number < INSTANT_PART_LIMIT else None


def _time_field(doc: dict, names: tuple[str, ...]) -> str | None:
    """The time text of a JSON layout: ISO text as written, or epoch milliseconds as digits."""
    for name in names:
        value = _field(doc, name)
        if name == "instant":
            if isinstance(value, dict):
                seconds = _instant_part(value.get("epochSecond"))
                nanos = 0 if value.get("nanoOfSecond") is None else _instant_part(value["nanoOfSecond"])
                if seconds is not None and nanos is not None:
                    return str(seconds * 1000 + nanos // 1_000_000)
            continue
        if name == "timeMillis":
            millis = _integer(value)
            if millis is not None:
                return str(millis)
            continue
        if isinstance(value, str) and _DATE_START.match(value):
            return value
    return None


def json_layout_fields(doc: dict) -> Header | None:
    """The time, level and logger of a log4j2 JSON layout document (its message is the line)."""
    for name, levels, loggers, times in JSON_LAYOUTS:
        level = _name_field(doc, levels)
        logger = _name_field(doc, loggers) if level is not None else None
        if level is not None and logger is not None:
            return Header(name, _time_field(doc, times), level.upper(), logger, "")
    return None


def epoch_millis(value: Any) -> str | None:
    """Epoch seconds or milliseconds (a JSON number, or a text of one) -> epoch milliseconds as
    digits; None for anything else (out of both ranges, negative, not a number)."""
    number: int | float
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if not _EPOCH_NUMBER_RE.fullmatch(value):
            return None
        number = float(value)         # (inf past the doubles: out of range)
    elif isinstance(value, (int, float)):
        number = value                # (an int as it is: float() of a huge one raises)
    else:
        return None
    if EPOCH_SECONDS_RANGE[0] <= number < EPOCH_SECONDS_RANGE[1]:
        millis = number * 1000
    elif EPOCH_MILLIS_RANGE[0] <= number < EPOCH_MILLIS_RANGE[1]:
        millis = number
    else:
        return None
    # + 0.001: a fraction of a second that a double cannot hold exactly (.163 as .16299999) is not
    # cut to the millisecond below. The JVM does the same arithmetic (streaming/spark/steps.py).
    return str(math.floor(millis + 0.001))


def _generic_time(doc: dict) -> str | None:
    for name in GENERIC_TIMES:          # top-level keys: `doc.get`, not `_field` (a shipper's rows pass here)
        value = doc.get(name)
        if value is None:
            continue
        if isinstance(value, str) and _ISO_START.match(value):
            return value
        if isinstance(value, dict):       # JsonLayout's {epochSecond, nanoOfSecond}
            if name != "instant":
                continue
            ts = _time_field(doc, ("instant",))
        else:
            ts = epoch_millis(value)
        if ts is not None:
            return ts
    return None


_LEVEL_PATHS = tuple((name, name.split(".") if "." in name else None) for name in GENERIC_LEVELS)
_LOGGER_PATHS = tuple((name, name.split(".") if "." in name else None) for name in GENERIC_LOGGERS)


def generic_json_fields(doc: dict) -> Header | None:
    """The time, and the level and logger when present, of a generic JSON document (module
    docstring); None without a time that reads. The caller checks the message. (`_field` written
    out with the paths split once: every shipper's document passes here.)"""
    ts = _generic_time(doc)
    if ts is None:
        return None
    level = logger = None
    for name, path in _LEVEL_PATHS:
        value = doc.get(name)
        if value is None and path is not None:
            value = lookup(doc, path)
        if isinstance(value, str):
            level = LEVEL_WORDS.get(value.upper())
            if level is not None:
                break
    for name, path in _LOGGER_PATHS:
        value = doc.get(name)
        if value is None and path is not None:
            value = lookup(doc, path)
        if isinstance(value, str) and _NAME_START.match(value):
            logger = value
            break
    return Header(GENERIC_JSON, ts, level, logger, "")


def is_json_row(raw: str, mode: str) -> bool:
    if mode == ENVELOPE_JSON:
        return True
    if mode == ENVELOPE_AUTO:
        return raw.lstrip()[:1] == "{"
    return False


def _json_layout_in_message(line: str) -> tuple[str, Header] | None:
    """A JSON layout document inside a shipper's message (Fluent Bit `log`, Filebeat `message` of a
    container whose broker logs JSON): its message's first line and its fields."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    message = next((doc[f] for f in MESSAGE_FIELDS if isinstance(doc.get(f), str)), None)
    if message is None:
        return None
    fields = json_layout_fields(doc) or generic_json_fields(doc)
    if fields is None:
        return None
    return first_line(message), Header("envelope+" + fields.layout, fields.ts, fields.level, fields.logger, "")


def unwrap(raw: str, mode: str = ENVELOPE_AUTO, broker_id_field: str | None = None) -> Unwrapped:
    """One raw row -> Unwrapped. Never raises on bad input."""
    text = raw
    if not is_json_row(raw, mode):
        prefixed = PREFIXED_JSON_RE.match(raw) if mode == ENVELOPE_AUTO else None
        if prefixed is None:
            return Unwrapped(raw)
        text = prefixed.group(1)      # a JSON document behind container/transport prefixes
    try:
        doc = json.loads(text)
    except ValueError as exc:
        if text is not raw:
            return Unwrapped(raw)
        return Unwrapped(None, error=f"envelope is not a JSON document: {exc}")
    if not isinstance(doc, dict):
        if text is not raw:
            return Unwrapped(raw)
        return Unwrapped(None, error="envelope is not a JSON object")
    message = next((doc[f] for f in MESSAGE_FIELDS if isinstance(doc.get(f), str)), None)
    if message is None:
        if text is not raw:
            return Unwrapped(raw)
        return Unwrapped(None, error="envelope has no string field " + "/".join(MESSAGE_FIELDS))
    host = None
    for field_name in HOST_FIELDS:
        value = lookup(doc, field_name.split("."))
        if isinstance(value, str) and value:
            host = value
            break
    broker = broker_from_value(lookup(doc, parse_field_path(broker_id_field))) if broker_id_field else None
    line, fields = first_line(message), json_layout_fields(doc)
    if fields is None and line[:1] == "{":
        nested = _json_layout_in_message(line)
        if nested is not None:
            line, fields = nested
    if fields is None:
        fields = generic_json_fields(doc)
    return Unwrapped(line, broker, host, fields=fields)
