"""Rebalance impact (docs/impact.md) on the real Kafka 2.7 and 4.0 captures: what each rebalance
stopped, checked against the times and assignments of the capture's own records."""
from __future__ import annotations

import json
from functools import cache

import pytest

from sinks.metrics import MetricsSink
from state import events as E
from state.impact import IMPACT_FIELDS, revocation
from state.machine import GroupStateMachine
from state.model import GroupModel
from state.outputs import OutputKind
from streaming.app.local import capture_events, run_local
from tests.support.capture_expectations import FIXTURES, capture_inputs
from tests.support.machine_events import as_sorted_json, machine_outputs_in_batches


@cache
def _outputs(capture: str) -> dict:
    return run_local(*capture_inputs(capture))


@cache
def _assignments(capture: str) -> dict[tuple[str, int], dict[str, list[str]]]:
    """(group, generation) -> member id -> partitions, from the capture's GroupMetadata records."""
    out: dict[tuple[str, int], dict[str, list[str]]] = {}
    for ev in capture_events(*capture_inputs(capture)):
        if ev.kind == E.GROUP_METADATA and ev.data.get("members"):
            assert ev.generation is not None     # a group's metadata record names its generation
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


# The 4.0 capture's brokers: group.consumer.session.timeout.ms=10000, heartbeat interval 2000
# (tests/fixtures/kafka-4.0/README.md); the monitor reads the first from the brokers' start-up lines.
K40_SESSION_MS, K40_HEARTBEAT_MS = 10_000, 2_000


def _consumer_gaps(capture: str, group: str) -> list[float]:
    """From the capture's own member assignment records (type 8): for every partition a member
    released (its record no longer lists it, or the member's record was deleted) and another
    member's record later listed, the seconds between the two. A member fenced for its session
    released what it owned at its last heartbeat: the fence line minus the session timeout, not
    before its last record."""
    owns: dict[str, set] = {}
    last_record: dict[str, int] = {}
    fenced: dict[str, int] = {}
    released: dict[str, int] = {}
    gaps = []
    for ev in sorted((e for e in capture_events(*capture_inputs(capture)) if e.group == group),
                     key=E.Event.sort_key):
        if ev.kind == E.CONSUMER_MEMBER_FENCED and ev.data.get("fence_reason") == "session" \
                and ev.member_id is not None:    # only looked up by a member record's id
            fenced[ev.member_id] = ev.ts_ms
        if ev.kind != E.CG_MEMBER_ASSIGNMENT:
            continue
        assert ev.member_id is not None          # type 8 records are keyed by member id
        before = owns.get(ev.member_id, set())
        now = set() if ev.data.get("tombstone") else set(ev.data["owned"])
        at = ev.ts_ms
        if ev.data.get("tombstone") and ev.member_id in fenced:
            at = max(fenced[ev.member_id] - K40_SESSION_MS, last_record[ev.member_id])
        for p in before - now:
            released.setdefault(p, at)
        for p in now - before:
            if p in released:
                gaps.append((ev.ts_ms - released.pop(p)) / 1000)
        owns[ev.member_id] = now
        last_record[ev.member_id] = ev.ts_ms
    return gaps


@pytest.mark.parametrize("group", ["k4-sc09-consumer-protocol", "k4-sc10-consumer-00", "k4-sc10-consumer-03"])
def test_kip848_stops_are_the_gaps_between_a_release_and_the_next_owner(group):
    """4.0 consumer groups: a partition stops when its owner's current assignment record no longer
    lists it (revoked, or the member left), or at a fenced member's last heartbeat, and resumes when
    another member's record lists it. The records' totals are those gaps, taken from the records
    here independently."""
    records = [r for r in _outputs("kafka-4.0")[OutputKind.REBALANCE] if r["group"] == group]
    gaps = _consumer_gaps("kafka-4.0", group)
    measured = [r for r in records if r["partitions_stopped"] is not None]
    assert sum(r["partitions_stopped"] for r in measured) == len(gaps) > 0
    # a fence line comes a few ms before the member's records are deleted
    assert sum(r["partition_seconds_stopped"] for r in measured) == pytest.approx(sum(gaps), abs=0.05 * len(gaps))
    for r in records:
        if r["partitions_stopped"] is None:
            assert r["outcome"] == "superseded" and "next one that completes" in r["impact_unknown_reason"]


def test_kip848_a_killed_members_partitions_count_from_the_kill_not_the_fence():
    """Against the 4.0 capture's ground truth (its driver's kill -9 and SIGSTOP times): a consumer
    member's partitions stop when the process dies, seconds before the broker fences it. The
    monitor dates them back to its last heartbeat, the fence minus the session timeout it read
    from the brokers' start-up lines: at most one heartbeat interval before the kill."""
    truth = [json.loads(line) for line in (FIXTURES / "kafka-4.0" / "ground-truth.jsonl").read_text().splitlines()]
    stopped_at = {e["client_id"]: e["ts_ms"] for e in truth if e["action"] in ("sigkill", "sigstop")}
    outputs = _outputs("kafka-4.0")
    checked = 0
    for removal in outputs[OutputKind.REMOVAL]:
        if removal["cause"] != "heartbeat_expiry" or removal["protocol"] != "consumer":
            continue
        killed = stopped_at[removal["client_id"]]
        rebalance = next(r for r in outputs[OutputKind.REBALANCE]
                         if removal["member_id"] in (r["partition_seconds_by_departed_member"] or {}))
        assert list(rebalance["partition_seconds_by_departed_member"]) == [removal["member_id"]]
        per_partition = rebalance["partition_seconds_stopped"] / rebalance["partitions_stopped"]
        resumed = rebalance["completed_at_ms"]       # every owner had its partitions by then
        since = resumed - per_partition * 1000       # when the monitor says they stopped
        assert killed - K40_HEARTBEAT_MS <= since <= killed + 50, (removal["client_id"], killed, since)
        assert removal["partition_seconds_stopped"] == rebalance["partition_seconds_stopped"]
        checked += 1
    assert checked == 4          # sc09's kill -9 and SIGSTOP, sc10-00's and sc10-01's kill -9


def test_the_consumer_session_timeout_comes_from_the_brokers_start_up_lines_unless_it_is_set(tmp_path):
    """The 4.0 brokers log group.consumer.session.timeout.ms = 10000 when they start; the 2.7 ones
    have no such setting (the default applies); a value given in the settings wins."""
    from streaming.app.settings import DiagnosisConfig
    from streaming.app.settings.wiring import diagnosis_settings
    from streaming.logs.broker_config import consumer_session_timeout_ms
    k40 = [i.path for i in capture_inputs("kafka-4.0")[0]]
    assert consumer_session_timeout_ms(k40) == (10_000, k40[0])
    assert consumer_session_timeout_ms([i.path for i in capture_inputs("kafka-2.7")[0]]) is None
    (tmp_path / "empty.log").write_bytes(b"")
    assert consumer_session_timeout_ms([str(tmp_path / "empty.log"), str(tmp_path / "missing.log")]) is None
    assert diagnosis_settings(DiagnosisConfig().with_broker_logs(k40)).consumer_session_timeout_ms == 10_000
    assert diagnosis_settings(DiagnosisConfig()).consumer_session_timeout_ms == 45_000
    given = DiagnosisConfig(consumer_session_timeout_seconds=6)
    assert diagnosis_settings(given.with_broker_logs(k40)).consumer_session_timeout_ms == 6_000


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


def test_a_partition_that_stops_twice_before_the_groups_next_record_counts_both_stops():
    """The member assignment records of a real-Kafka bed run (4.4.0, kip848; times in ms from the
    first): epochs 3 and 4 were superseded, so the record of epoch 5 carries their stops. Partition
    3 moved from b to a (237 ms), then from a to j (111 ms): both stops count, once as a partition.
    Then b is fenced (its session, 6 s, expired) and its 0 and 1 go to a and j."""
    from state.impact import consumer_departure_ms, consumer_impact, note_consumer_departure, note_ownership
    from state.model import Member
    m = GroupModel("default", "g", protocol="consumer")
    b, a, j = (m.members.setdefault(k, Member(k)) for k in "baj")
    for member, owned, ts in [(b, "0123", 0), (b, "01", 1032), (a, "23", 1269), (a, "2", 2289), (j, "3", 2400)]:
        note_ownership(m, member, [f"t:{p}" for p in owned], ts)
        member.assignment_record_ms = ts
    since = consumer_departure_ms(m.members.pop("b"), "heartbeat_expiry", 7033, session_ms=6000)
    assert since == 1033                  # the fence minus the session, after its last record (1032)
    note_consumer_departure(m, "b", b, since)
    note_ownership(m, a, ["t:1", "t:2"], 7298)
    note_ownership(m, j, ["t:0", "t:3"], 7496)
    r = consumer_impact(m, "stable")
    assert r["partitions_stopped"] == 4
    assert r["partition_seconds_stopped"] == pytest.approx(0.237 * 2 + 0.111 + 6.265 + 6.463)
    assert r["partition_seconds_by_departed_member"] == {"b": pytest.approx(6.265 + 6.463)}
    assert sorted(n for _, n in r["partition_stop_seconds"]) == [1, 1, 1, 1]


def test_kip848_a_member_fenced_for_not_revoking_stopped_everything_when_it_was_asked_to():
    """K2 owns t:0-t:3; the target moves t:2 and t:3 to K1 and K2 never revokes them (stuck in its
    revoke callback). The broker fences it after its rebalance timeout, 30 s, on the line "failed to
    transition from epoch 2 within 30000ms": all four partitions stopped 30 s before the fence, not
    at it; K1 gets them 0.5 s after the fence."""
    from tests.support.machine_events import K1, K2, ev, run
    owned = lambda *ps: {"member_epoch": 2, "state": 0, "owned": [f"t:{p}" for p in ps]}  # noqa: E731
    evs = [ev(1000, E.CONSUMER_MEMBER_JOINED, member_id=K1, data={"protocol": "consumer"}),
           ev(1000, E.CONSUMER_MEMBER_JOINED, member_id=K2, data={"protocol": "consumer"}),
           ev(1001, E.GROUP_EPOCH_BUMPED, 2),
           ev(1002, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data=owned()),
           ev(1003, E.CG_MEMBER_ASSIGNMENT, member_id=K2, data=owned(0, 1, 2, 3)),
           ev(10_000, E.GROUP_EPOCH_BUMPED, 3),
           ev(10_001, E.CG_MEMBER_ASSIGNMENT, member_id=K2, data={**owned(0, 1, 2, 3), "state": 1}),
           ev(40_001, E.CONSUMER_MEMBER_FENCED, member_id=K2,
              data={"fence_reason": "rebalance", "member_epoch": 2, "timeout_ms": 30_000}),
           ev(40_001, E.GROUP_EPOCH_BUMPED, 4),
           ev(40_002, E.CG_MEMBER_ASSIGNMENT, member_id=K2, data={"tombstone": True}),
           ev(40_501, E.CG_MEMBER_ASSIGNMENT, member_id=K1, data={**owned(0, 1, 2, 3), "member_epoch": 4})]
    machine = run(evs)
    last = [r for k, r in machine.outputs if k == OutputKind.REBALANCE and r["outcome"] == "stable"][-1]
    assert last["partitions_stopped"] == 4
    # each partition from 10,001 (the fence minus 30 s) to K1's record at 40,501: 30.5 s; from the
    # fence it would have been 0.5 s each
    assert last["partition_seconds_stopped"] == pytest.approx(4 * 30.5)
    assert last["partition_seconds_by_departed_member"] == {K2: pytest.approx(4 * 30.5)}


def test_a_new_groups_first_generation_stops_nothing_without_its_record():
    """Kafka 2.8+ logs "Assignment received" before the offsets topic has the generation's record,
    and the monitor of a group it has seen no offsets of yet does not wait for it (a real-Kafka bed
    run of 2.8.2 ended the first generation so). Nobody consumed before a new group's first
    generation: it stopped nothing, record or not. The next generation, whose previous assignment
    is now unknown, says so."""
    from state.local import run_events
    group = "k4-sc02-staggered-three"
    events = [e for e in capture_events(*capture_inputs("kafka-4.0")) if e.group == group
              and not (e.kind == E.GROUP_METADATA and e.generation == 1)]
    records = {r["generation"]: r for r in run_events(events)[OutputKind.REBALANCE]}
    assert (records[1]["partitions_stopped"], records[1]["partition_seconds_stopped"]) == (0, 0.0)
    assert records[1]["impact_unknown_reason"] is None
    assert records[2]["impact_unknown_reason"] == "the assignment of generation 1 was not seen"


@pytest.mark.parametrize("group", ["sc11-stuck-in-rebalance", "sc05b-poll-timeout-kafka-python"])
@pytest.mark.parametrize("batches", [3, 10, 40])
def test_a_removal_decided_before_its_rebalance_ends_is_not_charged_however_the_turns_fall(group, batches):
    """A rebalance-timeout removal's decision time comes before the rebalance it is part of
    completes: the removal is emitted then, uncharged (its cost is on the rebalance record).
    One turn used to apply the completion first and charge the held removal, turns that ended
    between the two did not: the replay's outputs depended on its time slices."""
    one = machine_outputs_in_batches("kafka-2.7", group)
    many = machine_outputs_in_batches("kafka-2.7", group, batches)
    assert as_sorted_json(many) == as_sorted_json(one)
    [stuck] = [r for k, r in one if k == OutputKind.REMOVAL and r["cause"] == "rebalance_timeout"]
    assert stuck["partition_seconds_stopped"] is None
    charged = [r for k, r in one if k == OutputKind.REBALANCE
               and stuck["member_id"] in (r["partition_seconds_by_departed_member"] or {})]
    assert charged and charged[0]["completed_at_ms"] > stuck["removed_at_ms"]


def test_a_rebalance_that_supersedes_one_without_an_assignment_is_measured_from_the_one_before():
    """A member joins while generation 3 waits for its leader's assignment (CompletingRebalance):
    Kafka logs "Preparing to rebalance ... with old generation 3", but generation 3 never gets an
    assignment or a record (a bed run of 4.4's cooperative scenario under load). The members still
    hold generation 2's assignment, which generation 4's record replaces: that rebalance is measured."""
    def member(mid: str, *parts: int) -> dict:
        return {"member_id": mid, "client_id": mid, "client_host": "/h", "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 30000, "partitions": [f"t:{p}" for p in parts]}

    def at(ts: int, kind: str, gen: int, source: str = E.SOURCE_LOG, **data) -> E.Event:
        return E.Event(ts_ms=ts, source=source, source_id=source, seq=ts, broker=1, cluster="c", group="g",
                       kind=kind, generation=gen, member_id=None, reason=data.pop("reason", None), data=data)

    def record(ts: int, gen: int, *members: dict) -> E.Event:
        return at(ts, E.GROUP_METADATA, gen, E.SOURCE_OFFSETS, protocol_type="consumer",
                  protocol="cooperative-sticky", leader="a", current_state_ts_ms=ts, members=list(members))

    machine = GroupStateMachine(GroupModel(cluster="c", group="g"))
    machine.apply_all([
        at(1_000, E.PREPARE_REBALANCE, 1, trigger="member_join", reason="Adding new member b"),
        at(1_100, E.JOIN_COMPLETE, 2), at(1_200, E.ASSIGNMENT_RECEIVED, 2, members=2),
        record(1_201, 2, member("a", 0, 1), member("b", 2, 3)),
        at(10_000, E.PREPARE_REBALANCE, 2, trigger="member_join", reason="Adding new member c"),
        at(10_100, E.JOIN_COMPLETE, 3),
        at(10_200, E.PREPARE_REBALANCE, 3, trigger="member_join", reason="Adding new member d"),
        at(10_500, E.JOIN_COMPLETE, 4), at(10_600, E.ASSIGNMENT_RECEIVED, 4, members=4),
        record(10_601, 4, member("a", 0, 1), member("b", 2), member("c"), member("d"))])
    records = {r["generation"]: r for k, r in machine.outputs if k == OutputKind.REBALANCE}
    assert records[3]["outcome"] == "superseded"
    last = records[4]
    assert (last["outcome"], last["previous_generation"], last["impact_unknown_reason"]) == ("stable", 3, None)
    # cooperative: b revokes t:3 at generation 4's end, for the follow-up to assign
    assert (last["partitions_stopped"], last["partitions_unassigned"], last["partitions_moved"]) == (0, 1, 1)
