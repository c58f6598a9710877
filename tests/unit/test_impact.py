"""Rebalance impact (docs/impact.md) on the real Kafka 2.7 and 4.0 captures: what each rebalance
stopped, checked against the times and assignments of the capture's own records."""
from __future__ import annotations

from functools import cache

import pytest

from sinks.metrics import MetricsSink
from state import events as E
from state.impact import IMPACT_FIELDS, revocation
from state.machine import GroupStateMachine
from state.model import GroupModel
from state.outputs import OutputKind
from streaming.app.local import capture_events, run_local
from tests.support.capture_expectations import capture_inputs


@cache
def _outputs(capture: str) -> dict:
    return run_local(*capture_inputs(capture))


@cache
def _assignments(capture: str) -> dict[tuple[str, int], dict[str, list[str]]]:
    """(group, generation) -> member id -> partitions, from the capture's GroupMetadata records."""
    out = {}
    for ev in capture_events(*capture_inputs(capture)):
        if ev.kind == E.GROUP_METADATA and ev.data.get("members"):
            out[(ev.group, ev.generation)] = {m["member_id"]: m["partitions"] for m in ev.data["members"]}
    return out


def _rebalances(capture: str, group: str) -> dict[int, dict]:
    return {r["generation"]: r for r in _outputs(capture)[OutputKind.REBALANCE] if r["group"] == group}


def _partitions(capture: str, group: str, generation: int) -> set[str]:
    return {p for parts in _assignments(capture)[(group, generation)].values() for p in parts}


def test_an_eager_join_stops_every_partition_for_the_whole_rebalance():
    """2.7 sc02 (range): each new member's join revokes every partition at the start; all of them
    wait for the new assignment."""
    rbs = _rebalances("kafka-2.7", "sc02-staggered-three")
    for gen in (2, 3):
        r = rbs[gen]
        held = _partitions("kafka-2.7", "sc02-staggered-three", gen - 1)
        assert (r["trigger"], r["impact_unknown_reason"]) == ("member_join", None)
        assert r["partitions_stopped"] == len(held) == 3
        assert r["partition_seconds_stopped"] == pytest.approx(len(held) * r["total_seconds"], abs=0.003)
        assert r["partition_seconds_by_topic"] == {"sc02-topic": r["partition_seconds_stopped"]}
        assert r["partition_stop_seconds"] == [[r["total_seconds"], 3]]
        assert r["partition_seconds_by_departed_member"] == {} and r["partitions_unassigned"] == 0
        # what cooperative-sticky would have stopped: the partitions whose owner changed
        owners = {p: mid for gen_ in (gen - 1,)
                  for mid, parts in _assignments("kafka-2.7")[("sc02-staggered-three", gen_)].items() for p in parts}
        after = {p: mid for mid, parts in _assignments("kafka-2.7")[("sc02-staggered-three", gen)].items() for p in parts}
        assert r["partitions_moved"] == sum(1 for p, mid in owners.items() if after.get(p) != mid) < 3
    # the group's first assignment stops nothing: nobody consumed before
    assert (rbs[1]["partitions_stopped"], rbs[1]["partition_seconds_stopped"]) == (0, 0.0)


def test_a_cooperative_join_stops_only_the_partitions_that_move_until_the_follow_up():
    """2.7 sc09-cooperative-sticky (4 partitions): the second member's join gives it nothing; the
    2 partitions the first member loses are revoked at that rebalance's end and assigned by the
    follow-up rebalance, which carries their cost. The 2 partitions the first member keeps never
    stop."""
    group = "sc09-cooperative-sticky"
    rbs = _rebalances("kafka-2.7", group)
    join, follow_up = rbs[2], rbs[3]
    moved = _partitions("kafka-2.7", group, 1) - _partitions("kafka-2.7", group, 2)
    assert len(moved) == 2 and moved <= _partitions("kafka-2.7", group, 3)
    assert (join["trigger"], join["partitions_stopped"], join["partitions_unassigned"]) == ("member_join", 0, 2)
    assert (join["partitions_moved"], join["assignor"]) == (2, "cooperative-sticky")
    assert follow_up["trigger"] == "leader_rejoin" and follow_up["partitions_stopped"] == 2
    gap = (follow_up["completed_at_ms"] - join["completed_at_ms"]) / 1000
    assert follow_up["partition_seconds_stopped"] == pytest.approx(2 * gap, abs=0.002)
    assert follow_up["partitions_unassigned"] == 0
    # The same kind of event on an eager group of the capture stopped every partition.
    eager = _rebalances("kafka-2.7", "sc02-staggered-three")[2]
    assert eager["partitions_stopped"] == len(_partitions("kafka-2.7", "sc02-staggered-three", 1))


def test_a_leaving_members_partitions_stop_from_its_leave_and_the_kept_ones_do_not():
    group = "sc09-cooperative-sticky"
    leave = _rebalances("kafka-2.7", group)[4]
    left = leave["trigger_member"]
    removal = next(r for r in _outputs("kafka-2.7")[OutputKind.REMOVAL] if r["member_id"] == left)
    owned = _assignments("kafka-2.7")[(group, 3)][left]
    assert leave["partitions_stopped"] == len(owned) == 2       # the other member's 2 did not stop
    share = len(owned) * (leave["completed_at_ms"] - removal["removed_at_ms"]) / 1000
    assert leave["partition_seconds_by_departed_member"] == {left: pytest.approx(share, abs=0.002)}
    assert leave["partition_seconds_stopped"] == pytest.approx(share, abs=0.002)


def test_a_crashed_members_partitions_stop_at_its_last_heartbeat():
    """2.7 sc03: the member killed with SIGKILL is expired after its session timeout; its
    partitions stopped with its last heartbeat, the others at the rebalance's start (range)."""
    group = "sc03-heartbeat-expiry"
    r = _rebalances("kafka-2.7", group)[2]
    assert r["trigger"] == "heartbeat_expiry"
    dead = r["trigger_member"]
    removal = next(x for x in _outputs("kafka-2.7")[OutputKind.REMOVAL] if x["member_id"] == dead)
    before = _assignments("kafka-2.7")[(group, 1)]
    last_heartbeat = removal["removed_at_ms"] - removal["session_timeout_ms"]
    own = len(before[dead]) * (r["completed_at_ms"] - last_heartbeat) / 1000
    others = sum(len(p) for mid, p in before.items() if mid != dead) * r["total_seconds"]
    assert r["partition_seconds_by_departed_member"] == {dead: pytest.approx(own, abs=0.002)}
    assert r["partition_seconds_stopped"] == pytest.approx(own + others, abs=0.003)
    assert own > removal["session_timeout_ms"] / 1000


def test_a_member_that_did_not_rejoin_holds_its_partitions_for_the_whole_join_phase():
    """2.7 sc11: the only member of generation 1 is stuck in processing and never rejoins; the JOIN
    phase waits for it until the rebalance timeout removes it. Its partitions stopped at the start."""
    r = _rebalances("kafka-2.7", "sc11-stuck-in-rebalance")[2]
    stuck = _assignments("kafka-2.7")[("sc11-stuck-in-rebalance", 1)]
    assert list(stuck) == r["removed_members"] and r["join_seconds"] > 10
    assert r["partitions_stopped"] == 3
    assert r["partition_seconds_by_departed_member"] == {
        r["removed_members"][0]: pytest.approx(3 * r["total_seconds"], abs=0.003)}
    assert r["partition_seconds_stopped"] == pytest.approx(3 * r["total_seconds"], abs=0.003)


def test_an_emptied_group_says_how_many_partitions_lost_their_consumer():
    rbs = _rebalances("kafka-2.7", "sc02-staggered-three")
    empty = rbs[4]
    assert (empty["outcome"], empty["partitions_stopped"], empty["partition_seconds_stopped"]) == ("empty", 0, 0.0)
    assert empty["partitions_unassigned"] == len(_partitions("kafka-2.7", "sc02-staggered-three", 3))
    assert "emptied" in empty["impact_unknown_reason"]


def test_kafka_2_8_classic_rebalances_wait_for_their_record_and_are_measured():
    """4.0 logs the member count on "Assignment received": the rebalance now waits (event time) for
    its generation's GroupMetadata record, whose assignment is its impact."""
    rbs = _rebalances("kafka-4.0", "k4-sc02-staggered-three")
    r = rbs[2]
    assert r["impact_unknown_reason"] is None and r["members"] == 2
    held = _partitions("kafka-4.0", "k4-sc02-staggered-three", 1)
    assert r["partitions_stopped"] == len(held)
    assert r["partition_seconds_stopped"] == pytest.approx(len(held) * r["total_seconds"], abs=0.003)


def test_every_rebalance_of_the_captures_is_measured_or_says_why_not():
    for capture in ("kafka-2.7", "kafka-4.0"):
        for r in _outputs(capture)[OutputKind.REBALANCE]:
            assert set(IMPACT_FIELDS) <= set(r)
            if r["partitions_stopped"] is None:
                assert r["impact_unknown_reason"], r
            else:
                assert r["partition_seconds_stopped"] >= 0
                assert sum(n for _, n in r["partition_stop_seconds"]) == r["partitions_stopped"]
            if r["protocol"] in ("share", "streams"):
                assert r["impact_unknown_reason"] == f"not measured for {r['protocol']} groups yet"


def test_the_counter_adds_up_the_measured_rebalances_of_a_group():
    sink = MetricsSink([0.1, 1, 10, 100])
    records = _outputs("kafka-2.7")[OutputKind.REBALANCE]
    for r in records:
        sink.observe(OutputKind.REBALANCE, r)
    group = "sc09-cooperative-sticky"
    total = sum(r["partition_seconds_stopped"] or 0 for r in records if r["group"] == group)
    value = sink.registry.get_sample_value("rebalance_monitor_partition_seconds_stopped_total",
                                           {"cluster": "default", "group": group})
    assert value == pytest.approx(total) and total > 6
    count = sink.registry.get_sample_value("rebalance_monitor_partition_stop_seconds_count",
                                           {"cluster": "default", "protocol": "classic"})
    assert count == sum(r["partitions_stopped"] or 0 for r in records)


def test_a_custom_assignor_is_not_guessed():
    m = GroupModel(cluster="c", group="g", protocol_type="consumer", selected_protocol="my-assignor")
    assert revocation(m) is None
    machine = GroupStateMachine(m)
    member = {"member_id": "a", "client_id": "a", "client_host": "/h", "session_timeout_ms": 10000,
              "rebalance_timeout_ms": 30000, "partitions": ["t:0"]}

    def record(ts: int, gen: int) -> E.Event:
        return E.Event(ts_ms=ts, source=E.SOURCE_OFFSETS, source_id="o", seq=ts, broker=None, cluster="c", group="g",
                       kind=E.GROUP_METADATA, generation=gen, member_id=None, reason=None,
                       data={"protocol_type": "consumer", "protocol": "my-assignor", "leader": "a",
                             "current_state_ts_ms": ts, "members": [member]})
    machine.apply_all([record(1000, 1), record(5000, 2)])
    last = [r for k, r in machine.outputs if k == OutputKind.REBALANCE][-1]
    assert last["partitions_stopped"] is None
    assert "my-assignor" in last["impact_unknown_reason"]


def test_a_leave_decided_a_poll_timeout_later_counts_from_the_last_poll():
    """4.0 k4-sc05: the slow member leaves without a reason; its rebalance's record counts its
    partitions from the leave, and the rebalance_trigger record that decides poll_timeout adds its
    max.poll.interval.ms (the member's rebalance timeout) per partition."""
    outputs = _outputs("kafka-4.0")
    decision = next(d for d in outputs[OutputKind.REBALANCE_TRIGGER]
                    if d["group"] == "k4-sc05-poll-timeout" and d["trigger"] == "poll_timeout")
    member = decision["trigger_member"]
    removal = next(r for r in outputs[OutputKind.REMOVAL] if r["member_id"] == member)
    owned = _assignments("kafka-4.0")[("k4-sc05-poll-timeout", 1)][member]
    assert decision["partition_seconds_added"] == pytest.approx(len(owned) * removal["rebalance_timeout_ms"] / 1000)
    # run_local gives the records as decided (apply_trigger_decisions)
    decided = _rebalances("kafka-4.0", "k4-sc05-poll-timeout")[decision["generation"]]
    assert decided["trigger"] == "poll_timeout"
    assert decided["partition_seconds_stopped"] == decision["partition_seconds_stopped"]
    completed = decided["completed_at_ms"]
    last_poll = removal["removed_at_ms"] - removal["rebalance_timeout_ms"]
    assert decided["partition_seconds_by_departed_member"][member] == pytest.approx(
        len(owned) * (completed - last_poll) / 1000, abs=0.002)
    assert sum(n for _, n in decided["partition_stop_seconds"]) == decided["partitions_stopped"]
    # the counter: the record as emitted, then what the decision added
    sink = MetricsSink([1, 10, 100])
    machine = GroupStateMachine(GroupModel(cluster="default", group="k4-sc05-poll-timeout"))
    machine.apply_all(sorted((e for e in capture_events(*capture_inputs("kafka-4.0"))
                              if e.group == "k4-sc05-poll-timeout"), key=E.Event.sort_key))
    machine.advance_to(10**13)
    emitted = [r for k, r in machine.outputs if k == OutputKind.REBALANCE]
    for kind, record in machine.outputs:
        sink.observe(kind, record)
    value = sink.registry.get_sample_value("rebalance_monitor_partition_seconds_stopped_total",
                                           {"cluster": "default", "group": "k4-sc05-poll-timeout"})
    assert value == pytest.approx(sum(r["partition_seconds_stopped"] or 0 for r in emitted)
                                  + decision["partition_seconds_added"])


def _consumer_gaps(capture: str, group: str) -> list[float]:
    """From the capture's own member assignment records (type 8): for every partition a member
    released (its record no longer lists it, or the member's record was deleted) and another
    member's record later listed, the seconds between the two."""
    owns: dict[str, set] = {}
    released: dict[str, int] = {}
    gaps = []
    for ev in sorted((e for e in capture_events(*capture_inputs(capture)) if e.group == group),
                     key=E.Event.sort_key):
        if ev.kind != E.CG_MEMBER_ASSIGNMENT:
            continue
        before = owns.get(ev.member_id, set())
        now = set() if ev.data.get("tombstone") else set(ev.data["owned"])
        for p in before - now:
            released.setdefault(p, ev.ts_ms)
        for p in now - before:
            if p in released:
                gaps.append((ev.ts_ms - released.pop(p)) / 1000)
        owns[ev.member_id] = now
    return gaps


@pytest.mark.parametrize("group", ["k4-sc09-consumer-protocol", "k4-sc10-consumer-00", "k4-sc10-consumer-03"])
def test_kip848_stops_are_the_gaps_between_a_release_and_the_next_owner(group):
    """4.0 consumer groups: a partition stops when its owner's current assignment record no longer
    lists it (revoked, or the member left or was fenced) and resumes when another member's record
    lists it. The records' totals are those gaps, taken from the records here independently."""
    records = [r for r in _outputs("kafka-4.0")[OutputKind.REBALANCE] if r["group"] == group]
    gaps = _consumer_gaps("kafka-4.0", group)
    measured = [r for r in records if r["partitions_stopped"] is not None]
    assert sum(r["partitions_stopped"] for r in measured) == len(gaps) > 0
    # a fence line comes a few ms before the member's records are deleted: counted from the line
    assert sum(r["partition_seconds_stopped"] for r in measured) == pytest.approx(sum(gaps), abs=0.05 * len(gaps))
    for r in records:
        if r["partitions_stopped"] is None:
            assert r["outcome"] == "superseded" and "next one that completes" in r["impact_unknown_reason"]


def test_kip848_a_join_stops_only_what_moves_to_the_new_member():
    """4.0 k4-sc09, epoch 2: the second member joins; the first releases 3 of its 6 partitions when
    it reconciles, the new member gets them about a second later (its next heartbeat). The first
    member's other 3 never stop."""
    r = _rebalances("kafka-4.0", "k4-sc09-consumer-protocol")[2]
    assert (r["trigger"], r["partitions_stopped"], r["partitions_moved"]) == ("member_join", 3, 3)
    assert 0.5 < r["partition_seconds_stopped"] / 3 < r["total_seconds"]
    assert r["partition_seconds_by_departed_member"] == {} and r["assignor"] is None


def test_decisions_read_from_an_event_sink_apply_their_corrections():
    """apply_trigger_decisions reads the decisions twice (triggers, corrections): an event sink
    yields them once, so they must be taken as a list (a generator lost the corrections)."""
    from state.outputs import apply_trigger_decisions
    outputs = _outputs("kafka-4.0")
    decisions = [d for d in outputs[OutputKind.REBALANCE_TRIGGER] if d.get("partition_seconds_added")]
    emitted = [dict(r, trigger="member_leave", trigger_final=False,
                    partition_seconds_stopped=r["partition_seconds_stopped"] - d["partition_seconds_added"])
               for d in decisions for r in outputs[OutputKind.REBALANCE]
               if (r["group"], r["generation"]) == (d["group"], d["generation"])]
    applied = apply_trigger_decisions(emitted, (d for d in decisions))
    assert [r["partition_seconds_stopped"] for r in applied] == [d["partition_seconds_stopped"] for d in decisions]
    assert decisions and all(r["trigger"] == "poll_timeout" for r in applied)


@pytest.mark.parametrize(("capture", "group", "cause"), [
    ("kafka-2.7", "sc03-heartbeat-expiry", "heartbeat_expiry"),
    ("kafka-2.7", "sc09-cooperative-sticky", "leave_group"),
    ("kafka-4.0", "k4-sc05-poll-timeout", "poll_timeout"),     # the corrected value of a decided poll timeout
    ("kafka-4.0", "k4-sc09-consumer-protocol", "heartbeat_expiry"),
])
def test_a_removal_record_carries_what_it_cost(capture, group, cause):
    outputs = _outputs(capture)
    charged = {m: s for r in outputs[OutputKind.REBALANCE] if r["group"] == group
               for m, s in (r["partition_seconds_by_departed_member"] or {}).items()}
    removals = [r for r in outputs[OutputKind.REMOVAL] if r["group"] == group and r["cause"] == cause]
    costly = [r for r in removals if r["partition_seconds_stopped"] is not None]
    assert costly and all(r["partition_seconds_stopped"] == charged[r["member_id"]] for r in costly)
    # a removal whose partitions nobody took over (the last member of the group) cost none
    assert all(r["member_id"] not in charged for r in removals if r["partition_seconds_stopped"] is None)
