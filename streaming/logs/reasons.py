"""The trigger of a classic rebalance, from the reason Kafka 2.1+ logs on "Preparing to
rebalance group G ... (reason: ...)"."""
from __future__ import annotations

import re
from typing import Any

from state.vocabulary import Trigger
from streaming.logs.values import member_list

# (trigger, pattern matched at the start of the coordinator's part of the reason). First match
# wins. Group `m` is a single member id, group `ms` a member list. Sources: the reasons Kafka passes
# to prepareRebalance (kafka/coordinator/group/GroupCoordinator.scala, 2.1-4.0, and
# org/apache/kafka/coordinator/group/GroupMetadataManager.java, 3.7+).
_TRIGGER_RULES: tuple[tuple[str, re.Pattern], ...] = tuple((t, re.compile(p)) for t, p in (
    (Trigger.MEMBER_JOIN, r"Adding new (?:static )?member (?P<m>\S+)"),
    (Trigger.MEMBER_JOIN, r"Member (?P<m>\S+) (?:is )?joining group"),
    (Trigger.MEMBER_LEAVE, r"[Rr]emoving member (?P<m>\S+) on LeaveGroup"),
    (Trigger.MEMBER_LEAVE, r"explicit `LeaveGroup` request for \((?P<ms>.*)\) members"),
    (Trigger.HEARTBEAT_EXPIRY, r"removing member (?P<m>\S+) on heartbeat expiration"),
    (Trigger.LEADER_REJOIN, r"[Ll]eader (?P<m>\S+) re-joining group"),
    (Trigger.STATIC_MEMBER_REPLACED,
     r"Group's selectedProtocol will change because static member (?P<m>\S+) with instance id .* "
     r"joined with change of protocol"),
    (Trigger.STATIC_MEMBER_REPLACED, r"Updating metadata for static member (?P<m>\S+)"),
    (Trigger.METADATA_CHANGE, r"Updating metadata for member (?P<m>\S+)"),
    (Trigger.REBALANCE_TIMEOUT, r"Removing (?P<ms>.*) on pending sync request expiration"),
    # Online downgrade of a consumer group to classic (3.8+): the reason says what caused it (4.0+).
    (Trigger.MEMBER_LEAVE, r"Downgrade group .+ from consumer to classic for member leaving\.$"),
    (Trigger.STATIC_MEMBER_REPLACED, r"Downgrade group .+ from consumer to classic for static member replacement"),
    (Trigger.GROUP_CONVERSION, r"Downgrade group .+ from consumer to classic(?: with stale assignment)?\.$"),
    (Trigger.COORDINATOR_FAILOVER, r"Freshly-loaded group "),
    # The leader's assignment could not be written: the group goes back to PreparingRebalance.
    (Trigger.ASSIGNMENT_STORE_FAILED,
     r"[Ee]rror .*when storing group assignment ?during SyncGroup \(member: (?P<m>\S+)\)"),
))
_CLIENT_REASON_SEP = "; client reason: "


def classify_rebalance_reason(reason: str | None) -> dict[str, Any]:
    """Derived data for a "Preparing to rebalance" reason: trigger, trigger_member(s), client_reason.

    Only the coordinator's part of the reason is classified; the client's free text (KIP-800) is
    consulted only to tell a poll-timeout LeaveGroup from a plain one.
    """
    out: dict[str, Any] = {"trigger": Trigger.UNKNOWN}
    if reason is None:
        return out
    coordinator_part, sep, client_reason = reason.partition(_CLIENT_REASON_SEP)
    if sep:
        out["client_reason"] = client_reason
    for trigger, rule in _TRIGGER_RULES:
        m = rule.match(coordinator_part)
        if m is None:
            continue
        named = m.groupdict()
        if named.get("m"):
            out["trigger_member"] = named["m"]
        if named.get("ms") is not None:
            ids = member_list(named["ms"])
            out["trigger_member_ids"] = ids
            if len(ids) == 1:
                out["trigger_member"] = ids[0]
        if trigger == Trigger.MEMBER_LEAVE and "poll timeout" in client_reason.lower():
            trigger = Trigger.POLL_TIMEOUT
        out["trigger"] = trigger
        break
    return out
