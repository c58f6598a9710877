"""Reading broker log files (replay, parse-logs)."""
from __future__ import annotations

from collections.abc import Iterator


def iter_log_file(path: str) -> Iterator[tuple[int, str]]:
    """Yield (seq, line) for each line of a server.log, seq 1-based, without the line ending.

    Bytes that are not UTF-8 become U+FFFD. Only '\\n' ends a line (a stray '\\r' stays in it).
    """
    with open(path, "rb") as handle:
        for seq, raw in enumerate(handle, start=1):
            yield seq, raw.decode("utf-8", errors="replace").rstrip("\r\n")
