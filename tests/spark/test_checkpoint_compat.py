"""Checkpoints survive upgrades: a checkpoint written by the code of commit 2a45599 (group state
JSON without a schema version; tests/fixtures/checkpoint-v1/README.md) is resumed by today's code,
and the records and group metrics equal an uninterrupted run of today's code (the session's
one-batch replay of the same capture: the records do not depend on batching)."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.support.capture_expectations import FIXTURES, capture_inputs
from tests.support.golden import comparable_metrics

pytestmark = pytest.mark.spark
ROWS_PER_BATCH = 60   # as the fixture was written
KINDS = ("rebalance", "removal", "anomaly", "quarantine", "clock_skew")


def _run(spark, workdir):
    """The live service's collector (state file + event sink) over the replay sources, from the
    checkpoint in `workdir` (if any) to the end of the input."""
    from sinks.files import EventSink, GroupStateFile
    from sinks.metrics import MetricsSink
    from streaming.app.collector import RunCollector
    from streaming.app.settings import ReplaySettings, load
    from streaming.spark.query import replay_query
    from streaming.spark.run import run_to_end
    settings = load(ReplaySettings, max_rows_per_batch=ROWS_PER_BATCH)
    collector = RunCollector(MetricsSink(settings.duration_buckets), keep_records=False,
                             event_sink=EventSink(str(workdir / "events")),
                             state_file=GroupStateFile(str(workdir / "checkpoint" / "rebalance-monitor" / "groups.json"))
                             ).configure(settings.diagnosis.to_settings())
    collector.restore()
    logs, offsets = capture_inputs("kafka-2.7")
    outputs = replay_query(spark, settings.query_options(), [i.file() for i in logs], [i.file() for i in offsets])
    run_to_end(spark, outputs, collector, checkpoint_dir=str(workdir / "checkpoint" / "query"))
    final = collector.correlator.advance(2 ** 62)    # removals the correlator still holds
    records = {kind: sorted(json.dumps(r, sort_keys=True) for r in collector.event_sink.records(kind))
               for kind in KINDS}
    records["removal"] += sorted(json.dumps(r, sort_keys=True) for r in final)
    snapshots = sorted(json.dumps(s, sort_keys=True) for s in collector.snapshots.values())
    return records, snapshots, _group_metrics(collector.metrics.registry)


def _group_metrics(registry) -> list[str]:
    """Every sample of a per-group series (order: by text; series are created in input order)."""
    from sinks.exposition import text
    return sorted(line for line in comparable_metrics(text(registry)).splitlines() if 'group="' in line)


def test_resume_from_a_checkpoint_of_the_previous_version(spark, replay_capture, tmp_path):
    resumed_dir = tmp_path / "resumed"
    shutil.copytree(FIXTURES / "checkpoint-v1", resumed_dir)
    state_file = json.loads((resumed_dir / "checkpoint" / "rebalance-monitor" / "groups.json").read_text())
    assert state_file["batch_id"] == 3   # the fixture is mid-input
    resumed = _run(spark, resumed_dir)
    collector, _ = replay_capture("kafka-2.7")
    by_kind = {"rebalance": collector.rebalances, "removal": collector.removals, "anomaly": collector.anomalies,
               "quarantine": collector.quarantine, "clock_skew": collector.clock_skew}
    expected = {kind: sorted(json.dumps(r, sort_keys=True) for r in by_kind[kind]) for kind in KINDS}
    assert len(expected["rebalance"]) == 82 and len(expected["removal"]) == 76
    assert resumed[0] == expected
    assert resumed[1] == sorted(json.dumps(s, sort_keys=True) for s in collector.snapshots.values())
    assert resumed[2] == _group_metrics(collector.metrics.registry)
