"""The state machine's services, what every protocol's handlers call: the one state transition,
the open rebalance's lifecycle (start, emit, supersede) and member removals.

`GroupStateMachine` (core.py) is a `MachineBase` that owns the protocol components (classic.py,
modern.py, common.py) and routes events to them; each component calls these services through
its `machine`.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from state import events as E
from state.diagnosis.holding import (
    hold_removal, never_stopped, observe_join, trigger_may_change, undecided_members
)
from state.diagnosis.rules import DEFAULT_SETTINGS, DiagnosisSettings
from state.event_order import latest_ms
from state.impact import (
    CORRECTED_IMPACT_FIELDS, DEPARTED_STOPS, STOP_SPANS, STOPPED_AT, classic_impact, consumer_departure_ms,
    consumer_impact, departure_ms, note_consumer_departure, note_departure, poll_timeout_correction, stopped_at_removal,
    unknown,
)
from state.model import (
    DEAD, EMPTY, EPOCH_PROTOCOLS, PREPARING_REBALANCE, PROTOCOL_CLASSIC, PROTOCOL_CONSUMER, UNKNOWN, GroupModel,
    HeldRemoval, Member, OpenRebalance, ProvisionalTrigger, UnattachedRemoval, is_legal,
)
from state.outputs import (
    OutputKind, invalid_transition_record, partition_stops_record, rebalance_record, removal_record, trigger_decision,
)
from state.vocabulary import Outcome, RemovalCause, Trigger

# A completed classic rebalance waits this long (event time) for the GroupMetadata record of its
# generation, which carries the member list; Kafka appends it within milliseconds.
METADATA_GRACE_MS = 2000
# Completed classic generations whose start is kept as poll evidence (GroupModel.polled_generations).
POLLED_GENERATIONS_KEPT = 4
# Removals logged just before "Preparing to rebalance" (Kafka 2.2-2.8, Java LeaveGroup) belong to
# the rebalance they caused; so does a member id created just before it (the trigger of a rebalance
# logged without a reason, Kafka 1.1-2.0).
REMOVAL_ATTACH_WINDOW_MS = 1000

# Keyed by the cause as records carry it (a str; RemovalCause members are equal to theirs).
REMOVAL_CAUSE_TO_TRIGGER: dict[str, Trigger] = {
    RemovalCause.HEARTBEAT_EXPIRY: Trigger.HEARTBEAT_EXPIRY, RemovalCause.LEAVE_GROUP: Trigger.MEMBER_LEAVE,
    RemovalCause.POLL_TIMEOUT: Trigger.POLL_TIMEOUT, RemovalCause.REBALANCE_TIMEOUT: Trigger.REBALANCE_TIMEOUT,
    RemovalCause.SYNC_TIMEOUT: Trigger.REBALANCE_TIMEOUT, RemovalCause.PENDING_MEMBER_TIMEOUT: Trigger.MEMBER_LEAVE,
    RemovalCause.STATIC_MEMBER_FENCED: Trigger.STATIC_MEMBER_REPLACED, RemovalCause.GROUP_DELETED: Trigger.UNKNOWN,
}

Output = tuple[str, dict[str, Any]]


class MachineBase:
    def __init__(self, model: GroupModel, settings: DiagnosisSettings = DEFAULT_SETTINGS):
        self.m = model
        self.settings = settings
        # (position among the non-removal outputs, record) of every removal held by this instance:
        # where it would have been emitted without the decision window (tests, debugging).
        self.hold_order: list[tuple[int, dict[str, Any]]] = []
        self._released = 0      # outputs that are not positions: released removals, trigger decisions
        self.outputs: list[Output] = []
        # The member list the last GroupMetadata record (or "is now empty" line) replaced, its
        # generation and the new one: what a classic rebalance's impact compares (state/impact.py).
        self.replaced: tuple[dict[str, Member], int | None, int | None] | None = None
        # Observations about the inputs rather than the group (clock_skew records).
        self.observations: list[Output] = []

    # ------------------------------------------------------------------ the state transition
    def transition_to(self, target: str, ev: E.Event, table: str | None = PROTOCOL_CLASSIC) -> None:
        """The one way the group's state changes.

        `table`: the protocol whose transition table the move is checked against (classic: Kafka's
        validPreviousStates); a move the table forbids is counted and recorded as an anomaly, and
        the model follows the event anyway (an observer resynchronises, it never raises). None:
        the model catches up with a record that skips states Kafka passed through (offsets-only
        input, a coordinator reload, a protocol conversion): not an anomaly.
        """
        m = self.m
        previous = m.state
        # Staying put is no transition, except where the classic table has a say: it lists
        # Dead -> Dead, and a repeated PreparingRebalance is checked (and is an anomaly).
        if previous == target and (table is None or target not in (DEAD, PREPARING_REBALANCE)):
            return
        if table is not None and previous != UNKNOWN and not is_legal(table, previous, target):
            m.invalid_transitions += 1
            self.outputs.append((OutputKind.ANOMALY, invalid_transition_record(
                m, ev.ts_ms, previous, target, ev.kind, ev.source_id, ev.seq)))
        m.state = target
        m.state_since_ms = ev.ts_ms

    def enter_generation(self, generation: int | None, rebalance: OpenRebalance | None = None) -> None:
        """The one writer of the group's generation (classic) or group epoch (consumer, share,
        streams), as Kafka's ClassicGroup has one initNextGeneration: the group is at `generation`,
        which `rebalance` (when given) leads to."""
        self.m.generation = generation
        if rebalance is not None:
            rebalance.generation = generation

    def reincarnate_if_dead(self, ev: E.Event) -> None:
        """A group id used again after its group died is a new group (generation from 0).

        What survives: identity, protocol, counters, commit evidence, held removals, coordinator
        moves, the clock-skew probe and recent rebalance starts; what belongs to a generation goes.
        """
        m = self.m
        if m.state != DEAD:
            return
        m.members.clear()
        m.members_generation = None
        self.enter_generation(0)
        m.leader = None
        m.open_rebalance = None
        m.unattached_removals = []
        m.recent_joins = []
        m.last_emitted_generation = None
        m.target_assignment_epoch = None
        m.checked_generation = None
        m.generation_checks = {}
        self.transition_to(EMPTY, ev, table=None)

    # ------------------------------------------------------------------ removals
    def hold(self, record: dict[str, Any], known: Member | None, ev: E.Event | None = None) -> None:
        """A removal record goes to the diagnosis, which releases it at its decision time. `ev`:
        the line that removed the member at the record's time (it may write whole seconds)."""
        hold_removal(self.m, record, known, self.settings, None if ev is None else latest_ms(ev))
        self.hold_order.append((len(self.outputs) - self._released, record))

    def observe_join(self, member_id: str | None, client_id: str | None, client_host: str | None,
                     ev: E.Event) -> None:
        for held in observe_join(self.m, member_id, client_id, client_host, ev.ts_ms):
            if never_stopped(held, self.settings):
                # It was consuming until its removal, not only until its last heartbeat.
                stopped_at_removal(self.m, held.rec["member_id"], held.rec["removed_at_ms"])

    def removal(self, member_id: str, known: Member | None, cause: str, ev: E.Event, at_ms: int,
                generation: int | None, reason_text: str | None = None, evidence: str = "") -> dict[str, Any]:
        m = self.m
        return removal_record(m, member_id, known, cause, at_ms, generation,
                              ev.broker if ev.broker is not None else m.coordinator, ev.source_id, ev.seq,
                              reason_text, evidence)

    def remove_member(self, member_id: str, cause: str, ev: E.Event, reason_text: str | None = None) -> None:
        m = self.m
        known = m.members.pop(member_id, None)
        if m.leader == member_id:
            m.leader = None
        if m.protocol == PROTOCOL_CONSUMER:
            revoke_timeout = ev.data.get("timeout_ms") if ev.data.get("fence_reason") == "rebalance" else None
            since = consumer_departure_ms(known, cause, ev.ts_ms, self.settings.consumer_session_timeout_ms,
                                          int(revoke_timeout) if revoke_timeout is not None else None)
            note_consumer_departure(m, member_id, known, since)
        else:
            since = departure_ms(known, cause, ev.ts_ms)
        self.hold(self.removal(member_id, known, cause, ev, ev.ts_ms, m.generation, reason_text), known, ev)
        m.removals_total += 1
        if m.open_rebalance is not None and m.open_rebalance.completed_at_ms is None:
            self.note_removal_in(m.open_rebalance, member_id, known, cause, ev.ts_ms)
        else:
            m.unattached_removals.append(UnattachedRemoval(member_id, ev.ts_ms, cause, since,
                                                           None if known is None else known.partitions))

    @staticmethod
    def note_removal_in(o: OpenRebalance, member_id: str, known: Member | None, cause: str, at_ms: int) -> None:
        o.removals.append(member_id)
        since = departure_ms(known, cause, at_ms)
        if cause in (RemovalCause.REBALANCE_TIMEOUT, RemovalCause.SYNC_TIMEOUT) and o.started_at_ms is not None:
            since = min(since, o.started_at_ms)   # it did not answer the rebalance: stopped from its start
        note_departure(o, member_id, known, since)
        if cause in (RemovalCause.REBALANCE_TIMEOUT, RemovalCause.SYNC_TIMEOUT):
            o.timeout_removals.append(member_id)
        if known is not None and known.rebalance_timeout_ms:
            o.max_rebalance_timeout_ms = max(o.max_rebalance_timeout_ms or 0, known.rebalance_timeout_ms)

    def _take_recent_removals(self, ts_ms: int) -> list[UnattachedRemoval]:
        recent = [r for r in self.m.unattached_removals if ts_ms - r.at_ms <= REMOVAL_ATTACH_WINDOW_MS]
        self.m.unattached_removals = []
        return recent

    # ------------------------------------------------------------------ the open rebalance
    def start_rebalance(self, ev: E.Event, protocol: str, previous_generation: int | None,
                        trigger: str, trigger_member: str | None, reason: str | None,
                        started_at_ms: int | None, generation: int | None = None) -> OpenRebalance:
        m = self.m
        recent = self._take_recent_removals(ev.ts_ms)
        joins = [j for j in m.recent_joins if 0 <= ev.ts_ms - j.at_ms <= REMOVAL_ATTACH_WINDOW_MS]
        m.recent_joins = []
        if trigger == Trigger.UNKNOWN and protocol == PROTOCOL_CLASSIC and reason is None:
            # Brokers before 2.1 log no reason: the removal or the new member id just before is
            # the trigger (the later of the two; a removal wins a tie).
            if joins and (not recent or joins[-1].at_ms > recent[-1].at_ms):
                trigger, trigger_member = Trigger.MEMBER_JOIN, trigger_member or joins[-1].member_id
            elif recent:
                trigger = REMOVAL_CAUSE_TO_TRIGGER.get(recent[-1].cause, Trigger.UNKNOWN)
                trigger_member = trigger_member or recent[-1].member_id
        elif trigger == Trigger.UNKNOWN and recent:
            trigger = REMOVAL_CAUSE_TO_TRIGGER.get(recent[-1].cause, Trigger.UNKNOWN)
            trigger_member = trigger_member or recent[-1].member_id
        elif trigger == Trigger.MEMBER_LEAVE and any(
                r.member_id == trigger_member and r.cause == RemovalCause.POLL_TIMEOUT for r in recent):
            # The Java coordinator (3.7+) logs the client's reason on the "has left group" line,
            # not in the "Preparing to rebalance" reason: the leave it names was a poll timeout.
            trigger = Trigger.POLL_TIMEOUT
        opened = OpenRebalance(
            protocol=protocol, previous_generation=previous_generation, started_at_ms=started_at_ms,
            trigger=trigger, trigger_member=trigger_member, reason_text=reason,
            coordinator=ev.broker if ev.broker is not None else m.coordinator,
            generation=generation, removals=[r.member_id for r in recent],
            departures={r.member_id: r.departure() for r in recent},
            started_latest_ms=latest_ms(ev),
        )
        timeouts = [mm.rebalance_timeout_ms for mm in m.members.values() if mm.rebalance_timeout_ms]
        if timeouts:
            opened.max_rebalance_timeout_ms = max(timeouts)
        if ev.ts_ms is not None:
            window = self.settings.storm_window_ms
            m.rebalance_starts = [t for t in m.rebalance_starts if ev.ts_ms - t < window][-999:] + [ev.ts_ms]
        m.open_rebalance = opened
        return opened

    def emit_rebalance(self, opened: OpenRebalance, outcome: str, ended_at_ms: int | None,
                       members: int | None) -> None:
        m = self.m
        timeouts: Iterable[int | None] = [mm.rebalance_timeout_ms for mm in m.members.values()]
        # A leave whose removal is still undecided may be a poll timeout (clients without KIP-800
        # reasons): the record says so, and a rebalance_trigger record follows (settle_triggers).
        final = not (opened.trigger == Trigger.MEMBER_LEAVE and trigger_may_change(m, opened.trigger_member))
        record = rebalance_record(m.cluster, m.group, opened, outcome, ended_at_ms, members, timeouts,
                                  trigger_final=final)
        impact = self.impact_of(opened, outcome)
        departed_stops = impact.pop(DEPARTED_STOPS, {})
        stopped_at = impact.pop(STOPPED_AT, None)
        spans = impact.pop(STOP_SPANS, None)
        record.update(impact)
        self.outputs.append((OutputKind.REBALANCE, record))
        if (stopped_at or spans) and record["completed_at_ms"] is not None:
            self.outputs.append((OutputKind.PARTITION_STOPS, partition_stops_record(record, stopped_at or {}, spans)))
        self.charge_removals(impact.get("partition_seconds_by_departed_member") or {})
        if (opened.protocol == PROTOCOL_CLASSIC and outcome == Outcome.STABLE and opened.generation is not None
                and opened.started_at_ms is not None):
            recent = sorted(m.polled_generations.items(), key=lambda kv: int(kv[0]))[-(POLLED_GENERATIONS_KEPT - 1):]
            m.polled_generations = dict(recent + [(str(opened.generation), opened.started_at_ms)])
        if not final:
            m.provisional_triggers.append(ProvisionalTrigger(
                member_id=opened.trigger_member, generation=opened.generation,
                started_at_ms=opened.started_at_ms, protocol=opened.protocol, outcome=outcome,
                trigger=opened.trigger, trigger_member=opened.trigger_member,
                # what a poll timeout would change in its impact (impact.poll_timeout_correction)
                impact={k: impact[k] for k in CORRECTED_IMPACT_FIELDS},
                member_stops=departed_stops.get(opened.trigger_member or "", [])))
        m.rebalances_total += 1
        if opened.generation is not None:
            prior = m.last_emitted_generation
            m.last_emitted_generation = opened.generation if prior is None else max(prior, opened.generation)
        if m.open_rebalance is opened:
            m.open_rebalance = None

    def charge_removals(self, by_member: dict[str, float]) -> None:
        """Each removal still held for its diagnosis gets what it cost (its record's
        partition_seconds_stopped; a removal released before stays null)."""
        if not by_member:
            return
        for rec in [*(h.rec for h in self.m.held_removals), *(p.rec for p in self.m.pending_inferred)]:
            seconds = by_member.get(rec["member_id"])
            if seconds is not None:
                rec["partition_seconds_stopped"] = seconds

    def impact_of(self, opened: OpenRebalance, outcome: str) -> dict[str, Any]:
        """The rebalance record's impact fields (state/impact.py)."""
        if opened.protocol == PROTOCOL_CONSUMER == self.m.protocol:
            return consumer_impact(self.m, outcome)
        if opened.protocol != PROTOCOL_CLASSIC:
            return unknown(f"not measured for {opened.protocol} groups yet")
        previous, previous_generation = None, None
        if self.replaced is not None and self.replaced[2] == opened.generation:
            previous, previous_generation = self.replaced[:2]
        return classic_impact(self.m, opened, previous, previous_generation, outcome)

    def settle_triggers(self, decided: list[HeldRemoval]) -> None:
        """Removals just decided (held entries of holding.release_removals): the rebalances they
        triggered take the decided cause. The open one is changed in place; an emitted one with
        trigger_final false gets its rebalance_trigger record, poll timeout or not."""
        m = self.m
        o = m.open_rebalance
        rec: dict[str, Any] | None
        for held in decided:
            rec = held.rec
            if (rec["cause"] == RemovalCause.POLL_TIMEOUT and o is not None and o.trigger == Trigger.MEMBER_LEAVE
                    and o.trigger_member == rec["member_id"]):
                o.trigger = Trigger.POLL_TIMEOUT
                departed = o.departures.get(rec["member_id"])
                if departed is not None and rec.get("rebalance_timeout_ms"):
                    # its partitions stopped at its last poll, not at its leave (state/impact.py)
                    departed[0] = min(departed[0], rec["removed_at_ms"] - rec["rebalance_timeout_ms"])
        if not m.provisional_triggers:
            return
        by_member = {h.rec["member_id"]: h for h in decided}
        undecided = undecided_members(m)
        keep: list[ProvisionalTrigger] = []
        for p in m.provisional_triggers:
            settled = by_member.get(p.member_id)
            if settled is None and p.member_id in undecided:
                keep.append(p)
                continue
            rec = settled.rec if settled is not None else None
            correction: dict[str, Any] = {}
            trigger: str
            if rec is not None and rec["cause"] == RemovalCause.POLL_TIMEOUT:
                trigger = REMOVAL_CAUSE_TO_TRIGGER[RemovalCause.POLL_TIMEOUT]
                evidence = f"its removal was decided a poll timeout: {rec.get('evidence')}"
                if p.impact:
                    correction = poll_timeout_correction(p.impact, rec["member_id"], p.member_stops or [],
                                                         rec.get("rebalance_timeout_ms"))
            else:
                trigger = p.trigger
                evidence = (f"its removal was decided {rec['cause']}: {rec.get('evidence')}" if rec is not None
                            else "its removal was no longer held")
            decision = trigger_decision(m.cluster, m.group, p, trigger,
                                        settled.decide_at if settled is not None else None, evidence)
            decision.update(correction)
            if rec is not None and correction:
                by_member = correction["partition_seconds_by_departed_member"]
                rec["partition_seconds_stopped"] = by_member.get(rec["member_id"])
            self.outputs.append((OutputKind.REBALANCE_TRIGGER, decision))
            self._released += 1
        m.provisional_triggers = keep

    def flush_pending_completion(self, now_ms: int, closing_event: E.Event | None = None) -> None:
        """Emit a Stable-completed classic rebalance still waiting for its metadata record, or an
        epoch-based group's emptying epoch still waiting for its "Bumped" line (modern._emptied)."""
        o = self.m.open_rebalance
        if o is None or o.completed_at_ms is None:
            return
        due = now_ms > o.completed_at_ms + METADATA_GRACE_MS
        if o.protocol in EPOCH_PROTOCOLS:
            # The offsets records of the leave (tombstones, the epoch record) arrive in the same
            # millisecond and do not close the wait; any other log line does.
            if closing_event is not None and not due:
                due = closing_event.source == E.SOURCE_LOG and not (
                    closing_event.kind == E.GROUP_EPOCH_BUMPED and closing_event.generation == o.generation)
            if due:
                self.emit_emptied(o, o.completed_at_ms)
            return
        if closing_event is not None and not due:
            # Anything but that generation's metadata record closes the wait as well.
            due = not (closing_event.kind == E.GROUP_METADATA
                       and closing_event.generation == o.generation) \
                and closing_event.kind not in (E.OFFSET_COMMIT, E.OFFSET_COMMITS, E.OFFSET_TOMBSTONE,
                                               E.ASSIGNMENT_RECEIVED)
        if due:
            members = o.logged_members if o.logged_members is not None else len(self.m.members) or None
            self.emit_rebalance(o, Outcome.STABLE, o.completed_at_ms, members)

    def emit_emptied(self, o: OpenRebalance, ended_at_ms: int) -> None:
        """An epoch that emptied the group: `empty` records carry no completion time (completed_at_ms
        only marked the wait for its "Bumped" line)."""
        o.completed_at_ms = None
        self.emit_rebalance(o, Outcome.EMPTY, ended_at_ms, 0)

    def close_open_as(self, outcome: str, ev: E.Event) -> None:
        o = self.m.open_rebalance
        if o is None:
            return
        members = 0 if outcome in (Outcome.EMPTY, Outcome.DEAD) else (len(self.m.members) or None)
        self.emit_rebalance(o, outcome, ev.ts_ms, members)
