"""The result must not depend on batching: one batch, many small batches, and the two sources
interleaved differently give byte-identical rebalances and removals (and equal the plain-Python
pipeline)."""
from __future__ import annotations

import pytest

from streaming.app.local import run_local
from tests.support.capture_expectations import capture_inputs

pytestmark = pytest.mark.spark


def _lines(path):
    return sorted(path.read_text().splitlines())


@pytest.mark.parametrize("log_rows,offsets_rows", [
    (60, 100_000),     # logs (566 coordinator-marker lines) trickle in 10 batches, offsets all at once
    (100_000, 250),    # offsets trickle in 7 batches, logs arrive all at once
])
def test_small_batches_and_interleaving_change_nothing(spark, replay_capture, tmp_path, log_rows, offsets_rows):
    from streaming.app.replay import replay
    from streaming.app.settings import ReplaySettings, load
    _, one_batch = replay_capture("kafka-2.7")
    logs, offsets = capture_inputs("kafka-2.7")
    collector = replay(spark, load(ReplaySettings, max_rows_per_batch=log_rows), logs, offsets,
                       out_dir=str(tmp_path), offsets_rows_per_batch=offsets_rows)
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
