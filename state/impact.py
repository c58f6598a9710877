"""Rebalance impact: which partitions stopped being consumed, and for how long (docs/impact.md).

A rebalance's cost is the stops it ends: every partition its new assignment gives to a member after
the partition stopped, counted from the moment it stopped to the rebalance's completion (when the
new owner has the assignment). When a partition stopped depends on the revocation protocol and on
how its previous owner went:

- eager assignors (range, roundrobin, sticky): every member revokes all its partitions when it
  rejoins, so every partition a live member held stops at the rebalance's start;
- cooperative-sticky: a member keeps the partitions it still owns; one that moves is revoked when
  its owner receives the new assignment (the end of the first rebalance) and is assigned in the
  follow-up rebalance, so it stops between the two ends, and the follow-up carries the cost;
- a departed owner's partitions stop when it went: at its heartbeat expiry minus the session
  timeout (its last heartbeat), at a poll timeout minus the rebalance timeout (its last poll: the
  Java client's rebalance timeout is max.poll.interval.ms), else at its removal (a LeaveGroup
  revokes first).

Partitions the new assignment leaves without an owner wait in GroupModel.stopped_partitions for a
later generation; an Empty group drops them (nobody was meant to consume: not a rebalance's cost).
What cannot be measured is null with a reason, never a guess.
"""
from __future__ import annotations

from typing import Any

from state.model import GroupModel, Member, OpenRebalance
from state.vocabulary import Outcome, RemovalCause

EAGER_ASSIGNORS = frozenset({"range", "roundrobin", "sticky"})
COOPERATIVE_ASSIGNORS = frozenset({"cooperative-sticky"})

# The fields every rebalance record carries (null until measured).
IMPACT_FIELDS = ("partitions_stopped", "partition_seconds_stopped", "partition_seconds_by_topic",
                 "partition_seconds_by_departed_member", "partition_stop_seconds", "partitions_unassigned",
                 "partitions_moved", "assignor", "impact_unknown_reason")


# The fields a rebalance_trigger record corrects when a leave was decided a poll timeout after its
# rebalance's record (poll_timeout_correction; state.outputs.apply_trigger_decisions applies them).
CORRECTED_IMPACT_FIELDS = ("partition_seconds_stopped", "partition_seconds_by_topic",
                           "partition_seconds_by_departed_member", "partition_stop_seconds")
EMPTIED = "the group emptied: its partitions have no consumer until a member joins"


# Not a record field: the stops each departed member's partitions ended in this rebalance,
# {member: [[partition, seconds], ...]}, for the correction of a leave decided later
# (poll_timeout_correction); the machine takes it out before the record is emitted.
DEPARTED_STOPS = "_departed_stops"
# Internal too: when each partition a classic rebalance ended the stop of stopped (ms); its stops
# all end at the rebalance's completion. Emitted as a PARTITION_STOPS row (records_delayed).
STOPPED_AT = "_stopped_at"
# Internal too: a consumer group's stops, each with its own end: {partition: [[from ms, to ms], ...]}
# (its members' assignment records end them). Emitted as a PARTITION_STOPS row as well.
STOP_SPANS = "_stop_spans"
# Spans kept per partition until the group's next rebalance record (superseded epochs in between).
STOP_SPANS_KEPT = 8


def unknown(reason: str) -> dict[str, Any]:
    """The impact fields of a rebalance whose cost cannot be measured, and why."""
    return {**dict.fromkeys(IMPACT_FIELDS), "impact_unknown_reason": reason}


def departure_ms(known: Member | None, cause: str, at_ms: int) -> int:
    """When a removed member's partitions stopped being consumed (module docstring)."""
    if known is not None:
        if cause == RemovalCause.HEARTBEAT_EXPIRY and known.session_timeout_ms:
            return at_ms - known.session_timeout_ms
        if cause == RemovalCause.POLL_TIMEOUT and known.rebalance_timeout_ms:
            return at_ms - known.rebalance_timeout_ms
    return at_ms


def consumer_departure_ms(known: Member | None, cause: str, at_ms: int, session_ms: int,
                          revoke_timeout_ms: int | None = None) -> int:
    """When a removed consumer-protocol member's partitions stopped. A session fence counts from its
    last heartbeat: the fence minus the session timeout (a classic member's own; else `session_ms`,
    the brokers' group.consumer.session.timeout.ms, which the records do not carry), not before its
    last current-assignment record, which the coordinator wrote when it heartbeated. A member fenced
    because it did not revoke within `revoke_timeout_ms` (its rebalance timeout, on the fence line)
    was asked to revoke that long before, and has not polled since: a client stuck in its revoke
    callback, or not polling, consumes none of its partitions from then (a real 4.4 day: counted from
    the fence, the monitor charged 4.7 partition-seconds where the clients' callbacks showed 45)."""
    if revoke_timeout_ms is not None and cause == RemovalCause.REBALANCE_TIMEOUT:
        return at_ms - max(0, revoke_timeout_ms)
    if cause != RemovalCause.HEARTBEAT_EXPIRY or known is None:
        return departure_ms(known, cause, at_ms)
    since = at_ms - (known.session_timeout_ms or session_ms)
    if known.assignment_record_ms is not None:
        since = max(since, known.assignment_record_ms)
    return min(since, at_ms)


def stopped_at_removal(m: GroupModel, member_id: str, removed_at_ms: int) -> None:
    """A removed member that never stopped (it came back within a heartbeat interval: its
    coordinator or the network lost its heartbeats, docs/diagnosis.md): it consumed until its
    removal, so its partitions' stop counts from then, not from its last heartbeat. Changes the
    stops still open (a departure of the open rebalance, a removal waiting for its rebalance, a
    consumer group's stopped partitions); a stop already charged to an emitted record stays."""
    o = m.open_rebalance
    departed = o.departures.get(member_id) if o is not None else None
    if departed is not None and departed[0] < removed_at_ms:
        departed[0] = removed_at_ms
    for r in m.unattached_removals:
        if r.member_id == member_id and r.stopped_at_ms is not None and r.stopped_at_ms < removed_at_ms:
            r.stopped_at_ms = removed_at_ms
    for p, cause in m.stop_causes.items():
        if cause == member_id and m.stopped_partitions.get(p, removed_at_ms) < removed_at_ms:
            m.stopped_partitions[p] = removed_at_ms


def note_departure(o: OpenRebalance, member_id: str, known: Member | None, since_ms: int) -> None:
    """A member removed during (or just before) the rebalance: its partitions and their stop time."""
    o.departures[member_id] = [since_ms, list(known.partitions) if known is not None and known.partitions
                               is not None else None]


def cooperative_would_stop(r: dict[str, Any]) -> int | None:
    """For a measured rebalance of an eager assignor that stopped more partitions than changed owner:
    how many a cooperative assignor would have stopped (its `partitions_moved`); else None."""
    stopped, moved = r.get("partitions_stopped"), r.get("partitions_moved")
    if r.get("assignor") in EAGER_ASSIGNORS and stopped is not None and moved is not None and moved < stopped:
        return int(moved)
    return None


def revocation(m: GroupModel) -> str | None:
    """"eager" or "cooperative" from the group's selected assignor; None when unknown."""
    if m.protocol_type not in (None, "consumer") or m.selected_protocol is None:
        return None
    if m.selected_protocol in COOPERATIVE_ASSIGNORS:
        return "cooperative"
    if m.selected_protocol in EAGER_ASSIGNORS:
        return "eager"
    return None


def _topic(partition: str) -> str:
    return partition.rpartition(":")[0]


def classic_impact(m: GroupModel, o: OpenRebalance, previous: dict[str, Member] | None,
                   previous_generation: int | None, outcome: str) -> dict[str, Any]:
    """The impact fields of a classic rebalance record; updates m.stopped_partitions. `previous`:
    the member list the new generation's GroupMetadata record replaced (None: not seen)."""
    impact = _measure(m, o, previous, previous_generation, outcome)
    if impact["partitions_stopped"] is None:
        m.stopped_partitions = {}       # the chain of assignments is broken: older stops cannot end
    return impact


def _measure(m: GroupModel, o: OpenRebalance, previous: dict[str, Member] | None,
             previous_generation: int | None, outcome: str) -> dict[str, Any]:
    if outcome == Outcome.EMPTY:
        left = len(m.stopped_partitions) + sum(len(p or ()) for p in _owned(previous or {}, o).values())
        m.stopped_partitions = {}
        return {**_fields(m, {}, {}, 0), "partitions_unassigned": left, "assignor": None,
                "impact_unknown_reason": EMPTIED}
    if outcome != Outcome.STABLE:
        return unknown(f"the rebalance ended {outcome}, without an assignment")
    if o.completed_at_ms is None:
        return unknown("no completion time")
    if o.previous_generation == 0 and not m.stopped_partitions and m.members_generation != o.generation:
        # a new group's first generation (Kafka 2.8+ logs its end before the offsets topic has
        # its record, which a new group's monitor does not wait for): nobody consumed before it
        return _fields(m, {}, {}, 0)
    if previous is None or m.members_generation != o.generation:
        return unknown("the new generation's GroupMetadata record (its assignment) was not seen by its end")
    mode = revocation(m)
    if mode is None:
        return unknown(f"assignor {m.selected_protocol or 'unknown'} (protocol type "
                       f"{m.protocol_type or 'unknown'}): its revocation protocol is not known")
    if not o.starts_from(previous, previous_generation):
        return unknown(f"the assignment of generation {o.basis_generation} was not seen")
    new_owner: dict[str, str] = {}
    for mid, member in m.members.items():
        if member.partitions is None:
            return unknown("a member's assignment could not be read")
        for p in member.partitions:
            new_owner[p] = mid
    old = _owned(previous, o)
    if any(parts is None for parts in old.values()):
        return unknown("a previous member's assignment could not be read")
    earlier = m.stopped_partitions                          # stopped before this rebalance
    since: dict[str, int] = {}                              # stops this rebalance ends, from when
    due_to: dict[str, str] = {}                             # the departed owner a stop is due to
    waiting: dict[str, int] = {}                            # stops left for a later generation
    for mid, parts in old.items():
        departed = o.departures.get(mid)
        for p in parts or ():
            if departed is not None:
                stop, keeps = min(departed[0], o.completed_at_ms), False
                due_to[p] = mid
            elif mode == "eager":
                if o.started_at_ms is None:
                    return unknown("the rebalance's start was not seen (eager members revoke when they rejoin)")
                stop, keeps = min(o.started_at_ms, o.completed_at_ms), False
            else:
                # cooperative: kept by its owner, or revoked when its owner receives this assignment
                # and assigned by a later rebalance (a move within one generation would stop nothing)
                stop, keeps = o.completed_at_ms, True
            if p not in new_owner:
                waiting[p] = stop
            elif not keeps:
                since[p] = stop
    for p, stop in earlier.items():
        if p in new_owner:
            since.setdefault(p, stop)
        elif p not in waiting:
            waiting[p] = stop
    ended = {p: max(0, o.completed_at_ms - t) / 1000 for p, t in since.items()}
    # what a cooperative assignor would have had to stop: the partitions whose owner changed
    moved = sum(1 for mid, parts in old.items() for p in parts or () if new_owner.get(p) != mid
                or mid in o.departures)
    m.stopped_partitions = waiting
    return {**_fields(m, ended, due_to, moved), STOPPED_AT: dict(since)}


def _fields(m: GroupModel, ended: dict[str, float], due_to: dict[str, str], moved: int,
            due_seconds: dict[str, float] | None = None) -> dict[str, Any]:
    """The impact fields of the stops a rebalance ended (`ended`: partition -> seconds; of them, due
    to the departed member `due_to[p]`: `due_seconds[p]`, else all)."""
    due_seconds = due_seconds or {}
    by_topic: dict[str, float] = {}
    by_member: dict[str, float] = {}
    stops: dict[float, int] = {}
    for p, seconds in ended.items():
        by_topic[_topic(p)] = by_topic.get(_topic(p), 0.0) + seconds
        if p in due_to:
            by_member[due_to[p]] = by_member.get(due_to[p], 0.0) + due_seconds.get(p, seconds)
        stops[round(seconds, 3)] = stops.get(round(seconds, 3), 0) + 1
    due: dict[str, list[list[Any]]] = {}
    for p, mid in due_to.items():
        if p in ended:
            due.setdefault(mid, []).append([p, round(due_seconds.get(p, ended[p]), 3)])
    return {DEPARTED_STOPS: due,
            "partitions_stopped": len(ended), "partition_seconds_stopped": round(float(sum(ended.values())), 3),
            "partition_seconds_by_topic": {t: round(s, 3) for t, s in sorted(by_topic.items())},
            "partition_seconds_by_departed_member": {k: round(s, 3) for k, s in sorted(by_member.items())},
            "partition_stop_seconds": [[s, n] for s, n in sorted(stops.items())],
            "partitions_unassigned": len(m.stopped_partitions), "partitions_moved": moved,
            "assignor": m.selected_protocol, "impact_unknown_reason": None}


def _owned(previous: dict[str, Member], o: OpenRebalance) -> dict[str, list[str] | None]:
    """The previous generation's assignment per member: the members still listed, and the ones
    removed during the rebalance (their removal took them off the member list)."""
    owned = {mid: member.partitions for mid, member in previous.items()}
    for mid, (_, parts) in o.departures.items():
        if mid not in owned and parts is not None:
            owned[mid] = parts
    return owned


def poll_timeout_correction(impact: dict[str, Any], member_id: str, member_stops: list[list[Any]],
                            timeout_ms: int | None) -> dict[str, Any]:
    """The impact fields of a rebalance whose trigger member's leave was decided a poll timeout
    after its record: that member's partitions stopped at its last poll, `timeout_ms`
    (max.poll.interval.ms) before its leave, not at the leave. `member_stops`: [partition, seconds]
    of its partitions whose stop the rebalance ended. Empty when nothing changes."""
    if not member_stops or not timeout_ms or impact.get("partition_seconds_stopped") is None:
        return {}
    extra = timeout_ms / 1000
    added = round(extra * len(member_stops), 3)
    by_topic = dict(impact.get("partition_seconds_by_topic") or {})
    stops: dict[float, int] = dict(impact.get("partition_stop_seconds") or [])
    for partition, seconds in member_stops:
        by_topic[_topic(partition)] = round(by_topic.get(_topic(partition), 0.0) + extra, 3)
        stops[seconds] = stops.get(seconds, 0) - 1
        stops[round(seconds + extra, 3)] = stops.get(round(seconds + extra, 3), 0) + 1
    by_member = dict(impact.get("partition_seconds_by_departed_member") or {})
    by_member[member_id] = round(by_member.get(member_id, 0.0) + added, 3)
    return {"partition_seconds_stopped": round(impact["partition_seconds_stopped"] + added, 3),
            "partition_seconds_by_topic": dict(sorted(by_topic.items())),
            "partition_seconds_by_departed_member": dict(sorted(by_member.items())),
            "partition_stop_seconds": [[s, n] for s, n in sorted(stops.items()) if n > 0],
            "partition_seconds_added": added}


# ---------------------------------------------------------------- consumer groups (KIP-848)
# A member's current assignment record (type 8) lists what it owns: its assigned partitions and
# those pending revocation, which it consumes until it revokes them. A partition a member no longer
# owns stopped then; the member whose record next owns it has it from then on. The coordinator gives
# a partition to its new owner only once the old one revoked it (partition epochs), so the gap is the
# stop. Stops end in member records; the group's next rebalance record reports them.

def note_ownership(m: GroupModel, member: Member, owned: list[str], ts_ms: int) -> None:
    """A consumer member's current assignment record: what it released stopped at `ts_ms`; what it
    gained after a stop ends that stop."""
    before = set(member.partitions or ())
    now = set(owned)
    for p in sorted(before - now):
        m.stopped_partitions.setdefault(p, ts_ms)
    for p in sorted(now - before):
        since = m.stopped_partitions.pop(p, None)
        if since is not None:
            _end_stop(m, p, round(max(0, ts_ms - since) / 1000, 3), m.stop_causes.pop(p, None))
            spans = m.ended_stop_spans.setdefault(p, [])
            spans.append([since, max(since, ts_ms)])
            del spans[:-STOP_SPANS_KEPT]
    member.partitions = sorted(now)


def _end_stop(m: GroupModel, p: str, seconds: float, cause: str | None) -> None:
    """A stop of `p` ended: GroupModel.ended_stops[p] is [seconds, the departed member it is due to,
    and, when the partition stopped more than once before the group's next rebalance record
    (superseded epochs in between), the seconds due to that member]. A second departed member
    of the same partition in that window is not split out: the first one is named."""
    prev = m.ended_stops.get(p)
    if prev is None:
        m.ended_stops[p] = [seconds, cause]
        return
    owner = prev[1] if prev[1] is not None else cause
    due = (prev[2] if len(prev) > 2 else prev[0]) if prev[1] is not None else 0.0
    if cause is not None and cause == owner:
        due += seconds
    m.ended_stops[p] = [round(prev[0] + seconds, 3), owner, round(due, 3)]


def note_consumer_departure(m: GroupModel, member_id: str, known: Member | None, since_ms: int) -> None:
    """A consumer member removed (left, fenced): what it owned stopped at `since_ms`."""
    for p in (known.partitions or ()) if known is not None else ():
        if p not in m.stopped_partitions or m.stopped_partitions[p] > since_ms:
            m.stopped_partitions[p] = since_ms
            m.stop_causes[p] = member_id


def consumer_impact(m: GroupModel, outcome: str) -> dict[str, Any]:
    """The impact fields of a consumer group's rebalance record: the stops its members' records
    ended since the group's last rebalance record."""
    if outcome not in (Outcome.STABLE, Outcome.EMPTY):
        return unknown(f"the rebalance ended {outcome}: its stops count in the next one that completes")
    ended = {p: stop[0] for p, stop in m.ended_stops.items()}
    due_to = {p: stop[1] for p, stop in m.ended_stops.items() if stop[1] is not None}
    due_seconds = {p: stop[2] for p, stop in m.ended_stops.items() if len(stop) > 2}
    spans = {p: m.ended_stop_spans[p] for p in ended if p in m.ended_stop_spans}
    m.ended_stops, m.ended_stop_spans = {}, {}
    fields = _fields(m, ended, due_to, len(ended), due_seconds)
    fields["assignor"] = None           # the server-side assignor is not in the records
    if outcome == Outcome.EMPTY:
        m.stopped_partitions, m.stop_causes = {}, {}
        fields["impact_unknown_reason"] = EMPTIED
    elif spans:
        fields[STOP_SPANS] = spans
    return fields
