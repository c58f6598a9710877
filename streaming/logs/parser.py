"""Kafka broker `server.log` lines -> group-coordinator `Event`s.

Pure Python (no Spark, no pandas). One call of `parse_line` looks at one physical line and returns
  * `None`        - not a group-coordinator line, a stack-trace continuation, or a coordinator line
                    that is recognised but carries no group-level fact we use;
  * `[Event, ...]` - usually one event; several when one line names several groups;
  * `Quarantined` - a coordinator line at INFO or above we cannot read (garbled header, or a
                    message no catalog entry knows).
DEBUG/TRACE coordinator lines are parsed only by entries flagged `parse_at_debug` (facts Kafka logs
at DEBUG alone); the rest return None with outcome "debug" from `parse_line_detailed`, because
brokers repeat several INFO facts at DEBUG and a DEBUG-enabled broker must not double them.
`parse_line_detailed` returns the same result plus the outcome and the catalog entry, so the caller
can count "recognised but ignored" apart from "unknown". The messages: catalog.py.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any

from state.events import SOURCE_LOG, Event
from streaming.logs.catalog import CatalogEntry, candidate_entries
from streaming.logs.files import iter_log_file
from streaming.logs.layout import (
    COORDINATOR_LOGGER_MARKERS, HEADER_RE, JAVA_LOGGER_PREFIXES, NON_GROUP_RUNTIME_PREFIXES, SCALA_LOGGER_PREFIX,
    is_continuation, split_coordinator_prefix
)
from streaming.logs.timeutil import log4j_to_epoch_ms
from streaming.logs.values import EVENT_ATTRIBUTES, FIELD_CONVERTERS, PRESENCE_FLAGS
from streaming.quarantine import RAW_LIMIT, Quarantined

OUTCOME_EVENTS = "events"                # result is a non-empty list of Events
OUTCOME_IGNORED = "ignored"              # recognised coordinator line without a fact we use
OUTCOME_DEBUG = "debug"                  # coordinator DEBUG/TRACE line not parsed (see parse_at_debug)
OUTCOME_NOT_COORDINATOR = "not_coordinator"
OUTCOME_CONTINUATION = "continuation"    # belongs to the previous entry (stack trace, ...)
OUTCOME_UNKNOWN = "unknown"              # Quarantined(reason="unknown_coordinator_line")
OUTCOME_UNPARSEABLE = "unparseable"      # Quarantined(reason="unparseable_line")
OUTCOMES = (OUTCOME_EVENTS, OUTCOME_IGNORED, OUTCOME_DEBUG, OUTCOME_NOT_COORDINATOR,
            OUTCOME_CONTINUATION, OUTCOME_UNKNOWN, OUTCOME_UNPARSEABLE)

ParseResult = list[Event] | Quarantined | None


@dataclass(frozen=True)
class LineParse:
    outcome: str                         # one of OUTCOMES
    result: ParseResult                  # what parse_line returns
    entry: CatalogEntry | None = None  # the matching catalog entry, if any


_NOT_COORDINATOR = LineParse(OUTCOME_NOT_COORDINATOR, None)
_CONTINUATION = LineParse(OUTCOME_CONTINUATION, None)
_DEBUG = LineParse(OUTCOME_DEBUG, None)


def _logger_family(logger: str) -> str | None:
    if logger.startswith(SCALA_LOGGER_PREFIX):
        return "scala"
    if logger.startswith(JAVA_LOGGER_PREFIXES):
        return "java"
    return None


def _quarantine(reason: str, detail: str, line: str, source_id: str, seq: int,
                ts_ms: int | None = None) -> Quarantined:
    return Quarantined(source=SOURCE_LOG, source_id=source_id, seq=seq, reason=reason, detail=detail,
                       raw=line[:RAW_LIMIT], ts_ms=ts_ms)


def parse_line_detailed(line: str, *, source_id: str, seq: int, tz: tzinfo,
                        default_broker: int | None = None) -> LineParse:
    """Like parse_line, plus the outcome class and the catalog entry (for the caller's counters)."""
    line = line.rstrip("\r\n")
    header = HEADER_RE.match(line)
    if header is None:
        if is_continuation(line):
            return _CONTINUATION
        if any(marker in line for marker in COORDINATOR_LOGGER_MARKERS):
            return LineParse(OUTCOME_UNPARSEABLE, _quarantine(
                "unparseable_line", "line names a group-coordinator logger but has no log4j header "
                "'[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message (logger)'", line, source_id, seq))
        return _NOT_COORDINATOR

    ts_text, level, message, logger = header.groups()
    family = _logger_family(logger)
    if family is None or message.startswith(NON_GROUP_RUNTIME_PREFIXES):
        return _NOT_COORDINATOR

    broker, offsets_partition, body = split_coordinator_prefix(message)
    debug = level == "DEBUG" or level == "TRACE"
    match = None
    for entry in candidate_entries(family, body, debug=debug):
        if entry.anchor in body and (entry.levels is None or level in entry.levels):
            match = entry.pattern.fullmatch(body)
            if match is not None:
                break

    if match is None:
        if debug:
            return _DEBUG
        try:
            ts_ms: int | None = log4j_to_epoch_ms(ts_text, tz)
        except ValueError:
            ts_ms = None
        return LineParse(OUTCOME_UNKNOWN, _quarantine(
            "unknown_coordinator_line", f"no catalog entry matches this {level} message of {logger}",
            line, source_id, seq, ts_ms))
    kind = entry.kind
    if kind is None:
        return LineParse(OUTCOME_IGNORED, None, entry)

    try:
        ts_ms = log4j_to_epoch_ms(ts_text, tz)
    except ValueError as exc:
        return LineParse(OUTCOME_UNPARSEABLE, _quarantine(
            "unparseable_line", f"bad timestamp {ts_text!r}: {exc}", line, source_id, seq), entry)

    events = _build_events(entry, kind, match, ts_ms, broker if broker is not None else default_broker,
                           offsets_partition, source_id, seq)
    if not events:  # e.g. "The following groups were deleted: ." names no group
        return LineParse(OUTCOME_IGNORED, None, entry)
    return LineParse(OUTCOME_EVENTS, events, entry)


def _build_events(entry: CatalogEntry, kind: str, match: re.Match, ts_ms: int, broker: int | None,
                  offsets_partition: int | None, source_id: str, seq: int) -> list[Event]:
    data: dict[str, Any] = dict(entry.data)
    if offsets_partition is not None:
        data["offsets_partition"] = offsets_partition
    attributes: dict[str, Any] = {"generation": None, "member_id": None, "reason": None}
    groups: list[str] = []
    for name, value in match.groupdict().items():
        if name in PRESENCE_FLAGS:
            data[name] = value is not None
            continue
        if value is None:
            continue
        if name == "group":
            groups = [value]
            continue
        if name == "groups":
            groups = [g for g in (part.strip() for part in value.split(", ")) if g]
            continue
        converter = FIELD_CONVERTERS.get(name)
        if converter is not None:
            value = converter(value)
        if name in EVENT_ATTRIBUTES:
            attributes[name] = value
        else:
            data[name] = value
    if entry.derive is not None:
        entry.derive(data, attributes)
    return [Event(group=group, ts_ms=ts_ms, source=SOURCE_LOG, source_id=source_id, seq=seq,
                  kind=kind, broker=broker, generation=attributes["generation"],
                  member_id=attributes["member_id"], reason=attributes["reason"],
                  data=dict(data) if i else data)
            for i, group in enumerate(groups)]


def parse_line(line: str, *, source_id: str, seq: int, tz: tzinfo,
               default_broker: int | None = None) -> ParseResult:
    """One server.log line -> list of Events, Quarantined, or None (see module docstring)."""
    return parse_line_detailed(line, source_id=source_id, seq=seq, tz=tz,
                               default_broker=default_broker).result


def parse_log_file(path: str, *, tz: tzinfo, default_broker: int | None = None,
                   source_id: str | None = None) -> Iterator[tuple[int, str, LineParse]]:
    """Yield (seq, line, LineParse) for every line of a server.log; source_id defaults to the path."""
    sid = source_id if source_id is not None else str(path)
    for seq, line in iter_log_file(path):
        yield seq, line, parse_line_detailed(line, source_id=sid, seq=seq, tz=tz,
                                             default_broker=default_broker)
