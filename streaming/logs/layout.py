"""What makes a broker log line a group-coordinator line: the default log4j header, the
coordinator loggers (full and short names, and which coordinator they belong to), the broker
prefix of coordinator messages, and stack-trace continuation lines. Other layouts: header.py."""
from __future__ import annotations

import re

# Default log4j / log4j2 layout `[%d] %p %m (%c)%n` (2.x-4.x); groups: timestamp, level, message, logger.
HEADER_RE = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (.*) \(([\w.$]+)\)$"
)

# A line that names a coordinator logger by its full name contains one of these. The replay reader
# and the Spark job look for them first (one fast substring search). (The first one is also a
# substring of the second; both are listed so the intent is explicit.) Transaction / share
# coordinators use other packages and are excluded.
COORDINATOR_LOGGER_MARKERS: tuple[str, ...] = (
    "kafka.coordinator.group.",                      # Scala coordinator 0.11-4.0
    "org.apache.kafka.coordinator.group.",           # Java coordinator 3.7+ (incl. 3.7-3.9 runtime)
    "org.apache.kafka.coordinator.common.runtime.",  # Java CoordinatorRuntime 4.0+
    "kafka.coordinator.GroupCoordinator",            # Scala coordinator 0.10 (no `.group.` package)
    "kafka.coordinator.GroupMetadataManager",
)

SCALA_LOGGER_PREFIX = "kafka.coordinator.group."
SCALA_0_10_LOGGERS = ("kafka.coordinator.GroupCoordinator", "kafka.coordinator.GroupMetadataManager")
JAVA_LOGGER_PREFIXES = ("org.apache.kafka.coordinator.group.",
                        "org.apache.kafka.coordinator.common.runtime.")
# The common runtime is shared with the share coordinator (4.0+); its lines carry these prefixes.
NON_GROUP_RUNTIME_PREFIXES = ("[ShareCoordinator", "[share-coordinator")

SCALA, JAVA = "scala", "java"
# Short logger names (`%c{1}`, Strimzi's Kafka 4.x layout) of the group-coordinator classes that
# log, and the logger families they may belong to. GroupCoordinator and GroupMetadataManager
# exist in both coordinators: the message prefix decides (`logger_families`). A test checks that
# every logger of tests/data/coordinator_templates.jsonl is here.
SHORT_LOGGER_FAMILIES: dict[str, tuple[str, ...]] = {
    "GroupCoordinator": (SCALA, JAVA),
    "GroupMetadataManager": (SCALA, JAVA),
    "GroupMetadata": (SCALA,),
    "GroupMetadata$": (SCALA,),
    "CoordinatorLoaderImpl": (SCALA, JAVA),
    "GroupCoordinatorService": (JAVA,),
    "GroupCoordinatorShard": (JAVA,),
    "GroupCoordinatorConfig": (JAVA,),
    "GroupCoordinatorMetricsShard": (JAVA,),
    "GroupConfig": (JAVA,),
    "OffsetMetadataManager": (JAVA,),
    "NetworkPartitionMetadataClient": (JAVA,),
    "ClassicGroup": (JAVA,),
    "GenericGroup": (JAVA,),
    "StreamsGroup": (JAVA,),
    "StreamsGroupTopologyDescriptionManager": (JAVA,),
    "StickyTaskAssignor": (JAVA,),
    "InternalTopicManager": (JAVA,),
    "GeneralUniformAssignmentBuilder": (JAVA,),
    "UniformHeterogeneousAssignmentBuilder": (JAVA,),
    "CoordinatorLoader": (JAVA,),
    "CoordinatorRuntime": (JAVA,),
    "CoordinatorRuntime$EventBasedCoordinatorTimer": (JAVA,),
    "CoordinatorTimerImpl": (JAVA,),
    "CoordinatorExecutorImpl": (JAVA,),
    "MultiThreadedEventProcessor": (JAVA,),
    "MultiThreadedEventProcessor$EventProcessorThread": (JAVA,),
}
# Message prefixes of coordinator lines (the broker prefix, see _PREFIX_RE).
COORDINATOR_PREFIX_MARKERS: tuple[str, ...] = (
    "[GroupCoordinator ", "[GroupMetadataManager ", "[Group Metadata Manager ")
# Substrings that cover every short name above and the prefixes: a line of any supported layout
# that can be a group-coordinator line contains one of COORDINATOR_MARKERS. The Spark job's
# prefilter and the replay reader (for files that use short logger names) test these.
_SHORT_NAME_CORES: tuple[str, ...] = (
    "GroupCoordinator", "GroupMetadata", "Group Metadata Manager", "GroupConfig", "OffsetMetadataManager",
    "NetworkPartitionMetadataClient", "ClassicGroup", "GenericGroup", "StreamsGroup", "StickyTaskAssignor",
    "InternalTopicManager", "AssignmentBuilder", "CoordinatorLoader", "CoordinatorRuntime",
    "CoordinatorTimerImpl", "CoordinatorExecutorImpl", "MultiThreadedEventProcessor",
)
COORDINATOR_MARKERS: tuple[str, ...] = COORDINATOR_LOGGER_MARKERS + _SHORT_NAME_CORES


# The few lines of other loggers the monitor reads, for broker deaths (streaming/logs/brokers.py):
# every one contains one of these, and the readers and the Spark job's filter keep them too. Few:
# the reader searches each chunk once per marker (merge.KeptLines).
BROKER_LINE_MARKERS: tuple[str, ...] = (
    " could not be established. ",      # NetworkClient: a replica fetcher cannot reach its leader
    "Shrinking ISR from ",              # kafka.cluster.Partition
    " because its session has timed out.",   # KRaft QuorumController: a broker fenced
    ", deleted brokers: ",              # ZooKeeper-mode controller: a broker unregistered
    "] Transition from S",              # KRaft BrokerServer: from SHUTDOWN (a start), from STARTED (a stop)
    "[KafkaServer id=",                 # ZooKeeper-mode broker lifecycle (starting, shutting down, started)
)
KEPT_LINE_MARKERS: tuple[str, ...] = COORDINATOR_MARKERS + BROKER_LINE_MARKERS


def has_broker_marker(line: str) -> bool:
    return any(marker in line for marker in BROKER_LINE_MARKERS)


def has_kept_marker(line: str) -> bool:
    """A line the readers keep: a coordinator line, or one of the broker lines the monitor reads."""
    return has_coordinator_marker(line) or has_broker_marker(line)


def has_coordinator_marker(line: str) -> bool:
    """Does the line name a coordinator logger (full or short name) or carry a coordinator prefix?"""
    return any(marker in line for marker in COORDINATOR_MARKERS)


def full_logger_family(logger: str) -> str | None:
    """scala | java | None for a package-qualified logger name."""
    if logger.startswith(SCALA_LOGGER_PREFIX) or logger in SCALA_0_10_LOGGERS:
        return SCALA
    if logger.startswith(JAVA_LOGGER_PREFIXES):
        return JAVA
    return None


def prefix_family(message: str) -> str | None:
    """The coordinator a message prefix belongs to: `[GroupCoordinator 1]: ` (Scala),
    `[GroupCoordinator id=1 ...] ` (Java), `[GroupMetadataManager brokerId=1] ` and
    `[Group Metadata Manager on Broker 1]: ` (Scala); None without one."""
    if not message.startswith("[G"):
        return None
    m = _PREFIX_RE.match(message)
    if m is None:
        return None
    return JAVA if m.group("java_id") is not None else SCALA


def logger_families(logger: str | None, message: str) -> tuple[str, ...]:
    """The catalog families to try for a line's logger (full or short name, or None when the
    layout has no logger), in order; () when it is not a group-coordinator logger."""
    if logger:
        if "." in logger:
            family = full_logger_family(logger)
            return (family,) if family is not None else ()
        families = SHORT_LOGGER_FAMILIES.get(logger)
        if families is None:
            return ()
        if len(families) == 1:
            return families
    by_prefix = prefix_family(message)
    if by_prefix is not None:
        return (by_prefix,)
    return (SCALA, JAVA) if logger else ()


# Message prefixes that name the broker (and for Java per-partition contexts the offsets partition):
#   Scala  `[GroupCoordinator 1]: `, `[GroupMetadataManager brokerId=1] `,
#          0.11-1.0 `[Group Metadata Manager on Broker 1]: `
#   Java   `[GroupCoordinator id=1 topic=__consumer_offsets partition=12] `, `[GroupCoordinator id=1] `
_PREFIX_RE = re.compile(
    r"\[(?:GroupCoordinator (?P<scala_gc>\d+)\]: "
    r"|GroupMetadataManager brokerId=(?P<scala_gmm>\d+)\] "
    r"|Group Metadata Manager on Broker (?P<old_gmm>\d+)\]: "
    r"|GroupCoordinator id=(?P<java_id>\d+)(?: topic=[^ \]]+ partition=(?P<java_partition>\d+))?\] )"
)

# A message wrapped over lines (a paste: streaming/logs/wrapped.py joins it back) spans at most this
# many. The readers that keep only coordinator lines (merge.KeptLines, parse-logs) keep the lines
# around them that may belong to the same entry: up to MAX_WRAPPED_LINES - 1 lines after a kept
# line, and back to the entry's first line when a coordinator name falls in a later line (the
# default layout's logger comes last). Here, not in wrapped.py, so that the readers do not import
# the parser and its catalog.
MAX_WRAPPED_LINES = 8
# An entry's first line, after any blanks: a time up front (log4j `[2024-05-01 12:00:00,123]`,
# ISO-8601, Strimzi's `2024-05-01 12:00:00,123`, a container runtime's), a level in brackets
# (Confluent's `[INFO] `), a JSON document, a syslog or docker compose prefix. As text, so that
# the byte reader (merge.py) compiles the same.
ENTRY_START = (r"\s*(?:\[?\d{4}-\d\d-\d\d[ T]\d|\[[A-Z]{4,5}\] |\{|<\d{1,3}>"
               r"|[A-Za-z][\w.-]*[_-]\d+ *\| |(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d )")
# A line that continues no entry: one of its own, a blank line, a stack trace.
NOT_CONTINUING = (ENTRY_START + r"|\s*$|\t|\s*at [\w$.<>]+\(|\s*Caused by: |\s*Suppressed: |\s*\.\.\. \d+ "
                  r"|(?:[a-z_$][\w$]*\.)+[A-Z$][\w$]*(?:: |\r?$)")

# Lines of a multi-line entry (stack traces, multi-line messages). Matched at the line start.
_CONTINUATION_RE = re.compile(
    r"[ \t]"                                   # indented: "\tat ...", "\t... 12 more", wrapped text
    r"|at [\w$.<>]+\("                          # unindented stack frame
    r"|Caused by: |Suppressed: "
    r"|\.\.\. \d+ (?:more|common frames omitted)"
    r"|(?:[a-z_$][\w$]*\.)+[A-Z$][\w$]*(?:: |(?<=Exception)$|(?<=Error)$|(?<=Throwable)$)"  # java.io.IOException: ..
)


def is_continuation(line: str) -> bool:
    """True if `line` continues the previous log entry (stack trace, wrapped message, blank line)."""
    line = line.rstrip("\r\n")
    if not line.strip():
        return True
    return _CONTINUATION_RE.match(line) is not None


def split_coordinator_prefix(message: str) -> tuple[int | None, int | None, str]:
    """(broker id, offsets partition, message body) for a coordinator message; None when absent."""
    if message.startswith("[G"):
        m = _PREFIX_RE.match(message)
        if m is not None:
            broker = m.group("scala_gc") or m.group("scala_gmm") or m.group("java_id") or m.group("old_gmm")
            partition = m.group("java_partition")
            return int(broker), (int(partition) if partition is not None else None), message[m.end():]
    return None, None, message
