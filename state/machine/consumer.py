"""Handlers of KIP-848 (`group.protocol=consumer`) events: one rebalance per group-epoch bump,
complete when every member's assignment record (type 8) reaches the epoch and is STABLE."""
from __future__ import annotations

from state import events as E
from state.machine.base import REMOVAL_CAUSE_TO_TRIGGER
from state.machine.common import CommonHandlers
from state.model import (
    ASSIGNING, DEAD, EMPTY, PROTOCOL_CLASSIC, PROTOCOL_CONSUMER, RECONCILING, STABLE, UNKNOWN, Member
)

# KIP-848 member state STABLE (record type 8).
MEMBER_STATE_STABLE = 0


class ConsumerHandlers(CommonHandlers):
    def note_consumer_trigger(self, trigger: str, member_id: str | None, ev: E.Event) -> None:
        if self.m.pending_consumer_trigger is None:
            self.m.pending_consumer_trigger = {"trigger": trigger, "member": member_id,
                                               "reason": ev.data.get("message") or ev.reason}

    def become_consumer(self, ev: E.Event) -> None:
        m = self.m
        self.reincarnate_if_dead(ev)
        if m.protocol != PROTOCOL_CONSUMER:
            if m.open_rebalance is not None:
                self.close_open_as("superseded", ev)
            m.protocol = PROTOCOL_CONSUMER
            m.members = {k: v for k, v in m.members.items() if v.has_assignment_record}
            m.members_generation = None

    def on_consumer_member_joined(self, ev: E.Event) -> None:
        m = self.m
        self.become_consumer(ev)
        if ev.member_id and ev.member_id not in m.members:
            m.members[ev.member_id] = Member(member_id=ev.member_id,
                                             group_instance_id=ev.data.get("group_instance_id"))
        if ev.member_id:
            self.observe_join(ev.member_id, None, None, ev.ts_ms)
        self.note_consumer_trigger("member_join", ev.member_id, ev)

    def on_consumer_member_left(self, ev: E.Event) -> None:
        self.become_consumer(ev)
        if ev.member_id:
            self.remove_member(ev.member_id, "leave_group", ev)
            self.note_consumer_trigger("member_leave", ev.member_id, ev)

    def on_consumer_member_fenced(self, ev: E.Event) -> None:
        self.become_consumer(ev)
        reason = ev.data.get("fence_reason")
        cause = {"session": "heartbeat_expiry", "rebalance": "rebalance_timeout",
                 "join": "rebalance_timeout", "sync": "sync_timeout"}.get(reason or "", "heartbeat_expiry")
        if ev.member_id:
            self.remove_member(ev.member_id, cause, ev)
            self.note_consumer_trigger(REMOVAL_CAUSE_TO_TRIGGER[cause], ev.member_id, ev)

    def start_epoch(self, ev: E.Event, epoch: int) -> None:
        m = self.m
        self.become_consumer(ev)
        if m.open_rebalance is not None:
            self.close_open_as("superseded", ev)
        pending = m.pending_consumer_trigger or {}
        m.pending_consumer_trigger = None
        self.start_rebalance(ev, PROTOCOL_CONSUMER, m.generation,
                            pending.get("trigger") or "group_epoch_bump", pending.get("member"),
                            pending.get("reason") or ev.reason, ev.ts_ms, generation=epoch)
        m.generation = epoch
        # Completion is decided by the member assignment records (type 8).
        self.transition_to(ASSIGNING if m.members else EMPTY, ev, table=PROTOCOL_CONSUMER)

    def on_group_epoch_bumped(self, ev: E.Event) -> None:
        m = self.m
        if ev.generation is None:
            return
        o = m.open_rebalance
        if m.protocol == PROTOCOL_CONSUMER and m.generation is not None and ev.generation <= m.generation:
            # The epoch record (type 3) sorted first and opened this epoch already: the log
            # line only brings an earlier start and the reason.
            if o is not None and o.protocol == PROTOCOL_CONSUMER and o.generation == ev.generation \
                    and o.started_at_ms is not None:
                o.started_at_ms = min(o.started_at_ms, ev.ts_ms)
            return
        self.start_epoch(ev, ev.generation)

    def on_target_assignment(self, ev: E.Event) -> None:
        m = self.m
        m.target_assignment_epoch = ev.generation
        self.note_assignment(ev)
        if m.protocol == PROTOCOL_CONSUMER and m.members:
            self.transition_to(RECONCILING, ev, table=PROTOCOL_CONSUMER)

    def note_assignment(self, ev: E.Event) -> None:
        """The end of the open epoch's assignment phase: the first "Computed a new target assignment"
        line or target-assignment record (type 6) of that epoch."""
        o = self.m.open_rebalance
        if o is not None and o.protocol == PROTOCOL_CONSUMER and o.generation == ev.generation:
            o.assigned_at_ms = ev.ts_ms if o.assigned_at_ms is None else min(o.assigned_at_ms, ev.ts_ms)

    def on_group_converted(self, ev: E.Event) -> None:
        m = self.m
        if ev.data.get("to") == PROTOCOL_CONSUMER:
            self.become_consumer(ev)
        elif ev.data.get("to") == PROTOCOL_CLASSIC and m.protocol == PROTOCOL_CONSUMER:
            self.close_open_as("superseded", ev)
            m.protocol = PROTOCOL_CLASSIC

    def on_cg_epoch(self, ev: E.Event) -> None:
        m = self.m
        if ev.data.get("tombstone"):
            if m.protocol == PROTOCOL_CONSUMER:
                self.on_group_dead(ev)
            return
        if ev.generation is None:
            return
        if m.protocol == PROTOCOL_CONSUMER and m.generation is not None and ev.generation <= m.generation:
            return
        if m.protocol == PROTOCOL_CLASSIC and m.state not in (UNKNOWN, DEAD) \
                and m.last_emitted_generation is not None:
            # Conversion writes an epoch record without a "Bumped" line; the next bump counts.
            self.become_consumer(ev)
            m.generation = ev.generation
            return
        self.start_epoch(ev, ev.generation)

    def on_cg_member(self, ev: E.Event) -> None:
        m = self.m
        if not ev.member_id:
            return
        if ev.data.get("tombstone"):
            return
        self.become_consumer(ev)
        member = m.members.get(ev.member_id) or Member(member_id=ev.member_id)
        member.client_id = ev.data.get("client_id", member.client_id)
        member.client_host = ev.data.get("client_host", member.client_host)
        member.group_instance_id = ev.data.get("instance_id", member.group_instance_id)
        member.rebalance_timeout_ms = ev.data.get("rebalance_timeout_ms", member.rebalance_timeout_ms)
        if ev.data.get("session_timeout_ms") is not None:
            member.session_timeout_ms = ev.data["session_timeout_ms"]
        m.members[ev.member_id] = member
        self.observe_join(ev.member_id, member.client_id, member.client_host, ev.ts_ms)

    def on_cg_target_epoch(self, ev: E.Event) -> None:
        if not ev.data.get("tombstone") and ev.generation is not None:
            self.m.target_assignment_epoch = ev.generation
            self.note_assignment(ev)

    def on_cg_member_assignment(self, ev: E.Event) -> None:
        m = self.m
        if not ev.member_id:
            return
        if ev.data.get("tombstone"):
            m.members.pop(ev.member_id, None)
        else:
            self.become_consumer(ev)
            member = m.members.get(ev.member_id) or Member(member_id=ev.member_id)
            member.member_epoch = ev.data.get("member_epoch")
            member.member_state = ev.data.get("state")
            member.has_assignment_record = True
            m.members[ev.member_id] = member
        self.check_convergence(ev)

    def check_convergence(self, ev: E.Event) -> None:
        m = self.m
        o = m.open_rebalance
        if o is None or o.protocol != PROTOCOL_CONSUMER or o.generation is None:
            return
        live = [mm for mm in m.members.values() if mm.has_assignment_record]
        if not live:
            if not m.members:
                self.transition_to(EMPTY, ev, table=PROTOCOL_CONSUMER)
                self.emit_rebalance(o, "empty", ev.ts_ms, 0)
            return
        if all(mm.member_epoch == o.generation and mm.member_state == MEMBER_STATE_STABLE for mm in live):
            o.completed_at_ms = ev.ts_ms
            self.transition_to(STABLE, ev, table=PROTOCOL_CONSUMER)
            self.emit_rebalance(o, "stable", ev.ts_ms, len(live))


