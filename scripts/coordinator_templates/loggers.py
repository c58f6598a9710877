"""Which files, which loggers, which LogContext prefixes."""
from __future__ import annotations

# ---------------------------------------------------------------------------------------------
# Which files, which loggers, which prefixes
# ---------------------------------------------------------------------------------------------

SCALA_DIR = "kafka/coordinator/group/"
JAVA_DIRS = ("org/apache/kafka/coordinator/group/", "org/apache/kafka/coordinator/common/runtime/")

# Scala classes that are loggers: those that mix in kafka.utils.Logging, directly or through
# DelayedOperation (DelayedJoin, DelayedHeartbeat, DelayedSync). `object X extends Logging`
# logs as `X$` (kafka.utils.Logging uses getClass.getName).
SCALA_LOGGING_BASES = ("Logging", "DelayedOperation", "DelayedJoin")

# Java helpers that log through a Logger handed to them by their caller: the logger (%c) is the
# caller's. Checked by reading the call sites (GroupMetadataManager passes its `log` to the streams
# topic helpers, to the member builders' updateWith and on to Utils/TasksTupleWithEpochs; the
# runtime passes its `log` to DeferredEventCollection and CoordinatorOperationExceptionHelper is
# called by GroupCoordinatorService and ShareCoordinatorService with their own `log`).
PASSED_LOGGER: dict[str, str] = {
    "org.apache.kafka.coordinator.group.Utils": "org.apache.kafka.coordinator.group.GroupMetadataManager",
    "org.apache.kafka.coordinator.group.streams.topics.InternalTopicManager":
        "org.apache.kafka.coordinator.group.GroupMetadataManager",
    "org.apache.kafka.coordinator.group.streams.topics.ChangelogTopics":
        "org.apache.kafka.coordinator.group.GroupMetadataManager",
    "org.apache.kafka.coordinator.group.streams.topics.RepartitionTopics":
        "org.apache.kafka.coordinator.group.GroupMetadataManager",
    "org.apache.kafka.coordinator.group.streams.topics.CopartitionedTopicsEnforcer":
        "org.apache.kafka.coordinator.group.GroupMetadataManager",
    "org.apache.kafka.coordinator.group.streams.TasksTupleWithEpochs":
        "org.apache.kafka.coordinator.group.GroupMetadataManager",
    "org.apache.kafka.coordinator.group.streams.StreamsGroupMember":
        "org.apache.kafka.coordinator.group.GroupMetadataManager",
    "org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroupMember":
        "org.apache.kafka.coordinator.group.GroupMetadataManager",
    "org.apache.kafka.coordinator.group.modern.consumer.TopicRegexResolver":
        "org.apache.kafka.coordinator.group.GroupMetadataManager",
    "org.apache.kafka.coordinator.common.runtime.DeferredEventCollection":
        "org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime",
    "org.apache.kafka.coordinator.common.runtime.CoordinatorOperationExceptionHelper":
        "org.apache.kafka.coordinator.group.GroupCoordinatorService",
}

# LogContext prefixes of the Java loggers (as the group coordinator sets them up):
#   GroupCoordinatorService builds LogContext("[GroupCoordinator id=N] ") and hands it to the
#   runtime and the event processor; CoordinatorRuntime.CoordinatorContext builds, per
#   __consumer_offsets partition, LogContext("[GroupCoordinator id=N topic=__consumer_offsets
#   partition=P] ") and gives it to the shard (GroupCoordinatorShard -> GroupMetadataManager,
#   OffsetMetadataManager -> ClassicGroup/ConsumerGroup/StreamsGroup/...), SnapshottableCoordinator,
#   CoordinatorTimerImpl and CoordinatorExecutorImpl. Static loggers have no prefix.
RUNTIME_PREFIX = "[GroupCoordinator id={}] "
PARTITION_PREFIX = "[GroupCoordinator id={} topic=__consumer_offsets partition={}] "
EVENT_THREAD_PREFIX = "[group-coordinator-event-processor-{}]: "
RUNTIME_LOGGERS = {"GroupCoordinatorService", "CoordinatorRuntime", "MultiThreadedEventProcessor",
                   "EventAccumulator",
                   # 4.4: built by GroupCoordinatorService's constructor with the service's LogContext
                   "StreamsGroupTopologyDescriptionManager"}
PARTITION_LOGGERS = {"GroupCoordinatorShard", "GroupMetadataManager", "OffsetMetadataManager",
                     "ClassicGroup", "GenericGroup", "ConsumerGroup", "ShareGroup", "StreamsGroup",
                     "SnapshottableCoordinator", "CoordinatorTimerImpl", "CoordinatorExecutorImpl",
                     "TargetAssignmentBuilder", "CoordinatorContext",
                     "EventBasedCoordinatorTimer", "InternalTopicManager"}
# 4.2 only: GroupMetadataManager hands InternalTopicManager a LogContext of its own prefix plus this.
TOPIC_MANAGER_PREFIX_4_2 = 'new LogContext(String.format("%s[GroupId %s][MemberId %s] ", logContext.logPrefix()'



STATIC_LOGGER = "<LoggerFactory>"   # a `LoggerFactory.getLogger(X.class)` logger: never a prefix


def java_prefix(logger: str, owner: str = "") -> str:
    """The LogContext prefix of a Java logger; `owner` is the class that creates the logger (its
    LogContext decides the prefix: GroupCoordinatorService 3.6-3.7 logs under the name
    `...runtime.CoordinatorLoader` with the service's prefix)."""
    if owner == STATIC_LOGGER:
        return ""
    for name in (owner, logger.rsplit(".", 1)[-1]):
        if not name:
            continue
        if name.endswith("EventProcessorThread"):
            return EVENT_THREAD_PREFIX
        if name in PARTITION_LOGGERS or name.split("$")[-1] in PARTITION_LOGGERS:
            return PARTITION_PREFIX
        if name in RUNTIME_LOGGERS or name.split("$")[0] in RUNTIME_LOGGERS:
            return RUNTIME_PREFIX
    return ""


# Constants that appear inside messages (Scala interpolation or Java concatenation) and print as text.
KNOWN_CONSTANTS = {
    "Topic.GROUP_METADATA_TOPIC_NAME": "__consumer_offsets",
    "Topic.GroupMetadataTopicName": "__consumer_offsets",
    "GROUP_METADATA_TOPIC_NAME": "__consumer_offsets",
}

