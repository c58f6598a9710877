"""Spark schemas: raw inputs, the event model (state/events.py as rows), outputs and state.

EVENT_SCHEMA is the one typed schema everything the state machine consumes travels in; its
meaning per column is documented in docs/event-model.md.
"""
from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

# Replay end-of-input marker time (2100-01-01 UTC): moves each source's watermark past every
# real event so held events are flushed. Fits pandas' nanosecond timestamps (max 2262).
END_OF_INPUT_TS_MS = 4102444800000
QUARANTINE_GROUP = "\u0000quarantine"   # state key for quarantine rows (no Kafka group id)
STATS_GROUP = "\u0000stats"             # state key for decode-health rows (offsets_arrow.py)
STATS_KIND = "decode_stats"

RAW_LOG_SCHEMA = T.StructType([
    T.StructField("source_id", T.StringType(), False),   # "<cluster>:<file name>" / topic-partition
    T.StructField("seq", T.LongType(), False),           # 1-based line number / offset
    T.StructField("line", T.StringType(), True),
    T.StructField("ts_hint_ms", T.LongType(), True),     # last header time seen in this source
    T.StructField("eof", T.BooleanType(), False),
])

RAW_OFFSETS_SCHEMA = T.StructType([
    T.StructField("source_id", T.StringType(), False),
    T.StructField("seq", T.LongType(), False),           # dump line number (replay) / offset
    T.StructField("partition", T.IntegerType(), True),
    T.StructField("offset", T.LongType(), True),
    T.StructField("timestamp_ms", T.LongType(), True),
    T.StructField("key", T.BinaryType(), True),
    T.StructField("value", T.BinaryType(), True),
    T.StructField("error", T.StringType(), True),        # malformed dump line / unusable batch: why
    T.StructField("eof", T.BooleanType(), False),
    # with error: the quarantine reason (malformed_dump_line, corrupt_batch, truncated_batch, ...)
    T.StructField("error_reason", T.StringType(), True),
])

EVENT_SCHEMA = T.StructType([
    T.StructField("cluster", T.StringType(), False),
    T.StructField("group", T.StringType(), True),        # null only on end-of-input markers
    T.StructField("ts_ms", T.LongType(), False),         # event time, epoch ms UTC
    T.StructField("source", T.StringType(), False),      # "log" | "offsets"
    T.StructField("source_id", T.StringType(), False),
    T.StructField("seq", T.LongType(), False),
    T.StructField("kind", T.StringType(), False),        # state/events.py kinds, or "quarantine"
    T.StructField("broker", T.IntegerType(), True),
    T.StructField("generation", T.IntegerType(), True),
    T.StructField("member_id", T.StringType(), True),
    T.StructField("reason", T.StringType(), True),
    T.StructField("data_json", T.StringType(), True),    # kind-specific fields as JSON
])
EVENT_COLUMNS = [f.name for f in EVENT_SCHEMA.fields]
# The same columns as Arrow types (mapInArrow output of the offsets decoder).
_ARROW_TYPES = {T.StringType: pa.string(), T.LongType: pa.int64(), T.IntegerType: pa.int32()}
EVENT_ARROW_SCHEMA = pa.schema([pa.field(f.name, _ARROW_TYPES[type(f.dataType)], True)
                                for f in EVENT_SCHEMA.fields])

OUTPUT_SCHEMA = T.StructType([
    T.StructField("kind", T.StringType(), False),        # rebalance|removal|snapshot|anomaly|quarantine
    T.StructField("cluster", T.StringType(), True),
    T.StructField("group", T.StringType(), True),
    T.StructField("ts_ms", T.LongType(), True),
    T.StructField("record_json", T.StringType(), False),
])

# Scalar columns only: PySpark 4.3 fails on array columns in applyInPandasWithState state.
STATE_SCHEMA = T.StructType([
    T.StructField("model_json", T.StringType(), False),
    T.StructField("held_json", T.StringType(), False),   # events waiting for the watermark
])
