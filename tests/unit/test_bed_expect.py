"""The test bed's expectations for share and streams groups (testbed/judge/expect.py),
derived from real 4.2.2 and 4.4.0 brokers' lines (tests/fixtures/kafka-4.*-modern) and what the
capture did to the members (its ground truth), never from the monitor.

The brokers bump a share or streams group's epoch without a "Bumped" line when a member is
fenced or leaves, and a share group's once more with no member change when its share partitions
are initialised (4.2: also right after a fence): the rebalances follow the broker's lines, not
one per "Bumped" line."""
from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from testbed.judge.expect import (
    Expected, ExpRemoval, broker_client_id, epoch_line_rebalances, expected_removals, expected_stops, group_lines
)
from testbed.judge.ownership import Ownership
from testbed.judge.verdict import judge
from tests.support.capture_expectations import FIXTURES


def _capture(name: str) -> tuple[list[Any], list[dict[str, Any]]]:
    shipped = [SimpleNamespace(text=text, broker_id=b, read_ms=None)
               for b in (1, 2) for text in (FIXTURES / name / f"broker{b}-server.log").read_text().splitlines()]
    truth = [json.loads(line) for line in (FIXTURES / name / "ground-truth.jsonl").read_text().splitlines()]
    return shipped, truth


def _rebalances(name: str, group: str, protocol: str) -> list[tuple]:
    shipped, truth = _capture(name)
    timeline = [e for e in truth if e.get("group") in (group, None)]
    return [(r.generation, r.trigger, r.outcomes, r.start_line)
            for r in epoch_line_rebalances(group_lines(shipped, group), group, timeline, protocol)]


@pytest.mark.parametrize("name,group,after_fence", [
    ("kafka-4.4-modern", "k440-share", []),
    # 4.2 checks for unassigned initialised share partitions on every heartbeat: the fenced
    # member's partitions are, so the next heartbeat bumps again (with a "Bumped" line)
    ("kafka-4.2-modern", "k422-share", ["group_epoch_bump"]),
])
def test_share_group_rebalances_follow_the_brokers_lines(name, group, after_fence):
    got = _rebalances(name, group, "share")
    # a and b join; the broker bumps once more by itself (share partitions initialised); b is
    # fenced; c joins; a and c leave
    assert [t for _, t, _, _ in got] == ["member_join", "member_join", "group_epoch_bump", "heartbeat_expiry",
                                         *after_fence, "member_join", "member_leave", "member_leave"]
    generations = [g for g, _, _, _ in got]
    assert generations == list(range(generations[0], generations[0] + len(got)))
    fence = next(r for r in got if r[1] == "heartbeat_expiry")
    assert "fenced from the group because the member session expired" in fence[3]
    assert "stable" in fence[2]
    if after_fence:
        assert "superseded" in fence[2]       # the next bump may come before the member reconciles
    assert "left the share group" in got[-1][3] and got[-1][2] == ("empty",)
    assert all("empty" not in outcomes for _, _, outcomes, _ in got[:-1])


@pytest.mark.parametrize("name,group", [("kafka-4.4-modern", "k440-streams"), ("kafka-4.2-modern", "k422-streams")])
def test_streams_group_rebalances_and_removals(name, group):
    got = _rebalances(name, group, "streams")
    # a joins, b joins, b (killed) is fenced, a (closed: Streams sends no leave) is fenced
    assert [(t, o) for _, t, o, _ in got] == [("member_join", ("stable",)), ("member_join", ("stable", "superseded")),
                                              ("heartbeat_expiry", ("stable", "superseded")),
                                              ("heartbeat_expiry", ("empty",))]
    assert [g for g, _, _, _ in got] == [2, 3, 4, 5]     # a new streams group's first bump is to 2
    _, truth = _capture(name)
    timeline = [e for e in truth if e.get("group") == group]
    removals = expected_removals(timeline, "4.4.0", "streams", 60_000)
    # b's kill is a crash; a's close looks the same to the brokers: a crash, rated low
    assert [(r.client_id, r.cause, r.root_cause, r.action, r.confidence) for r in removals] == [
        (f"{group}-b-StreamThread-1-consumer", "heartbeat_expiry", "process_crash", "kill", None),
        (f"{group}-a-StreamThread-1-consumer", "heartbeat_expiry", "process_crash", "leave", "low")]


def test_a_streams_instance_is_named_by_its_thread_consumer():
    assert broker_client_id({"client_id": "g-a", "library": "java-streams"}) == "g-a-StreamThread-1-consumer"
    assert broker_client_id({"client_id": "g-a", "library": "java-share"}) == "g-a"


def test_a_removal_of_another_protocol_than_the_groups_fails_the_verdict():
    exp = Expected("g", "share", removals=[ExpRemoval("g-b", "heartbeat_expiry", "process_crash", "kill", 1000)],
                   removal_lines={"m": [7000]})
    rec = {"group": "g", "client_id": "g-b", "member_id": "m", "removed_at_ms": 7000, "cause": "heartbeat_expiry",
           "root_cause": "process_crash"}

    def removal_failures(protocol):
        return [f for f in judge("4.4.0", "share_group", exp, {"member_removals": [{**rec, "protocol": protocol}]},
                                 {}).failures if f[0] == "removals"]
    assert removal_failures("share") == []
    assert removal_failures("consumer") == [("removals", "g-b: protocol consumer, expected share")]


def test_a_killed_members_stop_is_judged_against_the_kill_and_the_survivors_assignment():
    """docs/impact.md on the bed: the killed member's partitions stopped at the kill and were
    assigned when the survivor's client said so; the monitor's share of the rebalance for that
    member's removal must be within the tolerance per partition."""
    timeline = [
        _callback("a", 1000, "assigned", ["t-0", "t-1"]), _callback("b", 1000, "assigned", ["t-2", "t-3"]),
        {"action": "kill", "client_id": "g-a", "group": "g", "ts_ms": 10_000},
        _callback("b", 13_100, "revoked", ["t-2", "t-3"]),
        _callback("b", 13_600, "assigned", ["t-0", "t-1", "t-2", "t-3"]),
    ]
    stops = expected_stops(timeline, Ownership(timeline).gaps)
    assert [(s.client_id, s.stopped_ms, s.partitions, s.reassigned_ms) for s in stops] == [
        ("g-a", 10_000, ["t-0", "t-1"], {"t-0": 13_600, "t-1": 13_600})]
    assert stops[0].group_partitions == 4
    exp = Expected("g", "classic", removals=[ExpRemoval("g-a", "heartbeat_expiry", "process_crash", "kill", 10_000)],
                   removal_lines={"m-a": [13_000]}, stops=stops, gaps=Ownership(timeline).gaps)
    removal = {"group": "g", "client_id": "g-a", "member_id": "m-a", "removed_at_ms": 13_000, "protocol": "classic",
               "cause": "heartbeat_expiry", "root_cause": "process_crash"}

    def verdict(charged: float, stopped: int = 4):
        rebalance = {"group": "g", "partition_seconds_by_departed_member": {"m-a": charged}, "assignor": "range",
                     "partitions_stopped": stopped, "partition_seconds_stopped": charged + 2 * 0.5}
        return judge("4.4.0", "kill", exp, {"member_removals": [removal], "rebalances": [rebalance]}, {})

    def killed_member(v):
        return [f[1] for f in v.failures if f[0] == "impact" and "g-a" in f[1]]
    good = verdict(2 * 3.55)          # 3.6 s per partition in truth: 50 ms off each
    assert [f for f in good.failures if f[0] == "impact"] == [] and good.impact_checked == 1
    assert good.impact_error_s == 0.05
    bad = verdict(2 * 0.55)           # counted from the expiry: 3 s per partition missing
    assert len(killed_member(bad)) == 1 and "g-a's 2 partitions" in killed_member(bad)[0]
    only_moved = verdict(2 * 3.55, stopped=2)   # range revokes all 4 partitions, not only the dead member's
    assert killed_member(only_moved) == ["the rebalance after g-a's kill stopped 2 partitions; range predicts 4"]


def _callback(cid: str, ts_ms: int, callback: str, partitions: list) -> dict:
    return {"action": "callback", "client_id": f"g-{cid}", "group": "g", "ts_ms": ts_ms, "callback": callback,
            "partitions": partitions}


def _record(generation: int, previous: int, stopped: int, seconds: float, completed: int,
            assignor: str | None = "range") -> dict:
    """A stable rebalance record as the judge reads it (its impact fields)."""
    return {"generation": generation, "previous_generation": previous, "outcome": "stable", "assignor": assignor,
            "partitions_stopped": stopped, "partition_seconds_stopped": seconds, "completed_at_ms": completed}


def test_a_member_killed_in_the_millisecond_of_its_assignment_owned_it():
    """2.8.2 kill in CI: a's assignment callback and its kill in one millisecond, the kill first in
    the timeline (the callbacks are appended after the bed's actions). The callback ran before the
    kill: a's partitions stopped at the kill, and the group owned all four."""
    timeline = [
        {"action": "kill", "client_id": "g-a", "group": "g", "ts_ms": 5_899},
        _callback("b", 5_882, "assigned", ["t-2", "t-3"]), _callback("a", 5_899, "assigned", ["t-0", "t-1"]),
        _callback("b", 8_902, "revoked", ["t-2", "t-3"]),
        _callback("b", 8_925, "assigned", ["t-0", "t-1", "t-2", "t-3"]),
    ]
    stops = expected_stops(timeline, Ownership(timeline).gaps)
    assert [(s.client_id, s.stopped_ms, s.partitions, s.group_partitions) for s in stops] == [
        ("g-a", 5_899, ["t-0", "t-1"], 4)]


def test_the_stops_are_what_the_members_callbacks_say():
    """An eager client revokes all it owns and is given its whole assignment; a cooperative one names
    only what changes. A stop runs from the owner's revocation (or its kill or leave) to the next
    owner's assignment; a partition revoked and given back to the same member stopped too. The
    timeline is sorted first (Runner.record_callbacks adds the callbacks at the end)."""
    eager = [_callback("a", 1000, "assigned", ["t-0", "t-1"]),
             {"action": "leave", "client_id": "g-b", "group": "g", "ts_ms": 4000},
             _callback("a", 2000, "revoked", ["t-0", "t-1"]),
             _callback("a", 2500, "assigned", ["t-0"]), _callback("b", 2500, "assigned", ["t-1"]),
             _callback("b", 4100, "revoked", ["t-1"]), _callback("a", 4100, "revoked", ["t-0"]),
             _callback("a", 4600, "assigned", ["t-0", "t-1"])]
    got = [(g.partition, g.stopped_ms, g.resumed_ms, g.owner, g.how) for g in Ownership(eager).gaps]
    assert got == [("t-0", 2000, 2500, "g-a", "revoked"), ("t-1", 2000, 2500, "g-a", "revoked"),
                   ("t-0", 4100, 4600, "g-a", "revoked"), ("t-1", 4000, 4600, "g-b", "leave")]
    cooperative = [_callback("a", 1000, "assigned", ["t-0", "t-1"]), _callback("b", 3000, "assigned", []),
                   _callback("a", 3000, "revoked", ["t-1"]), _callback("b", 3400, "assigned", ["t-1"]),
                   {"action": "kill", "client_id": "g-b", "group": "g", "ts_ms": 5000},
                   _callback("a", 8000, "assigned", ["t-1"])]
    cooperative_gaps = [(g.partition, g.stopped_ms, g.resumed_ms, g.how) for g in Ownership(cooperative).gaps]
    assert cooperative_gaps == [("t-1", 3000, 3400, "revoked"), ("t-1", 5000, 8000, "kill")]
    assert Ownership(cooperative, until_ms=5000).consumed() == {"t-0", "t-1"}


def test_the_monitors_stops_are_judged_against_the_callbacks():
    """join_leave/kill/cooperative/kip848: the records' stopped partitions in all are the stops the
    callbacks show, their partition-seconds within the tolerance per partition; a stable rebalance
    the monitor did not measure fails."""
    timeline = [_callback("a", 1000, "assigned", ["t-0", "t-1"]), _callback("a", 3000, "revoked", ["t-1"]),
                _callback("b", 4000, "assigned", ["t-1"])]
    exp = Expected("g", "classic", gaps=Ownership(timeline).gaps)

    def impact(*records):
        return [f[1] for f in judge("4.4.0", "cooperative", exp, {"rebalances": list(records)}, {}).failures
                if f[0] == "impact"]
    join = {"generation": 2, "outcome": "stable", "partitions_stopped": 0, "partition_seconds_stopped": 0.0}
    assert impact(join, {"generation": 3, "outcome": "stable", "partitions_stopped": 1,
                         "partition_seconds_stopped": 1.2}) == []
    assert impact(join, {"generation": 3, "outcome": "stable", "partitions_stopped": 2,
                         "partition_seconds_stopped": 2.0}) == [
        "the rebalance records stopped 2 partitions in all; the members' callbacks show 1 (1 stops: revoked)"]
    assert impact(join, {"generation": 3, "outcome": "stable", "partitions_stopped": 1,
                         "partition_seconds_stopped": 3.0}) == [
        "the rebalance records count 3.000 partition-seconds stopped, the members' callbacks 1.000 (1 stops)"]
    assert impact({**join, "partitions_stopped": None, "trigger": "member_join",
                   "impact_unknown_reason": "no record"}, {"generation": 3, "outcome": "stable",
                                                         "partitions_stopped": 1, "partition_seconds_stopped": 1.0}) == [
        "rebalance of generation 2 (member_join) not measured: no record"]


def test_a_partition_that_stopped_twice_counts_once_per_record():
    """A KIP-848 record carries the stops of the superseded epochs before it: a partition that
    moved twice in its window is one partition of it (with both stops' seconds); in two records'
    windows, one of each."""
    timeline = [_callback("a", 1000, "assigned", ["t-0"]), _callback("a", 2000, "revoked", ["t-0"]),
                _callback("b", 2200, "assigned", ["t-0"]), _callback("b", 3000, "revoked", ["t-0"]),
                _callback("c", 3100, "assigned", ["t-0"])]
    exp = Expected("g", "consumer", gaps=Ownership(timeline).gaps)

    def found(*ends):
        records = [{"generation": n, "outcome": "stable", "completed_at_ms": end, "partitions_stopped": 1,
                    "partition_seconds_stopped": 0.3 / len(ends)} for n, end in enumerate(ends)]
        v = judge("4.4.0", "kip848", exp, {"rebalances": records}, {})
        return v.stops_expected, [f[1] for f in v.failures if f[0] == "impact"]
    assert found(3050) == (1, [])                  # one record for both: the partition once
    assert found(2150, 3050)[0] == 2               # a record after each: twice

# A CI run's consumer group (Kafka 4.4.0, scenario kip848): b is killed and fenced when its
# session expires; the fence's epoch bump was logged 10 ms after the fence, in the millisecond the
# bed sent a's leave. The broker's lines and the bed's actions as they were.
KIP848_LINES = [
    ("18:18,732", "Member CHzbuMSNQQ2ZwTuBU7M4xA joins the consumer group using the consumer protocol."),
    ("18:18,747", "Bumped group epoch to 2 with metadata hash -7330219749643732322."),
    ("18:18,790", "Member mVZjA/8gRmqW+TPJvPLyRA joins the consumer group using the consumer protocol."),
    ("18:18,790", "Bumped group epoch to 3 with metadata hash -7330219749643732322."),
    ("18:19,938", "Member rqevUoZMQRywQ2lw4vTDAw joins the consumer group using the consumer protocol."),
    ("18:19,939", "Bumped group epoch to 4 with metadata hash -7330219749643732322."),
    ("18:26,279", "Member mVZjA/8gRmqW+TPJvPLyRA fenced from the group because the member session expired."),
    ("18:26,289", "Bumped group epoch to 5 with metadata hash -7330219749643732322."),
    ("18:26,398", "Member CHzbuMSNQQ2ZwTuBU7M4xA left the consumer group."),
    ("18:26,398", "Bumped group epoch to 6 with metadata hash -7330219749643732322."),
    ("18:26,461", "Member rqevUoZMQRywQ2lw4vTDAw left the consumer group."),
    ("18:26,461", "Bumped group epoch to 7 with metadata hash 0."),
]
KIP848_ACTIONS = [("start", "a", 898469), ("start", "b", 898472), ("start", "j", 898475), ("joined", "a", 898797),
                  ("joined", "b", 900275), ("joined", "j", 900130), ("kill", "b", 900309), ("leave", "a", 906289),
                  ("closed", "a", 906409), ("leave", "j", 906453), ("closed", "j", 906480)]


def test_a_consumer_bump_is_caused_by_the_action_before_its_member_change():
    from testbed.judge.expect import consumer_rebalances
    group = "m440-kip848"
    shipped = [SimpleNamespace(text=f"[2026-11-26 21:{ts}] INFO [GroupCoordinator id=2 topic=__consumer_offsets "
                                    f"partition=4] [GroupId {group}] {text} "
                                    f"(org.apache.kafka.coordinator.group.GroupMetadataManager)",
                               broker_id=2, read_ms=None) for ts, text in KIP848_LINES]
    timeline = [{"action": action, "group": group, "ts_ms": 1795727000000 + ms, "member": f"{group}-{m}",
                 "client_id": f"{group}-{m}", "library": "java" if m == "j" else "confluent", "protocol": "consumer"}
                for action, m, ms in KIP848_ACTIONS]
    lines = group_lines(shipped, group)
    assert lines[7].ts_ms == timeline[7]["ts_ms"]     # the fence's bump and a's leave: the same millisecond
    got = [(r.generation, r.trigger) for r in consumer_rebalances(lines, group, timeline, "consumer")]
    assert got == [(2, "member_join"), (3, "member_join"), (4, "member_join"), (5, "heartbeat_expiry"),
                   (6, "member_leave"), (7, "member_leave")]


# The matrix's kip848_partitions on Kafka 4.4.0 (2026-11-29): a confluent and a java member of a
# consumer group, stable over 4 partitions; the bed increases the topic to 8. The coordinator bumps
# the epoch with a new metadata hash and no member change, 459 ms after the bed's CreatePartitions.
PARTITIONS_LINES = [
    ("34:40,206", "Member wgpOJxy3TRm4WApRx0BTlA joins the consumer group using the consumer protocol."),
    ("34:40,232", "Bumped group epoch to 2 with metadata hash -1812816209846802631."),
    ("34:40,910", "Member rvx8BAkjThStzDRk5g80xQ joins the consumer group using the consumer protocol."),
    ("34:40,910", "Bumped group epoch to 3 with metadata hash -1812816209846802631."),
    ("34:42,265", "Bumped group epoch to 4 with metadata hash -1855615060159874812."),
    ("34:43,018", "Member wgpOJxy3TRm4WApRx0BTlA left the consumer group."),
    ("34:43,019", "Bumped group epoch to 5 with metadata hash -1855615060159874812."),
    ("34:43,154", "Member rvx8BAkjThStzDRk5g80xQ left the consumer group."),
    ("34:43,155", "Bumped group epoch to 6 with metadata hash 0."),
]
PARTITIONS_ACTIONS = [("start", "a", 480034), ("start", "b", 480043), ("joined", "a", 480276), ("joined", "b", 481054),
                      ("add_partitions", None, 481806), ("partitions_added", None, 481855),
                      ("reassigned", "a", 482318), ("reassigned", "b", 482822), ("leave", "a", 482860),
                      ("closed", "a", 483035), ("leave", "b", 483134), ("closed", "b", 483270)]


def _consumer_lines(group: str, lines: list, day: str = "2026-11-29 15", sep: str = " ") -> list:
    return group_lines([SimpleNamespace(text=f"[{day}:{ts}] INFO [GroupCoordinator id=1 topic=__consumer_offsets "
                                             f"partition=2] [GroupId {group}]{sep}{text} "
                                             f"(org.apache.kafka.coordinator.group.GroupMetadataManager)",
                                        broker_id=1, read_ms=None) for ts, text in lines], group)


def _partitions_timeline(group: str) -> list[dict]:
    """PARTITIONS_ACTIONS as Runner.record wrote them."""
    out = []
    for action, m, ms in PARTITIONS_ACTIONS:
        e: dict[str, Any] = {"action": action, "group": group, "ts_ms": 1795966000000 + ms}
        if m is None:
            e.update(groups=[group], topic=f"{group}-data", partitions=8)
        else:
            e.update(member=f"{group}-{m}", client_id=f"{group}-{m}", library="java" if m == "b" else "confluent",
                     protocol="consumer")
        out.append(e)
    return out


def test_more_partitions_for_a_consumer_groups_topic_is_a_metadata_change():
    """The bump the bed's add_partitions caused is `metadata_change`; the joins before it and the
    leaves after it keep their triggers, the last leave empties the group."""
    from testbed.judge.expect import consumer_rebalances, expected
    group = "m440-kip848-partitions"
    lines = _consumer_lines(group, PARTITIONS_LINES)
    assert lines[4].ts_ms - (1795966000000 + 481806) == 459
    timeline = _partitions_timeline(group)
    got = [(r.generation, r.trigger, r.cause) for r in consumer_rebalances(lines, group, timeline, "consumer")]
    assert got == [(2, "member_join", f"start {group}-b"), (3, "member_join", f"start {group}-b"),
                   (4, "metadata_change", f"add_partitions {group}-data"),
                   (5, "member_leave", f"leave {group}-a"), (6, "member_leave", f"leave {group}-b")]
    shipped = [SimpleNamespace(text=ln.text, broker_id=1, read_ms=None) for ln in lines]
    exp = expected("4.4.0", group, timeline, shipped)
    assert [(r.trigger, r.outcomes) for r in exp.rebalances][2:] == [
        ("metadata_change", ("stable", "superseded")),      # the first leave came 754 ms after it
        ("member_leave", ("stable", "superseded")), ("member_leave", ("empty",))]
    assert [(r.client_id, r.cause) for r in exp.removals] == [(f"{group}-a", "leave_group"),
                                                               (f"{group}-b", "leave_group")]


def test_an_add_partitions_entry_names_its_groups():
    """The runner's entry names the subscribed groups in `groups` (its `group` is the first): a
    group named only there takes it as the cause of its bump, a group not named does not."""
    from testbed.judge.expect import consumer_rebalances
    group = "m440-kip848-partitions"
    lines = _consumer_lines(group, PARTITIONS_LINES)
    timeline = _partitions_timeline(group)
    for e in timeline:
        if e["action"] in ("add_partitions", "partitions_added"):
            e.update(group="another-group", groups=["another-group", group])
    assert consumer_rebalances(lines, group, timeline, "consumer")[2].trigger == "metadata_change"
    for e in timeline:
        if e["action"] in ("add_partitions", "partitions_added"):
            e.update(groups=["another-group"])
    # not this group's topic: the last action before the bump is b's start, whose join bumped at 3
    assert consumer_rebalances(lines, group, timeline, "consumer")[2].trigger == "member_join"


@pytest.mark.parametrize("protocol,trigger", [("consumer", "metadata_change"), ("streams", "metadata_change"),
                                              ("classic", "unknown"), ("share", "unknown")])
def test_add_partitions_is_a_cause_action_with_a_metadata_change_trigger(protocol, trigger):
    """KIP-848 consumer and streams coordinators bump the epoch themselves for a subscribed topic's
    new partitions. A classic group's leader rejoins, which the broker's reason names (CLIENT_OWN);
    share groups' bumps are read from their lines: the action says nothing for them."""
    from testbed.judge.expect import CAUSE_ACTIONS, action_trigger
    assert "add_partitions" in CAUSE_ACTIONS
    assert action_trigger({"action": "add_partitions", "group": "g", "groups": ["g"], "topic": "t"},
                          protocol) == trigger


def test_a_streams_bump_after_more_partitions_is_a_metadata_change_once():
    """A streams group's Bumped line with no join of its heartbeat, the first after the bed gave
    its topic more partitions: metadata_change; a later such bump is the broker's own again."""
    group = "g"
    lines = _consumer_lines(group, [
        ("00:01,000", "[MemberId m1] Member joins the streams group."),
        ("00:01,001", "[MemberId m1] Bumped streams group epoch to 2 with metadata hash 5 and validated topic epoch 0."),
        ("00:05,000", "[MemberId m1] Bumped streams group epoch to 3 with metadata hash 7 and validated topic epoch 0."),
        ("00:09,000", "[MemberId m1] Bumped streams group epoch to 4 with metadata hash 7 and validated topic epoch 0."),
    ], day="2026-01-01 00", sep="")
    t0 = lines[0].ts_ms - 1000
    timeline = [{"action": "start", "group": group, "ts_ms": t0, "client_id": "g-a", "library": "java-streams",
                 "protocol": "streams"},
                {"action": "add_partitions", "group": group, "groups": [group], "topic": "g-data", "ts_ms": t0 + 4000}]
    got = [(r.generation, r.trigger) for r in epoch_line_rebalances(lines, group, timeline, "streams")]
    assert got == [(2, "member_join"), (3, "metadata_change"), (4, "group_epoch_bump")]


def test_members_of_one_host_killed_together_are_host_wide_in_the_truth():
    """expect._killed_together: a host's every member of the group killed within 2 s is one
    host-wide cause; a kill next to them on a host with a survivor stays a crash."""
    def start(cid, host):
        return {"action": "start", "group": "g", "client_id": cid, "library": "kafka-python", "host": host,
                "ts_ms": 0}

    def act(action, cid, ts):
        return {"action": action, "group": "g", "client_id": cid, "library": "kafka-python", "ts_ms": ts}
    timeline = [start("a", "/127.0.0.2"), start("b", "/127.0.0.2"), start("c", "/127.0.0.1"), start("d", "/127.0.0.1"),
                *(act("joined", x, 10) for x in "abcd"), act("kill", "a", 100), act("kill", "b", 150),
                act("kill", "c", 200), act("leave", "d", 9000)]
    removals = expected_removals(timeline, "4.4.0", "classic", 20_000)
    assert [(r.client_id, r.root_cause) for r in removals] == [
        ("a", "host_wide"), ("b", "host_wide"), ("c", "process_crash"), ("d", "graceful_shutdown")]
    later = [dict(e, ts_ms=5000) if e.get("client_id") == "b" and e["action"] == "kill" else e for e in timeline]
    assert [r.root_cause for r in expected_removals(later, "4.4.0", "classic", 20_000)][:2] == \
        ["process_crash", "process_crash"]      # 4.9 s apart: two crashes


def test_members_killed_together_are_one_eager_rebalance_over_what_the_group_owned_before_the_first():
    """host_pair: three of four members killed within 2 s; the one rebalance that follows stops
    every partition the group owned before the first kill, whichever kill the stop is charged to."""
    timeline = [_callback(x, 1000, "assigned", [f"t-{i}"]) for i, x in enumerate("abcd")] + [
        {"action": "kill", "client_id": f"g-{x}", "group": "g", "ts_ms": 10_000 + 100 * i} for i, x in enumerate("abc")
    ] + [_callback("d", 14_000, "revoked", ["t-3"]), _callback("d", 14_500, "assigned", ["t-0", "t-1", "t-2", "t-3"])]
    stops = expected_stops(timeline, Ownership(timeline).gaps)
    assert [(s.client_id, s.group_partitions) for s in stops] == [("g-a", 4), ("g-b", 4), ("g-c", 4)]


def test_a_member_still_syncing_when_the_leader_rejoins_waits_through_that_rebalance():
    """CI, 2.8.2 join_leave: kafka-python's leader rejoined (leader_rejoin) before a had received its
    first assignment. The eager rebalance stopped every partition, a's two included: they waited
    through it, though no callback shows them stopping. They count where a was first given them."""
    timeline = [_callback("b", 1194, "assigned", ["t-2", "t-3"]), _callback("b", 1759, "revoked", ["t-2", "t-3"]),
                _callback("a", 1783, "assigned", ["t-0", "t-1"]), _callback("b", 1790, "assigned", ["t-2", "t-3"]),
                {"action": "leave", "client_id": "g-a", "group": "g", "ts_ms": 1821},
                _callback("a", 1882, "revoked", ["t-0", "t-1"]), _callback("b", 2304, "revoked", ["t-2", "t-3"]),
                _callback("b", 2315, "assigned", ["t-0", "t-1", "t-2", "t-3"])]
    owners = Ownership(timeline)
    exp = Expected("g", "classic", gaps=owners.gaps, first_given=owners.first_given)

    records = [_record(1, 0, 0, 0.0, 1190), _record(2, 1, 4, 2.188, 1776), _record(3, 2, 4, 1.686, 2310)]
    verdict = judge("2.8.2", "join_leave", exp, {"rebalances": records}, {})
    assert [f for f in verdict.failures if f[0] == "impact"] == []
    assert (verdict.stops_expected, verdict.stops_found) == (8, 8)


def test_a_member_that_missed_two_assignments_waits_through_both_rebalances():
    """CI, 2.8.2 join_leave on a loaded machine: kafka-python's leader b re-joined twice (generations
    2 and 3, leader_rejoin) before its own client took an assignment; the broker had given it t-2 and
    t-3 at generations 1 and 2 (range: a t-0/t-1, as a's callbacks show), b's client first took
    them after generation 3 and consumed nothing before. Each eager rebalance stopped all four:
    t-2 and t-3 waited through both, so they count in each record, not only where b was first given
    them. The callbacks (ms after 1795854490000) and the monitor's records of that run."""
    timeline = [_callback("a", 1212, "revoked", []), _callback("b", 1238, "revoked", []),
                _callback("a", 2452, "assigned", ["t-0", "t-1"]), _callback("a", 3056, "revoked", ["t-0", "t-1"]),
                _callback("a", 3068, "assigned", ["t-0", "t-1"]), _callback("a", 3777, "revoked", ["t-0", "t-1"]),
                _callback("a", 3789, "assigned", ["t-0", "t-1"]), _callback("b", 3794, "assigned", ["t-2", "t-3"]),
                {"action": "leave", "client_id": "g-a", "group": "g", "ts_ms": 3823},
                _callback("a", 3904, "revoked", ["t-0", "t-1"]), _callback("b", 4322, "revoked", ["t-2", "t-3"]),
                {"action": "leave", "client_id": "g-b", "group": "g", "ts_ms": 4349},
                _callback("b", 4349, "assigned", ["t-0", "t-1", "t-2", "t-3"]),
                _callback("b", 4411, "revoked", ["t-0", "t-1", "t-2", "t-3"])]
    owners = Ownership(timeline)
    exp = Expected("g", "classic", gaps=owners.gaps, first_given=owners.first_given)

    records = [_record(1, 0, 0, 0.0, 2410, assignor=None), _record(2, 1, 4, 2.224, 3061),
               _record(3, 2, 4, 2.832, 3781), _record(4, 3, 4, 1.686, 4331),
               {"generation": 5, "previous_generation": 4, "outcome": "empty", "assignor": None,
                "partitions_stopped": 0, "partition_seconds_stopped": 0.0, "completed_at_ms": None}]
    verdict = judge("2.8.2", "join_leave", exp, {"rebalances": records}, {})
    assert [f for f in verdict.failures if f[0] == "impact"] == []
    assert (verdict.stops_expected, verdict.stops_found) == (12, 12)
    # a record that also counted b's partitions at generation 1 (nobody consumed them before) is wrong
    verdict = judge("2.8.2", "join_leave", exp, {"rebalances": [_record(1, 0, 2, 2.0, 2410), *records[1:]]}, {})
    assert (verdict.stops_expected, verdict.stops_found) == (12, 14)


def test_an_assignment_callback_closes_the_window_of_the_rebalance_it_follows():
    """kafka-python's leader rejoined 70 ms after generation 1 completed, before any client took
    that assignment: the callbacks 7 ms after generation 2 completed are generation 2's (a 2.8.2
    kill scenario in CI, 2026-11-29). A KIP-848 record completes after the callback."""
    from testbed.judge.verdict import record_window
    classic = [(109274, "classic"), (109344, "classic"), (112384, "classic")]
    assert record_window(classic, 109351) == 1
    assert record_window(classic, 112387) == 2
    assert record_window(classic, 200000) == 3            # after every record: none yet
    consumer = [(5000, "consumer"), (5300, "consumer")]
    assert record_window(consumer, 4800) == 0              # its record came 200 ms after the callback
    assert record_window(consumer, 5200) == 0


def test_a_static_members_kill_and_close_read_from_its_commits():
    """A static kafka-python member killed or closed, restarted at once or not: the commits tell the
    kill (process_crash, low) from the close (graceful_shutdown, medium); another client's static
    member reports no commits for the bed to time its stop by (no confidence expected)."""
    def timeline(action: str, restart_after_ms: int | None, library: str = "kafka-python") -> list[dict]:
        member = {"client_id": "g-a", "group": "g", "instance_id": "g-i-a", "library": library,
                  "session_timeout_ms": 10_000}
        t = [{**member, "action": "start", "ts_ms": 0}, {**member, "action": "joined", "ts_ms": 1_000},
             {**member, "action": action, "ts_ms": 5_000}]
        if restart_after_ms is not None:
            t.append({**member, "action": "start", "ts_ms": 5_000 + restart_after_ms})
        return t

    def got(*args) -> list[tuple]:
        return [(r.cause, r.root_cause, r.action, r.confidence)
                for r in expected_removals(timeline(*args), "4.4.0", "classic", 60_000)]
    assert got("kill", 100) == [("static_member_fenced", "process_crash", "kill+restart", "low")]
    assert got("leave", 100) == [("static_member_fenced", "graceful_shutdown", "leave+restart", "medium")]
    assert got("kill", None) == [("heartbeat_expiry", "process_crash", "kill", "low")]
    assert got("leave", 20_000) == [("heartbeat_expiry", "graceful_shutdown", "leave", "medium")]
    assert got("leave", None, "confluent") == [("heartbeat_expiry", "graceful_shutdown", "leave", None)]


def test_a_follower_kill_expects_the_stall_of_every_member_the_broker_removed():
    """tests/fixtures/kafka-4.4-follower-kill: broker 2 killed, the follower of every group's offsets
    partition. The broker's removals in the window after the kill that the bed did not make (no
    member was touched) are the coordinator stall, naming broker 2."""
    from testbed.judge.expect import stall_removals
    shipped, truth = _capture("kafka-4.4-follower-kill")
    groups = ["fk-classic-8", "fk-rdk-7", "fk-consumer-6"]
    timeline = [dict(e, groups=groups) if e["action"] == "kill_broker" else e for e in truth]
    clients = {e["client_id"] for e in timeline if e.get("client_id")}
    got = {g: stall_removals([e for e in timeline if e.get("group") in (g, None)], group_lines(shipped, g), g, clients)
           for g in groups}
    assert got["fk-classic-8"] == []
    assert [(r.client_id, (r.member_id or "")[:10], r.root_cause, r.evidence_has) for r in got["fk-rdk-7"]] == [
        ("fk-rdk-7-b", "fk-rdk-7-b", "coordinator_wide", "broker 2 died"),
        ("fk-rdk-7-a", "fk-rdk-7-a", "coordinator_wide", "broker 2 died")]
    (fenced,) = got["fk-consumer-6"]
    assert (fenced.member_id, fenced.cause) == ("Whd28BgHRbGlG/OAt9QQ2g", "heartbeat_expiry")
    # the judge matches it by its member id and reads its evidence
    exp = Expected("fk-consumer-6", "consumer", removals=[fenced],
                   removal_lines={"Whd28BgHRbGlG/OAt9QQ2g": [fenced.at_ms]})
    rec = {"group": "fk-consumer-6", "member_id": "Whd28BgHRbGlG/OAt9QQ2g", "client_id": "fk-consumer-6-b",
           "removed_at_ms": fenced.at_ms, "cause": "heartbeat_expiry", "root_cause": "coordinator_wide",
           "protocol": "consumer", "evidence": "broker 2 died 10.0 s before (...)"}
    ok = judge("4.4.0", "follower_kill", exp, {"rebalances": [], "member_removals": [rec], "anomalies": []}, {})
    assert not [f for f in ok.failures if f[0] in ("cause", "removals")]
    wrong = judge("4.4.0", "follower_kill", exp, {"rebalances": [], "member_removals": [
        dict(rec, evidence="3 groups of coordinator broker 1 lost members")], "anomalies": []}, {})
    assert any("does not say 'broker 2 died'" in text for _, text in wrong.failures)


def test_a_frozen_members_comeback_is_measured_from_its_expiry_as_the_monitor_does():
    """rejoin_at_once on 4.4.0 in CI (pause window 40 s): frozen at 0, expired at the 6 s session
    timeout, resumed 35 s after that and assigned again at 41.2 s: back 35.2 s after the expiry,
    a pause; measured from the freeze it would have read as a crash."""
    def entry(action, ts, **extra):
        return {"action": action, "group": "g", "client_id": "a", "library": "kafka-python", "ts_ms": ts, **extra}
    timeline = [entry("start", 0, session_timeout_ms=6000), entry("joined", 100), entry("pause", 1000),
                entry("resume", 42_000), entry("reassigned", 42_200)]
    assert [r.root_cause for r in expected_removals(timeline, "4.4.0", "classic", 40_000)] == ["process_pause"]
    assert [r.root_cause for r in expected_removals(timeline, "4.4.0", "classic", 35_000)] == ["process_crash"]
    no_session = [dict(e, session_timeout_ms=None) if e["action"] == "start" else e for e in timeline]
    assert [r.root_cause for r in expected_removals(no_session, "4.4.0", "classic", 40_000)] == ["process_crash"]


def test_a_close_whose_leave_never_reached_the_coordinator_triggers_an_expiry():
    """2.8.2 failover: member a was closed as its coordinator moved; its LeaveGroup never reached
    the new coordinator, which expired it 4 s later: the rebalance's trigger is the expiry."""
    from testbed.judge.expect import GLine, classic_rebalances
    g = "m282-failover"
    timeline = [{"action": "start", "group": g, "client_id": f"{g}-a", "ts_ms": 0},
                {"action": "joined", "group": g, "client_id": f"{g}-a", "ts_ms": 1000},
                {"action": "leave", "group": g, "client_id": f"{g}-a", "ts_ms": 5000}]

    def prepare(ts, how):
        return GLine(ts, 2, f"[GroupCoordinator 2]: Preparing to rebalance group {g} in state PreparingRebalance "
                            f"with old generation 1 (__consumer_offsets-0) (reason: removing member {g}-a-1f13 {how})")
    (expired,) = classic_rebalances([prepare(9000, "on heartbeat expiration")], g, timeline)
    (left,) = classic_rebalances([prepare(5100, "on LeaveGroup")], g, timeline)
    assert (expired.trigger, left.trigger) == ("heartbeat_expiry", "member_leave")


def test_partitions_given_to_a_client_that_never_took_them_wait_through_each_eager_rebalance():
    """Matrix, 4.2.2 kill: a (t-0, t-1) killed; at generation 2 the broker gave them to the leader b,
    whose client rejoined (leader_rejoin) before its callback ran, so b first took them after
    generation 3. t-0 and t-1 waited through both eager rebalances and both records count them:
    8 stops, where the callbacks alone show 6. The callbacks and records of that run (ms after
    1796190360000)."""
    timeline = [_callback("b", 6222, "assigned", ["t-2"]), _callback("c", 6222, "assigned", ["t-3"]),
                _callback("a", 6237, "assigned", ["t-0", "t-1"]),
                {"action": "kill", "client_id": "g-a", "group": "g", "ts_ms": 6259},
                _callback("c", 9248, "revoked", ["t-3"]), _callback("b", 9263, "revoked", ["t-2"]),
                _callback("c", 9275, "assigned", ["t-2", "t-3"]), _callback("c", 9788, "revoked", ["t-2", "t-3"]),
                _callback("b", 9802, "assigned", ["t-0", "t-1"]), _callback("c", 9802, "assigned", ["t-2", "t-3"])]
    owners = Ownership(timeline)
    exp = Expected("g", "classic", gaps=owners.gaps, first_given=owners.first_given)

    records = [_record(1, 0, 0, 0.0, 6213), _record(2, 1, 4, 6.184, 9267), _record(3, 2, 4, 2.06, 9793)]
    verdict = judge("4.2.2", "kill", exp, {"rebalances": records}, {})
    assert (verdict.stops_expected, verdict.stops_found) == (8, 8)
    assert [f for f in verdict.failures if f[0] == "impact" and "stopped" in f[1]] == []
    # a record of generation 3 that left t-0 and t-1 out would be wrong
    verdict = judge("4.2.2", "kill", exp, {"rebalances": [*records[:2], _record(3, 2, 2, 1.0, 9793)]}, {})
    assert (verdict.stops_expected, verdict.stops_found) == (8, 6)


def coordinator_line(ts_ms, broker, partition, group, text):
    """A 4.x group coordinator's line about `group`, as the judge reads it."""
    from testbed.judge.expect import GLine
    return GLine(ts_ms, broker, f"[GroupCoordinator id={broker} topic=__consumer_offsets partition={partition}] "
                                f"[GroupId {group}] {text}")


def test_a_bump_that_fences_the_last_member_empties_the_group_whatever_the_bed_did():
    """CI, 4.4.0 follower_kill[cg]: the stall fenced both members of a consumer group (epochs 4 and
    5); the second bump left it empty, and the monitor's record says so. Then both rejoined."""
    from testbed.judge.expect import consumer_rebalances
    g = "m440-follower-kill-cg1"
    t = 1796192640000

    def line(ms, text):
        return coordinator_line(t + ms, 1, 3, g, text)
    lines = [line(575, "Member pXII joins the consumer group using the consumer protocol."),
             line(579, "Bumped group epoch to 2 with metadata hash 63."),
             line(768, "Member vj7y joins the consumer group using the consumer protocol."),
             line(768, "Bumped group epoch to 3 with metadata hash 63."),
             line(17608, "Member vj7y fenced from the group because the member session expired."),
             line(17610, "Bumped group epoch to 4 with metadata hash 63."),
             line(17913, "Member pXII fenced from the group because the member session expired."),
             line(17913, "Bumped group epoch to 5 with metadata hash 0."),
             line(19578, "Member vj7y joins the consumer group using the consumer protocol."),
             line(19578, "Bumped group epoch to 6 with metadata hash 63.")]
    timeline = [{"action": "start", "group": g, "client_id": f"{g}-{m}", "protocol": "consumer", "ts_ms": t}
                for m in "ab"] + [{"action": "kill_broker", "group": None, "groups": [g], "broker_id": 2,
                                   "ts_ms": t + 9000}]
    got = [(r.generation, r.outcomes) for r in consumer_rebalances(lines, g, timeline, "consumer")]
    assert got[2:] == [(4, ("stable", "superseded")), (5, ("empty",)), (6, ("stable",))]


def test_a_line_less_bump_no_member_reached_before_the_next_may_be_superseded():
    """Matrix, 4.2.2 follower_kill[sh]: the stall fenced b of a share group (the bump to epoch 4
    logs no line); b rejoined 3 s later (epoch 5) and a went from epoch 3 to 5. The monitor's
    record of epoch 4 says superseded; nothing but the lines shows it."""
    g = "m422-follower-kill-sh0"
    t = 1796206978000

    def line(ms, text):
        return coordinator_line(t + ms, 2, 7, g, text)
    lines = [line(217, "Member iIzA joins the share group using the share protocol."),
             line(218, "Bumped group epoch to 1 with metadata hash -3."),
             line(225, "Member iIzA new assignment state: epoch=1, previousEpoch=0, state=STABLE, assignedPartitions=[]."),
             line(438, "Member mlXG joins the share group using the share protocol."),
             line(438, "Bumped group epoch to 2 with metadata hash -3."),
             line(439, "Member mlXG new assignment state: epoch=2, previousEpoch=0, state=STABLE, assignedPartitions=[]."),
             line(589, "Member iIzA new assignment state: epoch=2, previousEpoch=1, state=STABLE, assignedPartitions=[]."),
             line(1066, "Bumped group epoch to 3 with metadata hash -3."),
             line(1068, "Member iIzA new assignment state: epoch=3, previousEpoch=2, state=STABLE, assignedPartitions=[x-1]."),
             line(1148, "Member mlXG new assignment state: epoch=3, previousEpoch=2, state=STABLE, assignedPartitions=[x-0]."),
             line(8687, "Member mlXG fenced from the group because the member session expired."),
             line(11715, "Member mlXG joins the share group using the share protocol."),
             line(11721, "Bumped group epoch to 5 with metadata hash -3."),
             line(11737, "Member mlXG new assignment state: epoch=5, previousEpoch=0, state=STABLE, assignedPartitions=[x-0]."),
             line(11739, "Member iIzA new assignment state: epoch=5, previousEpoch=3, state=STABLE, assignedPartitions=[x-1].")]
    timeline = [{"action": "start", "group": g, "client_id": f"{g}-{m}", "library": "java-share", "protocol": "share",
                 "ts_ms": t} for m in "ab"] + [{"action": "kill_broker", "group": None, "groups": [g], "broker_id": 3,
                                                 "ts_ms": t + 2536}]
    got = [(r.generation, r.trigger, r.outcomes) for r in epoch_line_rebalances(lines, g, timeline, "share")]
    assert got[3:] == [(4, "heartbeat_expiry", ("stable", "superseded")), (5, "member_join", ("stable",))]
    assert got[2] == (3, "group_epoch_bump", ("stable",))


def test_a_member_at_risk_fails_the_verdict_unless_the_bed_stopped_its_polling():
    """Issue 54: only a member whose poll loop stopped heads for a poll timeout; any other group the
    watch saw with a member at risk fails its scenario."""
    watch = SimpleNamespace(most_at_risk=lambda group: (1.0, 5000) if group == "g" else None,
                            first_reached=lambda *a: None)
    kill = ExpRemoval("g-a", "heartbeat_expiry", "process_crash", "kill", 1000)
    slow = ExpRemoval("g-b", "poll_timeout", "slow_processing", "stop_polling", 1000)

    def at_risk_failures(group: str, *removals: ExpRemoval) -> list:
        exp = Expected(group, "classic", removals=list(removals))
        return [f for f in judge("4.4.0", "kill", exp, {}, {}, watch=watch).failures if f[0] == "at_risk"]
    assert len(at_risk_failures("g", kill)) == 1
    assert at_risk_failures("g", kill, slow) == []
    assert at_risk_failures("other", kill) == []


def test_a_bump_one_member_reached_only_after_the_next_may_be_superseded():
    """4.4.0 follower_kill[sh] (lines of a matrix run, the second member's line on epoch 3 moved
    after the next bump): a join's epoch whose members did not all reach it before the broker
    bumped again may end superseded; the one before it, which both reached, ends stable."""
    g = "m440-follower-kill-sh4"
    t = 1796390658000

    def line(ms, text):
        return coordinator_line(t + ms, 2, 3, g, text)
    lines = [line(444, "Member Of4R joins the share group using the share protocol."),
             line(450, "Bumped group epoch to 2 with metadata hash 35."),
             line(454, "Member Of4R new assignment state: epoch=2, previousEpoch=0, state=STABLE, assignedPartitions=[]."),
             line(702, "Bumped group epoch to 3 with metadata hash 35."),
             line(702, "Member V9js joins the share group using the share protocol."),
             line(702, "Member V9js new assignment state: epoch=2, previousEpoch=0, state=STABLE, assignedPartitions=[]."),
             line(1779, "Member Of4R new assignment state: epoch=3, previousEpoch=2, state=STABLE, assignedPartitions=[x-1]."),
             line(17072, "Bumped group epoch to 4 with metadata hash 35."),
             line(17073, "Member V9js new assignment state: epoch=4, previousEpoch=2, state=STABLE, assignedPartitions=[x-0]."),
             line(17084, "Member Of4R new assignment state: epoch=4, previousEpoch=3, state=STABLE, assignedPartitions=[x-1].")]
    timeline = [{"action": "start", "group": g, "client_id": f"{g}-{m}", "library": "java-share", "protocol": "share",
                 "ts_ms": t} for m in "ab"] + [{"action": "kill_broker", "group": None, "groups": [g], "broker_id": 1,
                                                 "ts_ms": t + 2592}]
    got = [(r.generation, r.trigger, r.outcomes) for r in epoch_line_rebalances(lines, g, timeline, "share")]
    assert got == [(2, "member_join", ("stable", "superseded")),       # the next bump 252 ms after
                   (3, "member_join", ("stable", "superseded")),       # V9js never reached epoch 3
                   (4, "group_epoch_bump", ("stable",))]
    # with V9js's line on epoch 3 before the next bump, epoch 3 ends stable
    lines.insert(7, line(1805, "Member V9js new assignment state: epoch=3, previousEpoch=2, state=STABLE, "
                                "assignedPartitions=[x-0]."))
    outcomes = [(r.generation, r.outcomes) for r in epoch_line_rebalances(lines, g, timeline, "share")]
    assert outcomes[1] == (3, ("stable",))
