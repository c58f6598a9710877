"""The per-group state machine: events in time order -> rebalance / removal / anomaly records.

`GroupStateMachine(model).apply(event)` mutates the model and collects output records in
`.outputs` as (OutputKind, dict) pairs. It never raises on odd input: a transition that Kafka's
table forbids is counted (model.invalid_transitions, an "anomaly" record) and the model
resynchronises to what the event says.

The machine holds the group's services (base.py: the one transition, the open rebalance, removals)
and owns one component per protocol family, each handling its own events and calling those
services: `classic` (classic.py), `modern` (modern.py: consumer, share and streams groups) and
`common` (common.py: what means the same for every protocol). This module routes each event kind
to its component's handler and runs what every event goes through: the log/offsets cross-check
(crosscheck.py), the clock-skew probe (clock_skew.py) and the removals held for the diagnosis
(state/diagnosis/holding.py). Output contract: docs/output.md.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable

from state import events as E
from state.diagnosis.holding import release_removals
from state.event_order import in_event_order
from state.diagnosis.rules import DEFAULT_SETTINGS, DiagnosisSettings
from state.machine.base import METADATA_GRACE_MS, MachineBase, Output
from state.machine.classic import ClassicProtocol
from state.machine.clock_skew import probe_clock
from state.machine.common import CommonEvents
from state.machine.modern import ModernProtocol
from state.machine.crosscheck import both_sources, note_generation_evidence, resolve_source_checks
from state.model import GroupModel
from state.outputs import OutputKind


class GroupStateMachine(MachineBase):
    def __init__(self, model: GroupModel, settings: DiagnosisSettings = DEFAULT_SETTINGS):
        super().__init__(model, settings)
        # The components call back through a weak proxy: the machine owns them, and a strong
        # reference back would make every machine (one per group and turn) a reference cycle
        # that only the cyclic garbage collector frees.
        machine: GroupStateMachine = weakref.proxy(self)
        self.classic = ClassicProtocol(machine)
        self.modern = ModernProtocol(machine)
        self.common = CommonEvents(machine)

    # ------------------------------------------------------------------ entry points
    def apply(self, ev: E.Event) -> None:
        m = self.m
        if ev.source not in m.seen_sources:
            m.seen_sources = sorted(m.seen_sources + [ev.source])
        self._resolve_source_checks(ev.ts_ms)
        note_generation_evidence(m, ev)
        self.flush_pending_completion(ev.ts_ms, closing_event=ev)
        self.classic.flush_inferred(ev.ts_ms)
        # A removal whose decision time lies before this event is decided first, as a turn that
        # ends between the two would (the outcome must not depend on where turns end).
        self._release_removals(ev.ts_ms)
        if ev.broker is not None and ev.source == E.SOURCE_LOG and ev.kind != E.GROUP_UNLOADED:
            m.coordinator = ev.broker
            note_coordinator(m.coordinators, ev.ts_ms, ev.broker)
        handler = HANDLERS.get(ev.kind)
        if handler is not None:
            handler(self, ev)
        skew = probe_clock(m, ev)
        if skew is not None:
            self.observations.append((OutputKind.CLOCK_SKEW, skew))
        m.last_event_ms = ev.ts_ms if m.last_event_ms is None else max(m.last_event_ms, ev.ts_ms)

    def apply_all(self, events: Iterable[E.Event]) -> list[Output]:
        for ev in in_event_order(events):
            self.apply(ev)
        return self.outputs

    def advance_to(self, watermark_ms: int) -> None:
        """Event time has passed `watermark_ms`: emit what was waiting for later evidence."""
        self.flush_pending_completion(watermark_ms)
        self.classic.flush_inferred(watermark_ms)
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


# Event kind -> the handler of the component that owns it; kinds without one (CG_TARGET_MEMBER,
# CG_OTHER, ...) only pass through the checks in `apply`.
HANDLERS: dict[str, Callable[[GroupStateMachine, E.Event], None]] = {
    E.PREPARE_REBALANCE: lambda machine, ev: machine.classic.on_prepare(ev),
    E.JOIN_COMPLETE: lambda machine, ev: machine.classic.on_join_complete(ev),
    E.GROUP_EMPTY: lambda machine, ev: machine.classic.on_group_empty(ev),
    E.MEMBER_CREATED: lambda machine, ev: machine.classic.on_member_created(ev),
    E.ASSIGNMENT_RECEIVED: lambda machine, ev: machine.classic.on_assignment_received(ev),
    E.GROUP_METADATA: lambda machine, ev: machine.classic.on_group_metadata(ev),
    E.MEMBER_FAILED: lambda machine, ev: machine.classic.on_member_failed(ev),
    E.MEMBER_LEFT: lambda machine, ev: machine.classic.on_member_left(ev),
    E.PENDING_MEMBER_EXPIRED: lambda machine, ev: machine.classic.on_pending_member_expired(ev),
    E.MEMBERS_NOT_JOINED: lambda machine, ev: machine.classic.on_members_not_joined(ev),
    E.MEMBERS_NOT_SYNCED: lambda machine, ev: machine.classic.on_members_not_synced(ev),
    E.STATIC_MEMBER_REPLACED: lambda machine, ev: machine.classic.on_static_member_replaced(ev),
    E.GROUP_DEAD: lambda machine, ev: machine.common.on_group_dead(ev),
    E.GROUP_DELETED: lambda machine, ev: machine.common.on_group_dead(ev),
    E.GROUP_TOMBSTONE: lambda machine, ev: machine.common.on_group_tombstone(ev),
    E.GROUP_LOADED: lambda machine, ev: machine.common.on_group_loaded(ev),
    E.OFFSET_COMMIT: lambda machine, ev: machine.common.on_offset_commit(ev),
    E.OFFSET_COMMITS: lambda machine, ev: machine.common.on_offset_commit(ev),
    E.OFFSET_TOMBSTONE: lambda machine, ev: machine.common.on_offset_tombstone(ev),
    E.GROUP_UNLOADED: lambda machine, ev: machine.common.on_group_unloaded(ev),
    E.CONSUMER_MEMBER_JOINED: lambda machine, ev: machine.modern.on_consumer_member_joined(ev),
    E.CONSUMER_MEMBER_LEFT: lambda machine, ev: machine.modern.on_consumer_member_left(ev),
    E.CONSUMER_MEMBER_FENCED: lambda machine, ev: machine.modern.on_consumer_member_fenced(ev),
    E.GROUP_EPOCH_BUMPED: lambda machine, ev: machine.modern.on_group_epoch_bumped(ev),
    E.TARGET_ASSIGNMENT: lambda machine, ev: machine.modern.on_target_assignment(ev),
    E.GROUP_CONVERTED: lambda machine, ev: machine.modern.on_group_converted(ev),
    E.CG_EPOCH: lambda machine, ev: machine.modern.on_cg_epoch(ev),
    E.CG_MEMBER: lambda machine, ev: machine.modern.on_cg_member(ev),
    E.CG_TARGET_EPOCH: lambda machine, ev: machine.modern.on_cg_target_epoch(ev),
    E.CG_MEMBER_ASSIGNMENT: lambda machine, ev: machine.modern.on_cg_member_assignment(ev),
    E.MEMBER_ASSIGNMENT_STATE: lambda machine, ev: machine.modern.on_member_assignment_state(ev),
    E.REBALANCE_REQUESTED: lambda machine, ev: machine.modern.on_rebalance_requested(ev),
    E.STREAMS_TOPOLOGY: lambda machine, ev: machine.modern.on_streams_topology(ev),
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


COORDINATORS_KEPT = 4


def note_coordinator(changes: list[list[int]], ts_ms: int, broker: int) -> None:
    """A line of `broker` at `ts_ms` in the group's coordinator changes ([since_ms, broker], time
    order). A late line of an earlier coordinator goes to its place, not to the end."""
    if changes and changes[-1][1] == broker and changes[-1][0] <= ts_ms:
        return
    i = len(changes)
    while i and changes[i - 1][0] > ts_ms:
        i -= 1
    if i and changes[i - 1][1] == broker:
        return
    if i < len(changes) and changes[i][1] == broker:
        changes[i][0] = ts_ms        # that coordinator's lines began earlier than seen so far
        return
    changes.insert(i, [ts_ms, broker])
    del changes[:-COORDINATORS_KEPT]
