"""`run`'s lag sampler: a thread of the driver that asks the cluster for the end offsets of the
partitions the known groups commit to, every `lag.sample_seconds` (state/lag.py holds them).

It runs beside the query, never inside the stateful step: a slow or dead broker delays only the
next sample. kafka-python's ListOffsets (KafkaConsumer.end_offsets), one call per partition
leader, so that a broker that does not answer costs only its own partitions. Partitions the
metadata does not know (a deleted topic, fewer partitions) are not asked about. What could not be
had is counted by reason (rebalance_monitor_lag_sample_errors_total) and said in one log line
per reason when it starts, and one when it ends; it never stops the thread.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from state.lag import (
    REASON_BROKER, REASON_ERROR, REASON_NOT_AUTHORIZED, REASON_PARTITION_MISSING, REASON_TOPIC_MISSING, LagBook,
    Partition,
)

LOG = logging.getLogger("rebalance_monitor.lag")
# The longest one ListOffsets (or metadata) call may wait: within a sampling interval.
MAX_REQUEST_TIMEOUT_S = 10.0
# Groups whose committed offsets a round fetches (OffsetFetch) after a restart, at most.
SEED_PER_ROUND = 50

Fetched = tuple[dict[Partition, int], dict[Partition, str]]


class EndOffsets(Protocol):
    """Where end offsets come from: `fetch` returns those it got and the reason for the others."""

    def fetch(self, partitions: list[Partition]) -> Fetched: ...

    def committed(self, groups: list[str]) -> dict[str, dict[Partition, int]]: ...

    def close(self) -> None: ...


def error_reason(exc: BaseException) -> str:
    """The reason of a failed request, from kafka-python's error class."""
    name = type(exc).__name__
    if "Authorization" in name or "Authentication" in name:
        return REASON_NOT_AUTHORIZED
    if name in ("UnknownTopicOrPartitionError", "UnknownTopicIdError"):
        return REASON_TOPIC_MISSING
    if name in ("KafkaTimeoutError", "NoBrokersAvailable", "KafkaConnectionError", "NodeNotReadyError",
                "MetadataEmptyBrokerList", "UnrecognizedBrokerVersion",
                "LeaderNotAvailableError", "NotLeaderForPartitionError", "RequestTimedOutError",
                "BrokerNotAvailableError"):
        return REASON_BROKER
    return REASON_ERROR


class KafkaEndOffsets:
    """End offsets through one long-lived kafka-python consumer (no group, no subscription)."""

    def __init__(self, bootstrap_servers: str, client_config: dict[str, Any], timeout_s: float) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.client_config = dict(client_config)
        self.timeout_ms = int(min(MAX_REQUEST_TIMEOUT_S, timeout_s) * 1000)
        self._consumer: Any = None
        self._admin: Any = None

    def _client(self) -> Any:
        if self._consumer is None:
            from kafka import KafkaConsumer
            config = {"request_timeout_ms": max(self.timeout_ms, 1000) + 500,
                      "bootstrap_timeout_ms": self.timeout_ms, **self.client_config}
            self._consumer = KafkaConsumer(bootstrap_servers=self.bootstrap_servers.split(","),
                                           enable_auto_commit=False, group_id=None, **config)
        return self._consumer

    def fetch(self, partitions: list[Partition]) -> Fetched:
        from kafka import TopicPartition
        errors: dict[Partition, str] = {}
        try:
            consumer = self._client()
            consumer.topics()    # one metadata request: every topic's partitions and leaders
        except Exception as exc:
            self.close()         # a new client at the next round
            return {}, dict.fromkeys(partitions, error_reason(exc))
        cluster = consumer._client.cluster
        by_leader: dict[Any, list[Any]] = {}
        for topic, partition in partitions:
            known = cluster.partitions_for_topic(topic)
            if known is None:
                # a topic the principal may not describe is left out of the metadata: it looks missing
                denied = topic in getattr(cluster, "unauthorized_topics", ())
                errors[(topic, partition)] = REASON_NOT_AUTHORIZED if denied else REASON_TOPIC_MISSING
            elif partition not in known:
                errors[(topic, partition)] = REASON_PARTITION_MISSING
            else:
                tp = TopicPartition(topic, partition)
                by_leader.setdefault(cluster.leader_for_partition(tp), []).append(tp)
        ends: dict[Partition, int] = {}
        for leader, tps in by_leader.items():
            if leader is None or leader == -1:
                errors.update(((tp.topic, tp.partition), REASON_BROKER) for tp in tps)
                continue
            try:
                got = consumer.end_offsets(tps, timeout_ms=self.timeout_ms)
            except Exception as exc:
                errors.update(((tp.topic, tp.partition), error_reason(exc)) for tp in tps)
                continue
            for tp, offset in got.items():
                if offset is None:
                    errors[(tp.topic, tp.partition)] = REASON_ERROR
                else:
                    ends[(tp.topic, tp.partition)] = int(offset)
        return ends, errors

    def committed(self, groups: list[str]) -> dict[str, dict[Partition, int]]:
        """The committed offsets of `groups` (OffsetFetch, one group per request: brokers before
        3.0 take one); a group that fails is left out (its lag waits for its next commit)."""
        from kafka import KafkaAdminClient
        out: dict[str, dict[Partition, int]] = {}
        try:
            if self._admin is None:
                allowed = KafkaAdminClient.DEFAULT_CONFIG
                config = {k: v for k, v in self.client_config.items() if k in allowed}
                self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers.split(","),
                                               request_timeout_ms=max(self.timeout_ms, 1000), **config)
            for group in groups:
                found = self._admin.list_group_offsets({group: None}).get(group) or {}
                out[group] = {(tp.topic, tp.partition): int(meta.offset) for tp, meta in found.items()
                              if meta is not None and meta.offset is not None and meta.offset >= 0}
        except Exception as exc:
            LOG.debug("lag: fetching committed offsets: %r", exc)
        return out

    def close(self) -> None:
        for client in (self._consumer, self._admin):
            if client is not None:
                try:
                    client.close()
                except Exception as exc:      # closing a broken client: nothing more to do
                    LOG.debug("lag: closing the sampler's client: %r", exc)
        self._consumer = self._admin = None


class LagSampler:
    """Samples end offsets into `book` every `book.sample_seconds` until stopped."""

    def __init__(self, book: LagBook, cluster: str, source: EndOffsets,
                 count_error: Callable[[str, int], None] = lambda reason, n: None,
                 clock: Callable[[], float] = time.time,
                 groups: Callable[[], Iterable[tuple[str, str]]] = lambda: ()) -> None:
        self.book, self.cluster, self.source = book, cluster, source
        self.count_error = count_error
        self.clock = clock
        # The groups the monitor knows at its first round (restored from the state file at a
        # restart): those the book has no commit of get theirs fetched once (seed_known_groups).
        self.groups = groups
        self.pending: list[tuple[str, str]] | None = None
        self.failing: dict[str, set[str]] = {}     # reason -> topics, as last logged
        self.rounds = 0
        self._thread: threading.Thread | None = None

    def seed_known_groups(self) -> None:
        """After a restart the query does not read the commits of quiet groups again: the groups
        the monitor knew at its start (restored from the state file) that the book has no commit
        of get theirs from the cluster, once each, at most SEED_PER_ROUND a round. Any decoded
        commit wins over a fetched offset. Groups that show up later bring their own commits."""
        if self.pending is None:
            self.pending = [key for key in self.groups() if key[0] == self.cluster]
        todo: list[tuple[str, str]] = []
        while self.pending and len(todo) < SEED_PER_ROUND:
            key = self.pending.pop()
            if not self.book.has_group(key):
                todo.append(key)
        if not todo:
            return
        fetched = self.source.committed([group for _, group in todo])
        for group, offsets in fetched.items():
            self.book.seed((self.cluster, group), offsets)
        LOG.info("lag: the committed offsets of %d of %d group(s) known at the start fetched from the cluster "
                 "(%d left)", sum(1 for offsets in fetched.values() if offsets), len(todo), len(self.pending))

    def sample_once(self) -> None:
        """One round: ask about every partition some group committed to."""
        self.seed_known_groups()
        partitions = self.book.partitions(self.cluster)
        if partitions:
            try:
                ends, errors = self.source.fetch(partitions)
            except Exception as exc:     # a bug of the client: counted and said, never the thread's end
                ends, errors = {}, dict.fromkeys(partitions, error_reason(exc))
            self.book.note_ends(self.cluster, partitions, ends, errors, self.clock())
        else:
            errors = {}
        self._note_errors(errors)
        self.rounds += 1

    def _note_errors(self, errors: dict[Partition, str]) -> None:
        by_reason: dict[str, set[str]] = {}
        for (topic, _), reason in errors.items():
            by_reason.setdefault(reason, set()).add(topic)
        for reason, topics in sorted(by_reason.items()):
            self.count_error(reason, sum(1 for r in errors.values() if r == reason))
            if reason not in self.failing:
                LOG.warning("lag: end offsets unavailable (%s) for %d topic(s): %s; their lag is unknown until "
                            "a sample succeeds (rebalance_monitor_group_lag_unknown)", reason, len(topics),
                            ", ".join(sorted(topics)[:5]) + (", ..." if len(topics) > 5 else ""))
        for reason in sorted(set(self.failing) - set(by_reason)):
            LOG.warning("lag: end offsets unavailable (%s) ended: sampled again, or no group commits to "
                        "those partitions any more", reason)
        self.failing = by_reason

    def run(self, stop: threading.Event) -> None:
        """Rounds every sample_seconds (from the start of one to the next) until `stop`."""
        try:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    self.sample_once()
                except Exception as exc:    # never the thread's end: the next round tries again
                    LOG.error("lag: a sampling round failed: %s: %s", type(exc).__name__, exc)
                stop.wait(max(0.0, self.book.sample_seconds - (time.monotonic() - started)))
        finally:
            self.source.close()

    def start(self, stop: threading.Event) -> threading.Thread:
        self._thread = threading.Thread(target=self.run, args=(stop,), name="lag-sampler", daemon=True)
        self._thread.start()
        return self._thread
