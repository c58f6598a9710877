"""The layout of a broker log line: the log4j header, the coordinator loggers, the broker prefix
of coordinator messages, and stack-trace continuation lines."""
from __future__ import annotations

import re

# Default log4j / log4j2 layout `[%d] %p %m (%c)%n` (2.x-4.x); groups: timestamp, level, message, logger.
HEADER_RE = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (.*) \(([\w.$]+)\)$"
)

# A line must contain one of these to possibly be a group-coordinator line. The Spark job filters
# on them in the JVM. (The first one is also a substring of the second; both are listed so the
# intent is explicit.) Transaction / share coordinators use other packages and are excluded.
COORDINATOR_LOGGER_MARKERS: tuple[str, ...] = (
    "kafka.coordinator.group.",                      # Scala coordinator 2.0-4.0
    "org.apache.kafka.coordinator.group.",           # Java coordinator 3.7+ (incl. 3.7-3.9 runtime)
    "org.apache.kafka.coordinator.common.runtime.",  # Java CoordinatorRuntime 4.0+
)

SCALA_LOGGER_PREFIX = "kafka.coordinator.group."
JAVA_LOGGER_PREFIXES = ("org.apache.kafka.coordinator.group.",
                         "org.apache.kafka.coordinator.common.runtime.")
# The common runtime is shared with the share coordinator (4.0+); its lines carry these prefixes.
NON_GROUP_RUNTIME_PREFIXES = ("[ShareCoordinator", "[share-coordinator")

# Message prefixes that name the broker (and for Java per-partition contexts the offsets partition):
#   Scala  `[GroupCoordinator 1]: `, `[GroupMetadataManager brokerId=1] `
#   Java   `[GroupCoordinator id=1 topic=__consumer_offsets partition=12] `, `[GroupCoordinator id=1] `
_PREFIX_RE = re.compile(
    r"\[(?:GroupCoordinator (?P<scala_gc>\d+)\]: "
    r"|GroupMetadataManager brokerId=(?P<scala_gmm>\d+)\] "
    r"|GroupCoordinator id=(?P<java_id>\d+)(?: topic=[^ \]]+ partition=(?P<java_partition>\d+))?\] )"
)

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
            broker = m.group("scala_gc") or m.group("scala_gmm") or m.group("java_id")
            partition = m.group("java_partition")
            return int(broker), (int(partition) if partition is not None else None), message[m.end():]
    return None, None, message
