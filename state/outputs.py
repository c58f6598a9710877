"""What the state machine emits: the output kinds and one builder per record type.

Every record the monitor writes (rebalances.jsonl, member_removals.jsonl, anomalies.jsonl,
clock_skew.jsonl, groups.jsonl; docs/output.md) is built here and nowhere else, so the record
shapes have one home. The Spark glue and the sinks route on `OutputKind`.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from state.impact import CORRECTED_IMPACT_FIELDS, unknown
from state.vocabulary import GroupState, Outcome, RemovalCause, RootCause
from state.model import PROTOCOL_CLASSIC, GenerationCheck, GroupModel, Member, OpenRebalance, ProvisionalTrigger


class OutputKind(StrEnum):
    """The `kind` of an output row (OUTPUT_SCHEMA) and of a record handed to the sinks."""
    REBALANCE = "rebalance"
    REMOVAL = "removal"
    # The final trigger of a rebalance emitted with `trigger_final` false (a LeaveGroup that may
    # turn out to be a poll timeout once its removal is decided): apply_trigger_decisions.
    REBALANCE_TRIGGER = "rebalance_trigger"
    ANOMALY = "anomaly"
    SNAPSHOT = "snapshot"
    CLOCK_SKEW = "clock_skew"
    QUARANTINE = "quarantine"        # an input that could not be used (parse/decode steps)
    DECODE_STATS = "decode_stats"    # per-batch record counts of the offsets decoder
    LOG_STATS = "log_stats"          # per-task line counts of each log source, by layout and class
    CLOCK = "clock"                  # the batch watermark (feeds the driver's correlator)
    # A broker's line about a peer or itself (state/diagnosis/brokers.py): feeds the correlator.
    BROKER_EVENT = "broker_event"
    # A group's newest committed offset per partition among a batch's commits (`run` only: the
    # committed half of its lag, state/lag.py); not a record, not kept.
    COMMITTED_OFFSETS = "committed_offsets"
    # When each partition a measured rebalance stopped was stopped (a classic one's stops end at
    # its completion, a consumer group's each at its own end): `run` turns them into a
    # rebalance_cost record once the end offsets around them are sampled (state/rebalance_cost.py);
    # not a record, not kept.
    PARTITION_STOPS = "partition_stops"
    # What a rebalance cost in records (records_delayed), measured by `run` from the end offsets.
    REBALANCE_COST = "rebalance_cost"
    # How long the group took after a rebalance to be back to its lag before it (catch_up_seconds),
    # once it is or at its deadline (state/rebalance_cost.py; `run` only).
    CATCH_UP = "catch_up"


# Kinds that are records of the run (event sink, counters); SNAPSHOT and CLOCK are not.
RECORD_KINDS = (OutputKind.REBALANCE, OutputKind.REMOVAL, OutputKind.REBALANCE_TRIGGER, OutputKind.ANOMALY,
                OutputKind.QUARANTINE, OutputKind.CLOCK_SKEW, OutputKind.DECODE_STATS, OutputKind.LOG_STATS,
                OutputKind.REBALANCE_COST, OutputKind.CATCH_UP)
# The records that count what the parse and decode steps saw: they reach the driver in each
# batch's progress report (streaming/rows.py, "Statistics rows"), the others as output rows.
STATISTICS_KINDS = (OutputKind.DECODE_STATS, OutputKind.LOG_STATS)
OUTPUT_RECORD_KINDS = tuple(kind for kind in RECORD_KINDS if kind not in STATISTICS_KINDS)

OUTCOMES = tuple(Outcome)
IN_PROGRESS = Outcome.IN_PROGRESS
CAUSES = tuple(RemovalCause)

# A member missing from the next generation without a removal line was dropped at the rebalance
# timeout (silent before Kafka 2.7) if the JOIN phase lasted at least this share of its timeout.
REBALANCE_TIMEOUT_SHARE = 0.95

_UUID_SUFFIX = re.compile(r"^(.+)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


# Fields a record kind gained after the first release, with the value an older record means. The
# event sink keeps records across upgrades; read back, they get these so that a resumed run's
# records equal an uninterrupted run's (tests/spark/test_checkpoint_compat.py).
ADDED_FIELDS: dict[str, dict[str, Any]] = {
    OutputKind.REBALANCE: {"assigned_at_ms": None,      # KIP-848 end of the assignment phase
                           "trigger_final": True,       # before trigger decisions, every trigger was
                           # the impact (state/impact.py): not measured by the release that wrote it
                           **unknown("written by a release that did not measure the impact")},
    OutputKind.REMOVAL: {"partition_seconds_stopped": None,
                         # the root cause's confidence and the per-group verdict (state/diagnosis)
                         "root_cause_confidence": None, "root_cause_confidence_reason": None,
                         "group_root_cause": None, "host_members": None},
}


def upgrade_record(kind: str, record: dict[str, Any]) -> dict[str, Any]:
    """A record as the current version writes it, from one an older version wrote."""
    for name, default in ADDED_FIELDS.get(kind, {}).items():
        record.setdefault(name, default)
    return record


def client_id_from_member_id(member_id: str | None) -> str | None:
    """Classic member ids are `<client.id>-<uuid>` (broker-generated); KIP-848 ids are opaque."""
    match = _UUID_SUFFIX.match(member_id or "")
    return match.group(1) if match else None


def _seconds(a: int | None, b: int | None) -> float | None:
    return None if a is None or b is None else round((b - a) / 1000.0, 3)


def slow_rebalance_fields(protocol: str, previous_generation: int | None, timeout_removals: list[str],
                          timeouts: Iterable[int | None], join_seconds: float | None) -> dict[str, Any]:
    """waited_for_member / hit_rebalance_timeout / rebalance_timeout_ms / initial_delay_seconds of a
    rebalance record: `timeouts` are the rebalance timeouts known for the group's members (None
    where unknown); `join_seconds` is None while the JOIN phase is open."""
    timeout = max((t for t in timeouts if t), default=None)
    hit = bool(timeout_removals) or (
        protocol == PROTOCOL_CLASSIC and join_seconds is not None and timeout is not None
        and join_seconds * 1000 >= REBALANCE_TIMEOUT_SHARE * timeout)
    initial = None
    if protocol == PROTOCOL_CLASSIC and previous_generation == 0 and join_seconds is not None:
        # A new (Empty) group: the JOIN phase is group.initial.rebalance.delay.ms (extended while
        # members keep joining); there is no old member to wait for.
        initial = join_seconds
    return {"waited_for_member": timeout_removals[-1] if timeout_removals else None,
            "hit_rebalance_timeout": hit, "rebalance_timeout_ms": timeout,
            "initial_delay_seconds": initial}


def rebalance_record(cluster: str, group: str, o: OpenRebalance, outcome: str, ended_at_ms: int | None,
                     members: int | None, member_timeouts: Iterable[int | None],
                     trigger_final: bool = True) -> dict[str, Any]:
    """One rebalance (rebalances.jsonl). `outcome` "in_progress" describes one still open when the
    input ended: no end, no durations, the slow-rebalance fields as far as they are known.
    `trigger_final` false: a rebalance_trigger record will say the trigger (trigger_decision)."""
    open_now = outcome == IN_PROGRESS
    start, join_end = o.started_at_ms, o.join_completed_at_ms
    done = None if open_now else o.completed_at_ms
    total = _seconds(start, done)
    if outcome == Outcome.EMPTY and total is None:
        # ended when the group emptied (classic: the "is now empty" line = join_end;
        # KIP-848: no join phase, the record that emptied it = ended_at_ms)
        total = _seconds(start, join_end if join_end is not None else ended_at_ms)
    join_seconds = None if open_now else _seconds(start, join_end)
    record = {
        "cluster": cluster, "group": group, "protocol": o.protocol,
        "generation": o.generation, "previous_generation": o.previous_generation,
        "coordinator": o.coordinator, "started_at_ms": start,
        "join_completed_at_ms": join_end, "assigned_at_ms": o.assigned_at_ms, "completed_at_ms": done,
        "ended_at_ms": ended_at_ms,
        "join_seconds": join_seconds, "sync_seconds": None if open_now else _seconds(join_end, done),
        "total_seconds": total, "trigger": o.trigger, "trigger_final": trigger_final,
        "trigger_member": o.trigger_member, "reason_text": o.reason_text,
        "outcome": outcome, "members": members, "removed_members": list(o.removals),
    }
    record.update(slow_rebalance_fields(o.protocol, o.previous_generation, o.timeout_removals,
                                        [*member_timeouts, o.max_rebalance_timeout_ms], join_seconds))
    # The impact fields: measured by the machine when the rebalance ends (state/impact.py).
    record.update(unknown("the rebalance has not ended") if open_now else unknown("not measured"))
    return record


def trigger_decision(cluster: str, group: str, pending: ProvisionalTrigger, trigger: str,
                     decided_at_ms: int | None, evidence: str) -> dict[str, Any]:
    """The final trigger of a rebalance emitted with trigger_final false (rebalance_triggers.jsonl).
    `pending` is what the machine kept of it (GroupModel.provisional_triggers)."""
    return {"cluster": cluster, "group": group, "protocol": pending.protocol,
            "generation": pending.generation, "started_at_ms": pending.started_at_ms,
            "outcome": pending.outcome, "trigger_member": pending.trigger_member,
            "previous_trigger": pending.trigger, "trigger": trigger, "decided_at_ms": decided_at_ms,
            "evidence": evidence}


def partition_stops_record(rebalance: dict[str, Any], stopped_at: dict[str, int],
                           spans: dict[str, list[list[int]]] | None = None) -> dict[str, Any]:
    """A PARTITION_STOPS row of a measured rebalance: when each partition whose stop it ended
    stopped (ms), as [topic, partition, stopped_at_ms] (a classic rebalance: every stop ends at its
    completion), or [topic, partition, stopped_at_ms, resumed_at_ms] per stop of a consumer group's
    partition (`spans`: its members' records end each stop; the topic is its id there)."""
    stops: list[list[Any]] = []
    for p, at_ms in sorted(stopped_at.items()):
        topic, _, partition = p.rpartition(":")
        stops.append([topic, int(partition), int(at_ms)])
    for p, pairs in sorted((spans or {}).items()):
        topic, _, partition = p.rpartition(":")
        stops.extend([topic, int(partition), int(start), int(end)] for start, end in pairs)
    return {"cluster": rebalance["cluster"], "group": rebalance["group"], "generation": rebalance["generation"],
            "started_at_ms": rebalance["started_at_ms"], "completed_at_ms": rebalance["completed_at_ms"],
            "stops": stops}


def _rebalance_key(stops: dict[str, Any]) -> dict[str, Any]:
    return {"cluster": stops["cluster"], "group": stops["group"], "generation": stops["generation"],
            "started_at_ms": stops["started_at_ms"], "completed_at_ms": stops["completed_at_ms"]}


def rebalance_cost_record(stops: dict[str, Any], records_delayed: int | None, by_topic: dict[str, int],
                          unknown_reason: str | None, measured_at_ms: int, lag_before: int | None = None,
                          catch_up_deadline_ms: int | None = None) -> dict[str, Any]:
    """What a rebalance cost in records (rebalance_costs.jsonl; `run` only): the records that
    arrived on its stopped partitions while each was stopped, from the sampled end offsets; the
    group's lag on them when they stopped, and until when its catch-up is awaited."""
    listed = stops["stops"]
    return {**_rebalance_key(stops), "partitions_stopped": len({(s[0], s[1]) for s in listed}),
            "records_delayed": records_delayed,
            "records_delayed_by_topic": dict(sorted(by_topic.items())) if records_delayed is not None else None,
            "records_delayed_unknown_reason": unknown_reason, "lag_before": lag_before,
            "catch_up_deadline_ms": catch_up_deadline_ms, "measured_at_ms": measured_at_ms,
            "stops": [stop_span(s, stops["completed_at_ms"]) for s in listed[:STOPS_LISTED]],
            "stops_not_listed": max(0, len(listed) - STOPS_LISTED)}


# The stops a rebalance_cost record lists (the rest are counted): a record stays small whatever the group.
STOPS_LISTED = 200


def stop_span(stop: list[Any], completed_at_ms: int) -> list[Any]:
    """[topic, partition, stopped at ms, resumed at ms] of a PARTITION_STOPS row's stop (a classic
    one resumes at the completion; a consumer group's names its topic by id, as its records do)."""
    return [stop[0], stop[1], stop[2], stop[3] if len(stop) > 3 else completed_at_ms]


def catch_up_record(stops: dict[str, Any], lag_before: int, lag_after: int | None, caught_up_at_ms: int | None,
                    unknown_reason: str | None, measured_at_ms: int) -> dict[str, Any]:
    """How long after a rebalance its group's lag on the partitions it stopped was back to its
    level before (rebalance_catch_ups.jsonl; `run` only): null with a reason when it was not by
    the deadline."""
    seconds = None if caught_up_at_ms is None else max(0, caught_up_at_ms - stops["completed_at_ms"]) / 1000
    return {**_rebalance_key(stops), "lag_before": lag_before, "lag_after": lag_after,
            "catch_up_seconds": seconds, "caught_up_at_ms": caught_up_at_ms, "catch_up_unknown_reason": unknown_reason,
            "measured_at_ms": measured_at_ms}


def _decision_key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["cluster"], r["group"], r.get("generation"), r.get("started_at_ms"), r.get("trigger_member"))


def apply_trigger_decisions(rebalances: Iterable[dict[str, Any]], decisions: Iterable[dict[str, Any]]
                            ) -> list[dict[str, Any]]:
    """The rebalance records as finally decided: each one a rebalance_trigger record names (same
    cluster, group, generation, start and trigger member) gets its trigger and trigger_final true.
    What the replay files, `report` and the bed's judge show; consumers of the event sink do the same."""
    decisions = list(decisions)     # read twice below (an event sink yields them)
    final = {_decision_key(d): d["trigger"] for d in decisions}
    if not final:
        return list(rebalances)
    corrected = {_decision_key(d): {k: d[k] for k in CORRECTED_IMPACT_FIELDS if k in d} for d in decisions}
    out = []
    for r in rebalances:
        trigger = final.get(_decision_key(r)) if not r.get("trigger_final", True) else None
        out.append(r if trigger is None else dict(r, trigger=trigger, trigger_final=True,
                                                  **corrected.get(_decision_key(r), {})))
    return out



def in_progress_rebalance_record(snap: dict[str, Any]) -> dict[str, Any] | None:
    """The rebalance a group snapshot shows open (replay: still open at the end of the input)."""
    o = snap.get("rebalance_in_progress")
    if not o or snap.get("state") == GroupState.DEAD:
        return None
    return rebalance_record(snap["cluster"], snap["group"], OpenRebalance(**o), IN_PROGRESS, None, None,
                            [snap.get("rebalance_timeout_ms")])


def member_info(member_id: str, known: Member | None, protocol: str) -> dict[str, Any]:
    """The member fields of a removal record, from what the model knew of the member."""
    info: dict[str, Any] = {
        "member_id": member_id, "client_id": None, "client_host": None,
        "group_instance_id": None, "session_timeout_ms": None, "rebalance_timeout_ms": None,
    }
    if known is not None:
        for key in ("client_id", "client_host", "group_instance_id", "session_timeout_ms",
                    "rebalance_timeout_ms"):
            info[key] = getattr(known, key)
    if info["client_id"] is None and info["group_instance_id"] is None and protocol == PROTOCOL_CLASSIC:
        info["client_id"] = client_id_from_member_id(member_id)
    return info


def host_members(model: GroupModel, known: Member | None) -> int | None:
    """Members of the group on the removed member's client host (itself included), or None when
    its host is not known."""
    if known is None or known.client_host is None:
        return None
    host = known.client_host
    return 1 + sum(1 for m in model.members.values() if m.client_host == host and m.member_id != known.member_id)


def removal_record(model: GroupModel, member_id: str, known: Member | None, cause: str,
                   at_ms: int, generation: int | None, coordinator: int | None, source_id: str,
                   seq: int, reason_text: str | None = None, evidence: str = "") -> dict[str, Any]:
    """One member removal (member_removals.jsonl); root_cause is decided later (state/diagnosis)."""
    return {
        "cluster": model.cluster, "group": model.group, "protocol": model.protocol,
        **member_info(member_id, known, model.protocol),
        "removed_at_ms": at_ms, "cause": cause, "root_cause": RootCause.UNKNOWN, "evidence": evidence,
        "root_cause_confidence": None, "root_cause_confidence_reason": None, "group_root_cause": None,
        # members of the group on the same client host when it was removed, itself included (the
        # host-wide rule weighs how many of a host's members were affected)
        "host_members": host_members(model, known),
        "reason_text": reason_text, "generation": generation, "coordinator": coordinator,
        "source_id": source_id, "seq": seq,
        # what this removal cost (state/impact.py): set when the rebalance that reassigned the
        # member's partitions ends while the record is still held for its diagnosis
        "partition_seconds_stopped": None,
    }


def invalid_transition_record(model: GroupModel, ts_ms: int, from_state: str, to_state: str,
                              event_kind: str, source_id: str, seq: int) -> dict[str, Any]:
    """A transition Kafka's table forbids (anomalies.jsonl)."""
    return {"cluster": model.cluster, "group": model.group, "ts_ms": ts_ms, "kind": "invalid_transition",
            "from_state": from_state, "to_state": to_state, "event_kind": event_kind,
            "source_id": source_id, "seq": seq}


def source_mismatch_record(model: GroupModel, generation: int, check: GenerationCheck, seen_in: str,
                           missing_in: str) -> dict[str, Any]:
    """A classic generation seen in one source only (anomalies.jsonl)."""
    return {"cluster": model.cluster, "group": model.group, "ts_ms": check.ts_ms, "kind": "source_mismatch",
            "protocol": PROTOCOL_CLASSIC, "generation": generation, "seen_in": seen_in,
            "missing_in": missing_in, "checked_at_ms": check.due_ms, "source_id": check.source_id,
            "seq": check.seq}


def clock_skew_record(model: GroupModel, source: str, pair: str, generation: int, log_ts_ms: int,
                      record_ts_ms: int) -> dict[str, Any]:
    """A log line and the offsets record of the same action (clock_skew.jsonl)."""
    return {"cluster": model.cluster, "group": model.group, "source": source, "pair": pair,
            "generation": generation, "log_ts_ms": log_ts_ms, "record_ts_ms": record_ts_ms,
            "skew_ms": log_ts_ms - record_ts_ms, "ts_ms": max(log_ts_ms, record_ts_ms)}


def _plain(obj: Member | OpenRebalance) -> dict[str, Any]:
    """A member or open rebalance as a dict, like dataclasses.asdict without its deep copy (their
    fields are scalars and lists of strings: the lists are copied)."""
    return {k: list(v) if isinstance(v, list) else v for k, v in vars(obj).items()}


def snapshot(model: GroupModel) -> dict[str, Any]:
    """The current state of one group (groups.jsonl row; gauges are computed from it)."""
    o = model.open_rebalance
    return {
        "cluster": model.cluster, "group": model.group, "protocol": model.protocol,
        "state": model.state, "generation": model.generation, "leader": model.leader,
        "protocol_type": model.protocol_type, "assignor": model.selected_protocol,
        "coordinator": model.coordinator, "coordinators": [list(c) for c in model.coordinators],
        "state_since_ms": model.state_since_ms,
        "member_count": len(model.members),
        "members": [_plain(mm) for _, mm in sorted(model.members.items())],
        "rebalance_in_progress": None if o is None else _plain(o),
        "rebalances_total": model.rebalances_total, "removals_total": model.removals_total,
        "invalid_transitions": model.invalid_transitions,
        "last_commit_ms": model.last_commit_ms, "commits_total": model.commits_total,
        "last_event_ms": model.last_event_ms,
        "rebalance_timeout_ms": max((mm.rebalance_timeout_ms for mm in model.members.values()
                                     if mm.rebalance_timeout_ms), default=None),
        "recent_rebalance_starts_ms": list(model.rebalance_starts),
        "held_removals": len(model.held_removals),
    }
