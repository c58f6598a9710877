"""What the Python Data Sources share."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from streaming.rows import EVENT_SOURCE_ARROW_SCHEMA, rows_to_arrow

# Rows per Arrow batch a read task yields.
ARROW_BATCH_ROWS = 10_000


def arrow_batches(rows: Iterable[tuple[Any, ...]], schema: Any) -> Iterator[Any]:
    """A read task's rows as Arrow batches built column by column: PySpark converts yielded
    tuples one field at a time (15 % of the workers' time in a 1M-record cold start)."""
    remaining = iter(rows)
    while chunk := list(islice(remaining, ARROW_BATCH_ROWS)):
        yield rows_to_arrow(chunk, schema)


def event_batches(batches: Iterable[Any]) -> Iterator[Any]:
    """Event batches as a Data Source must yield them: Spark checks a source's batches against its
    schema, nullability included (the Python steps build theirs all-nullable)."""
    for batch in batches:
        if batch.num_rows:
            yield batch.select(EVENT_SOURCE_ARROW_SCHEMA.names).cast(EVENT_SOURCE_ARROW_SCHEMA)
