"""state/machine/: a classic generation seen in one source and not the other is flagged (a
`source_mismatch` anomaly once the grace has passed), never counted twice."""
from __future__ import annotations

from state import events as E
from state.machine import GroupStateMachine
from state.machine.crosscheck import SOURCE_CHECK_GRACE_MS
from state.model import GroupModel
from state.outputs import OutputKind
from tests.support.machine_events import C1, C2, CLUSTER, OFFSETS_SOURCE, G, ev, md_member, metadata, prepare, run


def mismatches(m: GroupStateMachine) -> list[dict]:
    return [r for k, r in m.outputs if k == OutputKind.ANOMALY and r["kind"] == "source_mismatch"]


def commit(ts: int) -> E.Event:
    return ev(ts, E.OFFSET_COMMIT, data={"topic": "t", "partition": 0, "offset": 1, "commit_ts_ms": ts, "count": 1})


def log_generation(t0: int, gen: int, members: int = 2) -> list[E.Event]:
    return [prepare(t0, gen - 1, "member_join", C1), ev(t0 + 100, E.JOIN_COMPLETE, gen),
            ev(t0 + 110, E.ASSIGNMENT_RECEIVED, gen, C1, data={"members": members, "static_members": 0})]


def test_both_sources_no_flag():
    m = run(log_generation(1000, 1) + [metadata(1112, 1, [md_member(C1), md_member(C2)]), commit(2000)])
    m.advance_to(1112 + SOURCE_CHECK_GRACE_MS + 1)
    assert mismatches(m) == [] and m.m.generation_checks == {}
    assert [k for k, _ in m.outputs] == [OutputKind.REBALANCE]


def test_log_generation_without_its_record_is_flagged_after_the_grace():
    evs = log_generation(1000, 1) + [metadata(1112, 1, [md_member(C1), md_member(C2)]), commit(2000)]
    evs += log_generation(30_000, 2)   # generation 2: no GroupMetadata record
    m = run(evs)
    m.advance_to(30_100 + SOURCE_CHECK_GRACE_MS - 1)   # the grace runs from the first evidence
    assert mismatches(m) == []                       # still within the grace
    assert m.next_deadline_ms() == 30_100 + SOURCE_CHECK_GRACE_MS
    m.advance_to(30_100 + SOURCE_CHECK_GRACE_MS + 1)
    (a,) = mismatches(m)
    assert a["generation"] == 2 and a["seen_in"] == "log" and a["missing_in"] == "offsets"
    assert a["cluster"] == CLUSTER and a["group"] == G and a["protocol"] == "classic"
    assert a["ts_ms"] == 30_100 and a["source_id"] == "broker1/server.log"
    # The generation is still one rebalance, not two.
    assert sorted(r["generation"] for k, r in m.outputs if k == OutputKind.REBALANCE) == [1, 2]
    assert m.m.source_mismatches == 1


def test_record_without_log_lines_is_flagged_when_the_group_has_log_input():
    evs = log_generation(1000, 1) + [metadata(1112, 1, [md_member(C1), md_member(C2)])]
    evs += [metadata(50_000, 2, [md_member(C1)])]   # lines of generation 2 missed (lost log file)
    m = run(evs)
    m.advance_to(50_000 + SOURCE_CHECK_GRACE_MS + 1)
    (a,) = mismatches(m)
    assert (a["generation"], a["seen_in"], a["missing_in"]) == (2, "offsets", "logs")
    assert a["source_id"] == OFFSETS_SOURCE
    assert sorted(r["generation"] for k, r in m.outputs if k == OutputKind.REBALANCE) == [1, 2]


def test_one_source_only_is_not_flagged():
    # Offsets only: every generation comes from records; nothing to cross-check.
    m = run([metadata(1000, 1, [md_member(C1)]), metadata(9000, 2, [md_member(C1), md_member(C2)])])
    m.advance_to(10**12)
    assert mismatches(m) == []
    # Logs only.
    m = run(log_generation(1000, 1) + log_generation(20_000, 2))
    m.advance_to(10**12)
    assert mismatches(m) == []


def test_evidence_within_the_grace_in_either_order():
    # The record first, the log line 5 s later (skewed clocks): no flag.
    m = run([commit(10), metadata(1000, 1, [md_member(C1)])] + log_generation(1000 + 5000 - 110, 1))
    m.advance_to(10**12)
    assert mismatches(m) == []


def test_static_member_rewrite_and_downgrade_record_are_not_flagged():
    evs = log_generation(1000, 1) + [metadata(1112, 1, [md_member(C1), md_member(C2)])]
    # Static member replaced 40 s later: the record of generation 1 is written again.
    evs += [metadata(41_000, 1, [md_member(C1), md_member(C2, instance="i")])]
    # A downgrade writes generation 2's record; the next line prepares from old generation 2.
    evs += [metadata(60_000, 2, [md_member(C1)]), prepare(60_000, 2, None, None, "Downgrade group g")]
    m = run(evs)
    m.advance_to(10**12)
    assert mismatches(m) == []


def test_join_without_completion_is_not_flagged():
    # The join ended but a member failed before SyncGroup: no record is due.
    evs = log_generation(1000, 1) + [metadata(1112, 1, [md_member(C1), md_member(C2)])]
    evs += [prepare(20_000, 1, "member_join", C2), ev(20_100, E.JOIN_COMPLETE, 2), prepare(20_200, 2, "member_leave", C2)]
    m = run(evs)
    m.advance_to(10**12)
    assert mismatches(m) == []


def test_checks_survive_the_json_state_round_trip():
    m = run(log_generation(1000, 1) + [commit(1500)])
    restored = GroupStateMachine(GroupModel.from_json(m.m.to_json()))
    assert restored.m.generation_checks == m.m.generation_checks != {}
    restored.advance_to(10**12)
    assert [a["missing_in"] for a in mismatches(restored)] == ["offsets"]
