"""`rebalance-monitor run`: the long-running service over Kafka topics.

- checks the topics at start: a missing topic is a clear error (exit 2); an unreachable broker
  is retried with backoff (logged, and source_up=0 on /metrics) instead of a crash loop;
- serves /metrics from the start, with group gauges restored from the checkpoint's state file
  and counters rebuilt from the event sink, then runs the query;
- restarts a failed query from its checkpoint with backoff (rebalance_monitor_query_restarts_total).
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Any

from sinks.exposition import serve
from sinks.files import EventSink, GroupStateFile
from sinks.metrics import MetricsSink
from streaming.app.collector import RunCollector
from streaming.app.settings import ConfigError, KafkaSettings, RunSettings
from streaming.inputs import SOURCE_KIND_LOG, SOURCE_KIND_OFFSETS
from streaming.spark.sources.kafka import TopicsMissing, check_topics

LOG = logging.getLogger("rebalance_monitor.run")
MAX_RESTART_BACKOFF_S = 60.0
OFFSETS_TOPIC = "__consumer_offsets"


def _wait_for_kafka(settings: RunSettings, metrics: MetricsSink, stop: threading.Event) -> None:
    kafka = settings.kafka
    topics = list(kafka.log_topics) + ([kafka.offsets_topic] if kafka.offsets_topic else [])
    backoff = 1.0
    while not stop.is_set():
        try:
            problem = check_topics(kafka.bootstrap_servers, topics, kafka.client_config(), stop=stop)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        except TopicsMissing as missing:
            if missing.missing != [OFFSETS_TOPIC] or kafka.offsets_topic != OFFSETS_TOPIC:
                raise ConfigError(f"kafka: {missing}") from None
            # Kafka creates its offsets topic when the first consumer group needs a coordinator.
            problem = f"{OFFSETS_TOPIC} does not exist yet (no consumer group has used this cluster)"
        if stop.is_set():
            return
        if problem is None:
            kinds = [SOURCE_KIND_LOG] if kafka.log_topics else []
            kinds += [SOURCE_KIND_OFFSETS] if kafka.offsets_topic else []
            for kind in kinds:
                metrics.health.source_up.labels(kind).set(1)
            return
        LOG.warning("run: %s; retrying in %.0f s", problem, backoff)
        for kind in (SOURCE_KIND_LOG, SOURCE_KIND_OFFSETS):
            metrics.health.source_up.labels(kind).set(0)
        metrics.health.source_errors.labels("kafka").inc()
        stop.wait(backoff)
        backoff = min(MAX_RESTART_BACKOFF_S, backoff * 2)


def build_collector(settings: RunSettings, metrics: MetricsSink) -> RunCollector:
    state_file = GroupStateFile(os.path.join(settings.checkpoint_location, "rebalance-monitor", "groups.json"))
    sink = EventSink(settings.events_dir) if settings.events_dir else None
    collector = RunCollector(metrics, keep_records=False, event_sink=sink,
                             state_file=state_file).configure(settings.diagnosis.to_settings())
    collector.restore()
    return collector


def choose_kafka_source(spark_kafka_available: bool, kafka: KafkaSettings) -> str:
    """"spark" (the built-in connector) or "python" (the kafka-python Data Source)."""
    if kafka.source == "spark" and not spark_kafka_available:
        raise ConfigError("kafka.source: \"spark\" needs Spark's kafka connector on the classpath "
                          "(spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>)")
    if kafka.source == "auto":
        return "spark" if spark_kafka_available else "python"
    return kafka.source


def _stop_query(query: Any) -> None:
    try:
        query.stop()
    except Exception as exc:
        # A SIGTERM sent to the process group reaches Spark's JVM too, which may be gone already:
        # the checkpoint holds every committed batch, so there is nothing left to stop.
        LOG.warning("run: Spark had already stopped (%s); the checkpoint has every committed batch",
                    type(exc).__name__)


def run(settings: RunSettings, stop: threading.Event | None = None,
        metrics: MetricsSink | None = None) -> int:
    stop = stop or threading.Event()
    metrics = metrics or MetricsSink(settings.duration_buckets, **settings.metrics_sink_options())
    server, _ = serve(metrics.registry, settings.metrics_host, settings.metrics_port)
    LOG.info("run: serving http://%s:%d/metrics", settings.metrics_host, server.server_port)
    collector = build_collector(settings, metrics)
    try:
        _wait_for_kafka(settings, metrics, stop)
        if stop.is_set():     # stopped before Kafka answered: no Spark session to start
            return 0
        from streaming.spark.query import live_query, spark_kafka_available
        from streaming.spark.run import ProgressCounter
        from streaming.spark.session import get_spark
        spark = get_spark(settings.spark_master, settings.shuffle_partitions, driver_memory=settings.driver_memory)
        source = choose_kafka_source(spark_kafka_available(spark), settings.kafka)
        LOG.warning("run: reading Kafka with the %s source (%s)", source,
                    "Spark's built-in kafka connector" if source == "spark" else "kafka-python Data Source")
        counter = ProgressCounter(collector)
        spark.streams.addListener(counter)
        backoff = 1.0
        while not stop.is_set():
            outputs = live_query(spark, settings.query_options(), settings.kafka.read(), settings.log_spec(), source)
            query = (outputs.writeStream
                     .foreachBatch(collector.foreach_batch)
                     .option("checkpointLocation", os.path.join(settings.checkpoint_location, "query"))
                     .trigger(processingTime=f"{settings.trigger_interval_seconds} seconds")
                     .queryName("rebalance-monitor").start())
            counter.watch(query)
            while query.isActive and not stop.is_set():
                stop.wait(1.0)
                metrics.sweep()
            if stop.is_set():
                _stop_query(query)
                break
            failure = query.exception()
            LOG.error("run: streaming query stopped: %s; restarting from the checkpoint in %.0f s",
                      failure, backoff)
            metrics.health.query_restarts.inc()
            stop.wait(backoff)
            backoff = min(MAX_RESTART_BACKOFF_S, backoff * 2)
        return 0
    finally:
        server.shutdown()
