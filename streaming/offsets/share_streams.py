"""Decoders of the share-group (types 9-15, KIP-932) and streams-group (types 17, 19-23, KIP-1071)
values of `__consumer_offsets`, one per record version, all fields.

Layouts from Kafka's own schemas, `group-coordinator/src/main/resources/common/message/<Name>Value.json`,
read at 4.0.2, 4.1.2, 4.2.1 (= 4.2.2), 4.3.1 and 4.4.0 (the `kafka-group-coordinator` jars; the table
of what changed when is in docs/kafka-formats.md). Every value is version 0 and flexible; fields
added later are tagged, except two early-access changes of 4.1 to share records written by 4.0
(share groups were a preview there) that kept version 0:

* ShareGroupMetadataValue: 4.0 {Epoch}; 4.1+ {Epoch, MetadataHash int64} (not tagged). Told apart by
  size: a 4.1+ value always has at least 9 bytes after the epoch (the hash and the tag count).
* ShareGroupStatePartitionMetadataValue: 4.0 {InitializedTopics, DeletingTopics}; 4.1+ adds
  InitializingTopics in front. The 4.1 layout is tried first; a 4.0 value fails it (its
  DeletingTopics elements have no Partitions array) and is read with the 4.0 layout.
  Both 4.0 readings are marked `"layout": "4.0"`.
* ShareGroupPartitionMetadata (type 9) exists only in 4.0 (4.1 dropped it; its loader skips it).

Decoded dicts use snake_case of the schema's field names; tagged fields appear only when the
record carries them; unknown tags are listed in "unknown_tags".
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.offsets.records import MEMBER_STATE_NAMES, STREAMS_MEMBER_STATE_NAMES
from streaming.offsets.structs import (
    TAGGED, int32_tag, int64_tag, key_value, partition_metadata_topics, task_ids, task_ids_with_epochs, top_level_tags,
    topic_partitions
)
from streaming.offsets.wire import BinaryReader, DecodeError

# --- share groups ---------------------------------------------------------------------------------

def _share_group_partition_metadata_value_v0(r: BinaryReader) -> dict:
    """Type 9, 4.0 only: the layout of ConsumerGroupPartitionMetadataValue."""
    return partition_metadata_topics(r)


def _share_group_member_metadata_value_v0(r: BinaryReader) -> dict:
    """Type 10 (4.0-4.4 unchanged)."""
    out: dict[str, Any] = {"rack_id": r.compact_nullable_string("RackId"),
                           "client_id": r.compact_string("ClientId"),
                           "client_host": r.compact_string("ClientHost"),
                           "subscribed_topic_names": r.string_array("SubscribedTopicNames", compact=True)}
    top_level_tags(r, out)
    return out


def _share_group_metadata_value_v0(r: BinaryReader) -> dict:
    """Type 11: 4.1+ {Epoch, MetadataHash}; 4.0 {Epoch} (see the module doc)."""
    out: dict[str, Any] = {"epoch": r.int32("Epoch")}
    if r.remaining() >= 9:
        out["metadata_hash"] = r.int64("MetadataHash")
    else:
        out["layout"] = "4.0"
    top_level_tags(r, out)
    return out


def target_assignment_metadata_value_v0(r: BinaryReader) -> dict:
    """Types 6, 12 and 20: {AssignmentEpoch; tag 0 AssignmentTimestamp int64 (4.3+, KIP-1263: the
    time at which the assignment calculation finished)}."""
    out: dict[str, Any] = {"assignment_epoch": r.int32("AssignmentEpoch")}
    top_level_tags(r, out, {0: int64_tag(out, "assignment_timestamp", "AssignmentTimestamp")})
    return out


def _share_group_target_assignment_member_value_v0(r: BinaryReader) -> dict:
    """Type 13."""
    out = {"topic_partitions": r.compact_array("TopicPartitions", topic_partitions, min_size=18)}
    top_level_tags(r, out)
    return out


def _share_group_current_member_assignment_value_v0(r: BinaryReader) -> dict:
    """Type 14. State: org.apache.kafka.coordinator.group.modern.MemberState (as consumer groups:
    0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS, 127 UNKNOWN)."""
    out: dict[str, Any] = {"member_epoch": r.int32("MemberEpoch"),
                           "previous_member_epoch": r.int32("PreviousMemberEpoch"),
                           "state": r.int8("State")}
    out["state_name"] = MEMBER_STATE_NAMES.get(out["state"], "UNKNOWN")
    out["assigned_partitions"] = r.compact_array("AssignedPartitions", topic_partitions, min_size=18)
    top_level_tags(r, out)
    return out


def _topic_partitions_info(r: BinaryReader) -> dict:
    t = {"topic_id": r.uuid("TopicId"), "topic_name": r.compact_string("TopicName"),
         "partitions": r.int32_array("Partitions", compact=True)}
    r.skip_tagged_fields()
    return t


def _topic_info(r: BinaryReader) -> dict:
    t = {"topic_id": r.uuid("TopicId"), "topic_name": r.compact_string("TopicName")}
    r.skip_tagged_fields()
    return t


def _share_state_partition_metadata(r: BinaryReader, initializing: bool) -> dict:
    out: dict[str, Any] = {}
    if initializing:
        out["initializing_topics"] = r.compact_array("InitializingTopics", _topic_partitions_info, min_size=19)
    out["initialized_topics"] = r.compact_array("InitializedTopics", _topic_partitions_info, min_size=19)
    out["deleting_topics"] = r.compact_array("DeletingTopics", _topic_info, min_size=18)
    top_level_tags(r, out)
    return out


def _share_group_state_partition_metadata_value_v0(r: BinaryReader) -> dict:
    """Type 15: the 4.1+ layout, else the 4.0 one (see the module doc)."""
    root, start = r.path(), r.pos
    r41 = BinaryReader(r.buf, root, start=start, end=r.end)
    try:
        out = _share_state_partition_metadata(r41, initializing=True)
        r.pos = r41.pos
        return out
    except DecodeError as error41:
        r40 = BinaryReader(r.buf, root, start=start, end=r.end)
        try:
            out = _share_state_partition_metadata(r40, initializing=False)
        except DecodeError:
            raise error41 from None
        if r40.remaining():
            raise error41 from None
        out["layout"] = "4.0"
        r.pos = r40.pos
        return out


# --- streams groups -------------------------------------------------------------------------------

def _streams_group_metadata_value_v0(r: BinaryReader) -> dict:
    """Type 17: {Epoch, MetadataHash}; tags 0 ValidatedTopologyEpoch and 1 LastAssignmentConfigs
    (4.2+), 2 StoredDescriptionTopologyEpoch and 3 FailedDescriptionTopologyEpoch (4.4+)."""
    out: dict[str, Any] = {"epoch": r.int32("Epoch"), "metadata_hash": r.int64("MetadataHash")}

    def configs(tr: BinaryReader) -> None:
        out["last_assignment_configs"] = tr.compact_array("LastAssignmentConfigs", key_value(), nullable=True,
                                                          min_size=3)

    top_level_tags(r, out, {
        0: int32_tag(out, "validated_topology_epoch", "ValidatedTopologyEpoch"),
        1: (TAGGED, configs),
        2: int32_tag(out, "stored_description_topology_epoch", "StoredDescriptionTopologyEpoch"),
        3: int32_tag(out, "failed_description_topology_epoch", "FailedDescriptionTopologyEpoch")})
    return out


def _endpoint(r: BinaryReader) -> dict | None:
    """StreamsGroupMemberMetadataValue.UserEndpoint: a nullable struct outside the tagged fields,
    an int8 marker (negative = null) and then {Host string, Port uint16}."""
    marker = r.int8("UserEndpoint")
    if marker < 0:
        return None
    r.push("UserEndpoint")
    ep = {"host": r.compact_string("Host"), "port": r.uint16("Port")}
    r.skip_tagged_fields()
    r.pop()
    return ep


def _streams_group_member_metadata_value_v0(r: BinaryReader) -> dict:
    """Type 19 (4.1-4.4 unchanged; InstanceId set by static members from 4.4)."""
    out: dict[str, Any] = {"instance_id": r.compact_nullable_string("InstanceId"),
                           "rack_id": r.compact_nullable_string("RackId"),
                           "client_id": r.compact_string("ClientId"),
                           "client_host": r.compact_string("ClientHost"),
                           "rebalance_timeout_ms": r.int32("RebalanceTimeoutMs"),
                           "topology_epoch": r.int32("TopologyEpoch"),
                           "process_id": r.compact_string("ProcessId")}
    out["user_endpoint"] = _endpoint(r)
    out["client_tags"] = r.compact_array("ClientTags", key_value(), min_size=3)
    top_level_tags(r, out)
    return out


def _streams_group_target_assignment_member_value_v0(r: BinaryReader) -> dict:
    """Type 21."""
    out = {name: r.compact_array(field, task_ids, min_size=3)
           for name, field in (("active_tasks", "ActiveTasks"), ("standby_tasks", "StandbyTasks"),
                               ("warmup_tasks", "WarmupTasks"))}
    top_level_tags(r, out)
    return out


_CURRENT_TASKS = (("active_tasks", "ActiveTasks"), ("standby_tasks", "StandbyTasks"), ("warmup_tasks", "WarmupTasks"),
                  ("active_tasks_pending_revocation", "ActiveTasksPendingRevocation"),
                  ("standby_tasks_pending_revocation", "StandbyTasksPendingRevocation"),
                  ("warmup_tasks_pending_revocation", "WarmupTasksPendingRevocation"))


def _streams_group_current_member_assignment_value_v0(r: BinaryReader) -> dict:
    """Type 22. TaskIds carry tag 0 AssignmentEpochs from 4.2. State:
    org.apache.kafka.coordinator.group.streams.MemberState, which differs from consumer and share
    groups: 1 STABLE, 2 UNREVOKED_TASKS, 3 UNRELEASED_TASKS, 127 UNKNOWN (4.1-4.4)."""
    out: dict[str, Any] = {"member_epoch": r.int32("MemberEpoch"),
                           "previous_member_epoch": r.int32("PreviousMemberEpoch"),
                           "state": r.int8("State")}
    out["state_name"] = STREAMS_MEMBER_STATE_NAMES.get(out["state"], "UNKNOWN")
    for name, field in _CURRENT_TASKS:
        out[name] = r.compact_array(field, task_ids_with_epochs, min_size=3)
    top_level_tags(r, out)
    return out


def _topology_topic_info(r: BinaryReader) -> dict:
    t = {"name": r.compact_string("Name"), "partitions": r.int32("Partitions"),
         "replication_factor": r.int16("ReplicationFactor"),
         "topic_configs": r.compact_array("TopicConfigs", key_value("key", "value"), min_size=3)}
    r.skip_tagged_fields()
    return t


def _int16s(field: str) -> Callable[[BinaryReader], list]:
    def read(r: BinaryReader) -> list:
        return r.compact_array(field, lambda ir: ir.int16(field), min_size=2) or []
    return read


def _copartition_group(r: BinaryReader) -> dict:
    g = {"source_topics": _int16s("SourceTopics")(r), "source_topic_regex": _int16s("SourceTopicRegex")(r),
         "repartition_source_topics": _int16s("RepartitionSourceTopics")(r)}
    r.skip_tagged_fields()
    return g


def _subtopology(r: BinaryReader) -> dict:
    s = {"subtopology_id": r.compact_string("SubtopologyId"),
         "source_topics": r.string_array("SourceTopics", compact=True),
         "source_topic_regex": r.string_array("SourceTopicRegex", compact=True),
         "state_changelog_topics": r.compact_array("StateChangelogTopics", _topology_topic_info, min_size=9),
         "repartition_sink_topics": r.string_array("RepartitionSinkTopics", compact=True),
         "repartition_source_topics": r.compact_array("RepartitionSourceTopics", _topology_topic_info, min_size=9),
         "copartition_groups": r.compact_array("CopartitionGroups", _copartition_group, min_size=4)}
    r.skip_tagged_fields()
    return s


def _streams_group_topology_value_v0(r: BinaryReader) -> dict:
    """Type 23 (4.1-4.4 unchanged)."""
    out: dict[str, Any] = {"epoch": r.int32("Epoch"),
                           "subtopologies": r.compact_array("Subtopologies", _subtopology, min_size=8)}
    top_level_tags(r, out)
    return out


SHARE_STREAMS_VALUE_DECODERS: dict[int, dict[int, Callable[[BinaryReader], dict]]] = {
    9: {0: _share_group_partition_metadata_value_v0},
    10: {0: _share_group_member_metadata_value_v0},
    11: {0: _share_group_metadata_value_v0},
    12: {0: target_assignment_metadata_value_v0},
    13: {0: _share_group_target_assignment_member_value_v0},
    14: {0: _share_group_current_member_assignment_value_v0},
    15: {0: _share_group_state_partition_metadata_value_v0},
    17: {0: _streams_group_metadata_value_v0},
    19: {0: _streams_group_member_metadata_value_v0},
    20: {0: target_assignment_metadata_value_v0},
    21: {0: _streams_group_target_assignment_member_value_v0},
    22: {0: _streams_group_current_member_assignment_value_v0},
    23: {0: _streams_group_topology_value_v0},
}
