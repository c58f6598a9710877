"""`rebalance-monitor run`: the long-running service over Kafka topics.

- checks the topics at start with the client of the source that will read them (kafka-python,
  or the connector's own Kafka client in Spark's JVM): a missing topic is a clear error (exit 2),
  so is a refused login or certificate (one line naming the settings to check); an unreachable
  broker is retried with backoff (logged, and source_up=0 on /metrics) instead of a crash loop;
- serves /metrics from the start, with counters rebuilt from the event sink, then restores the
  group gauges from the checkpoint's state file (rebalance_monitor_restoring_groups 1 meanwhile),
  then runs the query;
- restarts a failed query from its checkpoint with backoff (rebalance_monitor_query_restarts_total);
- waits out a full disk under the event sink or the checkpoint (sinks/disk_full.py): the collector
  retries its own writes inside the uncommitted batch; a query that Spark's checkpoint writes
  stopped is restarted every DISK_FULL_RETRY_SECONDS. One log line when it starts, one when it ends.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from sinks.disk_full import CHECKPOINT, SINK, DiskWatch, disk_full_text
from sinks.event_sink import EventSink
from sinks.files import GroupStateFile, StateFileError
from sinks.metrics import MetricsSink
from state.lag import LagBook
from state.rebalance_cost import RebalanceCosts
from state.model import DEAD
from streaming.app.batch_gate import StopGate
from streaming.app.collector import RunCollector
from streaming.app.restart import restore_groups, restore_sink
from streaming.app.lag_sampler import KafkaEndOffsets, LagSampler
from streaming.app.serving import serve_metrics
from streaming.app.settings import ConfigError, KafkaSettings, RunSettings, StartupError
from streaming.app.settings.wiring import (
    client_config,
    diagnosis_settings,
    kafka_read,
    log_spec,
    metrics_sink_options,
    query_options,
)
from state.vocabulary import SOURCE_KIND_LOG, SOURCE_KIND_OFFSETS
from streaming.rows import loads_json
from streaming.spark.sources.kafka import TopicsMissing, check_topics
from streaming.spark.sources.kafka_login import KafkaLoginFailed

LOG = logging.getLogger("rebalance_monitor.run")
MAX_RESTART_BACKOFF_S = 60.0
STOP_DRAIN_TIMEOUT_S = 30.0     # longest wait for a running micro-batch at stop
CHECK_TIMEOUT_S = 10.0
OFFSETS_TOPIC = "__consumer_offsets"
# (topics, stop) -> None when every topic exists, else why Kafka did not answer
TopicCheck = Callable[[list[str], threading.Event], "str | None"]


def login_error(exc: KafkaLoginFailed, kafka: KafkaSettings, source: str) -> str:
    """The one line for a refused login or certificate, with the settings that hold them."""
    if source == "spark":
        where = ('kafka.spark_options "kafka.sasl.jaas.config" (username, password) and "kafka.sasl.mechanism"'
                 if exc.kind == "sasl" else 'kafka.spark_options "kafka.ssl.truststore.location" (the brokers\' CA)')
    elif exc.kind == "tls":
        where = "kafka.client.ssl_cafile (the CA that signed the brokers' certificates)"
    else:
        secret = kafka.client_secret_files.get("sasl_plain_password")
        password = (f"the password in {secret} (kafka.client_secret_files.sasl_plain_password)" if secret
                    else "kafka.client.sasl_plain_password")
        where = f"kafka.client.sasl_plain_username, {password} and kafka.client.sasl_mechanism"
    return f"Kafka {exc}; check {where}"


def _check_client(kafka: KafkaSettings) -> dict[str, Any]:
    # kafka-python waits 30 s for a broker by default; an attempt gives up sooner, so that the
    # log says what is wrong early (kafka.client.bootstrap_timeout_ms overrides it).
    return {"bootstrap_timeout_ms": int(CHECK_TIMEOUT_S * 1000), **client_config(kafka)}


def _python_check(kafka: KafkaSettings) -> TopicCheck:
    client = _check_client(kafka)
    return lambda topics, stop: check_topics(kafka.bootstrap_servers, topics, client,
                                             timeout_s=CHECK_TIMEOUT_S, stop=stop)


def _wait_for_kafka(settings: RunSettings, metrics: MetricsSink, stop: threading.Event,
                    check: TopicCheck | None = None, source: str = "python") -> None:
    """Until Kafka answers with every topic: source_up 0 from the start, one log line per failed
    attempt with how long it took and when the next one starts."""
    kafka = settings.kafka
    check = check or _python_check(kafka)
    topics = list(kafka.log_topics) + ([kafka.offsets_topic] if kafka.offsets_topic else [])
    kinds = [SOURCE_KIND_LOG] if kafka.log_topics else []
    kinds += [SOURCE_KIND_OFFSETS] if kafka.offsets_topic else []
    for kind in kinds:
        metrics.health.source_up.labels(kind).set(0)
        metrics.health.offset_gaps.labels(kind).set(0)    # none known before the first read
    client = _check_client(kafka)
    LOG.info("run: checking Kafka at %s for %s (each attempt waits up to %.0f s for an answer)",
             kafka.bootstrap_servers, ", ".join(topics), client["bootstrap_timeout_ms"] / 1000)
    backoff, attempt = 1.0, 0
    while not stop.is_set():
        attempt += 1
        started = time.monotonic()
        try:
            problem = check(topics, stop)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        except KafkaLoginFailed as refused:
            raise StartupError(login_error(refused, kafka, source)) from None
        except TopicsMissing as missing:
            if missing.missing != [OFFSETS_TOPIC] or kafka.offsets_topic != OFFSETS_TOPIC:
                raise ConfigError(f"kafka: {missing}") from None
            # Kafka creates its offsets topic when the first consumer group needs a coordinator.
            problem = f"{OFFSETS_TOPIC} does not exist yet (no consumer group has used this cluster)"
        if stop.is_set():
            return
        if problem is None:
            for kind in kinds:
                metrics.health.source_up.labels(kind).set(1)
            LOG.info("run: Kafka at %s answered; every topic exists", kafka.bootstrap_servers)
            return
        LOG.warning("run: %s (attempt %d, %.1f s); next attempt in %.0f s", problem, attempt,
                    time.monotonic() - started, backoff)
        metrics.health.source_errors.labels("kafka").inc()
        stop.wait(backoff)
        backoff = min(MAX_RESTART_BACKOFF_S, backoff * 2)


def build_collector(settings: RunSettings, metrics: MetricsSink, disk: DiskWatch | None = None) -> RunCollector:
    """`run`'s collector as it serves /metrics first: its counters and histograms back from the
    event sink; its groups come next (restore_groups_or_fail)."""
    state_file = GroupStateFile(os.path.join(settings.checkpoint_location, "rebalance-monitor", "groups.json"),
                                parse=loads_json)
    sink = (EventSink(settings.events_dir, settings.events_retention_days, settings.events_max_bytes)
            if settings.events_dir else None)
    collector = RunCollector(metrics, keep_records=False, event_sink=sink,
                             state_file=state_file, disk=disk).configure(diagnosis_settings(settings.diagnosis))
    kafka = settings.kafka
    collector.topic_kinds = {**dict.fromkeys(kafka.log_topics, SOURCE_KIND_LOG),
                             **({kafka.offsets_topic: SOURCE_KIND_OFFSETS} if kafka.offsets_topic else {})}
    try:
        state_file.check_version()      # a newer release's file: refused before /metrics is served
    except StateFileError as exc:
        raise ConfigError(f"checkpoint_location: {exc}") from None
    restore_sink(collector)
    metrics.health.restoring_groups.set(1)  # until restore_groups_or_fail
    return collector


def restore_groups_or_fail(collector: RunCollector) -> None:
    """The state file's groups into a collector whose /metrics is already served (restart.py):
    an unreadable file is a start-up error naming the setting."""
    started = time.monotonic()
    try:
        restore_groups(collector)
    except StateFileError as exc:
        raise ConfigError(f"checkpoint_location: {exc}") from None
    if collector.snapshots:
        LOG.info("run: %d groups restored from the state file in %.1f s", len(collector.snapshots),
                 time.monotonic() - started)


def choose_kafka_source(spark_kafka_available: bool, kafka: KafkaSettings,
                        package: str = "org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>") -> str:
    """"spark" (the built-in connector) or "python" (the kafka-python Data Source)."""
    if kafka.source == "spark" and not spark_kafka_available:
        raise ConfigError(f"kafka.source: \"spark\" needs Spark's kafka connector on the classpath: "
                          f"spark_conf = {{\"spark.jars.packages\" = \"{package}\"}} (or spark-submit "
                          f"--packages {package}; docs/configuration.md)")
    if kafka.source == "auto":
        return "spark" if spark_kafka_available else "python"
    return kafka.source


def _start_query(outputs: Any, settings: RunSettings, collector: RunCollector) -> Any:
    """The live query started on its outputs; a started query may be behind (MarkerPlanner.query_started)."""
    collector.markers.query_started()
    return (outputs.writeStream
            .foreachBatch(collector.foreach_batch)
            .option("checkpointLocation", os.path.join(settings.checkpoint_location, "query"))
            .trigger(processingTime=f"{settings.trigger_interval_seconds} seconds")
            .queryName("rebalance-monitor").start())


def _stop_query(query: Any, gate: StopGate | None = None, drain_timeout_s: float = STOP_DRAIN_TIMEOUT_S) -> None:
    """Stop the query between two foreachBatch calls (collector.StopGate): wait (up to
    `drain_timeout_s`) for the running one to finish, then stop; a batch that reaches
    foreachBatch after that fails uncommitted and runs again at the next start."""
    from streaming.spark.session import quiet_streaming_errors
    quiet_streaming_errors()
    if gate is not None and not gate.close(drain_timeout_s):
        LOG.warning("run: a micro-batch still ran %.0f s after the stop request; stopping it", drain_timeout_s)
    try:
        query.stop()
    except Exception as exc:
        # A SIGTERM sent to the process group reaches Spark's JVM too, which may be gone already:
        # the checkpoint holds every committed batch, so there is nothing left to stop.
        LOG.warning("run: Spark had already stopped (%s); the checkpoint has every committed batch",
                    type(exc).__name__)


def disk_watch(settings: RunSettings, metrics: MetricsSink) -> DiskWatch:
    """The full-disk episodes of `run`'s two places, named by their configured directories."""
    return DiskWatch(metrics.health, {SINK: settings.events_dir or "events_dir",
                                      CHECKPOINT: settings.checkpoint_location})


def _query_failed(failure: Any, disk: DiskWatch, last_batch_id: int) -> float | None:
    """A query stopped by `failure`: when Spark's own writes (its checkpoint) found the disk full,
    that episode is noted (one line, the gauge) and the wait before the next start is returned;
    None for any other failure."""
    words = disk_full_text(str(failure))
    if words is None:
        return None
    disk.failed(CHECKPOINT, words, last_batch_id + 1,
                f"Spark's checkpoint writes failed (or those in spark.local.dir); batch {last_batch_id + 1} "
                f"is not committed (nothing is lost); /metrics keeps serving; restarting the query from its "
                f"checkpoint every {disk.retry_seconds:g} s")
    return disk.retry_seconds


def _note_checkpoint_settings(settings: RunSettings) -> None:
    """Say at start which settings an existing checkpoint overrides (Spark keeps its own)."""
    from streaming.spark.session import state_store_conf
    from streaming.spark.state_layout import shuffle_partitions_note, state_store_note
    query_checkpoint = os.path.join(settings.checkpoint_location, "query")
    for note in (shuffle_partitions_note(query_checkpoint, settings.shuffle_partitions),
                 state_store_note(query_checkpoint, {**state_store_conf(settings.state_store), **settings.spark_conf})):
        if note is not None:
            LOG.warning("run: %s", note)


def start_lag_sampler(settings: RunSettings, metrics: MetricsSink, collector: RunCollector,
                      stop: threading.Event) -> LagSampler | None:
    """Consumer lag (state/lag.py): the collector notes the groups' commits, a thread of its own
    samples the end offsets (streaming/app/lag_sampler.py). None without the offsets topic."""
    kafka = settings.kafka
    if not kafka.offsets_topic:
        return None
    book = LagBook(settings.lag.sample_seconds, read_cluster=settings.cluster)
    errors = metrics.attach_lag(book, settings.cluster)
    metrics.lag.at_risk_fraction = settings.lag.at_risk_fraction
    metrics.lag.partition_groups = re.compile(settings.lag.partition_groups) if settings.lag.partition_groups else None
    collector.lag = book
    collector.costs = RebalanceCosts(settings.lag.sample_seconds, settings.lag.catch_up_deadline_seconds)
    source = KafkaEndOffsets(kafka.bootstrap_servers, client_config(kafka), settings.lag.sample_seconds)
    sampler = LagSampler(book, settings.cluster, source,
                         count_error=lambda reason, n: errors.labels(settings.cluster, reason).inc(n),
                         groups=lambda: [(s["cluster"], s["group"]) for s in metrics.groups.snapshots()
                                         if s.get("state") != DEAD])
    sampler.start(stop)
    LOG.info("run: sampling the end offsets of the groups' partitions every %g s for their lag",
             settings.lag.sample_seconds)
    return sampler


def run(settings: RunSettings, stop: threading.Event | None = None,
        metrics: MetricsSink | None = None) -> int:
    stop = stop or threading.Event()
    metrics = metrics or MetricsSink(settings.duration_buckets, **metrics_sink_options(settings))
    # Counters come back from the event sink before /metrics is served, the groups' gauges from
    # the state file (which grows with the groups) while it is (unreadable: a start-up error).
    collector = build_collector(settings, metrics, disk := disk_watch(settings, metrics))
    server = serve_metrics(settings, metrics.registry)
    LOG.info("run: serving http://%s:%d/metrics", settings.metrics_host, server.server_port)
    kafka, plans, lag_stop = settings.kafka, None, threading.Event()
    try:
        restore_groups_or_fail(collector)
        # The quiet sources' marker plan (sources/markers.py): a file on the driver's host, where
        # the sources plan their offsets; not in the checkpoint, which may be remote.
        if kafka.idle_markers and kafka.idle_tick_max_seconds:
            plans = tempfile.mkdtemp(prefix="rebalance-monitor-markers-")
            collector.markers.path = os.path.join(plans, "plan.json")
            collector.markers.lateness_ms = int(settings.lateness_seconds * 1000)
            collector.markers.plan()
        read = dataclasses.replace(kafka_read(kafka), marker_plan=collector.markers.path)
        if kafka.source != "spark":
            # kafka-python reads (python) or may read (auto): check with it before Spark starts.
            _wait_for_kafka(settings, metrics, stop)
            if stop.is_set():     # stopped before Kafka answered: no Spark session to start
                return 0
        start_lag_sampler(settings, metrics, collector, lag_stop)
        from streaming.spark.connector import check_topics_connector, connector_package
        from streaming.spark.query import live_query, spark_kafka_available
        from streaming.spark.run import ProgressCounter
        from streaming.spark.session import get_spark, live_conf, state_store_conf
        spark = get_spark(settings.spark_master, settings.shuffle_partitions,
                          conf={**live_conf(settings.checkpoint_location, kafka.idle_markers),
                                **state_store_conf(settings.state_store), **settings.spark_conf},
                          driver_memory=settings.driver_memory)
        source = choose_kafka_source(spark_kafka_available(spark), kafka, connector_package(spark))
        LOG.warning("run: reading Kafka with the %s source (%s)", source,
                    "Spark's built-in kafka connector" if source == "spark" else "kafka-python Data Source")
        if source == "spark":     # the connector's own client and options
            _wait_for_kafka(settings, metrics, stop, source="spark", check=lambda topics, stop: check_topics_connector(
                spark, kafka.bootstrap_servers, dict(kafka.spark_options), topics, stop=stop))
            if stop.is_set():
                return 0
        try:
            options = query_options(settings).for_checkpoint(os.path.join(settings.checkpoint_location, "query"))
        except ValueError as exc:
            raise ConfigError(f"checkpoint_location: {exc}") from None
        _note_checkpoint_settings(settings)
        spark.streams.addListener(counter := ProgressCounter(collector))
        from streaming.spark.warm_workers import warm_python_workers
        warm_python_workers(spark, spark.sparkContext.defaultParallelism)
        backoff = 1.0
        while not stop.is_set():
            try:
                query = _start_query(live_query(spark, options, read, log_spec(settings), source), settings, collector)
            except Exception as exc:   # e.g. Kafka gone while the connector's partitions are listed
                failure: Any = f"{type(exc).__name__}: {exc}"
            else:
                counter.watch(query)
                while query.isActive and not stop.is_set():
                    stop.wait(1.0)
                    metrics.sweep()
                if stop.is_set():
                    _stop_query(query, collector.gate)
                    break
                failure = query.exception()
            metrics.health.query_restarts.inc()
            # a full disk: said once per episode, retried at a steady pace (not a crash loop)
            if (wait := _query_failed(failure, disk, collector.last_batch_id)) is not None:
                stop.wait(wait)
                continue
            LOG.error("run: streaming query stopped: %s; restarting from the checkpoint in %.0f s",
                      failure, backoff)
            stop.wait(backoff)
            backoff = min(MAX_RESTART_BACKOFF_S, backoff * 2)
        return 0
    finally:
        lag_stop.set()
        server.shutdown()
        if plans is not None:
            shutil.rmtree(plans, ignore_errors=True)
