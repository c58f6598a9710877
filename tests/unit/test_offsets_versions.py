"""One test per `__consumer_offsets` key type and value version, with bytes built by a small
schema-driven encoder (offsets_encoder.py) written from Kafka's record schemas
(group-coordinator/src/main/resources/common/message/*.json), not from the decoder:
the schemas below are the tables of §4.3-4.6 as data, and `encode` knows only Kafka's primitive
encodings."""
from __future__ import annotations

import struct
from typing import Any

import pytest

from streaming.offsets.decoder import decode_consumer_assignment, decode_consumer_subscription, decode_key, decode_value
from streaming.offsets.record_events import record_to_events
from streaming.offsets.records import RECORD_TYPE_NAMES
from streaming.offsets.per_record import record_outcome
from streaming.offsets.wire import UnknownRecordType, UnknownVersion
from streaming.quarantine import Quarantined
from tests.support.offsets_encoder import encode, record, uvarint
from tests.support.offsets_schemas import (
    CG_TOPIC_PARTITIONS, OFFSET_COMMIT_VALUE, UUID, UUID_STR, assignment_bytes, group_metadata_schema,
    subscription_bytes
)

# --- schemas (Kafka's *Key.json / *Value.json) ----------------------------------------------------------------

MEMBER_KEYED = {5, 7, 8, 10, 13, 14, 19, 21, 22}


@pytest.mark.parametrize("key_type", sorted(RECORD_TYPE_NAMES))
def test_key_of_every_record_type(key_type):
    if key_type in (0, 1):
        schema, vals = [("group", "string"), ("topic", "string"), ("partition", "int32")], \
            {"group": "g", "topic": "t", "partition": 7}
        expected = {"group": "g", "topic": "t", "partition": 7}
    elif key_type == 16:
        schema, vals = [("GroupId", "string"), ("RegularExpression", "string")], {"GroupId": "g", "RegularExpression": "a.*"}
        expected = {"group": "g", "regular_expression": "a.*"}
    elif key_type in MEMBER_KEYED:
        schema, vals = [("GroupId", "string"), ("MemberId", "string")], {"GroupId": "g", "MemberId": "m"}
        expected = {"group": "g", "member_id": "m"}
    else:
        schema, vals = [("GroupId", "string")], {"GroupId": "g"}
        expected = {"group": "g"}
    key = record(key_type, schema, vals)
    assert decode_key(key) == {"type": key_type, "type_name": RECORD_TYPE_NAMES[key_type], **expected}
    # A tombstone of every type is an event, never a quarantine.
    events = record_to_events(partition=0, offset=1, timestamp_ms=2, key=key, value=None)
    assert isinstance(events, list) and len(events) == 1 and events[0].group == "g"
    assert record_outcome(key, None, events) == (str(key_type), "null", "decoded")


@pytest.mark.parametrize("key_type", [18, 24, 100, -1])
def test_unknown_key_types(key_type):
    with pytest.raises(UnknownRecordType):
        decode_key(record(key_type, [("GroupId", "string")], {"GroupId": "g"}))


# --- OffsetCommitValue v0-v4 ----------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_commit_value(version):
    vals = {"offset": 1234, "leaderEpoch": 9, "metadata": "md", "commitTimestamp": 1_700_000_000_001,
            "expireTimestamp": 1_700_000_900_000}
    value = record(version, OFFSET_COMMIT_VALUE[version], vals, flexible=version >= 4)
    d = decode_value(1, value)
    assert (d["version"], d["offset"], d["metadata"], d["commit_timestamp"], d["trailing_bytes"]) == \
        (version, 1234, "md", 1_700_000_000_001, 0)
    assert d.get("leader_epoch") == (9 if version >= 3 else None)
    assert d.get("expire_timestamp") == (1_700_000_900_000 if version == 1 else None)
    key = record(1, [("group", "string"), ("topic", "string"), ("partition", "int32")],
                 {"group": "g", "topic": "t", "partition": 3})
    events = record_to_events(partition=0, offset=1, timestamp_ms=2, key=key, value=value)
    assert isinstance(events, list)
    (ev,) = events
    assert ev.data == {"topic": "t", "partition": 3, "offset": 1234, "commit_ts_ms": 1_700_000_000_001, "count": 1}


def test_offset_commit_value_v4_tags():
    vals = {"offset": 1, "leaderEpoch": -1, "metadata": "", "commitTimestamp": 5,
            "_tags": {0: UUID, 9: b"new"}}
    d = decode_value(1, record(4, OFFSET_COMMIT_VALUE[4], vals, flexible=True))
    assert d["topic_id"] == UUID_STR and d["unknown_tags"] == [9]


@pytest.mark.parametrize("version", [5, 6, 32767])
def test_offset_commit_unknown_versions(version):
    with pytest.raises(UnknownVersion):
        decode_value(1, record(version, OFFSET_COMMIT_VALUE[3], {"offset": 1, "leaderEpoch": 1, "metadata": "",
                                                                  "commitTimestamp": 1}))


# --- GroupMetadataValue v0-v4 with embedded ConsumerProtocol v0-v3 --------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("sub_version", [0, 1, 2, 3])
def test_group_metadata_value(version, sub_version):
    members = [{"memberId": f"c{i}-id", "groupInstanceId": "inst" if i == 0 else None, "clientId": f"c{i}",
                "clientHost": f"/10.0.0.{i}", "rebalanceTimeout": 45_000, "sessionTimeout": 6_000,
                "subscription": subscription_bytes(sub_version),
                "assignment": assignment_bytes(sub_version, [{"Topic": "orders", "Partitions": [i, i + 2]}]),
                "_tags": {5: b"x"} if version >= 4 else {}}
               for i in range(2)]
    vals = {"protocolType": "consumer", "generation": 11, "protocol": "range", "leader": "c0-id",
            "currentStateTimestamp": 1_700_000_000_500, "members": members}
    value = record(version, group_metadata_schema(version), vals, flexible=version >= 4)
    d = decode_value(2, value)
    assert (d["version"], d["protocol_type"], d["generation"], d["protocol"], d["leader"]) == \
        (version, "consumer", 11, "range", "c0-id")
    assert d["current_state_timestamp"] == (1_700_000_000_500 if version >= 2 else None)
    assert d["trailing_bytes"] == 0
    m0, m1 = d["members"]
    assert (m0["member_id"], m0["client_id"], m0["client_host"], m0["session_timeout"]) == ("c0-id", "c0", "/10.0.0.0", 6000)
    assert m0["rebalance_timeout"] == (45_000 if version >= 1 else None)
    assert m0["group_instance_id"] == ("inst" if version >= 3 else None)
    assert m0["subscription"]["version"] == sub_version and m0["subscription"]["topics"] == ["orders"]
    assert m1["assignment"]["assigned_partitions"] == [{"topic": "orders", "partitions": [1, 3]}]
    events = record_to_events(partition=0, offset=1, timestamp_ms=2, key=record(2, [("group", "string")], {"group": "g"}),
                              value=value)
    assert isinstance(events, list)
    (ev,) = events
    em = ev.data["members"][1]
    assert ev.generation == 11 and em["assigned_partitions"] == 2 and em["topics"] == ["orders"]
    assert em["owned_partitions"] == (1 if sub_version >= 1 else None)
    assert em["member_generation"] == (4 if sub_version >= 2 else None)
    assert em["rack_id"] == ("r1" if sub_version >= 3 else None)


def test_embedded_protocol_newer_versions_and_trailing_bytes_are_tolerated():
    # v5 subscription: read with the v3 layout, extra fields ignored (forward compatibility).
    sub = subscription_bytes(3)[2:]
    d = decode_consumer_subscription(struct.pack(">h", 5) + sub + b"\x00\x00\x00\x07future")
    assert d["version"] == 5 and d["rack_id"] == "r1" and d["generation_id"] == 4
    a = decode_consumer_assignment(assignment_bytes(3) + b"\x01\x02")
    assert a["assigned_partitions"] == [{"topic": "orders", "partitions": [0, 1]}]


@pytest.mark.parametrize("version", [5, 9])
def test_group_metadata_unknown_versions(version):
    with pytest.raises(UnknownVersion):
        decode_value(2, struct.pack(">h", version) + b"\x00" * 30)


# --- KIP-848 values (types 3-8, 16; flexible, version 0) ------------------------------------------

def test_consumer_group_metadata_value_v0():
    schema = [("Epoch", "int32")]
    assert decode_value(3, record(0, schema, {"Epoch": 5}, True)) == {"version": 0, "epoch": 5, "trailing_bytes": 0}
    d = decode_value(3, record(0, schema, {"Epoch": 6, "_tags": {0: struct.pack(">q", 77)}}, True))
    assert d["metadata_hash"] == 77


def test_consumer_group_partition_metadata_value_v0():
    schema = [("Topics", [[("TopicId", "uuid"), ("TopicName", "string"), ("NumPartitions", "int32"),
                           ("PartitionMetadata", [[("Partition", "int32"), ("Racks", ["string"])]])]])]
    vals = {"Topics": [{"TopicId": UUID, "TopicName": "orders", "NumPartitions": 2,
                        "PartitionMetadata": [{"Partition": 0, "Racks": ["r1", "r2"]}, {"Partition": 1, "Racks": []}]}]}
    d = decode_value(4, record(0, schema, vals, True))
    (t,) = d["topics"]
    assert (t["topic_id"], t["topic_name"], t["num_partitions"]) == (UUID_STR, "orders", 2)
    assert t["partition_racks"] == [{"partition": 0, "racks": ["r1", "r2"]}, {"partition": 1, "racks": []}]


MEMBER_METADATA = [("InstanceId", "string?"), ("RackId", "string?"), ("ClientId", "string"), ("ClientHost", "string"),
                   ("SubscribedTopicNames", ["string"]), ("SubscribedTopicRegex", "string?"),
                   ("RebalanceTimeoutMs", "int32"), ("ServerAssignor", "string?")]
CLASSIC_MEMBER_METADATA = [("SessionTimeoutMs", "int32"),
                           ("SupportedProtocols", [[("Name", "string"), ("Metadata", "bytes")]])]


@pytest.mark.parametrize("classic", [False, True])
def test_consumer_group_member_metadata_value_v0(classic):
    vals: dict[str, Any] = {"InstanceId": None, "RackId": "rack-1", "ClientId": "cid", "ClientHost": "/h", "SubscribedTopicNames": ["a", "b"],
            "SubscribedTopicRegex": None, "RebalanceTimeoutMs": 30_000, "ServerAssignor": "uniform"}
    if classic:   # tag 0: a nullable struct, presence byte 1, then the struct
        cm = uvarint(1) + encode(CLASSIC_MEMBER_METADATA, {"SessionTimeoutMs": 45_000, "SupportedProtocols": [
            {"Name": "range", "Metadata": subscription_bytes(3)}]}, True)
        vals["_tags"] = {0: cm}
    d = decode_value(5, record(0, MEMBER_METADATA, vals, True))
    assert (d["client_id"], d["rack_id"], d["subscribed_topic_names"], d["server_assignor"]) == ("cid", "rack-1", ["a", "b"], "uniform")
    if classic:
        cmm = d["classic_member_metadata"]
        assert cmm["session_timeout_ms"] == 45_000
        assert cmm["supported_protocols"][0]["subscription"]["rack_id"] == "r1"
    else:
        assert d["classic_member_metadata"] is None
    key = record(5, [("GroupId", "string"), ("MemberId", "string")], {"GroupId": "g", "MemberId": "m"})
    events = record_to_events(partition=0, offset=1, timestamp_ms=2, key=key, value=record(0, MEMBER_METADATA, vals, True))
    assert isinstance(events, list)
    (ev,) = events
    assert ev.data["classic"] is classic and ev.data["session_timeout_ms"] == (45_000 if classic else None)


def test_consumer_group_target_assignment_values_v0():
    d = decode_value(6, record(0, [("AssignmentEpoch", "int32")], {"AssignmentEpoch": 8}, True))
    assert d["assignment_epoch"] == 8
    d = decode_value(7, record(0, [("TopicPartitions", [CG_TOPIC_PARTITIONS])],
                               {"TopicPartitions": [{"TopicId": UUID, "Partitions": [0, 5]}]}, True))
    assert d["topic_partitions"] == [{"topic_id": UUID_STR, "partitions": [0, 5]}]


def test_consumer_group_current_member_assignment_value_v0():
    schema = [("MemberEpoch", "int32"), ("PreviousMemberEpoch", "int32"), ("State", "int8"),
              ("AssignedPartitions", [CG_TOPIC_PARTITIONS]), ("PartitionsPendingRevocation", [CG_TOPIC_PARTITIONS])]
    vals = {"MemberEpoch": 4, "PreviousMemberEpoch": 3, "State": 2,
            # tag 0 AssignmentEpochs (4.3+, KIP-1251): compact []int32, one epoch per partition
            "AssignedPartitions": [{"TopicId": UUID, "Partitions": [1, 2],
                                    "_tags": {0: uvarint(3) + struct.pack(">ii", 3, 4)}}],
            "PartitionsPendingRevocation": [{"TopicId": UUID, "Partitions": [7]}]}
    d = decode_value(8, record(0, schema, vals, True))
    assert (d["member_epoch"], d["previous_member_epoch"], d["state"], d["state_name"]) == (4, 3, 2, "UNRELEASED_PARTITIONS")
    assert d["assigned_partitions"] == [{"topic_id": UUID_STR, "partitions": [1, 2], "assignment_epochs": [3, 4]}]
    assert d["partitions_pending_revocation"] == [{"topic_id": UUID_STR, "partitions": [7]}]


def test_consumer_group_regular_expression_value_v0():
    schema = [("Topics", ["string"]), ("Version", "int64"), ("Timestamp", "int64")]
    d = decode_value(16, record(0, schema, {"Topics": ["x"], "Version": 2, "Timestamp": 3}, True))
    assert (d["topics"], d["regex_version"], d["timestamp"]) == (["x"], 2, 3)


@pytest.mark.parametrize("key_type", [3, 4, 5, 6, 7, 8, 16])
def test_kip848_unknown_value_version(key_type):
    with pytest.raises(UnknownVersion):
        decode_value(key_type, record(1, [("Epoch", "int32")], {"Epoch": 1}, True))


# Share and streams values: every field of every release in test_offsets_kafka_schemas.py (written from
# Kafka's schema files), real 4.2.2 / 4.4.0 records in test_offsets_4x_capture.py.

@pytest.mark.parametrize("key_type", [9, 10, 11, 12, 13, 14, 15, 17, 19, 20, 21, 22, 23])
def test_share_and_streams_values_are_decoded_or_quarantined_never_counted_only(key_type):
    key = record(key_type, [("GroupId", "string")] + ([("MemberId", "string")] if key_type in MEMBER_KEYED else []),
                 {"GroupId": "g", "MemberId": "m"})
    value = struct.pack(">hh", 0, 0)   # version 0, then two zero bytes: too short or a null where none may be
    result = record_to_events(partition=0, offset=1, timestamp_ms=2, key=key, value=value)
    assert record_outcome(key, value, result) == (str(key_type), "0", "corrupt")
    assert isinstance(result, Quarantined)
    assert result.detail.startswith(RECORD_TYPE_NAMES[key_type] + "Value.")   # names the failing field
    with pytest.raises(UnknownVersion):
        decode_value(key_type, record(1, [("Epoch", "int32")], {"Epoch": 1}, True))
