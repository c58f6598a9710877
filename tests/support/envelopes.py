"""Log shipper documents for tests: Filebeat, Fluent Bit and Vector in the shape each writes (field
names from their default outputs), around real lines of the Kafka 2.7 capture."""
from __future__ import annotations

import json

LINE = ("[2026-11-21 19:23:13,794] INFO [GroupCoordinator 1]: Member sc03-c2-71387325-0692-46cd-be2c-72b58e7b893c "
        "in group sc03-heartbeat-expiry has failed, removing it from the group (kafka.coordinator.group.GroupCoordinator)")
# GroupMetadataManager lines of 2.7 name the broker; GroupMetadata$ lines do not.
NO_PREFIX = ("[2026-11-21 19:28:12,423] INFO Group leader [member.id: c-1-ab, group.instance.id: None] failed to "
             "join before rebalance timeout, while new leader MemberMetadata(memberId=c-2) was elected. "
             "(kafka.coordinator.group.GroupMetadata)")
MEMBER_GONE_NO_PREFIX = ("[2026-11-21 19:23:13,794] INFO The following groups were deleted: g1. A total of 2 offsets "
                         "were removed. (kafka.coordinator.group.GroupCoordinator)")


def filebeat(message: str, **extra) -> str:
    return json.dumps({"@timestamp": "2026-11-21T19:23:14.001Z", "message": message,
                       "host": {"name": "kafka-broker-1", "hostname": "kafka-broker-1"},
                       "agent": {"type": "filebeat", "version": "8.15.0"},
                       "log": {"file": {"path": "/var/log/kafka/server.log"}, "offset": 1234},
                       "input": {"type": "filestream"}, "ecs": {"version": "8.0.0"}, **extra})


def fluent_bit(message: str, pod: str = "my-cluster-kafka-2") -> str:
    return json.dumps({"date": 1795288993.794, "log": message + "\n", "stream": "stdout",
                       "kubernetes": {"pod_name": pod, "namespace_name": "kafka", "host": "node-a",
                                      "container_name": "kafka",
                                      "labels": {"strimzi.io/cluster": "my-cluster",
                                                 "statefulset.kubernetes.io/pod-name": pod}}})


def vector(message: str) -> str:
    return json.dumps({"message": message, "host": "kafka-broker-3", "source_type": "file",
                       "file": "/var/log/kafka/server.log", "timestamp": "2026-11-21T19:23:14.002Z"})
