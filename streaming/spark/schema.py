"""Spark schemas, derived from the row contracts of streaming/rows.py (the one place that
declares columns), plus the state of the stateful step."""
from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import types as T

from streaming.rows import (
    EVENT_COLUMNS_SPEC, OUTPUT_COLUMNS_SPEC, RAW_LOG_COLUMNS, RAW_OFFSETS_COLUMNS, STAGED_EVENT_COLUMNS_SPEC, Column
)

_SPARK = {"string": T.StringType(), "long": T.LongType(), "int": T.IntegerType(), "bool": T.BooleanType(),
          "binary": T.BinaryType()}


def struct(columns: Sequence[Column]) -> T.StructType:
    return T.StructType([T.StructField(c.name, _SPARK[c.type], c.nullable) for c in columns])


RAW_LOG_SCHEMA = struct(RAW_LOG_COLUMNS)
RAW_OFFSETS_SCHEMA = struct(RAW_OFFSETS_COLUMNS)
EVENT_SCHEMA = struct(EVENT_COLUMNS_SPEC)
STAGED_EVENT_SCHEMA = struct(STAGED_EVENT_COLUMNS_SPEC)   # a replay's second stage (sources/staged.py)
OUTPUT_SCHEMA = struct(OUTPUT_COLUMNS_SPEC)

# The state of one group between micro-batches (streaming/spark/stateful.py). Scalar columns
# only: PySpark 4.3 fails on array columns in applyInPandasWithState state. Changing this schema
# breaks every existing checkpoint; the contents are versioned instead (state/model.py).
STATE_SCHEMA = T.StructType([
    T.StructField("model_json", T.StringType(), False),   # GroupModel.to_json()
    T.StructField("held_json", T.StringType(), False),    # event rows waiting for the watermark
])

# The state of one bucket of groups (stateful.py process_bucket; QueryOptions.state_buckets > 0):
# every group of the bucket, as streaming/spark/state_bucket.py writes it (versioned).
STATE_SCHEMA_BUCKETED = T.StructType([
    T.StructField("groups_json", T.StringType(), False),
])
