"""A replay's end offsets (`replay --end-offsets FILE`): the partitions' end offsets over time,
which a replay has no broker to sample (docs/output.md, "End offsets of a replay"). Two layouts:

- JSON lines, one sample a line: {"time_ms": 1795289048037, "topic": "orders", "partition": 0,
  "offset": 1234}, optionally "cluster" (a line of another cluster than the replay's is skipped);
- a Prometheus range query's answer (`/api/v1/query_range`, the JSON as Prometheus sends it) of a
  peer's end-offset series: kafka_exporter's `kafka_topic_partition_current_offset` (labels
  `topic`, `partition`) or kminion's `kminion_kafka_topic_partition_high_water_mark` (labels
  `topic_name`, `partition_id`).

A line or series that is not a sample is counted and the first one's reason kept, never a
traceback; the good samples around it are used.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any

Partition = tuple[str, int]
TOPIC_LABELS = ("topic", "topic_name")
PARTITION_LABELS = ("partition", "partition_id")
LINE_EXAMPLE = '{"time_ms": 1795289048037, "topic": "orders", "partition": 0, "offset": 1234}'


class EndOffsetsError(ValueError):
    """The file cannot be read or holds no sample at all."""


@dataclass
class EndOffsets:
    """Each partition's samples, (Unix seconds, end offset) oldest first, and what was skipped."""
    samples: dict[Partition, list[tuple[float, int]]] = field(default_factory=dict)
    skipped: int = 0
    first_skip: str | None = None
    other_clusters: int = 0

    def add(self, tp: Partition, at_s: float, offset: int) -> None:
        self.samples.setdefault(tp, []).append((at_s, offset))

    def skip(self, why: str) -> None:
        self.skipped += 1
        if self.first_skip is None:
            self.first_skip = why

    @property
    def count(self) -> int:
        return sum(len(points) for points in self.samples.values())

    @property
    def span_s(self) -> tuple[float, float]:
        """The oldest and the newest sample's time."""
        times = [t for points in self.samples.values() for t, _ in (points[0], points[-1])]
        return min(times), max(times)

    def interval_s(self) -> float:
        """The sampling interval: the median gap between a partition's consecutive samples."""
        gaps = sorted(b[0] - a[0] for points in self.samples.values() for a, b in itertools.pairwise(points)
                      if b[0] > a[0])
        return gaps[len(gaps) // 2] if gaps else 10.0


def read_end_offsets(path: str, cluster: str) -> EndOffsets:
    """The samples of `path` (either layout), each partition's sorted by time."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as exc:
        raise EndOffsetsError(f"cannot read {path}: {exc.strerror or exc}") from None
    out = EndOffsets()
    document = _whole_document(text)
    if document is not None and "data" in document:
        _read_prometheus(document, out)
    else:
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                _read_line(number, line, cluster, out)
    if not out.samples:
        why = f" ({out.first_skip})" if out.first_skip else ""
        others = f"; {out.other_clusters} samples of other clusters than {cluster!r}" if out.other_clusters else ""
        raise EndOffsetsError(f"{path}: no end-offset sample{why}{others}: expected JSON lines like {LINE_EXAMPLE} "
                              f"or a Prometheus query_range answer")
    for points in out.samples.values():
        points.sort()
    return out


def _whole_document(text: str) -> dict[str, Any] | None:
    """The file as one JSON object (a Prometheus answer), or None (JSON lines, or not JSON)."""
    if not text.lstrip().startswith("{") or "\n{" in text.strip():
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _read_line(number: int, line: str, cluster: str, out: EndOffsets) -> None:
    try:
        record = json.loads(line)
    except ValueError:
        out.skip(f"line {number}: not JSON")
        return
    if not isinstance(record, dict):
        out.skip(f"line {number}: not a JSON object")
        return
    if record.get("cluster") not in (None, cluster):
        out.other_clusters += 1
        return
    sample = _sample(record.get("topic"), record.get("partition"), record.get("time_ms"), record.get("offset"),
                     time_scale=1000.0)
    if isinstance(sample, str):
        out.skip(f"line {number}: {sample}")
    else:
        out.add(*sample)


def _read_prometheus(document: dict[str, Any], out: EndOffsets) -> None:
    data = document.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        out.skip("a JSON document, but not a Prometheus range query's answer (data.resultType matrix)")
        return
    for number, series in enumerate(data["result"], 1):
        labels = series.get("metric") if isinstance(series, dict) else None
        values = series.get("values") if isinstance(series, dict) else None
        if not isinstance(labels, dict) or not isinstance(values, list):
            out.skip(f"series {number}: no metric or values")
            continue
        topic = next((labels[k] for k in TOPIC_LABELS if k in labels), None)
        partition = next((labels[k] for k in PARTITION_LABELS if k in labels), None)
        for value in values:
            at, offset = (value + [None, None])[:2] if isinstance(value, list) else (None, None)
            sample = _sample(topic, partition, at, offset, time_scale=1.0)
            if isinstance(sample, str):
                out.skip(f"series {number}: {sample}")
            else:
                out.add(*sample)


def _sample(topic: Any, partition: Any, at: Any, offset: Any, time_scale: float
            ) -> tuple[Partition, float, int] | str:
    """((topic, partition), Unix seconds, offset), or the reason it is not a sample (naming the field)."""
    if not isinstance(topic, str) or not topic:
        return "no topic (topic or topic_name)"
    try:
        number = int(partition)
        at_s = float(at) / time_scale
        end = float(offset)
    except (TypeError, ValueError):
        return f"partition, time or offset is not a number ({partition!r}, {at!r}, {offset!r})"
    if number < 0 or end < 0 or not math.isfinite(at_s) or not math.isfinite(end) or end != int(end):
        return f"partition, time or offset out of range ({partition!r}, {at!r}, {offset!r})"
    return (topic, number), at_s, int(end)
