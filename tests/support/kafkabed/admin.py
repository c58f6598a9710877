"""Admin operations through confluent-kafka's AdminClient (librdkafka speaks to 2.8 and 4.x):
topics, FindCoordinator (via DescribeConsumerGroups), group deletion, SCRAM users."""
from __future__ import annotations

import time
from typing import Optional

from .procs import BedError, wait_for


def make_admin(bootstrap: str, extra: Optional[dict] = None):
    from confluent_kafka.admin import AdminClient
    conf = {"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 3000,
            "log_level": 3}   # errors only: a stopped broker is expected in some scenarios
    conf.update(extra or {})
    return AdminClient(conf)


def create_topic(adm, name: str, partitions: int, rf: int, config: Optional[dict] = None,
                 timeout: float = 30.0) -> None:
    from confluent_kafka.admin import NewTopic
    fut = adm.create_topics([NewTopic(name, partitions, rf, config=config or {})],
                            operation_timeout=timeout)[name]
    try:
        fut.result(timeout)
    except Exception as exc:
        raise BedError(f"could not create topic {name} ({partitions} partitions, rf {rf}): {exc}") from None
    wait_for(lambda: _leaders_known(adm, name, partitions), timeout, f"leaders of topic {name}")


def _leaders_known(adm, name: str, partitions: int) -> bool:
    try:
        md = adm.list_topics(topic=name, timeout=2).topics.get(name)
    except Exception:
        return False
    return bool(md and md.error is None and len(md.partitions) == partitions
                and all(p.leader >= 0 for p in md.partitions.values()))


def coordinator_of(adm, group: str, timeout: float = 30.0) -> int:
    """Broker id of `group`'s coordinator (FindCoordinator, answered through
    DescribeConsumerGroups; retried while __consumer_offsets is being created)."""
    def ask():
        try:
            desc = adm.describe_consumer_groups([group], request_timeout=5)[group].result(6)
        except Exception:
            return None
        node = getattr(desc, "coordinator", None)
        return None if node is None or node.id < 0 else node.id + 1   # +1: 0 would read as falsy
    return wait_for(ask, timeout, f"the coordinator of group {group}", interval=0.3) - 1


def delete_group(adm, group: str, timeout: float = 30.0) -> None:
    fut = adm.delete_consumer_groups([group], request_timeout=timeout)[group]
    try:
        fut.result(timeout)
    except Exception as exc:
        raise BedError(f"could not delete group {group}: {exc}") from None


def group_state(adm, group: str) -> Optional[str]:
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
