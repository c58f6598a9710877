"""Zone-less log4j timestamps -> epoch milliseconds UTC, fast.

Kafka's `%d` is `yyyy-MM-dd HH:mm:ss,SSS` in the broker JVM's local zone with no offset, so
the zone must come from configuration (`broker_timezone`, default UTC).
"""
from __future__ import annotations

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


def header_timestamp_ms(line: str, tz: tzinfo = UTC) -> int | None:
    """Epoch ms of a `[yyyy-MM-dd HH:mm:ss,SSS] ...` line, or None for any other line."""
    if len(line) < 25 or line[0] != "[" or line[24] != "]":
        return None
    try:
        return log4j_to_epoch_ms(line[1:24], tz)
    except ValueError:
        return None
