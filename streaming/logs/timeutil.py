"""Log timestamps -> epoch milliseconds UTC, fast.

Kafka's `%d` is `yyyy-MM-dd HH:mm:ss,SSS` in the broker JVM's local zone with no offset, so
the zone must come from configuration (`broker_timezone`, default UTC). Other layouts write
`yyyy-MM-dd HH:mm:ss.SSS`, no milliseconds (Strimzi's Kafka 4.x pattern), ISO 8601 with `T`
(log4j2's `%d{ISO8601}`), with a zone or `Z` (JSON layouts, container runtimes: RFC 3339 with up to
nanoseconds), or epoch milliseconds (`%d{UNIX_MILLIS}`, JSON `timeMillis`). `to_epoch_ms` reads all
of them; the zone setting applies only to times that carry no zone of their own. Fractions finer
than a millisecond are truncated, as log4j truncates when it prints milliseconds.
"""
from __future__ import annotations

import re
from datetime import datetime, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo

UTC = ZoneInfo("UTC")


@lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    """ZoneInfo by name; raises ValueError naming the bad zone."""
    try:
        return ZoneInfo(name)
    except Exception as exc:  # ZoneInfoNotFoundError, ValueError on odd strings
        raise ValueError(f"unknown time zone {name!r}") from exc


# Epoch ms of the start of each local minute, per zone. The offset to UTC is constant within a
# minute, so one datetime conversion per minute suffices; the rest is integer arithmetic.
_MINUTE_CACHE: dict[tuple[str, tzinfo], int] = {}
_MINUTE_CACHE_MAX = 200_000


def log4j_to_epoch_ms(text: str, tz: tzinfo = UTC) -> int:
    """`2026-11-21 19:21:26,163` (local time in `tz`) -> epoch ms UTC.

    Ambiguous local times (the repeated hour when DST ends) resolve to the first occurrence
    (fold=0), which is all the log gives us. Raises ValueError if malformed or impossible.
    """
    if len(text) != 23 or text[16] != ":" or text[19] not in ",.":
        raise ValueError(f"not a log4j timestamp: {text!r}")
    key = (text[:16], tz)
    base = _MINUTE_CACHE.get(key)
    if base is None:
        minute = datetime(int(text[0:4]), int(text[5:7]), int(text[8:10]), int(text[11:13]),
                          int(text[14:16]), tzinfo=tz)
        base = round(minute.timestamp()) * 1000
        if len(_MINUTE_CACHE) >= _MINUTE_CACHE_MAX:
            _MINUTE_CACHE.clear()
        _MINUTE_CACHE[key] = base
    return base + int(text[17:19]) * 1000 + int(text[20:23])


_MINUTE_TEXT = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d$")
# The rest of a time after `yyyy-MM-dd HH:mm`: seconds, optional fraction, optional zone.
_REST = re.compile(r":(\d\d)(?:[,.](\d{1,9}))?(Z|[+-]\d\d(?::?\d\d)?)?$")


def _minute_ms(minute: str, tz: tzinfo) -> int:
    """Epoch ms of the local minute `yyyy-MM-dd HH:mm` in `tz` (cached)."""
    key = (minute, tz)
    base = _MINUTE_CACHE.get(key)
    if base is None:
        if not _MINUTE_TEXT.match(minute):
            raise ValueError(f"not a log timestamp: {minute!r}")
        stamp = datetime(int(minute[0:4]), int(minute[5:7]), int(minute[8:10]), int(minute[11:13]),
                         int(minute[14:16]), tzinfo=tz)
        base = round(stamp.timestamp()) * 1000
        if len(_MINUTE_CACHE) >= _MINUTE_CACHE_MAX:
            _MINUTE_CACHE.clear()
        _MINUTE_CACHE[key] = base
    return base


def to_epoch_ms(text: str, tz: tzinfo = UTC) -> int:
    """Any time a supported layout writes -> epoch ms UTC (module docstring); `tz` is used only
    when the text has no zone. Raises ValueError if malformed or impossible."""
    if len(text) == 23 and text[16] == ":" and text[19] in ",." and text[10] in " T":
        return log4j_to_epoch_ms(text, tz)
    if text.isdigit():
        if len(text) != 13:
            raise ValueError(f"not epoch milliseconds: {text!r}")
        return int(text)
    m = _REST.match(text, 16)
    if m is None or len(text) < 19:
        raise ValueError(f"not a log timestamp: {text!r}")
    seconds, fraction, offset = m.groups()
    ms = int((fraction or "0")[:3].ljust(3, "0"))
    if int(seconds) > 59:
        raise ValueError(f"not a log timestamp: {text!r}")
    if offset is None:
        return _minute_ms(text[:16], tz) + int(seconds) * 1000 + ms
    base = _minute_ms(text[:16], UTC)
    if offset != "Z":
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        minutes = int(digits[:2]) * 60 + (int(digits[2:4]) if len(digits) >= 4 else 0)
        base -= sign * minutes * 60_000
    return base + int(seconds) * 1000 + ms


def precision_ms(text: str) -> int:
    """How many milliseconds a time as written spans: 1 with milliseconds (or finer, or epoch
    milliseconds), 100 or 10 with one or two digits of fraction, 1000 without a fraction (Strimzi's
    Kafka 4.x `%d{yyyy-MM-dd HH:mm:ss}`). `to_epoch_ms` gives the start of that span."""
    if text.isdigit():
        return 1
    m = _REST.match(text, 16)
    if m is None:
        return 1
    digits = len(m.group(2) or "")
    return 10 ** (3 - digits) if digits < 3 else 1


def to_epoch_ms_or_none(text: str | None, tz: tzinfo = UTC) -> int | None:
    """`to_epoch_ms`, or None for a missing or unreadable time."""
    if text is None:
        return None
    try:
        return to_epoch_ms(text, tz)
    except ValueError:
        return None


def header_timestamp_ms(line: str, tz: tzinfo = UTC) -> int | None:
    """Epoch ms of a `[yyyy-MM-dd HH:mm:ss,SSS] ...` line, or None for any other line."""
    if len(line) < 25 or line[0] != "[" or line[24] != "]":
        return None
    try:
        return log4j_to_epoch_ms(line[1:24], tz)
    except ValueError:
        return None
