"""The machine's component for the epoch-based groups of the Java coordinator: KIP-848 consumer
groups, share groups (KIP-932) and streams groups (KIP-1071). One rebalance per group-epoch bump,
complete when every member's current assignment (record type 8 / 14 / 22, or the "new assignment
state" line) reaches the epoch and is STABLE, whatever order the members get there in; a member's
departure completes nothing (its tombstones come with the next epoch), and a member at an epoch
above the group's shows that epoch's bump (docs/output.md, rebalances).

Which type a group is comes from the events that say it (`data.group_type`: a join line, the
records); share groups print the consumer wording for their bumps, target assignments and fences,
so those lines keep the type the group already has."""
from __future__ import annotations

from typing import TYPE_CHECKING

from state import events as E
from state.machine.base import REMOVAL_ATTACH_WINDOW_MS, REMOVAL_CAUSE_TO_TRIGGER
from state.impact import note_consumer_departure, note_ownership
from state.model import (
    ASSIGNING, DEAD, EMPTY, EPOCH_PROTOCOLS, NOT_READY, PROTOCOL_CLASSIC, PROTOCOL_CONSUMER, PROTOCOL_SHARE,
    PROTOCOL_STREAMS, RECONCILING, STABLE, UNKNOWN, Member
)
from state.vocabulary import Outcome, RemovalCause, Trigger

if TYPE_CHECKING:
    from state.machine.core import GroupStateMachine

# A member's reconciliation state as the model keeps it (Member.member_state): the codes of
# org.apache.kafka.coordinator.group.modern.MemberState, which consumer (type 8) and share (type 14)
# records carry, STABLE 0. Streams records (type 22) carry another enum, streams.MemberState, in which
# STABLE is 1 (1 STABLE, 2 UNREVOKED_TASKS, 3 UNRELEASED_TASKS, 127 UNKNOWN): a member is read by the
# state's name, which the lines print and the decoded records carry (`data.state_name`).
MEMBER_STATE_STABLE = 0
MEMBER_STATE_UNKNOWN = 127
MEMBER_STATE_CODES = {"STABLE": MEMBER_STATE_STABLE, "UNREVOKED_PARTITIONS": 1, "UNRELEASED_PARTITIONS": 2,
                      "UNREVOKED_TASKS": 1, "UNRELEASED_TASKS": 2, "UNKNOWN": MEMBER_STATE_UNKNOWN}
# streams.MemberState code -> the model's code, for a streams record without its name.
STREAMS_RECORD_STATES = {1: MEMBER_STATE_STABLE, 2: MEMBER_STATE_CODES["UNREVOKED_TASKS"],
                         3: MEMBER_STATE_CODES["UNRELEASED_TASKS"]}
FENCE_CAUSES = {"session": RemovalCause.HEARTBEAT_EXPIRY, "rebalance": RemovalCause.REBALANCE_TIMEOUT,
                "join": RemovalCause.REBALANCE_TIMEOUT, "sync": RemovalCause.SYNC_TIMEOUT}


class ModernProtocol:
    """Handles the events of consumer, share and streams groups; calls the machine's services
    through `machine`."""

    def __init__(self, machine: GroupStateMachine) -> None:
        self.machine = machine

    def note_consumer_trigger(self, trigger: str, member_id: str | None, ev: E.Event) -> None:
        m = self.machine.m
        if m.pending_consumer_trigger is None:
            m.pending_consumer_trigger = {"trigger": trigger, "member": member_id,
                                          "reason": ev.data.get("message") or ev.reason}

    def group_type_of(self, ev: E.Event) -> str:
        """The epoch-based type the event says, else the one the group has (consumer by default)."""
        said = ev.data.get("group_type")
        if said in EPOCH_PROTOCOLS:
            return str(said)
        protocol = self.machine.m.protocol
        return protocol if protocol in EPOCH_PROTOCOLS else PROTOCOL_CONSUMER

    def become_epoch_based(self, ev: E.Event, target: str | None = None) -> None:
        machine, m = self.machine, self.machine.m
        machine.reincarnate_if_dead(ev)
        target = target or self.group_type_of(ev)
        if m.protocol == target:
            return
        if m.protocol in EPOCH_PROTOCOLS:
            # A line in the consumer wording made it look like a consumer group; this event says
            # what it is. Nothing else changes: the group is the same.
            m.protocol = target
            if m.open_rebalance is not None and m.open_rebalance.protocol in EPOCH_PROTOCOLS:
                m.open_rebalance.protocol = target
            return
        if m.open_rebalance is not None:
            machine.close_open_as(Outcome.SUPERSEDED, ev)
        m.protocol = target
        m.members = {k: v for k, v in m.members.items() if v.has_assignment_record}
        m.members_generation = None

    def move_to(self, state: str, ev: E.Event) -> None:
        """A derived state of an epoch-based group: share groups are Stable while they have
        members, a NotReady streams group stays NotReady until its topology is ready."""
        machine, m = self.machine, self.machine.m
        if m.protocol == PROTOCOL_SHARE and state in (ASSIGNING, RECONCILING):
            state = STABLE
        if m.protocol == PROTOCOL_STREAMS and m.not_ready_reason is not None and state in (ASSIGNING, RECONCILING,
                                                                                           STABLE):
            state = NOT_READY
        machine.transition_to(state, ev, table=m.protocol)

    def on_consumer_member_joined(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        self.become_epoch_based(ev)
        known = m.members.get(ev.member_id) if ev.member_id else None
        if ev.member_id and known is None:
            m.members[ev.member_id] = Member(member_id=ev.member_id,
                                             group_instance_id=ev.data.get("group_instance_id"))
        if ev.member_id:
            machine.observe_join(ev.member_id, None, None, ev)
        if known is not None and known.reached_at_ms is not None and known.reached_at_ms < ev.ts_ms:
            # A member of the group joining again (a share client rejoins at epoch 0 when its
            # coordinator moved): the membership is the same, so no epoch bump follows from it, and
            # it must not stand as the trigger of the next bump (a later leave's), unless its new
            # coordinator did not know it (_epoch_bumped: an epoch bumped again).
            m.rejoined_member = [ev.member_id, ev.ts_ms]
            return
        self.note_consumer_trigger(Trigger.MEMBER_JOIN, ev.member_id, ev)

    def on_consumer_member_left(self, ev: E.Event) -> None:
        self.become_epoch_based(ev)
        if ev.member_id:
            known = ev.member_id in self.machine.m.members
            self.machine.remove_member(ev.member_id, RemovalCause.LEAVE_GROUP, ev)
            self.note_consumer_trigger(Trigger.MEMBER_LEAVE, ev.member_id, ev)
            self._maybe_emptied(ev, known)

    def on_consumer_member_fenced(self, ev: E.Event) -> None:
        self.become_epoch_based(ev)
        cause = FENCE_CAUSES.get(ev.data.get("fence_reason") or "", RemovalCause.HEARTBEAT_EXPIRY)
        if ev.member_id:
            known = ev.member_id in self.machine.m.members
            self.machine.remove_member(ev.member_id, cause, ev)
            self.note_consumer_trigger(REMOVAL_CAUSE_TO_TRIGGER[cause], ev.member_id, ev)
            self._maybe_emptied(ev, known, REMOVAL_CAUSE_TO_TRIGGER[cause])

    def _maybe_emptied(self, ev: E.Event, removed_was_known: bool, trigger: str = Trigger.MEMBER_LEAVE) -> None:
        """The last member the group had is gone (only for a member the model knew: a group seen
        mid-life may have members it never saw)."""
        if not self.machine.m.members and removed_was_known:
            self._emptied(ev, trigger)

    def _emptied(self, ev: E.Event, trigger: str) -> None:
        """Kafka bumps the epoch once more and the group is Empty: that bump is the rebalance that
        ends `empty` (as a classic group's last leave does), and an epoch still reconciling is
        superseded by it. Kafka logs no "Bumped" line for a leave or a fence (4.4), and the epoch
        record, when read, comes after the member's tombstones (on_cg_epoch: it starts nothing)."""
        machine, m = self.machine, self.machine.m
        o = m.open_rebalance
        if o is not None and o.completed_at_ms is None:
            machine.close_open_as(Outcome.SUPERSEDED, ev)
        m.pending_consumer_trigger = None
        if m.generation is None:
            self.move_to(EMPTY, ev)
            return
        bump = machine.start_rebalance(ev, m.protocol, m.generation, trigger, ev.member_id,
                                       ev.data.get("message") or ev.reason, ev.ts_ms, generation=m.generation + 1)
        machine.enter_generation(m.generation + 1)
        self.move_to(EMPTY, ev)
        # Held METADATA_GRACE_MS for the "Bumped group epoch" line that 4.0 logs right after
        # (the epoch starts there); flush_pending_completion emits it `empty`.
        bump.completed_at_ms = ev.ts_ms

    def on_rebalance_requested(self, ev: E.Event) -> None:
        self.become_epoch_based(ev)
        self.note_consumer_trigger(ev.data.get("trigger") or Trigger.METADATA_CHANGE,
                                   ev.member_id or ev.data.get("prefix_member"), ev)

    def _bumped_again(self, ev: E.Event) -> bool:
        """A "Bumped" line of an epoch another coordinator's line bumped already."""
        line = self.machine.m.epoch_line
        return (ev.source == E.SOURCE_LOG and ev.broker is not None and line is not None
                and ev.generation is not None and ev.generation <= line[0] and line[1] != ev.broker)

    def start_epoch(self, ev: E.Event, epoch: int) -> None:
        machine, m = self.machine, self.machine.m
        self.become_epoch_based(ev)
        m.rejoined_member = None
        if ev.source == E.SOURCE_LOG and ev.broker is not None and ev.kind == E.GROUP_EPOCH_BUMPED:
            m.epoch_line = [epoch, ev.broker]
        if m.open_rebalance is not None:
            machine.close_open_as(Outcome.SUPERSEDED, ev)
        pending = m.pending_consumer_trigger or {}
        m.pending_consumer_trigger = None
        machine.start_rebalance(ev, m.protocol, m.generation,
                                pending.get("trigger") or self._bump_trigger(ev), pending.get("member"),
                                pending.get("reason") or ev.reason, ev.ts_ms, generation=epoch)
        machine.enter_generation(epoch)
        # Completion is decided by the members' current assignments.
        self.move_to(ASSIGNING if m.members else EMPTY, ev)

    def _bump_trigger(self, ev: E.Event) -> str:
        """An epoch bump no member change explains: `metadata_change` when the group's metadata hash
        (of its subscribed topics' partitions, 4.1+: the epoch record and the "Bumped" line carry it)
        differs from the previous epoch's, as after a partition increase; else `group_epoch_bump`."""
        new, old = ev.data.get("metadata_hash"), self.machine.m.metadata_hash
        changed = new is not None and old is not None and new != old
        return Trigger.METADATA_CHANGE if changed else Trigger.GROUP_EPOCH_BUMP

    def note_metadata_hash(self, ev: E.Event) -> None:
        m = self.machine.m
        if ev.data.get("metadata_hash") is not None and ev.generation is not None \
                and (m.generation is None or ev.generation >= m.generation):
            m.metadata_hash = ev.data["metadata_hash"]

    def on_group_epoch_bumped(self, ev: E.Event) -> None:
        self._epoch_bumped(ev)
        self.note_metadata_hash(ev)

    def _epoch_bumped(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        if ev.generation is None:
            return
        o = m.open_rebalance
        if m.protocol in EPOCH_PROTOCOLS and m.generation is not None and ev.generation <= m.generation \
                and self._bumped_again(ev):
            # A new coordinator that lost the last epoch's records (not yet replicated when its
            # broker died) bumps that epoch number again, for a member it did not know: a new
            # rebalance, started by that member's join.
            rejoined = m.rejoined_member
            if rejoined is not None and 0 <= ev.ts_ms - rejoined[1] <= REMOVAL_ATTACH_WINDOW_MS:
                m.pending_consumer_trigger = {"trigger": Trigger.MEMBER_JOIN, "member": rejoined[0]}
            self.start_epoch(ev, ev.generation)
            return
        if ev.source == E.SOURCE_LOG and ev.broker is not None and ev.generation == m.generation:
            m.epoch_line = [ev.generation, ev.broker]
        if m.protocol in EPOCH_PROTOCOLS and m.generation is not None and ev.generation <= m.generation:
            # The epoch record sorted first and opened this epoch already: the log line only
            # brings an earlier start, the reason and the group's type.
            self.become_epoch_based(ev)
            if o is not None and o.protocol in EPOCH_PROTOCOLS and o.generation == ev.generation:
                if o.completed_at_ms is not None:
                    # The last member's leave bumped this epoch (_emptied): Kafka's line dates it.
                    o.started_at_ms = ev.ts_ms
                    machine.emit_emptied(o, max(ev.ts_ms, o.completed_at_ms))
                elif o.started_at_ms is not None:
                    o.started_at_ms = min(o.started_at_ms, ev.ts_ms)
            return
        self.start_epoch(ev, ev.generation)

    def on_target_assignment(self, ev: E.Event) -> None:
        m = self.machine.m
        if ev.generation is not None and m.protocol in EPOCH_PROTOCOLS and m.generation is not None \
                and ev.generation > m.generation:
            # A fence or a leave bumps the epoch without a "Bumped" line (the epoch record has
            # it): the target assignment of the new epoch is the first line that shows it.
            self.start_epoch(ev, ev.generation)
        m.target_assignment_epoch = ev.generation
        self.note_assignment(ev)
        if m.protocol in EPOCH_PROTOCOLS and m.members:
            self.move_to(RECONCILING, ev)

    def note_assignment(self, ev: E.Event) -> None:
        """The end of the open epoch's assignment phase: the first "Computed a new target assignment"
        line or target-assignment record (type 6) of that epoch."""
        o = self.machine.m.open_rebalance
        if o is not None and o.protocol in EPOCH_PROTOCOLS and o.generation == ev.generation:
            o.assigned_at_ms = ev.ts_ms if o.assigned_at_ms is None else min(o.assigned_at_ms, ev.ts_ms)

    def on_group_converted(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        to = ev.data.get("to")
        if to in EPOCH_PROTOCOLS:
            self.become_epoch_based(ev, str(to))
        elif to == PROTOCOL_CLASSIC and m.protocol in EPOCH_PROTOCOLS:
            machine.close_open_as(Outcome.SUPERSEDED, ev)
            m.protocol = PROTOCOL_CLASSIC

    def on_streams_topology(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        self.become_epoch_based(ev)
        if ev.data.get("topology_epoch") is not None:
            m.topology_epoch = ev.data["topology_epoch"]
        ready = ev.data.get("ready")
        if ready is False:
            m.not_ready_reason = ev.data.get("not_ready_reason") or "not_ready"
            machine.transition_to(NOT_READY, ev, table=m.protocol)
        elif ready is True and m.not_ready_reason is not None:
            m.not_ready_reason = None
            o = m.open_rebalance
            self.move_to(ASSIGNING if o is not None and o.completed_at_ms is None else STABLE if m.members
                         else EMPTY, ev)

    def on_cg_epoch(self, ev: E.Event) -> None:
        self._epoch_record(ev)
        self.note_metadata_hash(ev)

    def _epoch_record(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        if ev.data.get("tombstone"):
            if m.protocol in EPOCH_PROTOCOLS:
                machine.common.on_group_dead(ev)   # the group's death means the same for every protocol
            return
        if ev.generation is None:
            return
        if m.protocol in EPOCH_PROTOCOLS and m.generation is not None and ev.generation <= m.generation:
            self.become_epoch_based(ev)
            return
        if m.protocol == PROTOCOL_CLASSIC and m.state not in (UNKNOWN, DEAD) \
                and m.last_emitted_generation is not None:
            # Conversion writes an epoch record without a "Bumped" line; the next bump counts.
            self.become_epoch_based(ev)
            machine.enter_generation(ev.generation)
            return
        if m.protocol in EPOCH_PROTOCOLS and m.state == EMPTY and not m.members and m.generation is not None:
            # The last member's tombstones come before this record (Kafka writes a leaving or
            # fenced member's records, then the group's new epoch): the group emptied, which
            # closed its epoch; the bump starts nothing. A join writes its member first.
            machine.enter_generation(ev.generation)
            return
        self.start_epoch(ev, ev.generation)

    def on_cg_member(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        if not ev.member_id or ev.data.get("tombstone"):
            return
        self.become_epoch_based(ev)
        member = m.members.get(ev.member_id) or Member(member_id=ev.member_id)
        member.client_id = ev.data.get("client_id", member.client_id)
        member.client_host = ev.data.get("client_host", member.client_host)
        member.group_instance_id = ev.data.get("instance_id", member.group_instance_id)
        member.rebalance_timeout_ms = ev.data.get("rebalance_timeout_ms", member.rebalance_timeout_ms)
        if ev.data.get("session_timeout_ms") is not None:
            member.session_timeout_ms = ev.data["session_timeout_ms"]
        if ev.data.get("topology_epoch") is not None:
            m.topology_epoch = max(m.topology_epoch or 0, ev.data["topology_epoch"])
        m.members[ev.member_id] = member
        machine.observe_join(ev.member_id, member.client_id, member.client_host, ev)

    def on_cg_target_epoch(self, ev: E.Event) -> None:
        if not ev.data.get("tombstone") and ev.generation is not None:
            self.machine.m.target_assignment_epoch = ev.generation
            self.note_assignment(ev)

    def on_cg_member_assignment(self, ev: E.Event) -> None:
        if not ev.member_id:
            return
        m = self.machine.m
        if ev.data.get("tombstone"):
            gone = m.members.pop(ev.member_id, None)
            if m.protocol == PROTOCOL_CONSUMER:
                note_consumer_departure(m, ev.member_id, gone, ev.ts_ms)
            if any(mm.has_assignment_record for mm in m.members.values()):
                # A departure completes nothing while members remain: Kafka writes a leaving or
                # fenced member's tombstones in one batch with the group's next epoch, which
                # supersedes this one, and a replaced static member's with its successor's records,
                # which carry its state. A fence or leave line completes nothing either.
                return
        else:
            self._member_reached(ev, ev.data.get("member_epoch"), self.reported_state(ev))
            if m.protocol == PROTOCOL_CONSUMER:
                member = m.members[ev.member_id]
                member.assignment_record_ms = ev.ts_ms
                if ev.data.get("owned") is not None:
                    note_ownership(m, member, ev.data["owned"], ev.ts_ms)
        self.check_convergence(ev)

    def on_member_assignment_state(self, ev: E.Event) -> None:
        """The log line that says what the assignment record says (streams 4.1+, consumer 3.8-3.9)."""
        if not ev.member_id:
            return
        self._member_reached(ev, ev.data.get("member_epoch"), self.reported_state(ev))
        self.check_convergence(ev)

    def reported_state(self, ev: E.Event) -> int | None:
        """The state a member's line or current-assignment record reports, in the model's codes
        (MEMBER_STATE_CODES): by its name when the event has it (every line and decoded record),
        else by the record's code, which for a streams record is of the streams enum."""
        name = ev.data.get("state_name")
        if name is not None:
            return MEMBER_STATE_CODES.get(str(name), MEMBER_STATE_UNKNOWN)
        code = ev.data.get("state")
        if code is not None and self.group_type_of(ev) == PROTOCOL_STREAMS:
            return STREAMS_RECORD_STATES.get(code, MEMBER_STATE_UNKNOWN)
        return code

    def _member_reached(self, ev: E.Event, epoch: int | None, state: int | None) -> None:
        m = self.machine.m
        self.become_epoch_based(ev)
        if epoch is not None and m.generation is not None and epoch > m.generation:
            # A member's epoch never passes the target assignment's, nor that the group's: the
            # group is at this epoch, whose bump the model has not seen (no line for it in the
            # input, its record sorting after this line in their millisecond). As a target
            # assignment line does for a fence's bump, the first report of the epoch starts it.
            self.start_epoch(ev, epoch)
            self.move_to(RECONCILING, ev)
        member = m.members.get(ev.member_id or "") or Member(member_id=ev.member_id or "")
        member.member_epoch = epoch
        member.member_state = state
        member.has_assignment_record = True
        member.reached_at_ms = ev.ts_ms
        m.members[member.member_id] = member

    def check_convergence(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        o = m.open_rebalance
        if o is None or o.protocol not in EPOCH_PROTOCOLS or o.generation is None:
            return
        live = [mm for mm in m.members.values() if mm.has_assignment_record]
        if not live:
            if not m.members:
                self.move_to(EMPTY, ev)
                machine.emit_rebalance(o, Outcome.EMPTY, ev.ts_ms, 0)
            return
        if all(mm.member_epoch == o.generation and mm.member_state == MEMBER_STATE_STABLE for mm in live):
            o.completed_at_ms = ev.ts_ms
            self.move_to(STABLE, ev)
            machine.emit_rebalance(o, Outcome.STABLE, ev.ts_ms, len(live))
