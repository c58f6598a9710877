"""Per-group model mirroring Kafka's GroupMetadata, the legal transitions, and its stored form.

The model is a plain dataclass tree. The Spark state keeps it as one JSON string per group
(`to_json`/`from_json`), which carries a schema version so that a checkpoint written by an older
release still loads (docs/design.md, "State versions").
"""
from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, NamedTuple

from state.vocabulary import GroupState, Protocol

# The states and protocols by their short names (state/vocabulary.py declares them).
EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE = GroupState.EMPTY, GroupState.PREPARING_REBALANCE, \
    GroupState.COMPLETING_REBALANCE
STABLE, DEAD, UNKNOWN = GroupState.STABLE, GroupState.DEAD, GroupState.UNKNOWN
ASSIGNING, RECONCILING, NOT_READY = GroupState.ASSIGNING, GroupState.RECONCILING, GroupState.NOT_READY
ALL_STATES = tuple(GroupState)
PROTOCOL_CLASSIC, PROTOCOL_CONSUMER = Protocol.CLASSIC, Protocol.CONSUMER
PROTOCOL_SHARE, PROTOCOL_STREAMS = Protocol.SHARE, Protocol.STREAMS
EPOCH_PROTOCOLS = (PROTOCOL_CONSUMER, PROTOCOL_SHARE, PROTOCOL_STREAMS)

# Kafka's validPreviousStates, exactly (GroupMetadata.scala / ClassicGroupState.java).
CLASSIC_VALID_PREVIOUS_STATES: dict[str, frozenset[str]] = {
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    STABLE: frozenset({COMPLETING_REBALANCE}),
    EMPTY: frozenset({PREPARING_REBALANCE}),
    DEAD: frozenset({STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD}),
}
# Epoch-based groups have no transition table in Kafka: ConsumerGroup.java (ShareGroup.java,
# StreamsGroup.java) derives the state from the group epoch, the target assignment epoch and the
# members' epochs after every change, so every state may precede every state of the type (a group
# converted from classic, or one re-created after it died, included). The tables name the states
# a group of each type can be in.
def _derived(*states: str) -> dict[str, frozenset[str]]:
    return {state: frozenset(ALL_STATES) for state in states}


VALID_PREVIOUS_STATES: dict[str, dict[str, frozenset[str]]] = {
    PROTOCOL_CLASSIC: CLASSIC_VALID_PREVIOUS_STATES,
    PROTOCOL_CONSUMER: _derived(EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD),
    PROTOCOL_SHARE: _derived(EMPTY, STABLE, DEAD),
    PROTOCOL_STREAMS: _derived(EMPTY, NOT_READY, ASSIGNING, RECONCILING, STABLE, DEAD),
}


def is_legal(protocol: str, previous: str, target: str) -> bool:
    return previous in VALID_PREVIOUS_STATES[protocol].get(target, frozenset())


@dataclass
class Member:
    member_id: str
    client_id: str | None = None
    client_host: str | None = None
    group_instance_id: str | None = None
    session_timeout_ms: int | None = None
    rebalance_timeout_ms: int | None = None
    # Epoch-based groups: member epoch and reconciliation state from the member's current
    # assignment (record type 8 / 14 / 22, or the "new assignment state" line); the state in the
    # codes of the consumer and share records (0 STABLE) for every type (modern.MEMBER_STATE_CODES).
    member_epoch: int | None = None
    member_state: int | None = None
    has_assignment_record: bool = False
    # Consumer protocol: when its last current-assignment record was written (it heartbeated then).
    assignment_record_ms: int | None = None
    # Epoch-based groups: when a record or line last said the member's epoch (it was in the group then).
    reached_at_ms: int | None = None
    # Classic consumer protocol: assigned partitions ("topic:partition") from the GroupMetadata
    # record (None: not known). Commit evidence of the poll-timeout inference.
    partitions: list[str] | None = None


@dataclass
class OpenRebalance:
    """A rebalance that has started and not ended yet (or classic: not yet Stable)."""
    protocol: str
    previous_generation: int | None
    started_at_ms: int | None
    trigger: str
    trigger_member: str | None
    reason_text: str | None
    coordinator: int | None
    generation: int | None = None          # known at join completion (classic) / bump (consumer)
    join_completed_at_ms: int | None = None
    # consumer: the target assignment of this epoch was computed (end of the assignment phase)
    assigned_at_ms: int | None = None
    completed_at_ms: int | None = None      # classic: became Stable; consumer: all reconciled
    removals: list[str] = field(default_factory=list)  # member ids removed during it
    # Members removed at the rebalance (or sync) timeout during it: the JOIN phase waited for them.
    timeout_removals: list[str] = field(default_factory=list)
    # Largest rebalance_timeout_ms of the members it started with or removed (the JOIN deadline).
    max_rebalance_timeout_ms: int | None = None
    # Members removed during it (or just before: the removals that started it): member id ->
    # [when its partitions stopped, its partitions or None] (state/impact.py).
    departures: dict[str, list[Any]] = field(default_factory=dict)
    # Classic, Kafka 2.8+: the member count of its "Assignment received" line, while it waits for
    # the generation's GroupMetadata record.
    logged_members: int | None = None
    # Its start line's layout wrote whole seconds: the latest time it can have started
    # (state/event_order.py), so a record of that second may have come before it.
    started_latest_ms: int | None = None
    # Classic: it superseded a rebalance whose generation never got an assignment (a member joined
    # while that one waited for the leader's): the generation whose assignment the members still
    # held (None: previous_generation's).
    assignment_generation: int | None = None

    @property
    def basis_generation(self) -> int | None:
        """The generation whose assignment the members held when it started."""
        return self.previous_generation if self.assignment_generation is None else self.assignment_generation

    def starts_from(self, members: dict[str, Any], generation: int | None) -> bool:
        """Whether `members`, the member list of `generation`, is the assignment it started from."""
        basis = self.basis_generation
        return generation == basis or (basis == 0 and not members)   # a new group has no members


@dataclass(slots=True)
class UnattachedRemoval:
    """A removal seen while no rebalance was open (GroupModel.unattached_removals), for the next
    rebalance that starts. Stored as [member_id, at_ms, cause, stopped_at_ms, partitions] (the
    last two: state/impact.py); states of releases before the impact kept only the first three,
    which load with stopped_at_ms None and are written back so."""
    member_id: str
    at_ms: int
    cause: str
    # When its partitions stopped (None: not known, in a state stored before), and its partitions.
    stopped_at_ms: int | None = None
    partitions: list[str] | None = None

    @classmethod
    def from_stored(cls, stored: list[Any]) -> UnattachedRemoval:
        return cls(*stored)

    def stored(self) -> list[Any]:
        if self.stopped_at_ms is None:
            return [self.member_id, self.at_ms, self.cause]
        return [self.member_id, self.at_ms, self.cause, self.stopped_at_ms, self.partitions]

    def departure(self) -> list[Any]:
        """Its OpenRebalance.departures entry: [when its partitions stopped, its partitions];
        one stored without them stopped at its removal."""
        if self.stopped_at_ms is None:
            return [self.at_ms, None]
        return [self.stopped_at_ms, self.partitions]


class RecentJoin(NamedTuple):
    """A member id created just before (a MEMBER_CREATED line), GroupModel.recent_joins. Stored
    as the JSON array [member_id, at_ms] a tuple encodes to."""
    member_id: str | None
    at_ms: int


# The entries GroupModel keeps while it waits for later evidence. Stored (to_json) like the model:
# the fields that differ from their default, so an optional field (default None or False: not
# learned) is stored only once it is set, and entries stored by older releases, which lack the
# fields added since, load with the defaults.
@dataclass(slots=True)
class HeldRemoval:
    """A removal record held until its decision time (GroupModel.held_removals), with what the
    group showed meanwhile (state/diagnosis/holding.py; the rules read it: state/diagnosis/rules.py)."""
    rec: dict[str, Any]                    # the removal record (an output record), decided at release
    decide_at: int                         # event time of its decision
    # LeaveGroup, commit or poll evidence: whether it may have stalled in processing (None: no
    # evidence, which counts as stalled), the evidence in words, whether its partitions were known.
    stalled: bool | None = None
    commit_text: str | None = None
    commit_known: bool = False
    # The same client (or member) joined again: when, and whether with the same member id.
    rejoined_at_ms: int | None = None
    same_member_id: bool | None = None
    # Other members of the group expired within the coordinator-wide window of this one.
    expired_with_others: bool = False
    # A static member's commits (state/diagnosis/holding.py): True when its last commit before the
    # removal came off its commit schedule (a close's commit), False when its commits stopped on
    # schedule (no commit on close: a crash), None when they cannot tell.
    closed: bool | None = None
    # ... read at its decision from these: its partitions, and their newest commit times up to the
    # removal (the decoder packs a batch's commits at its latest one, so some come after the removal).
    commit_partitions: list[str] | None = None
    commit_times: list[int] | None = None
    # Set as it is decided: the coordinator move that explains it, the poll timeout inferred.
    coordinator_move_ms: int | None = None
    poll_inferred: bool = False
    # Its line's layout writes whole seconds: the latest time the removal can have happened
    # (state/event_order.py; None: its time is exact). A commit or a rejoin within it may have
    # come before or after it (state/diagnosis/holding.py).
    latest_ms: int | None = None

    @property
    def may_have_stalled(self) -> bool:
        """No evidence that its member kept polling (commits or a rebalance it joined)."""
        return self.stalled is not False


@dataclass(slots=True)
class InferredRemoval:
    """A LeaveGroup removal inferred from a generation that completed without the member, waiting
    for the member's own line (GroupModel.pending_inferred; state/machine/classic.py)."""
    due: int                               # event time after which it is held as it is
    rec: dict[str, Any]                    # the removal record
    # The member as the model knew it: dataclasses.asdict of a Member, kept as stored (one stored
    # before a field of Member was added lacks it, and is written back so).
    known: dict[str, Any]

    def member(self) -> Member:
        return Member(**self.known)


@dataclass(slots=True)
class GenerationCheck:
    """A classic generation waiting for the other source's evidence (GroupModel.generation_checks;
    state/machine/crosscheck.py). Every field is stored."""
    log: bool                              # the log showed the generation
    log_completed: bool                    # ... and that it completed ("Assignment received", "is now empty")
    offsets: bool                          # its GroupMetadata record was read
    ts_ms: int                             # the first evidence: its time, source id and sequence number
    due_ms: int                            # when it is checked
    source_id: str
    seq: int


@dataclass(slots=True)
class ProvisionalTrigger:
    """A rebalance emitted with trigger_final false, waiting for its trigger member's removal to be
    decided (GroupModel.provisional_triggers; state/machine/base.py settle_triggers)."""
    member_id: str | None
    generation: int | None
    started_at_ms: int | None
    protocol: str
    outcome: str
    trigger: str
    trigger_member: str | None
    # What a poll timeout would change in its impact (impact.poll_timeout_correction), and the
    # stops of the member's partitions it ended; None: stored before they were kept.
    impact: dict[str, Any] | None = None
    member_stops: list[list[Any]] | None = None


@dataclass
class GroupModel:
    cluster: str
    group: str
    protocol: str = PROTOCOL_CLASSIC
    state: str = UNKNOWN
    generation: int | None = None          # classic generation / consumer group epoch
    leader: str | None = None
    protocol_type: str | None = None
    selected_protocol: str | None = None
    coordinator: int | None = None
    state_since_ms: int | None = None      # timestamp of the last transition
    members: dict[str, Member] = field(default_factory=dict)
    open_rebalance: OpenRebalance | None = None
    # Removals seen while no rebalance was open (2.x logs "has left" before "Preparing"):
    # they are attached to the next rebalance that starts.
    unattached_removals: list[UnattachedRemoval] = field(default_factory=list)
    # Member ids created just before: the trigger of a rebalance that opens without a reason
    # (Kafka 1.1-2.0) right after them.
    recent_joins: list[RecentJoin] = field(default_factory=list)
    # Generation of the GroupMetadata record (or empty line) `members` was last taken from.
    members_generation: int | None = None
    # Clock-skew probe: the log line and the offsets record that mark the same moment of the same
    # generation ("Assignment received" / "is now empty" / "Bumped group epoch" and the
    # GroupMetadata / ConsumerGroupMetadata record), waiting for their partner:
    # {"log": {"<kind>:<gen>": [ts_ms, source]}, "rec": {"<kind>:<gen>": ts_ms}}.
    skew_probe: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Highest generation for which a rebalance record has been emitted: never emit twice.
    last_emitted_generation: int | None = None
    target_assignment_epoch: int | None = None
    # Epoch-based groups: [epoch, broker] of the last "Bumped" line, and [member id, time] of a
    # member of the group that joined again (its coordinator moved). A new coordinator that lost
    # the last epoch's records bumps that epoch number again, for members it did not know
    # (modern.py _epoch_bumped).
    epoch_line: list[Any] | None = None
    rejoined_member: list[Any] | None = None
    # Epoch-based groups: what happened since the last epoch bump (decides the bump's trigger).
    pending_consumer_trigger: dict[str, Any] | None = None
    # Streams groups: the topology epoch, and why the group is NotReady (None when it is not).
    topology_epoch: int | None = None
    not_ready_reason: str | None = None
    # Epoch-based groups, 4.1+: the metadata hash of the newest epoch (its subscribed topics'
    # partitions): a bump that changes it without a member change is a metadata_change.
    metadata_hash: int | None = None
    # Sources ("log", "offsets") that have delivered any event for this group.
    seen_sources: list[str] = field(default_factory=list)
    # Classic generations waiting for the other source's evidence, by str(generation).
    generation_checks: dict[str, GenerationCheck] = field(default_factory=dict)
    # Highest generation whose check is done: later records of it are rewrites (static members).
    checked_generation: int | None = None
    last_commit_ms: int | None = None
    commits_total: int = 0
    rebalances_total: int = 0
    removals_total: int = 0
    invalid_transitions: int = 0
    source_mismatches: int = 0
    last_event_ms: int | None = None
    # Diagnosis (state/diagnosis/rules.py): removal records held until their decision time, with
    # what was learned while held.
    held_removals: list[HeldRemoval] = field(default_factory=list)
    # Rebalances emitted with trigger_final false, waiting for their trigger member's removal to
    # be decided (state/diagnosis/holding.py, trigger_may_change).
    provisional_triggers: list[ProvisionalTrigger] = field(default_factory=list)
    # Inferred LeaveGroup removals waiting METADATA_GRACE_MS for the member's own line (3.x logs it
    # just after the generation that completed without the member).
    pending_inferred: list[InferredRemoval] = field(default_factory=list)
    # Classic generations that completed (their members joined and synced, inside poll()), by
    # str(generation): when their rebalance started (the last few). Poll evidence of the
    # poll-timeout inference (state/diagnosis/holding.py).
    polled_generations: dict[str, int] = field(default_factory=dict)
    # Newest commit time per "topic:partition" (OFFSET_COMMIT records), and the next newest
    # distinct ones, newest first (E.COMMIT_TIMES_KEPT in all): a static member's close commits off
    # its schedule, its crash does not (state/diagnosis/holding.py).
    partition_commits: dict[str, int] = field(default_factory=dict)
    partition_prior_commits: dict[str, list[int]] = field(default_factory=dict)
    # Times the coordinator loaded/unloaded the group (last few).
    coordinator_moves: list[int] = field(default_factory=list)
    # [since_ms, broker] per coordinator the group's lines show, in time order (the last few):
    # who coordinated it at a moment (a broker death's groups, state/incidents.py), whichever
    # batches its lines came in.
    coordinators: list[list[int]] = field(default_factory=list)
    # Start times of recent rebalances (storm gauge), pruned to the storm window.
    rebalance_starts: list[int] = field(default_factory=list)
    # Partitions a classic generation left without an owner after they stopped (a cooperative
    # revocation, a departed owner's partitions not yet assigned): "topic:partition" -> stop time.
    stopped_partitions: dict[str, int] = field(default_factory=dict)
    # Consumer groups (KIP-848): who a stopped partition's stop is due to (a departed member), and
    # the stops member assignment records ended since the last rebalance record: "topic id:partition"
    # -> [seconds, departed member or None(, seconds due to it when the partition stopped twice)]
    # (state/impact.py).
    stop_causes: dict[str, str] = field(default_factory=dict)
    ended_stops: dict[str, list[Any]] = field(default_factory=dict)
    # ...and when each of those stops began and ended: "topic id:partition" -> [[from ms, to ms], ...]
    # (the last few), for what the rebalance cost in records (state/rebalance_cost.py).
    ended_stop_spans: dict[str, list[list[int]]] = field(default_factory=dict)

    # --- serialisation (the Spark state stores this string) -----------------------------------
    def to_json(self) -> str:
        """The stored form (version STATE_VERSION): JSON of the fields that differ from their
        defaults (members without their id, which is the key), compressed by `pack`."""
        return pack(self._plain_json())

    def copy(self) -> GroupModel:
        """An independent copy (the live view's throwaway model: state/live_view.py), through the
        stored form's JSON without its compression, which was most of a copy's cost."""
        return GroupModel.from_json(self._plain_json())

    def _plain_json(self) -> str:
        raw = _compact(self)
        if self.members:
            raw["members"] = {k: _compact(v, skip="member_id") for k, v in self.members.items()}
        if self.open_rebalance is not None:
            raw["open_rebalance"] = _compact(self.open_rebalance)
        for name in _ENTRY_LISTS:      # stored when not empty, as every field
            if name in raw:
                raw[name] = [_compact(entry) for entry in raw[name]]
        if "generation_checks" in raw:
            raw["generation_checks"] = {k: _compact(v) for k, v in raw["generation_checks"].items()}
        if "unattached_removals" in raw:
            raw["unattached_removals"] = [r.stored() for r in self.unattached_removals]
        raw[VERSION_KEY] = STATE_VERSION
        return _ENCODE(raw)

    @classmethod
    def from_json(cls, text: str) -> GroupModel:
        """The model from its stored form, whichever supported version wrote it."""
        raw = json.loads(unpack(text))
        version = raw.pop(VERSION_KEY, 1)
        if version > STATE_VERSION:
            raise ValueError(f"group state of schema version {version} was written by a newer release "
                             f"(this one reads versions 1-{STATE_VERSION})")
        for upgrade in _UPGRADES[version - 1:]:
            raw = upgrade(raw)
        raw["members"] = {k: Member(**{"member_id": k, **v}) for k, v in raw.get("members", {}).items()}
        if raw.get("open_rebalance") is not None:
            raw["open_rebalance"] = OpenRebalance(**raw["open_rebalance"])
        for name, entry in _ENTRY_LISTS.items():
            if name in raw:
                raw[name] = [entry(**e) for e in raw[name]]
        if "generation_checks" in raw:
            raw["generation_checks"] = {k: GenerationCheck(**v) for k, v in raw["generation_checks"].items()}
        if "unattached_removals" in raw:
            raw["unattached_removals"] = [UnattachedRemoval.from_stored(r) for r in raw["unattached_removals"]]
        if "recent_joins" in raw:
            raw["recent_joins"] = [RecentJoin(*j) for j in raw["recent_joins"]]
        return cls(**raw)


# The stored form's schema version (docs/design.md, "State versions"). Version 1 (commit 2a45599
# and before) had no version key; version 2 adds the key and nothing else; version 3 leaves out
# fields at their default and members' ids (the key of `members`), and compresses (`pack`);
# version 4 changes nothing in the model: the held rows stored beside it may carry their data as a
# JSON object (streaming/rows.py PACKED_DATA), which a release before it cannot read. A
# release that renames, removes or re-types a field bumps STATE_VERSION and appends the upgrade
# from the previous version to _UPGRADES, so every older checkpoint still loads.
VERSION_KEY = "schema_version"
STATE_VERSION = 4

_ENCODE = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
# The default of every field of the stored dataclasses (default_factory called once).
_DEFAULTS: dict[type, list[tuple[str, Any]]] = {
    cls: [(f.name, f.default if f.default is not MISSING
           else f.default_factory() if f.default_factory is not MISSING else MISSING)
          for f in fields(cls)]
    for cls in (GroupModel, Member, OpenRebalance, HeldRemoval, InferredRemoval, GenerationCheck, ProvisionalTrigger)
}
# The model's lists of entries, and the entry each holds (generation_checks: a dict of GenerationCheck).
_ENTRY_LISTS: dict[str, type[HeldRemoval | InferredRemoval | ProvisionalTrigger]] = {
    "held_removals": HeldRemoval, "pending_inferred": InferredRemoval, "provisional_triggers": ProvisionalTrigger}


def _compact(obj: Any, skip: str = "") -> dict[str, Any]:
    """The fields of a dataclass that differ from their default, without copying them (the
    values are JSON-native, or the nested dataclasses to_json handles)."""
    out: dict[str, Any] = {}
    for name, default in _DEFAULTS[type(obj)]:
        if name == skip:
            continue
        value = getattr(obj, name)
        if default is MISSING or value != default:
            out[name] = value
    return out


# Packed strings start with this; JSON (versions 1 and 2, or a short version 3) starts with "{" or "[".
PACKED = "z:"
PACK_MIN_CHARS = 160     # below this compression does not pay for its header and base64


def pack(text: str) -> str:
    """A stored JSON string, zlib-compressed and base64-encoded when that makes it shorter (the
    Spark state keeps strings; a group's members and held rows repeat ids and field names)."""
    if len(text) < PACK_MIN_CHARS:
        return text
    data = text.encode()
    # A window no larger than the text: zlib sets up (and clears) its whole window and hash table
    # per call, which for a 1 KB model took 5x the compression itself. The stream stays standard
    # zlib, which unpack (and every release) reads whatever the window.
    window_bits = max(9, min(15, (len(data) - 1).bit_length()))
    deflate = zlib.compressobj(6, zlib.DEFLATED, window_bits, max(1, min(8, window_bits - 7)))
    packed = PACKED + base64.b64encode(deflate.compress(data) + deflate.flush()).decode("ascii")
    return packed if len(packed) < len(text) else text


def unpack(text: str) -> str:
    """The JSON of a stored string, packed or not (every version)."""
    if text.startswith(PACKED):
        return zlib.decompress(base64.b64decode(text[len(PACKED):])).decode()
    return text


def _v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    return raw


def _v2_to_v3(raw: dict[str, Any]) -> dict[str, Any]:
    """Version 2 has every field and the members' ids; the loader fills defaults and ids either way."""
    return raw


def _v3_to_v4(raw: dict[str, Any]) -> dict[str, Any]:
    """Version 4 differs in the held rows beside the model, which load either way (rows.event_data)."""
    return raw


# _UPGRADES[n - 1] turns the raw dict of version n into version n + 1.
_UPGRADES: list[Callable[[dict[str, Any]], dict[str, Any]]] = [_v1_to_v2, _v2_to_v3, _v3_to_v4]
assert len(_UPGRADES) == STATE_VERSION - 1
