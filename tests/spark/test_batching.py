"""The result must not depend on batching: one batch and many small batches give byte-identical
rebalances and removals (and equal the plain-Python pipeline)."""
from __future__ import annotations

import pytest

from streaming.app.local import run_local
from tests.support.capture_expectations import capture_inputs

pytestmark = pytest.mark.spark


def _lines(path):
    return sorted(path.read_text().splitlines())


@pytest.mark.parametrize("rows_per_batch", [15, 60])
def test_small_batches_change_nothing(spark, replay_capture, tmp_path, rows_per_batch):
    """The staged events cut into time slices of about 15 or 60 rows: tens of micro-batches."""
    from streaming.app.replay import replay
    from streaming.app.settings import ReplaySettings, load
    _, one_batch = replay_capture("kafka-2.7")
    logs, offsets = capture_inputs("kafka-2.7")
    collector = replay(spark, load(ReplaySettings, max_rows_per_batch=rows_per_batch), logs, offsets,
                       out_dir=str(tmp_path))
    assert collector.last_batch_id >= 6   # really many batches
    for name in ("rebalances.jsonl", "member_removals.jsonl", "groups.jsonl"):
        assert _lines(tmp_path / name) == _lines(one_batch / name), name


def test_spark_equals_plain_python(replay_capture):
    import json
    collector, out = replay_capture("kafka-4.0")
    local = run_local(*capture_inputs("kafka-4.0"))
    spark_rebalances = sorted(json.dumps(r, sort_keys=True) for r in collector.rebalances)
    assert spark_rebalances == sorted(json.dumps(r, sort_keys=True) for r in local["rebalance"])
    assert sorted(json.dumps(r, sort_keys=True) for r in collector.removals) == \
        sorted(json.dumps(r, sort_keys=True) for r in local["removal"])
