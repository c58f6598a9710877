"""Catalog entries of coordinator lines that are recognised and deliberately carry no fact the
monitor uses: partition load/unload bookkeeping, runtime and request failures, refused requests,
summaries whose groups the offsets topic names. Each says why (`why`); parse-logs counts them as
"recognised, no fact", and they never reach the unknown-line counter."""
from __future__ import annotations

from streaming.logs.catalog.entry import CatalogEntry, no_fact

# How the Scala coordinator prints a coordinator epoch: an int, or an OptionalInt / Option[Int]
# as Java and Scala render them ("OptionalInt[5]", "OptionalInt.empty", "Some(5)", "None").
_EPOCH = r"(?:-?\d+|OptionalInt\[-?\d+\]|OptionalInt\.empty|Some\(-?\d+\)|None)"

NO_FACT: list[CatalogEntry] = [
    no_fact("static_member_no_rebalance", "both", "scala 2.3-4.0, java 3.7-4.4",
            r"Static member (?:which )?joins during \w+ stage .*will not trigger (?:a )?rebalance\.",
            "will not trigger ", why="the point is that nothing happens: no rebalance, no change of members"),
    # 2.5-2.7 interpolates the whole MemberMetadata (`$member.groupInstanceId`); with 2.7's Some(null)
    # bug it is printed for dynamic members on every load.
    no_fact("scala_static_member_loaded", "scala", "2.5-2.7",
            r"Static member .+ of group .+ loaded with member id \S+ at generation -?\d+\.",
            " loaded with member id ",
            why="load bookkeeping; the GroupMetadata record and the group load line carry the group"),
    no_fact("scala_member_loaded", "scala", "2.8-4.0",
            r"Loaded member .+ in group .+ with generation -?\d+\.", "Loaded member ",
            why="load bookkeeping; the GroupMetadata record and the group load line carry the group"),
    no_fact("scala_partition_load_unload", "scala", "2.0-4.0",
            r"(?:Scheduling loading of|Finished loading|Scheduling unloading of|Already loading) offsets and "
            r"group metadata from .+", " offsets and group metadata from ",
            why="partition load/unload bookkeeping; the per-group load/unload lines carry the fact"),
    no_fact("scala_partition_load_unload_0_10", "scala", "0.10.2",
            r"(?:Loading offsets and group metadata from \S+|Finished loading offsets from \S+ in \d+ milliseconds\.)",
            " from ", why="partition load bookkeeping; the per-group load lines carry the fact"),
    no_fact("scala_follower_transition_0_10", "scala", "0.10.2",
            r"Removed \d+ cached (?:groups|offsets) for \S+ on follower transition\.", " on follower transition.",
            why="partition unload summary; the per-group unload lines carry the fact"),
    no_fact("scala_offset_load_in_progress_1_1", "scala", "1.1",
            r"Offset load from \S+ already in progress\.", "Offset load from ",
            why="partition load bookkeeping"),
    no_fact("scala_stale_epoch_load_unload", "scala", "2.8.1-4.0",
            r"Not (?:loading|removing) offsets and group metadata for \S+ in epoch -?\d+ since current epoch is .+",
            " offsets and group metadata for ",
            why="a stale load/unload request that the coordinator ignores"),
    no_fact("scala_partition_load_problem", "scala", "1.1-4.0 (ERROR/WARN)",
            r"(?:Error loading offsets from \S+"
            r"|Attempted to load offsets and group metadata from \S+, but found no log)",
            " from ",
            why="a partition-level load error; the groups of the partition show it by their missing load lines"),
    no_fact("loader_buffer_larger", "both", "scala 2.0.1-4.0, CoordinatorLoaderImpl 3.6+ (WARN)",
            r"Loaded (?:offsets and group )?metadata from \S+ with buffer larger \(\d+ bytes\) than configured "
            r"(?:offsets\.load\.buffer\.size|buffer size) \(\d+ bytes\)\.?", " with buffer larger (",
            why="a sizing warning about the offsets loader buffer"),
    no_fact("loader_record_failed", "both", "CoordinatorLoaderImpl 3.6+ (ERROR; 4.2+ Java: '... failed.')",
            r"(?:Deserializing record .+ from \S+|Replaying record .+ from \S+ at offset \d+ with producer id -?\d+ "
            r"and producer epoch -?\d+) failed(?: due to: .*|\.)", " failed",
            why="a record the loader could not read; the offsets decoder quarantines what it cannot read"),
    no_fact("coordinator_loader_shutting_down", "both", "CoordinatorLoaderImpl 3.6+ (WARN)",
            r"Coordinator loader is already shutting down\.", "Coordinator loader is already shutting down.",
            why="broker shutdown bookkeeping"),
    no_fact("scala_append_metadata_failed", "scala", "1.1-4.0 (ERROR)",
            r"Appending metadata message for group .+ generation -?\d+ failed due to (?:.+, returning UNKNOWN "
            r"error code to the client|unexpected error: .*)", "Appending metadata message for group ",
            why="a failed write; the client retries and the next rebalance lines say what happened"),
    no_fact("scala_tombstone_append_failed", "scala", "1.1-4.0 (ERROR)",
            r"Failed to append \d+ tombstones to \S+ for expired/deleted offsets and/or metadata for group .+",
            " tombstones to ",
            why="a failed cleanup write; the offsets topic shows what was written"),
    no_fact("scala_mixed_offset_commits", "scala", "1.1-4.0 (WARN)",
            r"group: .+ with leader: .+ has received offset commits from consumers as well as transactional "
            r"producers\. .*", " has received offset commits from consumers as well as transactional producers",
            why="about transactional commits, not about membership"),
    no_fact("scala_cleanup_not_coordinator", "scala", "1.1-4.0",
            r"BrokerId \d+ is no longer a coordinator for the group .+\. Proceeding cleanup for other alive groups",
            " is no longer a coordinator for the group ",
            why="cleanup on a former coordinator; the new coordinator's load lines carry the groups"),
    no_fact("scala_txn_marker_group_moved", "scala", "1.1-4.0",
            r"Group .+ has moved away from \d+ after transaction marker was written but before the cache was "
            r"updated\. The cache on the new group owner will be updated instead\.",
            " after transaction marker was written but before the cache was updated.",
            why="about transaction markers, not about membership"),
    no_fact("consumer_protocol_parse_failed", "both", "scala 2.4-4.0 (GroupMetadata), java 3.7+ (ClassicGroup), WARN",
            r"Failed to parse Consumer Protocol .+ of group .+\. Consumer group coordinator is not aware of "
            r"the subscribed topics\.", "Failed to parse Consumer Protocol ",
            why="the coordinator could not read a member's subscription; membership is unchanged"),
    no_fact("scala_callback_failed", "scala", "3.3.2-4.0 (ERROR, GroupMetadata)",
            r"Failed to invoke (?:join|sync) callback for \S+ due to .*", "Failed to invoke ",
            why="a failed response to a client; the client's retry shows up as a join"),
    no_fact("scala_partition_unloaded", "scala", "2.0-4.0",
            rf"Finished unloading \S+?(?: for coordinator epoch {_EPOCH})?\. Removed \d+ cached offsets and \d+ "
            r"cached groups\.", "Finished unloading ",
            why="partition unload summary; the per-group unload lines carry the fact"),
    no_fact("scala_elected_resigned", "scala", "2.8-4.0",
            rf"(?:Elected|Resigned) as the group coordinator for partition \d+(?: in epoch {_EPOCH})?",
            " as the group coordinator for partition ",
            why="partition leadership of __consumer_offsets; the per-group load/unload lines carry the fact"),
    no_fact("scala_expired_offsets_removed", "scala", "2.0-4.0",
            r"Removed \d+ expired offsets in \d+ milliseconds\.", " expired offsets in ",
            why="an offsets-expiry summary without group names; the tombstones in __consumer_offsets name them"),
    no_fact("group_offsets_deleted", "both", "scala 2.4-4.0, java 3.7+",
            r"The following offsets of the group .+ were deleted: .*\. A total of \d+ offsets were removed\.",
            "The following offsets of the group ",
            why="offsets deleted by an admin request; the tombstones in __consumer_offsets name them"),
    no_fact("deleted_partition_offsets_removed", "both", "scala 2.0-4.0, java 3.7+",
            r"Removed \d+ offsets associated with deleted partitions: .*", " offsets associated with deleted ",
            why="offsets of deleted partitions; the tombstones in __consumer_offsets name them"),
    no_fact("coordinator_lifecycle", "both", "2.0-4.4",
            r"(?:Starting up|Startup complete|Shutting down|Shutdown complete)\.", "S",
            why="broker start-up and shutdown of the coordinator"),
    no_fact("scala_member_not_found", "scala", "2.4-2.8",
            r"Member id \S+ was not found in .+ during heartbeat (?:expiration\.|completion check)",
            " was not found in ",
            why="a heartbeat timer for a member already gone; nothing changes"),
    no_fact("heartbeat_expiry_after_unload", "both", "scala 2.4-4.0, java 3.7+",
            r"Received notification of heartbeat expiration for member \S+ after group .+ had already been "
            r"(?:unloaded or deleted|deleted or upgraded)\.", "Received notification of heartbeat expiration",
            why="a timer that fired after the group moved away; nothing changes here"),
    no_fact("rejoin_in_unexpected_state", "both", "scala 2.2-4.0, java 3.7+ (WARN)",
            r"Attempt to add rejoining member \S+ of group .+ in unexpected group state \w+",
            "Attempt to add rejoining member ",
            why="a refused rejoin; the member's next JoinGroup shows up as a join"),
    no_fact("failed_to_write_empty_metadata", "both", "scala 2.0-4.0, java 3.7+ (WARN)",
            r"Failed to write empty metadata for group .+: .*", "Failed to write empty metadata for group ",
            why="a failed write; the offsets topic shows what was written"),
    no_fact("failed_to_persist_metadata", "both", "scala 2.7-4.0, java 3.7+ (WARN)",
            r"Failed to persist metadata for group .+", "Failed to persist metadata for group ",
            why="a failed write with the old member id kept; the next lines and records say what happened"),
    no_fact("group_dead_skip_rebalance", "both", "scala 2.3-4.0, java 3.7+",
            r"Group .+ is dead, skipping rebalance stage\.?", " is dead, skipping rebalance stage",
            why="the group is gone; its Dead line carries the fact"),
    no_fact("no_members_rejoined", "both", "scala 2.3-4.0, java 3.7+ (ERROR)",
            r"Group .+ could not complete rebalance because no members rejoined\.?",
            " could not complete rebalance because no members rejoined",
            why="the group goes Empty; its 'is now empty' line carries the fact"),
    no_fact("leader_failed_to_join", "both", "scala 2.3-4.0, java 3.7+",
            r"Group leader \[.+\] failed to join before (?:the )?rebalance timeout.*", "Group leader [",
            why="the join phase goes on without the leader; its removal line carries the fact"),
    no_fact("empty_assignments", "both", "scala 2.5-4.0, java 3.7+ (WARN)",
            r"(?:Setting empty assignments for members .+|Sending empty assignment to member \S+) of .+ "
            r"for generation -?\d+.*", " for generation ",
            why="an assignment detail of a generation whose Stabilized/Assignment lines carry the rebalance"),
    no_fact("unexpected_sync_expiration", "both", "scala 2.8.1-4.0, java 3.7+ (ERROR)",
            r"Received unexpected notification of sync expiration.*",
            "Received unexpected notification of sync expiration",
            why="a timer for an older generation; nothing changes"),
    no_fact("scala_static_member_id_mismatch", "scala", "2.3-2.8 (ERROR)",
            r"given member\.id \S+ is identified as a known static member .*", "given member.id ",
            why="a refused request; membership is unchanged"),
    no_fact("static_member_request_fenced", "both", "scala 3.0-4.0, java 3.7+",
            r"Request memberId=\S+ for static member with groupInstanceId=.+ is fenced by "
            r"(?:current|existing) memberId=.*", "Request memberId=",
            why="a refused request (fenced static member); membership is unchanged"),
    no_fact("scala_unknown_message_key", "scala", "3.5-4.0 (WARN)",
            r"Unknown message key with version -?\d+ while loading offsets and group metadata from .*",
            "Unknown message key with version ",
            why="a record the loader skipped; the offsets decoder counts unknown records itself"),
    no_fact("loader_unknown_record_type", "both", "3.6-4.4 (WARN, CoordinatorLoaderImpl)",
            r"Unknown record type -?\d+ while loading offsets and group metadata from .*",
            "Unknown record type ",
            why="a record the loader skipped; the offsets decoder counts unknown records itself"),
    no_fact("scala_simple_group_created", "scala", "4.0",
            r"Creating simple consumer group .+ via manual offset commit\.", "Creating simple consumer group ",
            why="a group used only for commits (no members, no rebalance)"),
    no_fact("java_simple_group_created", "java", "4.0-4.4",
            r"\[GroupId [^\]]+\] Creating a simple consumer group via manual offset commit\.",
            "] Creating a simple consumer group via manual offset commit.",
            why="a group used only for commits (no members, no rebalance)"),
    no_fact("java_partition_load_unload", "java", "3.7-4.4 (CoordinatorRuntime)",
            r"(?:Scheduling loading of|Finished loading of|Scheduling unloading of|Started unloading|"
            r"Finished unloading|Ignored unloading) metadata .+", " metadata ",
            why="partition load/unload bookkeeping of the runtime; the per-group load/unload lines carry the fact"),
    no_fact("java_runtime_lifecycle", "java", "3.7-4.4",
            r"(?:Closing coordinator runtime|Coordinator runtime closed|Shutting down event processor|"
            r"Event processor closed)\.", ".",
            why="start-up and shutdown of the coordinator runtime"),
    no_fact("java_event_processor_thread", "java", "3.7-4.4",
            r"\[group-coordinator-event-processor-\d+\]: (?:Starting|Stopped|Shutdown completed|"
            r"Shutting down\. Draining the remaining events\.|Exiting with exception\.|Draining threw exception\.|"
            r"Failed to (?:run|reject) event .+ due to: .*)", "[group-coordinator-event-processor-",
            why="event-processor thread lifecycle and failures, not about a group"),
    no_fact("java_tombstones_generated", "java", "3.7-4.4",
            r"Generated \d+ tombstone records (?:while cleaning up group metadata in \d+ milliseconds|in \d+ "
            r"milliseconds while deleting offsets for partitions .*)\.", "Generated ",
            why="a cleanup summary; the tombstones in __consumer_offsets name the groups"),
    # CoordinatorRuntime (prefix `[GroupCoordinator id=N]`): load races, write failures, shutdown.
    no_fact("java_runtime_misc", "java", "3.7-4.4 (INFO/WARN/ERROR, CoordinatorRuntime)",
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
            r"|Coordinator runtime is already shutting down\.)", " ",
            why="runtime write, load and timer failures; the records and lines of the groups say what happened"),
    # GroupCoordinatorService (prefix `[GroupCoordinator id=N]`).
    no_fact("java_service_misc", "java", "3.7-4.4 (WARN/ERROR, GroupCoordinatorService)",
            r"(?:\w+ request .+ hit an unexpected exception: .*|Operation .+ with .+ hit an unexpected exception: .*"
            r"|Group coordinator is already (?:running|shutting down)\."
            r"|Could not delete offsets for deleted (?:partitions|topics) .+ due to: .*)", " ",
            why="failed requests of the coordinator service; the client retries"),
    no_fact("java_unknown_group_type", "java", "3.8-4.4 (WARN)",
            r"(?:(?:Removed|Loaded) group .+|onUnloaded group) with an unknown group type .+\.",
            " with an unknown group type ",
            why="a group of a type this coordinator does not know (a newer broker wrote it)"),
    no_fact("java_txn_offset_materialization_skipped", "java", "3.8-4.4",
            r"Skipped the materialization of transactional offset commit .+",
            "Skipped the materialization of transactional offset commit ",
            why="about transactional commits, not about membership"),
    no_fact("java_share_group_metrics_state", "java", "4.0-4.4 (WARN, GroupCoordinatorMetricsShard)",
            r"Unknown (?:new|previous) share group state: .+", " share group state: ",
            why="a metrics-bookkeeping warning of the broker"),
    no_fact("consumer_member_subscription_changed", "java", "3.7-3.9 (DEBUG from 4.0)",
            r"\[GroupId [^\]]+\] Member \S+ updated its subscribed (?:topics|regex) to: .*",
            " updated its subscribed ",
            why="the epoch bump that follows carries the rebalance"),
    no_fact("consumer_metadata_computed", "java", "3.7-3.9 (DEBUG later)",
            r"\[GroupId [^\]]+\] Computed new (?:subscription metadata|metadata hash): .*", "] Computed new ",
            why="the epoch bump that follows carries the rebalance"),
    no_fact("consumer_member_reconciliation", "java", "3.6-3.7",
            r"\[GroupId [^\]]+\] Member \S+ transitioned from .+ to .+\.", "] Member ",
            why="3.6-3.7 state names without the epoch; the assignment records (type 8) carry it"),
    no_fact("consumer_static_member_rejected", "java", "3.7-4.4",
            r"\[GroupId [^\]]+\] Static member \S+ with instance id .+ (?:is fenced by existing member|"
            r"cannot join the group because the instance id is (?:is )?owned by member) \S+\.",
            "] Static member ",
            why="a refused join; membership is unchanged"),
    no_fact("group_conversion_refused", "java", "3.8-4.4",
            r"Cannot (?:(?:upgrade|downgrade) (?:classic|consumer) group .+ to (?:consumer|classic) group because .*"
            r"|upgrade the classic group .+ to consumer group because the embedded consumer protocol is "
            r"malformed: .*|downgrade the consumer group .+: fail to parse the Consumer Protocol .*"
            r"|upgrade classic group .+ to consumer group: .*\."
            r"|join the consumer group .+ with the classic protocol because the group migration is disabled\.)",
            "Cannot ",
            why="a refused protocol conversion or classic join (4.2+); the group stays as it is"),
    no_fact("consumer_regex_refresh", "java", "4.0-4.4",
            r"(?:\[GroupId [^\]]+\] )?(?:Scanned \d+ topics to refresh regular expressions .*|"
            r"Couldn't (?:parse|update) regular expression.*)", " regular expression",
            why="regex subscription bookkeeping; the epoch bump that follows carries the rebalance"),
    no_fact("java_cleanup_generated_4_3", "java", "4.3-4.4 (GroupCoordinatorShard)",
            r"Generated \d+ (?:tombstone )?records in \d+ milliseconds while (?:deleting offsets|cleaning share "
            r"group state) for topics .*\.", "Generated ",
            why="a cleanup summary after topics were deleted; the tombstones in __consumer_offsets name the groups"),
    no_fact("java_runtime_failures_4_x", "java", "4.0-4.4 (WARN/ERROR, CoordinatorRuntime, CoordinatorExecutorImpl)",
            r"(?:The write event for the task .+ failed due to .*\. Ignoring it\. ?"
            r"|Completion of event .+ failed due to .*\."
            r"|Failed to unload (?:coordinator|metadata) for .+? (?:with epoch -?\d+ )?due to .*\."
            r"|Failed to write a batch of \d+ record\(s\) to .+ because it is larger than the maximum batch size of "
            r"\d+ bytes\..*"
            r"|Failed to write records to .+ due to an unexpected error: .*\."
            r"|Failed to write the transaction marker to .+ (?:because it is too large to be persisted\. Consider "
            r"increasing the maximum batch size|due to an unexpected error: .*)\."
            r"|Tried to flush an empty batch for .+\.)", " ",
            why="runtime write, unload and completion failures; the records and lines of the groups say what happened"),
    no_fact("group_config_capped", "java", "4.3-4.4 (WARN, GroupConfig, GroupCoordinatorConfig)",
            r"(?:The effective .+ \(.+\) for group '.+' is not greater than .+ \(.+\)\. .*"
            r"|The (?:group )?config '[^']+' (?:for group '.+' )?has value .+ which "
            r"(?:exceeds the (?:broker's )?allowed maximum|is below the (?:broker's )?allowed minimum) .+\. "
            r"The effective value will be capped to .+\.)", "The ",
            why="a configured timeout is capped to the broker's bounds; the member records carry the effective values"),
    no_fact("share_group_state_bookkeeping", "java", "4.1-4.4 (INFO/WARN/ERROR, share groups)",
            r"(?:Existing deleting entries found in share group .+ - .*"
            r"|Initializing topic .+ for share group .+ found in deleting state as well, removing from deleting\."
            r"|Some topics for share group id .+ were not found in the metadata image - .*"
            r"|Error deleting share group .+ due to error .*|Failed to delete share group state due to: .*"
            r"|Failed to read summary of the share partition|Result is null for the (?:delete share group state|read "
            r"state summary)|Failed to retrieve deleteState request parameters from group coordinator for the group .+"
            r"|Failed to retrieve partition end offsets while calculating share partitions lag for share group - .+"
            r"|Partition end offset fetch failed for topicPartition .+|Persister initialization failed"
            r"|Received error while (?:calling initialize state for .+ on persister,? (?:errorCode: )?.*\."
            r"|deleting share group .+ - .*)|Unable to cleanup (?:state for the deleted topics .+|topic partitions "
            r"from share group state metadata)|Unable to delete share group partition\(s\) - .+ using request .*"
            r"|Unable to initialize share group state (?:for .+, .+ while altering share group offsets|partition "
            r"metadata for .+\.|.+, .+))", "",
            why="share-partition state bookkeeping with the share coordinator; membership is unchanged"),
    no_fact("delayed_target_assignment", "java", "4.2-4.4 (INFO/WARN)",
            r"\[GroupId [^\]]+\] (?:Group not found during initial rebalance\."
            r"|Skipping delayed target assignment: group is empty)", "[GroupId ",
            why="the delayed initial assignment found nothing to do; the epoch lines carry the facts"),
    no_fact("assignment_epochs_mismatch", "java", "4.3-4.4 (ERROR)",
            r"\[GroupId [^\]]+\] Size of assignment epochs .+ is not equal to partitions .+ for (?:topic|subtopology) "
            r".+\. Using default epoch -?\d+ for all partitions\.", "] Size of assignment epochs ",
            why="a record inconsistency the coordinator repairs itself; membership is unchanged"),
    no_fact("server_side_assignor", "java", "3.7-4.0 (UniformHeterogeneousAssignmentBuilder)",
            r"(?:Member Id \S+ not found|The member \S+ is assigned more partitions than the maximum possible\."
            r"|The subscription list is empty, returning an empty assignment)", "",
            why="server-side assignor diagnostics; the target assignment line carries the outcome"),
    no_fact("network_partition_metadata_client", "java", "4.2-4.4 (NetworkPartitionMetadataClient)",
            r"(?:Authentication exception|Version mismatch exception"
            r"|Exhausted max retries \(\d+\) for ListOffsets request for TopicPartitions: .*"
            r"|Interrupted while shutting down NetworkPartitionMetadataClient"
            r"|NetworkPartitionMetadataClient sendThread initialized and started"
            r"|Response for ListOffsets for (?:TopicPartitions|topicPartitions): .+ "
            r"(?:has no response - .*\.|is null))",
            "", why="share-group lag lookups of the broker; no group membership change"),
    # Last: the Java coordinator logs some failures as `[GroupId g] <exception message>.` (e.g. a
    # failed target assignment); free text, so matched only at ERROR and after every other entry.
    no_fact("group_error_free_text", "java", "3.7-4.4 (ERROR, GroupMetadataManager)",
            r"\[GroupId [^\]]+\] .+\.", "[GroupId ", levels=("ERROR",), fallback=True,
            why="free-text failure of a group operation (the exception's message); the group's next lines say more"),
]
