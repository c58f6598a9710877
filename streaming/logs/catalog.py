"""The catalog of group-coordinator messages: one entry per message template and Kafka version
range, and the index that picks the candidate entries for a message body.

Templates from docs/broker-logs.md and Kafka's own source: the INFO/WARN/ERROR calls of every
apache/kafka release tag 1.1.0-3.8.0, 3.9.0-rc3 and trunk of 2024-10-25 (Scala coordinator, Java
group coordinator and runtime) were audited against it (docs/broker-logs.md, "Catalog audit").
Named regex groups map onto event fields: `group`/`groups`, `generation`, `member_id`, `reason`
become Event attributes, every other named group goes into `Event.data` (converted by
values.FIELD_CONVERTERS). Supporting a new Kafka wording means adding one entry.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from state.events import (
    ASSIGNMENT_RECEIVED, CONSUMER_MEMBER_FENCED, CONSUMER_MEMBER_JOINED, CONSUMER_MEMBER_LEFT, GROUP_CONVERTED,
    GROUP_DEAD, GROUP_DELETED, GROUP_EMPTY, GROUP_EPOCH_BUMPED, GROUP_LOADED, GROUP_UNLOADED, JOIN_COMPLETE,
    MEMBER_CREATED, MEMBER_FAILED, MEMBER_LEFT, MEMBERS_NOT_JOINED, MEMBERS_NOT_SYNCED, PENDING_MEMBER_EXPIRED,
    PREPARE_REBALANCE, STATIC_MEMBER_REPLACED, TARGET_ASSIGNMENT
)
from streaming.logs.reasons import classify_rebalance_reason
from streaming.logs.values import optional_value


def _derive_prepare_rebalance(data: dict[str, Any], attributes: dict[str, Any]) -> None:
    data.update(classify_rebalance_reason(attributes["reason"]))


_MEMBER_METADATA_RE = re.compile(
    r"MemberMetadata\(memberId=(?P<member_id>.*?), groupInstanceId=(?P<iid>None|Some\(.*?\)|null|.*?), "
    r"clientId=(?P<client_id>.*?), clientHost=(?P<client_host>.*?), "
)


def _derive_member_metadata(data: dict[str, Any], attributes: dict[str, Any]) -> None:
    """Scala 3.x prints the whole MemberMetadata; pull out the member id, instance id and client."""
    m = _MEMBER_METADATA_RE.match(data.pop("member_metadata", ""))
    if m is not None:
        attributes["member_id"] = m.group("member_id")
        data["group_instance_id"] = optional_value(m.group("iid"))
        data["client_id"] = m.group("client_id")
        data["client_host"] = m.group("client_host")


@dataclass(frozen=True, eq=False)
class CatalogEntry:
    """One coordinator message template.

    pattern    is fullmatched against the message body (after the `[GroupCoordinator ...]` prefix).
    anchor     is a literal every matching body contains; tested first because `in` is much
               cheaper than a failed regex.
    family     "scala" (logger kafka.coordinator.group.*), "java" (org.apache.kafka.coordinator.*)
               or "both" when the two coordinators print the same text.
    kind       the Event kind, or None for recognised lines that carry nothing we use.
    data       constant data added to every event of this entry.
    derive     optional hook(data, attributes) that rewrites both in place; attributes holds the
               Event's generation / member_id / reason.
    parse_at_debug  the template is logged at DEBUG in some versions and that DEBUG line is the
               only record of the fact (not a duplicate of an INFO line), so DEBUG lines are matched.
    """
    name: str
    family: str
    versions: str
    kind: str | None
    pattern: re.Pattern
    anchor: str
    data: Mapping[str, Any] = field(default_factory=dict)
    derive: Callable[[dict[str, Any], dict[str, Any]], None] | None = None
    parse_at_debug: bool = False


def _entry(name: str, family: str, versions: str, kind: str | None, pattern: str, anchor: str,
           **options: Any) -> CatalogEntry:
    compiled = re.compile(pattern)
    if anchor not in pattern.replace("\\", ""):
        raise ValueError(f"catalog entry {name}: anchor {anchor!r} is not literal text of the pattern")
    return CatalogEntry(name, family, versions, kind, compiled, anchor, **options)


# Building blocks. Group ids are arbitrary strings: unbracketed they are matched lazily up to the
# literal that follows; inside `[GroupId g]` they stop at the first `]`.
_G = r"(?P<group>.+?)"
_GB = r"(?P<group>[^\]]+)"
_M = r"(?P<member_id>\S+)"
_GEN = r"(?P<generation>-?\d+)"
_ST = r"(?P<state>\w+)"
_IID = r"(?P<group_instance_id>.+?)"
_OP = r"\(__consumer_offsets-(?P<offsets_partition>\d+)\)"
_LEAVE = r"has left group through explicit `LeaveGroup` request; client reason: (?P<client_reason>.*)"

_DYNAMIC = {"static": False, "group_instance_id": None}
_PREPARE = {"derive": _derive_prepare_rebalance}

# Order matters only for speed (frequent messages first); the patterns are mutually exclusive
# (tests/unit/test_broker_log.py checks that every sample matches exactly one entry).
CATALOG: list[CatalogEntry] = [
    # --- classic protocol: rebalance lifecycle (§2.1, §2.4, §2.5) -----------------------------
    _entry("scala_prepare_rebalance", "scala", "2.1-4.0", PREPARE_REBALANCE,
           rf"Preparing to rebalance group {_G} in state {_ST} with old generation {_GEN} {_OP} "
           r"\(reason: (?P<reason>.*)\)", "Preparing to rebalance group ", **_PREPARE),
    _entry("scala_prepare_rebalance_no_reason", "scala", "1.1-2.0", PREPARE_REBALANCE,
           rf"Preparing to rebalance group {_G} with old generation {_GEN} {_OP}",
           "Preparing to rebalance group ", **_PREPARE),
    _entry("java_prepare_rebalance", "java", "3.7-4.2", PREPARE_REBALANCE,
           # the reason keeps its own trailing '.'; the final '.' after ')' ends the sentence
           rf"Preparing to rebalance group {_G} in state {_ST} with old generation {_GEN} "
           r"\(reason: (?P<reason>.*)\)\.", "Preparing to rebalance group ", **_PREPARE),
    _entry("scala_stabilized", "scala", "1.1-2.7", JOIN_COMPLETE,
           rf"Stabilized group {_G} generation {_GEN} {_OP}", "Stabilized group "),
    _entry("scala_stabilized_with_members", "scala", "2.8-4.0", JOIN_COMPLETE,
           rf"Stabilized group {_G} generation {_GEN} {_OP} with (?P<members>\d+) members",
           "Stabilized group "),
    _entry("java_stabilized", "java", "3.7-4.2", JOIN_COMPLETE,
           rf"Stabilized group {_G} generation {_GEN} with (?P<members>\d+) members\.",
           "Stabilized group "),
    _entry("scala_assignment_received", "scala", "1.1-2.7", ASSIGNMENT_RECEIVED,
           rf"Assignment received from leader for group {_G} for generation {_GEN}",
           "Assignment received from leader for group "),
    _entry("scala_assignment_received_counts", "scala", "2.8", ASSIGNMENT_RECEIVED,
           rf"Assignment received from leader for group {_G} for generation {_GEN}\. "
           r"The group has (?P<members>\d+) members, (?P<static_members>\d+) of which are static\.",
           "Assignment received from leader for group "),
    _entry("assignment_received_with_leader", "both", "scala 3.0-4.0, java 3.7-4.2", ASSIGNMENT_RECEIVED,
           rf"Assignment received from leader {_M} for group {_G} for generation {_GEN}\. "
           r"The group has (?P<members>\d+) members, (?P<static_members>\d+) of which are static\.",
           "Assignment received from leader "),
    _entry("scala_group_empty", "scala", "1.1-4.0", GROUP_EMPTY,
           rf"Group {_G} with generation {_GEN} is now empty {_OP}", " is now empty ("),
    _entry("java_group_empty", "java", "3.7-4.2", GROUP_EMPTY,
           rf"Group {_G} with generation {_GEN} is now empty\.", " is now empty."),

    # --- classic protocol: members joining (§2.3, §2.7) ----------------------------------------
    _entry("scala_new_member_id", "scala", "2.5-2.8 (DEBUG), 3.0-4.0", MEMBER_CREATED,
           rf"Dynamic member with unknown member id joins group {_G} in {_ST} state\. "
           rf"Created a new member id {_M} and request the member to rejoin with this id\.",
           " and request the member to rejoin with this id.",
           data={**_DYNAMIC, "pending": True}, parse_at_debug=True),
    _entry("scala_new_member_id_2_4", "scala", "2.4 (DEBUG)", MEMBER_CREATED,
           rf"Dynamic member with unknown member id rejoins group {_G} in {_ST} state\. "
           rf"Created a new member id {_M} and request the member to rejoin with this id\.",
           " and request the member to rejoin with this id.",
           data={**_DYNAMIC, "pending": True}, parse_at_debug=True),
    _entry("java_new_member_id", "java", "3.7-4.2", MEMBER_CREATED,
           rf"Dynamic member with unknown member id joins group {_G} in {_ST} state\. "
           rf"Created a new member id {_M} and requesting the member to rejoin with this id\.",
           " and requesting the member to rejoin with this id.",
           data={**_DYNAMIC, "pending": True}),
    _entry("pending_dynamic_member_added", "both",
           "scala 3.0-3.9 (DEBUG), 4.0; java 3.7-3.9 (DEBUG), 4.0+", MEMBER_CREATED,
           rf"Pending dynamic member with id {_M} joins group {_G} in {_ST} state\. Adding to the group now\.",
           "Pending dynamic member with id ", data={**_DYNAMIC, "pending": False}, parse_at_debug=True),
    _entry("scala_member_added_unknown_id", "scala", "2.5-4.0", MEMBER_CREATED,
           rf"(?P<static>Static|Dynamic) Member with unknown member id joins group {_G} in {_ST} state\. "
           rf"Created a new member id {_M} for this member and add to the group\.",
           " Member with unknown member id joins group ", data={"pending": False}),
    _entry("java_member_added_unknown_id", "java", "3.7-4.2", MEMBER_CREATED,
           rf"Dynamic member with unknown member id joins group {_G} in state {_ST}\. "
           rf"Created a new member id {_M} and added the member to the group\.",
           " and added the member to the group.", data={**_DYNAMIC, "pending": False}),
    _entry("scala_member_added_specific_id", "scala", "2.5-2.8 (DEBUG)", MEMBER_CREATED,
           rf"Dynamic Member with specific member id {_M} joins group {_G} in {_ST} state\. "
           r"Adding to the group now\.", "Dynamic Member with specific member id ",
           data={**_DYNAMIC, "pending": False}, parse_at_debug=True),
    _entry("scala_static_member_added", "scala", "2.5-2.8", MEMBER_CREATED,
           rf"Adding new static member {_IID} to group {_G} with member id {_M}\.",
           "Adding new static member ", data={"static": True, "pending": False}),
    _entry("scala_static_member_added_3_0", "scala", "3.0-4.0", MEMBER_CREATED,
           rf"Static member with groupInstanceId={_IID} and unknown member id joins group {_G} in {_ST} "
           rf"state\. Created a new member id {_M} for this member and add to the group\.",
           " for this member and add to the group.", data={"static": True, "pending": False}),
    _entry("java_static_member_added", "java", "3.7-4.2", MEMBER_CREATED,
           rf"Static member with groupInstanceId={_IID} and unknown member id joins group {_G} in {_ST} "
           rf"state\. Created a new member id {_M} for this member and added to the group\.",
           " for this member and added to the group.", data={"static": True, "pending": False}),
    _entry("scala_static_member_replaced", "scala", "2.5-2.8", STATIC_MEMBER_REPLACED,
           rf"Static member {_IID} of group {_G} with unknown member id rejoins, assigning new member id "
           rf"{_M}, while old member id (?P<old_member_id>\S+) will be removed\.",
           " with unknown member id rejoins, assigning new member id "),
    _entry("static_member_replaced", "both", "scala 3.0-4.0, java 3.7-4.2", STATIC_MEMBER_REPLACED,
           rf"Static member with groupInstanceId={_IID} and unknown member id joins group {_G} in {_ST} "
           r"state\. Replacing previously mapped member (?P<old_member_id>\S+) with this groupInstanceId\.",
           "Replacing previously mapped member "),
    # 2.3-2.4 names no group, so it cannot become an event.
    _entry("scala_static_member_replaced_no_group", "scala", "2.3-2.4", None,
           r"Static member .+? with unknown member id rejoins, assigning new member id \S+, "
           r"while old member \S+ will be removed\.", " with unknown member id rejoins, assigning new"),

    # --- classic protocol: members leaving / failing (§2.4, §2.6) -------------------------------
    _entry("scala_member_failed", "scala", "1.1-4.0", MEMBER_FAILED,
           rf"Member {_M} in group {_G} has failed, removing it from the group",
           " has failed, removing it from the group"),
    _entry("java_member_failed", "java", "3.7-4.2", MEMBER_FAILED,
           rf"Member {_M} in group {_G} has failed, removing it from the group\.",
           " has failed, removing it from the group."),
    _entry("scala_member_left_2_4", "scala", "2.4-2.8", MEMBER_LEFT,
           rf"Member\[group\.instance\.id {_IID}, member\.id (?P<member_id>.*?)\] in group {_G} has left, "
           r"removing it from the group", "Member[group.instance.id ", data={"pending": False}),
    _entry("scala_member_left_2_0", "scala", "1.1-2.1 (DEBUG), 2.2-2.3", MEMBER_LEFT,
           rf"Member {_M} in group {_G} has left, removing it from the group",
           " has left, removing it from the group", data={"pending": False}, parse_at_debug=True),
    _entry("scala_member_left_3_2", "scala", "3.2-4.0", MEMBER_LEFT,
           rf"Member (?P<member_metadata>MemberMetadata\(.*\)) has left group {_G} through explicit "
           r"`LeaveGroup`; client reason: (?P<client_reason>.*)", "through explicit `LeaveGroup`; client",
           data={"pending": False}, derive=_derive_member_metadata),
    _entry("scala_member_left_3_0", "scala", "3.0-3.1", MEMBER_LEFT,
           rf"Member (?P<member_metadata>MemberMetadata\(.*\)) has left group {_G} through explicit "
           r"`LeaveGroup` request", "through explicit `LeaveGroup` request",
           data={"pending": False}, derive=_derive_member_metadata),
    _entry("java_member_left", "java", "3.7-4.2", MEMBER_LEFT,
           rf"\[Group {_GB}\] Member {_M} {_LEAVE}", " has left group through explicit `LeaveGroup`",
           data={"pending": False}),
    _entry("scala_pending_member_leaving", "scala", "2.2-2.8", MEMBER_LEFT,
           rf"Pending member {_M} is leaving group {_G}\.", " is leaving group ", data={"pending": True}),
    _entry("scala_pending_member_left", "scala", "3.0-4.0", MEMBER_LEFT,
           rf"Pending member with memberId={_M} has left group {_G} through explicit `LeaveGroup` request",
           "Pending member with memberId=", data={"pending": True}),
    _entry("java_pending_member_left", "java", "3.7-4.2", MEMBER_LEFT,
           rf"\[Group {_GB}\] Pending member {_M} {_LEAVE}", "] Pending member ", data={"pending": True}),
    _entry("pending_member_expired", "both", "scala 2.2-4.0, java 3.7-4.2", PENDING_MEMBER_EXPIRED,
           rf"Pending member {_M} in group {_G} has been removed after session timeout expiration\.",
           " has been removed after session timeout expiration."),
    _entry("scala_members_not_joined_2_7", "scala", "2.7", MEMBERS_NOT_JOINED,
           rf"Group {_G} remove dynamic members who haven't joined: (?P<member_ids>.*)",
           " remove dynamic members who haven't joined: "),
    _entry("members_not_joined", "both", "scala 2.8-4.0, java 3.7-4.2", MEMBERS_NOT_JOINED,
           rf"Group {_G} removed dynamic members who haven't joined: (?P<member_ids>.*)",
           " removed dynamic members who haven't joined: "),
    _entry("scala_members_not_synced", "scala", "2.8.1-4.0 (DEBUG)", MEMBERS_NOT_SYNCED,
           rf"Group {_G} removed members who haven't sent their sync request: (?P<member_ids>.*)",
           " removed members who haven't sent their sync request", parse_at_debug=True),
    _entry("java_members_not_synced", "java", "3.7-4.2 (DEBUG)", MEMBERS_NOT_SYNCED,
           rf"Group {_G} removed members who haven't sent their sync requests: (?P<member_ids>.*)",
           " removed members who haven't sent their sync request", parse_at_debug=True),

    # --- group load / unload / expiry / deletion (§2.8, §2.9) -----------------------------------
    _entry("scala_group_loading", "scala", "1.1-4.0", GROUP_LOADED,
           rf"Loading group metadata for {_G} with generation {_GEN}", "Loading group metadata for "),
    _entry("scala_group_unloading", "scala", "1.1-4.0", GROUP_UNLOADED,
           rf"Unloading group metadata for {_G} with generation {_GEN}", "Unloading group metadata for "),
    _entry("java_group_loaded", "java", "3.7-4.2", GROUP_LOADED,
           rf"Loaded (?P<group_type>\w+) group {_G} with (?P<members>\d+) members\.", "Loaded "),
    _entry("java_classic_group_unloading", "java", "3.8-4.2", GROUP_UNLOADED,
           rf"\[GroupId={_GB}\] Unloading group metadata for generation {_GEN}\.",
           "] Unloading group metadata for generation "),
    _entry("java_modern_group_unloaded", "java", "3.8-4.2", GROUP_UNLOADED,
           rf"\[GroupId={_GB}\] Unloaded group metadata for group epoch {_GEN}\.",
           "] Unloaded group metadata for group epoch "),
    _entry("scala_group_dead", "scala", "1.1-4.0", GROUP_DEAD,
           rf"Group {_G} transitioned to Dead in generation {_GEN}", " transitioned to Dead in generation "),
    _entry("groups_deleted", "both", "scala 2.0-4.0, java 3.7-4.2", GROUP_DELETED,
           r"The following groups were deleted: (?P<groups>.*)\. "
           r"A total of (?P<offsets_removed_total>\d+) offsets were removed\.",
           "The following groups were deleted: "),
    # 1.1 (DeleteGroups is new in 1.1, KIP-229) prints the names only; the lookahead keeps the
    # 2.0+ line out of this entry.
    _entry("scala_groups_deleted_1_1", "scala", "1.1", GROUP_DELETED,
           r"The following groups were deleted: (?P<groups>(?:(?!\. A total of \d+ offsets were removed\.$).)*)",
           "The following groups were deleted: "),

    # --- KIP-848 consumer groups (§3) -----------------------------------------------------------
    _entry("consumer_group_epoch_bumped", "java", "3.7-4.0", GROUP_EPOCH_BUMPED,
           rf"\[GroupId {_GB}\] Bumped group epoch to {_GEN}\.", "] Bumped group epoch to "),
    _entry("consumer_group_epoch_bumped_4_1", "java", "4.1+", GROUP_EPOCH_BUMPED,
           rf"\[GroupId {_GB}\] Bumped group epoch to {_GEN} with metadata hash (?P<metadata_hash>-?\d+)\.",
           "] Bumped group epoch to "),
    _entry("consumer_target_assignment", "java", "4.0+", TARGET_ASSIGNMENT,
           rf"\[GroupId {_GB}\] Computed a new target assignment for epoch {_GEN} with "
           r"'(?P<assignor>[^']*)' assignor in (?P<duration_ms>\d+)ms\.",
           "] Computed a new target assignment for epoch "),
    _entry("consumer_target_assignment_3_8", "java", "3.8-3.9 (4.0+ logs it at DEBUG: not parsed)",
           TARGET_ASSIGNMENT,
           rf"\[GroupId {_GB}\] Computed a new target assignment for epoch {_GEN} with "
           r"'(?P<assignor>[^']*)' assignor in (?P<duration_ms>\d+)ms: .*\.",
           "] Computed a new target assignment for epoch "),
    _entry("consumer_target_assignment_3_7", "java", "3.7", TARGET_ASSIGNMENT,
           rf"\[GroupId {_GB}\] Computed a new target assignment for epoch {_GEN} with "
           r"'(?P<assignor>[^']*)' assignor: .*\.", "] Computed a new target assignment for epoch "),
    _entry("consumer_member_joined", "java", "3.9-4.2", CONSUMER_MEMBER_JOINED,
           rf"\[GroupId {_GB}\] Member {_M} joins the consumer group using the (?P<protocol>\w+) protocol\.",
           " joins the consumer group using the ", data=_DYNAMIC),
    _entry("consumer_member_joined_3_7", "java", "3.7-3.8", CONSUMER_MEMBER_JOINED,
           rf"\[GroupId {_GB}\] Member {_M} joins the consumer group\.", " joins the consumer group.",
           data={**_DYNAMIC, "protocol": "consumer"}),
    _entry("consumer_static_member_joined", "java", "3.9-4.2", CONSUMER_MEMBER_JOINED,
           rf"\[GroupId {_GB}\] Static member {_M} with instance id {_IID} joins the consumer group using "
           r"the (?P<protocol>\w+) protocol\.", " joins the consumer group using the ",
           data={"static": True}),
    _entry("consumer_static_member_joined_3_7", "java", "3.7-3.8", CONSUMER_MEMBER_JOINED,
           rf"\[GroupId {_GB}\] Static member {_M} with instance id {_IID} joins the consumer group\.",
           " joins the consumer group.", data={"static": True, "protocol": "consumer"}),
    _entry("consumer_static_member_replaced", "java", "3.9-4.2", STATIC_MEMBER_REPLACED,
           rf"\[GroupId {_GB}\] Static member with instance id {_IID} re-joins the consumer group using "
           rf"the (?P<protocol>\w+) protocol\. Created a new member {_M} to replace the existing member "
           r"(?P<old_member_id>\S+)\.", " re-joins the consumer group using the "),
    _entry("consumer_static_member_replaced_3_8", "java", "3.8", STATIC_MEMBER_REPLACED,
           rf"\[GroupId {_GB}\] Static member with unknown member id and instance id {_IID} re-joins the "
           rf"consumer group\. Created a new member {_M} to replace the existing member "
           r"(?P<old_member_id>\S+)\.", " re-joins the consumer group. Created a new member ",
           data={"protocol": "consumer"}),
    _entry("consumer_static_member_rejoined_3_7", "java", "3.7", STATIC_MEMBER_REPLACED,
           rf"\[GroupId {_GB}\] Static member {_M} with instance id {_IID} re-joins the consumer group\.",
           " re-joins the consumer group.", data={"protocol": "consumer", "old_member_id": None}),
    _entry("consumer_member_left", "java", "3.7-4.2", CONSUMER_MEMBER_LEFT,
           rf"\[GroupId {_GB}\] Member {_M} left the consumer group\.", " left the consumer group.",
           data={"static": False, "temporary": False}),
    _entry("consumer_static_member_left", "java", "3.7-4.2 ('Static Member' until 3.9)",
           CONSUMER_MEMBER_LEFT,
           rf"\[GroupId {_GB}\] Static [Mm]ember {_M} with instance id {_IID} "
           r"(?P<temporary>temporarily )?left the consumer group\.", "left the consumer group.",
           data={"static": True}),
    _entry("consumer_classic_member_left", "java", "4.0-4.2", CONSUMER_MEMBER_LEFT,
           rf"\[GroupId {_GB}\] (?P<static>Dynamic|Static) member {_M}(?: with instance id {_IID})? {_LEAVE}",
           " has left group through explicit `LeaveGroup`", data={"protocol": "classic", "temporary": False}),
    _entry("consumer_classic_member_left_3_8", "java", "3.8-3.9", CONSUMER_MEMBER_LEFT,
           rf"\[Group {_GB}\] (?P<static>Dynamic|Static) Member {_M}(?: with instance id {_IID})? {_LEAVE}",
           " has left group through explicit `LeaveGroup`", data={"protocol": "classic", "temporary": False}),
    _entry("consumer_member_fenced_session", "java", "3.8-4.2 ('..' in 3.8-3.9)", CONSUMER_MEMBER_FENCED,
           rf"\[GroupId {_GB}\] Member {_M} fenced from the group because the member session expired\.\.?",
           " fenced from the group because the member session expired", data={"fence_reason": "session"}),
    _entry("consumer_member_fenced_session_3_7", "java", "3.7", CONSUMER_MEMBER_FENCED,
           rf"\[GroupId {_GB}\] Member {_M} fenced from the group because its session expired\.",
           " fenced from the group because its session expired", data={"fence_reason": "session"}),
    _entry("consumer_member_fenced_rebalance", "java", "3.8-4.2", CONSUMER_MEMBER_FENCED,
           rf"\[GroupId {_GB}\] Member {_M} fenced from the group because it failed to transition from "
           r"epoch (?P<member_epoch>-?\d+) within (?P<timeout_ms>\d+)ms\.",
           " fenced from the group because it failed to transition from epoch ",
           data={"fence_reason": "rebalance"}),
    _entry("consumer_member_fenced_rebalance_3_7", "java", "3.7", CONSUMER_MEMBER_FENCED,
           rf"\[GroupId {_GB}\] Member {_M} fenced from the group because it failed to revoke partitions "
           r"within (?P<timeout_ms>\d+)ms\.", " fenced from the group because it failed to revoke partitions",
           data={"fence_reason": "rebalance"}),
    _entry("consumer_member_fenced_join", "java", "3.8-4.2 ('..' in 3.8-3.9)", CONSUMER_MEMBER_FENCED,
           rf"\[GroupId {_GB}\] Member {_M} fenced from the group because the classic member failed to join "
           r"within the rebalance timeout\.\.?", " because the classic member failed to join within",
           data={"fence_reason": "join"}),
    _entry("consumer_member_fenced_sync", "java", "3.8-4.2 ('..' in 3.8-3.9)", CONSUMER_MEMBER_FENCED,
           rf"\[GroupId {_GB}\] Member {_M} fenced from the group because the member failed to sync within "
           r"timeout\.\.?", " because the member failed to sync within timeout",
           data={"fence_reason": "sync"}),
    _entry("consumer_group_converted_to_consumer", "java", "4.0-4.2", GROUP_CONVERTED,
           rf"\[GroupId {_GB}\] Converted the (?P<empty>empty )?classic group to a consumer group\.",
           "group to a consumer group.", data={"to": "consumer"}),
    _entry("consumer_group_converted_to_classic", "java", "4.0-4.2", GROUP_CONVERTED,
           rf"\[GroupId {_GB}\] Converted the (?P<empty>empty )?consumer group to a classic group\.",
           "group to a classic group.", data={"to": "classic"}),
    _entry("consumer_classic_new_member_id", "java", "3.8-4.2", MEMBER_CREATED,
           rf"\[GroupId {_GB}\] Dynamic member with unknown member id joins the consumer group\. Created a "
           rf"new member id {_M} and requesting the member to rejoin with this id\.",
           " joins the consumer group. Created a new member id ",
           data={**_DYNAMIC, "pending": True, "protocol": "classic"}),

    # --- recognised, nothing we use (kind None) -------------------------------------------------
    _entry("static_member_no_rebalance", "both", "scala 2.3-4.0, java 3.7-4.2", None,
           r"Static member (?:which )?joins during \w+ stage .*will not trigger (?:a )?rebalance\.",
           "will not trigger "),
    # 2.5-2.7 interpolates the whole MemberMetadata (`$member.groupInstanceId`); with 2.7's Some(null)
    # bug it is printed for dynamic members on every load.
    _entry("scala_static_member_loaded", "scala", "2.5-2.7", None,
           r"Static member .+ of group .+ loaded with member id \S+ at generation -?\d+\.",
           " loaded with member id "),
    _entry("scala_member_loaded", "scala", "2.8-4.0", None,
           r"Loaded member .+ in group .+ with generation -?\d+\.", "Loaded member "),
    _entry("scala_partition_load_unload", "scala", "2.0-4.0", None,
           r"(?:Scheduling loading of|Finished loading|Scheduling unloading of|Already loading) offsets and "
           r"group metadata from .+", " offsets and group metadata from "),
    _entry("scala_offset_load_in_progress_1_1", "scala", "1.1", None,
           r"Offset load from \S+ already in progress\.", "Offset load from "),
    _entry("scala_stale_epoch_load_unload", "scala", "2.8.1-4.0", None,
           r"Not (?:loading|removing) offsets and group metadata for \S+ in epoch -?\d+ since current epoch is .+",
           " offsets and group metadata for "),
    _entry("scala_partition_load_problem", "scala", "1.1-4.0 (ERROR/WARN)", None,
           r"(?:Error loading offsets from \S+"
           r"|Attempted to load offsets and group metadata from \S+, but found no log)",
           " from "),
    _entry("loader_buffer_larger", "both", "scala 2.0.1-4.0, CoordinatorLoaderImpl 3.6+ (WARN)", None,
           r"Loaded (?:offsets and group )?metadata from \S+ with buffer larger \(\d+ bytes\) than configured "
           r"(?:offsets\.load\.buffer\.size|buffer size) \(\d+ bytes\)\.?", " with buffer larger ("),
    _entry("loader_record_failed", "both", "CoordinatorLoaderImpl 3.6+ (ERROR)", None,
           r"(?:Deserializing record .+ from \S+|Replaying record .+ from \S+ at offset \d+ with producer id -?\d+ "
           r"and producer epoch -?\d+) failed due to: .*", " failed due to: "),
    _entry("coordinator_loader_shutting_down", "both", "CoordinatorLoaderImpl 3.6+ (WARN)", None,
           r"Coordinator loader is already shutting down\.", "Coordinator loader is already shutting down."),
    _entry("scala_append_metadata_failed", "scala", "1.1-4.0 (ERROR)", None,
           r"Appending metadata message for group .+ generation -?\d+ failed due to (?:\w+, returning UNKNOWN "
           r"error code to the client|unexpected error: .*)", "Appending metadata message for group "),
    _entry("scala_tombstone_append_failed", "scala", "1.1-4.0 (ERROR)", None,
           r"Failed to append \d+ tombstones to \S+ for expired/deleted offsets and/or metadata for group .+",
           " tombstones to "),
    _entry("scala_mixed_offset_commits", "scala", "1.1-4.0 (WARN)", None,
           r"group: .+ with leader: .+ has received offset commits from consumers as well as transactional "
           r"producers\. .*", " has received offset commits from consumers as well as transactional producers"),
    _entry("scala_cleanup_not_coordinator", "scala", "1.1-4.0", None,
           r"BrokerId \d+ is no longer a coordinator for the group .+\. Proceeding cleanup for other alive groups",
           " is no longer a coordinator for the group "),
    _entry("scala_txn_marker_group_moved", "scala", "1.1-4.0", None,
           r"Group .+ has moved away from \d+ after transaction marker was written but before the cache was "
           r"updated\. The cache on the new group owner will be updated instead\.",
           " after transaction marker was written but before the cache was updated."),
    _entry("consumer_protocol_parse_failed", "both", "scala 2.4-4.0 (GroupMetadata), java 3.7+ (ClassicGroup), WARN",
           None, r"Failed to parse Consumer Protocol .+ of group .+\. Consumer group coordinator is not aware of "
           r"the subscribed topics\.", "Failed to parse Consumer Protocol "),
    _entry("scala_callback_failed", "scala", "3.3.2-4.0 (ERROR, GroupMetadata)", None,
           r"Failed to invoke (?:join|sync) callback for \S+ due to .*", "Failed to invoke "),
    _entry("scala_partition_unloaded", "scala", "2.0-4.0", None,
           r"Finished unloading \S+?(?: for coordinator epoch -?\d+)?\. Removed \d+ cached offsets and \d+ "
           r"cached groups\.", "Finished unloading "),
    _entry("scala_elected_resigned", "scala", "2.8-4.0", None,
           r"(?:Elected|Resigned) as the group coordinator for partition \d+(?: in epoch -?\d+)?",
           " as the group coordinator for partition "),
    _entry("scala_expired_offsets_removed", "scala", "2.0-4.0", None,
           r"Removed \d+ expired offsets in \d+ milliseconds\.", " expired offsets in "),
    _entry("group_offsets_deleted", "both", "scala 2.4-4.0, java 3.7+", None,
           r"The following offsets of the group .+ were deleted: .*\. A total of \d+ offsets were removed\.",
           "The following offsets of the group "),
    _entry("deleted_partition_offsets_removed", "both", "scala 2.0-4.0, java 3.7+", None,
           r"Removed \d+ offsets associated with deleted partitions: .*", " offsets associated with deleted "),
    _entry("coordinator_lifecycle", "both", "2.0-4.2", None,
           r"(?:Starting up|Startup complete|Shutting down|Shutdown complete)\.", "S"),
    _entry("scala_member_not_found", "scala", "2.4-2.8", None,
           r"Member id \S+ was not found in .+ during heartbeat (?:expiration\.|completion check)",
           " was not found in "),
    _entry("heartbeat_expiry_after_unload", "both", "scala 2.4-4.0, java 3.7+", None,
           r"Received notification of heartbeat expiration for member \S+ after group .+ had already been "
           r"(?:unloaded or deleted|deleted or upgraded)\.", "Received notification of heartbeat expiration"),
    _entry("rejoin_in_unexpected_state", "both", "scala 2.2-4.0, java 3.7+ (WARN)", None,
           r"Attempt to add rejoining member \S+ of group .+ in unexpected group state \w+",
           "Attempt to add rejoining member "),
    _entry("failed_to_write_empty_metadata", "both", "scala 2.0-4.0, java 3.7+ (WARN)", None,
           r"Failed to write empty metadata for group .+: .*", "Failed to write empty metadata for group "),
    _entry("failed_to_persist_metadata", "both", "scala 2.7-4.0, java 3.7+ (WARN)", None,
           r"Failed to persist metadata for group .+", "Failed to persist metadata for group "),
    _entry("group_dead_skip_rebalance", "both", "scala 2.3-4.0, java 3.7+", None,
           r"Group .+ is dead, skipping rebalance stage\.?", " is dead, skipping rebalance stage"),
    _entry("no_members_rejoined", "both", "scala 2.3-4.0, java 3.7+ (ERROR)", None,
           r"Group .+ could not complete rebalance because no members rejoined\.?",
           " could not complete rebalance because no members rejoined"),
    _entry("leader_failed_to_join", "both", "scala 2.3-4.0, java 3.7+", None,
           r"Group leader \[.+\] failed to join before (?:the )?rebalance timeout.*", "Group leader ["),
    _entry("empty_assignments", "both", "scala 2.5-4.0, java 3.7+ (WARN)", None,
           r"(?:Setting empty assignments for members .+|Sending empty assignment to member \S+) of .+ "
           r"for generation -?\d+.*", " for generation "),
    _entry("unexpected_sync_expiration", "both", "scala 2.8.1-4.0, java 3.7+ (ERROR)", None,
           r"Received unexpected notification of sync expiration.*",
           "Received unexpected notification of sync expiration"),
    _entry("scala_static_member_id_mismatch", "scala", "2.3-2.8 (ERROR)", None,
           r"given member\.id \S+ is identified as a known static member .*", "given member.id "),
    _entry("static_member_request_fenced", "both", "scala 3.0-4.0, java 3.7+", None,
           r"Request memberId=\S+ for static member with groupInstanceId=.+ is fenced by "
           r"(?:current|existing) memberId=.*", "Request memberId="),
    _entry("scala_unknown_message_key", "scala", "3.5-4.0 (WARN)", None,
           r"Unknown message key with version -?\d+ while loading offsets and group metadata from .*",
           "Unknown message key with version "),
    _entry("loader_unknown_record_type", "both", "3.6-4.2 (WARN, CoordinatorLoaderImpl)", None,
           r"Unknown record type -?\d+ while loading offsets and group metadata from .*",
           "Unknown record type "),
    _entry("scala_simple_group_created", "scala", "4.0", None,
           r"Creating simple consumer group .+ via manual offset commit\.", "Creating simple consumer group "),
    _entry("java_simple_group_created", "java", "4.0-4.2", None,
           r"\[GroupId [^\]]+\] Creating a simple consumer group via manual offset commit\.",
           "] Creating a simple consumer group via manual offset commit."),
    _entry("java_partition_load_unload", "java", "3.7-4.2 (CoordinatorRuntime)", None,
           r"(?:Scheduling loading of|Finished loading of|Scheduling unloading of|Started unloading|"
           r"Finished unloading|Ignored unloading) metadata .+", " metadata "),
    _entry("java_runtime_lifecycle", "java", "3.7-4.2", None,
           r"(?:Closing coordinator runtime|Coordinator runtime closed|Shutting down event processor|"
           r"Event processor closed)\.", "."),
    _entry("java_event_processor_thread", "java", "3.7-4.2", None,
           r"\[group-coordinator-event-processor-\d+\]: (?:Starting|Stopped|Shutdown completed|"
           r"Shutting down\. Draining the remaining events\.|Exiting with exception\.|Draining threw exception\.|"
           r"Failed to (?:run|reject) event .+ due to: .*)", "[group-coordinator-event-processor-"),
    _entry("java_tombstones_generated", "java", "3.7-4.2", None,
           r"Generated \d+ tombstone records (?:while cleaning up group metadata in \d+ milliseconds|in \d+ "
           r"milliseconds while deleting offsets for partitions .*)\.", "Generated "),
    # CoordinatorRuntime (prefix `[GroupCoordinator id=N]`): load races, write failures, shutdown.
    _entry("java_runtime_misc", "java", "3.7-4.2 (INFO/WARN/ERROR, CoordinatorRuntime)", None,
           r"(?:The write event .+ for the timer .+ failed due to .*\. (?:Rescheduling|Ignoring) it\. ?"
           r"|Failed to enqueue write event .+ for timer .+ because the runtime is closed\. Ignoring it\."
           r"|Ignor(?:ed|ing) load completion from .+ because context is in \w+ state\."
           r"|Failed to load metadata from .+ with epoch -?\d+ due to .*\."
           r"|The state machine of the coordinator .+ is out of sync with the underlying log\. .*"
           r"|Writing records to .+ failed due to: .*\."
           r"|Replaying records? .*to .+ failed due to: .*\."
           r"|Execution of .+ failed due to .*\."
           r"|The coordinator .+ is already (?:loading metadata|active)\."
           r"|Cannot load coordinator .+ in state \w+\."
           r"|Ignor(?:ed|ing) loading metadata from .+ since current epoch .+ is larger than or equals to .+\."
           r"|Coordinator runtime is already shutting down\.)", " "),
    # GroupCoordinatorService (prefix `[GroupCoordinator id=N]`).
    _entry("java_service_misc", "java", "3.7-4.2 (WARN/ERROR, GroupCoordinatorService)", None,
           r"(?:\w+ request .+ hit an unexpected exception: .*|Operation .+ with .+ hit an unexpected exception: .*"
           r"|Group coordinator is already (?:running|shutting down)\."
           r"|Could not delete offsets for deleted partitions .+ due to: .*)", " "),
    _entry("java_unknown_group_type", "java", "3.8-4.2 (WARN)", None,
           r"(?:(?:Removed|Loaded) group .+|onUnloaded group) with an unknown group type .+\.",
           " with an unknown group type "),
    _entry("java_txn_offset_materialization_skipped", "java", "3.8-4.2", None,
           r"Skipped the materialization of transactional offset commit .+",
           "Skipped the materialization of transactional offset commit "),
    _entry("java_share_group_metrics_state", "java", "4.0-4.2 (WARN, GroupCoordinatorMetricsShard)", None,
           r"Unknown (?:new|previous) share group state: .+", " share group state: "),
    _entry("consumer_member_subscription_changed", "java", "3.7-3.9 (DEBUG from 4.0)", None,
           r"\[GroupId [^\]]+\] Member \S+ updated its subscribed (?:topics|regex) to: .*",
           " updated its subscribed "),
    _entry("consumer_metadata_computed", "java", "3.7-3.9 (DEBUG later)", None,
           r"\[GroupId [^\]]+\] Computed new (?:subscription metadata|metadata hash): .*", "] Computed new "),
    _entry("consumer_member_reconciliation", "java", "3.7-3.9 (DEBUG from 4.0)", None,
           r"\[GroupId [^\]]+\] Member \S+ (?:transitioned from .+ to .+|new assignment state: .+)\.",
           "] Member "),
    _entry("consumer_static_member_rejected", "java", "3.7-4.2", None,
           r"\[GroupId [^\]]+\] Static member \S+ with instance id .+ (?:is fenced by existing member|"
           r"cannot join the group because the instance id is (?:is )?owned by member) \S+\.",
           "] Static member "),
    _entry("group_conversion_refused", "java", "3.8-4.2", None,
           r"Cannot (?:(?:upgrade|downgrade) (?:classic|consumer) group .+ to (?:consumer|classic) group because .*"
           r"|upgrade the classic group .+ to consumer group because the embedded consumer protocol is "
           r"malformed: .*|downgrade the consumer group .+: fail to parse the Consumer Protocol .*)",
           "Cannot "),
    _entry("consumer_regex_refresh", "java", "4.0-4.2", None,
           r"(?:\[GroupId [^\]]+\] )?(?:Scanned \d+ topics to refresh regular expressions .*|"
           r"Couldn't parse regular expression .*)", " regular expression"),
    # Share (KIP-932) and streams (KIP-1071) groups are handled by the same GroupMetadataManager; the
    # monitor follows consumer groups only.
    _entry("share_or_streams_group_line", "java", "4.0-4.2", None,
           r"\[GroupId [^\]]+\](?:\[MemberId [^\]]+\])? .*(?:(?:share|streams) (?:group|protocol)\b"
           r"|Streams member ).*", "[GroupId "),
]


# --- dispatch: only entries whose pattern can start with the body's first word are tried ------

_FIRST_WORD_RE = re.compile(r"[\[A-Za-z]+")          # "[GroupId", "[Group", "Member[group", "Preparing"
_LITERAL_PREFIX_RE = re.compile(r"(?:\\[\[\].()=`']|[A-Za-z0-9 '=`-])*")  # escaped punctuation or plain text
_LEADING_ALTERNATIVES_RE = re.compile(r"\(\?(?:P<\w+>|:)([^()]*)\)(?![?*+{])")


def _first_word(body: str) -> str:
    m = _FIRST_WORD_RE.match(body)
    return m.group() if m else ""


def _has_top_level_alternation(pattern: str) -> bool:
    depth, escaped = 0, False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return True
    return False


def _pattern_first_words(pattern: str) -> frozenset[str] | None:
    """The first words a body matching `pattern` can start with; None = cannot tell (always try)."""
    if _has_top_level_alternation(pattern):
        return None
    leading = _LEADING_ALTERNATIVES_RE.match(pattern)   # e.g. (?P<static>Static|Dynamic) Member ...
    alternatives = leading.group(1).split("|") if leading else [pattern]
    words = set()
    for alternative in alternatives:
        prefix = _LITERAL_PREFIX_RE.match(alternative)   # matches at least the empty string
        literal = prefix.group() if prefix else ""
        rest = alternative[len(literal):]
        word = _first_word(literal.replace("\\", ""))
        if not word or (len(word) == len(literal.replace("\\", "")) and rest[:1] in ("?", "*", "+", "{")):
            return None  # no literal start, or its last letter is optional
        words.add(word)
    return frozenset(words)


def _build_dispatch(family: str, debug: bool) -> tuple[dict[str, tuple[CatalogEntry, ...]],
                                                       tuple[CatalogEntry, ...]]:
    entries = [e for e in CATALOG if e.family in (family, "both") and (e.parse_at_debug or not debug)]
    first_words = {id(e): _pattern_first_words(e.pattern.pattern) for e in entries}
    wildcard = tuple(e for e in entries if first_words[id(e)] is None)
    keys = set().union(*(w for w in first_words.values() if w is not None))
    by_word = {key: tuple(e for e in entries if (words := first_words[id(e)]) is None or key in words)
               for key in keys}
    return by_word, wildcard


# (family, is_debug_line) -> ({first word: candidate entries in catalog order}, entries for other words)
_DISPATCH = {(family, debug): _build_dispatch(family, debug)
             for family in ("scala", "java") for debug in (False, True)}


def candidate_entries(family: str, body: str, *, debug: bool = False) -> tuple[CatalogEntry, ...]:
    """Catalog entries that may match a message body of this logger family, in catalog order."""
    by_word, wildcard = _DISPATCH[(family, debug)]
    return by_word.get(_first_word(body), wildcard)
