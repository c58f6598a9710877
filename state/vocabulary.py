"""The words every layer shares, declared once at the bottom floor: the metrics' name prefix,
the input kinds (the metrics' `source` label, the sources' offsets, the observed metrics), the
classes a log line is counted in, and the layout name of lines in no layout the monitor reads.

The words of the records and the metrics' labels are StrEnums here: rebalance triggers, removal
causes, root causes and their confidences, rebalance outcomes, group states and group protocols.
Their members are strings, so records and labels hold their values; report colours, dashboards,
alerts and docs are keyed by member (tests/unit/test_words.py checks each member has its entry).

The other shared words have their own modules on this floor: the end-of-input time and the
event kinds (state/events.py), the quarantine reasons (state/quarantine_reasons.py), the output
kinds (state/outputs.py).
"""
from __future__ import annotations

from enum import StrEnum

METRIC_PREFIX = "rebalance_monitor"

SOURCE_KIND_LOG = "broker_log"
SOURCE_KIND_OFFSETS = "offsets"

# rebalance_monitor_log_lines_total{class} (docs/metrics.md); streaming/logs/step.py maps each
# parse outcome to one of them.
LINE_CLASSES = ("coordinator", "broker", "not_coordinator", "unknown_template", "unknown_layout", "unparseable")
UNKNOWN_LAYOUT = "unknown"


class Trigger(StrEnum):
    """Why a rebalance started (the `trigger` field of rebalance records and label)."""
    MEMBER_JOIN = "member_join"
    MEMBER_LEAVE = "member_leave"
    HEARTBEAT_EXPIRY = "heartbeat_expiry"
    POLL_TIMEOUT = "poll_timeout"
    REBALANCE_TIMEOUT = "rebalance_timeout"
    METADATA_CHANGE = "metadata_change"
    LEADER_REJOIN = "leader_rejoin"
    STATIC_MEMBER_REPLACED = "static_member_replaced"
    COORDINATOR_FAILOVER = "coordinator_failover"
    GROUP_EPOCH_BUMP = "group_epoch_bump"
    GROUP_CONVERSION = "group_conversion"
    ASSIGNMENT_STORE_FAILED = "assignment_store_failed"
    UNKNOWN = "unknown"


class RemovalCause(StrEnum):
    """How a member left its group (the `cause` field of removal records and label)."""
    HEARTBEAT_EXPIRY = "heartbeat_expiry"
    LEAVE_GROUP = "leave_group"
    POLL_TIMEOUT = "poll_timeout"
    REBALANCE_TIMEOUT = "rebalance_timeout"
    SYNC_TIMEOUT = "sync_timeout"
    PENDING_MEMBER_TIMEOUT = "pending_member_timeout"
    STATIC_MEMBER_FENCED = "static_member_fenced"
    GROUP_DELETED = "group_deleted"


class RootCause(StrEnum):
    """Why, behind the cause (state/diagnosis/rules.py)."""
    PROCESS_CRASH = "process_crash"
    PROCESS_PAUSE = "process_pause"
    SLOW_PROCESSING = "slow_processing"
    GRACEFUL_SHUTDOWN = "graceful_shutdown"
    HOST_WIDE = "host_wide"
    COORDINATOR_WIDE = "coordinator_wide"
    UNKNOWN = "unknown"


class Confidence(StrEnum):
    """How sure a root cause is: high, the broker or the client said so; medium, inferred from
    evidence another cause could also leave; low, the evidence fits another cause as well."""
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Outcome(StrEnum):
    """How a rebalance ended."""
    STABLE = "stable"
    EMPTY = "empty"
    SUPERSEDED = "superseded"
    IN_PROGRESS = "in_progress"
    DEAD = "dead"


class GroupState(StrEnum):
    """A group's state as its coordinator names it. Classic states (Kafka 2.0+; "AwaitingSync"
    before 1.1 is CompletingRebalance); KIP-848 consumer groups' Assigning and Reconciling
    (derived, never logged); streams groups' NotReady (their topology's internal topics are
    missing or misconfigured); share groups are Empty or Stable. Unknown: not seen yet."""
    UNKNOWN = "Unknown"
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    NOT_READY = "NotReady"


# A classic group rebalancing (its JOIN and SYNC phases) or a KIP-848 consumer group computing
# (Assigning) or handing out (Reconciling) a new assignment.
REBALANCING_STATES = (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                      GroupState.ASSIGNING, GroupState.RECONCILING)


class Protocol(StrEnum):
    """The group types of the Java coordinator (the `protocol` label): classic groups, and the
    three that rebalance by group epoch (consumer: KIP-848, share: KIP-932, streams: KIP-1071)."""
    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"
    STREAMS = "streams"
