"""A batch's output rows reach the driver the same way whether collected or spilled to Parquet
(streaming/spark/batch_rows.py); the spilled files are gone once read, and a batch Spark runs
again replaces its earlier attempt's files."""
from __future__ import annotations

import pytest

from streaming.spark.batch_rows import SpilledRows, collected_rows

pytestmark = pytest.mark.spark


def _batch(spark, n: int, partitions: int):
    rows = [(f"kind{i % 3}", f'{{"i": {i}}}') for i in range(n)]
    return spark.createDataFrame(rows, "kind string, record_json string").coalesce(partitions)


def test_spilled_rows_equal_collected_rows_and_leave_no_files(spark, tmp_path):
    df = _batch(spark, 45_000, 3)     # more rows than one read piece
    spilled = SpilledRows(str(tmp_path / "outputs"))
    got = list(spilled(df, 7))
    assert got == list(collected_rows(df, 7))
    assert len(got) == 45_000 and got[1] == ("kind1", '{"i": 1}')
    assert not (tmp_path / "outputs" / "batch-7").exists()


def test_a_batch_run_again_replaces_its_files(spark, tmp_path):
    spilled = SpilledRows(str(tmp_path / "outputs"))
    stale = tmp_path / "outputs" / "batch-3"
    stale.mkdir(parents=True)
    (stale / "part-99999-left-by-a-failed-attempt.parquet").write_bytes(b"not parquet")
    assert len(list(spilled(_batch(spark, 10, 2), 3))) == 10
