"""Example arguments: realistic values for the placeholders of a template and of a prefix."""
from __future__ import annotations

import re

# ---------------------------------------------------------------------------------------------
# Example arguments
# ---------------------------------------------------------------------------------------------

MEMBER = "consumer-1-1c5d2ba8-0f4e-4f7e-9a1b-6a3c2e7d9f10"
MEMBER2 = "consumer-2-7b9e4d21-3a6c-4e8f-b2d1-9c0a5f6e8d34"
JAVA_MEMBER = "w7tKzC0dQhO4rD6Yx1bA9g"   # KIP-848 member ids are Uuid strings

# (regex on the argument expression, value for Scala, value for Java); first match wins.
TOPIC_ID = "zLqP3eNkR0i3mPGrx2Ttaw"
ARG_RULES: list[tuple[str, object, object]] = [
    (r"(?i)^partitionFor\(", 12, 12),
    (r"(?i)assignmentToString|assignedPartitions|PartitionsPendingRevocation|revokedPartitions",
     "orders-0, orders-1", f"{TOPIC_ID}-[0, 1]"),
    (r"(?i)assignedTasks|tasksPendingRevocation|activeTasks", "0_0, 0_1", "{0=[0, 1]}"),
    (r"PROTOCOL_TYPE", "consumer", "consumer"),
    (r"(?i)protocolName", "range", "range"),
    (r'useClassicProtocol \?', "consumer", "consumer"),
    (r"(?i)instanceid", "Some(instance-1)", "instance-1"),
    (r"(?i)^(pending)?syncmembers|pendingSyncMembers|notYetRejoined|MembersWithMissing|membersWithMissing|^missing$",
     f"Set({MEMBER})", f"[{MEMBER}]"),
    (r"(?i)leaderid|leaderOrNull|anyJoinedMember|memberid|member\.memberid|memberidentity|^member$|^memberId|"
     r"newMemberId|oldMemberId|existingMemberId|receivedMemberId|leavingMember|updatedMember\.memberId",
     MEMBER, JAVA_MEMBER),
    (r"(?i)groupList", "[my-group]", "[my-group]"),
    (r"(?i)groupids|eligibleGroups|deletedGroups|groups\b", "my-group, other-group", "[my-group, other-group]"),
    (r"(?i)groupid|group\.groupid|\bgroupId\b|groupName|shareGroupId", "my-group", "my-group"),
    (r"(?i)previousmemberepoch|previousEpoch", 11, 11),
    (r"(?i)topologyepoch|topology\.epoch|validatedTopologyEpoch", 0, 0),
    (r"(?i)generation", 5, 5),
    (r"(?i)epochs\.size|partitions\.size|\.size\(\)|\bsize\b|nummembers|numMembers|count|total\w*|removed", 3, 3),
    (r"(?i)epoch", 12, 12),
    (r"(?i)metadatahash|hash", 8563402215486210467, 8563402215486210467),
    (r"updatedMember\.state\(\)|member\.state\(\)", "STABLE", "STABLE"),
    (r"(?i)currentAssignmentSummary", "STABLE", "STABLE"),
    (r"(?i)currentstate|state", "PreparingRebalance", "PreparingRebalance"),
    (r"(?i)leaveReason", "the consumer is being closed", "the consumer is being closed"),
    (r"(?i)^reason$|rebalanceReason|joinReason", f"removing member {MEMBER} on heartbeat expiration",
     f"removing member {MEMBER} on heartbeat expiration."),
    (r"(?i)timems|timeLapse|durationMs|elapsed|Ms\b|ms\b|milliseconds", 120, 120),
    (r"(?i)bytesNeeded", 6291456, 6291456),
    (r"(?i)maxBatchSize", 1048576, 1048576),
    (r"(?i)loadBufferSize", 5242880, 5242880),
    (r"(?i)unknownType|unknownKey\.version", 18, 18),
    (r"(?i)assignor", "uniform", "uniform"),
    (r"(?i)targetAssignment", "", f"{{{MEMBER}=MemberAssignment(partitions={{{TOPIC_ID}=[0, 1]}})}}"),
    (r"(?i)subscribedTopicNames|subscribedTopics", "Set(orders)", "[orders]"),
    (r"(?i)subscribedTopicRegex|^regex$|newSubscribedTopicRegex", "orders-.*", "orders-.*"),
    (r"(?i)resolvedRegexes|resolvedRegularExpressions", "[orders-.*]", "[orders-.*]"),
    (r"(?i)getDescription", "Unclosed group", "Unclosed group"),
    (r"(?i)subscriptionMetadata", "", f"{{orders=TopicMetadata(id={TOPIC_ID}, name=orders, numPartitions=6)}}"),
    (r"(?i)currentAssignmentConfigs", "{num.standby.replicas=1}", "{num.standby.replicas=1}"),
    (r"(?i)^updatedMember$", "", f"ConsumerGroupMember(memberId={JAVA_MEMBER}, memberEpoch=12, ...)"),
    (r"(?i)subtopologyId", "0", "0"),
    (r"(?i)recordToReplay|coordinatorRecord|^record$", "", "CoordinatorRecord(key=..., value=...)"),
    (r"(?i)^summary$", "", "LoadSummary(startTimeMs=1700000000000, endTimeMs=1700000000120, "
                          "schedulerQueueTimeMs=3, numRecords=1250, numBytes=98304)"),
    (r"(?i)deletedTopicIds|topicIds", f"[{TOPIC_ID}]", f"[{TOPIC_ID}]"),
    (r"(?i)producerId", 4001, 4001),
    (r"(?i)MAX_RETRY", 3, 3),
    (r"(?i)^task$", "0_1", "0_1"),
    (r"(?i)sessionKey", "consumer.session.timeout.ms", "consumer.session.timeout.ms"),
    (r"(?i)heartbeatKey", "consumer.heartbeat.interval.ms", "consumer.heartbeat.interval.ms"),
    (r"(?i)^key$", "", "consumer.session.timeout.ms"),
    (r"(?i)^(value|min|max|session|heartbeat)$", 45000, 45000),
    (r"(?i)group\.type", "unknown", "unknown"),
    (r"(?i)^(event|event\.name|name|operationName)$", "heartbeat", "consumer-group-heartbeat"),
    (r"(?i)^operation$", "join-group", "join-group"),
    (r"(?i)^request$|deleteRequest|operationInput", "", "GroupRequestData(groupId='my-group')"),
    (r"(?i)topicsData", "", "[TopicData(topicId=zLqP3eNkR0i3mPGrx2Ttaw, partitions=[0, 1])]"),
    (r"(?i)clientResponse", "", "ClientResponse(receivedTimeMs=1700000000000, disconnected=true, ...)"),
    (r"(?i)offsetAndMetadata$", "", "OffsetAndMetadata(offset=42, leaderEpoch=Optional[3], metadata=)"),
    (r"(?i)partitionfor|offsetsPartition|partitionId|\bpartition\b|tp\.partition", 12, 12),
    (r"(?i)topicPartition|\btp\b|^partition|appendPartition|partitionFutures", "__consumer_offsets-12",
     "__consumer_offsets-12"),
    (r"(?i)error|exception|\bex\b|\be\b|\bt\b|cause|getMessage|message|^val$|^msg$",
     "The coordinator is not available.", "The coordinator is not available."),
    (r"(?i)brokerId|nodeId", 1, 1),
    (r"(?i)topics?(Names?)?\b|topicName|deletingToIgnore|deleteRetryCandidates", "orders", "orders"),
    (r"(?i)offset", 42, 42),
    (r"(?i)time\b|timeout", 120, 120),
    (r"(?i)num\w*|numOffsets", 3, 3),
]

# Context rules: the template text just before the {} (when no expression rule matched).
CONTEXT_RULES: list[tuple[str, object, object]] = [
    (r"(?i)instance id $", "Some(instance-1)", "instance-1"),
    (r"(?i)assignor '$", "sticky", "sticky"),
    (r"(?i)groups $", "[my-group]", "[my-group]"),
    (r"(?i)batch for $", "__consumer_offsets-12", "__consumer_offsets-12"),
    (r"(?i)(target|refined) assignment: $", "{}", "{0=[0, 1]}"),
    (r"(?i)(group|GroupId) $", "my-group", "my-group"),
    (r"(?i)member $|MemberId $", MEMBER, JAVA_MEMBER),
    (r"(?i)(generation|epoch)[= ]$", 5, 5),
    (r"(?i)partition[= ]$", 12, 12),
]

# Template -> example args, where the rules above give something unrealistic.
SCALA_MEMBER_METADATA = ("MemberMetadata(memberId=consumer-1-1c5d2ba8-0f4e-4f7e-9a1b-6a3c2e7d9f10, "
                         "groupInstanceId=None, clientId=consumer-1, clientHost=/127.0.0.1, sessionTimeoutMs=10000, "
                         "rebalanceTimeoutMs=300000, supportedProtocols=List(range), )")
ARG_OVERRIDES: dict[str, list] = {
    # the session-expiry reason (4.1+), whose trailing '.' gives the '..' at the end of the line
    "[GroupId {}] Streams member {} fenced from the group because {}.":
        ["my-group", JAVA_MEMBER, "the member session expired."],
    "[GroupId {}] Member {} fenced from the group because {}.":
        ["my-group", JAVA_MEMBER, "the member session expired."],
    # `member` is a MemberMetadata: Scala prints the case class (its toString, as 2.7-4.0 brokers log it)
    "Member {} has left group {} through explicit `LeaveGroup` request": [SCALA_MEMBER_METADATA, "my-group"],
    "Member {} has left group {} through explicit `LeaveGroup`; client reason: {}":
        [SCALA_MEMBER_METADATA, "my-group", "the consumer is being closed"],
    # the first value is `if (groupInstanceId.isDefined) "Static" else "Dynamic"`
    "{} Member with unknown member id joins group {} in {} state. Created a new member id {} for this member and "
    "add to the group.":
        ["Dynamic", "my-group", "PreparingRebalance", "consumer-1-1c5d2ba8-0f4e-4f7e-9a1b-6a3c2e7d9f10"],
    # Scala mkString(", ") and Java String.join(", ", ...): names without brackets
    "The following groups were deleted: {}. A total of {} offsets were removed.": ["my-group, other-group", 42],
    # the last value is a count (group.allStaticMemberIds().size()), not a member id
    "Assignment received from leader {} for group {} for generation {}. The group has {} members, "
    "{} of which are static.":
        [JAVA_MEMBER, "my-group", 5, 3, 1],
}


def prefix_example_args(prefix: str) -> list:
    """Broker/node id 1, offsets partition 12, event thread 0, group and member ids."""
    out: list = []
    pieces = prefix.split("{}")
    for before in pieces[:-1]:
        if before.endswith("partition="):
            out.append(12)
        elif before.endswith("processor-"):
            out.append(0)
        elif before.endswith("[GroupId "):
            out.append("my-group")
        elif before.endswith("[MemberId "):
            out.append(JAVA_MEMBER)
        else:
            out.append(1)
    return out


def example_args(template: str | None, exprs: list[str], scala: bool) -> list:
    if template is None:
        return []
    if template in ARG_OVERRIDES:
        return ARG_OVERRIDES[template]
    pieces = template.split("{}")
    if len(exprs) < len(pieces) - 1:      # compiled classes: no expressions, use the context only
        exprs = list(exprs) + [""] * (len(pieces) - 1 - len(exprs))
    out = []
    for idx, expr in enumerate(exprs):
        value = None
        for rx, sv, jv in (ARG_RULES if expr else []):
            if re.search(rx, expr):
                value = sv if (scala and sv != "") else jv
                break
        if value is None:
            before = pieces[idx] if idx < len(pieces) else ""
            for rx, sv, jv in CONTEXT_RULES:
                if re.search(rx, before):
                    value = sv if scala else jv
                    break
        if value is None:
            value = "x"
        out.append(value)
    return out

