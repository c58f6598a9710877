"""`run`'s lag sampler: a thread of the driver that asks the cluster for the end offsets of the
partitions the known groups commit to, every `lag.sample_seconds` (state/lag.py holds them).

It runs beside the query, never inside the stateful step: a slow or dead broker delays only the
next sample. ListOffsets (latest) through kafka-python, one request per partition leader sent
together, so that a broker that does not answer costs only its own partitions. Partitions the
metadata does not know (a deleted topic, fewer partitions) are not asked about. What could not be
had is counted by reason (rebalance_monitor_lag_sample_errors_total) and said in one log line
per reason when it starts, and one when it ends; it never stops the thread.

What a round costs at 100,000 partitions (bench/cost --only lag_sampler) is the reason for two
things kept between rounds (KafkaEndOffsets): the metadata of every topic (a full metadata answer
is the largest thing the sampler decodes) is asked for again only when it may be out of date, and
the ListOffsets requests are made again only when the partitions asked or the metadata change.
"""
from __future__ import annotations

import base64
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
# After a restart, the groups whose committed offsets one OffsetFetch asks (per coordinator), and
# the seconds a round spends on them at most: then the round samples. 10,000 groups with series
# come back in a few rounds on 3.0+ brokers (one request per coordinator and chunk); older ones
# take a request per group, about as many as the seconds allow.
SEED_CHUNK = 500
SEED_SECONDS_PER_ROUND = 2.0
# The metadata of every topic is asked for again after this long (kafka-python's metadata.max.age.ms),
# or sooner: when the partitions asked include some it did not have (a new topic, more partitions),
# when an answer says it is out of date (a leader moved, a topic went; then the round asks those
# partitions once more), every round while some partition has no leader, and after
# MISSING_RECHECK_S while some partition asked is missing (a topic deleted, maybe created again).
METADATA_MAX_AGE_S = 300.0
MISSING_RECHECK_S = 60.0

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


def topic_names_by_id(cluster: Any, topics: Iterable[str]) -> dict[str, str]:
    """{topic id: name} of the topics whose metadata carried an id (kafka-python's uuid.UUID,
    written as Kafka writes ids: base64url without padding)."""
    topic_id: Callable[[str], Any] | None = getattr(cluster, "topic_id", None)
    out: dict[str, str] = {}
    if topic_id is None:
        return out
    for topic in topics:
        uid = topic_id(topic)
        if uid is not None and uid.int:          # Uuid.ZERO_UUID: no id
            out[base64.urlsafe_b64encode(uid.bytes).rstrip(b"=").decode("ascii")] = topic
    return out


def _leader_id(leader: Any) -> int:
    return -1 if leader is None else int(leader)


class _Plan:
    """What a round asks: the partitions, by leader and topic, and why the others cannot be asked;
    the ListOffsets request of each leader, made at its first use and sent again every round that
    asks the same partitions with the same metadata."""

    def __init__(self, partitions: list[Partition], by_leader: dict[int, dict[str, list[int]]],
                 errors: dict[Partition, str]) -> None:
        self.partitions, self.by_leader, self.errors = partitions, by_leader, errors
        self._requests: dict[int, Any] | None = None

    def fresh(self, missing: set[Partition]) -> bool:
        """Whether the metadata answer had every partition this plan asks, but those it already
        did not have (`missing`)."""
        return all(tp in missing for tp, reason in self.errors.items()
                   if reason in (REASON_TOPIC_MISSING, REASON_PARTITION_MISSING, REASON_NOT_AUTHORIZED))

    def recheck_s(self) -> float:
        """How old the metadata may be while some partitions cannot be asked."""
        return 0.0 if REASON_BROKER in self.errors.values() else MISSING_RECHECK_S

    def requests(self) -> dict[int, Any]:
        if self._requests is None:
            from kafka.protocol.consumer.offsets import ListOffsetsRequest
            topic_class = ListOffsetsRequest.ListOffsetsTopic
            partition_class = topic_class.ListOffsetsPartition
            self._requests = {
                leader: ListOffsetsRequest(replica_id=-1, isolation_level=0, max_version=LIST_OFFSETS_MAX_VERSION,
                                           topics=[
                    topic_class(name=topic, partitions=[
                        partition_class(partition_index=p, current_leader_epoch=-1, timestamp=LATEST) for p in parts])
                    for topic, parts in topics.items()])
                for leader, topics in self.by_leader.items()}
        return self._requests


LATEST = -1        # ListOffsets' timestamp for the end offset
# ListOffsets v5 (Kafka 2.2 on; brokers 4.x take v1 to v11) says all a latest offset needs; the
# flexible versions after it cost kafka-python about twice the CPU to write and read per partition.
LIST_OFFSETS_MAX_VERSION = 5


def _read_list_offsets(response: Any, ends: dict[Partition, int], errors: dict[Partition, str],
                       stale: dict[Partition, tuple[str, int]], leader: int) -> int:
    """A ListOffsets answer into `ends`, `errors` and `stale` (the partitions whose error says the
    metadata is out of date: a moved leader, an unknown topic); returns the partitions it had."""
    from kafka import errors as kafka_errors
    old = response.API_VERSION == 0
    n = 0
    for topic in response.topics:
        name = topic.name
        for p in topic.partitions:
            n += 1
            tp = (name, p.partition_index)
            code = p.error_code
            if code == 0:
                offset = (p.old_style_offsets[0] if p.old_style_offsets else -1) if old else p.offset
                if offset is None or offset < 0:
                    errors[tp] = REASON_ERROR
                else:
                    ends[tp] = offset
                continue
            error = kafka_errors.for_code(code)
            if getattr(error, "invalid_metadata", False):
                stale[tp] = (error_reason(error()), leader)
            else:
                errors[tp] = error_reason(error())
    return n


def _end_offsets(consumer: Any, topics: dict[str, list[int]], timeout_ms: int) -> Fetched:
    """One leader's partitions through KafkaConsumer.end_offsets (kafka-python 2)."""
    from kafka import TopicPartition
    tps = [TopicPartition(topic, p) for topic, parts in topics.items() for p in parts]
    try:
        got = consumer.end_offsets(tps, timeout_ms=timeout_ms)
    except Exception as exc:
        return {}, {(tp.topic, tp.partition): error_reason(exc) for tp in tps}
    ends: dict[Partition, int] = {}
    errors: dict[Partition, str] = {}
    for tp in tps:
        offset = got.get(tp)
        if offset is None:
            errors[(tp.topic, tp.partition)] = REASON_ERROR
        else:
            ends[(tp.topic, tp.partition)] = int(offset)
    return ends, errors


class KafkaEndOffsets:
    """End offsets through one long-lived kafka-python consumer (no group, no subscription)."""

    def __init__(self, bootstrap_servers: str, client_config: dict[str, Any], timeout_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.client_config = dict(client_config)
        self.timeout_ms = int(min(MAX_REQUEST_TIMEOUT_S, timeout_s) * 1000)
        self.clock = clock
        self._consumer: Any = None
        self._admin: Any = None
        # As of the last metadata answer: each topic's partitions and their leader (-1: none),
        # the topics the principal may not describe, when it came; the partitions the current
        # plan cannot ask (asking about them again needs no new answer before MISSING_RECHECK_S).
        self._leaders: dict[str, dict[int, int]] | None = None
        self._denied: set[str] = set()
        self._named: set[str] = set()         # missing topics asked by name since the last answer
        self._metadata_s = 0.0
        self._missing: set[Partition] = set()
        self._plan: _Plan | None = None
        self.metadata_requests = 0
        # Each topic's name by its id as Kafka writes ids (Uuid.toString: base64url), from the last
        # metadata answer (v10+, Kafka 2.8+): a KIP-848 member's assignment names topics by id.
        self.topic_names: dict[str, str] = {}

    def _client(self) -> Any:
        if self._consumer is None:
            from kafka import KafkaConsumer
            config = {"request_timeout_ms": max(self.timeout_ms, 1000) + 500,
                      "bootstrap_timeout_ms": self.timeout_ms, **self.client_config}
            self._consumer = KafkaConsumer(bootstrap_servers=self.bootstrap_servers.split(","),
                                           enable_auto_commit=False, group_id=None, **config)
        return self._consumer

    def _refresh(self, consumer: Any) -> None:
        """One metadata request: every topic's partitions and leaders, kept."""
        from kafka import TopicPartition
        consumer.topics()
        self.metadata_requests += 1
        cluster = consumer._client.cluster
        leaders: dict[str, dict[int, int]] = {}
        for topic in cluster.topics(exclude_internal_topics=False):
            leaders[topic] = {p: _leader_id(cluster.leader_for_partition(TopicPartition(topic, p)))
                              for p in cluster.partitions_for_topic(topic) or ()}
        # A topic the principal may not describe is left out of an all-topics answer: it looks
        # missing until asked by name (_name_missing_topics).
        self._leaders, self._denied = leaders, set(getattr(cluster, "unauthorized_topics", ()))
        self._named = set()
        self.topic_names = topic_names_by_id(cluster, leaders)
        self._metadata_s = self.clock()
        self._plan = None

    def _make_plan(self, partitions: list[Partition]) -> _Plan:
        """The partitions by leader, by the last metadata answer, and why the others cannot be asked."""
        leaders = self._leaders or {}
        by_leader: dict[int, dict[str, list[int]]] = {}
        errors: dict[Partition, str] = {}
        for tp in partitions:
            topic, partition = tp
            known = leaders.get(topic)
            if known is None:
                errors[tp] = REASON_NOT_AUTHORIZED if topic in self._denied else REASON_TOPIC_MISSING
                continue
            leader = known.get(partition)
            if leader is None:
                errors[tp] = REASON_PARTITION_MISSING
            elif leader < 0:
                errors[tp] = REASON_BROKER
            else:
                by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
        return _Plan(list(partitions), by_leader, errors)

    def _plan_for(self, consumer: Any, partitions: list[Partition]) -> _Plan:
        """The round's plan: the last one when it asks the same partitions, else a new one; the
        metadata asked for again first when it may be out of date (METADATA_MAX_AGE_S)."""
        now = self.clock()
        if self._leaders is None or now - self._metadata_s >= METADATA_MAX_AGE_S:
            self._refresh(consumer)
        plan = self._plan
        if plan is None or plan.partitions != partitions:
            plan = self._make_plan(partitions)
            if self._plan is not None and not plan.fresh(self._missing):
                self._refresh(consumer)      # partitions the last answer did not have: maybe new
                plan = self._make_plan(partitions)
        if plan.errors and self.clock() - self._metadata_s >= plan.recheck_s():
            self._refresh(consumer)
            plan = self._make_plan(partitions)
        if self._name_missing_topics(consumer, plan):
            plan = self._make_plan(partitions)
        if self._plan is not plan:
            self._missing = set(plan.errors)
            self._plan = plan
        return plan

    def _name_missing_topics(self, consumer: Any, plan: _Plan) -> bool:
        """The topics the last metadata answer lacked, asked by name once per answer: Kafka answers
        TOPIC_AUTHORIZATION_FAILED for one the principal may not describe (ACLs), which an
        all-topics answer leaves out, and UNKNOWN_TOPIC_OR_PARTITION for one that is gone. True
        when some are refused (not_authorized, not topic_missing)."""
        missing = sorted({tp[0] for tp, reason in plan.errors.items() if reason == REASON_TOPIC_MISSING} - self._named)
        if not missing or getattr(consumer, "_manager", None) is None:     # kafka-python 2: as the answer says
            return False
        from kafka.errors import TopicAuthorizationFailedError
        from kafka.protocol.metadata import MetadataRequest
        self._named.update(missing)
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in missing],
                                  allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)
        node = consumer._manager.least_loaded_node()
        answer = self._send(consumer, {node: request}).get(node) if node is not None else None
        if answer is None or isinstance(answer, BaseException):
            return False
        refused = {t.name for t in answer.topics if t.error_code == TopicAuthorizationFailedError.errno}
        self._denied |= refused
        return bool(refused)

    def fetch(self, partitions: list[Partition]) -> Fetched:
        try:
            consumer = self._client()
            plan = self._plan_for(consumer, partitions)
        except Exception as exc:
            self.close()         # a new client at the next round
            return {}, dict.fromkeys(partitions, error_reason(exc))
        ends, errors, stale = self._ask(consumer, plan)
        if stale:
            # The metadata is out of date for these: a new answer, then once more those whose
            # leader changed (the others keep their reason: asking the same broker again would
            # wait as long); a partition the new answer does not have is missing.
            try:
                self._refresh(consumer)
            except Exception as exc:
                errors.update(dict.fromkeys(stale, error_reason(exc)))
                return ends, errors
            again = self._make_plan(sorted(stale))
            moved = _Plan([], {}, dict(again.errors))
            for leader, topics in again.by_leader.items():
                for topic, parts in topics.items():
                    for partition in parts:
                        reason, asked = stale[(topic, partition)]
                        if asked != leader:
                            moved.by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
                        else:
                            errors[(topic, partition)] = reason
            more_ends, more_errors, still = self._ask(consumer, moved)
            ends.update(more_ends)
            errors.update(more_errors)
            errors.update((tp, reason) for tp, (reason, _) in still.items())
        return ends, errors

    def _ask(self, consumer: Any, plan: _Plan) -> tuple[dict[Partition, int], dict[Partition, str],
                                                       dict[Partition, tuple[str, int]]]:
        """ListOffsets of the plan's partitions: the end offsets, the reasons of those that failed
        for good (and of those the plan cannot ask), and those whose answer says the metadata is
        out of date, with the reason and the leader asked."""
        errors = dict(plan.errors)
        stale: dict[Partition, tuple[str, int]] = {}
        ends: dict[Partition, int] = {}
        if getattr(consumer, "_manager", None) is None:       # kafka-python 2: KafkaConsumer.end_offsets
            for topics in plan.by_leader.values():
                got, failed = _end_offsets(consumer, topics, self.timeout_ms)
                ends.update(got)
                errors.update(failed)
            return ends, errors, stale
        for leader, answer in self._send(consumer, plan.requests()).items():
            asked = plan.by_leader[leader]
            if isinstance(answer, BaseException):
                reason = error_reason(answer)
                for topic, parts in asked.items():
                    stale.update(((topic, p), (reason, leader)) for p in parts)
                continue
            if _read_list_offsets(answer, ends, errors, stale, leader) < sum(map(len, asked.values())):
                for topic, parts in asked.items():      # partitions the answer left out
                    for p in parts:
                        if (topic, p) not in ends and (topic, p) not in errors and (topic, p) not in stale:
                            errors[(topic, p)] = REASON_ERROR
        return ends, errors, stale

    def _send(self, consumer: Any, requests: dict[int, Any]) -> dict[int, Any]:
        """The requests to their leaders at once (kafka-python 3's IO loop): each leader's answer,
        or the exception of its request (within the timeout)."""
        manager, timeout_ms = consumer._manager, self.timeout_ms

        async def one(node_id: int, request: Any) -> Any:
            return await manager.wait_for(manager.send(request, node_id=node_id), timeout_ms)

        async def every() -> dict[int, Any]:
            futures = {node: manager.call_soon(one, node, request) for node, request in requests.items()}
            answers: dict[int, Any] = {}
            for node, future in futures.items():
                try:
                    answers[node] = await future
                except Exception as exc:
                    answers[node] = exc
            return answers
        return manager.run(every) if requests else {}

    def committed(self, groups: list[str]) -> dict[str, dict[Partition, int]]:
        """The committed offsets of `groups`: one OffsetFetch per coordinator for all of them
        (brokers 3.0+, KIP-709; kafka-python sends one per group to older ones). A group-level
        error fails that request whole, so then each group is asked alone, until a broker does not
        answer (a timeout or a lost connection: every group after it would wait as long); a group
        that fails, or is not asked, is left out (its lag waits for its next commit)."""
        out: dict[str, dict[Partition, int]] = {}
        try:
            admin = self._admin_client()
            try:
                answers = admin.list_group_offsets(list(groups))
            except Exception as exc:
                LOG.debug("lag: fetching %d groups' committed offsets at once: %r", len(groups), exc)
                answers = {} if error_reason(exc) == REASON_BROKER else _one_by_one(admin, groups)
            for group, found in answers.items():
                out[group] = {(tp.topic, tp.partition): int(meta.offset) for tp, meta in (found or {}).items()
                              if meta is not None and meta.offset is not None and meta.offset >= 0}
        except Exception as exc:
            LOG.debug("lag: fetching committed offsets: %r", exc)
        return out

    def _admin_client(self) -> Any:
        from kafka import KafkaAdminClient
        if self._admin is None:
            allowed = KafkaAdminClient.DEFAULT_CONFIG
            config = {k: v for k, v in self.client_config.items() if k in allowed}
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers.split(","),
                                           request_timeout_ms=max(self.timeout_ms, 1000), **config)
        return self._admin

    def close(self) -> None:
        self._leaders, self._plan, self._missing = None, None, set()
        for client in (self._consumer, self._admin):
            if client is not None:
                try:
                    client.close()
                except Exception as exc:      # closing a broken client: nothing more to do
                    LOG.debug("lag: closing the sampler's client: %r", exc)
        self._consumer = self._admin = None


def _one_by_one(admin: Any, groups: list[str]) -> dict[str, Any]:
    """Each group's committed offsets in a request of its own, until a broker does not answer."""
    answers: dict[str, Any] = {}
    for group in groups:
        try:
            answers.update(admin.list_group_offsets({group: None}))
        except Exception as exc:
            LOG.debug("lag: fetching the committed offsets of %s: %r", group, exc)
            if error_reason(exc) == REASON_BROKER:
                break
    return answers


class LagSampler:
    """Samples end offsets into `book` every `book.sample_seconds` until stopped."""

    def __init__(self, book: LagBook, cluster: str, source: EndOffsets,
                 count_error: Callable[[str, int], None] = lambda reason, n: None,
                 clock: Callable[[], float] = time.time,
                 groups: Callable[[], Iterable[tuple[str, str]]] = lambda: (),
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.book, self.cluster, self.source = book, cluster, source
        self.count_error = count_error
        self.clock = clock
        # The groups the monitor knows at its first round (restored from the state file at a
        # restart): those the book has no commit of get theirs fetched once (seed_known_groups).
        self.groups = groups
        self.monotonic = monotonic
        self.pending: list[tuple[str, str]] | None = None
        self.failing: dict[str, set[str]] = {}     # reason -> topics, as last logged
        self.rounds = 0
        self._thread: threading.Thread | None = None

    def seed_known_groups(self) -> None:
        """After a restart the query does not read the commits of quiet groups again: the groups
        the monitor knew at its start (restored from the state file) that the book has no commit
        of get theirs from the cluster, once each, SEED_CHUNK at a time for up to
        SEED_SECONDS_PER_ROUND a round. Any decoded commit wins over a fetched offset. Groups that
        show up later bring their own commits."""
        if self.pending is None:
            self.pending = [key for key in self.groups() if key[0] == self.cluster]
        started, asked, found = self.monotonic(), 0, 0
        while self.pending and self.monotonic() - started < SEED_SECONDS_PER_ROUND:
            todo: list[tuple[str, str]] = []
            while self.pending and len(todo) < SEED_CHUNK:
                key = self.pending.pop()
                if not self.book.has_group(key):
                    todo.append(key)
            if not todo:
                continue
            fetched = self.source.committed([group for _, group in todo])
            for group, offsets in fetched.items():
                self.book.seed((self.cluster, group), offsets)
            asked += len(todo)
            found += sum(1 for offsets in fetched.values() if offsets)
        if asked:
            LOG.info("lag: the committed offsets of %d of %d group(s) known at the start fetched from the cluster "
                     "in %.1f s (%d left)", found, asked, self.monotonic() - started, len(self.pending))

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
            names = getattr(self.source, "topic_names", None)
            if names:
                self.book.note_topic_names(self.cluster, names)
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
