"""The streaming query: sources -> parse/decode -> watermark per source -> union -> per-group
state machine. Replay (files) and live (Kafka topics) differ only in their sources. Output rows
(OUTPUT_SCHEMA) carry a `kind` column (state.outputs.OutputKind); the driver fans them out."""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from state.diagnosis.rules import DEFAULT_SETTINGS, DiagnosisSettings
from streaming.defaults import LATENESS_SECONDS, REPLAY_MAX_ROWS_PER_BATCH, STATE_BUCKETS
from state.vocabulary import SOURCE_KIND_LOG, SOURCE_KIND_OFFSETS
from streaming.inputs import file_source_ids
from streaming.logs.step import DEFAULT_UNKNOWN_SAMPLE, LogSourceSpec
from streaming.offsets.reader import offsets_input_kind
from streaming.offsets.per_record import ClusterNames
from streaming.spark.sources.clock import CLOCK_SOURCE_NAME
from streaming.spark.sources.kafka import KAFKA_SOURCE_NAME
from streaming.spark.replay_stage import EVENT_SOURCE, StagedKind, read_events_by_kind, stage_events
from streaming.spark.sources.staged import STAGED_SOURCE_NAME
from streaming.spark.state_layout import state_buckets_for
from streaming.spark.steps import group_state_machine, log_events, observed, offsets_events, with_watermark


@dataclass(frozen=True)
class QueryOptions:
    """What the query takes from a command's settings (streaming/app/settings/wiring.py builds it;
    the defaults are the settings' own, streaming/app/settings/schema.py)."""
    lateness_seconds: float = LATENESS_SECONDS
    max_rows_per_batch: int = REPLAY_MAX_ROWS_PER_BATCH   # replay: event rows per micro-batch (a time slice)
    unknown_lines_sample_per_logger: int = DEFAULT_UNKNOWN_SAMPLE
    diagnosis: DiagnosisSettings = DEFAULT_SETTINGS
    group_allow: tuple[str, ...] = ()
    group_deny: tuple[str, ...] = ()
    live_view: bool = True      # snapshots apply the still-held events (state/live_view.py)
    committed_offsets: bool = False     # run, replay --end-offsets: commits to the driver (state/lag.py)
    # Groups per stateful key: PySpark's fixed cost per call (about 1 ms) is paid per bucket, and
    # a micro-batch makes at most this many calls per cluster (0: one key per group).
    state_buckets: int = STATE_BUCKETS

    def for_checkpoint(self, query_checkpoint: str) -> QueryOptions:
        """These options with the state layout an existing checkpoint was written with."""
        return replace(self, state_buckets=state_buckets_for(query_checkpoint, self.state_buckets))


@dataclass(frozen=True)
class LogFile:
    path: str
    spec: LogSourceSpec


@dataclass(frozen=True)
class OffsetsFile:
    path: str
    cluster: str = "default"


@dataclass(frozen=True)
class KafkaRead:
    """Where and how the live query reads Kafka (KafkaSettings, streaming/app/settings/wiring.py kafka_read)."""
    bootstrap_servers: str
    log_topics: tuple[str, ...] = ()
    offsets_topic: str | None = "__consumer_offsets"
    starting_offsets: str = "earliest"
    max_rows_per_batch: int | None = None
    idle_flush: bool = True
    idle_tick_seconds: float = 0.0      # markers of a source without new records: at most this often
    idle_tick_max_seconds: float = 0.0  # ... and with a plan, when nothing is due, this often (sources/markers.py)
    marker_plan: str | None = None      # the driver's plan file (sources/markers.py; None: a marker per slot)
    commit_hold_seconds: float = 0.0    # new offset commits alone wait up to this long (sources/kafka.py)
    catch_up_max_rows: int = 0          # a backlog above this is read in capped batches (0: at once)
    catch_up_batch_seconds: float = 0.0  # ... each sized to take about this long
    client_config: dict[str, Any] = field(default_factory=dict)   # kafka-python settings
    spark_options: dict[str, str] = field(default_factory=dict)   # Spark connector options


def replay_inputs(logs: list[LogFile], offsets: list[OffsetsFile]) -> tuple[list[dict], dict, list[dict], dict]:
    """(log files, their parse specs, offsets files, their clusters) of a replay, keyed by source id."""
    if not logs and not offsets:
        raise ValueError("replay needs at least one broker log or offsets input")
    source_ids = file_source_ids([(f.spec.cluster, f.path) for f in logs] + [(f.cluster, f.path) for f in offsets])
    log_files = [{"path": f.path, "source_id": sid, "tz": f.spec.broker_timezone, "envelope": f.spec.envelope}
                 for f, sid in zip(logs, source_ids)]
    specs = {sid: f.spec for f, sid in zip(logs, source_ids)}
    offsets_files = [{"path": f.path, "source_id": sid, "kind": offsets_input_kind(f.path)}
                     for f, sid in zip(offsets, source_ids[len(logs):])]
    clusters = {f["source_id"]: i.cluster for f, i in zip(offsets_files, offsets)}
    return log_files, specs, offsets_files, clusters


def stage_replay(spark: SparkSession, o: QueryOptions, logs: list[LogFile], offsets: list[OffsetsFile],
                 directory: str) -> list[StagedKind]:
    """The replay's first stage (streaming/spark/replay_stage.py): its files read, parsed and
    decoded by Spark's tasks, the event rows staged under `directory` in time slices."""
    log_files, specs, offsets_files, clusters = replay_inputs(logs, offsets)
    events = read_events_by_kind(spark, log_files, specs, offsets_files, clusters, o.unknown_lines_sample_per_logger)
    return stage_events(spark, events, directory, o.max_rows_per_batch)


def staged_events(spark: SparkSession, o: QueryOptions, staged: list[StagedKind]) -> DataFrame:
    """The second stage's event rows: each kind's slices as a stream, one slice per micro-batch,
    with its per-source figures and watermark (the stateful step's input; bench/scale's ceiling)."""
    parts = []
    for s in staged:
        events = (spark.readStream.format(STAGED_SOURCE_NAME).option("kind", s.kind)
                  .option("eventSource", EVENT_SOURCE[s.kind]).option("slices", json.dumps(s.slices))
                  .option("rows", json.dumps(s.rows)).option("inputs", str(s.inputs))
                  .option("completeThrough", json.dumps(s.complete_through)).load())
        parts.append(with_watermark(observed(events, s.kind), o.lateness_seconds))
    return reduce(DataFrame.unionByName, parts)


def replay_query(spark: SparkSession, o: QueryOptions, staged: list[StagedKind]) -> DataFrame:
    """Outputs of a replay over its staged events (stage_replay)."""
    return group_state_machine(staged_events(spark, o, staged), diagnosis=o.diagnosis, live_view=o.live_view,
                               state_buckets=o.state_buckets, committed_offsets=o.committed_offsets)


# ---------------------------------------------------------------------------- live (Kafka)
SPARK_KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def spark_kafka_available(spark: SparkSession) -> bool:
    """Is Spark's built-in kafka source on the classpath (spark.jars.packages, spark.jars)?

    Spark loads those jars into its own class loader, the context class loader of the driver's
    threads; Class.forName(name) alone looks in the JVM's application class loader and never
    sees them."""
    jvm = spark.sparkContext._jvm
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()  # type: ignore[union-attr]
        jvm.java.lang.Class.forName(SPARK_KAFKA_PROVIDER, False, loader)  # type: ignore[union-attr]
        return True
    except Exception:
        return False


# The connector's Admin-based offset fetching skips internal topics (connector.py says how).
DEPRECATED_OFFSET_FETCHING = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"


def _spark_kafka_raw(spark: SparkSession, kafka: KafkaRead, topics: list[str], kind: str) -> DataFrame:
    from streaming.spark.connector import topic_partitions
    spark.conf.set(DEPRECATED_OFFSET_FETCHING, "true")
    partitions = topic_partitions(spark, kafka.bootstrap_servers, kafka.spark_options, topics)
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("assign", json.dumps(partitions))
              .option("startingOffsets", kafka.starting_offsets)
              .option("failOnDataLoss", "false"))   # compaction/retention gaps are counted, not fatal
    # A fixed cap (no markers then), or the catch-up cap with markers held while a batch leaves
    # records behind (sources/clock.py; only with the driver's plan, which says when it does not).
    catch_up = 0 if kafka.max_rows_per_batch or not kafka.marker_plan else kafka.catch_up_max_rows
    if kafka.max_rows_per_batch or catch_up:
        reader = reader.option("maxOffsetsPerTrigger", str(kafka.max_rows_per_batch or catch_up))
    if kind == SOURCE_KIND_OFFSETS:
        reader = reader.option("kafka.isolation.level", "read_committed")
    for key, value in kafka.spark_options.items():
        reader = reader.option(key, value)
    raw = connector_rows_to_raw(reader.load(), kind, tasks=spark.sparkContext.defaultParallelism)
    if kafka.idle_flush and not kafka.max_rows_per_batch:   # sources/clock.py says why not with a cap
        clock = spark.readStream.format(CLOCK_SOURCE_NAME).option("kind", kind)
        raw = raw.unionByName(_marker_options(clock.option("holdWhileBehind", "true" if catch_up else "false"),
                                              kafka).load())
    return raw


def connector_rows_to_raw(raw: DataFrame, kind: str, tasks: int | None = None) -> DataFrame:
    """Spark kafka connector rows (key, value, topic, partition, offset, timestamp) -> the raw
    schemas the Python sources produce, so both paths feed the same query.

    `tasks`: the connector reads each topic partition in a task of its own, and each task then
    starts the Python decode or parse step on its few records: 50 of them a micro-batch for the
    offsets topic alone. Coalesced to `tasks` (one per core), a task reads several partitions in
    the JVM and calls Python once (docs/benchmarks.md, "The connector's tasks")."""
    if tasks:
        raw = raw.coalesce(tasks)
    source_id = F.concat(F.col("topic"), F.lit("-"), F.col("partition").cast("string"))
    if kind == SOURCE_KIND_OFFSETS:
        return raw.select(source_id.alias("source_id"), F.col("offset").alias("seq"), F.col("partition"),
                          F.col("offset"), F.unix_millis(F.col("timestamp")).alias("timestamp_ms"),
                          F.col("key"), F.col("value"), F.lit(None).cast("string").alias("error"),
                          F.lit(False).alias("eof"), F.lit(None).cast("string").alias("error_reason"))
    return raw.select(source_id.alias("source_id"), F.col("offset").alias("seq"),
                      F.col("value").cast("string").alias("line"),
                      F.unix_millis(F.col("timestamp")).alias("ts_hint_ms"), F.lit(False).alias("eof"))


def _python_kafka_raw(spark: SparkSession, kafka: KafkaRead, topics: list[str], kind: str) -> DataFrame:
    reader = (spark.readStream.format(KAFKA_SOURCE_NAME)
              .option("bootstrapServers", kafka.bootstrap_servers).option("topics", ",".join(topics))
              .option("kind", kind).option("startingOffsets", kafka.starting_offsets)
              .option("clientConfig", json.dumps(kafka.client_config))
              .option("maxRowsPerBatch", str(kafka.max_rows_per_batch or ""))
              # One read task per core: more only adds per-task cost (sources/kafka.py).
              .option("readTasks", str(spark.sparkContext.defaultParallelism))
              .option("idleFlush", "true" if kafka.idle_flush else "false")
              .option("commitHoldMs", str(int(kafka.commit_hold_seconds * 1000)))
              .option("catchUpMaxRows", str(kafka.catch_up_max_rows))
              .option("catchUpBatchMs", str(int(kafka.catch_up_batch_seconds * 1000))))
    return _marker_options(reader, kafka).load()


def _marker_options(reader: Any, kafka: KafkaRead) -> Any:
    """When a caught-up source adds a marker (sources/markers.py)."""
    reader = (reader.option("idleTickMs", str(int(kafka.idle_tick_seconds * 1000)))
              .option("maxIdleMs", str(int(kafka.idle_tick_max_seconds * 1000))))
    return reader.option("markerPlan", kafka.marker_plan) if kafka.marker_plan else reader


def live_query(spark: SparkSession, o: QueryOptions, kafka: KafkaRead, spec: LogSourceSpec, source: str) -> DataFrame:
    """Outputs of the live query over Kafka topics (`source`: "python" or "spark"); `spec` says
    how to read the log topic's lines (its cluster is the cluster of every record)."""
    raw_of = _spark_kafka_raw if source == "spark" else _python_kafka_raw
    parts = []
    if kafka.log_topics:
        events = log_events(raw_of(spark, kafka, list(kafka.log_topics), SOURCE_KIND_LOG), {},
                            o.unknown_lines_sample_per_logger, default_spec=spec)
        parts.append(with_watermark(observed(events, SOURCE_KIND_LOG), o.lateness_seconds))
    if kafka.offsets_topic:
        events = offsets_events(raw_of(spark, kafka, [kafka.offsets_topic], SOURCE_KIND_OFFSETS),
                                ClusterNames({}, spec.cluster))
        parts.append(with_watermark(observed(events, SOURCE_KIND_OFFSETS), o.lateness_seconds))
    return group_state_machine(reduce(DataFrame.unionByName, parts), o.group_allow, o.group_deny, o.diagnosis,
                               state_buckets=o.state_buckets, committed_offsets=o.committed_offsets)
