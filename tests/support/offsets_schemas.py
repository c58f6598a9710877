"""Kafka's `__consumer_offsets` schemas as field lists for tests/support/offsets_encoder.py, and
encoded embedded ConsumerProtocol blobs: the bytes the decoders are tested against are built from
the schemas, independently of the decoders."""
from __future__ import annotations

import base64
from typing import Any

from tests.support.offsets_encoder import record

OFFSET_COMMIT_VALUE = {
    0: [("offset", "int64"), ("metadata", "string"), ("commitTimestamp", "int64")],
    1: [("offset", "int64"), ("metadata", "string"), ("commitTimestamp", "int64"), ("expireTimestamp", "int64")],
    2: [("offset", "int64"), ("metadata", "string"), ("commitTimestamp", "int64")],
    3: [("offset", "int64"), ("leaderEpoch", "int32"), ("metadata", "string"), ("commitTimestamp", "int64")],
    4: [("offset", "int64"), ("leaderEpoch", "int32"), ("metadata", "string"), ("commitTimestamp", "int64")],
}


def member_schema(v: int) -> list:
    s = [("memberId", "string")]
    if v >= 3:
        s.append(("groupInstanceId", "string?"))
    s += [("clientId", "string"), ("clientHost", "string")]
    if v >= 1:
        s.append(("rebalanceTimeout", "int32"))
    return s + [("sessionTimeout", "int32"), ("subscription", "bytes"), ("assignment", "bytes")]


def group_metadata_schema(v: int) -> list:
    s = [("protocolType", "string"), ("generation", "int32"), ("protocol", "string?"), ("leader", "string?")]
    if v >= 2:
        s.append(("currentStateTimestamp", "int64"))
    return s + [("members", [member_schema(v)])]


TOPIC_PARTITIONS = [("Topic", "string"), ("Partitions", ["int32"])]
SUBSCRIPTION: dict[int, list[tuple[str, Any]]] = {0: [("Topics", ["string"]), ("UserData", "bytes?")]}
SUBSCRIPTION[1] = SUBSCRIPTION[0] + [("OwnedPartitions", [TOPIC_PARTITIONS])]
SUBSCRIPTION[2] = SUBSCRIPTION[1] + [("GenerationId", "int32")]
SUBSCRIPTION[3] = SUBSCRIPTION[2] + [("RackId", "string?")]
ASSIGNMENT = [("AssignedPartitions", [TOPIC_PARTITIONS]), ("UserData", "bytes?")]
CG_TOPIC_PARTITIONS = [("TopicId", "uuid"), ("Partitions", ["int32"])]

UUID = bytes(range(16))
UUID_STR = base64.urlsafe_b64encode(UUID).rstrip(b"=").decode()


def subscription_bytes(v: int, topics=("orders",), owned=None, gen=4, rack="r1") -> bytes:
    vals = {"Topics": list(topics), "UserData": b"ud", "OwnedPartitions": owned or [{"Topic": "orders", "Partitions": [0]}],
            "GenerationId": gen, "RackId": rack}
    return record(v, SUBSCRIPTION[v], vals)


def assignment_bytes(v: int, parts=None) -> bytes:
    return record(v, ASSIGNMENT, {"AssignedPartitions": parts or [{"Topic": "orders", "Partitions": [0, 1]}],
                                  "UserData": None})


# --- keys -----------------------------------------------------------------------------------------
