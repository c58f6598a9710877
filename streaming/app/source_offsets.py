"""The offsets of the monitor's own sources as Spark's progress reports carry them (startOffset,
endOffset: a dict, its JSON, or "null" before the first batch). The keys the sources write
(streaming/spark/sources/): `source` (the input kind), `lines` and `of` (a log reader's lines
read and the input's total; the replay's read share), `eof` (the end-of-input marker was read),
`tick` (a live source's caught-up marker), `gap` (offsets missing from the topic), `error` (why
Kafka did not answer, or null). Read by the collector's health metrics and the replay's progress
line."""
from __future__ import annotations

import json
from typing import Any


def source_offset(value: Any) -> dict[str, Any]:
    """A source offset from a progress report as a dict ({} when it is null or not an object)."""
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value or "null")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def topic_positions(offset: dict[str, Any]) -> dict[str, dict[int, int]]:
    """The next offset to read, {topic: {partition: offset}}, of a Kafka source's end offset: the
    kafka-python source's `topics`, or Spark's connector's own {topic: {partition: offset}}."""
    topics = offset.get("topics") if "source" in offset else offset
    out: dict[str, dict[int, int]] = {}
    for topic, parts in (topics or {}).items():
        if not isinstance(parts, dict):
            continue
        for partition, position in parts.items():
            try:
                out.setdefault(str(topic), {})[int(partition)] = int(position)
            except (TypeError, ValueError):
                continue
    return out
