"""The replay outputs of both captures equal the committed golden files byte for byte
(tests/fixtures/golden/README.md): moving or rewriting code must not change a single record."""
from __future__ import annotations

import pytest

from capture_expectations import FIXTURES

pytestmark = pytest.mark.spark
GOLDEN = FIXTURES / "golden"
FILES = ("rebalances.jsonl", "member_removals.jsonl", "groups.jsonl", "anomalies.jsonl",
         "clock_skew.jsonl", "quarantine.jsonl", "metrics.prom")


# Samples that depend on the wall clock or the machine's speed, not on the input.
WALL_CLOCK = ("rebalance_monitor_input_rows_per_second", "rebalance_monitor_batch_duration_seconds",
              "rebalance_monitor_watermark_delay_seconds", "rebalance_monitor_source_newest_event_age_seconds")


def comparable_metrics(text: str) -> str:
    """metrics.prom without `_created` samples (process times) and wall-clock gauges."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if "_created" not in line and not line.startswith(WALL_CLOCK))


@pytest.mark.parametrize("capture", ["kafka-2.7", "kafka-4.0"])
def test_replay_outputs_equal_golden(replay_capture, capture):
    _, out = replay_capture(capture)
    differ = []
    for name in FILES:
        got = (out / name).read_text()
        if name == "metrics.prom":
            got = comparable_metrics(got)
        if got != (GOLDEN / capture / name).read_text():
            differ.append(name)
    assert not differ, f"{capture}: outputs differ from tests/fixtures/golden: {differ}"
