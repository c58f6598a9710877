"""Live source: Kafka topics read with kafka-python, as a Python streaming Data Source.

Spark tracks the offsets (they are in the checkpoint), so a restarted query reads exactly the
ranges it had planned. A micro-batch reads its partition ranges in at most `readTasks` tasks
(balanced by record count), and each Python worker keeps its KafkaConsumer from one batch to the
next: a consumer per Kafka partition and batch cost a bootstrap connection and a metadata round
trip each, most of a quiet batch's time (docs/benchmarks.md, "Latency"). The rows have the
same shape as the replay sources (RAW_LOG_SCHEMA for a log topic, RAW_OFFSETS_SCHEMA for
`__consumer_offsets`), so the rest of the query does not know where rows come from.

Offsets (JSON) carry more than positions, because Spark's progress report echoes them and the
driver turns them into metrics:
  source   "broker_log" | "offsets"
  topics   {topic: {partition: next offset to read}}
  tick     wall-clock ms of a "caught up" marker, or null
  error    the last error talking to Kafka, or null (source is down while it is set)
  gap      records lost to retention/compaction before we read them (cumulative)

Idle flush: an event waits in state until its source's watermark passes it. A quiet topic would
hold it forever, so when every partition of the topic has been read to its end the reader adds a
marker row at the current wall-clock time. A source with a backlog (e.g. after a restart) never
ticks, so a tick can not make unread records late.

Commit holding (offsets topic, `commitHoldMs`): a caught-up source whose new records are all
offset commits (a quiet fleet's auto-commits) keeps its offset for up to `commitHoldMs`, so that
they start no micro-batch of their own: they come with the next batch that a marker due, the hold's
end or any other record starts. The live view does not wait on commits; a deadline that may need
them (a removal's poll-timeout evidence) is due in the driver's plan, and a due marker ends the hold
in the same batch. The reader looks at the new records' keys only (record type 0/1), at most
PEEK_MAX_RECORDS of them: a larger backlog is read at once.

Catching up (`catchUpMaxRows`, without a fixed `maxRowsPerBatch`): a backlog above the cap is read
in capped batches (catch_up.py); `behind` in the offset is what was left unread when the batch was
planned (the driver's backlog gauge and catch-up log line, sinks/health.py). A capped batch adds
no marker.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from state.vocabulary import SOURCE_KIND_LOG, SOURCE_KIND_OFFSETS
from streaming.offsets.records import is_offset_commit_key
from streaming.rows import RAW_LOG_ARROW_SCHEMA, RAW_OFFSETS_ARROW_SCHEMA
from streaming.spark.schema import RAW_LOG_SCHEMA, RAW_OFFSETS_SCHEMA
from streaming.spark.sources.base import arrow_batches
from streaming.spark.sources.catch_up import CatchUpBudget, proportional_takes
from streaming.spark.sources.kafka_login import KafkaLoginFailed, probe_login
from streaming.spark.sources.markers import marker_due, read_plan
from streaming.spark.worker_gc import freeze_worker_heap

KAFKA_SOURCE_NAME = "rebalance_kafka"
LOG = logging.getLogger("rebalance_monitor.kafka_source")
MAX_BACKOFF_S = 30.0
READ_TIMEOUT_S = 120.0
# Commit holding: the new records whose keys the source looks at before holding them, at most.
PEEK_MAX_RECORDS = 2_000
PEEK_TIMEOUT_S = 2.0


def _client_config(options: Mapping[str, str]) -> dict[str, Any]:
    config = json.loads(options.get("clientConfig") or "{}")
    config["bootstrap_servers"] = options["bootstrapServers"].split(",")
    return config


def _consumer(options: Mapping[str, str], **extra: Any) -> Any:
    from kafka import KafkaConsumer
    config = _client_config(options)
    config.update(enable_auto_commit=False, group_id=None, **extra)
    if options.get("kind") == SOURCE_KIND_OFFSETS:
        # Transactional offset commits count only once committed (aborted ones never).
        config.setdefault("isolation_level", "read_committed")
    return KafkaConsumer(**config)


def idle_tick_held(start: dict, topics: dict, now_ms: int, idle_tick_ms: int, plan: dict | None = None,
                   max_idle_ms: int = 0) -> bool:
    """Is a new caught-up marker not due yet: no new records since `start` (same positions) and no
    marker due (markers.marker_due: one per wall-clock slot of `idle_tick_ms`, and with the driver's
    plan only when a deadline waits for it)? Then the source returns `start` as its latest offset,
    and Spark, seeing no new data, runs no micro-batch for it (kafka.idle_tick_seconds). Slots, not
    the marker's age: every source of the query (the log topic, the offsets topic, the connector's
    clock) sees a slot end at the same trigger, so a quiet cluster gets one micro-batch per slot,
    not one per source."""
    return bool(idle_tick_ms) and not marker_due(start.get("tick"), now_ms, idle_tick_ms, plan, max_idle_ms) \
        and topics == (start.get("topics") or {})


def tick_row(kind: str, ts_ms: int) -> tuple:
    """The "caught up" marker at wall-clock `ts_ms`, a raw row of `kind` (eof = True)."""
    if kind == SOURCE_KIND_OFFSETS:
        return ("tick", 0, None, None, ts_ms, None, None, None, True, None)
    return ("tick", 0, None, ts_ms, True)


@dataclass
class KafkaRange(InputPartition):
    topic: str
    partition: int
    start: int
    end: int


@dataclass
class TickPartition(InputPartition):
    tick_ms: int


@dataclass
class KafkaTask(InputPartition):
    """What one task reads: ranges of several Kafka partitions, then the marker if any.
    `api_version`: the brokers' API version as the driver's consumer found it (kafka-python's
    `api_version`), so a worker's new consumer does not probe for it (_worker_consumer)."""
    ranges: list[KafkaRange]
    tick_ms: int | None = None
    api_version: tuple[int, ...] | None = None


def split_ranges(ranges: list[KafkaRange], tasks: int) -> list[list[KafkaRange]]:
    """At most `tasks` groups of ranges with about the same number of records (largest first,
    each to the group with the fewest so far); each group in topic/partition order."""
    groups: list[list[KafkaRange]] = [[] for _ in range(max(1, min(tasks, len(ranges))))]
    sizes = [0] * len(groups)
    for r in sorted(ranges, key=lambda r: (-(r.end - r.start), r.topic, r.partition)):
        i = sizes.index(min(sizes))
        groups[i].append(r)
        sizes[i] += r.end - r.start
    return [sorted(g, key=lambda r: (r.topic, r.partition)) for g in groups if g]


# KafkaConsumers of this Python worker, kept across tasks (Spark reuses its workers), by config.
_WORKER_CONSUMERS: dict[str, Any] = {}


def _worker_consumer(options: Mapping[str, str], api_version: tuple[int, ...] | None = None,
                     topics: Iterable[str] = ()) -> Any:
    """This worker's consumer for `options`. A new one is ready to fetch before its first poll: it
    takes the brokers' API version from the driver (its own probe is a round trip more) and asks
    for the topics' metadata at once (a first poll without it waited kafka-python's 100 ms retry
    backoff). A new worker's first read took 210 ms, now 15 ms on the test bed's broker: Spark
    ends a Python worker idle for a minute, so on a quiet cluster the first records after a quiet
    minute are read by new workers (docs/benchmarks.md)."""
    key = json.dumps([options.get("kind"), options.get("bootstrapServers"), options.get("clientConfig")])
    consumer = _WORKER_CONSUMERS.get(key)
    if consumer is None:
        extra: dict[str, Any] = {"max_poll_records": 5000}
        if api_version and "api_version" not in _client_config(options):
            extra["api_version"] = tuple(api_version)
        consumer = _WORKER_CONSUMERS[key] = _consumer(options, **extra)
        for topic in sorted(set(topics)):
            try:
                consumer.partitions_for_topic(topic)
            except Exception:      # the read itself says what is wrong
                break
    return consumer


def _drop_worker_consumers() -> None:
    """After a failed read: the next task starts with a new consumer."""
    consumers = list(_WORKER_CONSUMERS.values())
    _WORKER_CONSUMERS.clear()
    for consumer in consumers:
        try:
            consumer.close()
        except Exception:
            pass


def _records(consumer: Any, r: KafkaRange, timeout_s: float) -> Iterator[Any]:
    """The records of `r` (offsets start..end-1; compacted or transactional ranges may have
    fewer), read with `consumer`; TimeoutError when they do not all come within `timeout_s`."""
    from kafka import TopicPartition
    tp = TopicPartition(r.topic, r.partition)
    deadline = time.monotonic() + timeout_s
    consumer.assign([tp])
    consumer.seek(tp, r.start)
    position = r.start
    while position < r.end:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{r.topic}-{r.partition}: read {position - r.start} of "
                               f"{r.end - r.start} records in {timeout_s:.0f} s")
        batch = consumer.poll(timeout_ms=1000).get(tp, [])
        if not batch:
            # Compacted or transactional ranges end before `end` without records.
            if consumer.position(tp) >= r.end:
                break
            continue
        for rec in batch:
            if rec.offset >= r.end:
                return
            position = rec.offset + 1
            yield rec


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]):   # case-insensitive: keep it as given
        self.options = options
        self.kind = options.get("kind", SOURCE_KIND_LOG)
        self.topics = [t for t in options["topics"].split(",") if t]
        self.starting = options.get("startingOffsets", "earliest")
        self.max_rows = int(options["maxRowsPerBatch"]) if options.get("maxRowsPerBatch") else None
        self.idle_flush = options.get("idleFlush", "true") == "true"
        self.idle_tick_ms = int(options.get("idleTickMs") or 0)
        self.max_idle_ms = int(options.get("maxIdleMs") or 0)
        self.marker_plan = options.get("markerPlan") or None
        self.read_tasks = max(1, int(options.get("readTasks") or 2))
        self.commit_hold_ms = int(options.get("commitHoldMs") or 0) if self.kind == SOURCE_KIND_OFFSETS else 0
        self.catch_up = CatchUpBudget(int(options.get("catchUpMaxRows") or 0), int(options.get("catchUpBatchMs") or 0))
        self._consumer = None
        self._peek_consumer = None
        self._backoff = 0.0
        # Commit holding: when the held commits were first seen (wall ms), and the position up to
        # which each partition's new records are known to be commits only.
        self._held_since: int | None = None
        self._commits_to: dict[tuple[str, str], int] = {}

    # -------------------------------------------------------------- Kafka metadata
    def _meta_consumer(self):
        if self._consumer is None:
            self._consumer = _consumer(self.options, request_timeout_ms=15000)
        return self._consumer

    def _api_version(self) -> tuple[int, ...] | None:
        """The brokers' API version kafka-python found (None: not known)."""
        try:
            version = self._meta_consumer().config.get("api_version")
            return tuple(int(v) for v in version) if version else None
        except Exception:      # unreachable broker, or a form of it this does not know: let it probe
            return None

    def _partitions(self) -> list:
        from kafka import TopicPartition
        consumer = self._meta_consumer()
        tps = []
        for topic in self.topics:
            parts = consumer.partitions_for_topic(topic)
            if not parts:
                raise LookupError(f"topic {topic!r} does not exist")
            tps += [TopicPartition(topic, p) for p in sorted(parts)]
        return tps

    def _bounds(self) -> tuple[dict, dict]:
        tps = self._partitions()
        consumer = self._meta_consumer()
        return consumer.beginning_offsets(tps), consumer.end_offsets(tps)

    # -------------------------------------------------------------- offsets
    def initialOffset(self) -> dict:
        try:
            begins, ends = self._bounds()
        except Exception as exc:   # broker down at start: begin from nothing, retry later
            self._reset_client()
            return {"source": self.kind, "topics": {}, "tick": None, "gap": 0,
                    "error": f"{type(exc).__name__}: {exc}"}
        chosen = begins if self.starting == "earliest" else ends
        topics: dict[str, dict[str, int]] = {}
        for tp, offset in chosen.items():
            topics.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
        return {"source": self.kind, "topics": topics, "tick": None, "gap": 0, "error": None}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def _reset_client(self) -> None:
        for consumer in (self._consumer, self._peek_consumer):
            try:
                if consumer is not None:
                    consumer.close()
            except Exception:
                pass
        self._consumer = self._peek_consumer = None

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        try:
            begins, ends = self._bounds()
        except Exception as exc:
            # Broker unreachable or topic gone: keep the position, say so (the driver exports it),
            # and wait a little longer each time instead of hammering the broker.
            self._reset_client()
            self._backoff = min(MAX_BACKOFF_S, max(1.0, self._backoff * 2))
            LOG.warning("kafka source %s: %s; retrying in %.0f s", self.topics, exc, self._backoff)
            time.sleep(self._backoff)
            return {**start, "tick": None, "error": f"{type(exc).__name__}: {exc}"}
        self._backoff = 0.0
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        topics = {t: dict(p) for t, p in (start.get("topics") or {}).items()}
        gap = int(start.get("gap") or 0)
        backlog = {}
        for tp, begin in begins.items():
            parts = topics.setdefault(tp.topic, {})
            key = str(tp.partition)
            position = parts.get(key)
            if position is None:          # a partition added while we run: read it all
                position = int(begin)
            if position < begin:          # retention or compaction removed what we had not read
                gap += int(begin) - position
                position = int(begin)
            parts[key] = position
            backlog[(tp.topic, key)] = max(0, int(ends[tp]) - position)
        caught_up = True
        behind = 0
        catch_up = self.catch_up.next(sum(backlog.values()), int(time.time() * 1000)) if budget is None else 0
        share = None if budget is None else max(1, budget // max(1, len(backlog)))
        takes = proportional_takes(backlog, catch_up) if catch_up else {}
        for (topic, key), waiting in backlog.items():
            take = takes[(topic, key)] if catch_up else waiting if share is None else min(waiting, share)
            topics[topic][key] += take
            caught_up &= take == waiting
            behind += waiting - take
        tick = int(time.time() * 1000) if caught_up and self.idle_flush else None
        if tick is not None and gap == start.get("gap") and start.get("error") is None:
            plan = read_plan(self.marker_plan)
            if idle_tick_held(start, topics, tick, self.idle_tick_ms, plan, self.max_idle_ms):
                return start    # nothing new and no marker due: no micro-batch for this source
            if budget is None and self._commits_held(start, topics, tick, plan):
                return start    # only commits, and nothing waits for them yet
        self._held_since = None
        self._commits_to.clear()
        return {"source": self.kind, "topics": topics, "tick": tick, "gap": gap, "error": None, "behind": behind}

    # -------------------------------------------------------------- commit holding
    def _commits_held(self, start: dict, topics: dict, now_ms: int, plan: dict | None) -> bool:
        """Hold the new records (module doc, "Commit holding")? Only while they are all offset
        commits, no marker is due and the hold is younger than `commit_hold_ms`."""
        if not self.commit_hold_ms or marker_due(start.get("tick"), now_ms, self.idle_tick_ms, plan, self.max_idle_ms):
            return False
        if self._held_since is not None and now_ms - self._held_since >= self.commit_hold_ms:
            return False
        before = start.get("topics") or {}
        ranges = [KafkaRange(topic, int(key), max(int((before.get(topic) or {}).get(key, end)),
                                                  self._commits_to.get((topic, key), 0)), end)
                  for topic, parts in topics.items() for key, end in parts.items()]
        ranges = [r for r in ranges if r.end > r.start]
        if sum(r.end - r.start for r in ranges) > PEEK_MAX_RECORDS or not self._only_commits(ranges):
            return False
        for r in ranges:
            self._commits_to[(r.topic, str(r.partition))] = r.end
        if self._held_since is None:
            self._held_since = now_ms
        return True

    def _only_commits(self, ranges: list[KafkaRange]) -> bool:
        """Are all records of these ranges offset commits? False when a read fails (no hold)."""
        if not ranges:
            return True
        try:
            if self._peek_consumer is None:
                self._peek_consumer = _consumer(self.options, max_poll_records=PEEK_MAX_RECORDS,
                                                request_timeout_ms=15000)
            consumer = self._peek_consumer
            for r in ranges:
                for rec in _records(consumer, r, PEEK_TIMEOUT_S):
                    if not is_offset_commit_key(rec.key):
                        return False
            return True
        except Exception as exc:
            LOG.info("kafka source %s: not holding commits: %s", self.topics, exc)
            broken, self._peek_consumer = self._peek_consumer, None
            try:
                if broken is not None:
                    broken.close()
            except Exception:
                pass
            return False

    def partitions(self, start: dict, end: dict) -> list:
        ranges: list[KafkaRange] = []
        before = start.get("topics") or {}
        for topic, parts in (end.get("topics") or {}).items():
            for key, stop in parts.items():
                begin = (before.get(topic) or {}).get(key, stop)
                if stop > begin:
                    ranges.append(KafkaRange(topic, int(key), int(begin), int(stop)))
        tick = int(end["tick"]) if end.get("tick") and end.get("tick") != start.get("tick") else None
        version = self._api_version() if ranges else None
        tasks: list = [KafkaTask(group, api_version=version) for group in split_ranges(ranges, self.read_tasks)]
        if tick is not None:
            if tasks:
                tasks[0].tick_ms = tick
            else:
                tasks.append(KafkaTask([], tick))
        return tasks

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        """The task's rows as Arrow batches (sources/base.py arrow_batches)."""
        freeze_worker_heap()
        schema = RAW_OFFSETS_ARROW_SCHEMA if self.kind == SOURCE_KIND_OFFSETS else RAW_LOG_ARROW_SCHEMA
        yield from arrow_batches(self._read_rows(partition), schema)

    def _read_rows(self, partition) -> Iterator[tuple]:
        if isinstance(partition, TickPartition):       # planned by an older version (checkpoint)
            yield self._marker(partition.tick_ms)
            return
        task = partition if isinstance(partition, KafkaTask) else KafkaTask([partition])
        if task.ranges:
            try:
                # a task pickled before api_version existed reads the dataclass default (None)
                consumer = _worker_consumer(self.options, task.api_version, [r.topic for r in task.ranges])
                for r in task.ranges:
                    yield from self._read_range(consumer, r)
            except BaseException:
                _drop_worker_consumers()
                raise
        if task.tick_ms is not None:
            yield self._marker(task.tick_ms)

    def _marker(self, ts_ms: int) -> tuple:
        return tick_row(self.kind, ts_ms)

    def _read_range(self, consumer: Any, r: KafkaRange) -> Iterator[tuple]:
        source_id = f"{r.topic}-{r.partition}"
        for rec in _records(consumer, r, READ_TIMEOUT_S):
            yield self._row(source_id, rec)

    def _row(self, source_id: str, rec) -> tuple:
        if self.kind == SOURCE_KIND_OFFSETS:
            return (source_id, rec.offset, rec.partition, rec.offset, rec.timestamp,
                    rec.key, rec.value, None, False, None)
        line = rec.value.decode("utf-8", errors="replace") if rec.value is not None else None
        return (source_id, rec.offset, line, rec.timestamp, False)

    def commit(self, end: dict) -> None:
        pass

    def stop(self) -> None:
        self._reset_client()


class KafkaSource(DataSource):
    """options: bootstrapServers, topics (comma-separated), kind (broker_log|offsets),
    startingOffsets (earliest|latest), clientConfig (JSON kafka-python settings: TLS, SASL),
    maxRowsPerBatch (unset: no cap), idleFlush (true|false), idleTickMs (markers of a source
    without new records at most this often; 0: every micro-batch)."""

    @classmethod
    def name(cls) -> str:
        return KAFKA_SOURCE_NAME

    def schema(self):
        return RAW_OFFSETS_SCHEMA if self.options.get("kind") == SOURCE_KIND_OFFSETS else RAW_LOG_SCHEMA

    def streamReader(self, schema) -> DataSourceStreamReader:
        return KafkaStreamReader(self.options)


class _ClientKeeper:
    """A `kafka_client` factory for KafkaConsumer that keeps the clients it builds, so that they
    can be closed from another thread: a consumer whose constructor failed (kafka-python leaves
    its IO thread running then) or is still blocked in its bootstrap (closing fails the wait);
    and the login probe's socket."""

    def __init__(self):
        from kafka import KafkaConsumer
        self._make = KafkaConsumer.DEFAULT_CONFIG["kafka_client"]
        self._lock = threading.Lock()
        self._clients: list = []
        self._closed = False

    def __call__(self, **configs):
        from kafka.errors import KafkaConnectionError
        with self._lock:
            if self._closed:
                raise KafkaConnectionError("closed before connecting")
            client = self._make(**configs)
            self._clients.append(client)
            return client

    def adopt(self, sock: Any) -> None:
        """Also close this socket (the login probe's) at close(); at once if closed already."""
        with self._lock:
            if not self._closed:
                self._clients.append(sock)
                return
        sock.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            clients, self._clients = self._clients, []
        for client in clients:
            try:
                client.close()
            except Exception:
                pass


class TopicsMissing(Exception):
    """Kafka answered, and these topics do not exist."""

    def __init__(self, bootstrap_servers: str, missing: list[str]) -> None:
        super().__init__(f"topic(s) not found at {bootstrap_servers}: {', '.join(missing)}")
        self.missing = missing


def _check_topics(bootstrap_servers: str, topics: list[str], client_config: dict[str, Any],
                  timeout_s: float, clients: _ClientKeeper) -> str | None:
    from kafka.errors import KafkaConfigurationError
    options = {"bootstrapServers": bootstrap_servers, "clientConfig": json.dumps(client_config)}
    try:
        # A refused login or certificate raises KafkaLoginFailed: kafka-python would only time out.
        probe_login(bootstrap_servers, client_config, timeout_s, adopt=clients.adopt)
        consumer = _consumer(options, request_timeout_ms=int(timeout_s * 1000), kafka_client=clients)
    except (KafkaConfigurationError, ValueError) as exc:
        raise ValueError(f"kafka.client: {exc}") from None   # not a broker outage: don't retry
    except KafkaLoginFailed:
        raise
    except Exception as exc:
        return f"cannot reach Kafka at {bootstrap_servers}: {type(exc).__name__}: {exc}"
    try:
        consumer.topics()   # one metadata request for every topic
        # KafkaConsumer.topics() leaves out internal topics (__consumer_offsets) whatever the
        # client settings; the cluster metadata it just fetched has them.
        existing = consumer._cluster.topics(exclude_internal_topics=False)
    except Exception as exc:
        return f"cannot list topics at {bootstrap_servers}: {type(exc).__name__}: {exc}"
    finally:
        consumer.close()
    missing = [t for t in topics if t not in existing]
    if missing:
        raise TopicsMissing(bootstrap_servers, missing)
    return None


def check_topics(bootstrap_servers: str, topics: list[str], client_config: dict[str, Any],
                 timeout_s: float = 30.0, stop: threading.Event | None = None) -> str | None:
    """None when every topic exists; a message for the operator when Kafka does not answer
    (used at start); TopicsMissing when it answers without some of the topics; KafkaLoginFailed
    when it refuses the TLS or SASL settings (kafka_login.py); ValueError for unusable settings.

    kafka-python blocks on a broker that does not answer (30 s to bootstrap, then `timeout_s` per
    request), so the check runs on a daemon thread and this returns as soon as `stop` is set (with
    a message: callers look at `stop` first). Either way the check's client is closed at the end:
    that fails a call still blocked and stops the IO thread even of a consumer that never got built."""
    clients = _ClientKeeper()
    return run_check_until_stopped(
        lambda: _check_topics(bootstrap_servers, topics, client_config, timeout_s, clients),
        "kafka-topic-check", stop, f"stopped while checking Kafka at {bootstrap_servers}",
        on_end=clients.close)


def run_check_until_stopped(check: Callable[[], str | None], name: str, stop: threading.Event | None,
                            stopped: str, on_end: Callable[[], None] | None = None) -> str | None:
    """`check()` on a daemon thread (a Kafka client can block for its own timeouts): its result or
    exception once it ends, or `stopped` as soon as `stop` is set. `on_end` runs either way, before
    a last short wait (closing a client fails a call still blocked on it)."""
    outcome: dict[str, Any] = {}

    def attempt() -> None:
        try:
            outcome["problem"] = check()
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=attempt, name=name, daemon=True)
    worker.start()
    while worker.is_alive() and not (stop is not None and stop.is_set()):
        worker.join(0.1)
    if on_end is not None:
        on_end()
        worker.join(1.0)   # done: at once; stopped: the closed client fails the blocked call
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("problem", stopped)
