"""The per-group state machine: events in time order -> rebalance / removal / anomaly records.

`GroupStateMachine(model).apply(event)` mutates the model and collects output records in
`.outputs` as (OutputKind, dict) pairs. It never raises on odd input: a transition that Kafka's
table forbids is counted (model.invalid_transitions, an "anomaly" record) and the model
resynchronises to what the event says.

The handlers live by protocol (classic.py; modern.py for consumer, share and streams groups;
common.py); this module puts them together, routes each event kind to its handler and runs what
every event goes through: the log/offsets
cross-check (crosscheck.py), the clock-skew probe (clock_skew.py) and the removals held for the
diagnosis (state/diagnosis/holding.py). Output contract: docs/output.md.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from state import events as E
from state.diagnosis.holding import release_removals
from state.diagnosis.rules import DiagnosisSettings
from state.machine.base import METADATA_GRACE_MS, Output
from state.machine.classic import ClassicHandlers
from state.machine.clock_skew import probe_clock
from state.machine.modern import ModernHandlers
from state.machine.crosscheck import both_sources, note_generation_evidence, resolve_source_checks
from state.model import GroupModel
from state.outputs import OutputKind


class GroupStateMachine(ClassicHandlers, ModernHandlers):
    # ------------------------------------------------------------------ entry points
    def apply(self, ev: E.Event) -> None:
        m = self.m
        if ev.source not in m.seen_sources:
            m.seen_sources = sorted(m.seen_sources + [ev.source])
        self._resolve_source_checks(ev.ts_ms)
        note_generation_evidence(m, ev)
        self.flush_pending_completion(ev.ts_ms, closing_event=ev)
        self.flush_inferred(ev.ts_ms)
        # A removal whose decision time lies before this event is decided first, as a turn that
        # ends between the two would (the outcome must not depend on where turns end).
        self._release_removals(ev.ts_ms)
        if ev.broker is not None and ev.source == E.SOURCE_LOG and ev.kind != E.GROUP_UNLOADED:
            m.coordinator = ev.broker
        handler = HANDLERS.get(ev.kind)
        if handler is not None:
            handler(self, ev)
        skew = probe_clock(m, ev)
        if skew is not None:
            self.observations.append((OutputKind.CLOCK_SKEW, skew))
        m.last_event_ms = ev.ts_ms if m.last_event_ms is None else max(m.last_event_ms, ev.ts_ms)

    def apply_all(self, events: Iterable[E.Event]) -> list[Output]:
        for ev in sorted(events, key=E.Event.sort_key):
            self.apply(ev)
        return self.outputs

    def advance_to(self, watermark_ms: int) -> None:
        """Event time has passed `watermark_ms`: emit what was waiting for later evidence."""
        self.flush_pending_completion(watermark_ms)
        self.flush_inferred(watermark_ms)
        self._resolve_source_checks(watermark_ms)
        self._release_removals(watermark_ms)

    def _release_removals(self, now_ms: int) -> None:
        decided = release_removals(self.m, now_ms, self.settings)
        if not decided:
            return
        for held in decided:
            self.outputs.append((OutputKind.REMOVAL, held.rec))
            self._released += 1
        self.settle_triggers(decided)

    def next_deadline_ms(self) -> int | None:
        """Event time at which `advance_to` has something to do (None: nothing pending)."""
        m = self.m
        # A check can only flag when both sources have delivered events for the group; until
        # then it waits for the next event (apply resolves due checks too) and sets no timer.
        deadlines = [c.due_ms for c in m.generation_checks.values()] if both_sources(m) else []
        deadlines += [h.decide_at for h in m.held_removals]
        deadlines += [p.due for p in m.pending_inferred]
        o = m.open_rebalance
        if o is not None and o.completed_at_ms is not None:
            deadlines.append(o.completed_at_ms + METADATA_GRACE_MS)
        return min(deadlines) if deadlines else None

    def _resolve_source_checks(self, now_ms: int) -> None:
        for record in resolve_source_checks(self.m, now_ms):
            self.outputs.append((OutputKind.ANOMALY, record))


Handler = Callable[[GroupStateMachine, E.Event], None]

# Event kind -> handler; kinds without one (CG_TARGET_MEMBER, CG_OTHER, ...) only pass through
# the checks in `apply`.
HANDLERS: dict[str, Handler] = {
    E.PREPARE_REBALANCE: GroupStateMachine.on_prepare,
    E.JOIN_COMPLETE: GroupStateMachine.on_join_complete,
    E.GROUP_EMPTY: GroupStateMachine.on_group_empty,
    E.MEMBER_CREATED: GroupStateMachine.on_member_created,
    E.ASSIGNMENT_RECEIVED: GroupStateMachine.on_assignment_received,
    E.GROUP_METADATA: GroupStateMachine.on_group_metadata,
    E.MEMBER_FAILED: GroupStateMachine.on_member_failed,
    E.MEMBER_LEFT: GroupStateMachine.on_member_left,
    E.PENDING_MEMBER_EXPIRED: GroupStateMachine.on_pending_member_expired,
    E.MEMBERS_NOT_JOINED: GroupStateMachine.on_members_not_joined,
    E.MEMBERS_NOT_SYNCED: GroupStateMachine.on_members_not_synced,
    E.STATIC_MEMBER_REPLACED: GroupStateMachine.on_static_member_replaced,
    E.GROUP_DEAD: GroupStateMachine.on_group_dead,
    E.GROUP_DELETED: GroupStateMachine.on_group_dead,
    E.GROUP_TOMBSTONE: GroupStateMachine.on_group_tombstone,
    E.GROUP_LOADED: GroupStateMachine.on_group_loaded,
    E.OFFSET_COMMIT: GroupStateMachine.on_offset_commit,
    E.OFFSET_COMMITS: GroupStateMachine.on_offset_commit,
    E.OFFSET_TOMBSTONE: GroupStateMachine.on_offset_tombstone,
    E.GROUP_UNLOADED: GroupStateMachine.on_group_unloaded,
    E.CONSUMER_MEMBER_JOINED: GroupStateMachine.on_consumer_member_joined,
    E.CONSUMER_MEMBER_LEFT: GroupStateMachine.on_consumer_member_left,
    E.CONSUMER_MEMBER_FENCED: GroupStateMachine.on_consumer_member_fenced,
    E.GROUP_EPOCH_BUMPED: GroupStateMachine.on_group_epoch_bumped,
    E.TARGET_ASSIGNMENT: GroupStateMachine.on_target_assignment,
    E.GROUP_CONVERTED: GroupStateMachine.on_group_converted,
    E.CG_EPOCH: GroupStateMachine.on_cg_epoch,
    E.CG_MEMBER: GroupStateMachine.on_cg_member,
    E.CG_TARGET_EPOCH: GroupStateMachine.on_cg_target_epoch,
    E.CG_MEMBER_ASSIGNMENT: GroupStateMachine.on_cg_member_assignment,
    E.MEMBER_ASSIGNMENT_STATE: GroupStateMachine.on_member_assignment_state,
    E.REBALANCE_REQUESTED: GroupStateMachine.on_rebalance_requested,
    E.STREAMS_TOPOLOGY: GroupStateMachine.on_streams_topology,
}


def run_turn(model: GroupModel, events: Iterable[E.Event], settings: DiagnosisSettings,
             until_ms: int | None = None) -> GroupStateMachine:
    """One turn of a group: its events in event order, then event time up to `until_ms` (None:
    not advanced: a live view's copy of the model). The stateful step, the Spark-free replay and
    the live view all run the machine this way; its outputs are the machine's."""
    machine = GroupStateMachine(model, settings)
    machine.apply_all(events)
    if until_ms is not None:
        machine.advance_to(until_ms)
    return machine
