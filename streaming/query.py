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
from state.events import END_OF_INPUT
from streaming.config import ConfigError, KafkaSettings, LogInput, MonitorSettings, OffsetsInput
from streaming.kafka_source import KAFKA_SOURCE_NAME, KIND_LOG, KIND_OFFSETS
from streaming.parse import QUARANTINE_KIND, LogSourceSpec, log_rows_to_events, offsets_rows_to_events
from streaming.replay_source import LOG_SOURCE_NAME, OFFSETS_SOURCE_NAME, file_source_id
from streaming.schema import EVENT_SCHEMA, OUTPUT_SCHEMA, STATE_SCHEMA
from streaming.stateful import process_group


def coordinator_line_filter(line_col: str = "line"):
    """JVM-side filter: only lines that can be group-coordinator lines reach Python."""
    col = F.col(line_col)
    return reduce(lambda a, b: a | b, [col.contains(marker) for marker in COORDINATOR_LOGGER_MARKERS])


def log_events(raw: DataFrame, specs: dict[str, LogSourceSpec],
               default_spec: Optional[LogSourceSpec] = None) -> DataFrame:
    kept = raw.where(F.col("eof") | coordinator_line_filter())
    return kept.mapInPandas(partial(log_rows_to_events, specs=specs, default_spec=default_spec),
                            EVENT_SCHEMA)


def offsets_events(raw: DataFrame, clusters: dict[str, str], default_cluster: str = "default") -> DataFrame:
    return raw.mapInPandas(partial(offsets_rows_to_events, clusters=clusters, default_cluster=default_cluster),
                           EVENT_SCHEMA)


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
                        group_deny: Optional[list[str]] = None) -> DataFrame:
    # No filter before the stateful step: Spark's optimizer pushes a filter on `group` below the
    # watermark operator, and the rows it removes (end-of-input markers, denied groups) would
    # no longer move their source's event time. process_group skips them instead.
    function = process_group
    if group_allow or group_deny:
        function = partial(process_group, group_allow=tuple(group_allow or ()),
                           group_deny=tuple(group_deny or ()))
    return (events.groupBy("cluster", "group")
            .applyInPandasWithState(function, OUTPUT_SCHEMA, STATE_SCHEMA, "append",
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
        parts.append(with_watermark(observed(log_events(raw, specs), "broker_log"), settings.lateness_seconds))
    if offsets:
        files = [{"path": i.path, "source_id": file_source_id(i.cluster, i.path)} for i in offsets]
        clusters = {f["source_id"]: i.cluster for f, i in zip(files, offsets)}
        raw = (spark.readStream.format(OFFSETS_SOURCE_NAME).option("files", json.dumps(files))
               .option("maxRowsPerBatch", offsets_rows).load())
        parts.append(with_watermark(observed(offsets_events(raw, clusters), "offsets"), settings.lateness_seconds))
    return group_state_machine(reduce(DataFrame.unionByName, parts))


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
                          F.lit(False).alias("eof"))
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
        spec = LogSourceSpec(settings.cluster, settings.broker_timezone, None)
        events = log_events(raw_of(spark, kafka, kafka.log_topics, KIND_LOG), {}, default_spec=spec)
        parts.append(with_watermark(observed(events, KIND_LOG), settings.lateness_seconds))
    if kafka.offsets_topic:
        events = offsets_events(raw_of(spark, kafka, [kafka.offsets_topic], KIND_OFFSETS), {},
                                default_cluster=settings.cluster)
        parts.append(with_watermark(observed(events, KIND_OFFSETS), settings.lateness_seconds))
    return group_state_machine(reduce(DataFrame.unionByName, parts), settings.group_allow,
                               settings.group_deny)
