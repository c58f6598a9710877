"""Admin operations through confluent-kafka's AdminClient (librdkafka speaks to 2.8 and 4.x):
topics (created, their partition count increased), FindCoordinator (via DescribeConsumerGroups),
group deletion, SCRAM users."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from testbed.bed.procs import BedError, wait_for

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient


def make_admin(bootstrap: str, extra: dict | None = None) -> AdminClient:
    from confluent_kafka.admin import AdminClient
    conf: dict[str, str | int | float | bool] = {
        "bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 3000,
        "log_level": 2}   # critical only: a stopped broker is expected in some scenarios
    conf.update(extra or {})
    return AdminClient(conf)


def create_topic(adm, name: str, partitions: int, rf: int, config: dict | None = None,
                 timeout: float = 30.0, assignment: list[list[int]] | None = None) -> None:
    """`assignment`: the replicas of each partition, its preferred leader first (then `rf` is
    the length of each list)."""
    from confluent_kafka.admin import NewTopic
    topic = (NewTopic(name, partitions, rf, config=config or {}) if assignment is None else
             NewTopic(name, partitions, replica_assignment=assignment, config=config or {}))
    fut = adm.create_topics([topic], operation_timeout=timeout)[name]
    try:
        fut.result(timeout)
    except Exception as exc:
        raise BedError(f"could not create topic {name} ({partitions} partitions, rf {rf}): {exc}") from None
    wait_for(lambda: _leaders_known(adm, name, partitions), timeout, f"leaders of topic {name}")


def add_partitions(adm, name: str, total: int, timeout: float = 30.0) -> None:
    """Increases topic `name` to `total` partitions (CreatePartitions; a count can only grow), then
    waits until every partition has a leader."""
    from confluent_kafka.admin import NewPartitions
    fut = adm.create_partitions([NewPartitions(name, total)], operation_timeout=timeout,
                                request_timeout=timeout)[name]
    try:
        fut.result(timeout)
    except Exception as exc:
        raise BedError(f"could not increase topic {name} to {total} partitions: {exc}") from None
    wait_for(lambda: _leaders_known(adm, name, total), timeout, f"leaders of the {total} partitions of topic {name}")


def _leaders_known(adm, name: str, partitions: int) -> bool:
    try:
        md = adm.list_topics(topic=name, timeout=2).topics.get(name)
    except Exception:
        return False
    return bool(md and md.error is None and len(md.partitions) == partitions
                and all(p.leader >= 0 for p in md.partitions.values()))


def offsets_partition(group: str, partitions: int = 10) -> int:
    """The __consumer_offsets partition of `group`: Utils.abs(group.hashCode()) % partitions
    (Math.abs, 0 for MIN_VALUE)."""
    h = 0
    for ch in group.encode("utf-16-be").decode("utf-16-be"):
        for unit in ([ord(ch)] if ord(ch) < 0x10000 else
                     [0xD800 + ((ord(ch) - 0x10000) >> 10), 0xDC00 + ((ord(ch) - 0x10000) & 0x3FF)]):
            h = (31 * h + unit) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


def find_coordinator(bootstrap: str, group: str) -> int | None:
    """FindCoordinator (answered through DescribeConsumerGroups) from a fresh client that only
    knows the live brokers: a long-lived librdkafka admin client kept timing out on this
    request for as long as one broker it had known was down (librdkafka 2.16)."""
    adm = make_admin(bootstrap)
    try:
        desc = adm.describe_consumer_groups([group], request_timeout=5)[group].result(6)
    except Exception:
        return None
    node = getattr(desc, "coordinator", None)
    return None if node is None else node.id


def partition_leader(adm, topic: str, partition: int) -> int | None:
    try:
        md = adm.list_topics(topic=topic, timeout=5).topics[topic].partitions[partition]
    except Exception:
        return None
    return md.leader if md.leader >= 0 else None


def coordinator_of(bootstrap: str, group: str, timeout: float = 30.0) -> int:
    """Broker id of `group`'s coordinator (FindCoordinator, retried while __consumer_offsets
    is being created or its leaders move)."""
    return wait_for(lambda: (lambda b: None if b is None or b < 0 else (b,))(find_coordinator(bootstrap, group)),
                    timeout, f"the coordinator of group {group}", interval=0.3)[0]


def delete_group(adm, group: str, timeout: float = 30.0) -> None:
    fut = adm.delete_consumer_groups([group], request_timeout=timeout)[group]
    try:
        fut.result(timeout)
    except Exception as exc:
        raise BedError(f"could not delete group {group}: {exc}") from None


def group_state(adm, group: str) -> str | None:
    try:
        desc = adm.describe_consumer_groups([group], request_timeout=5)[group].result(6)
    except Exception:
        return None
    state = getattr(desc, "state", None)
    return getattr(state, "name", str(state))


def upsert_scram(adm, user: str, password: str, mechanism: str = "SCRAM-SHA-512",
                 iterations: int = 4096, timeout: float = 30.0) -> None:
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    info = ScramCredentialInfo(getattr(ScramMechanism, mechanism.replace("-", "_")), iterations)
    futs = adm.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, password.encode())],
                                            request_timeout=timeout)
    deadline = time.monotonic() + timeout
    for fut in futs.values():
        fut.result(max(1.0, deadline - time.monotonic()))


def committed_offsets(adm, group: str) -> dict:
    """{"topic-partition": offset} the group has committed (empty when none or unknown)."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    try:
        res = adm.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                              request_timeout=5)[group].result(6)
    except Exception:
        return {}
    return {f"{tp.topic}-{tp.partition}": tp.offset for tp in res.topic_partitions if tp.offset >= 0}
