"""Unit tests for state/machine: hand-made Event lists in, exact output records out (no Spark).

Sequences follow the log order of Kafka's group coordinator (docs/event-model.md)
(Kafka 2.7 "Assignment received" without a member count, 2.8+ with one, 3.x LeaveGroup order, the
KIP-848 records of §3-4). Timestamps are small made-up epoch millis.
"""
from __future__ import annotations

import gc
import itertools
import json
import random
import weakref
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

import pytest

from state import events as E
from state.machine import GroupStateMachine
from state.machine.base import METADATA_GRACE_MS
from state.model import (
    CLASSIC_VALID_PREVIOUS_STATES, COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, PROTOCOL_CLASSIC, STABLE,
    GroupModel, Member, UnattachedRemoval, is_legal
)
from state.outputs import CAUSES, OUTCOMES, OutputKind, client_id_from_member_id, snapshot
from tests.support.machine_events import (
    C1, C2, C3, C4, CLUSTER, FAR_FUTURE_MS, K1, K2, S_NEW, S_OLD, G, anomaly, ev, known_removal, md_member, metadata,
    new_machine, outs, prepare, rebalance, records, removal, run, stable_group
)

# ------------------------------------------------------------------------------- 1. the table
EXPECTED_TABLE = {
    "PreparingRebalance": {"Stable", "CompletingRebalance", "Empty"},
    "CompletingRebalance": {"PreparingRebalance"},
    "Stable": {"CompletingRebalance"},
    "Empty": {"PreparingRebalance"},
    "Dead": {"Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead"},
}
STATES5 = ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]


def test_valid_previous_states_is_the_background_table():
    assert {k: set(v) for k, v in CLASSIC_VALID_PREVIOUS_STATES.items()} == EXPECTED_TABLE


@pytest.mark.parametrize("previous,target", list(itertools.product(STATES5, STATES5)))
def test_is_legal_all_25_pairs(previous, target):
    assert is_legal(PROTOCOL_CLASSIC, previous, target) is (previous in EXPECTED_TABLE[target])


def test_is_legal_unknown_states():
    assert not is_legal(PROTOCOL_CLASSIC, "Unknown", STABLE)
    assert not is_legal(PROTOCOL_CLASSIC, STABLE, "Assigning")


# ------------------------------------------------------------------------------- 2. happy path
def test_classic_happy_path_kafka_2_7_waits_for_metadata_record():
    reason = f"Adding new member {C1} with group instance id None"
    evs = [
        prepare(1000, 0, "member_join", C1, reason),
        ev(4000, E.JOIN_COMPLETE, 1),
        ev(4050, E.ASSIGNMENT_RECEIVED, 1, C1),       # 2.7: no member count
    ]
    m = run(evs)
    assert outs(m) == []                             # waits for the GroupMetadata record
    assert m.m.state == STABLE and m.m.generation == 1
    assert m.next_deadline_ms() == 4050 + METADATA_GRACE_MS
    m.apply(ev(4055, E.OFFSET_COMMIT, data={"topic": "t", "partition": 0, "offset": 5}))
    assert outs(m) == []                             # commits do not close the wait
    m.apply(metadata(4060, 1, [md_member(C1), md_member(C2)], leader=C1))
    assert outs(m) == [(OutputKind.REBALANCE, rebalance(
        generation=1, previous_generation=0, coordinator=1, started_at_ms=1000,
        join_completed_at_ms=4000, completed_at_ms=4050, ended_at_ms=4050, join_seconds=3.0,
        sync_seconds=0.05, total_seconds=3.05, trigger="member_join", trigger_member=C1,
        reason_text=reason, outcome="stable", members=2, removed_members=[]))]
    model = m.m
    assert model.open_rebalance is None and model.last_emitted_generation == 1
    assert model.leader == C1 and model.selected_protocol == "range"
    assert model.protocol_type == "consumer" and model.coordinator == 1
    assert model.members == {
        C1: Member(member_id=C1, client_id="consumer-orders-1", client_host="/10.0.0.1",
                   session_timeout_ms=10000, rebalance_timeout_ms=300000),
        C2: Member(member_id=C2, client_id="consumer-orders-2", client_host="/10.0.0.2",
                   session_timeout_ms=10000, rebalance_timeout_ms=300000),
    }
    assert model.invalid_transitions == 0 and model.rebalances_total == 1
    assert model.commits_total == 1


def test_classic_kafka_2_7_without_metadata_emits_after_grace():
    m = run([prepare(1000, 0, "member_join", C1), ev(4000, E.JOIN_COMPLETE, 1),
             ev(4050, E.ASSIGNMENT_RECEIVED, 1, C1)])
    m.advance_to(4050 + METADATA_GRACE_MS)             # not yet past the grace period
    assert outs(m) == []
    m.advance_to(4050 + METADATA_GRACE_MS + 1)
    [rec] = records(m, OutputKind.REBALANCE)
    assert rec["outcome"] == "stable" and rec["completed_at_ms"] == 4050
    assert rec["members"] is None                      # no member list known
    assert m.next_deadline_ms() is None
    # The late record fills in the members but is not a second rebalance.
    m.apply(metadata(9000, 1, [md_member(C1)]))
    assert len(records(m, OutputKind.REBALANCE)) == 1
    assert set(m.m.members) == {C1}


def test_classic_happy_path_kafka_2_8_member_count_emits_immediately():
    reason = f"Adding new member {C1} with group instance id None"
    evs = [prepare(1000, 0, "member_join", C1, reason), ev(4000, E.JOIN_COMPLETE, 1),
           ev(4050, E.ASSIGNMENT_RECEIVED, 1, C1, data={"members": 2, "static_members": 0})]
    m = run(evs)
    expected = rebalance(
        generation=1, previous_generation=0, coordinator=1, started_at_ms=1000,
        join_completed_at_ms=4000, completed_at_ms=4050, ended_at_ms=4050, join_seconds=3.0,
        sync_seconds=0.05, total_seconds=3.05, trigger="member_join", trigger_member=C1,
        reason_text=reason, outcome="stable", members=2, removed_members=[])
    assert outs(m) == [(OutputKind.REBALANCE, expected)]
    assert m.m.leader == C1 and m.m.open_rebalance is None
    m.apply(metadata(4052, 1, [md_member(C1), md_member(C2)]))
    assert outs(m) == [(OutputKind.REBALANCE, expected)]    # same generation: not counted twice
    assert set(m.m.members) == {C1, C2}
    assert m.m.members[C2].client_host == "/10.0.0.2"


# ------------------------------------------------------------------------------- 3. leave -> Empty
def test_leave_of_last_member_kafka_2_x_order():
    start, first = stable_group([C1])
    left = ev(10000, E.MEMBER_LEFT, member_id=C1)      # 2.2-2.8: before "Preparing"
    reason = f"removing member {C1} on LeaveGroup"
    p = prepare(10000, 1, "member_leave", C1, reason)
    empty = ev(10001, E.GROUP_EMPTY, 2)
    m = run(start + [left, p, empty, metadata(10003, 2, [])])
    assert outs(m) == [
        (OutputKind.REBALANCE, first),
        (OutputKind.REMOVAL, known_removal(left, C1, "leave_group", generation=1)),
        (OutputKind.REBALANCE, rebalance(
            generation=2, previous_generation=1, coordinator=1, started_at_ms=10000,
            join_completed_at_ms=10001, completed_at_ms=None, ended_at_ms=10001,
            join_seconds=0.001, sync_seconds=None, total_seconds=0.001, trigger="member_leave",
            trigger_member=C1, reason_text=reason, outcome="empty", members=0,
            removed_members=[C1])),
    ]
    assert m.m.state == EMPTY and m.m.generation == 2 and m.m.members == {}
    assert m.m.invalid_transitions == 0 and m.m.unattached_removals == []


@pytest.mark.parametrize("client_reason,cause,trigger", [
    ("the consumer is being closed", "leave_group", "member_leave"),
    ("consumer poll timeout has expired. This means the time between subsequent calls to poll() "
     "was longer than the configured max.poll.interval.ms, which typically implies that the "
     "poll loop is spending too much time processing messages.", "poll_timeout", "poll_timeout"),
])
def test_leave_of_last_member_kafka_3_x_order(client_reason, cause, trigger):
    start, first = stable_group([C1])
    reason = f"Removing member {C1} on LeaveGroup; client reason: {client_reason}"
    p = prepare(10000, 1, trigger, C1, reason)         # 3.x: "Preparing" before "has left"
    left = ev(10000, E.MEMBER_LEFT, member_id=C1, data={"client_reason": client_reason})
    empty = ev(10002, E.GROUP_EMPTY, 2)
    m = run(start + [p, left, empty, metadata(10004, 2, [])])
    assert outs(m) == [
        (OutputKind.REBALANCE, first),
        (OutputKind.REMOVAL, known_removal(left, C1, cause, generation=1, reason_text=client_reason)),
        (OutputKind.REBALANCE, rebalance(
            generation=2, previous_generation=1, coordinator=1, started_at_ms=10000,
            join_completed_at_ms=10002, completed_at_ms=None, ended_at_ms=10002,
            join_seconds=0.002, sync_seconds=None, total_seconds=0.002, trigger=trigger,
            trigger_member=C1, reason_text=reason, outcome="empty", members=0,
            removed_members=[C1])),
    ]
    assert m.m.state == EMPTY and m.m.invalid_transitions == 0


def settled(m: GroupStateMachine, events: Iterable[E.Event] = ()) -> GroupStateMachine:
    """`events` applied, then the metadata grace passed: a Kafka 2.8+ rebalance whose group has
    shown its offsets records waits that long for its generation's GroupMetadata record (these
    tests give none), then is emitted with the line's member count."""
    m.apply_all(events)
    assert m.m.last_event_ms is not None
    m.advance_to(m.m.last_event_ms + METADATA_GRACE_MS + 1)
    return m


def test_poll_timeout_leave_without_logged_reason_sets_trigger():
    """A broker without a rebalance reason: the removal just before is the trigger."""
    start, first = stable_group([C1, C2])
    client_reason = "consumer poll timeout has expired."
    left = ev(10000, E.MEMBER_LEFT, member_id=C2, data={"client_reason": client_reason})
    p = prepare(10000, 1, trigger=None)
    m = settled(run(start + [left, p, ev(13000, E.JOIN_COMPLETE, 2),
                     ev(13020, E.ASSIGNMENT_RECEIVED, 2, C1, data={"members": 1})]))
    assert records(m, OutputKind.REMOVAL) == [
        known_removal(left, C2, "poll_timeout", generation=1, reason_text=client_reason)]
    assert records(m, OutputKind.REBALANCE)[1] == rebalance(
        generation=2, previous_generation=1, coordinator=1, started_at_ms=10000,
        join_completed_at_ms=13000, completed_at_ms=13020, ended_at_ms=13020, join_seconds=3.0,
        sync_seconds=0.02, total_seconds=3.02, trigger="poll_timeout", trigger_member=C2,
        reason_text=None, outcome="stable", members=1, removed_members=[C2])


def test_java_coordinator_poll_timeout_leave_sets_trigger():
    """Kafka 4.x logs the client reason on "has left group" and "explicit `LeaveGroup` request for
    (C2) members." as the rebalance reason (seen on a real 4.4 broker, testbed/bed)."""
    start, _ = stable_group([C1, C2])
    client_reason = "consumer poll timeout has expired."
    left = ev(10000, E.MEMBER_LEFT, member_id=C2, data={"client_reason": client_reason})
    reason = f"explicit `LeaveGroup` request for ({C2}) members."
    p = prepare(10000, 1, trigger="member_leave", member=C2, reason=reason)
    m = settled(run(start + [left, p, ev(10400, E.JOIN_COMPLETE, 2), ev(10420, E.ASSIGNMENT_RECEIVED, 2, C1, data={"members": 1})]))
    assert records(m, OutputKind.REMOVAL) == [
        known_removal(left, C2, "poll_timeout", generation=1, reason_text=client_reason)]
    rec = records(m, OutputKind.REBALANCE)[1]
    assert (rec["trigger"], rec["trigger_member"], rec["reason_text"]) == ("poll_timeout", C2, reason)
    # A plain leave keeps member_leave.
    plain = ev(10000, E.MEMBER_LEFT, member_id=C2, data={"client_reason": "the consumer is being closed"})
    m = settled(run(start + [plain, p, ev(10400, E.JOIN_COMPLETE, 2), ev(10420, E.ASSIGNMENT_RECEIVED, 2, C1, data={"members": 1})]))
    assert records(m, OutputKind.REBALANCE)[1]["trigger"] == "member_leave"


def test_old_removal_is_not_attached_to_a_later_rebalance():
    start, _ = stable_group([C1, C2])
    m = settled(run(start + [ev(10000, E.MEMBER_LEFT, member_id=C2),
                     prepare(20000, 1, trigger=None), ev(23000, E.JOIN_COMPLETE, 2),
                     ev(23001, E.ASSIGNMENT_RECEIVED, 2, C1, data={"members": 1})]))
    rec = records(m, OutputKind.REBALANCE)[1]
    assert rec["trigger"] == "unknown" and rec["trigger_member"] is None
    assert rec["removed_members"] == []


# ------------------------------------------------------------------------------- 4. heartbeat expiry
@pytest.mark.parametrize("move_ms,expired,root_cause", [
    (17000, [C2, C3], "coordinator_wide"),  # the group moved 3 s before two members expired
    (23500, [C2, C3], "coordinator_wide"),  # a stalled coordinator expired them, then lost the group
    (17000, [C2], "process_crash"),         # one member next to a failover: alive ones follow a move
    (23500, [C2], "process_crash"),
    (9000, [C2, C3], "process_crash"),      # 11 s before: outside coordinator_wide_window_ms
])
def test_a_coordinator_move_explains_expiries_of_several_members(move_ms, expired, root_cause):
    start, _ = stable_group([C1, C2, C3])
    moved = ev(move_ms, E.GROUP_LOADED, 1, data={"members": 3}, broker=2)
    failed = [ev(20000 + 300 * i, E.MEMBER_FAILED, member_id=mid) for i, mid in enumerate(expired)]
    m = run(start + sorted([moved, *failed], key=E.Event.sort_key))
    m.advance_to(failed[0].ts_ms + 60_001)     # the first is decided (and released) alone
    m.advance_to(FAR_FUTURE_MS)
    removed = [r for k, r in m.outputs if k == OutputKind.REMOVAL]     # as diagnosed
    assert [(r["cause"], r["root_cause"]) for r in removed] == [("heartbeat_expiry", root_cause)] * len(expired), \
        [r["evidence"] for r in removed]


def test_heartbeat_expiry_uses_member_info_from_metadata_record():
    start, first = stable_group([C1, C2])
    failed = ev(20000, E.MEMBER_FAILED, member_id=C2)
    reason = f"removing member {C2} on heartbeat expiration"
    evs = start + [failed, prepare(20000, 1, "heartbeat_expiry", C2, reason),
                   ev(23000, E.JOIN_COMPLETE, 2),
                   ev(23010, E.ASSIGNMENT_RECEIVED, 2, C1, data={"members": 1})]
    m = settled(run(evs))
    assert outs(m) == [
        (OutputKind.REBALANCE, first),
        (OutputKind.REMOVAL, removal(failed, C2, "heartbeat_expiry", generation=1,
                              client_id="consumer-orders-2", client_host="/10.0.0.2",
                              session_timeout_ms=10000, rebalance_timeout_ms=300000)),
        (OutputKind.REBALANCE, rebalance(
            generation=2, previous_generation=1, coordinator=1, started_at_ms=20000,
            join_completed_at_ms=23000, completed_at_ms=23010, ended_at_ms=23010,
            join_seconds=3.0, sync_seconds=0.01, total_seconds=3.01, trigger="heartbeat_expiry",
            trigger_member=C2, reason_text=reason, outcome="stable", members=1,
            removed_members=[C2])),
    ]
    assert set(m.m.members) == {C1}
    assert m.m.removals_total == 1 and m.m.rebalances_total == 2


def test_heartbeat_expiry_of_unknown_member_derives_client_id():
    mid = "my-app-7f3e2d1c-0b9a-4c8d-8e7f-6a5b4c3d2e1f"
    failed = ev(5000, E.MEMBER_FAILED, member_id=mid, broker=2)
    m = run([failed])
    assert outs(m) == [(OutputKind.REMOVAL, removal(failed, mid, "heartbeat_expiry", generation=None,
                                               client_id="my-app", coordinator=2))]


def test_client_id_from_member_id():
    assert client_id_from_member_id(C1) == "consumer-orders-1"
    assert client_id_from_member_id("rdkafka-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d") == "rdkafka"
    assert client_id_from_member_id(K1) is None
    assert client_id_from_member_id("") is None
    assert client_id_from_member_id(None) is None


# ------------------------------------------------------------------------------- 5. superseded
def test_member_joining_before_sync_supersedes_the_rebalance():
    r1 = f"Adding new member {C1} with group instance id None"
    r2 = f"Adding new member {C2} with group instance id None"
    evs = [prepare(1000, 0, "member_join", C1, r1), ev(4000, E.JOIN_COMPLETE, 1),
           prepare(4010, 1, "member_join", C2, r2), ev(7000, E.JOIN_COMPLETE, 2),
           ev(7020, E.ASSIGNMENT_RECEIVED, 2, C1),
           metadata(7025, 2, [md_member(C1), md_member(C2)])]
    m = run(evs)
    assert outs(m) == [
        (OutputKind.REBALANCE, rebalance(
            generation=1, previous_generation=0, coordinator=1, started_at_ms=1000,
            join_completed_at_ms=4000, completed_at_ms=None, ended_at_ms=4010, join_seconds=3.0,
            sync_seconds=None, total_seconds=None, trigger="member_join", trigger_member=C1,
            reason_text=r1, outcome="superseded", members=None, removed_members=[])),
        (OutputKind.REBALANCE, rebalance(
            generation=2, previous_generation=1, coordinator=1, started_at_ms=4010,
            join_completed_at_ms=7000, completed_at_ms=7020, ended_at_ms=7020,
            join_seconds=2.99, sync_seconds=0.02, total_seconds=3.01, trigger="member_join",
            trigger_member=C2, reason_text=r2, outcome="stable", members=2, removed_members=[])),
    ]
    assert m.m.invalid_transitions == 0 and m.m.state == STABLE and m.m.generation == 2


# ------------------------------------------------------------------------------- 6. rebalance timeout
def test_members_not_joined_are_removed_with_rebalance_timeout():
    start, first = stable_group([C1, C2, C3])
    reason = f"Adding new member {C4} with group instance id None"
    nj = ev(310000, E.MEMBERS_NOT_JOINED, data={"member_ids": [C2, C3]})
    evs = start + [prepare(10000, 1, "member_join", C4, reason), nj,
                   ev(310000, E.JOIN_COMPLETE, 2),
                   ev(310050, E.ASSIGNMENT_RECEIVED, 2, C1, data={"members": 2})]
    m = settled(run(evs))
    assert outs(m) == [
        (OutputKind.REBALANCE, first),
        (OutputKind.REMOVAL, known_removal(nj, C2, "rebalance_timeout", generation=1)),
        (OutputKind.REMOVAL, known_removal(nj, C3, "rebalance_timeout", generation=1)),
        (OutputKind.REBALANCE, rebalance(
            generation=2, previous_generation=1, coordinator=1, started_at_ms=10000,
            join_completed_at_ms=310000, completed_at_ms=310050, ended_at_ms=310050,
            join_seconds=300.0, sync_seconds=0.05, total_seconds=300.05, trigger="member_join",
            trigger_member=C4, reason_text=reason, outcome="stable", members=2,
            removed_members=[C2, C3])),
    ]
    assert m.m.unattached_removals == []


def test_members_not_synced_are_removed_with_sync_timeout():
    start, _ = stable_group([C1, C2])
    ns = ev(14000, E.MEMBERS_NOT_SYNCED, data={"member_ids": [C2]})
    m = run(start + [prepare(10000, 1, "member_join", C3), ev(13000, E.JOIN_COMPLETE, 2), ns])
    assert records(m, OutputKind.REMOVAL) == [known_removal(ns, C2, "sync_timeout", generation=2)]
    assert m.m.open_rebalance is not None
    assert m.m.open_rebalance.removals == [C2]


# ------------------------------------------------------------------------------- 7. static member
def test_static_member_replacement_fences_old_member_without_rebalance():
    start = [prepare(1000, 0, "member_join", S_OLD), ev(4000, E.JOIN_COMPLETE, 1),
             ev(4010, E.ASSIGNMENT_RECEIVED, 1, S_OLD, data={"members": 1, "static_members": 1})]
    old = md_member(S_OLD, client_id="app-a", host="/10.0.0.9", instance="inst-a",
                    session=45000, rebalance=600000)
    m = run(start + [metadata(4012, 1, [old])])
    first = records(m, OutputKind.REBALANCE)
    assert len(first) == 1
    repl = ev(30000, E.STATIC_MEMBER_REPLACED, member_id=S_NEW,
              data={"old_member_id": S_OLD, "group_instance_id": "inst-a"})
    m.apply(repl)
    assert outs(m)[1:] == [(OutputKind.REMOVAL, removal(
        repl, S_OLD, "static_member_fenced", generation=1, client_id="app-a",
        client_host="/10.0.0.9", group_instance_id="inst-a", session_timeout_ms=45000,
        rebalance_timeout_ms=600000))]
    assert m.m.members == {S_NEW: Member(member_id=S_NEW, client_id="app-a",
                                         client_host="/10.0.0.9", group_instance_id="inst-a",
                                         session_timeout_ms=45000, rebalance_timeout_ms=600000)}
    # The coordinator rewrites the record of the same generation: no rebalance.
    m.apply(metadata(30002, 1, [dict(old, member_id=S_NEW)]))
    m.advance_to(FAR_FUTURE_MS)
    assert records(m, OutputKind.REBALANCE) == first
    assert m.m.state == STABLE and m.m.generation == 1 and m.m.invalid_transitions == 0


# ------------------------------------------------------------------------------- 8. offsets only
def _offsets_only(ts: int, gen: int | None, prev: int | None, outcome: str, members: int) -> dict:
    return rebalance(
        generation=gen, previous_generation=prev, coordinator=None, started_at_ms=None,
        join_completed_at_ms=ts if outcome == "empty" else None,
        completed_at_ms=ts if outcome == "stable" else None, ended_at_ms=ts,
        join_seconds=None, sync_seconds=None, total_seconds=None, trigger="unknown",
        trigger_member=None, reason_text=None, outcome=outcome, members=members,
        removed_members=[])


def test_offsets_only_generations_become_rebalances():
    evs = [metadata(1000, 1, [md_member(C1), md_member(C2)]),
           ev(1500, E.OFFSET_COMMIT, data={"topic": "t", "partition": 0, "offset": 10, "count": 3}),
           metadata(5000, 2, [md_member(C1), md_member(C2)]),
           metadata(6000, 2, [md_member(C1), md_member(C3)]),   # static rewrite, same generation
           metadata(9000, 3, [])]
    m = run(evs)
    m.advance_to(FAR_FUTURE_MS)
    assert outs(m) == [
        (OutputKind.REBALANCE, _offsets_only(1000, 1, None, "stable", 2)),
        (OutputKind.REBALANCE, _offsets_only(5000, 2, 1, "stable", 2)),
        (OutputKind.REBALANCE, _offsets_only(9000, 3, 2, "empty", 0)),
    ]
    # Intermediate states are not visible in the offsets topic: not an invalid transition.
    assert m.m.invalid_transitions == 0
    assert m.m.state == EMPTY and m.m.generation == 3 and m.m.members == {}
    assert m.m.commits_total == 3
    # Seeing the records again (e.g. a re-read partition) emits nothing new.
    m.apply_all([metadata(9500, 3, []), metadata(9600, 2, [md_member(C1)])])
    assert len(records(m, OutputKind.REBALANCE)) == 3


def test_logs_and_offsets_metadata_first_counted_once():
    """The record of a generation can precede the "Assignment received" line (clock skew)."""
    m = run([prepare(1000, 0, "member_join", C1), ev(4000, E.JOIN_COMPLETE, 1),
             metadata(4040, 1, [md_member(C1), md_member(C2)]),
             ev(4050, E.ASSIGNMENT_RECEIVED, 1, C1, data={"members": 2})])
    m.advance_to(FAR_FUTURE_MS)
    [rec] = records(m, OutputKind.REBALANCE)
    assert rec["completed_at_ms"] == 4040 and rec["started_at_ms"] == 1000
    assert rec["join_completed_at_ms"] == 4000 and rec["members"] == 2
    assert m.m.invalid_transitions == 0


def test_logs_and_late_offsets_counted_once():
    m = run([prepare(1000, 0, "member_join", C1), ev(4000, E.JOIN_COMPLETE, 1),
             ev(4050, E.ASSIGNMENT_RECEIVED, 1, C1),
             metadata(4050 + METADATA_GRACE_MS + 500, 1, [md_member(C1)])])
    m.advance_to(FAR_FUTURE_MS)
    [rec] = records(m, OutputKind.REBALANCE)
    assert rec["completed_at_ms"] == 4050 and rec["started_at_ms"] == 1000


def test_offsets_only_then_logs():
    m = run([metadata(1000, 1, [md_member(C1)]),
             prepare(5000, 1, "member_join", C2), ev(8000, E.JOIN_COMPLETE, 2),
             ev(8010, E.ASSIGNMENT_RECEIVED, 2, C1),
             metadata(8011, 2, [md_member(C1), md_member(C2)])])
    m.advance_to(FAR_FUTURE_MS)
    recs = records(m, OutputKind.REBALANCE)
    assert [(r["generation"], r["started_at_ms"], r["completed_at_ms"], r["members"])
            for r in recs] == [(1, None, 1000, 1), (2, 5000, 8010, 2)]
    assert m.m.invalid_transitions == 0


# ------------------------------------------------------------------------------- 8b. other paths
def test_missing_group_empty_line_record_ends_the_rebalance():
    start, first = stable_group([C1])
    md = metadata(10003, 2, [])
    m = run(start + [ev(10000, E.MEMBER_LEFT, member_id=C1), prepare(10000, 1, "member_leave", C1),
                     md])
    assert records(m, OutputKind.REBALANCE)[1] == rebalance(
        generation=2, previous_generation=1, coordinator=1, started_at_ms=10000,
        join_completed_at_ms=10003, completed_at_ms=None, ended_at_ms=10003, join_seconds=0.003,
        sync_seconds=None, total_seconds=0.003, trigger="member_leave", trigger_member=C1,
        reason_text=None, outcome="empty", members=0, removed_members=[C1])
    assert m.m.state == EMPTY and m.m.invalid_transitions == 0


def test_pending_member_expired_removal():
    start, _ = stable_group([C1])
    pend = ev(9000, E.PENDING_MEMBER_EXPIRED, member_id=C2)
    m = run(start + [pend])
    assert records(m, OutputKind.REMOVAL) == [removal(pend, C2, "pending_member_timeout", generation=1,
                                               client_id="consumer-orders-2")]
    assert m.m.unattached_removals == [UnattachedRemoval(C2, 9000, "pending_member_timeout", 9000, None)]


def test_coordinator_failover_supersedes_join_in_progress():
    start, first = stable_group([C1, C2])
    evs = start + [prepare(10000, 1, "member_join", C3),
                   ev(11000, E.GROUP_LOADED, 1, data={"members": 2}, broker=2),
                   ev(11500, E.PREPARE_REBALANCE, 1, data={"trigger": "member_join",
                                                          "trigger_member": C3}, broker=2),
                   ev(14500, E.JOIN_COMPLETE, 2, broker=2),
                   ev(14510, E.ASSIGNMENT_RECEIVED, 2, C1, data={"members": 3}, broker=2)]
    m = settled(run(evs))
    recs = records(m, OutputKind.REBALANCE)
    assert recs[1] == rebalance(
        generation=None, previous_generation=1, coordinator=1, started_at_ms=10000,
        join_completed_at_ms=None, completed_at_ms=None, ended_at_ms=11000, join_seconds=None,
        sync_seconds=None, total_seconds=None, trigger="member_join", trigger_member=C3,
        reason_text=None, outcome="superseded", members=2, removed_members=[])
    assert (recs[2]["coordinator"], recs[2]["generation"], recs[2]["outcome"],
            recs[2]["started_at_ms"]) == (2, 2, "stable", 11500)
    assert m.m.coordinator == 2 and m.m.invalid_transitions == 0


def test_classic_tombstone_after_conversion_to_consumer_is_not_death():
    start, _ = stable_group([C1])
    m = run(start + [ev(20000, E.GROUP_CONVERTED, data={"to": "consumer"}),
                     ev(20001, E.GROUP_TOMBSTONE)])
    assert m.m.protocol == "consumer" and m.m.state != DEAD
    assert records(m, OutputKind.REMOVAL) == [] and len(records(m, OutputKind.REBALANCE)) == 1


# ------------------------------------------------------------------------------- 9. dead
@pytest.mark.parametrize("kind", [E.GROUP_DEAD, E.GROUP_DELETED, E.GROUP_TOMBSTONE])
def test_group_dead_closes_open_rebalance(kind):
    start, first = stable_group([C1, C2])
    reason = f"Removing member {C2} on LeaveGroup; client reason: the consumer is being closed"
    dead = ev(10500, kind, None if kind == E.GROUP_TOMBSTONE else 1)
    m = run(start + [prepare(10000, 1, "member_leave", C2, reason), dead])
    assert outs(m) == [
        (OutputKind.REBALANCE, first),
        (OutputKind.REBALANCE, rebalance(
            generation=None, previous_generation=1, coordinator=1, started_at_ms=10000,
            join_completed_at_ms=None, completed_at_ms=None, ended_at_ms=10500,
            join_seconds=None, sync_seconds=None, total_seconds=None, trigger="member_leave",
            trigger_member=C2, reason_text=reason, outcome="dead", members=0,
            removed_members=[])),
        (OutputKind.REMOVAL, known_removal(dead, C1, "group_deleted", generation=1)),
        (OutputKind.REMOVAL, known_removal(dead, C2, "group_deleted", generation=1)),
    ]
    assert m.m.state == DEAD and m.m.members == {} and m.m.open_rebalance is None
    assert m.m.invalid_transitions == 0
    m.apply(ev(10600, E.GROUP_TOMBSTONE))              # the record after the line: nothing new
    m.apply(ev(10700, E.GROUP_DEAD, 1))
    assert len(outs(m)) == 4 and m.m.invalid_transitions == 0


def test_group_dead_removal_order_survives_json_state():
    """Removals at Dead come in the same order whether or not the state went through JSON
    (to_json sorts the members' keys, so dict insertion order is not preserved)."""
    evs = [metadata(1000, 1, [md_member(C3), md_member(C1), md_member(C2)])]
    dead = ev(5000, E.GROUP_DEAD, 1)
    direct = run(evs + [dead])
    restored = GroupStateMachine(GroupModel.from_json(run(evs).m.to_json()))
    restored.apply(dead)
    assert records(direct, OutputKind.REMOVAL) == records(restored, OutputKind.REMOVAL) == [
        known_removal(dead, c, "group_deleted", generation=1)
        for c in sorted([C1, C2, C3])]


def test_tombstone_then_reincarnation_from_generation_zero():
    start, first = stable_group([C1])
    evs = start + [ev(10000, E.MEMBER_LEFT, member_id=C1),
                   prepare(10000, 1, "member_leave", C1), ev(10001, E.GROUP_EMPTY, 2),
                   metadata(10002, 2, []),
                   ev(200000, E.GROUP_DEAD, 2), ev(200001, E.GROUP_TOMBSTONE)]
    m = run(evs)
    assert [r["outcome"] for r in records(m, OutputKind.REBALANCE)] == ["stable", "empty"]
    assert m.m.state == DEAD and m.m.last_emitted_generation == 2
    # The same group id used again: a new group, generation 0 -> 1, legal transitions only.
    reason = f"Adding new member {C3} with group instance id None"
    m.apply_all([prepare(300000, 0, "member_join", C3, reason), ev(303000, E.JOIN_COMPLETE, 1),
                 ev(303010, E.ASSIGNMENT_RECEIVED, 1, C3),
                 metadata(303012, 1, [md_member(C3)])])
    m.advance_to(FAR_FUTURE_MS)
    assert records(m, OutputKind.REBALANCE)[2:] == [rebalance(
        generation=1, previous_generation=0, coordinator=1, started_at_ms=300000,
        join_completed_at_ms=303000, completed_at_ms=303010, ended_at_ms=303010,
        join_seconds=3.0, sync_seconds=0.01, total_seconds=3.01, trigger="member_join",
        trigger_member=C3, reason_text=reason, outcome="stable", members=1, removed_members=[])]
    assert m.m.invalid_transitions == 0 and records(m, OutputKind.ANOMALY) == []
    assert m.m.state == STABLE and m.m.generation == 1 and set(m.m.members) == {C3}


def test_offsets_only_reincarnation():
    m = run([metadata(1000, 1, [md_member(C1)]), metadata(2000, 2, []),
             ev(3000, E.GROUP_TOMBSTONE), metadata(4000, 0, []), metadata(5000, 1, [md_member(C2)])])
    recs = records(m, OutputKind.REBALANCE)
    assert [(r["generation"], r["outcome"]) for r in recs] == [(1, "stable"), (2, "empty"),
                                                              (1, "stable")]
    assert m.m.invalid_transitions == 0 and m.m.state == STABLE


# ------------------------------------------------------------------------------- 10. invalid
def test_first_event_mid_stream_is_not_an_anomaly():
    m = run([ev(4000, E.JOIN_COMPLETE, 7), ev(4010, E.ASSIGNMENT_RECEIVED, 7, C1, data={"members": 1})])
    assert records(m, OutputKind.ANOMALY) == [] and m.m.invalid_transitions == 0
    [rec] = records(m, OutputKind.REBALANCE)
    assert rec["generation"] == 7 and rec["previous_generation"] == 6
    assert rec["started_at_ms"] is None and rec["trigger"] == "unknown"


def _resync_check(m: GroupStateMachine, t: int, gen: int, invalid: int) -> None:
    """A normal rebalance after the anomaly produces the normal record."""
    before = len(records(m, OutputKind.REBALANCE))
    settled(m, [prepare(t, gen, "member_join", C3), ev(t + 3000, E.JOIN_COMPLETE, gen + 1),
                ev(t + 3010, E.ASSIGNMENT_RECEIVED, gen + 1, C1, data={"members": 2})])
    new = records(m, OutputKind.REBALANCE)[before:]
    assert new == [rebalance(
        generation=gen + 1, previous_generation=gen, coordinator=1, started_at_ms=t,
        join_completed_at_ms=t + 3000, completed_at_ms=t + 3010, ended_at_ms=t + 3010,
        join_seconds=3.0, sync_seconds=0.01, total_seconds=3.01, trigger="member_join",
        trigger_member=C3, reason_text=None, outcome="stable", members=2, removed_members=[])]
    assert m.m.invalid_transitions == invalid


def test_join_complete_without_prepare_is_counted_and_recovers():
    start, first = stable_group([C1, C2])
    join = ev(20000, E.JOIN_COMPLETE, 2)
    m = settled(run(start + [join, ev(20050, E.ASSIGNMENT_RECEIVED, 2, C1, data={"members": 2})]))
    assert outs(m) == [
        (OutputKind.REBALANCE, first),
        (OutputKind.ANOMALY, anomaly(join, STABLE, COMPLETING_REBALANCE)),
        (OutputKind.REBALANCE, rebalance(
            generation=2, previous_generation=1, coordinator=1, started_at_ms=None,
            join_completed_at_ms=20000, completed_at_ms=20050, ended_at_ms=20050,
            join_seconds=None, sync_seconds=0.05, total_seconds=None, trigger="unknown",
            trigger_member=None, reason_text=None, outcome="stable", members=2,
            removed_members=[])),
    ]
    assert m.m.invalid_transitions == 1
    _resync_check(m, 30000, 2, invalid=1)


def test_assignment_received_in_empty_is_counted_and_recovers():
    start, _ = stable_group([C1])
    evs = start + [ev(10000, E.MEMBER_LEFT, member_id=C1), prepare(10000, 1, "member_leave", C1),
                   ev(10001, E.GROUP_EMPTY, 2)]
    m = run(evs)
    assert m.m.state == EMPTY and m.m.invalid_transitions == 0
    n = len(outs(m))
    assign = ev(20000, E.ASSIGNMENT_RECEIVED, 3, C2, data={"members": 1})
    settled(m, [assign])
    # (the settling also passes the cross-check of generation 2, whose record this test leaves out)
    assert [o for o in outs(m)[n:] if o[1].get("kind") != "source_mismatch"] == [
        (OutputKind.ANOMALY, anomaly(assign, EMPTY, STABLE)),
        (OutputKind.REBALANCE, rebalance(
            generation=3, previous_generation=2, coordinator=1, started_at_ms=None,
            join_completed_at_ms=None, completed_at_ms=20000, ended_at_ms=20000,
            join_seconds=None, sync_seconds=None, total_seconds=None, trigger="unknown",
            trigger_member=None, reason_text=None, outcome="stable", members=1,
            removed_members=[])),
    ]
    assert m.m.state == STABLE and m.m.generation == 3 and m.m.invalid_transitions == 1
    _resync_check(m, 30000, 3, invalid=1)


def test_prepare_twice_is_counted_and_recovers():
    start, first = stable_group([C1, C2])
    p1 = prepare(10000, 1, "member_join", C3)
    p2 = prepare(10100, 1, "member_join", C4)
    m = settled(run(start + [p1, p2, ev(13100, E.JOIN_COMPLETE, 2),
                     ev(13110, E.ASSIGNMENT_RECEIVED, 2, C1, data={"members": 4})]))
    assert outs(m) == [
        (OutputKind.REBALANCE, first),
        (OutputKind.REBALANCE, rebalance(
            generation=None, previous_generation=1, coordinator=1, started_at_ms=10000,
            join_completed_at_ms=None, completed_at_ms=None, ended_at_ms=10100,
            join_seconds=None, sync_seconds=None, total_seconds=None, trigger="member_join",
            trigger_member=C3, reason_text=None, outcome="superseded", members=2,
            removed_members=[])),
        (OutputKind.ANOMALY, anomaly(p2, PREPARING_REBALANCE, PREPARING_REBALANCE)),
        (OutputKind.REBALANCE, rebalance(
            generation=2, previous_generation=1, coordinator=1, started_at_ms=10100,
            join_completed_at_ms=13100, completed_at_ms=13110, ended_at_ms=13110,
            join_seconds=3.0, sync_seconds=0.01, total_seconds=3.01, trigger="member_join",
            trigger_member=C4, reason_text=None, outcome="stable", members=4,
            removed_members=[])),
    ]
    assert m.m.invalid_transitions == 1
    _resync_check(m, 30000, 2, invalid=1)


# ------------------------------------------------------------------------------- 10b. randomized
REBALANCE_FIELDS = ("group", "protocol", "generation", "previous_generation", "coordinator",
                    "started_at_ms", "join_completed_at_ms", "completed_at_ms", "join_seconds",
                    "sync_seconds", "total_seconds", "trigger", "trigger_member", "reason_text",
                    "outcome", "members")
REMOVAL_FIELDS = ("group", "member_id", "client_id", "client_host", "group_instance_id",
                  "removed_at_ms", "cause", "root_cause", "evidence", "session_timeout_ms",
                  "rebalance_timeout_ms")
RANDOM_MEMBERS = [C1, C2, C3, S_OLD, S_NEW, K1, K2, "", "plain"]


def _random_event(rng: random.Random, ts: int) -> E.Event:
    kind = rng.choice(sorted(E.ALL_KINDS))
    mid = rng.choice(RANDOM_MEMBERS + [None])
    gen = rng.choice([None, 0, 1, 2, 3, 4, 5, 6])
    maybe = lambda v: v if rng.random() < 0.8 else None  # noqa: E731
    data: dict[str, Any] = {}
    if kind == E.PREPARE_REBALANCE:
        data = {"trigger": rng.choice(list(E.TRIGGERS) + [None]), "trigger_member": maybe(mid)}
    elif kind == E.ASSIGNMENT_RECEIVED:
        data = {"members": rng.choice([None, 0, 1, 2, 3])}
    elif kind in (E.MEMBER_LEFT, E.CONSUMER_MEMBER_LEFT):
        data = {"client_reason": rng.choice([None, "the consumer is being closed",
                                             "consumer poll timeout has expired."])}
    elif kind in (E.MEMBERS_NOT_JOINED, E.MEMBERS_NOT_SYNCED):
        data = {"member_ids": maybe(rng.sample(RANDOM_MEMBERS, rng.randint(0, 3)))}
    elif kind == E.STATIC_MEMBER_REPLACED:
        data = {"old_member_id": rng.choice(RANDOM_MEMBERS + [None]),
                "group_instance_id": maybe("inst-a")}
    elif kind == E.GROUP_METADATA:
        members = []
        for m_id in rng.sample(RANDOM_MEMBERS, rng.randint(0, 4)):
            members.append({"member_id": m_id, "client_id": maybe("cid"),
                            "client_host": maybe("/10.1.1.1"),
                            "group_instance_id": rng.choice([None, "inst-a"]),
                            "session_timeout_ms": maybe(10000),
                            "rebalance_timeout_ms": maybe(300000)})
        data = {"protocol_type": maybe("consumer"), "protocol": maybe("range"),
                "leader": maybe(mid), "members": rng.choice([members, members, None])}
    elif kind in (E.CONSUMER_MEMBER_JOINED, E.GROUP_CONVERTED):
        data = {"protocol": rng.choice(["consumer", "classic"]),
                "to": rng.choice(["consumer", "classic", None]),
                "group_instance_id": maybe("inst-b")}
    elif kind == E.CONSUMER_MEMBER_FENCED:
        data = {"fence_reason": rng.choice(["session", "rebalance", "join", "sync", None, "x"])}
    elif kind in (E.CG_EPOCH, E.CG_MEMBER, E.CG_TARGET_EPOCH, E.CG_TARGET_MEMBER,
                  E.CG_MEMBER_ASSIGNMENT, E.CG_OTHER):
        data = {"tombstone": rng.random() < 0.2, "member_epoch": rng.choice([None, 0, 1, 2, 3]),
                "state": rng.choice([None, 0, 1, 2]), "client_id": maybe("cid"),
                "client_host": maybe("/10.2.2.2"), "rebalance_timeout_ms": maybe(300000),
                "session_timeout_ms": maybe(45000), "instance_id": maybe(None)}
    elif kind == E.OFFSET_COMMIT:
        data = {"topic": "t", "partition": rng.randint(0, 3), "offset": rng.randint(0, 99),
                "commit_ts_ms": maybe(ts), "count": rng.choice([None, 1, 5])}
    elif kind == E.GROUP_LOADED:
        data = {"members": rng.choice([None, 0, 2])}
    return ev(ts, kind, gen, mid, rng.choice([None, "Downgrade group g", "some reason"]), data,
              broker=rng.choice([None, 1, 2, 3]))


def _check_contract(outputs: list[tuple[str, dict]]) -> None:
    for kind, rec in outputs:
        assert kind in (OutputKind.REBALANCE, OutputKind.REMOVAL, OutputKind.ANOMALY)
        if kind == OutputKind.REBALANCE:
            for f in REBALANCE_FIELDS:
                assert f in rec, f
            assert rec["trigger"] in E.TRIGGERS, rec
            assert rec["outcome"] in OUTCOMES, rec
            for f in ("join_seconds", "sync_seconds", "total_seconds"):
                assert rec[f] is None or (isinstance(rec[f], float) and rec[f] >= 0), rec
            assert rec["members"] is None or rec["members"] >= 0
            assert isinstance(rec["removed_members"], list)
        elif kind == OutputKind.REMOVAL:
            for f in REMOVAL_FIELDS:
                assert f in rec, f
            assert rec["cause"] in CAUSES, rec
            assert isinstance(rec["removed_at_ms"], int)
        else:
            assert rec["kind"] in ("invalid_transition", "source_mismatch")
        json.dumps(rec)                                # the sink writes JSON lines


@pytest.mark.parametrize("seed", [1, 7, 42, 2024, 99991])
def test_random_events_never_raise_and_keep_the_contract(seed):
    rng = random.Random(seed)
    events = [_random_event(rng, rng.randint(0, 60000)) for _ in range(3000)]
    m = run(events)
    m.advance_to(FAR_FUTURE_MS)
    _check_contract(outs(m))
    model = m.m
    assert model.rebalances_total == len(records(m, OutputKind.REBALANCE))
    assert model.removals_total == len(records(m, OutputKind.REMOVAL))
    anomalies = records(m, OutputKind.ANOMALY)
    assert model.invalid_transitions == len([a for a in anomalies if a["kind"] == "invalid_transition"])
    assert model.source_mismatches == len([a for a in anomalies if a["kind"] == "source_mismatch"])
    assert GroupModel.from_json(model.to_json()) == model
    snapshot(model)
    # The same events in batches with the model going through JSON in between (as in Spark).
    ordered = sorted(events, key=E.Event.sort_key)
    outputs: list = []
    state = GroupModel(cluster=CLUSTER, group=G).to_json()
    i = 0
    while i < len(ordered):
        n = rng.randint(1, 200)
        part = GroupStateMachine(GroupModel.from_json(state))
        part.apply_all(ordered[i:i + n])
        outputs.extend(outs(part))
        state = part.m.to_json()
        i += n
    last = GroupStateMachine(GroupModel.from_json(state))
    last.advance_to(FAR_FUTURE_MS)
    outputs.extend(outs(last))
    assert outputs == outs(m)
    assert last.m.to_json() == model.to_json()


# ------------------------------------------------------------------------------- 11. KIP-848
def _consumer_start() -> tuple[list[E.Event], dict]:
    evs = [
        ev(1000, E.CONSUMER_MEMBER_JOINED, member_id=K1, data={"protocol": "consumer"}),
        ev(1001, E.GROUP_EPOCH_BUMPED, 1),
        ev(1001, E.CG_MEMBER, member_id=K1, data={
            "client_id": "app-1", "client_host": "/10.0.0.5", "instance_id": None,
            "rebalance_timeout_ms": 300000, "session_timeout_ms": None}),
        ev(1001, E.CG_EPOCH, 1),
        ev(1002, E.TARGET_ASSIGNMENT, 1),
        ev(1002, E.CG_TARGET_EPOCH, 1),
        ev(1010, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={"member_epoch": 1, "state": 0}),
    ]
    rec = rebalance(
        protocol="consumer", generation=1, previous_generation=None, coordinator=1,
        started_at_ms=1001, join_completed_at_ms=None, assigned_at_ms=1002, completed_at_ms=1010, ended_at_ms=1010,
        join_seconds=None, sync_seconds=None, total_seconds=0.009, trigger="member_join",
        trigger_member=K1, reason_text=None, outcome="stable", members=1, removed_members=[])
    return evs, rec


def test_kip848_first_member_joins():
    evs, rec = _consumer_start()
    m = run(evs[:-1])
    assert outs(m) == [] and m.m.state == "Reconciling" and m.m.protocol == "consumer"
    m.apply(evs[-1])
    assert outs(m) == [(OutputKind.REBALANCE, rec)]
    assert m.m.state == STABLE and m.m.generation == 1 and m.m.open_rebalance is None
    assert m.m.members[K1].client_id == "app-1" and m.m.members[K1].member_epoch == 1


def test_kip848_assignment_phase_ends_at_the_first_target_assignment_of_the_epoch():
    """assigned_at_ms: the earlier of the "Computed a new target assignment" line and the type-6
    record of the open epoch; a target assignment of another epoch does not count."""
    evs, rec = _consumer_start()
    late_line = [e if e.kind != E.TARGET_ASSIGNMENT else ev(1004, E.TARGET_ASSIGNMENT, 1) for e in evs]
    assert records(run(late_line), OutputKind.REBALANCE) == [rec]          # the record at 1002 wins
    stale = [e for e in evs if e.kind not in (E.TARGET_ASSIGNMENT, E.CG_TARGET_EPOCH)]
    stale.insert(-1, ev(1003, E.CG_TARGET_EPOCH, 0))
    assert records(run(stale), OutputKind.REBALANCE) == [{**rec, "assigned_at_ms": None}]


def _consumer_two_members() -> tuple[list[E.Event], list[dict]]:
    evs, rec1 = _consumer_start()
    evs += [
        ev(5000, E.CONSUMER_MEMBER_JOINED, member_id=K2, data={"protocol": "consumer"}),
        ev(5001, E.GROUP_EPOCH_BUMPED, 2),
        ev(5001, E.CG_MEMBER, member_id=K2, data={"client_id": "app-2", "client_host": "/10.0.0.6"}),
        ev(5001, E.CG_MEMBER_ASSIGNMENT, member_id=K2, data={"member_epoch": 2, "state": 2}),
        ev(5010, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={"member_epoch": 2, "state": 0}),
        ev(5020, E.CG_MEMBER_ASSIGNMENT, member_id=K2, data={"member_epoch": 2, "state": 0}),
    ]
    rec2 = rebalance(
        protocol="consumer", generation=2, previous_generation=1, coordinator=1,
        started_at_ms=5001, join_completed_at_ms=None, assigned_at_ms=None, completed_at_ms=5020, ended_at_ms=5020,
        join_seconds=None, sync_seconds=None, total_seconds=0.019, trigger="member_join",
        trigger_member=K2, reason_text=None, outcome="stable", members=2, removed_members=[])
    return evs, [rec1, rec2]


@pytest.mark.parametrize("fence_reason,cause,trigger", [
    ("session", "heartbeat_expiry", "heartbeat_expiry"),
    ("rebalance", "rebalance_timeout", "rebalance_timeout"),
    ("sync", "sync_timeout", "rebalance_timeout"),
])
def test_kip848_fence_then_bump(fence_reason, cause, trigger):
    evs, recs = _consumer_two_members()
    fence = ev(60000, E.CONSUMER_MEMBER_FENCED, member_id=K2, data={"fence_reason": fence_reason})
    evs += [fence, ev(60000, E.GROUP_EPOCH_BUMPED, 3),
            ev(60001, E.CG_MEMBER_ASSIGNMENT, member_id=K2, data={"tombstone": True}),
            ev(60001, E.CG_MEMBER, member_id=K2, data={"tombstone": True}),
            ev(60010, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={"member_epoch": 3, "state": 0})]
    m = run(evs)
    assert outs(m) == [
        (OutputKind.REBALANCE, recs[0]), (OutputKind.REBALANCE, recs[1]),
        (OutputKind.REMOVAL, removal(fence, K2, cause, generation=2, protocol="consumer",
                              client_id="app-2", client_host="/10.0.0.6")),
        (OutputKind.REBALANCE, rebalance(
            protocol="consumer", generation=3, previous_generation=2, coordinator=1,
            started_at_ms=60000, join_completed_at_ms=None, assigned_at_ms=None, completed_at_ms=60010,
            ended_at_ms=60010, join_seconds=None, sync_seconds=None, total_seconds=0.01,
            trigger=trigger, trigger_member=K2, reason_text=None, outcome="stable", members=1,
            removed_members=[K2])),
    ]
    assert set(m.m.members) == {K1} and m.m.state == STABLE


def test_kip848_last_member_leaves():
    evs, rec1 = _consumer_start()
    left = ev(90000, E.CONSUMER_MEMBER_LEFT, member_id=K1)
    evs += [left, ev(90000, E.GROUP_EPOCH_BUMPED, 2),
            ev(90001, E.CG_MEMBER, member_id=K1, data={"tombstone": True}),
            ev(90001, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={"tombstone": True}),
            ev(90001, E.CG_EPOCH, 2)]
    m = run(evs)
    m.advance_to(FAR_FUTURE_MS)
    assert outs(m) == [
        (OutputKind.REBALANCE, rec1),
        (OutputKind.REMOVAL, removal(left, K1, "leave_group", generation=1, protocol="consumer",
                              client_id="app-1", client_host="/10.0.0.5",
                              rebalance_timeout_ms=300000)),
        (OutputKind.REBALANCE, rebalance(
            protocol="consumer", generation=2, previous_generation=1, coordinator=1,
            started_at_ms=90000, join_completed_at_ms=None, assigned_at_ms=None, completed_at_ms=None,
            ended_at_ms=90000, join_seconds=None, sync_seconds=None, total_seconds=0.0,
            trigger="member_leave", trigger_member=K1, reason_text=None, outcome="empty",
            members=0, removed_members=[K1])),
    ]
    assert m.m.state == EMPTY and m.m.members == {} and m.m.open_rebalance is None


@pytest.mark.parametrize("bump_ms", [90001, None])
def test_kip848_last_leave_epoch_starts_at_its_bumped_line(bump_ms):
    """4.0 logs "Bumped group epoch" a millisecond after the last member's leave (the epoch starts
    there); 4.4 logs none, and the leave dates the epoch once METADATA_GRACE_MS has passed."""
    evs, _ = _consumer_start()
    evs += [ev(90000, E.CONSUMER_MEMBER_LEFT, member_id=K1),
            ev(90000, E.CG_MEMBER, member_id=K1, data={"tombstone": True}),
            ev(90000, E.CG_EPOCH, 2)]
    m = run(evs)
    rebalances = lambda: [r for k, r in outs(m) if k == OutputKind.REBALANCE]  # noqa: E731
    assert [r["generation"] for r in rebalances()] == [1]    # the offsets records do not close the wait
    if bump_ms is not None:
        m.apply(ev(bump_ms, E.GROUP_EPOCH_BUMPED, 2))
    else:
        m.advance_to(90000 + METADATA_GRACE_MS - 1)
        assert [r["generation"] for r in rebalances()] == [1]
        assert m.next_deadline_ms() == 90000 + METADATA_GRACE_MS
        m.advance_to(90000 + METADATA_GRACE_MS + 1)
    last = rebalances()[-1]
    start = bump_ms or 90000
    assert (last["generation"], last["outcome"], last["started_at_ms"], last["ended_at_ms"],
            last["completed_at_ms"], last["members"]) == (2, "empty", start, start, None, 0)
    assert m.m.state == EMPTY and m.m.open_rebalance is None


def test_kip848_bump_before_convergence_supersedes():
    evs, rec1 = _consumer_start()
    evs += [
        ev(5000, E.CONSUMER_MEMBER_JOINED, member_id=K2, data={"protocol": "consumer"}),
        ev(5001, E.GROUP_EPOCH_BUMPED, 2),
        ev(5001, E.CG_MEMBER_ASSIGNMENT, member_id=K2, data={"member_epoch": 2, "state": 2}),
        ev(5003, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={"member_epoch": 2, "state": 1}),
        ev(5500, E.GROUP_EPOCH_BUMPED, 3),                 # e.g. partitions added
        ev(5510, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={"member_epoch": 3, "state": 0}),
        ev(5520, E.CG_MEMBER_ASSIGNMENT, member_id=K2, data={"member_epoch": 3, "state": 0}),
    ]
    m = run(evs)
    assert records(m, OutputKind.REBALANCE) == [
        rec1,
        rebalance(
            protocol="consumer", generation=2, previous_generation=1, coordinator=1,
            started_at_ms=5001, join_completed_at_ms=None, assigned_at_ms=None, completed_at_ms=None,
            ended_at_ms=5500, join_seconds=None, sync_seconds=None, total_seconds=None,
            trigger="member_join", trigger_member=K2, reason_text=None, outcome="superseded",
            members=2, removed_members=[]),
        rebalance(
            protocol="consumer", generation=3, previous_generation=2, coordinator=1,
            started_at_ms=5500, join_completed_at_ms=None, assigned_at_ms=None, completed_at_ms=5520,
            ended_at_ms=5520, join_seconds=None, sync_seconds=None, total_seconds=0.02,
            trigger="group_epoch_bump", trigger_member=None, reason_text=None, outcome="stable",
            members=2, removed_members=[]),
    ]
    assert m.m.invalid_transitions == 0


# ------------------------------------------------------------------------------- 12. JSON
def _mixed_sequence() -> list[E.Event]:
    start, _ = stable_group([C1, C2, C3])
    return start + [
        ev(8000, E.OFFSET_COMMIT, data={"topic": "t", "partition": 1, "offset": 7, "count": 2}),
        ev(10000, E.MEMBER_FAILED, member_id=C3),
        prepare(10000, 1, "heartbeat_expiry", C3), ev(13000, E.JOIN_COMPLETE, 2),
        ev(13010, E.ASSIGNMENT_RECEIVED, 2, C1), metadata(13011, 2, [md_member(C1), md_member(C2)]),
        ev(20000, E.STATIC_MEMBER_REPLACED, member_id=C4, data={"old_member_id": C2}),
        prepare(30000, 2, "member_join", C3), ev(33000, E.JOIN_COMPLETE, 3),
        prepare(33005, 3, "member_join", C4),
        ev(33100, E.MEMBERS_NOT_JOINED, data={"member_ids": [C4]}),
        ev(33100, E.JOIN_COMPLETE, 4), ev(33200, E.ASSIGNMENT_RECEIVED, 4, C1),
        ev(40000, E.MEMBER_LEFT, member_id=C1), prepare(40000, 4, "member_leave", C1),
        ev(40001, E.GROUP_EMPTY, 5), metadata(40002, 5, []),
        ev(50000, E.GROUP_TOMBSTONE),
        ev(60000, E.CONSUMER_MEMBER_JOINED, member_id=K1),
        ev(60001, E.GROUP_EPOCH_BUMPED, 1),
        ev(60005, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={"member_epoch": 1, "state": 1}),
        ev(61000, E.CONSUMER_MEMBER_JOINED, member_id=K2),
    ]


def test_model_json_round_trip_at_every_step():
    events = _mixed_sequence()
    m = new_machine()
    seen_open = seen_unattached = seen_pending = False
    for e in sorted(events, key=E.Event.sort_key):
        m.apply(e)
        text = m.m.to_json()
        back = GroupModel.from_json(text)
        assert back == m.m
        assert back.to_json() == text
        assert asdict(back) == asdict(m.m)
        seen_open |= m.m.open_rebalance is not None and bool(m.m.open_rebalance.removals)
        seen_unattached |= bool(m.m.unattached_removals)
        seen_pending |= m.m.pending_consumer_trigger is not None
    assert seen_open and seen_unattached and seen_pending   # the sequence exercised them
    assert m.m.protocol == "consumer" and set(m.m.members) == {K1, K2}


def test_state_through_json_between_every_event_gives_same_outputs():
    events = sorted(_mixed_sequence(), key=E.Event.sort_key)
    whole = run(events)
    whole.advance_to(FAR_FUTURE_MS)
    outputs: list = []
    state = GroupModel(cluster=CLUSTER, group=G).to_json()
    for e in events:
        part = GroupStateMachine(GroupModel.from_json(state))
        part.apply(e)
        outputs.extend(outs(part))
        state = part.m.to_json()
    last = GroupStateMachine(GroupModel.from_json(state))
    last.advance_to(FAR_FUTURE_MS)
    outputs.extend(outs(last))
    assert outputs == outs(whole)
    assert last.m.to_json() == whole.m.to_json()
    assert [r["outcome"] for r in records(whole, OutputKind.REBALANCE)] == [
        "stable", "stable", "superseded", "stable", "empty"]
    assert [r["cause"] for r in records(whole, OutputKind.REMOVAL)] == [
        "heartbeat_expiry", "static_member_fenced", "rebalance_timeout", "leave_group"]


# ------------------------------------------------------------------------------- 13. order
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_shuffled_events_give_identical_outputs(seed):
    events = _mixed_sequence()
    reference = run(list(events))
    reference.advance_to(FAR_FUTURE_MS)
    shuffled = list(events)
    random.Random(seed).shuffle(shuffled)
    other = run(shuffled)
    other.advance_to(FAR_FUTURE_MS)
    assert outs(other) == outs(reference)
    assert other.m.to_json() == reference.m.to_json()


def test_same_millisecond_log_sorts_before_offsets_record():
    """The 2.7 assignment line and its metadata record share a millisecond."""
    p = prepare(1000, 0, "member_join", C1)
    j = ev(4000, E.JOIN_COMPLETE, 1)
    md = metadata(4050, 1, [md_member(C1)])
    a = ev(4050, E.ASSIGNMENT_RECEIVED, 1, C1)
    m = run([md, a, j, p])                              # given in the wrong order
    [rec] = records(m, OutputKind.REBALANCE)
    assert rec["completed_at_ms"] == 4050 and rec["members"] == 1 and rec["started_at_ms"] == 1000
    assert m.m.invalid_transitions == 0


# --- a record that sorts before its log line is not a second rebalance ------------------------

def test_epoch_record_before_its_bump_line_is_one_rebalance():
    m = run([
        ev(1000, E.CONSUMER_MEMBER_JOINED, member_id="A", data={"protocol": "consumer"}),
        ev(1000, E.CG_EPOCH, 1),                      # the record is a millisecond early ...
        ev(1001, E.GROUP_EPOCH_BUMPED, 1),            # ... its log line comes after it
        ev(1005, E.CG_MEMBER_ASSIGNMENT, member_id="A", data={"member_epoch": 1, "state": 0}),
    ])
    [r] = records(m, OutputKind.REBALANCE)
    assert (r["protocol"], r["generation"], r["outcome"], r["started_at_ms"], r["completed_at_ms"]) == \
        ("consumer", 1, "stable", 1000, 1005)


def test_empty_metadata_record_before_its_is_now_empty_line_is_one_rebalance():
    m = run([
        ev(1000, E.PREPARE_REBALANCE, 0, reason="Adding new member a-1", data={"trigger": "member_join"}),
        ev(4000, E.JOIN_COMPLETE, 1),
        ev(4001, E.ASSIGNMENT_RECEIVED, 1, data={"members": 1}),
        ev(9000, E.PREPARE_REBALANCE, 1, data={"trigger": "member_leave"}),
        metadata(9000, 2, []),                        # the empty record is written ...
        ev(9001, E.GROUP_EMPTY, 2),                   # ... before this line's millisecond
    ])
    rebalances = records(m, OutputKind.REBALANCE)
    assert [(r["generation"], r["outcome"]) for r in rebalances] == [(1, "stable"), (2, "empty")]
    assert m.m.invalid_transitions == 0


@pytest.mark.parametrize("line_first", [True, False])
def test_kip848_epoch_bump_with_a_new_metadata_hash_is_a_metadata_change(line_first):
    """4.1+: the epoch record and the "Bumped group epoch" line carry the group's metadata hash (its
    subscribed topics' partitions). A bump no member change explains, whose hash differs from the
    previous epoch's (a partition increase), is metadata_change; an unchanged hash stays
    group_epoch_bump. Whichever of the line and the record comes first."""
    def bump(ts: int, epoch: int, h: int) -> list[E.Event]:
        pair = [ev(ts, E.GROUP_EPOCH_BUMPED, epoch, data={"metadata_hash": h}),
                ev(ts, E.CG_EPOCH, epoch, data={"metadata_hash": h})]
        return pair if line_first else pair[::-1]

    evs, _ = _consumer_start()
    evs = [e for e in evs if e.kind not in (E.GROUP_EPOCH_BUMPED, E.CG_EPOCH)]
    evs[1:1] = bump(1001, 1, 100)
    evs += bump(20000, 2, 200) + [ev(20002, E.TARGET_ASSIGNMENT, 2),
                                  ev(20010, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={"member_epoch": 2, "state": 0})]
    evs += bump(30000, 3, 200) + [ev(30002, E.TARGET_ASSIGNMENT, 3),
                                  ev(30010, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={"member_epoch": 3, "state": 0})]
    m = run(evs)
    assert [(r["generation"], r["trigger"]) for k, r in m.outputs if k == OutputKind.REBALANCE] == [
        (1, "member_join"), (2, "metadata_change"), (3, "group_epoch_bump")]
    assert m.m.metadata_hash == 200


# ------------------------------------------------------------------------------- 14. components
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_dropped_machine_is_freed_without_the_cyclic_collector(protocol):
    """The protocol components reach their machine through a weak proxy (core.py): a machine is
    freed by reference counting as soon as its turn drops it, not left as a reference cycle for
    the cyclic garbage collector (a Spark worker runs one machine per group and turn)."""
    evs = ([prepare(1000, 0, "member_join", C1), ev(1010, E.JOIN_COMPLETE, 1),
            ev(1020, E.ASSIGNMENT_RECEIVED, 1, C1), ev(2000, E.GROUP_DEAD)] if protocol == "classic"
           else _consumer_start()[0] + [ev(2000, E.CG_EPOCH, data={"tombstone": True})])
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        machine = run(evs)
        assert records(machine, OutputKind.REBALANCE) and machine.m.state == DEAD
        dropped = weakref.ref(machine)
        del machine
        assert dropped() is None
    finally:
        if was_enabled:
            gc.enable()


def test_a_member_joining_again_is_not_the_trigger_of_the_next_bump():
    """Seen on a real 4.2.2 share group whose coordinator was killed: the new coordinator logged
    "Member B joins the share group" for a member already in the group (its client rejoined at epoch
    0) and bumped nothing; the next bump, 7 s later, was A's leave. It is member_leave, not B's join."""
    evs, _ = _consumer_two_members()
    evs += [ev(9000, E.CONSUMER_MEMBER_JOINED, member_id=K2, data={"protocol": "consumer"}),
            ev(16000, E.CONSUMER_MEMBER_LEFT, member_id=K1),
            ev(16001, E.GROUP_EPOCH_BUMPED, 3),
            ev(16010, E.CG_MEMBER_ASSIGNMENT, member_id=K2, data={"member_epoch": 3, "state": 0})]
    m = run(evs)
    assert [(r["generation"], r["trigger"], r["trigger_member"]) for k, r in m.outputs if k == OutputKind.REBALANCE] \
        == [(1, "member_join", K1), (2, "member_join", K2), (3, "member_leave", K1)]


@pytest.mark.parametrize("group_type", ["consumer", "share"])
@pytest.mark.parametrize("with_line", [True, False])
def test_a_member_fenced_before_it_reached_the_epoch_does_not_complete_it(group_type, with_line):
    """K2 joins (epoch 2) and is fenced before it reached 2, K1 STABLE at 2 by then. Kafka writes K2's
    tombstones and epoch 3 in one batch: 2 never completed, it is superseded by 3 (as a fence line
    and the epoch's target-assignment line say). Seen on the 4.2.2 and 4.4.0 share captures, where
    the records made it `stable` at the tombstone and the logs `superseded`."""
    kind = {"group_type": group_type}
    evs = [
        ev(1000, E.CONSUMER_MEMBER_JOINED, member_id=K1, data={**kind, "protocol": group_type}),
        ev(1001, E.GROUP_EPOCH_BUMPED, 1),
        ev(1001, E.CG_EPOCH, 1, data=kind),
        ev(1010, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={**kind, "member_epoch": 1, "state": 0,
                                                             "state_name": "STABLE"}),
        ev(5000, E.CONSUMER_MEMBER_JOINED, member_id=K2, data={**kind, "protocol": group_type}),
        ev(5001, E.GROUP_EPOCH_BUMPED, 2),
        ev(5001, E.CG_EPOCH, 2, data=kind),
        ev(5001, E.CG_MEMBER_ASSIGNMENT, member_id=K2, data={**kind, "member_epoch": 2, "state": 2,
                                                             "state_name": "UNRELEASED_PARTITIONS"}),
        ev(5010, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={**kind, "member_epoch": 2, "state": 0,
                                                             "state_name": "STABLE"}),
        ev(60001, E.CG_MEMBER_ASSIGNMENT, member_id=K2, data={**kind, "tombstone": True}),
        ev(60001, E.CG_MEMBER, member_id=K2, data={**kind, "tombstone": True}),
        ev(60001, E.CG_EPOCH, 3, data=kind),
        ev(60500, E.TARGET_ASSIGNMENT, 3),
        ev(60510, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={**kind, "member_epoch": 3, "state": 0,
                                                              "state_name": "STABLE"}),
    ]
    if with_line:
        evs.append(ev(60000, E.CONSUMER_MEMBER_FENCED, member_id=K2, data={**kind, "fence_reason": "session"}))
    m = run(evs)
    got = {r["generation"]: r for r in records(m, OutputKind.REBALANCE)}
    assert (got[2]["outcome"], got[2]["completed_at_ms"], got[2]["members"]) == ("superseded", None, 1)
    assert (got[3]["outcome"], got[3]["completed_at_ms"], got[3]["members"]) == ("stable", 60510, 1)
    assert got[2]["removed_members"] == ([K2] if with_line else [])    # the fence line's removal
    assert m.m.state == STABLE and set(m.m.members) == {K1}


@pytest.mark.parametrize("group_type", ["consumer", "share"])
def test_a_member_at_an_epoch_the_input_did_not_show_starts_it(group_type):
    """Logs alone: K2 is fenced, and the bump to 3 shows in no line of the input (a fence logs no
    "Bumped" line; the target-assignment line is missing). A member's epoch never passes the group's:
    K1's "new assignment state" at 3 starts epoch 3 (trigger: the fence), which completes there.
    Before, K1's report matched no open epoch and epoch 3 had no record at all."""
    kind = {"group_type": group_type}

    def state(ts: int, member: str, epoch: int, name: str) -> E.Event:
        return ev(ts, E.MEMBER_ASSIGNMENT_STATE, member_id=member,
                  data={**kind, "member_epoch": epoch, "previous_member_epoch": epoch - 1, "state_name": name})

    evs = [
        ev(1000, E.CONSUMER_MEMBER_JOINED, member_id=K1, data={**kind, "protocol": group_type}),
        ev(1001, E.GROUP_EPOCH_BUMPED, 1),
        state(1010, K1, 1, "STABLE"),
        ev(5000, E.CONSUMER_MEMBER_JOINED, member_id=K2, data={**kind, "protocol": group_type}),
        ev(5001, E.GROUP_EPOCH_BUMPED, 2),
        state(5002, K2, 2, "STABLE"),
        state(5010, K1, 2, "STABLE"),
        ev(60000, E.CONSUMER_MEMBER_FENCED, member_id=K2, data={**kind, "fence_reason": "session"}),
        state(60510, K1, 3, "STABLE"),
    ]
    m = run(evs)
    got = {r["generation"]: r for r in records(m, OutputKind.REBALANCE)}
    assert (got[2]["outcome"], got[2]["completed_at_ms"]) == ("stable", 5010)
    assert (got[3]["outcome"], got[3]["trigger"], got[3]["trigger_member"], got[3]["started_at_ms"],
            got[3]["completed_at_ms"], got[3]["members"]) == ("stable", "heartbeat_expiry", K2, 60510, 60510, 1)
    assert m.m.state == STABLE and m.m.generation == 3


def test_the_coordinator_changes_keep_time_order_when_an_old_coordinators_line_comes_late():
    from state.machine.core import COORDINATORS_KEPT, note_coordinator
    changes: list[list[int]] = []
    for ts, broker in [(100, 2), (150, 2), (300, 1), (120, 2), (110, 2), (400, 1), (500, 3), (450, 1)]:
        note_coordinator(changes, ts, broker)
    assert changes == [[100, 2], [300, 1], [500, 3]]
    note_coordinator(changes, 200, 3)      # a line of 3 between the lines of 2 and 1
    note_coordinator(changes, 90, 1)
    assert changes == [[90, 1], [100, 2], [200, 3], [300, 1], [500, 3]][-COORDINATORS_KEPT:]
