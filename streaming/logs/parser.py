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
can count "recognised but ignored" apart from "unknown". The messages: streaming/logs/catalog/.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any

from state.events import SOURCE_LOG, TS_PRECISION, Event
from state.quarantine_reasons import QuarantineReason as R
from streaming.logs.catalog import CatalogEntry, candidate_entries
from streaming.logs.envelope import GENERIC_JSON
from streaming.logs.files import iter_log_file
from streaming.logs.header import DEFAULT, GENERIC, Header, inner_line, read_header
from streaming.logs.layout import (
    BROKER_LINE_MARKERS, HEADER_RE, NON_GROUP_RUNTIME_PREFIXES, full_logger_family, has_coordinator_marker,
    is_continuation, logger_families, split_coordinator_prefix
)
from streaming.logs.brokers import broker_events
from streaming.logs.timeutil import precision_ms, to_epoch_ms, to_epoch_ms_or_none
from streaming.logs.values import EVENT_ATTRIBUTES, FIELD_CONVERTERS, PRESENCE_FLAGS
from streaming.quarantine import RAW_LIMIT, Quarantined

OUTCOME_EVENTS = "events"                # result is a non-empty list of Events
OUTCOME_BROKER = "broker"                # result is a non-empty list of broker Events (brokers.py)
OUTCOME_IGNORED = "ignored"              # recognised coordinator line without a fact we use
OUTCOME_DEBUG = "debug"                  # coordinator DEBUG/TRACE line not parsed (see parse_at_debug)
OUTCOME_NOT_COORDINATOR = "not_coordinator"
OUTCOME_CONTINUATION = "continuation"    # belongs to the previous entry (stack trace, ...)
OUTCOME_UNKNOWN = "unknown"              # Quarantined(reason="unknown_coordinator_line")
OUTCOME_UNKNOWN_LAYOUT = "unknown_layout"  # Quarantined(reason="unparseable_line"): names a coordinator
                                           # logger or prefix, but its layout is not understood
OUTCOME_UNPARSEABLE = "unparseable"      # Quarantined(reason="unparseable_line"): e.g. a bad timestamp
OUTCOMES = (OUTCOME_EVENTS, OUTCOME_BROKER, OUTCOME_IGNORED, OUTCOME_DEBUG, OUTCOME_NOT_COORDINATOR,
            OUTCOME_CONTINUATION, OUTCOME_UNKNOWN, OUTCOME_UNKNOWN_LAYOUT, OUTCOME_UNPARSEABLE)
UNPARSEABLE_LINE = R.UNPARSEABLE_LINE
UNKNOWN_COORDINATOR_LINE = R.UNKNOWN_COORDINATOR_LINE

ParseResult = list[Event] | Quarantined | None


@dataclass(frozen=True)
class LineParse:
    outcome: str                         # one of OUTCOMES
    result: ParseResult                  # what parse_line returns
    entry: CatalogEntry | None = None    # the matching catalog entry, if any
    layout: str | None = None            # the line's layout (header.py), None when not understood
    logger: str | None = None            # the logger as the line names it, if it does


_CONTINUATION = LineParse(OUTCOME_CONTINUATION, None)
_NO_LAYOUT = LineParse(OUTCOME_NOT_COORDINATOR, None)
_BY_LAYOUT: dict[tuple[str, str], LineParse] = {}    # (outcome, layout) -> shared result without a fact


def _plain(outcome: str, layout: str) -> LineParse:
    """A shared LineParse without result for a layout (not_coordinator, debug)."""
    key = (outcome, layout)
    parsed = _BY_LAYOUT.get(key)
    if parsed is None:
        parsed = _BY_LAYOUT[key] = LineParse(outcome, None, None, layout)
    return parsed


def _quarantine(reason: str, detail: str, line: str, source_id: str, seq: int,
                ts_ms: int | None = None) -> Quarantined:
    return Quarantined(source=SOURCE_LOG, source_id=source_id, seq=seq, reason=reason, detail=detail,
                       raw=line[:RAW_LIMIT], ts_ms=ts_ms)


def _no_header(line: str, source_id: str, seq: int) -> LineParse:
    """A line no layout fits: a continuation, a coordinator line we cannot read, or neither."""
    if is_continuation(inner_line(line)):
        return _CONTINUATION
    if has_coordinator_marker(line):
        return LineParse(OUTCOME_UNKNOWN_LAYOUT, _quarantine(
            UNPARSEABLE_LINE, "line names a group-coordinator logger, but its layout is not understood "
            "(no time, level, logger and message could be read; docs/broker-logs.md, \"Layouts\")",
            line, source_id, seq))
    return _NO_LAYOUT


def _header_of(line: str, fields: Header | None) -> Header | None:
    """The header of a line that is not in the default layout, or of a JSON layout's fields."""
    if fields is None:
        return read_header(line)
    if fields.layout.endswith(GENERIC_JSON):
        # A generic JSON document's time may be a shipper's (envelope.py): the message's own
        # layout first; its fields for a message without one that starts an entry of its own.
        own = read_header(line)
        if own is not None or is_continuation(line):
            return own
        return Header(fields.layout, fields.ts, fields.level, fields.logger, line)
    if line.startswith("[") or line[:1].isdigit():
        # A shipper may add level/logger fields and keep the whole log4j line in `message`.
        own = read_header(line, generic=False)
        if own is not None:
            return own
    return Header(fields.layout, fields.ts, fields.level, fields.logger, line)


# Whitespace a copy-paste or a shipper mangled: runs of blanks, tabs, blanks at the end.
_MANGLED_SPACE = re.compile(r"[ \t]{2,}|\t|[ \t]$")
_SPACE_RUN = re.compile(r"[ \t]+")
_NOT_READ = (OUTCOME_UNKNOWN, OUTCOME_UNKNOWN_LAYOUT, OUTCOME_NOT_COORDINATOR)


def parse_line_detailed(line: str, *, source_id: str, seq: int, tz: tzinfo,
                        default_broker: int | None = None, fields: Header | None = None) -> LineParse:
    """Like parse_line, plus the outcome class, the catalog entry and the layout (for the caller's
    counters). `fields`: time, level and logger of a JSON layout (envelope.py), `line` its message.

    A line that is not read as it is and whose whitespace looks mangled (doubled blanks, tabs,
    blanks at the end: lines pasted into a ticket, reflowed by a shipper) is read again with each
    run of blanks as one space; that reading is kept only when it recognises the line. Kafka's own
    messages never hold two blanks in a row, except `%-5p`'s padding, which the header allows."""
    parsed = _parse_line(line, source_id, seq, tz, default_broker, fields)
    if parsed.outcome in _NOT_READ and _MANGLED_SPACE.search(line.rstrip("\r\n")):
        again = _parse_line(_SPACE_RUN.sub(" ", line.rstrip("\r\n")).strip(), source_id, seq, tz,
                            default_broker, fields)
        if again.outcome in (OUTCOME_EVENTS, OUTCOME_IGNORED, OUTCOME_DEBUG):
            return again
    return parsed


def _parse_line(line: str, source_id: str, seq: int, tz: tzinfo, default_broker: int | None,
                fields: Header | None) -> LineParse:
    line = line.rstrip("\r\n")
    header = HEADER_RE.match(line) if fields is None or fields.layout.endswith(GENERIC_JSON) else None
    if header is not None:     # the default layout, the common case: keep it fast
        ts_text, level, message, logger = header.groups()
        layout = DEFAULT
        if message[:1] == " ":                     # `%-5p`: "INFO  [GroupCoordinator ..."
            message, layout = message.lstrip(" "), "default-padded"
        family = full_logger_family(logger)
        if family is None or message.startswith(NON_GROUP_RUNTIME_PREFIXES):
            return _not_coordinator(ts_text, message, logger, layout, source_id, seq, tz)
        families: tuple[str, ...] = (family,)
    else:
        h = _header_of(line, fields)
        if h is None:
            return _no_header(line, source_id, seq)
        ts_text, level, message, logger, layout = h.ts, h.level or "INFO", h.message, h.logger, h.layout
        families = logger_families(logger, message)
        if not families or message.startswith(NON_GROUP_RUNTIME_PREFIXES):
            return _not_coordinator(ts_text, message, logger, layout, source_id, seq, tz)
    return _parse_message(line, ts_text, level, message, logger, layout, families, source_id, seq, tz,
                          default_broker)


def _span_ms(ts_text: str) -> int:
    """How many ms the line's time spans (timeutil.precision_ms; the default layout's 23
    characters, `2026-11-21 19:33:51,663`, without parsing)."""
    return 1 if len(ts_text) == 23 else precision_ms(ts_text)


def _not_coordinator(ts_text: str | None, message: str, logger: str | None, layout: str, source_id: str,
                     seq: int, tz: tzinfo) -> LineParse:
    """A line of another logger: one of the few broker lines the monitor reads (brokers.py), or
    nothing to it."""
    if ts_text is not None and any(marker in message for marker in BROKER_LINE_MARKERS):
        ts_ms = to_epoch_ms_or_none(ts_text, tz)
        events = [] if ts_ms is None else broker_events(message, ts_ms, source_id, seq, _span_ms(ts_text))
        if events:
            return LineParse(OUTCOME_BROKER, events, None, layout, logger)
    return _plain(OUTCOME_NOT_COORDINATOR, layout)


def _parse_message(line: str, ts_text: str | None, level: str, message: str, logger: str | None, layout: str,
                   families: tuple[str, ...], source_id: str, seq: int, tz: tzinfo,
                   default_broker: int | None) -> LineParse:
    broker, offsets_partition, body = split_coordinator_prefix(message)
    debug = level == "DEBUG" or level == "TRACE"
    match = None
    for family in families:
        for entry in candidate_entries(family, body, debug=debug):
            if entry.anchor in body and (entry.levels is None or level in entry.levels):
                match = entry.pattern.fullmatch(body)
                if match is not None:
                    break
        if match is not None:
            break

    if match is None:
        if debug:
            return _plain(OUTCOME_DEBUG, layout)
        if layout.endswith(GENERIC):
            # Read by position only: a message no entry knows says more about the reading than
            # about the catalog.
            return LineParse(OUTCOME_UNKNOWN_LAYOUT, _quarantine(
                UNPARSEABLE_LINE, "line carries a group-coordinator prefix, but its layout is not understood "
                "(the text from the prefix on matches no catalog entry; docs/broker-logs.md, \"Layouts\")",
                line, source_id, seq, to_epoch_ms_or_none(ts_text, tz)), None, layout, logger)
        named = logger or "/".join(families)
        return LineParse(OUTCOME_UNKNOWN, _quarantine(
            UNKNOWN_COORDINATOR_LINE, f"no catalog entry matches this {level} message of {named}",
            line, source_id, seq, to_epoch_ms_or_none(ts_text, tz)), None, layout, logger)
    kind = entry.kind
    if kind is None:
        return LineParse(OUTCOME_IGNORED, None, entry, layout, logger)

    try:
        if ts_text is None:
            raise ValueError("the line has no time")
        ts_ms = to_epoch_ms(ts_text, tz)
    except ValueError as exc:
        return LineParse(OUTCOME_UNPARSEABLE, _quarantine(
            UNPARSEABLE_LINE, f"bad timestamp {ts_text!r}: {exc}", line, source_id, seq), entry, layout, logger)

    events = _build_events(entry, kind, match, ts_ms, broker if broker is not None else default_broker,
                           offsets_partition, source_id, seq, _span_ms(ts_text))
    if not events:  # e.g. "The following groups were deleted: ." names no group
        return LineParse(OUTCOME_IGNORED, None, entry, layout, logger)
    return LineParse(OUTCOME_EVENTS, events, entry, layout, logger)


def _build_events(entry: CatalogEntry, kind: str, match: re.Match, ts_ms: int, broker: int | None,
                  offsets_partition: int | None, source_id: str, seq: int, precision: int = 1) -> list[Event]:
    data: dict[str, Any] = dict(entry.data)
    if offsets_partition is not None:
        data["offsets_partition"] = offsets_partition
    if precision > 1:
        # A layout without milliseconds: the event happened within `precision` ms of ts_ms
        # (state/event_order.py places it among the offsets records of that span).
        data[TS_PRECISION] = precision
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
               default_broker: int | None = None, fields: Header | None = None) -> ParseResult:
    """One server.log line -> list of Events, Quarantined, or None (see module docstring)."""
    return parse_line_detailed(line, source_id=source_id, seq=seq, tz=tz,
                               default_broker=default_broker, fields=fields).result


def parse_log_file(path: str, *, tz: tzinfo, default_broker: int | None = None,
                   source_id: str | None = None) -> Iterator[tuple[int, str, LineParse]]:
    """Yield (seq, line, LineParse) for every line of a server.log; source_id defaults to the path."""
    sid = source_id if source_id is not None else str(path)
    for seq, line in iter_log_file(path):
        yield seq, line, parse_line_detailed(line, source_id=sid, seq=seq, tz=tz,
                                             default_broker=default_broker)
