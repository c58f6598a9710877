"""Catalog entries of the streams groups (KIP-1071; early access in 4.1, production-ready and on
by default for new clusters in 4.2). Most lines start `[GroupId g][MemberId m] `; the member in
that prefix is the one whose heartbeat the coordinator was handling. The rebalance-timeout fence
prints the consumer wording (modern.py): the state machine tells the two apart by the group's type.
Wordings checked against GroupMetadataManager.java, StreamsGroup.java and InternalTopicManager.java
of 4.1.2, 4.2.1, 4.3.1 (sources) and 4.2.2, 4.4.0 (compiled classes): tests/data/README.md."""
from __future__ import annotations

from state.events import (
    CONSUMER_MEMBER_FENCED, CONSUMER_MEMBER_JOINED, CONSUMER_MEMBER_LEFT, GROUP_CONVERTED, GROUP_EPOCH_BUMPED,
    MEMBER_ASSIGNMENT_STATE, REBALANCE_REQUESTED, STATIC_MEMBER_REPLACED, STREAMS_TOPOLOGY
)
from state.vocabulary import Protocol, Trigger
from streaming.logs.catalog.entry import DYNAMIC, GB, GEN, IID, CatalogEntry, M, entry, no_fact

STREAMS = {"group_type": Protocol.STREAMS}
_GM = rf"\[GroupId {GB}\]\[MemberId (?P<prefix_member>[^\]]+)\] "    # the heartbeat's member
_GM_ANY = r"\[GroupId [^\]]+\]\[MemberId [^\]]+\] "
_TOPOLOGY_EPOCH = r"(?P<topology_epoch>-?\d+)"

STREAMS_ENTRIES: list[CatalogEntry] = [
    entry("streams_epoch_bumped", "java", "4.2-4.4", GROUP_EPOCH_BUMPED,
          rf"{_GM}Bumped streams group epoch to {GEN} with metadata hash (?P<metadata_hash>-?\d+) and "
          rf"validated topic epoch (?P<validated_topology_epoch>-?\d+)\.", "] Bumped streams group epoch to ",
          data=STREAMS),
    entry("streams_epoch_bumped_4_1", "java", "4.1", GROUP_EPOCH_BUMPED,
          rf"{_GM}Bumped streams group epoch to {GEN} with metadata hash (?P<metadata_hash>-?\d+)\.",
          "] Bumped streams group epoch to ", data=STREAMS),
    entry("streams_member_joined", "java", "4.1-4.4", CONSUMER_MEMBER_JOINED,
          r"\[GroupId (?P<group>[^\]]+)\]\[MemberId (?P<member_id>[^\]]+)\] Member joins the streams group\.",
          "] Member joins the streams group.", data={**DYNAMIC, **STREAMS, "protocol": Protocol.STREAMS}),
    entry("streams_static_member_joined", "java", "4.4", CONSUMER_MEMBER_JOINED,
          rf"{_GM}Static member {M} with instance id {IID} joins the streams group\.", " joins the streams group.",
          data={**STREAMS, "static": True, "protocol": Protocol.STREAMS}),
    entry("streams_static_member_replaced", "java", "4.4", STATIC_MEMBER_REPLACED,
          rf"{_GM}Static member with instance id {IID} re-joins the streams group using the streams protocol\. "
          rf"Created a new member {M} to replace the existing member (?P<old_member_id>\S+)\.",
          " re-joins the streams group using the streams protocol.", data={**STREAMS, "protocol": Protocol.STREAMS}),
    entry("streams_member_left", "java", "4.1-4.4", CONSUMER_MEMBER_LEFT,
          rf"{_GM}Member {M} left the streams group\.", " left the streams group.",
          data={**STREAMS, "static": False, "temporary": False}),
    entry("streams_static_member_left", "java", "4.4", CONSUMER_MEMBER_LEFT,
          rf"{_GM}Static member {M} with instance id {IID} (?P<temporary>temporarily )?left the streams group\.",
          "left the streams group.", data={**STREAMS, "static": True}),
    # Session expiry passes "the member session expired." as the reason: the line ends "..".
    entry("streams_member_fenced_session", "java", "4.1-4.4", CONSUMER_MEMBER_FENCED,
          rf"\[GroupId {GB}\] Streams member {M} fenced from the group because the member session expired\.\.?",
          "] Streams member ", data={**STREAMS, "fence_reason": "session"}),
    entry("streams_member_assignment_state", "java", "4.1-4.4", MEMBER_ASSIGNMENT_STATE,
          r"\[GroupId (?P<group>[^\]]+)\]\[MemberId (?P<member_id>[^\]]+)\] Member's new assignment state: "
          r"epoch=(?P<member_epoch>-?\d+), previousEpoch=(?P<previous_member_epoch>-?\d+), "
          r"state=(?P<state_name>\w+), assignedTasks=.* and tasksPendingRevocation=.*\.",
          "] Member's new assignment state: ", data=STREAMS),
    entry("streams_assignment_configs_changed", "java", "4.2-4.4", REBALANCE_REQUESTED,
          rf"{_GM}Assignment configurations changed to (?P<assignment_configs>.*)\. Triggering rebalance\.",
          "] Assignment configurations changed to ", data={**STREAMS, "trigger": Trigger.METADATA_CHANGE}),
    entry("streams_member_metadata_updated", "java", "4.2-4.4 ('metdata' in 4.2)", REBALANCE_REQUESTED,
          rf"{_GM}Member updated its member meta?data to .*\.", "] Member updated its member ",
          data={**STREAMS, "trigger": Trigger.METADATA_CHANGE}),
    entry("streams_member_metadata_updated_4_1", "java", "4.1 ('metdata')", REBALANCE_REQUESTED,
          rf"\[GroupId {GB}\] Member {M} updated its member metdata to .*\.", " updated its member metdata to ",
          data={**STREAMS, "trigger": Trigger.METADATA_CHANGE}),
    entry("streams_topology_initialized", "java", "4.1-4.4", STREAMS_TOPOLOGY,
          rf"{_GM}Member initialized the topology with epoch {_TOPOLOGY_EPOCH}",
          "] Member initialized the topology with epoch ", data={**STREAMS, "ready": None}),
    # InternalTopicManager: 4.2 prints the `[GroupId g][MemberId m] ` through its LogContext, 4.3+
    # in the message; the body is the same. 4.1 names no group (no_fact below).
    entry("streams_topology_ready", "java", "4.2-4.4", STREAMS_TOPOLOGY,
          rf"{_GM}Valid topic configuration found in \d+ms, topology epoch {_TOPOLOGY_EPOCH} is now initialized\.",
          " is now initialized.", data={**STREAMS, "ready": True}),
    entry("streams_topology_missing_topics", "java", "4.2-4.4", STREAMS_TOPOLOGY,
          rf"{_GM}Valid topic configuration found in \d+ms, but internal topics are missing for topology epoch "
          rf"{_TOPOLOGY_EPOCH}: (?P<problem>.*)", ", but internal topics are missing for topology epoch ",
          data={**STREAMS, "ready": False, "not_ready_reason": "internal_topics_missing"}),
    entry("streams_topology_failed", "java", "4.2-4.4 (WARN)", STREAMS_TOPOLOGY,
          rf"{_GM}Topic configuration failed for topology epoch {_TOPOLOGY_EPOCH} in \d+ms: (?P<problem>.*)",
          "Topic configuration failed for topology epoch ",
          data={**STREAMS, "ready": False, "not_ready_reason": "topic_configuration_failed"}),
    entry("streams_group_converted_from_classic", "java", "4.2-4.4", GROUP_CONVERTED,
          rf"\[GroupId {GB}\] Converted the empty classic group to a streams group\.", "group to a streams group.",
          data={"to": Protocol.STREAMS, "empty": True}),
    entry("streams_group_converted_to_classic", "java", "4.2-4.4", GROUP_CONVERTED,
          rf"\[GroupId {GB}\] Converted the empty streams group to a classic group\.",
          "Converted the empty streams group to a classic group.", data={"to": Protocol.CLASSIC, "empty": True}),

    # --- recognised, no fact ----------------------------------------------------------------------
    no_fact("streams_topology_4_1", "java", "4.1 (InternalTopicManager)",
            r"(?:Valid topic configuration found, (?:topology epoch -?\d+ is now initialized\.|but internal topics "
            r"are missing for topology epoch -?\d+: .*)|Topic configuration failed for topology epoch -?\d+: .*)",
            "opic configuration ",
            why="4.1 names no group; the streams records (topology, member metadata) still show the group"),
    no_fact("streams_topology_configuring", "java", "4.1-4.4", rf"{_GM_ANY}Configuring the topology -?\d+",
            "] Configuring the topology ",
            why="the member sent its topology; the lines that follow (initialized, valid configuration) say the "
                "outcome"),
    no_fact("streams_stale_topology_epoch", "java", "4.1-4.4",
            rf"{_GM_ANY}Member joined with stale topology epoch -?\d+", "] Member joined with stale topology epoch ",
            why="the coordinator keeps the group's topology; the member is told to update, no group change"),
    no_fact("streams_metadata_hash", "java", "4.1-4.4", rf"{_GM_ANY}Computed new metadata hash: -?\d+\.",
            "] Computed new metadata hash: ", why="the epoch bump that follows carries the hash"),
    no_fact("streams_shutdown_requested", "java", "4.1-4.4",
            rf"(?:{_GM_ANY}Shutdown requested|\[GroupId [^\]]+\] Clearing shutdown requested) for the streams "
            r"application\.", " for the streams application.",
            why="an application-wide shutdown request; the leaves that follow are the removals"),
    no_fact("streams_topology_description", "java", "4.4 (StreamsGroupTopologyDescriptionManager, WARN/INFO)",
            r"(?:\[GroupId [^\]]+\] Requested topology description push at topology epoch -?\d+\."
            r"|Topology description plugin getTopology failed for group .+\."
            r"|Topology-description cleanup (?:cycle failed to complete cleanly|cycle is already started"
            r"|cycle skipped: previous cycle is still in flight|read failed for one partition)\."
            r"|Unexpected error running topology-description cleanup cycle\."
            r"|Failed to (?:apply topology-description post-processing on the streams group heartbeat response "
            r"for group .+; returning the response unmodified|finalize StoredDescriptionTopologyEpoch for groups .+ "
            r"on partition \d+; the next cleanup cycle will retry)\."
            r"|Failed to write the UNCERTAIN barrier for groups .+ on partition \d+; skipping their plugin delete "
            r".+ the next cleanup cycle will retry\.)", "",
            why="topology-description bookkeeping (KIP-1163 plugin); no group membership change"),
    no_fact("streams_internal_errors", "java", "4.2-4.4 (ERROR/WARN)",
            r"(?:\[GroupId [^\]]+\] (?:updatedMember is unexpectedly null in buildEndpointToPartitions\. This is a "
            r"bug, please file a JIRA ticket\.|Cannot compute delayed target assignment: configured topology is "
            r"not present|The configured task assignor '[^']*' is not available; falling back to the default "
            r"assignor '[^']*'\.|The refined assignment does not hand out as many active tasks as the target "
            r"assignment\. Reconciling towards the target assignment instead, so tasks that have to move do so "
            r"without warming up first\. Target assignment: .*, refined assignment: .*\.)"
            r"|Unexpected error scanning streams group .+ for topology cleanup; skipping\.)", "",
            why="internal warnings of the streams assignment; the epoch and assignment lines carry the facts"),
    no_fact("streams_task_assignor", "java", "4.1-4.4 (StickyTaskAssignor, WARN/ERROR)",
            r"(?:.*There is not enough available capacity\. You should increase the number of threads and/or "
            r"application instances to maintain the requested number of standby replicas\."
            r"|Unable to assign active task \S+ to any member\.|.* Error in standby task assignment!)", "",
            why="assignor capacity warnings; no group membership change"),
]
