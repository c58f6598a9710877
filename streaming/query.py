"""The streaming query: sources -> parse -> union -> watermark -> per-group state machine.

The same builder serves replay (files) and, later, the live mode (Kafka topics): only the raw
sources differ. Output rows (OUTPUT_SCHEMA) carry a `kind` column; the driver fans them out.
"""
from __future__ import annotations

import json
from functools import partial, reduce
from typing import Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from streaming.broker_log import COORDINATOR_LOGGER_MARKERS
from streaming.config import LogInput, MonitorSettings, OffsetsInput
from streaming.offsets_arrow import offsets_arrow_to_events
from streaming.parse import LogSourceSpec, log_rows_to_events
from streaming.replay_source import LOG_SOURCE_NAME, OFFSETS_SOURCE_NAME, file_source_id, offsets_input_kind
from streaming.schema import EVENT_SCHEMA, OUTPUT_SCHEMA, STATE_SCHEMA
from streaming.stateful import process_group


def coordinator_line_filter(line_col: str = "line"):
    """JVM-side filter: only lines that can be group-coordinator lines reach Python."""
    col = F.col(line_col)
    return reduce(lambda a, b: a | b, [col.contains(marker) for marker in COORDINATOR_LOGGER_MARKERS])


def log_events(raw: DataFrame, specs: dict[str, LogSourceSpec]) -> DataFrame:
    kept = raw.where(F.col("eof") | coordinator_line_filter())
    return kept.mapInPandas(partial(log_rows_to_events, specs=specs), EVENT_SCHEMA)


def offsets_events(raw: DataFrame, clusters: dict[str, str]) -> DataFrame:
    """Decode in Arrow batches: commits vectorised and pre-aggregated, the rest per record
    (streaming/offsets_arrow.py)."""
    return raw.mapInArrow(partial(offsets_arrow_to_events, clusters=clusters), EVENT_SCHEMA)


def with_watermark(events: DataFrame, lateness_seconds: float) -> DataFrame:
    return (events.withColumn("event_time", F.timestamp_millis("ts_ms"))
            .withWatermark("event_time", f"{int(lateness_seconds * 1000)} milliseconds"))


def group_state_machine(events: DataFrame) -> DataFrame:
    # End-of-input markers (group null) must reach the watermark operator: a filter here would
    # be pushed below it by the optimizer. process_group ignores them instead.
    return (events.groupBy("cluster", "group")
            .applyInPandasWithState(process_group, OUTPUT_SCHEMA, STATE_SCHEMA, "append",
                                    GroupStateTimeout.EventTimeTimeout))


def replay_query(spark: SparkSession, settings: MonitorSettings, logs: list[LogInput],
                 offsets: list[OffsetsInput], max_rows_per_batch: Optional[int] = None,
                 offsets_rows_per_batch: Optional[int] = None) -> DataFrame:
    """Outputs of a replay over files; either input kind may be empty, not both.

    `max_rows_per_batch` caps rows per micro-batch for each source; `offsets_rows_per_batch`
    overrides it for the offsets source (tests use this to interleave the sources differently).
    """
    if not logs and not offsets:
        raise ValueError("replay needs at least one --broker-log or --offsets input")
    max_rows = str(max_rows_per_batch or settings.max_rows_per_batch)
    offsets_rows = str(offsets_rows_per_batch or max_rows)
    parts = []
    if logs:
        files = [{"path": i.path, "source_id": file_source_id(i.cluster, i.path), "tz": i.broker_timezone}
                 for i in logs]
        specs = {f["source_id"]: LogSourceSpec(i.cluster, i.broker_timezone, i.broker_id)
                 for f, i in zip(files, logs)}
        raw = (spark.readStream.format(LOG_SOURCE_NAME).option("files", json.dumps(files))
               .option("maxRowsPerBatch", max_rows).load())
        parts.append(with_watermark(log_events(raw, specs), settings.lateness_seconds))
    if offsets:
        files = [{"path": i.path, "source_id": file_source_id(i.cluster, i.path),
                  "kind": offsets_input_kind(i.path)} for i in offsets]
        clusters = {f["source_id"]: i.cluster for f, i in zip(files, offsets)}
        raw = (spark.readStream.format(OFFSETS_SOURCE_NAME).option("files", json.dumps(files))
               .option("maxRowsPerBatch", offsets_rows).load())
        parts.append(with_watermark(offsets_events(raw, clusters), settings.lateness_seconds))
    return group_state_machine(reduce(DataFrame.unionByName, parts))
