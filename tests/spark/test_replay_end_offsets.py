"""`rebalance-monitor replay --end-offsets`: the real 2.7 capture replayed with a file of end
offsets, run through the command in this process. The samples grow at a known rate from a known
base, so the records each stop delayed and each group's lag at the end follow from the stops the
replay found and the commits `decode-offsets` reads from the same dump (issue 54: "A replay given
a file of end-offset samples uses it")."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from streaming.app.cli import main
from tests.support.capture_expectations import FIXTURES

pytestmark = pytest.mark.spark
CAPTURE = FIXTURES / "kafka-2.7"
T0_S = 1_795_288_800.0           # 2026-11-21 19:20:00 UTC, before the capture's first line
T_END_S = T0_S + 900.0           # 19:35:00, after its last
BASE, RATE = 10_000, 10.0        # every partition's end offset: BASE + RATE records/s since T0_S


def _end(at_s: float) -> float:
    return BASE + RATE * (at_s - T0_S)


def _final_commits() -> dict[tuple[str, str], dict[int, int]]:
    """(group, topic) -> partition -> its last committed offset in the dump (deleted ones left out)."""
    out = subprocess.run([sys.executable, "-m", "streaming.app.cli", "decode-offsets",
                          str(CAPTURE / "offsets-topic.jsonl")], capture_output=True, text=True, check=True).stdout
    commits: dict[tuple[str, str], dict[int, int]] = {}
    for doc in map(json.loads, out.splitlines()):
        key = doc.get("key") or {}
        if key.get("type_name") != "OffsetCommit":
            continue
        partitions = commits.setdefault((key["group"], key["topic"]), {})
        if doc.get("tombstone"):
            partitions.pop(key["partition"], None)
        else:
            partitions[key["partition"]] = doc["value"]["offset"]
    return commits


@pytest.fixture(scope="module")
def replayed(spark, tmp_path_factory):
    folder = tmp_path_factory.mktemp("replay-end-offsets")
    commits = _final_commits()
    topics = sorted({topic for _, topic in commits})
    with open(folder / "ends.jsonl", "w") as f:
        for k in range(91):                              # every 10 s
            at_s = T0_S + 10 * k
            for topic in topics:
                for partition in range(10):
                    f.write(json.dumps({"time_ms": int(at_s * 1000), "topic": topic, "partition": partition,
                                        "offset": int(_end(at_s))}) + "\n")
        f.write("a line that is not a sample\n")
    code = main(["replay", "--broker-log", str(CAPTURE / "broker1-server.log"), str(CAPTURE / "broker2-server.log"),
                 "--offsets", str(CAPTURE / "offsets-topic.jsonl"), "--end-offsets", str(folder / "ends.jsonl"),
                 "--out", str(folder / "out")])
    assert code == 0
    return folder / "out", commits


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_records_delayed_is_what_arrived_on_each_stopped_partition_while_it_was_stopped(replayed):
    out, _ = replayed
    costs = _read(out / "rebalance_costs.jsonl")
    assert len(costs) >= 20                               # every measured classic rebalance of the capture
    for cost in costs:
        expected = sum(round(_end(end / 1000)) - round(_end(start / 1000)) for _, _, start, end in cost["stops"])
        assert cost["stops_not_listed"] == 0 and cost["records_delayed_unknown_reason"] is None
        assert cost["records_delayed"] == expected, cost
        assert cost["lag_before"] is None and cost["catch_up_deadline_ms"] is None    # no catch-up in a replay
    # the rebalances carry it, and the counter sums it per group
    by_key = {(c["group"], c["generation"]): c["records_delayed"] for c in costs}
    rebalances = {(r["group"], r["generation"]): r for r in _read(out / "rebalances.jsonl")}
    assert all(rebalances[key]["records_delayed"] == n for key, n in by_key.items())
    expiry = rebalances[("sc03-heartbeat-expiry", 2)]     # the killed member's partitions, through its expiry
    assert expiry["records_delayed"] > RATE * (expiry["completed_at_ms"] - expiry["started_at_ms"]) / 1000
    metrics = (out / "metrics.prom").read_text()
    total = re.search(r'rebalance_records_delayed_total\{cluster="default",group="sc03-heartbeat-expiry"\} (\S+)',
                      metrics)
    assert total is not None
    assert float(total.group(1)) == sum(n for (group, _), n in by_key.items() if group == "sc03-heartbeat-expiry")


def test_lag_at_the_end_is_the_newest_end_offset_minus_the_last_commit(replayed):
    out, commits = replayed
    metrics = (out / "metrics.prom").read_text()
    lags = {(m.group(1), m.group(2)): float(m.group(3)) for m in re.finditer(
        r'rebalance_monitor_group_topic_lag\{cluster="default",group="([^"]+)",topic="([^"]+)"\} (\S+)', metrics)}
    seconds = {(m.group(1), m.group(2)): float(m.group(3)) for m in re.finditer(
        r'rebalance_monitor_group_topic_lag_seconds\{cluster="default",group="([^"]+)",topic="([^"]+)"\} (\S+)',
        metrics)}
    # every group and topic with offsets left at the end (the others' were expired or deleted: sc03's too)
    assert lags.keys() == seconds.keys() == {key for key, partitions in commits.items() if partitions}
    assert ("sc11-stuck-in-rebalance", "sc11-topic") in lags and len(lags) == 16
    newest = _end(T_END_S)
    for key, lag in lags.items():
        committed = commits[key]
        assert lag == sum(newest - offset for offset in committed.values()), key
        # the oldest sample's offset is above every commit: placed by the history's rate
        assert seconds[key] == pytest.approx(T_END_S - (T0_S - (BASE - min(committed.values())) / RATE)), key
    assert "lag_sample_errors_total" not in metrics       # a replay samples nothing


def test_a_replay_without_end_offsets_has_no_lag(replay_capture):
    _, out = replay_capture("kafka-2.7")
    metrics = (out / "metrics.prom").read_text()
    assert "group_topic_lag{" not in metrics and "records_delayed_total{" not in metrics
    assert not (out / "rebalance_costs.jsonl").read_text()
