"""The event model: everything the state machine consumes.

One `Event` is one fact about one consumer group, taken from a broker log line or a
`__consumer_offsets` record. Parsers (streaming/logs/parser.py, streaming/offsets/decoder.py)
produce them; the Spark glue carries them as rows of `streaming.spark.schema.EVENT_SCHEMA`
(same field names; `data` travels as the JSON string column `data_json`).

Ordering key inside a group: (ts_ms, source_rank, source_id, seq). `seq` keeps file / partition
order, which is the truth when two coordinator lines share a millisecond.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from state.vocabulary import Trigger

# --- sources ---------------------------------------------------------------------------------
SOURCE_LOG = "log"          # broker server.log line
SOURCE_OFFSETS = "offsets"  # __consumer_offsets record
# Log lines sort before offsets records written in the same millisecond: the coordinator logs
# "Assignment received" before it appends the GroupMetadata record of that generation.
SOURCE_RANK = {SOURCE_LOG: 0, SOURCE_OFFSETS: 1}

# A log line whose layout writes its time coarser than milliseconds (Strimzi's Kafka 4.x layout:
# whole seconds) carries in data[TS_PRECISION] how many ms its time spans (1000): it happened in
# [ts_ms, ts_ms + precision). Its place among the offsets records of that span: state/event_order.py.
TS_PRECISION = "ts_precision_ms"
# ... and once placed there, in data[TS_LATEST] the latest time it can have happened (ts_ms is then
# the time of its place; the machine's comparisons that must not depend on the layout use both).
TS_LATEST = "ts_latest_ms"

# --- kinds from broker logs (classic protocol) -------------------------------------------------
PREPARE_REBALANCE = "prepare_rebalance"        # generation = old generation; reason = verbatim
JOIN_COMPLETE = "join_complete"                # "Stabilized group G generation N": generation = N
GROUP_EMPTY = "group_empty"                    # "Group G with generation N is now empty"
ASSIGNMENT_RECEIVED = "assignment_received"    # "Assignment received from leader ... generation N"
MEMBER_FAILED = "member_failed"                # heartbeat / session expiry ("has failed")
MEMBER_LEFT = "member_left"                    # LeaveGroup ("has left"); data.client_reason
PENDING_MEMBER_EXPIRED = "pending_member_expired"  # pending member removed after session timeout
MEMBERS_NOT_JOINED = "members_not_joined"      # removed at rebalance timeout; data.member_ids
MEMBERS_NOT_SYNCED = "members_not_synced"      # removed at pending-sync timeout; data.member_ids
MEMBER_CREATED = "member_created"              # new member id handed out / member added
STATIC_MEMBER_REPLACED = "static_member_replaced"  # data.old_member_id, member_id = new id
GROUP_DEAD = "group_dead"                      # "transitioned to Dead" (offsets expired)
GROUP_DELETED = "group_deleted"                # DeleteGroups ("The following groups were deleted")
GROUP_LOADED = "group_loaded"                  # coordinator loaded the group (failover / startup)
GROUP_UNLOADED = "group_unloaded"              # coordinator unloaded the group

# --- kinds from broker logs (KIP-848 consumer protocol, Java coordinator) ----------------------
CONSUMER_MEMBER_JOINED = "consumer_member_joined"    # data.protocol: consumer|classic
CONSUMER_MEMBER_LEFT = "consumer_member_left"
CONSUMER_MEMBER_FENCED = "consumer_member_fenced"    # data.fence_reason: session|rebalance|join|sync
GROUP_EPOCH_BUMPED = "group_epoch_bumped"            # generation = new group epoch
TARGET_ASSIGNMENT = "target_assignment"              # generation = epoch
GROUP_CONVERTED = "group_converted"                  # data.to: consumer|classic|streams
MEMBER_ASSIGNMENT_STATE = "member_assignment_state"  # member_id; data: member_epoch, state_name (streams
                                                     #   4.1+, consumer 3.8-3.9 at INFO)
REBALANCE_REQUESTED = "rebalance_requested"          # why the next epoch bump happens; data.trigger
STREAMS_TOPOLOGY = "streams_topology"                # data: topology_epoch, ready (True/False/None)
# Events of modern groups carry data.group_type (consumer|share|streams) when the line or record
# says it; share groups print the consumer wording for bumps, target assignments and fences.

# --- kinds from __consumer_offsets -------------------------------------------------------------
OFFSET_COMMIT = "offset_commit"            # data: topic, partition, offset, commit_ts_ms, count
                                           #   [, earlier_ts_ms]
# The decode step packs the commits of one group written in the same millisecond to one source
# partition (an OffsetCommit request: every partition of an auto-commit) into one event, after
# reducing them per partition: data.commits = [[topic, partition, offset, commit_ts_ms, count,
# *earlier], ...] sorted by topic and partition (COMMIT_FIELDS, then the earlier times); seq is
# the latest record's. The earlier times (earlier_ts_ms of a single commit): the next newest
# distinct commit times of that partition among the reduced commits, newest first, up to
# COMMIT_TIMES_CARRIED in all (none when there was one): a partition's last commits tell a
# consumer's close, which commits off its schedule, from its crash (state/diagnosis/holding.py).
OFFSET_COMMITS = "offset_commits"
COMMIT_FIELDS = ("topic", "partition", "offset", "commit_ts_ms", "count")
EARLIER_COMMIT_TIMES = "earlier_ts_ms"
# How many of a partition's newest distinct commit times the model keeps.
COMMIT_TIMES_KEPT = 3
# How many a reduced commit carries: more than the model keeps, because one micro-batch may hold a
# static member's last commits and, after its removal, its replacement's; the removal reads the
# KEPT newest before it. 8 leaves room for 5 after it (25 s of 5 s auto-commits in one batch).
COMMIT_TIMES_CARRIED = 8


def newest_commit_times(times: Iterable[int | None], keep: int = COMMIT_TIMES_KEPT) -> list[int]:
    """The `keep` newest distinct commit times of `times`, newest first. Commutative and
    idempotent, so reductions and folds in any order (or again) give the same."""
    return sorted({t for t in times if t is not None}, reverse=True)[:keep]


def earlier_commit_times(commit: dict[str, Any]) -> tuple[int, ...]:
    """A single commit's (OFFSET_COMMIT data's) earlier commit times, newest first."""
    return tuple(commit.get(EARLIER_COMMIT_TIMES) or ())
OFFSET_TOMBSTONE = "offset_tombstone"      # data: topic, partition
GROUP_METADATA = "group_metadata"          # generation; data: protocol_type, protocol, leader,
                                           #   current_state_ts_ms, members[...]
GROUP_TOMBSTONE = "group_tombstone"
CG_EPOCH = "cg_epoch"                      # type 3: generation = group epoch (tombstone: data.tombstone)
CG_MEMBER = "cg_member"                    # type 5: member_id; data: client_id, client_host, ...
CG_TARGET_EPOCH = "cg_target_epoch"        # type 6: generation = assignment epoch
CG_TARGET_MEMBER = "cg_target_member"      # type 7: member_id
CG_MEMBER_ASSIGNMENT = "cg_member_assignment"  # type 8: member_id; data: member_epoch, state...
CG_OTHER = "cg_other"                      # other recognised KIP-848/share/streams records

# --- rebalance trigger classes (the `trigger` field of rebalance records) -----------------------
TRIGGERS = tuple(Trigger)


def commit_entries(kind: str, data: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-partition commits of an OFFSET_COMMIT or OFFSET_COMMITS event's data, as OFFSET_COMMIT data."""
    if kind == OFFSET_COMMITS:
        return [_commit_of_entry(entry) for entry in data.get("commits") or []]
    return [data]


def _commit_of_entry(entry: list[Any]) -> dict[str, Any]:
    commit = dict(zip(COMMIT_FIELDS, entry))
    if len(entry) > len(COMMIT_FIELDS):
        commit[EARLIER_COMMIT_TIMES] = list(entry[len(COMMIT_FIELDS):])
    return commit


def commits_of(ev: Event) -> list[dict[str, Any]]:
    return commit_entries(ev.kind, ev.data)


# --- broker lifecycle, from lines that are not the group coordinator's (streaming/logs/brokers.py) -
# They are about a broker, not a group: their events travel under BROKER_EVENTS_GROUP, pass the
# stateful step untouched (like quarantined inputs) and feed the driver's correlator, which reads
# broker deaths from them (state/diagnosis/correlate.py, the coordinator stall).
BROKER_EVENTS_GROUP = "\u0000brokers"
# broker = the reporting broker; data.subject = the broker it cannot reach (its replica fetcher's
# leader: "Connection to node D ... could not be established")
BROKER_UNREACHABLE = "broker_unreachable"
# broker = the partition's leader; data: subject (out of sync), partition, last_caught_up_ms if logged
BROKER_OUT_OF_SYNC = "broker_out_of_sync"
# broker = the controller; data.subject = the broker it fenced for its lapsed session (KRaft) or
# saw unregistered (ZooKeeper mode's "deleted brokers"), both in the controller's log
BROKER_FENCED = "broker_fenced"
BROKER_STARTING = "broker_starting"          # broker = itself: a new process (its start-up banner)
BROKER_SHUTTING_DOWN = "broker_shutting_down"  # broker = itself: a controlled shutdown begins
BROKER_STARTED = "broker_started"            # broker = itself: ZooKeeper mode's "[KafkaServer id=N] started"
BROKER_KINDS = frozenset({BROKER_UNREACHABLE, BROKER_OUT_OF_SYNC, BROKER_FENCED, BROKER_STARTING,
                          BROKER_SHUTTING_DOWN, BROKER_STARTED})

# --- control -----------------------------------------------------------------------------------
END_OF_INPUT = "end_of_input"              # replay only: moves the watermark past the last event
# The time of the end-of-input marker (2100-01-01 UTC): past every deadline and real event, so
# held events and removals are released. Fits pandas' nanosecond timestamps (max 2262).
END_OF_INPUT_TS_MS = 4102444800000

LOG_KINDS = frozenset({
    PREPARE_REBALANCE, JOIN_COMPLETE, GROUP_EMPTY, ASSIGNMENT_RECEIVED, MEMBER_FAILED, MEMBER_LEFT,
    PENDING_MEMBER_EXPIRED, MEMBERS_NOT_JOINED, MEMBERS_NOT_SYNCED, MEMBER_CREATED,
    STATIC_MEMBER_REPLACED, GROUP_DEAD, GROUP_DELETED, GROUP_LOADED, GROUP_UNLOADED,
    CONSUMER_MEMBER_JOINED, CONSUMER_MEMBER_LEFT, CONSUMER_MEMBER_FENCED, GROUP_EPOCH_BUMPED,
    TARGET_ASSIGNMENT, GROUP_CONVERTED, MEMBER_ASSIGNMENT_STATE, REBALANCE_REQUESTED, STREAMS_TOPOLOGY,
}) | BROKER_KINDS
OFFSETS_KINDS = frozenset({
    OFFSET_COMMIT, OFFSET_COMMITS, OFFSET_TOMBSTONE, GROUP_METADATA, GROUP_TOMBSTONE, CG_EPOCH, CG_MEMBER,
    CG_TARGET_EPOCH, CG_TARGET_MEMBER, CG_MEMBER_ASSIGNMENT, CG_OTHER,
})
ALL_KINDS = LOG_KINDS | OFFSETS_KINDS | {END_OF_INPUT}


@dataclass
class Event:
    group: str
    ts_ms: int
    source: str
    source_id: str
    seq: int
    kind: str
    broker: int | None = None
    generation: int | None = None
    member_id: str | None = None
    reason: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    # Which Kafka cluster the source belongs to (set by the source configuration, not parsed):
    # the state key is (cluster, group).
    cluster: str = "default"

    def sort_key(self) -> tuple[int, int, str, int]:
        return (self.ts_ms, SOURCE_RANK.get(self.source, 9), self.source_id, self.seq)
