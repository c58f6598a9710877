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
from streaming.envelope import ENVELOPE_JSON, ENVELOPE_PLAIN, HOST_FIELDS, MESSAGE_FIELDS, spark_json_path
from streaming.parse import (DEFAULT_UNKNOWN_SAMPLE, LogSourceSpec, log_rows_to_events, log_spec,
                             offsets_rows_to_events)
from streaming.replay_source import LOG_SOURCE_NAME, OFFSETS_SOURCE_NAME, file_source_id
from streaming.schema import EVENT_SCHEMA, OUTPUT_SCHEMA, STATE_SCHEMA
from streaming.stateful import process_group


def coordinator_line_filter(line_col: str = "line"):
    """JVM-side filter: only lines that can be group-coordinator lines reach Python."""
    col = F.col(line_col)
    return reduce(lambda a, b: a | b, [col.contains(marker) for marker in COORDINATOR_LOGGER_MARKERS])


def _json_field(raw, path: str):
    return F.get_json_object(raw, spark_json_path(path))


def unwrap_columns(raw_col: str, specs: dict[str, LogSourceSpec]) -> list:
    """The envelope step in the JVM (same rules as streaming/envelope.py `unwrap`).

    Returns the columns `line` (the log4j line: the row itself, or the first line of the JSON
    envelope's message/log/msg field; null when a JSON row has none), `broker_hint` (int, from
    the source's `broker_id_field`) and `host_hint` (string).
    """
    raw = F.col(raw_col)
    source = F.col("source_id")
    json_ids = [sid for sid, spec in specs.items() if spec.envelope == ENVELOPE_JSON]
    plain_ids = [sid for sid, spec in specs.items() if spec.envelope == ENVELOPE_PLAIN]
    is_json = (F.when(source.isin(json_ids), F.lit(True)).when(source.isin(plain_ids), F.lit(False))
               .otherwise(F.ltrim(raw).startswith("{")))
    message = F.coalesce(*[_json_field(raw, name) for name in MESSAGE_FIELDS])
    first = F.regexp_replace(F.substring_index(message, "\n", 1), "\r$", "")
    line = F.when(is_json, first).otherwise(raw)
    hosts = []
    for name in HOST_FIELDS:
        value = _json_field(raw, name)
        hosts.append(F.when(~value.rlike(r"^\s*[\[{]") & (value != ""), value))
    host = F.when(is_json, F.coalesce(*hosts))
    broker = F.lit(None).cast("int")
    for sid, spec in specs.items():
        if spec.broker_id_field:
            value = _json_field(raw, spec.broker_id_field)
            digits = F.regexp_extract(value, r"(\d+)\s*$", 1)
            parsed = F.when(~value.startswith("-") & (digits != ""), digits.cast("int"))
            broker = F.when(is_json & (source == sid), parsed).otherwise(broker)
    return [line.alias("line"), broker.alias("broker_hint"), host.alias("host_hint")]


def log_events(raw: DataFrame, specs: dict[str, LogSourceSpec], unknown_sample: int = DEFAULT_UNKNOWN_SAMPLE
               ) -> DataFrame:
    """Raw log rows (RAW_LOG_SCHEMA) -> EVENT_SCHEMA rows.

    The marker test runs twice in the JVM: on the raw row (a JSON envelope contains the logger name
    of its line verbatim, so this drops every unrelated row before any JSON is read) and on the
    unwrapped line (exact). Rows whose JSON envelope cannot be read are kept (line null) and
    quarantined by the parse step.
    """
    prefiltered = raw.where(F.col("eof") | coordinator_line_filter("line"))
    unwrapped = prefiltered.select(
        "source_id", "seq", F.col("line").alias("raw"), "ts_hint_ms", "eof", *unwrap_columns("line", specs))
    kept = unwrapped.where(F.col("eof") | F.col("line").isNull() | coordinator_line_filter("line"))
    return kept.mapInPandas(partial(log_rows_to_events, specs=specs, unknown_sample=unknown_sample),
                            EVENT_SCHEMA)


def offsets_events(raw: DataFrame, clusters: dict[str, str]) -> DataFrame:
    return raw.mapInPandas(partial(offsets_rows_to_events, clusters=clusters), EVENT_SCHEMA)


def with_watermark(events: DataFrame, lateness_seconds: float) -> DataFrame:
    return (events.withColumn("event_time", F.timestamp_millis("ts_ms"))
            .withWatermark("event_time", f"{int(lateness_seconds * 1000)} milliseconds"))


def group_state_machine(events: DataFrame) -> DataFrame:
    # End-of-input markers (group null) must reach the watermark operator: a filter here would
    # be pushed below it by the optimizer. process_group ignores them instead.
    return (events.groupBy("cluster", "group")
            .applyInPandasWithState(process_group, OUTPUT_SCHEMA, STATE_SCHEMA, "append",
                                    GroupStateTimeout.EventTimeTimeout))


def log_source_events(spark: SparkSession, logs: list[LogInput], max_rows_per_batch: int,
                      num_partitions: int = 2, unknown_sample: int = DEFAULT_UNKNOWN_SAMPLE) -> DataFrame:
    """Replay of broker log files: the log source, the JVM filter and the parse step (no watermark)."""
    files = [{"path": i.path, "source_id": file_source_id(i.cluster, i.path), "tz": i.broker_timezone,
              "envelope": i.envelope} for i in logs]
    specs = {f["source_id"]: log_spec(i) for f, i in zip(files, logs)}
    raw = (spark.readStream.format(LOG_SOURCE_NAME).option("files", json.dumps(files))
           .option("maxRowsPerBatch", str(max_rows_per_batch))
           .option("numPartitions", str(num_partitions)).load())
    return log_events(raw, specs, unknown_sample)


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
        parts.append(with_watermark(
            log_source_events(spark, logs, int(max_rows), settings.parse_partitions,
                              settings.unknown_lines_sample_per_logger),
            settings.lateness_seconds))
    if offsets:
        files = [{"path": i.path, "source_id": file_source_id(i.cluster, i.path)} for i in offsets]
        clusters = {f["source_id"]: i.cluster for f, i in zip(files, offsets)}
        raw = (spark.readStream.format(OFFSETS_SOURCE_NAME).option("files", json.dumps(files))
               .option("maxRowsPerBatch", offsets_rows).load())
        parts.append(with_watermark(offsets_events(raw, clusters), settings.lateness_seconds))
    return group_state_machine(reduce(DataFrame.unionByName, parts))
