"""The record types of `__consumer_offsets`, tabled once: names, key shapes, member states,
and the event kind each type becomes (streaming/offsets/record_events.py and the vectorised tiers
both read these tables)."""
from __future__ import annotations

from state import events as E
from state.vocabulary import Protocol

# Record type (= key version) -> record name. Key struct is name + "Key", value struct name + "Value".
RECORD_TYPE_NAMES: dict[int, str] = {
    0: "OffsetCommit",  # written only by <= 0.9 brokers; 4.1 calls it LegacyOffsetCommit
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    9: "ShareGroupPartitionMetadata",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
    17: "StreamsGroupMetadata",
    # 18 was allocated during development and never shipped: treated as unknown.
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}
OFFSET_COMMIT_TYPES = frozenset({0, 1})


def is_offset_commit_key(key: bytes | None) -> bool:
    """Is this `__consumer_offsets` key an offset commit's (record type 0 or 1)?"""
    return key is not None and len(key) >= 2 and int.from_bytes(key[:2], "big") in OFFSET_COMMIT_TYPES


# Group type of each KIP-848-family record type (events carry it as data["group_type"]).
GROUP_TYPE_BY_TYPE: dict[int, str] = {**dict.fromkeys((3, 4, 5, 6, 7, 8, 16), Protocol.CONSUMER),
                                      **dict.fromkeys(range(9, 16), Protocol.SHARE),
                                      **dict.fromkeys((17, 19, 20, 21, 22, 23), Protocol.STREAMS)}
# Key types whose key is (GroupId, MemberId); all other >= 3 types except 16 are (GroupId).
MEMBER_KEY_TYPES = frozenset({5, 7, 8, 10, 13, 14, 19, 21, 22})

# State of consumer (type 8) and share (type 14) members: org.apache.kafka.coordinator.group.modern.MemberState.
MEMBER_STATE_NAMES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS",
                      127: "UNKNOWN"}
# State of streams members (type 22): org.apache.kafka.coordinator.group.streams.MemberState, 4.1-4.4.
# Not the same codes: STABLE is 1 here.
STREAMS_MEMBER_STATE_NAMES = {1: "STABLE", 2: "UNREVOKED_TASKS", 3: "UNRELEASED_TASKS", 127: "UNKNOWN"}


# Event kind of each record type (record_events.py; the vectorised tiers use the same table).
# Types 0/1 become offset_commit / offset_tombstone, 2 group_metadata / group_tombstone, the
# others (4, 9, 15, 16, 23) cg_other. Share and streams records reuse the consumer kinds, told
# apart by data["group_type"].
KIND_BY_TYPE: dict[int, str] = {3: E.CG_EPOCH, 5: E.CG_MEMBER, 6: E.CG_TARGET_EPOCH, 7: E.CG_TARGET_MEMBER,
                                 8: E.CG_MEMBER_ASSIGNMENT,
                                 10: E.CG_MEMBER, 11: E.CG_EPOCH, 12: E.CG_TARGET_EPOCH, 13: E.CG_TARGET_MEMBER,
                                 14: E.CG_MEMBER_ASSIGNMENT,
                                 17: E.CG_EPOCH, 19: E.CG_MEMBER, 20: E.CG_TARGET_EPOCH, 21: E.CG_TARGET_MEMBER,
                                 22: E.CG_MEMBER_ASSIGNMENT}
OFFSETS_SOURCE_PREFIX = "__consumer_offsets-"   # source id of a partition's records
