"""The parse and decode steps' statistics (decode_stats, log_stats) reach the driver in each
batch's progress report, not as output rows of the stateful step: the collector counts them once
(a batch the restored counters hold is not counted again) and writes them to the event sink next
to the batch's output records, which a restarted monitor reads back into the same counters."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from sinks.event_sink import EventSink
from sinks.metrics import MetricsSink
from state.outputs import OutputKind
from streaming.app.collector import RunCollector
from streaming.app.restart import restore
from streaming.app.settings import DEFAULT_DURATION_BUCKETS
from streaming.rows import DATA_JSON

PROGRESS: dict[str, Any] = {
    "batchId": 3,
    "observedMetrics": {
        "source_broker_log": {"statistics": [
            '{"classes":{"coordinator":2,"not_coordinator":5},"cluster":"c","layouts":{"strimzi4":7},"source":"b1"}']},
        "source_offsets": {"statistics": ['{"cluster":"c","counts":[[1,3,"decoded",30],[1,4,"unknown_version",1]]}']},
    },
}
DECODED = ("rebalance_monitor_offsets_records_total",
           {"cluster": "c", "key_version": "1", "value_version": "3", "outcome": "decoded"})
COORDINATOR_LINES = ("rebalance_monitor_log_lines_total", {"cluster": "c", "source": "b1", "class": "coordinator"})


def _collector(events: Path) -> RunCollector:
    return RunCollector(MetricsSink(DEFAULT_DURATION_BUCKETS), keep_records=False, event_sink=EventSink(str(events)),
                        batch_rows=lambda rows, _batch: rows)


def _value(collector: RunCollector, sample: tuple[str, dict[str, str]]) -> float | None:
    return collector.metrics.registry.get_sample_value(*sample)


def _quarantine_row() -> tuple[str, str]:
    return (str(OutputKind.QUARANTINE), DATA_JSON({"source": "log", "source_id": "b1", "seq": 1,
                                                   "reason": "unparseable_line", "cluster": "c"}))


def test_statistics_are_counted_from_the_report_and_kept_beside_the_batchs_records(tmp_path: Path) -> None:
    collector = _collector(tmp_path)
    collector.foreach_batch([_quarantine_row()], 3)
    collector.count_progress(copy.deepcopy(PROGRESS))
    assert _value(collector, DECODED) == 30.0 and _value(collector, COORDINATOR_LINES) == 2.0
    assert collector.decode_stats == {("c", "1", "3", "decoded"): 30, ("c", "1", "4", "unknown_version"): 1}
    decode = [json.loads(line) for line in (tmp_path / "decode_stats" / "batch-000000000003.jsonl").read_text().splitlines()]
    assert decode == [{"cluster": "c", "counts": [["1", "3", "decoded", 30], ["1", "4", "unknown_version", 1]]}]
    assert (tmp_path / "log_stats" / "batch-000000000003.jsonl").exists()
    # the batch run again (Spark after a crash) rewrites its records and leaves its statistics
    collector.last_batch_id = 2
    collector.foreach_batch([_quarantine_row()], 3)
    assert (tmp_path / "decode_stats" / "batch-000000000003.jsonl").exists()
    assert (tmp_path / "quarantine" / "batch-000000000003.jsonl").exists()

    restarted = _collector(tmp_path)
    restore(restarted)
    assert _value(restarted, DECODED) == 30.0 and _value(restarted, COORDINATOR_LINES) == 2.0
    # the restored batch's report again (re-run after the restart): not counted twice
    restarted.count_progress(copy.deepcopy(PROGRESS))
    assert _value(restarted, DECODED) == 30.0
    later = dict(copy.deepcopy(PROGRESS), batchId=4)
    restarted.count_progress(later)
    assert _value(restarted, DECODED) == 60.0 and _value(restarted, COORDINATOR_LINES) == 4.0


def test_a_report_without_statistics_counts_nothing(tmp_path: Path) -> None:
    collector = _collector(tmp_path)
    collector.count_progress({"batchId": 0, "observedMetrics": {"source_offsets": {"statistics": []}}})
    assert _value(collector, DECODED) is None and collector.decode_stats == {}
    assert not list((tmp_path / "decode_stats").iterdir())
