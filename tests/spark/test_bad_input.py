"""Garbage in the inputs is quarantined and counted; the run completes and the good data around
it gives exactly the records of a clean run."""
from __future__ import annotations

import base64
import json

import pytest

from tests.support.capture_expectations import FIXTURES, capture_inputs

pytestmark = pytest.mark.spark

GARBAGE_LOG_LINES = [
    # truncated in the middle of the header (a shipper cut the line)
    "[2026-11-21 19:22:5 INFO [GroupCoordinator 1]: Preparing to reb (kafka.coordinator.group.GroupCoordinator)",
    # a coordinator line whose message no Kafka version writes
    "[2026-11-21 19:22:55,000] INFO [GroupCoordinator 1]: Frobnicated group sc03-heartbeat-expiry (kafka.coordinator.group.GroupCoordinator)",
    # binary junk that happens to carry a coordinator logger name
    "\x00\x01\x02\xff garbage kafka.coordinator.group.GroupMetadataManager \x07",
]
# A new wording that shows up many times (e.g. after a broker upgrade): counted, only a sample kept.
UNKNOWN_BURST = [f"[2026-11-21 19:22:55,{i:03d}] INFO [GroupCoordinator 1]: Frobnicated group g{i} "
                 "(kafka.coordinator.group.GroupCoordinator)" for i in range(1, 10)]
SAMPLE = 5


def _garbage_dump_lines(good_line: str) -> list[str]:
    record = json.loads(good_line)
    value = base64.b64decode(record["value_b64"])
    truncated = dict(record, value_b64=base64.b64encode(value[:20]).decode(), offset=999_001)
    unknown_type = dict(record, key_b64=base64.b64encode(b"\x00\x63" + b"\x00\x01g").decode(), offset=999_002)
    return [
        "{this is not json",
        json.dumps(dict(record, value_b64="***not base64***", offset=999_000)),
        json.dumps(truncated),
        json.dumps(unknown_type),
    ]


def test_garbage_is_quarantined_and_good_data_is_intact(spark, replay_capture, tmp_path):
    from streaming.app.replay import replay
    from streaming.app.settings import LogInput, OffsetsInput, ReplaySettings, load
    _, clean = replay_capture("kafka-2.7")
    logs, _ = capture_inputs("kafka-2.7")

    dirty_logs = []
    for spec in logs:
        lines = open(spec.path, encoding="utf-8").read().splitlines()
        where = len(lines) // 3
        lines[where:where] = GARBAGE_LOG_LINES + (UNKNOWN_BURST if "broker1" in spec.path else [])
        path = tmp_path / spec.path.split("/")[-1]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        dirty_logs.append(LogInput(path=str(path), cluster=spec.cluster))
    dump = (FIXTURES / "kafka-2.7" / "offsets-topic.jsonl").read_text().splitlines()
    group_metadata_line = next(line for line in dump if json.loads(line)["key_b64"].startswith("AAI"))  # key type 2
    garbage = _garbage_dump_lines(group_metadata_line)
    dump[len(dump) // 2:len(dump) // 2] = garbage
    dirty_dump = tmp_path / "offsets-topic.jsonl"
    dirty_dump.write_text("\n".join(dump) + "\n")

    out = tmp_path / "out"
    settings = load(ReplaySettings, unknown_lines_sample_per_logger=SAMPLE)
    collector = replay(spark, settings, dirty_logs, [OffsetsInput(path=str(dirty_dump))], out_dir=str(out))

    quarantine = [json.loads(line) for line in (out / "quarantine.jsonl").read_text().splitlines()]
    unknown = [q for q in quarantine if q["reason"] == "unknown_coordinator_line"]
    reasons = sorted(q["reason"] for q in quarantine if q["reason"] != "unknown_coordinator_line")
    assert reasons == sorted(
        ["unparseable_line", "unparseable_line"] * 2      # 2 unparseable lines x 2 logs
        + ["malformed_dump_line", "malformed_dump_line", "corrupt_record", "unknown_record_type"])
    # 11 unknown lines of one logger (1 + 9 in broker1, 1 in broker2): every one counted, at most
    # SAMPLE kept per parse task (2 tasks per micro-batch), the rest summed up in a summary record
    assert {q["logger"] for q in unknown} == {"kafka.coordinator.group.GroupCoordinator"}
    assert sum(q["count"] for q in unknown) == 11
    kept = [q for q in unknown if not q.get("sampled_out")]
    summaries = [q for q in unknown if q.get("sampled_out")]
    assert SAMPLE <= len(kept) <= 2 * SAMPLE and all(q["count"] == 1 and "Frobnicated" in q["raw"] for q in kept)
    assert summaries and all(q["raw"] is None and q["count"] >= 1 for q in summaries)
    corrupt = next(q for q in quarantine if q["reason"] == "corrupt_record")
    assert "GroupMetadataValue" in corrupt["detail"] and "byte" in corrupt["detail"]   # names the field
    assert any("Frobnicated" in (q["raw"] or "") for q in quarantine)

    def records(directory, name):
        # `seq` is the line number of the evidence: the inserted garbage shifts it, nothing else.
        return sorted(json.dumps({k: v for k, v in json.loads(line).items() if k != "seq"}, sort_keys=True)
                      for line in (directory / name).read_text().splitlines())
    for name in ("rebalances.jsonl", "member_removals.jsonl"):
        assert records(out, name) == records(clean, name), name

    exposition = (out / "metrics.prom").read_text()
    assert 'rebalance_monitor_quarantined_records_total{cluster="default",reason="corrupt_record",source="offsets"} 1.0' in exposition
    assert 'reason="unparseable_line",source="broker_log"} 4.0' in exposition
    assert 'rebalance_monitor_quarantined_records_total{cluster="default",reason="unknown_coordinator_line",source="broker_log"} 11.0' in exposition
    assert 'rebalance_monitor_unknown_coordinator_lines_total{cluster="default",logger="kafka.coordinator.group.GroupCoordinator"} 11.0' in exposition
    assert len(collector.quarantine) == 8 + len(unknown)
