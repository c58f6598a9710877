"""Broker settings the records do not carry, from the configuration a broker logs when it starts
("KafkaConfig values:", one `\tname = value` line per setting; also inside JSON envelopes).

The one the monitor needs is `group.consumer.session.timeout.ms`: a consumer-protocol (KIP-848)
member's records carry no session timeout, so a session fence is dated back by it
(docs/impact.md). Replays read it from their log files when the setting is not given."""
from __future__ import annotations

import mmap
import re
from collections.abc import Iterable

CONSUMER_SESSION_TIMEOUT = re.compile(rb"group\.consumer\.session\.timeout\.ms = (\d+)")


def _last_value(path: str) -> int | None:
    """The last value the file logs (a broker restarted with another setting logs it again)."""
    try:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            values = [int(m.group(1)) for m in CONSUMER_SESSION_TIMEOUT.finditer(data)]
            return values[-1] if values else None
    except (OSError, ValueError):      # unreadable, or empty (mmap of 0 bytes): nothing logged
        return None


def consumer_session_timeout_ms(paths: Iterable[str]) -> tuple[int, str] | None:
    """(milliseconds, the file that says so) over the broker logs, or None when none logs it.
    Brokers that disagree: the shortest, which never dates a stop back further than a coordinator
    with that setting would have waited."""
    found = [(value, path) for path in paths if (value := _last_value(path)) is not None]
    return min(found) if found else None
