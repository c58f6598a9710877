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

from streaming.logs.parser import COORDINATOR_LOGGER_MARKERS
from state.events import END_OF_INPUT
from streaming.app.settings import ConfigError, KafkaSettings, LogInput, MonitorSettings, OffsetsInput
from streaming.logs.envelope import ENVELOPE_JSON, ENVELOPE_PLAIN, HOST_FIELDS, MESSAGE_FIELDS, spark_json_path
from streaming.spark.sources.kafka import KAFKA_SOURCE_NAME, KIND_LOG, KIND_OFFSETS
from streaming.offsets.vectorised import offsets_arrow_to_events
from streaming.logs.step import (DEFAULT_UNKNOWN_SAMPLE, QUARANTINE_KIND, ClusterNames, LogSourceSpec,
                             log_rows_to_events, log_spec)
from streaming.spark.sources.replay import LOG_SOURCE_NAME, OFFSETS_SOURCE_NAME, file_source_ids, offsets_input_kind
from streaming.spark.schema import EVENT_SCHEMA, OUTPUT_SCHEMA, STATE_SCHEMA
from streaming.spark.stateful import process_group


def coordinator_line_filter(line_col: str = "line"):
    """JVM-side filter: only lines that can be group-coordinator lines reach Python."""
    col = F.col(line_col)
    return reduce(lambda a, b: a | b, [col.contains(marker) for marker in COORDINATOR_LOGGER_MARKERS])


def _json_field(raw, path: str):
    return F.get_json_object(raw, spark_json_path(path))


def _broker_id(raw, field: str):
    """The broker id in an envelope field: its trailing digits ("broker-2" -> 2), null if none."""
    value = _json_field(raw, field)
    digits = F.regexp_extract(value, r"(\d+)\s*$", 1)
    return F.when(~value.startswith("-") & (digits != ""), digits.cast("int"))


def unwrap_columns(raw_col: str, specs: dict[str, LogSourceSpec],
                   default_spec: Optional[LogSourceSpec] = None) -> list:
    """The envelope step in the JVM (same rules as streaming/envelope.py `unwrap`).

    Returns the columns `line` (the log4j line: the row itself, or the first line of the JSON
    envelope's message/log/msg field; null when a JSON row has none), `broker_hint` (int, from
    the source's `broker_id_field`) and `host_hint` (string).
    """
    raw = F.col(raw_col)
    source = F.col("source_id")
    json_ids = [sid for sid, spec in specs.items() if spec.envelope == ENVELOPE_JSON]
    plain_ids = [sid for sid, spec in specs.items() if spec.envelope == ENVELOPE_PLAIN]
    # Rows of sources not in `specs` (partitions of a live log topic) follow `default_spec`.
    fallback_json = F.ltrim(raw).startswith("{")
    if default_spec is not None and default_spec.envelope in (ENVELOPE_JSON, ENVELOPE_PLAIN):
        fallback_json = F.lit(default_spec.envelope == ENVELOPE_JSON)
    is_json = (F.when(source.isin(json_ids), F.lit(True)).when(source.isin(plain_ids), F.lit(False))
               .otherwise(fallback_json))
    message = F.coalesce(*[_json_field(raw, name) for name in MESSAGE_FIELDS])
    first = F.regexp_replace(F.substring_index(message, "\n", 1), "\r$", "")
    line = F.when(is_json, first).otherwise(raw)
    hosts = []
    for name in HOST_FIELDS:
        value = _json_field(raw, name)
        hosts.append(F.when(~value.rlike(r"^\s*[\[{]") & (value != ""), value))
    host = F.when(is_json, F.coalesce(*hosts))
    broker = F.lit(None).cast("int")
    if default_spec is not None and default_spec.broker_id_field:
        broker = F.when(is_json & ~source.isin(list(specs)), _broker_id(raw, default_spec.broker_id_field))
    for sid, spec in specs.items():
        if spec.broker_id_field:
            broker = F.when(is_json & (source == sid), _broker_id(raw, spec.broker_id_field)).otherwise(broker)
    return [line.alias("line"), broker.alias("broker_hint"), host.alias("host_hint")]


def log_events(raw: DataFrame, specs: dict[str, LogSourceSpec], unknown_sample: int = DEFAULT_UNKNOWN_SAMPLE,
               default_spec: Optional[LogSourceSpec] = None) -> DataFrame:
    """Raw log rows (RAW_LOG_SCHEMA) -> EVENT_SCHEMA rows.

    The marker test runs twice in the JVM: on the raw row (a JSON envelope contains the logger name
    of its line verbatim, so this drops every unrelated row before any JSON is read) and on the
    unwrapped line (exact). Rows whose JSON envelope cannot be read are kept (line null) and
    quarantined by the parse step.
    """
    prefiltered = raw.where(F.col("eof") | coordinator_line_filter("line"))
    unwrapped = prefiltered.select(
        "source_id", "seq", F.col("line").alias("raw"), "ts_hint_ms", "eof",
        *unwrap_columns("line", specs, default_spec))
    kept = unwrapped.where(F.col("eof") | F.col("line").isNull() | coordinator_line_filter("line"))
    return kept.mapInPandas(partial(log_rows_to_events, specs=specs, unknown_sample=unknown_sample,
                                    default_spec=default_spec),
                            EVENT_SCHEMA)


def offsets_events(raw: DataFrame, clusters: dict[str, str]) -> DataFrame:
    """Decode in Arrow batches: commits vectorised and pre-aggregated, the rest per record
    (streaming/offsets_arrow.py). Live topics pass a ClusterNames with the cluster as fallback."""
    return raw.mapInArrow(partial(offsets_arrow_to_events, clusters=clusters), EVENT_SCHEMA)


def observed(events: DataFrame, source_kind: str) -> DataFrame:
    """Per-source figures Spark reports in each batch's progress (observedMetrics)."""
    real = F.col("kind") != F.lit(END_OF_INPUT)
    return events.observe(
        f"source_{source_kind}",
        F.max(F.when(real & (F.col("kind") != F.lit(QUARANTINE_KIND)), F.col("ts_ms"))).alias("newest_event_ms"),
        F.sum(F.when(real & (F.col("kind") != F.lit(QUARANTINE_KIND)), 1).otherwise(0)).alias("events"),
        F.sum(F.when(F.col("kind") == F.lit(QUARANTINE_KIND), 1).otherwise(0)).alias("quarantined"),
    )


def with_watermark(events: DataFrame, lateness_seconds: float) -> DataFrame:
    return (events.withColumn("event_time", F.timestamp_millis("ts_ms"))
            .withWatermark("event_time", f"{int(lateness_seconds * 1000)} milliseconds"))


def group_state_machine(events: DataFrame, group_allow: Optional[list[str]] = None,
                        group_deny: Optional[list[str]] = None, diagnosis=None) -> DataFrame:
    # No filter before the stateful step: Spark's optimizer pushes a filter on `group` below the
    # watermark operator, and the rows it removes (end-of-input markers, denied groups) would
    # no longer move their source's event time. process_group skips them instead.
    function = process_group
    if group_allow or group_deny or diagnosis is not None:
        function = partial(process_group, group_allow=tuple(group_allow or ()),
                           group_deny=tuple(group_deny or ()),
                           **({"diagnosis": diagnosis} if diagnosis is not None else {}))
    return (events.groupBy("cluster", "group")
            .applyInPandasWithState(function, OUTPUT_SCHEMA, STATE_SCHEMA, "append",
                                    GroupStateTimeout.EventTimeTimeout))


def log_source_events(spark: SparkSession, logs: list[LogInput], max_rows_per_batch: int,
                      num_partitions: int = 2, unknown_sample: int = DEFAULT_UNKNOWN_SAMPLE,
                      source_ids: Optional[list[str]] = None) -> DataFrame:
    """Replay of broker log files: the log source, the JVM filter and the parse step (no watermark)."""
    source_ids = source_ids or file_source_ids([(i.cluster, i.path) for i in logs])
    files = [{"path": i.path, "source_id": sid, "tz": i.broker_timezone, "envelope": i.envelope}
             for i, sid in zip(logs, source_ids)]
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
    source_ids = file_source_ids([(i.cluster, i.path) for i in logs + offsets])
    if logs:
        parts.append(with_watermark(
            observed(log_source_events(spark, logs, int(max_rows), settings.parse_partitions,
                                       settings.unknown_lines_sample_per_logger, source_ids[:len(logs)]),
                     "broker_log"),
            settings.lateness_seconds))
    if offsets:
        files = [{"path": i.path, "source_id": sid, "kind": offsets_input_kind(i.path)}
                 for i, sid in zip(offsets, source_ids[len(logs):])]
        clusters = {f["source_id"]: i.cluster for f, i in zip(files, offsets)}
        raw = (spark.readStream.format(OFFSETS_SOURCE_NAME).option("files", json.dumps(files))
               .option("maxRowsPerBatch", offsets_rows).load())
        parts.append(with_watermark(observed(offsets_events(raw, clusters), "offsets"), settings.lateness_seconds))
    return group_state_machine(reduce(DataFrame.unionByName, parts), diagnosis=settings.diagnosis.to_settings())


# ---------------------------------------------------------------------------- live (Kafka)
SPARK_KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def spark_kafka_available(spark: SparkSession) -> bool:
    """Is Spark's built-in kafka source on the classpath (spark.jars.packages)?"""
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(SPARK_KAFKA_PROVIDER)
        return True
    except Exception:
        return False


def choose_kafka_source(spark: SparkSession, kafka: KafkaSettings) -> str:
    if kafka.source == "spark" and not spark_kafka_available(spark):
        raise ConfigError("kafka.source: \"spark\" needs Spark's kafka connector on the classpath "
                          "(spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>)")
    if kafka.source == "auto":
        return "spark" if spark_kafka_available(spark) else "python"
    return kafka.source


def _spark_kafka_raw(spark: SparkSession, kafka: KafkaSettings, topics: list[str], kind: str) -> DataFrame:
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("subscribe", ",".join(topics))
              .option("startingOffsets", kafka.starting_offsets)
              .option("failOnDataLoss", "false"))   # compaction/retention gaps are counted, not fatal
    if kafka.max_rows_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(kafka.max_rows_per_batch))
    if kind == KIND_OFFSETS:
        reader = reader.option("kafka.isolation.level", "read_committed")
    for key, value in kafka.spark_options.items():
        reader = reader.option(key, value)
    return connector_rows_to_raw(reader.load(), kind)


def connector_rows_to_raw(raw: DataFrame, kind: str) -> DataFrame:
    """Spark kafka connector rows (key, value, topic, partition, offset, timestamp) -> the raw
    schemas the Python sources produce, so both paths feed the same query."""
    source_id = F.concat(F.col("topic"), F.lit("-"), F.col("partition").cast("string"))
    if kind == KIND_OFFSETS:
        return raw.select(source_id.alias("source_id"), F.col("offset").alias("seq"), F.col("partition"),
                          F.col("offset"), F.unix_millis(F.col("timestamp")).alias("timestamp_ms"),
                          F.col("key"), F.col("value"), F.lit(None).cast("string").alias("error"),
                          F.lit(False).alias("eof"), F.lit(None).cast("string").alias("error_reason"))
    return raw.select(source_id.alias("source_id"), F.col("offset").alias("seq"),
                      F.col("value").cast("string").alias("line"),
                      F.unix_millis(F.col("timestamp")).alias("ts_hint_ms"), F.lit(False).alias("eof"))


def _python_kafka_raw(spark: SparkSession, kafka: KafkaSettings, topics: list[str], kind: str) -> DataFrame:
    return (spark.readStream.format(KAFKA_SOURCE_NAME)
            .option("bootstrapServers", kafka.bootstrap_servers).option("topics", ",".join(topics))
            .option("kind", kind).option("startingOffsets", kafka.starting_offsets)
            .option("clientConfig", json.dumps(kafka.client_config()))
            .option("maxRowsPerBatch", str(kafka.max_rows_per_batch or ""))
            .option("idleFlush", "true" if kafka.idle_flush else "false").load())


def live_query(spark: SparkSession, settings: MonitorSettings, source: str) -> DataFrame:
    """Outputs of the live query over Kafka topics (`source`: "python" or "spark")."""
    kafka = settings.kafka
    raw_of = _spark_kafka_raw if source == "spark" else _python_kafka_raw
    parts = []
    if kafka.log_topics:
        spec = LogSourceSpec(settings.cluster, settings.broker_timezone, None, settings.log_envelope,
                             settings.broker_id_field)
        events = log_events(raw_of(spark, kafka, kafka.log_topics, KIND_LOG), {},
                            settings.unknown_lines_sample_per_logger, default_spec=spec)
        parts.append(with_watermark(observed(events, KIND_LOG), settings.lateness_seconds))
    if kafka.offsets_topic:
        events = offsets_events(raw_of(spark, kafka, [kafka.offsets_topic], KIND_OFFSETS),
                                ClusterNames({}, settings.cluster))
        parts.append(with_watermark(observed(events, KIND_OFFSETS), settings.lateness_seconds))
    return group_state_machine(reduce(DataFrame.unionByName, parts), settings.group_allow,
                               settings.group_deny, settings.diagnosis.to_settings())
