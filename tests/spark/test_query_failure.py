"""A replay whose Spark query fails ends with one line naming the cause and exit 1, not a Python
traceback (streaming/spark/failure.py): run through `rebalance-monitor replay` in this process,
with the driver's batch handling made to fail the way the end-of-input batch of a one-slice day
once did (the driver JVM's heap), and with a failure of no known cause."""
from __future__ import annotations

import pytest

from streaming.app.cli import main
from streaming.app.collector import RunCollector
from tests.support.capture_expectations import FIXTURES

pytestmark = pytest.mark.spark
CAPTURE = FIXTURES / "kafka-2.7"


def _replay(tmp_path) -> int:
    return main(["replay", "--broker-log", str(CAPTURE / "broker1-server.log"),
                 "--offsets", str(CAPTURE / "offsets-topic.jsonl"), "--out", str(tmp_path / "out")])


@pytest.mark.parametrize(("error", "said"), [
    (MemoryError("java.lang.OutOfMemoryError: Java heap space"), "a JVM ran out of heap (OutOfMemoryError); "
                                                                 "raise driver_memory"),
    (ValueError("a failure of no known cause"), "a Python function of the query raised ValueError: a failure "
                                                 "of no known cause"),
])
def test_a_failed_query_ends_with_one_line_and_exit_1(spark, tmp_path, monkeypatch, capsys, error, said):
    def fail(self, df, batch_id):
        raise error
    monkeypatch.setattr(RunCollector, "_apply_batch", fail)
    assert _replay(tmp_path) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"rebalance-monitor replay: the Spark query failed: {said}")
    assert len(err[-1]) < 400
