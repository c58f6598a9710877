"""Decoders of `__consumer_offsets` keys and values (Kafka 0.9 - 4.4 layouts), one per record version.

Pure Python + stdlib. Layouts follow Kafka's
`group-coordinator/src/main/resources/common/message/*.json` schemas:

* The key's int16 prefix is the record type (0/1 OffsetCommit, 2 GroupMetadata, 3-8 and 16 KIP-848
  consumer groups, 9-15 share groups, 17 and 19-23 streams groups). Keys are never flexible.
* The value's int16 prefix is the value version. A null value is a tombstone.
* Share and streams values: streaming/offsets/share_streams.py; structs shared by the flexible
  values: streaming/offsets/structs.py. Schema changes release by release: docs/kafka-formats.md.

One decoder function per record version (Burrow style), all reading through `BinaryReader`.
Decoded dicts use snake_case keys and contain only JSON-serialisable values: raw bytes are
omitted (their sizes are kept, e.g. `subscription_size`). Topic ids (uuid) are rendered the way
Kafka prints them (`Uuid.toString()`, as in `kafka-topics.sh --describe`): URL-safe base64 of the 16
bytes without padding, 22 characters.

Error paths use Kafka's own schema field names (e.g. `GroupMetadataValue.members[1].clientHost`), so a
quarantine detail can be looked up in the schema directly. Byte offsets count from the first byte of
the key or value (the int16 version prefix is byte 0); for embedded ConsumerProtocol bytes they count
from the first byte of that embedded blob.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.offsets.records import MEMBER_KEY_TYPES, MEMBER_STATE_NAMES, OFFSET_COMMIT_TYPES, RECORD_TYPE_NAMES
from streaming.offsets.share_streams import SHARE_STREAMS_VALUE_DECODERS, target_assignment_metadata_value_v0
from streaming.offsets.structs import (
    TAGGED, int64_tag, partition_metadata_topics, top_level_tags, topic_partitions,
    topic_partitions_with_epochs
)
from streaming.offsets.wire import _I16, BinaryReader, DecodeError, UnknownRecordType, UnknownVersion

# --- keys ----------------------------------------------------------------------------------------

def _offset_commit_key(r: BinaryReader) -> dict:
    return {"group": r.string("group"), "topic": r.string("topic"), "partition": r.int32("partition")}


def _group_metadata_key(r: BinaryReader) -> dict:
    return {"group": r.string("group")}


def _group_id_key(r: BinaryReader) -> dict:
    return {"group": r.string("GroupId")}


def _group_member_key(r: BinaryReader) -> dict:
    return {"group": r.string("GroupId"), "member_id": r.string("MemberId")}


def _regular_expression_key(r: BinaryReader) -> dict:
    return {"group": r.string("GroupId"), "regular_expression": r.string("RegularExpression")}


def _key_decoder(record_type: int) -> Callable[[BinaryReader], dict]:
    if record_type in OFFSET_COMMIT_TYPES:
        return _offset_commit_key
    if record_type == 2:
        return _group_metadata_key
    if record_type == 16:
        return _regular_expression_key
    if record_type in MEMBER_KEY_TYPES:
        return _group_member_key
    return _group_id_key


def decode_key(key: bytes | None) -> dict:
    """{"type", "type_name", "group", + topic/partition, member_id or regular_expression}."""
    if key is None:
        raise DecodeError("key", 0, "record key is null")
    if len(key) < 2:
        raise DecodeError("key.type", 0, f"needs 2 bytes, only {len(key)} left")
    record_type = _I16.unpack_from(key, 0)[0]
    name = RECORD_TYPE_NAMES.get(record_type)
    if name is None:
        raise UnknownRecordType(record_type)
    r = BinaryReader(key, f"{name}Key", start=2)
    out = {"type": record_type, "type_name": name}
    out.update(_key_decoder(record_type)(r))
    if r.remaining():
        out["trailing_bytes"] = r.remaining()
    return out


# --- embedded ConsumerProtocol (classic "consumer" protocol type) ---------------------------------

def _topic_partitions_classic(r: BinaryReader) -> dict:
    return {"topic": r.string("topic"), "partitions": r.int32_array("partitions")}


def decode_consumer_subscription(data: bytes, root: str = "ConsumerProtocolSubscription") -> dict:
    """ConsumerProtocolSubscription v0-v3 (non-flexible). Versions > 3 are read with the v3 layout
    (Kafka's forward-compatibility rule); extra trailing bytes are ignored."""
    r = BinaryReader(data, root)
    version = r.int16("version")
    if version < 0:
        r.fail("version", f"negative version {version}", 0)
    out: dict = {"version": version, "topics": r.string_array("topics")}
    user_data = r.nullable_bytes("userData")
    out["user_data_size"] = None if user_data is None else len(user_data)
    if version >= 1:
        out["owned_partitions"] = r.array("ownedPartitions", _topic_partitions_classic, min_size=6)
    if version >= 2:
        out["generation_id"] = r.int32("generationId")
    if version >= 3:
        out["rack_id"] = r.nullable_string("rackId")
    return out


def decode_consumer_assignment(data: bytes, root: str = "ConsumerProtocolAssignment") -> dict:
    """ConsumerProtocolAssignment v0-v3 (same layout in every version)."""
    r = BinaryReader(data, root)
    version = r.int16("version")
    if version < 0:
        r.fail("version", f"negative version {version}", 0)
    partitions = r.array("assignedPartitions", _topic_partitions_classic, min_size=6)
    user_data = r.nullable_bytes("userData")
    return {"version": version, "assigned_partitions": partitions,
            "user_data_size": None if user_data is None else len(user_data)}


def _decode_embedded(member: dict, name: str, data: bytes, path: str) -> None:
    """Decode embedded subscription/assignment bytes into member[name]; a failure is recorded as
    member[name + "_error"] and never fails the enclosing record (the blob is client-written)."""
    if not data:
        # An empty blob carries nothing (e.g. no assignment handed out yet); not an error.
        member[name] = None
        return
    try:
        if name == "subscription":
            member[name] = decode_consumer_subscription(data, path)
        else:
            member[name] = decode_consumer_assignment(data, path)
    except DecodeError as e:
        member[name] = None
        member[name + "_error"] = f"{e} (offset within the embedded {name} bytes)"


# --- OffsetCommitValue (types 0/1) ----------------------------------------------------------------

def _offset_commit_value_v0(r: BinaryReader) -> dict:
    return {"offset": r.int64("offset"), "metadata": r.string("metadata"),
            "commit_timestamp": r.int64("commitTimestamp")}


def _offset_commit_value_v1(r: BinaryReader) -> dict:
    return {"offset": r.int64("offset"), "metadata": r.string("metadata"),
            "commit_timestamp": r.int64("commitTimestamp"),
            "expire_timestamp": r.int64("expireTimestamp")}


def _offset_commit_value_v2(r: BinaryReader) -> dict:
    # v2 dropped expireTimestamp again (KIP-211): same fields as v0.
    return _offset_commit_value_v0(r)


def _offset_commit_value_v3(r: BinaryReader) -> dict:
    return {"offset": r.int64("offset"), "leader_epoch": r.int32("leaderEpoch"),
            "metadata": r.string("metadata"), "commit_timestamp": r.int64("commitTimestamp")}


def _offset_commit_value_v4(r: BinaryReader) -> dict:
    out = {"offset": r.int64("offset"), "leader_epoch": r.int32("leaderEpoch"),
           "metadata": r.compact_string("metadata"),
           "commit_timestamp": r.int64("commitTimestamp")}

    def topic_id(tr: BinaryReader) -> None:  # 4.1+ (KAFKA-19141)
        out["topic_id"] = tr.uuid("topicId")

    top_level_tags(r, out, {0: (TAGGED, topic_id)})
    return out


# --- GroupMetadataValue (type 2) ------------------------------------------------------------------

def _group_member(r: BinaryReader, version: int, decode_embedded: bool) -> dict:
    """MemberMetadata: v0 base; v1 adds rebalanceTimeout; v3 adds groupInstanceId; v4 flexible."""
    flexible = version >= 4
    string = r.compact_string if flexible else r.string
    nullable_string = r.compact_nullable_string if flexible else r.nullable_string
    read_bytes = r.compact_bytes if flexible else r.bytes
    m: dict = {"member_id": string("memberId")}
    m["group_instance_id"] = nullable_string("groupInstanceId") if version >= 3 else None
    m["client_id"] = string("clientId")
    m["client_host"] = string("clientHost")
    m["rebalance_timeout"] = r.int32("rebalanceTimeout") if version >= 1 else None
    m["session_timeout"] = r.int32("sessionTimeout")
    subscription = read_bytes("subscription")
    assignment = read_bytes("assignment")
    if flexible:
        r.skip_tagged_fields()
    m["subscription_size"] = len(subscription)
    m["assignment_size"] = len(assignment)
    if decode_embedded:
        path = r.path()
        _decode_embedded(m, "subscription", subscription, path + ".subscription")
        _decode_embedded(m, "assignment", assignment, path + ".assignment")
    return m


def _group_metadata_common(r: BinaryReader, version: int) -> dict:
    flexible = version >= 4
    string = r.compact_string if flexible else r.string
    nullable_string = r.compact_nullable_string if flexible else r.nullable_string
    out: dict = {"protocol_type": string("protocolType"), "generation": r.int32("generation"),
                 "protocol": nullable_string("protocol"), "leader": nullable_string("leader")}
    out["current_state_timestamp"] = r.int64("currentStateTimestamp") if version >= 2 else None
    decode_embedded = out["protocol_type"] == "consumer"
    out["members"] = r.array("members", lambda mr: _group_member(mr, version, decode_embedded),
                             compact=flexible, min_size=10)
    if flexible:
        top_level_tags(r, out)
    return out


def _group_metadata_value_v0(r: BinaryReader) -> dict:
    return _group_metadata_common(r, 0)


def _group_metadata_value_v1(r: BinaryReader) -> dict:
    return _group_metadata_common(r, 1)   # members gain rebalanceTimeout


def _group_metadata_value_v2(r: BinaryReader) -> dict:
    return _group_metadata_common(r, 2)   # adds currentStateTimestamp


def _group_metadata_value_v3(r: BinaryReader) -> dict:
    return _group_metadata_common(r, 3)   # members gain groupInstanceId


def _group_metadata_value_v4(r: BinaryReader) -> dict:
    return _group_metadata_common(r, 4)   # v3 fields, flexible encoding (read-only in Kafka)


# --- KIP-848 consumer-group values (4.0-4.4 layouts; all flexible, version 0) ---------------------

def _consumer_group_metadata_value_v0(r: BinaryReader) -> dict:
    out: dict[str, Any] = {"epoch": r.int32("Epoch")}
    # tag 0 MetadataHash: 4.1+ (KIP-1101)
    top_level_tags(r, out, {0: int64_tag(out, "metadata_hash", "MetadataHash")})
    return out


def _consumer_group_partition_metadata_value_v0(r: BinaryReader) -> dict:
    return partition_metadata_topics(r)   # written up to 4.0; 4.1 keeps only the metadata hash


def _classic_member_metadata(r: BinaryReader) -> dict | None:
    """Tag 0 of ConsumerGroupMemberMetadataValue: a nullable tagged struct, written as an unsigned
    varint presence marker (0 = null, 1 = present) followed by the struct."""
    marker_at = r.pos
    marker = r.uvarint("present")
    if marker == 0:
        return None
    if marker != 1:
        r.fail("present", f"unexpected nullable-struct marker {marker}", marker_at)

    def protocol(pr: BinaryReader) -> dict:
        p: dict = {"name": pr.compact_string("Name")}
        metadata = pr.compact_bytes("Metadata")
        pr.skip_tagged_fields()
        p["metadata_size"] = len(metadata)
        # Metadata is the classic member's ConsumerProtocolSubscription for that assignor.
        _decode_embedded(p, "subscription", metadata, pr.path("Metadata"))
        return p

    cm = {"session_timeout_ms": r.int32("SessionTimeoutMs"),
          "supported_protocols": r.compact_array("SupportedProtocols", protocol, min_size=3)}
    r.skip_tagged_fields()
    return cm


def _consumer_group_member_metadata_value_v0(r: BinaryReader) -> dict:
    out: dict[str, Any] = {"instance_id": r.compact_nullable_string("InstanceId"),
           "rack_id": r.compact_nullable_string("RackId"),
           "client_id": r.compact_string("ClientId"),
           "client_host": r.compact_string("ClientHost"),
           "subscribed_topic_names": r.string_array("SubscribedTopicNames", compact=True),
           "subscribed_topic_regex": r.compact_nullable_string("SubscribedTopicRegex"),
           "rebalance_timeout_ms": r.int32("RebalanceTimeoutMs"),
           "server_assignor": r.compact_nullable_string("ServerAssignor"),
           "classic_member_metadata": None}

    def classic(tr: BinaryReader) -> None:
        out["classic_member_metadata"] = _classic_member_metadata(tr)

    top_level_tags(r, out, {0: ("ClassicMemberMetadata", classic)})
    return out


def _consumer_group_target_assignment_metadata_value_v0(r: BinaryReader) -> dict:
    # tag 0 AssignmentTimestamp: 4.3+ (KIP-1263), "assignment_timestamp" when written
    return target_assignment_metadata_value_v0(r)


def _consumer_group_target_assignment_member_value_v0(r: BinaryReader) -> dict:
    out = {"topic_partitions": r.compact_array("TopicPartitions", topic_partitions, min_size=18)}
    top_level_tags(r, out)
    return out


def _consumer_group_current_member_assignment_value_v0(r: BinaryReader) -> dict:
    out: dict = {"member_epoch": r.int32("MemberEpoch"),
                 "previous_member_epoch": r.int32("PreviousMemberEpoch"),
                 "state": r.int8("State")}
    out["state_name"] = MEMBER_STATE_NAMES.get(out["state"], "UNKNOWN")
    # TopicPartitions tag 0 AssignmentEpochs: 4.3+ (KIP-1251), "assignment_epochs" when written
    out["assigned_partitions"] = r.compact_array("AssignedPartitions", topic_partitions_with_epochs,
                                                 min_size=18)
    out["partitions_pending_revocation"] = r.compact_array("PartitionsPendingRevocation",
                                                           topic_partitions_with_epochs, min_size=18)
    top_level_tags(r, out)
    return out


def _consumer_group_regular_expression_value_v0(r: BinaryReader) -> dict:
    out = {"topics": r.string_array("Topics", compact=True),
           "regex_version": r.int64("Version"), "timestamp": r.int64("Timestamp")}
    top_level_tags(r, out)
    return out


_OFFSET_COMMIT_VALUES: dict[int, Callable[[BinaryReader], dict]] = {
    0: _offset_commit_value_v0, 1: _offset_commit_value_v1, 2: _offset_commit_value_v2, 3: _offset_commit_value_v3,
    4: _offset_commit_value_v4}
VALUE_DECODERS: dict[int, dict[int, Callable[[BinaryReader], dict]]] = {
    0: _OFFSET_COMMIT_VALUES,
    1: _OFFSET_COMMIT_VALUES,
    2: {0: _group_metadata_value_v0, 1: _group_metadata_value_v1, 2: _group_metadata_value_v2,
        3: _group_metadata_value_v3, 4: _group_metadata_value_v4},
    3: {0: _consumer_group_metadata_value_v0},
    4: {0: _consumer_group_partition_metadata_value_v0},
    5: {0: _consumer_group_member_metadata_value_v0},
    6: {0: _consumer_group_target_assignment_metadata_value_v0},
    7: {0: _consumer_group_target_assignment_member_value_v0},
    8: {0: _consumer_group_current_member_assignment_value_v0},
    16: {0: _consumer_group_regular_expression_value_v0},
    **SHARE_STREAMS_VALUE_DECODERS,
}


def decode_value(key_type: int, value: bytes) -> dict:
    """{"version": v, ...fields, "trailing_bytes": n}. Raises UnknownRecordType, UnknownVersion or
    DecodeError."""
    name = RECORD_TYPE_NAMES.get(key_type)
    if name is None:
        raise UnknownRecordType(key_type)
    if value is None:
        raise DecodeError(f"{name}Value", 0, "value is null (tombstone); nothing to decode")
    if len(value) < 2:
        raise DecodeError(f"{name}Value.version", 0, f"needs 2 bytes, only {len(value)} left")
    version = _I16.unpack_from(value, 0)[0]
    if version < 0:
        raise UnknownVersion(key_type, version)
    decoder = VALUE_DECODERS[key_type].get(version)
    if decoder is None:
        raise UnknownVersion(key_type, version)
    r = BinaryReader(value, f"{name}Value", start=2)
    out = {"version": version}
    out.update(decoder(r))
    out["trailing_bytes"] = r.remaining()  # tolerated: newer writers may append fields
    return out


def decode_record(key: bytes | None, value: bytes | None) -> dict:
    """{"key": decoded key, "value": decoded value or None, "tombstone": bool}; JSON-serialisable.
    Raises DecodeError (or a subclass) when the key is null or either part cannot be decoded."""
    k = decode_key(key)
    if value is None:
        return {"key": k, "value": None, "tombstone": True}
    return {"key": k, "value": decode_value(k["type"], value), "tombstone": False}

