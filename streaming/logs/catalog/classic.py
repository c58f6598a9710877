"""Catalog entries of the classic group protocol (JoinGroup/SyncGroup): the Scala coordinator
(1.1-4.0) and the Java coordinator's classic groups (3.7+), plus group load, unload, expiry and
deletion. Section numbers refer to ../shared/docs/background.md."""
from __future__ import annotations

from state.events import (
    ASSIGNMENT_RECEIVED, GROUP_DEAD, GROUP_DELETED, GROUP_EMPTY, GROUP_LOADED, GROUP_UNLOADED, JOIN_COMPLETE,
    MEMBER_CREATED, MEMBER_FAILED, MEMBER_LEFT, MEMBERS_NOT_JOINED, MEMBERS_NOT_SYNCED, PENDING_MEMBER_EXPIRED,
    PREPARE_REBALANCE, STATIC_MEMBER_REPLACED
)
from streaming.logs.catalog.entry import (
    DYNAMIC, GB, GEN, IID, LEAVE, OP, PREPARE, ST, CatalogEntry, G, M, derive_member_metadata, entry, no_fact
)

CLASSIC: list[CatalogEntry] = [
    # --- classic protocol: rebalance lifecycle (§2.1, §2.4, §2.5) -----------------------------
    entry("scala_prepare_rebalance", "scala", "2.1-4.0", PREPARE_REBALANCE,
          rf"Preparing to rebalance group {G} in state {ST} with old generation {GEN} {OP} "
          r"\(reason: (?P<reason>.*)\)", "Preparing to rebalance group ", **PREPARE),
    entry("scala_prepare_rebalance_no_reason", "scala", "1.1-2.0", PREPARE_REBALANCE,
          rf"Preparing to rebalance group {G} with old generation {GEN} {OP}",
          "Preparing to rebalance group ", **PREPARE),
    entry("java_prepare_rebalance", "java", "3.7-4.4", PREPARE_REBALANCE,
          # the reason keeps its own trailing '.'; the final '.' after ')' ends the sentence
          rf"Preparing to rebalance group {G} in state {ST} with old generation {GEN} "
          r"\(reason: (?P<reason>.*)\)\.", "Preparing to rebalance group ", **PREPARE),
    entry("scala_stabilized", "scala", "1.1-2.7", JOIN_COMPLETE,
          rf"Stabilized group {G} generation {GEN} {OP}", "Stabilized group "),
    entry("scala_stabilized_with_members", "scala", "2.8-4.0", JOIN_COMPLETE,
          rf"Stabilized group {G} generation {GEN} {OP} with (?P<members>\d+) members",
          "Stabilized group "),
    entry("java_stabilized", "java", "3.7-4.4", JOIN_COMPLETE,
          rf"Stabilized group {G} generation {GEN} with (?P<members>\d+) members\.",
          "Stabilized group "),
    entry("scala_assignment_received", "scala", "1.1-2.7", ASSIGNMENT_RECEIVED,
          rf"Assignment received from leader for group {G} for generation {GEN}",
          "Assignment received from leader for group "),
    entry("scala_assignment_received_counts", "scala", "2.8", ASSIGNMENT_RECEIVED,
          rf"Assignment received from leader for group {G} for generation {GEN}\. "
          r"The group has (?P<members>\d+) members, (?P<static_members>\d+) of which are static\.",
          "Assignment received from leader for group "),
    entry("assignment_received_with_leader", "both", "scala 3.0-4.0, java 3.7-4.4", ASSIGNMENT_RECEIVED,
          rf"Assignment received from leader {M} for group {G} for generation {GEN}\. "
          r"The group has (?P<members>\d+) members, (?P<static_members>\d+) of which are static\.",
          "Assignment received from leader "),
    entry("scala_group_empty", "scala", "1.1-4.0", GROUP_EMPTY,
          rf"Group {G} with generation {GEN} is now empty {OP}", " is now empty ("),
    entry("java_group_empty", "java", "3.7-4.4", GROUP_EMPTY,
          rf"Group {G} with generation {GEN} is now empty\.", " is now empty."),
    # 0.10.2 (logger kafka.coordinator.GroupCoordinator): no offsets partition, other words.
    entry("scala_prepare_restabilize_0_10", "scala", "0.10.2", PREPARE_REBALANCE,
          rf"Preparing to restabilize group {G} with old generation {GEN}", "Preparing to restabilize group ",
          **PREPARE),
    entry("scala_stabilized_0_10", "scala", "0.10.2", JOIN_COMPLETE,
          rf"Stabilized group {G} generation {GEN}", "Stabilized group "),
    entry("scala_group_empty_0_10", "scala", "0.10.2", GROUP_EMPTY,
          rf"Group {G} with generation {GEN} is now empty", " is now empty"),

    # --- classic protocol: members joining (§2.3, §2.7) ----------------------------------------
    entry("scala_new_member_id", "scala", "2.5-2.8 (DEBUG), 3.0-4.0", MEMBER_CREATED,
          rf"Dynamic member with unknown member id joins group {G} in {ST} state\. "
          rf"Created a new member id {M} and request the member to rejoin with this id\.",
          " and request the member to rejoin with this id.",
          data={**DYNAMIC, "pending": True}, parse_at_debug=True),
    entry("scala_new_member_id_2_4", "scala", "2.4 (DEBUG)", MEMBER_CREATED,
          rf"Dynamic member with unknown member id rejoins group {G} in {ST} state\. "
          rf"Created a new member id {M} and request the member to rejoin with this id\.",
          " and request the member to rejoin with this id.",
          data={**DYNAMIC, "pending": True}, parse_at_debug=True),
    entry("java_new_member_id", "java", "3.7-4.4", MEMBER_CREATED,
          rf"Dynamic member with unknown member id joins group {G} in {ST} state\. "
          rf"Created a new member id {M} and requesting the member to rejoin with this id\.",
          " and requesting the member to rejoin with this id.",
          data={**DYNAMIC, "pending": True}),
    entry("pending_dynamic_member_added", "both",
          "scala 3.0-3.9 (DEBUG), 4.0; java 3.7-3.9 (DEBUG), 4.0+", MEMBER_CREATED,
          rf"Pending dynamic member with id {M} joins group {G} in {ST} state\. Adding to the group now\.",
          "Pending dynamic member with id ", data={**DYNAMIC, "pending": False}, parse_at_debug=True),
    entry("scala_member_added_unknown_id", "scala", "2.5-4.0", MEMBER_CREATED,
          rf"(?P<static>Static|Dynamic) Member with unknown member id joins group {G} in {ST} state\. "
          rf"Created a new member id {M} for this member and add to the group\.",
          " Member with unknown member id joins group ", data={"pending": False}),
    entry("java_member_added_unknown_id", "java", "3.7-4.4", MEMBER_CREATED,
          rf"Dynamic member with unknown member id joins group {G} in state {ST}\. "
          rf"Created a new member id {M} and added the member to the group\.",
          " and added the member to the group.", data={**DYNAMIC, "pending": False}),
    entry("scala_member_added_specific_id", "scala", "2.5-2.8 (DEBUG)", MEMBER_CREATED,
          rf"Dynamic Member with specific member id {M} joins group {G} in {ST} state\. "
          r"Adding to the group now\.", "Dynamic Member with specific member id ",
          data={**DYNAMIC, "pending": False}, parse_at_debug=True),
    entry("scala_static_member_added", "scala", "2.5-2.8", MEMBER_CREATED,
          rf"Adding new static member {IID} to group {G} with member id {M}\.",
          "Adding new static member ", data={"static": True, "pending": False}),
    entry("scala_static_member_added_3_0", "scala", "3.0-4.0", MEMBER_CREATED,
          rf"Static member with groupInstanceId={IID} and unknown member id joins group {G} in {ST} "
          rf"state\. Created a new member id {M} for this member and add to the group\.",
          " for this member and add to the group.", data={"static": True, "pending": False}),
    entry("java_static_member_added", "java", "3.7-4.4", MEMBER_CREATED,
          rf"Static member with groupInstanceId={IID} and unknown member id joins group {G} in {ST} "
          rf"state\. Created a new member id {M} for this member and added to the group\.",
          " for this member and added to the group.", data={"static": True, "pending": False}),
    entry("scala_static_member_replaced", "scala", "2.5-2.8", STATIC_MEMBER_REPLACED,
          rf"Static member {IID} of group {G} with unknown member id rejoins, assigning new member id "
          rf"{M}, while old member id (?P<old_member_id>\S+) will be removed\.",
          " with unknown member id rejoins, assigning new member id "),
    entry("static_member_replaced", "both", "scala 3.0-4.0, java 3.7-4.4", STATIC_MEMBER_REPLACED,
          rf"Static member with groupInstanceId={IID} and unknown member id joins group {G} in {ST} "
          r"state\. Replacing previously mapped member (?P<old_member_id>\S+) with this groupInstanceId\.",
          "Replacing previously mapped member "),
    no_fact("scala_static_member_replaced_no_group", "scala", "2.3-2.4",
           r"Static member .+? with unknown member id rejoins, assigning new member id \S+, "
           r"while old member \S+ will be removed\.", " with unknown member id rejoins, assigning new",
           why="names no group; the GroupMetadata record of the rebalance that follows has the new member"),

    # --- classic protocol: members leaving / failing (§2.4, §2.6) -------------------------------
    entry("scala_member_failed", "scala", "1.1-4.0", MEMBER_FAILED,
          rf"Member {M} in group {G} has failed, removing it from the group",
          " has failed, removing it from the group"),
    entry("java_member_failed", "java", "3.7-4.4", MEMBER_FAILED,
          rf"Member {M} in group {G} has failed, removing it from the group\.",
          " has failed, removing it from the group."),
    entry("scala_member_left_2_4", "scala", "2.4-2.8", MEMBER_LEFT,
          rf"Member\[group\.instance\.id {IID}, member\.id (?P<member_id>.*?)\] in group {G} has left, "
          r"removing it from the group", "Member[group.instance.id ", data={"pending": False}),
    entry("scala_member_left_2_0", "scala", "1.1-2.1 (DEBUG), 2.2-2.3", MEMBER_LEFT,
          rf"Member {M} in group {G} has left, removing it from the group",
          " has left, removing it from the group", data={"pending": False}, parse_at_debug=True),
    entry("scala_member_left_3_2", "scala", "3.2-4.0", MEMBER_LEFT,
          rf"Member (?P<member_metadata>MemberMetadata\(.*\)) has left group {G} through explicit "
          r"`LeaveGroup`; client reason: (?P<client_reason>.*)", "through explicit `LeaveGroup`; client",
          data={"pending": False}, derive=derive_member_metadata),
    entry("scala_member_left_3_0", "scala", "3.0-3.1", MEMBER_LEFT,
          rf"Member (?P<member_metadata>MemberMetadata\(.*\)) has left group {G} through explicit "
          r"`LeaveGroup` request", "through explicit `LeaveGroup` request",
          data={"pending": False}, derive=derive_member_metadata),
    entry("java_member_left", "java", "3.7-4.4", MEMBER_LEFT,
          rf"\[Group {GB}\] Member {M} {LEAVE}", " has left group through explicit `LeaveGroup`",
          data={"pending": False}),
    entry("scala_pending_member_leaving", "scala", "2.2-2.8", MEMBER_LEFT,
          rf"Pending member {M} is leaving group {G}\.", " is leaving group ", data={"pending": True}),
    entry("scala_pending_member_left", "scala", "3.0-4.0", MEMBER_LEFT,
          rf"Pending member with memberId={M} has left group {G} through explicit `LeaveGroup` request",
          "Pending member with memberId=", data={"pending": True}),
    entry("java_pending_member_left", "java", "3.7-4.4", MEMBER_LEFT,
          rf"\[Group {GB}\] Pending member {M} {LEAVE}", "] Pending member ", data={"pending": True}),
    entry("pending_member_expired", "both", "scala 2.2-4.0, java 3.7-4.4", PENDING_MEMBER_EXPIRED,
          rf"Pending member {M} in group {G} has been removed after session timeout expiration\.",
          " has been removed after session timeout expiration."),
    entry("scala_members_not_joined_2_7", "scala", "2.7", MEMBERS_NOT_JOINED,
          rf"Group {G} remove dynamic members who haven't joined: (?P<member_ids>.*)",
          " remove dynamic members who haven't joined: "),
    entry("members_not_joined", "both", "scala 2.8-4.0, java 3.7-4.4", MEMBERS_NOT_JOINED,
          rf"Group {G} removed dynamic members who haven't joined: (?P<member_ids>.*)",
          " removed dynamic members who haven't joined: "),
    entry("scala_members_not_synced", "scala", "2.8.1-4.0 (DEBUG)", MEMBERS_NOT_SYNCED,
          rf"Group {G} removed members who haven't sent their sync request: (?P<member_ids>.*)",
          " removed members who haven't sent their sync request", parse_at_debug=True),
    entry("java_members_not_synced", "java", "3.7-4.4 (DEBUG)", MEMBERS_NOT_SYNCED,
          rf"Group {G} removed members who haven't sent their sync requests: (?P<member_ids>.*)",
          " removed members who haven't sent their sync request", parse_at_debug=True),

    # --- group load / unload / expiry / deletion (§2.8, §2.9) -----------------------------------
    entry("scala_group_loading", "scala", "1.1-4.0", GROUP_LOADED,
          rf"Loading group metadata for {G} with generation {GEN}", "Loading group metadata for "),
    entry("scala_group_unloading", "scala", "1.1-4.0", GROUP_UNLOADED,
          rf"Unloading group metadata for {G} with generation {GEN}", "Unloading group metadata for "),
    entry("java_group_loaded", "java", "3.7-4.4", GROUP_LOADED,
          rf"Loaded (?P<group_type>\w+) group {G} with (?P<members>\d+) members\.", "Loaded "),
    entry("java_classic_group_unloading", "java", "3.8-4.4", GROUP_UNLOADED,
          rf"\[GroupId={GB}\] Unloading group metadata for generation {GEN}\.",
          "] Unloading group metadata for generation "),
    entry("java_modern_group_unloaded", "java", "3.8-4.4", GROUP_UNLOADED,
          rf"\[GroupId={GB}\] Unloaded group metadata for group epoch {GEN}\.",
          "] Unloaded group metadata for group epoch "),
    entry("scala_group_dead", "scala", "1.1-4.0", GROUP_DEAD,
          rf"Group {G} transitioned to Dead in generation {GEN}", " transitioned to Dead in generation "),
    entry("groups_deleted", "both", "scala 2.0-4.0, java 3.7-4.4", GROUP_DELETED,
          r"The following groups were deleted: (?P<groups>.*)\. "
          r"A total of (?P<offsets_removed_total>\d+) offsets were removed\.",
          "The following groups were deleted: "),
    # 1.1 (DeleteGroups is new in 1.1, KIP-229) prints the names only; the lookahead keeps the
    # 2.0+ line out of this entry.
    entry("scala_groups_deleted_1_1", "scala", "1.1", GROUP_DELETED,
          r"The following groups were deleted: (?P<groups>(?:(?!\. A total of \d+ offsets were removed\.$).)*)",
          "The following groups were deleted: "),

]
