"""What the Python Data Sources share."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows


@dataclass
class RowsPartition(InputPartition):
    """A partition that carries its rows (the replay readers build them on the driver)."""
    rows: list


def rows_allowed(limit: ReadLimit) -> int:
    """Rows a batch may take under Spark's admission control (AvailableNow asks for all)."""
    if isinstance(limit, ReadMaxRows):
        return max(1, int(limit.max_rows))
    return 1 << 62
