"""A replay drops no event as late, whatever order its files come in (issue 25): its first stage
reads every file in Spark's tasks and cuts the events into time slices, and the second streams the
slices in time order (docs/design.md, "Replay in two stages"). Checked through `rebalance-monitor
replay`'s own function on the 2.7 capture cut into files given latest first, in micro-batches
smaller than one file, and with a log file that starts hours before the offsets."""
from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.support.capture_expectations import FIXTURES, capture_inputs

pytestmark = pytest.mark.spark
CAPTURE = FIXTURES / "kafka-2.7"
RECORDS = ("rebalances.jsonl", "member_removals.jsonl")
LOG4J = "%Y-%m-%d %H:%M:%S,%f"


def _records(out: Path, name: str, groups: set[str] | None = None) -> list[str]:
    rows = [json.loads(line) for line in (out / name).read_text().splitlines()]
    return sorted(json.dumps(r, sort_keys=True) for r in rows if groups is None or r["group"] in groups)


def _late_rows(collector) -> float:
    return collector.metrics.registry.get_sample_value("rebalance_monitor_late_rows_total") or 0.0


def _dump_by_time(tmp_path: Path, pieces: int) -> list[Path]:
    """The capture's dump cut into `pieces` files by record time (each keeps its lines' order)."""
    lines = (CAPTURE / "offsets-topic.jsonl").read_text().splitlines()
    times = sorted(json.loads(line)["timestamp"] for line in lines)
    bounds = [times[len(times) * k // pieces] for k in range(1, pieces)]
    paths = [tmp_path / f"offsets-{k}.jsonl" for k in range(pieces)]
    for k, path in enumerate(paths):
        path.write_text("".join(line + "\n" for line in lines
                                if sum(json.loads(line)["timestamp"] >= b for b in bounds) == k))
    return paths


def test_files_latest_first_in_batches_smaller_than_a_file(spark, replay_capture, tmp_path):
    from streaming.app.replay import replay
    from streaming.app.settings import OffsetsInput, ReplaySettings, load
    _, golden_run = replay_capture("kafka-2.7")
    logs, _ = capture_inputs("kafka-2.7")
    dumps = _dump_by_time(tmp_path, 4)
    offsets = [OffsetsInput(path=str(p), cluster="default") for p in reversed(dumps)]   # latest first
    out = tmp_path / "out"
    collector = replay(spark, load(ReplaySettings, max_rows_per_batch=20), list(reversed(logs)), offsets,
                       out_dir=str(out))
    assert collector.last_batch_id >= 2 * len(dumps)     # several micro-batches per file
    assert _late_rows(collector) == 0
    for name in RECORDS:
        assert _records(out, name) == _records(golden_run, name), name


def _early_log(tmp_path: Path, hours: int) -> tuple[Path, str]:
    """sc03's coordinator lines of broker 1, the group renamed and every time `hours` earlier."""
    group, early = "sc03-heartbeat-expiry", "early-sc03"
    out = []
    for line in (CAPTURE / "broker1-server.log").read_text().splitlines():
        if group in line and "(kafka.coordinator.group." in line:
            at = datetime.strptime(line[1:24], LOG4J) - timedelta(hours=hours)
            out.append(f"[{at.strftime(LOG4J)[:-3]}]{line[25:].replace(group, early)}")
    path = tmp_path / "early-server.log"
    path.write_text("\n".join(out) + "\n")
    return path, early


def test_a_log_that_starts_hours_before_the_offsets(spark, replay_capture, tmp_path):
    from streaming.app.replay import replay
    from streaming.app.settings import LogInput, ReplaySettings, load
    _, golden_run = replay_capture("kafka-2.7")
    logs, offsets = capture_inputs("kafka-2.7")
    early_path, early = _early_log(tmp_path, hours=5)
    early_log = LogInput(path=str(early_path), cluster="default")
    alone = tmp_path / "alone"
    replay(spark, load(ReplaySettings), [early_log], [], out_dir=str(alone))
    assert _records(alone, "rebalances.jsonl")          # the early group has rebalances of its own
    both = tmp_path / "both"
    collector = replay(spark, load(ReplaySettings, max_rows_per_batch=300), [*logs, early_log], offsets,
                       out_dir=str(both))
    assert _late_rows(collector) == 0
    capture_groups = {json.loads(line)["group"] for line in (golden_run / "rebalances.jsonl").read_text().splitlines()}
    for name in RECORDS:
        assert _records(both, name, capture_groups) == _records(golden_run, name), name
        assert _records(both, name, {early}) == _records(alone, name), name
