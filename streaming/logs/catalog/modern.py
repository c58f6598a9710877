"""Catalog entries of the KIP-848 consumer groups (3.7+) and the share groups (KIP-932, 3.9+;
production-ready in 4.2) of the Java coordinator. Share groups print the consumer wording for their
epoch bumps, target assignments and session fences: those lines carry no `group_type`, and the
state machine reads the type from the group's other events (a share join line, share records).
Section numbers refer to ../shared/docs/background.md."""
from __future__ import annotations

from state.events import (
    CONSUMER_MEMBER_FENCED, CONSUMER_MEMBER_JOINED, CONSUMER_MEMBER_LEFT, GROUP_CONVERTED, GROUP_EPOCH_BUMPED,
    MEMBER_ASSIGNMENT_STATE, MEMBER_CREATED, STATIC_MEMBER_REPLACED, TARGET_ASSIGNMENT
)
from state.vocabulary import Protocol
from streaming.logs.catalog.entry import DYNAMIC, GB, GEN, IID, LEAVE, CatalogEntry, M, entry

CONSUMER = {"group_type": Protocol.CONSUMER}
SHARE = {"group_type": Protocol.SHARE}
# a classic member of a consumer group
CLASSIC_MEMBER_LEFT = {**CONSUMER, "protocol": Protocol.CLASSIC, "temporary": False}

MODERN: list[CatalogEntry] = [
    entry("consumer_group_epoch_bumped", "java", "3.7-4.0", GROUP_EPOCH_BUMPED,
          rf"\[GroupId {GB}\] Bumped group epoch to {GEN}\.", "] Bumped group epoch to "),
    entry("consumer_group_epoch_bumped_4_1", "java", "4.1+", GROUP_EPOCH_BUMPED,
          rf"\[GroupId {GB}\] Bumped group epoch to {GEN} with metadata hash (?P<metadata_hash>-?\d+)\.",
          "] Bumped group epoch to "),
    entry("consumer_target_assignment", "java", "4.0+", TARGET_ASSIGNMENT,
          rf"\[GroupId {GB}\] Computed a new target assignment for epoch {GEN} with "
          r"'(?P<assignor>[^']*)' assignor in (?P<duration_ms>\d+)ms\.",
          "] Computed a new target assignment for epoch "),
    entry("consumer_target_assignment_3_8", "java", "3.8-3.9 (4.0+ logs it at DEBUG: not parsed)",
          TARGET_ASSIGNMENT,
          rf"\[GroupId {GB}\] Computed a new target assignment for epoch {GEN} with "
          r"'(?P<assignor>[^']*)' assignor in (?P<duration_ms>\d+)ms: .*\.",
          "] Computed a new target assignment for epoch "),
    entry("consumer_target_assignment_3_7", "java", "3.7", TARGET_ASSIGNMENT,
          rf"\[GroupId {GB}\] Computed a new target assignment for epoch {GEN} with "
          r"'(?P<assignor>[^']*)' assignor: .*\.", "] Computed a new target assignment for epoch "),
    entry("consumer_target_assignment_3_6", "java", "3.6 (the Java coordinator behind an internal flag)",
          TARGET_ASSIGNMENT, rf"\[GroupId {GB}\] Computed a new target assignment for epoch {GEN}: .*\.",
          "] Computed a new target assignment for epoch ", data=CONSUMER),
    entry("consumer_member_joined", "java", "3.9-4.4", CONSUMER_MEMBER_JOINED,
          rf"\[GroupId {GB}\] Member {M} joins the consumer group using the (?P<protocol>\w+) protocol\.",
          " joins the consumer group using the ", data={**DYNAMIC, **CONSUMER}),
    entry("consumer_member_joined_3_7", "java", "3.7-3.8", CONSUMER_MEMBER_JOINED,
          rf"\[GroupId {GB}\] Member {M} joins the consumer group\.", " joins the consumer group.",
          data={**DYNAMIC, **CONSUMER, "protocol": Protocol.CONSUMER}),
    entry("consumer_static_member_joined", "java", "3.9-4.4", CONSUMER_MEMBER_JOINED,
          rf"\[GroupId {GB}\] Static member {M} with instance id {IID} joins the consumer group using "
          r"the (?P<protocol>\w+) protocol\.", " joins the consumer group using the ",
          data={"static": True, **CONSUMER}),
    entry("consumer_static_member_joined_3_7", "java", "3.7-3.8", CONSUMER_MEMBER_JOINED,
          rf"\[GroupId {GB}\] Static member {M} with instance id {IID} joins the consumer group\.",
          " joins the consumer group.", data={"static": True, **CONSUMER, "protocol": Protocol.CONSUMER}),
    entry("consumer_static_member_replaced", "java", "3.9-4.4", STATIC_MEMBER_REPLACED,
          rf"\[GroupId {GB}\] Static member with instance id {IID} re-joins the consumer group using "
          rf"the (?P<protocol>\w+) protocol\. Created a new member {M} to replace the existing member "
          r"(?P<old_member_id>\S+)\.", " re-joins the consumer group using the ", data=CONSUMER),
    entry("consumer_static_member_replaced_3_8", "java", "3.8", STATIC_MEMBER_REPLACED,
          rf"\[GroupId {GB}\] Static member with unknown member id and instance id {IID} re-joins the "
          rf"consumer group\. Created a new member {M} to replace the existing member "
          r"(?P<old_member_id>\S+)\.", " re-joins the consumer group. Created a new member ",
          data={**CONSUMER, "protocol": Protocol.CONSUMER}),
    entry("consumer_static_member_rejoined_3_7", "java", "3.7", STATIC_MEMBER_REPLACED,
          rf"\[GroupId {GB}\] Static member {M} with instance id {IID} re-joins the consumer group\.",
          " re-joins the consumer group.", data={**CONSUMER, "protocol": Protocol.CONSUMER, "old_member_id": None}),
    entry("consumer_member_left", "java", "3.7-4.4", CONSUMER_MEMBER_LEFT,
          rf"\[GroupId {GB}\] Member {M} left the consumer group\.", " left the consumer group.",
          data={**CONSUMER, "static": False, "temporary": False}),
    entry("consumer_static_member_left", "java", "3.7-4.4 ('Static Member' until 3.9)",
          CONSUMER_MEMBER_LEFT,
          rf"\[GroupId {GB}\] Static [Mm]ember {M} with instance id {IID} "
          r"(?P<temporary>temporarily )?left the consumer group\.", "left the consumer group.",
          data={**CONSUMER, "static": True}),
    entry("consumer_classic_member_left", "java", "4.0-4.4", CONSUMER_MEMBER_LEFT,
          rf"\[GroupId {GB}\] (?P<static>Dynamic|Static) member {M}(?: with instance id {IID})? {LEAVE}",
          " has left group through explicit `LeaveGroup`", data=CLASSIC_MEMBER_LEFT),
    entry("consumer_classic_member_left_3_8", "java", "3.8-3.9", CONSUMER_MEMBER_LEFT,
          rf"\[Group {GB}\] (?P<static>Dynamic|Static) Member {M}(?: with instance id {IID})? {LEAVE}",
          " has left group through explicit `LeaveGroup`", data=CLASSIC_MEMBER_LEFT),
    entry("consumer_member_fenced_session", "java", "3.8-4.4 ('..' in 3.8-3.9)", CONSUMER_MEMBER_FENCED,
          rf"\[GroupId {GB}\] Member {M} fenced from the group because the member session expired\.\.?",
          " fenced from the group because the member session expired", data={"fence_reason": "session"}),
    entry("consumer_member_fenced_session_3_7", "java", "3.7", CONSUMER_MEMBER_FENCED,
          rf"\[GroupId {GB}\] Member {M} fenced from the group because its session expired\.",
          " fenced from the group because its session expired", data={"fence_reason": "session"}),
    entry("consumer_member_fenced_rebalance", "java", "3.8-4.4", CONSUMER_MEMBER_FENCED,
          rf"\[GroupId {GB}\] Member {M} fenced from the group because it failed to transition from "
          r"epoch (?P<member_epoch>-?\d+) within (?P<timeout_ms>\d+)ms\.",
          " fenced from the group because it failed to transition from epoch ",
          data={"fence_reason": "rebalance"}),
    entry("consumer_member_fenced_rebalance_3_7", "java", "3.7", CONSUMER_MEMBER_FENCED,
          rf"\[GroupId {GB}\] Member {M} fenced from the group because it failed to revoke partitions "
          r"within (?P<timeout_ms>\d+)ms\.", " fenced from the group because it failed to revoke partitions",
          data={"fence_reason": "rebalance"}),
    entry("consumer_member_fenced_join", "java", "3.8-4.4 ('..' in 3.8-3.9)", CONSUMER_MEMBER_FENCED,
          rf"\[GroupId {GB}\] Member {M} fenced from the group because the classic member failed to join "
          r"within the rebalance timeout\.\.?", " because the classic member failed to join within",
          data={"fence_reason": "join"}),
    entry("consumer_member_fenced_sync", "java", "3.8-4.4 ('..' in 3.8-3.9)", CONSUMER_MEMBER_FENCED,
          rf"\[GroupId {GB}\] Member {M} fenced from the group because the member failed to sync within "
          r"timeout\.\.?", " because the member failed to sync within timeout",
          data={"fence_reason": "sync"}),
    entry("consumer_group_converted_to_consumer", "java", "4.0-4.4", GROUP_CONVERTED,
          rf"\[GroupId {GB}\] Converted the (?P<empty>empty )?classic group to a consumer group\.",
          "group to a consumer group.", data={"to": Protocol.CONSUMER}),
    entry("consumer_group_converted_to_classic", "java", "4.0-4.4", GROUP_CONVERTED,
          rf"\[GroupId {GB}\] Converted the (?P<empty>empty )?consumer group to a classic group\.",
          "group to a classic group.", data={"to": Protocol.CLASSIC}),
    entry("consumer_classic_new_member_id", "java", "3.8-4.4", MEMBER_CREATED,
          rf"\[GroupId {GB}\] Dynamic member with unknown member id joins the consumer group\. Created a "
          rf"new member id {M} and requesting the member to rejoin with this id\.",
          " joins the consumer group. Created a new member id ",
          data={**DYNAMIC, **CONSUMER, "pending": True, "protocol": Protocol.CLASSIC}),
    # Consumer groups print it with the revoked partitions (INFO 3.8-3.9, DEBUG from 4.0), share
    # groups without (INFO 3.9+): the only line that tells a share group's reconciliation apart.
    entry("consumer_member_assignment_state", "java", "3.8-3.9 (DEBUG from 4.0)", MEMBER_ASSIGNMENT_STATE,
          rf"\[GroupId {GB}\] Member {M} new assignment state: epoch=(?P<member_epoch>-?\d+), "
          r"previousEpoch=(?P<previous_member_epoch>-?\d+), state=(?P<state_name>\w+), "
          r"assignedPartitions=.* and revokedPartitions=.*\.", " and revokedPartitions=", data=CONSUMER),
    entry("share_member_assignment_state", "java", "3.9-4.4", MEMBER_ASSIGNMENT_STATE,
          rf"\[GroupId {GB}\] Member {M} new assignment state: epoch=(?P<member_epoch>-?\d+), "
          r"previousEpoch=(?P<previous_member_epoch>-?\d+), state=(?P<state_name>\w+), "
          r"assignedPartitions=(?:(?! and revokedPartitions=).)*\.", " new assignment state: epoch=", data=SHARE),

    # --- share groups ---------------------------------------------------------------------------
    entry("share_member_joined", "java", "3.9-4.4", CONSUMER_MEMBER_JOINED,
          rf"\[GroupId {GB}\] Member {M} joins the share group using the share protocol\.",
          " joins the share group using the share protocol.", data={**DYNAMIC, **SHARE, "protocol": Protocol.SHARE}),
    entry("share_member_left", "java", "3.9-4.4", CONSUMER_MEMBER_LEFT,
          rf"\[GroupId {GB}\] Member {M} left the share group\.", " left the share group.",
          data={**SHARE, "static": False, "temporary": False}),
]
