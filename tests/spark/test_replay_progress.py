"""Every micro-batch's progress is counted, however many batches a replay runs: Spark keeps
only the last `spark.sql.streaming.numRecentProgressUpdates` reports (100 by default) in
`query.recentProgress`; here the retention is 2, so reading it at the end would miss batches."""
from __future__ import annotations

import pytest

from tests.support.capture_expectations import capture_inputs

pytestmark = pytest.mark.spark
LINES_27 = 1321 + 2165    # both broker logs of the 2.7 capture
RECORDS_27 = 1606         # its offsets dump


def test_input_counts_of_every_batch(spark, tmp_path):
    from streaming.app.replay import replay
    from streaming.app.settings import ReplaySettings, load
    logs, offsets = capture_inputs("kafka-2.7")
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "2")
    try:
        collector = replay(spark, load(ReplaySettings, max_rows_per_batch=200), logs, offsets)
    finally:
        spark.conf.unset("spark.sql.streaming.numRecentProgressUpdates")
    assert collector.last_batch_id >= 6
    registry = collector.metrics.registry
    assert registry.get_sample_value("rebalance_monitor_input_records_total", {"source": "broker_log"}) == LINES_27
    assert registry.get_sample_value("rebalance_monitor_input_records_total", {"source": "offsets"}) == RECORDS_27
