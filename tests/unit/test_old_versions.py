"""Kafka 1.1-2.0 brokers: no reason on "Preparing to rebalance", LeaveGroup only at DEBUG.

The state machine infers what the old wording leaves out (state/machine/base.py `start_rebalance`,
`_reconcile_membership`):

- a removal or a new member id logged just before a reason-less "Preparing to rebalance" is its
  trigger;
- a member of the previous generation that is missing from the next one without any removal line
  left (LeaveGroup) or, if the JOIN phase lasted its rebalance timeout, was dropped at it;
- a reason-less rebalance after which someone left is `member_leave`, else one after which someone
  new is in is `member_join`.

Unit tests use hand-made events in the style of test_state_machine.py; the capture tests rewrite the
real Kafka 2.7 logs into the 2.0 and 1.1 wordings (tests/log_rewrite.py) and compare the records
with those of the original logs, field by field.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from state import events as E
from state.machine import GroupStateMachine
from state.machine.classic import INFERRED_LEAVE
from state.model import GroupModel
from state.outputs import OutputKind
from streaming.app.local import run_local
from streaming.app.settings import LogInput
from tests.support.capture_expectations import capture_inputs
from tests.support.log_rewrite import as_old_broker, read_lines, write
from tests.support.machine_events import C1, C2, C3, CLIENT_IDS, G, ev, md_member, metadata


def run(events):
    machine = GroupStateMachine(GroupModel(cluster="default", group=G))
    machine.apply_all(events)
    machine.advance_to(E.END_OF_INPUT_TS_MS)
    return ([r for k, r in machine.outputs if k == OutputKind.REBALANCE],
            [r for k, r in machine.outputs if k == OutputKind.REMOVAL])


def stable_gen1(t0=1000):
    """Generation 1 with C1 and C2, as 2.0 logs it (no reasons) plus its GroupMetadata record."""
    return [ev(t0, E.PREPARE_REBALANCE, 0, data={"trigger": "unknown"}),
            ev(t0 + 3000, E.JOIN_COMPLETE, 1),
            ev(t0 + 3005, E.ASSIGNMENT_RECEIVED, 1),
            metadata(t0 + 3006, 1, [md_member(C1), md_member(C2)])]


def no_reason_prepare(ts, old_generation):
    return ev(ts, E.PREPARE_REBALANCE, old_generation, data={"trigger": "unknown"})


# ------------------------------------------------------------------ trigger from the line just before
def test_new_member_id_just_before_is_the_trigger():
    rebalances, _ = run([ev(900, E.MEMBER_CREATED, member_id=C1, data={"pending": False}),
                         no_reason_prepare(1000, 0), ev(4000, E.JOIN_COMPLETE, 1),
                         ev(4005, E.ASSIGNMENT_RECEIVED, 1)])
    [r] = rebalances
    assert (r["trigger"], r["trigger_member"], r["reason_text"]) == ("member_join", C1, None)


def test_new_member_id_too_long_before_is_not_the_trigger():
    # 1001 ms before and no GroupMetadata record to compare members with: unknown stays unknown
    rebalances, _ = run([ev(0, E.MEMBER_CREATED, member_id=C1), no_reason_prepare(1001, 0),
                         ev(4000, E.JOIN_COMPLETE, 1), ev(4005, E.ASSIGNMENT_RECEIVED, 1)])
    assert rebalances[0]["trigger"] == "unknown"


def test_the_later_of_removal_and_new_member_wins_and_a_removal_wins_a_tie():
    def gen2(*before_prepare, prepare_at):
        return stable_gen1() + list(before_prepare) + [
            no_reason_prepare(prepare_at, 1), ev(prepare_at + 50, E.JOIN_COMPLETE, 2),
            ev(prepare_at + 52, E.ASSIGNMENT_RECEIVED, 2)]
    later_join = gen2(ev(9000, E.MEMBER_FAILED, member_id=C2), ev(9100, E.MEMBER_CREATED, member_id=C3),
                      prepare_at=9200)
    r = run(later_join)[0][-1]
    assert (r["generation"], r["trigger"], r["trigger_member"]) == (2, "member_join", C3)
    tie = gen2(ev(9000, E.MEMBER_CREATED, member_id=C3), ev(9000, E.MEMBER_FAILED, member_id=C2),
               prepare_at=9001)
    r = run(tie)[0][-1]
    assert (r["generation"], r["trigger"], r["trigger_member"]) == (2, "heartbeat_expiry", C2)


def test_a_reason_is_never_overridden():
    events = stable_gen1() + [
        ev(9000, E.MEMBER_CREATED, member_id=C3),
        ev(9001, E.PREPARE_REBALANCE, 1, reason=f"leader {C1} re-joining group during Stable",
           data={"trigger": "leader_rejoin", "trigger_member": C1}),
        ev(9100, E.JOIN_COMPLETE, 2), ev(9105, E.ASSIGNMENT_RECEIVED, 2),
        metadata(9106, 2, [md_member(C1), md_member(C2), md_member(C3)])]
    rebalances, removals = run(events)
    assert (rebalances[-1]["trigger"], rebalances[-1]["trigger_member"]) == ("leader_rejoin", C1)
    assert removals == []


# ------------------------------------------------------------------ membership change without a line
def test_member_gone_without_a_line_left_and_triggered_the_rebalance():
    events = stable_gen1() + [no_reason_prepare(20000, 1), ev(20050, E.JOIN_COMPLETE, 2),
                              ev(20052, E.ASSIGNMENT_RECEIVED, 2), metadata(20053, 2, [md_member(C1)])]
    rebalances, removals = run(events)
    r = rebalances[-1]
    assert (r["trigger"], r["trigger_member"], r["removed_members"], r["members"]) == \
        ("member_leave", C2, [C2], 1)
    [rm] = removals
    assert (rm["member_id"], rm["cause"], rm["removed_at_ms"], rm["generation"]) == (C2, "leave_group", 20000, 1)
    assert (rm["client_id"], rm["session_timeout_ms"]) == (CLIENT_IDS[C2], 10000)   # from the gen-1 record
    assert rm["evidence"].startswith(INFERRED_LEAVE.format(prev=1, gen=2))
    assert rm["source_id"].startswith("__consumer_offsets")      # revealed by the record


def test_member_missing_after_a_join_phase_as_long_as_its_timeout_was_dropped_at_it():
    gen1 = [no_reason_prepare(1000, 0), ev(4000, E.JOIN_COMPLETE, 1), ev(4005, E.ASSIGNMENT_RECEIVED, 1),
            metadata(4006, 1, [md_member(C1, rebalance=8000), md_member(C2, rebalance=8000)])]
    # C3 joins; C2 never rejoins and the JOIN phase waits its 8 s rebalance timeout
    events = gen1 + [ev(9000, E.MEMBER_CREATED, member_id=C3), no_reason_prepare(9001, 1),
                     ev(17001, E.JOIN_COMPLETE, 2), ev(17003, E.ASSIGNMENT_RECEIVED, 2),
                     metadata(17004, 2, [md_member(C1), md_member(C3)])]
    rebalances, removals = run(events)
    [rm] = removals
    assert (rm["member_id"], rm["cause"], rm["removed_at_ms"]) == (C2, "rebalance_timeout", 17001)
    assert "rebalance timeout" in rm["evidence"]
    assert (rebalances[-1]["trigger"], rebalances[-1]["trigger_member"]) == ("member_join", C3)


def test_new_member_in_the_next_generation_is_a_join():
    events = stable_gen1() + [no_reason_prepare(20000, 1), ev(23000, E.JOIN_COMPLETE, 2),
                              ev(23002, E.ASSIGNMENT_RECEIVED, 2),
                              metadata(23003, 2, [md_member(C1), md_member(C2), md_member(C3)])]
    rebalances, removals = run(events)
    assert (rebalances[-1]["trigger"], rebalances[-1]["trigger_member"], removals) == ("member_join", C3, [])


def test_first_join_of_a_new_group_names_the_leader():
    # the first member to join an empty group starts the rebalance and becomes the leader
    events = [no_reason_prepare(1000, 0), ev(4000, E.JOIN_COMPLETE, 1), ev(4005, E.ASSIGNMENT_RECEIVED, 1),
              metadata(4006, 1, [md_member(C3), md_member(C2), md_member(C1)], leader=C2)]
    [r], _ = run(events)
    assert (r["trigger"], r["trigger_member"]) == ("member_join", C2)


def test_group_emptied_without_lines_means_everyone_left():
    events = stable_gen1() + [no_reason_prepare(20000, 1), ev(20100, E.GROUP_EMPTY, 2)]
    rebalances, removals = run(events)
    r = rebalances[-1]
    assert (r["outcome"], r["trigger"], r["trigger_member"], sorted(r["removed_members"])) == \
        ("empty", "member_leave", C1, sorted([C1, C2]))
    assert sorted((rm["member_id"], rm["cause"], rm["removed_at_ms"]) for rm in removals) == \
        sorted([(C1, "leave_group", 20000), (C2, "leave_group", 20000)])


def test_a_failure_line_is_not_doubled():
    events = stable_gen1() + [ev(19999, E.MEMBER_FAILED, member_id=C2), no_reason_prepare(20000, 1),
                              ev(20050, E.JOIN_COMPLETE, 2), ev(20052, E.ASSIGNMENT_RECEIVED, 2),
                              metadata(20053, 2, [md_member(C1)])]
    rebalances, removals = run(events)
    assert [(rm["member_id"], rm["cause"], rm["evidence"].startswith("inferred")) for rm in removals] == \
        [(C2, "heartbeat_expiry", False)]
    assert (rebalances[-1]["trigger"], rebalances[-1]["trigger_member"]) == ("heartbeat_expiry", C2)


def test_nothing_is_inferred_without_the_previous_generations_members():
    # generation 1 was never seen in the offsets topic: who was in it is unknown
    events = [ev(1000, E.PREPARE_REBALANCE, 0, data={"trigger": "unknown"}), ev(4000, E.JOIN_COMPLETE, 1),
              ev(4005, E.ASSIGNMENT_RECEIVED, 1),
              no_reason_prepare(20000, 1), ev(20050, E.JOIN_COMPLETE, 2), ev(20052, E.ASSIGNMENT_RECEIVED, 2),
              metadata(20053, 2, [md_member(C1)])]
    rebalances, removals = run(events)
    assert removals == [] and rebalances[-1]["trigger"] == "unknown"


# ------------------------------------------------------------------ the real 2.7 capture, told by 1.1 / 2.0
def _key(r):
    return r["group"], r["generation"], r["started_at_ms"]


@pytest.fixture(scope="module")
def original():
    return run_local(*capture_inputs("kafka-2.7"))


def _rewritten(tmp_path: Path, version: str, drop_missing: bool):
    logs, offsets = capture_inputs("kafka-2.7")
    old_logs = [LogInput(path=write(tmp_path / Path(i.path).name,
                                    as_old_broker(read_lines(Path(i.path)), version, drop_missing)),
                         cluster=i.cluster) for i in logs]
    return run_local(old_logs, offsets)


@pytest.mark.parametrize("version", ["2.0", "1.1"])
def test_capture_in_old_wording_gives_the_same_records(tmp_path, original, version):
    """Every line reworded (Prepare without reason or state; 1.1: deletions without a count), no
    line dropped. Only what the old wording cannot carry differs, and it is listed here."""
    old = _rewritten(tmp_path, version, drop_missing=False)
    assert old["quarantine"] == []
    before = {_key(r): r for r in original["rebalance"]}
    after = {_key(r): r for r in old["rebalance"]}
    assert before.keys() == after.keys() and len(before) == 82
    lost = []
    for key, r in before.items():
        o = after[key]
        assert r["reason_text"] and o["reason_text"] is None          # no reason before 2.1
        if r["trigger"] == "leader_rejoin":
            # 2.0 writes nothing when the leader rejoins and the members do not change
            assert (o["trigger"], o["trigger_member"]) == ("unknown", None)
            lost.append(key)
            continue
        assert {f: v for f, v in o.items() if f != "reason_text"} == \
            {f: v for f, v in r.items() if f != "reason_text"}, key
    assert len(lost) == 4
    # The evidence quotes when the client came back: old wording has no join line, so the
    # rejoin is seen later (the GroupMetadata record): the evidence and rejoined_after_ms say so;
    # the verdicts are the same.
    assert sorted(json.dumps({**r, "evidence": None, "rejoined_after_ms": r.get("rejoined_after_ms") is not None}, sort_keys=True) for r in old["removal"]) == \
        sorted(json.dumps({**r, "evidence": None, "rejoined_after_ms": r.get("rejoined_after_ms") is not None}, sort_keys=True) for r in original["removal"])


def test_capture_as_a_2_0_broker_writes_it(tmp_path, original):
    """Also without the lines 2.0 does not write at INFO: LeaveGroup (DEBUG before 2.2), member-id
    lines (2.4+), static membership (2.3+), "remove dynamic members" (2.7+)."""
    old = _rewritten(tmp_path, "2.0", drop_missing=True)
    before = {_key(r): r for r in original["rebalance"]}
    after = {_key(r): r for r in old["rebalance"]}
    assert before.keys() == after.keys()
    for key, r in before.items():
        o = after[key]
        same = ("cluster", "protocol", "generation", "previous_generation", "coordinator", "started_at_ms",
                "join_completed_at_ms", "completed_at_ms", "ended_at_ms", "join_seconds", "sync_seconds",
                "total_seconds", "outcome", "members")
        assert {f: o[f] for f in same} == {f: r[f] for f in same}, key
        assert o["reason_text"] is None
        if r["trigger"] == "leader_rejoin":
            assert o["trigger"] == "unknown"
            continue
        assert o["trigger"] == r["trigger"], key
        # who left during the rebalance is known, in which order is not (no lines): same set
        assert sorted(o["removed_members"]) == sorted(r["removed_members"]), key
        if len(r["removed_members"]) <= 1:
            assert (o["trigger_member"], o["removed_members"]) == (r["trigger_member"], r["removed_members"]), key
        else:
            assert o["trigger_member"] in r["removed_members"], key
    by_member = {(r["group"], r["member_id"]): r for r in old["removal"]}
    starts = {(r["group"], m): r for r in old["rebalance"] for m in r["removed_members"]}
    for r in original["removal"]:
        if r["cause"] == "static_member_fenced":          # no static membership before 2.3
            assert (r["group"], r["member_id"]) not in by_member
            continue
        o = by_member[(r["group"], r["member_id"])]
        assert o["cause"] == r["cause"], r
        if r["cause"] == "heartbeat_expiry":            # "has failed" is INFO in every version
            # (the dropped lines shift the line numbers)
            assert {**o, "seq": None, "evidence": None, "rejoined_after_ms": None} == \
                {**r, "seq": None, "evidence": None, "rejoined_after_ms": None}
            continue
        # leave_group / rebalance_timeout: inferred from the members of the next generation; the
        # time is the start (a leave) or the end (dropped at the timeout) of the JOIN phase
        rebalance = starts[(r["group"], r["member_id"])]
        expected_at = rebalance["join_completed_at_ms"] if r["cause"] == "rebalance_timeout" \
            else rebalance["started_at_ms"]
        assert o["removed_at_ms"] == expected_at and o["evidence"].startswith("inferred:"), r
        assert abs(o["removed_at_ms"] - r["removed_at_ms"]) < 1000, r
        assert {f: o[f] for f in ("client_id", "client_host", "session_timeout_ms", "rebalance_timeout_ms")} == \
            {f: r[f] for f in ("client_id", "client_host", "session_timeout_ms", "rebalance_timeout_ms")}
    assert len(old["removal"]) == len(original["removal"]) - 1
