"""The machine's component for classic-protocol events: the JoinGroup/SyncGroup rebalance as the
coordinator logs it (Preparing -> Stabilized -> Assignment received, or -> now empty), member
removals, and the GroupMetadata records of __consumer_offsets."""
from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from state import events as E
from state.machine.base import METADATA_GRACE_MS, REMOVAL_ATTACH_WINDOW_MS
from state.model import (
    COMPLETING_REBALANCE, DEAD, EMPTY, EPOCH_PROTOCOLS, PREPARING_REBALANCE, PROTOCOL_CLASSIC, STABLE, UNKNOWN,
    InferredRemoval, Member, OpenRebalance, RecentJoin
)
from state.outputs import REBALANCE_TIMEOUT_SHARE
from state.vocabulary import Outcome, RemovalCause, Trigger

if TYPE_CHECKING:
    from state.machine.core import GroupStateMachine

INFERRED_LEAVE = ("inferred: member of generation {prev}, absent from generation {gen}, no removal line; "
                  "left with LeaveGroup (logged at DEBUG before Kafka 2.2)")
INFERRED_TIMEOUT = ("inferred: member of generation {prev}, absent from generation {gen}, no removal line; "
                    "the JOIN phase lasted its rebalance timeout (dropped silently before Kafka 2.7)")


class ClassicProtocol:
    """Handles the classic protocol's events; calls the machine's services through `machine`."""

    def __init__(self, machine: GroupStateMachine) -> None:
        self.machine = machine

    def reconcile_membership(self, o: OpenRebalance | None, previous: dict[str, Member],
                             previous_generation: int | None, new_ids: list[str], ev: E.Event) -> None:
        """A classic generation completed: account for members that changed without a line.

        Kafka 1.1-2.1 logs a LeaveGroup only at DEBUG and no reason on "Preparing to rebalance";
        before 2.7 members that miss the JOIN phase are dropped silently. So a member of the
        previous generation that is absent from the new one and was not removed by any line is
        removed here (cause leave_group, or rebalance_timeout when the JOIN phase lasted its
        rebalance timeout), and a rebalance without a reason gets the trigger the membership
        change shows: member_leave if someone left, else member_join if someone new is in.
        Only when `previous` (the member list of `previous_generation`) is the member list of the
        generation this rebalance started from.
        """
        machine, m = self.machine, self.machine.m
        if o is None or o.protocol != PROTOCOL_CLASSIC or o.previous_generation is None:
            return
        if not o.starts_from(previous, previous_generation):
            return
        current = set(new_ids)
        join_ms = None if o.started_at_ms is None or o.join_completed_at_ms is None \
            else o.join_completed_at_ms - o.started_at_ms
        leavers = []
        for member_id in sorted(mid for mid in previous if mid not in current):
            known = previous[member_id]
            timeout = known.rebalance_timeout_ms
            timed_out = join_ms is not None and timeout is not None and timeout > 0 \
                and join_ms >= REBALANCE_TIMEOUT_SHARE * timeout
            cause = RemovalCause.REBALANCE_TIMEOUT if timed_out else RemovalCause.LEAVE_GROUP
            at_ms = o.join_completed_at_ms if timed_out else o.started_at_ms
            if at_ms is None:
                at_ms = ev.ts_ms
            template = INFERRED_TIMEOUT if timed_out else INFERRED_LEAVE
            record = machine.removal(member_id, known, cause, ev, at_ms, o.previous_generation,
                                     evidence=template.format(prev=o.previous_generation, gen=o.generation))
            if not timed_out and E.SOURCE_LOG in m.seen_sources:
                # The member's own "has left" line may still come (3.x logs it after "is now empty").
                m.pending_inferred.append(InferredRemoval(due=ev.ts_ms + METADATA_GRACE_MS, rec=record,
                                                          known=asdict(known)))
            else:
                machine.hold(record, known)
            m.removals_total += 1
            machine.note_removal_in(o, member_id, known, cause, at_ms)
            if not timed_out:
                leavers.append(member_id)
        if o.trigger == Trigger.UNKNOWN and o.reason_text is None:
            joined = [mid for mid in new_ids if mid not in previous and mid not in o.removals]
            if m.leader in joined:
                # The first member to join a group becomes its leader: into a group without
                # members, that is the member whose JoinGroup started the rebalance.
                joined.remove(m.leader)
                joined.insert(0, m.leader)
            if leavers:
                o.trigger, o.trigger_member = Trigger.MEMBER_LEAVE, o.trigger_member or leavers[0]
            elif joined:
                o.trigger, o.trigger_member = Trigger.MEMBER_JOIN, o.trigger_member or joined[0]

    def on_member_created(self, ev: E.Event) -> None:
        if not ev.member_id:
            return
        machine, m = self.machine, self.machine.m
        m.recent_joins = [j for j in m.recent_joins if ev.ts_ms - j.at_ms <= REMOVAL_ATTACH_WINDOW_MS]
        m.recent_joins.append(RecentJoin(ev.member_id, ev.ts_ms))
        machine.observe_join(ev.member_id, None, None, ev)

    def on_prepare(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        machine.reincarnate_if_dead(ev)
        if m.protocol in EPOCH_PROTOCOLS:
            # Downgrade to classic: the consumer epoch ends, the classic rebalance starts.
            machine.close_open_as(Outcome.SUPERSEDED, ev)
            m.protocol = PROTOCOL_CLASSIC
            machine.transition_to(STABLE, ev, table=None)
        superseded = m.open_rebalance
        if superseded is not None:
            machine.close_open_as(Outcome.SUPERSEDED, ev)
        machine.transition_to(PREPARING_REBALANCE, ev)
        if ev.generation is not None:
            machine.enter_generation(ev.generation)
        trigger = ev.data.get("trigger") or Trigger.UNKNOWN
        downgrade = (ev.reason or "").startswith("Downgrade group")
        # A downgrade follows the removal of the last consumer-protocol member: that removal (its
        # cause: leave, poll timeout, fence) is the trigger; the reason's own class when none is seen.
        opened = machine.start_rebalance(ev, PROTOCOL_CLASSIC, ev.generation, Trigger.UNKNOWN if downgrade else trigger,
                                         ev.data.get("trigger_member"), ev.reason, ev.ts_ms)
        if downgrade and opened.trigger == Trigger.UNKNOWN:
            opened.trigger = trigger
        if superseded is not None and superseded.protocol == PROTOCOL_CLASSIC and superseded.completed_at_ms is None \
                and superseded.previous_generation is not None:
            # its generation ended before the leader's assignment: the members hold the one before
            opened.assignment_generation = superseded.basis_generation
        if trigger == Trigger.MEMBER_JOIN and ev.data.get("trigger_member"):
            machine.observe_join(ev.data["trigger_member"], None, None, ev)

    def _open_rebalance_for(self, ev: E.Event) -> OpenRebalance:
        """The open rebalance, or one started by this line when its "Preparing" line was missed."""
        machine = self.machine
        return machine.m.open_rebalance or machine.start_rebalance(ev, PROTOCOL_CLASSIC, (ev.generation or 1) - 1,
                                                                   Trigger.UNKNOWN, None, None, None)

    def on_join_complete(self, ev: E.Event) -> None:
        machine = self.machine
        o = self._open_rebalance_for(ev)
        machine.transition_to(COMPLETING_REBALANCE, ev)
        machine.enter_generation(ev.generation, o)
        o.join_completed_at_ms = ev.ts_ms

    def on_group_empty(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        if m.state == EMPTY and ev.generation is not None and m.last_emitted_generation is not None \
                and ev.generation <= m.last_emitted_generation:
            return   # the empty GroupMetadata record of this generation came first
        o = self._open_rebalance_for(ev)
        machine.transition_to(EMPTY, ev)
        machine.enter_generation(ev.generation, o)
        o.join_completed_at_ms = ev.ts_ms
        self.reconcile_membership(o, m.members, m.members_generation, [], ev)
        machine.replaced = (dict(m.members), m.members_generation, ev.generation)
        m.members.clear()
        m.members_generation = ev.generation
        m.leader = None
        machine.emit_rebalance(o, Outcome.EMPTY, ev.ts_ms, 0)

    def on_assignment_received(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        if ev.member_id:
            m.leader = ev.member_id
        o = m.open_rebalance
        if m.state == STABLE and m.generation == ev.generation:
            return  # the metadata record came first
        if o is None or m.state != COMPLETING_REBALANCE or m.generation != ev.generation:
            if m.last_emitted_generation is not None and ev.generation is not None \
                    and ev.generation <= m.last_emitted_generation:
                return
            o = o or machine.start_rebalance(ev, PROTOCOL_CLASSIC, (ev.generation or 1) - 1, Trigger.UNKNOWN,
                                             None, None, None)
            machine.enter_generation(ev.generation, o)
        machine.transition_to(STABLE, ev)
        o.completed_at_ms = ev.ts_ms
        o.logged_members = ev.data.get("members")
        if ev.data.get("members") is not None and E.SOURCE_OFFSETS not in m.seen_sources:
            # Kafka 2.8+ says how many members; without the offsets topic there is no record of the
            # generation to wait for (with it, the record's assignment is the rebalance's impact).
            machine.emit_rebalance(o, Outcome.STABLE, ev.ts_ms, ev.data["members"])

    def on_group_metadata(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        members = ev.data.get("members") or []
        gen = ev.generation
        if gen == 0 and not members:
            # Java coordinator: an empty record when the group is created.
            if m.state in (UNKNOWN, DEAD):
                machine.reincarnate_if_dead(ev)
                machine.transition_to(EMPTY, ev, table=None)
                machine.enter_generation(0)
            return
        machine.reincarnate_if_dead(ev)
        if m.protocol in EPOCH_PROTOCOLS and m.open_rebalance is not None \
                and m.open_rebalance.protocol in EPOCH_PROTOCOLS:
            machine.close_open_as(Outcome.SUPERSEDED, ev)
        previous, previous_generation = self._take_metadata(ev)
        o = m.open_rebalance
        if o is not None and o.generation == gen and o.completed_at_ms is not None:
            # The rebalance completed in the log and waited for this record's member list.
            self.reconcile_membership(o, previous, previous_generation, list(m.members), ev)
            machine.emit_rebalance(o, Outcome.STABLE, o.completed_at_ms, len(m.members))
        elif not members:
            self._empty_generation_record(ev, previous, previous_generation)
        else:
            self._generation_record(ev, previous, previous_generation)

    def _take_metadata(self, ev: E.Event) -> tuple[dict[str, Member], int | None]:
        """The record's protocol, leader and members into the model; returns the member list it
        replaced and that list's generation."""
        machine, m = self.machine, self.machine.m
        d = ev.data
        m.protocol = PROTOCOL_CLASSIC
        if d.get("protocol_type") is not None:
            m.protocol_type = d["protocol_type"]
        m.selected_protocol = d.get("protocol")
        m.leader = d.get("leader")
        new_members: dict[str, Member] = {}
        for raw in d.get("members") or []:
            mid = raw.get("member_id")
            if not mid:
                continue
            new_members[mid] = Member(
                member_id=mid, client_id=raw.get("client_id"), client_host=raw.get("client_host"),
                group_instance_id=raw.get("group_instance_id"),
                session_timeout_ms=raw.get("session_timeout_ms"),
                rebalance_timeout_ms=raw.get("rebalance_timeout_ms"), partitions=raw.get("partitions"),
            )
        for mid, mm in new_members.items():
            if mid not in m.members:
                machine.observe_join(mid, mm.client_id, mm.client_host, ev)
        previous, previous_generation = m.members, m.members_generation
        m.members = new_members
        m.members_generation = ev.generation
        machine.replaced = (previous, previous_generation, ev.generation)
        return previous, previous_generation

    def _already_emitted(self, gen: int | None) -> bool:
        last = self.machine.m.last_emitted_generation
        return last is not None and gen is not None and gen <= last

    def _empty_generation_record(self, ev: E.Event, previous: dict[str, Member],
                                 previous_generation: int | None) -> None:
        """A GroupMetadata record without members: the group became Empty at this generation."""
        machine, m = self.machine, self.machine.m
        gen, o = ev.generation, m.open_rebalance
        if m.state == EMPTY and m.generation == gen:
            return
        if o is not None and m.state == PREPARING_REBALANCE:
            # The "is now empty" line is missing: the record ends the rebalance.
            machine.transition_to(EMPTY, ev)
            machine.enter_generation(gen, o)
            o.join_completed_at_ms = ev.ts_ms
            self.reconcile_membership(o, previous, previous_generation, [], ev)
            machine.emit_rebalance(o, Outcome.EMPTY, ev.ts_ms, 0)
            return
        # Stable -> (PreparingRebalance) -> Empty: offsets-only input never sees the middle
        # state, as for the Stable -> Stable case below; not an invalid transition.
        machine.transition_to(EMPTY, ev, table=None if m.state in (UNKNOWN, DEAD, STABLE) else PROTOCOL_CLASSIC)
        if not self._already_emitted(gen) and gen is not None and (m.generation is None or gen > m.generation):
            if o is not None:
                machine.close_open_as(Outcome.SUPERSEDED, ev)
            o = machine.start_rebalance(ev, PROTOCOL_CLASSIC, m.generation, Trigger.UNKNOWN, None, None, None, gen)
            o.join_completed_at_ms = ev.ts_ms
            machine.emit_rebalance(o, Outcome.EMPTY, ev.ts_ms, 0)
        machine.enter_generation(gen)

    def _generation_record(self, ev: E.Event, previous: dict[str, Member],
                           previous_generation: int | None) -> None:
        """A GroupMetadata record with members: the generation became Stable (or is a rewrite)."""
        machine, m = self.machine, self.machine.m
        gen, o = ev.generation, m.open_rebalance
        if o is not None and m.state == COMPLETING_REBALANCE and m.generation == gen:
            # "Assignment received" is missing: the record is when the group became Stable.
            machine.transition_to(STABLE, ev)
            o.completed_at_ms = ev.ts_ms
            self.reconcile_membership(o, previous, previous_generation, list(m.members), ev)
            machine.emit_rebalance(o, Outcome.STABLE, ev.ts_ms, len(m.members))
            return
        if m.state == STABLE and m.generation == gen:
            return  # static member replacement rewrites the record without a rebalance
        if self._already_emitted(gen):
            machine.enter_generation(gen)
            return
        # No log evidence for this generation (offsets topic only, or lines missed).
        if o is not None:
            machine.close_open_as(Outcome.SUPERSEDED, ev)
        machine.transition_to(STABLE, ev,
                              table=None if m.state in (UNKNOWN, DEAD, EMPTY, STABLE) else PROTOCOL_CLASSIC)
        o = machine.start_rebalance(ev, PROTOCOL_CLASSIC, m.generation, Trigger.UNKNOWN, None, None, None, gen)
        o.completed_at_ms = ev.ts_ms
        machine.enter_generation(gen)
        machine.emit_rebalance(o, Outcome.STABLE, ev.ts_ms, len(m.members))

    def on_member_failed(self, ev: E.Event) -> None:
        if ev.member_id:
            self.machine.remove_member(ev.member_id, RemovalCause.HEARTBEAT_EXPIRY, ev)

    def on_member_left(self, ev: E.Event) -> None:
        if not ev.member_id:
            return
        client_reason = ev.data.get("client_reason")
        polled_out = client_reason is not None and "poll timeout" in client_reason.lower()
        cause = RemovalCause.POLL_TIMEOUT if polled_out else RemovalCause.LEAVE_GROUP
        machine, m = self.machine, self.machine.m
        pending = next((p for p in m.pending_inferred if p.rec["member_id"] == ev.member_id), None)
        if pending is not None and ev.member_id not in m.members:
            # Its removal was inferred a moment ago: the line confirms it, with its time and reason.
            m.pending_inferred.remove(pending)
            pending.rec.update(removed_at_ms=ev.ts_ms, cause=cause, reason_text=client_reason, evidence="",
                               source_id=ev.source_id, seq=ev.seq)
            machine.hold(pending.rec, pending.member(), ev)
            return
        machine.remove_member(ev.member_id, cause, ev, client_reason)

    def flush_inferred(self, now_ms: int) -> None:
        """Inferred removals whose member's line did not come within the grace are held as they are."""
        machine, m = self.machine, self.machine.m
        while m.pending_inferred and now_ms > m.pending_inferred[0].due:
            p = m.pending_inferred.pop(0)
            machine.hold(p.rec, p.member())

    def on_pending_member_expired(self, ev: E.Event) -> None:
        if ev.member_id:
            self.machine.remove_member(ev.member_id, RemovalCause.PENDING_MEMBER_TIMEOUT, ev)

    def on_members_not_joined(self, ev: E.Event) -> None:
        for member_id in ev.data.get("member_ids") or []:
            self.machine.remove_member(member_id, RemovalCause.REBALANCE_TIMEOUT, ev)

    def on_members_not_synced(self, ev: E.Event) -> None:
        for member_id in ev.data.get("member_ids") or []:
            self.machine.remove_member(member_id, RemovalCause.SYNC_TIMEOUT, ev)

    def on_static_member_replaced(self, ev: E.Event) -> None:
        machine, m = self.machine, self.machine.m
        old = ev.data.get("old_member_id")
        previous = m.members.get(old) if old else None
        if old:
            machine.remove_member(old, RemovalCause.STATIC_MEMBER_FENCED, ev)
        if ev.member_id:
            replacement = Member(**asdict(previous)) if previous else Member(member_id=ev.member_id)
            replacement.member_id = ev.member_id
            replacement.group_instance_id = ev.data.get("group_instance_id") or replacement.group_instance_id
            m.members[ev.member_id] = replacement
            machine.observe_join(ev.member_id, replacement.client_id, replacement.client_host, ev)

