"""Replays whose offsets input is segment files, and groups converted between protocols, through the streaming query."""
from __future__ import annotations

import json

import pytest

from tests.support.capture_expectations import FIXTURES


@pytest.mark.spark
@pytest.mark.parametrize("capture,segments", [("kafka-2.7", "segments"), ("kafka-4.0", "segments/node1")])
def test_replay_from_segments_gives_the_same_rebalances_as_from_the_dump(spark, replay_capture, tmp_path,
                                                                          capture, segments):
    from streaming.app.replay import replay
    from streaming.app.settings import OffsetsInput, ReplaySettings, load
    from tests.support.capture_expectations import capture_inputs
    dump_collector, dump_out = replay_capture(capture)
    logs, _ = capture_inputs(capture)
    offsets = [OffsetsInput(path=str(FIXTURES / capture / segments))]
    collector = replay(spark, load(ReplaySettings), logs, offsets, out_dir=str(tmp_path))
    for name in ("rebalances.jsonl", "member_removals.jsonl", "groups.jsonl", "anomalies.jsonl"):
        assert (tmp_path / name).read_text() == (dump_out / name).read_text(), name
    assert collector.quarantine == [] and dump_collector.quarantine == []
    assert collector.decode_stats == dump_collector.decode_stats
    total = sum(collector.decode_stats.values())
    assert total == {"kafka-2.7": 1606, "kafka-4.0": 4634}[capture]
    assert {k[3] for k in collector.decode_stats} == {"decoded"}
    page = (tmp_path / "metrics.prom").read_text()
    assert 'rebalance_monitor_offsets_records_total{cluster="default",key_version="1",outcome="decoded",' \
           'value_version="3"}' in page


@pytest.mark.spark
@pytest.mark.parametrize("group,protocols,first_previous", [
    ("k4-sc11-mixed-classic-first", ["classic", "consumer", "classic", "classic"], 0),
    ("k4-sc11b-mixed-consumer-first", ["consumer", "consumer", "classic", "classic"], None),
])
def test_converted_group_keeps_one_continuous_history(replay_capture, group, protocols, first_previous):
    """Classic -> consumer -> classic conversions: one group, one chain of generations/epochs,
    no rebalance counted twice, whichever record or line told of each step."""
    collector, out = replay_capture("kafka-4.0")
    recs = sorted((json.loads(line) for line in (out / "rebalances.jsonl").read_text().splitlines()
                   if json.loads(line)["group"] == group), key=lambda r: r["started_at_ms"])
    assert [r["protocol"] for r in recs] == protocols
    assert [r["generation"] for r in recs] == [1, 2, 3, 4]
    assert [r["previous_generation"] for r in recs] == [first_previous, 1, 2, 3]
    assert [r["outcome"] for r in recs] == ["stable", "stable", "stable", "empty"]
    snap = collector.snapshots[("default", group)]
    assert (snap["state"], snap["generation"], snap["rebalances_total"], snap["protocol"]) == ("Empty", 4, 4, "classic")
    assert [a for a in collector.anomalies if a["group"] == group] == []
