"""How one micro-batch's output rows (`kind`, `record_json`) reach the driver's foreachBatch.

Two ways, one contract: an iterator of (kind, record_json) pairs.

- `collected_rows`: one Arrow collect. Right for the live query's small batches (no files, no
  job beyond the collect).
- `SpilledRows`: the tasks write the batch's rows to Parquet under a directory the driver reads
  too, and the driver reads them back one row group at a time. A replay's end-of-input batch
  flushes every held event of every group at once (hundreds of MB of records for a day of 10,000
  groups in one time slice); collected in one piece, the task results went through the driver
  JVM's heap and failed it (OutOfMemoryError while fetching the result: TaskResultLost,
  docs/benchmarks.md "One time slice"). Written, they cost the heap nothing. The replay's
  staging directory already has to be shared by the driver and the tasks (its first stage writes
  there and its second reads), so this asks no more of a cluster than the replay did.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

# The columns of the output rows (streaming/rows.py OUTPUT_COLUMNS) the driver reads.
DRIVER_COLUMNS = ("kind", "record_json")
# Rows per piece the driver holds at once (Arrow record batches of the spilled files).
SPILL_READ_ROWS = 20_000


def _pairs(batch: Any) -> Iterator[tuple[str, str]]:
    return zip(batch.column(0).to_pylist(), batch.column(1).to_pylist())


def collected_rows(df: Any, batch_id: int) -> Iterator[tuple[str, str]]:
    """The batch's rows in one Arrow collect (not collect(): a Row object per output row cost
    about a sixth of the driver's time in a large replay, docs/benchmarks.md "Cost per record")."""
    yield from _pairs(df.select(*DRIVER_COLUMNS).toArrow())


class SpilledRows:
    """The batch's rows written by the tasks under `directory`, read back piece by piece."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def __call__(self, df: Any, batch_id: int) -> Iterator[tuple[str, str]]:
        import pyarrow.parquet as pq
        path = os.path.join(self.directory, f"batch-{batch_id}")
        # overwrite: a batch Spark runs again replaces what its failed attempt left
        df.select(*DRIVER_COLUMNS).write.mode("overwrite").parquet(path)
        try:
            for name in sorted(os.listdir(path)):
                if not name.endswith(".parquet"):
                    continue
                with pq.ParquetFile(os.path.join(path, name)) as f:
                    for batch in f.iter_batches(batch_size=SPILL_READ_ROWS, columns=list(DRIVER_COLUMNS)):
                        yield from _pairs(batch)
        finally:
            shutil.rmtree(path, ignore_errors=True)
