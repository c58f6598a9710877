"""The coordinator stall and members that never stopped (docs/diagnosis.md): broker deaths read
from the brokers' own lines, the correlator's rule, the per-group verdict of a member back within a
heartbeat interval, and a real follower kill on Kafka 4.4.0 (tests/fixtures/kafka-4.4-follower-kill)."""
from __future__ import annotations

import json
from datetime import timezone
from pathlib import Path

import pytest

from state import events as E
from state.diagnosis.brokers import BrokerLog, broker_record
from state.diagnosis.correlate import correlate_all
from state.diagnosis.rules import DEFAULT_SETTINGS, REJOIN_FIELD
from streaming.app.local import run_local
from streaming.app.settings import LogInput, OffsetsInput
from streaming.logs.parser import OUTCOME_BROKER, parse_line, parse_line_detailed

UTC = timezone.utc
FOLLOWER_KILL = Path(__file__).resolve().parents[1] / "fixtures" / "kafka-4.4-follower-kill"
T0 = 1_796_000_000_000


# --- the lines -----------------------------------------------------------------------------------
@pytest.mark.parametrize("line, kind, broker, data", [
    ("[2026-12-02 00:43:09,469] WARN [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Connection to node 2 "
     "(/127.0.0.1:41107) could not be established. Node may not be available. (org.apache.kafka.clients.NetworkClient)",
     E.BROKER_UNREACHABLE, 1, {"subject": 2}),
    ("[2026-12-02 00:40:34,617] WARN [ReplicaFetcher replicaId=3, leaderId=5, fetcherId=1] Connection to node 5 "
     "(/10.0.0.5:9092) could not be established. Broker may not be available. (org.apache.kafka.clients.NetworkClient)",
     E.BROKER_UNREACHABLE, 3, {"subject": 5}),
    ("[2026-11-21 19:34:05,986] WARN [Controller id=1, targetBrokerId=2] Connection to node 2 (/127.0.0.1:19093) "
     "could not be established. Broker may not be available. (org.apache.kafka.clients.NetworkClient)",
     E.BROKER_UNREACHABLE, 1, {"subject": 2}),
    ("[2022-03-12 18:10:07,139] INFO [Partition __consumer_offsets-43 broker=3] Shrinking ISR from 3,1 to 3. "
     "Leader: (highWatermark: 115, endOffset: 120). Out of sync replicas: (brokerId: 1, endOffset: 115, "
     "lastCaughtUpTimeMs: 1647108577000). (kafka.cluster.Partition)",
     E.BROKER_OUT_OF_SYNC, 3, {"subject": 1, "partition": 43, "last_caught_up_ms": 1647108577000}),
    ("[2026-12-02 00:43:17,650] INFO [QuorumController id=100] Fencing broker 2 at epoch 29 because its session has "
     "timed out. (org.apache.kafka.controller.ReplicationControlManager)", E.BROKER_FENCED, 100, {"subject": 2}),
    ("[2026-11-21 19:28:13,326] INFO [Controller id=1] Newly added brokers: , deleted brokers: 2, bounced brokers: , "
     "all live brokers: 1 (kafka.controller.KafkaController)", E.BROKER_FENCED, 1, {"subject": 2}),
    ("[2026-12-02 00:36:16,107] INFO [BrokerServer id=2] Transition from SHUTDOWN to STARTING (kafka.server.BrokerServer)",
     E.BROKER_STARTING, 2, {}),
    ("[2026-11-21 19:33:11,214] INFO [BrokerServer id=1] Transition from STARTED to SHUTTING_DOWN "
     "(kafka.server.BrokerServer)", E.BROKER_SHUTTING_DOWN, 1, {}),
    ("[2026-11-21 19:34:05,628] INFO [KafkaServer id=2] shutting down (kafka.server.KafkaServer)",
     E.BROKER_SHUTTING_DOWN, 2, {}),
    ("[2026-11-21 19:21:14,208] INFO [KafkaServer id=1] started (kafka.server.KafkaServer)", E.BROKER_STARTED, 1, {}),
    # Strimzi's Kafka 4.x layout: short logger, whole seconds (said, as for the coordinator's lines)
    ("2026-12-02 00:43:09 WARN  [ReplicaFetcherThread-0-2] NetworkClient:1034 - [ReplicaFetcher replicaId=1, "
     "leaderId=2, fetcherId=0] Connection to node 2 (/127.0.0.1:41107) could not be established. Node may not be "
     "available.", E.BROKER_UNREACHABLE, 1, {"subject": 2, E.TS_PRECISION: 1000}),
])
def test_broker_lines_become_broker_events(line, kind, broker, data):
    parsed = parse_line_detailed(line, source_id="b", seq=7, tz=UTC)
    assert parsed.outcome == OUTCOME_BROKER and isinstance(parsed.result, list)
    (event,) = parsed.result
    assert (event.kind, event.broker, event.data, event.group) == (kind, broker, data, E.BROKER_EVENTS_GROUP)


@pytest.mark.parametrize("line", [
    # an ISR shrink of another topic says nothing about a coordinator
    "[2026-12-02 00:43:09,469] INFO [Partition orders-3 broker=1] Shrinking ISR from 1,2 to 1. Leader: (highWatermark: "
    "1, endOffset: 2). Out of sync replicas: (brokerId: 2, endOffset: 1). (kafka.cluster.Partition)",
    # a client of the broker's own (a producer, the share persister) is no peer's replica fetcher
    "[2026-12-02 00:43:09,469] WARN [Persister broker=1]Connection to node 2 (/127.0.0.1:1) could not be established. "
    "Node may not be available. (org.apache.kafka.clients.NetworkClient)",
    "[2026-12-02 00:43:09,469] INFO [BrokerServer id=2] Transition from STARTING to STARTED (kafka.server.BrokerServer)",
    "[2026-12-02 00:36:17,624] INFO [KafkaRaftServer nodeId=2] Kafka Server started (kafka.server.KafkaRaftServer)",
    "[2026-12-02 00:43:09,469] INFO [KafkaServer id=2] shut down completed (kafka.server.KafkaServer)",
    "[2026-12-02 00:43:09,469] INFO [KafkaServer id=2] Starting controlled shutdown (kafka.server.KafkaServer)",
])
def test_other_lines_with_a_broker_marker_yield_nothing(line):
    assert parse_line(line, source_id="b", seq=1, tz=UTC) is None


# --- deaths ----------------------------------------------------------------------------------------
def _b(ts: int, kind: str, broker: int, **data) -> dict:
    return broker_record("c", ts, kind, broker, data)


def test_a_peer_that_lost_it_dates_a_death_and_a_start_without_shutdown_confirms_it():
    log = BrokerLog([_b(T0 + 1000, E.BROKER_UNREACHABLE, 1, subject=2),
                     _b(T0 + 2000, E.BROKER_UNREACHABLE, 1, subject=2),      # the same death
                     _b(T0 + 60_000, E.BROKER_STARTING, 2)])
    (death,) = log.deaths("c")
    assert (death.broker, death.at_ms) == (2, T0 + 1000)
    assert "with no shutdown before" in death.evidence
    assert log.death_before("c", T0 + 20_000, 60_000) == death
    assert log.death_before("c", T0 + 500, 60_000) is None          # before it
    assert log.death_before("c", T0 + 70_000, 60_000) is None       # long after
    assert log.deaths("other") == []


def test_a_controlled_shutdown_is_no_death_and_a_later_crash_is():
    log = BrokerLog([_b(T0, E.BROKER_SHUTTING_DOWN, 2),
                     _b(T0 + 400, E.BROKER_UNREACHABLE, 1, subject=2),       # its peers lose it: planned
                     _b(T0 + 30_000, E.BROKER_STARTING, 2),
                     _b(T0 + 31_000, E.BROKER_STARTED, 2),
                     _b(T0 + 500_000, E.BROKER_OUT_OF_SYNC, 1, subject=2, partition=3,
                        last_caught_up_ms=T0 + 480_000)])
    (death,) = log.deaths("c")
    assert (death.broker, death.at_ms) == (2, T0 + 480_000)         # its last catch-up
    assert "dropped it from the ISR of __consumer_offsets-3" in death.evidence


def test_pruning_keeps_each_brokers_newest_start_and_shutdown():
    log = BrokerLog([_b(T0, E.BROKER_SHUTTING_DOWN, 2), _b(T0 + 10, E.BROKER_UNREACHABLE, 1, subject=2)])
    log.prune(T0 + 1_000_000)
    assert [r["kind"] for r in log.records] == [E.BROKER_SHUTTING_DOWN]
    again = BrokerLog.from_state(json.loads(json.dumps(log.to_state())))
    assert again.records == log.records


# --- the rule ------------------------------------------------------------------------------------
def _removal(group: str, member: str, at: int, root: str, coordinator: int = 1, alive: int | None = None) -> dict:
    """An expiry decided in its group; each member on a host of its own (no host-wide cause)."""
    rec = {"cluster": "c", "group": group, "member_id": member, "client_id": member, "client_host": f"/{member}",
           "group_instance_id": None, "protocol": "classic", "removed_at_ms": at, "cause": "heartbeat_expiry",
           "root_cause": root, "group_root_cause": root, "evidence": "per group", "root_cause_confidence": "medium",
           "root_cause_confidence_reason": "x", "coordinator": coordinator, "host_members": 1, "seq": 1,
           "session_timeout_ms": 6000}
    if alive is not None:
        rec[REJOIN_FIELD] = alive
    return rec


DEATH = [_b(T0, E.BROKER_UNREACHABLE, 1, subject=2)]


def test_members_of_several_groups_expiring_together_after_a_death_are_the_stall():
    out = correlate_all([_removal("g1", "m1", T0 + 18_000, "process_crash"),
                         _removal("g2", "m2", T0 + 19_500, "process_crash")], DEFAULT_SETTINGS, DEATH)
    assert [r["root_cause"] for r in out] == ["coordinator_wide", "coordinator_wide"]
    assert all(r["group_root_cause"] == "process_crash" for r in out)
    assert "broker 2 died 18.0 s before" in out[0]["evidence"] and "g1, g2" in out[0]["evidence"]
    # the same without the death: a crash each (two hosts, two groups: no burst either)
    alone = correlate_all([_removal("g1", "m1", T0 + 18_000, "process_crash"),
                           _removal("g2", "m2", T0 + 19_500, "process_crash")], DEFAULT_SETTINGS)
    assert [r["root_cause"] for r in alone] == ["process_crash", "process_crash"]


def test_one_member_that_never_stopped_after_a_death_is_the_stall_alone():
    (rec,) = correlate_all([_removal("g1", "m1", T0 + 11_000, "unknown", alive=300)], DEFAULT_SETTINGS, DEATH)
    assert (rec["root_cause"], rec["root_cause_confidence"]) == ("coordinator_wide", "medium")
    assert "it never stopped, its coordinator did" in rec["evidence"]
    (crash,) = correlate_all([_removal("g1", "m1", T0 + 11_000, "process_crash")], DEFAULT_SETTINGS, DEATH)
    assert crash["root_cause"] == "process_crash"        # one group, and it did not come back
    (unknown,) = correlate_all([_removal("g1", "m1", T0 + 11_000, "unknown", alive=300)], DEFAULT_SETTINGS)
    assert unknown["root_cause"] == "unknown"             # no death: the group's own verdict


def test_a_member_back_after_the_stall_can_have_ended_paused_on_its_own():
    # the stall ends by the death + coordinator_stall_max (30 s); a removed member is back by then
    # plus a heartbeat interval (3 s, classic)
    out = correlate_all([_removal("g1", "m1", T0 + 18_000, "unknown", alive=100),
                         _removal("g2", "m2", T0 + 18_500, "unknown", alive=0),
                         _removal("g3", "m3", T0 + 19_000, "process_pause", alive=20_000),    # back at 39 s
                         _removal("g4", "m4", T0 + 19_500, "process_pause", alive=6_000)],    # back at 25.5 s
                        DEFAULT_SETTINGS, DEATH)
    assert [r["root_cause"] for r in out] == ["coordinator_wide", "coordinator_wide", "process_pause",
                                              "coordinator_wide"]
    assert "g3" not in out[0]["evidence"] and "g4" in out[0]["evidence"]
    assert "before the stall can have ended" in out[3]["evidence"]


def test_expiries_long_after_the_death_or_of_another_cluster_are_not_its():
    late = correlate_all([_removal("g1", "m1", T0 + 90_000, "process_crash"),
                          _removal("g2", "m2", T0 + 90_500, "process_crash")], DEFAULT_SETTINGS, DEATH)
    assert [r["root_cause"] for r in late] == ["process_crash", "process_crash"]
    other = [broker_record("elsewhere", T0, E.BROKER_UNREACHABLE, 1, {"subject": 2})]
    (rec,) = correlate_all([_removal("g1", "m1", T0 + 11_000, "unknown", alive=300)], DEFAULT_SETTINGS, other)
    assert rec["root_cause"] == "unknown"


# --- a real follower kill ------------------------------------------------------------------------
def test_a_real_follower_kill_is_the_stall_of_the_surviving_coordinator():
    out = run_local([LogInput(path=str(FOLLOWER_KILL / "broker1-server.log")),
                     LogInput(path=str(FOLLOWER_KILL / "broker2-server.log"))],
                    [OffsetsInput(path=str(FOLLOWER_KILL / "offsets-topic.jsonl"))])
    removals = sorted(out["removal"], key=lambda r: r["removed_at_ms"])
    truth = [json.loads(line) for line in (FOLLOWER_KILL / "ground-truth.jsonl").read_text().splitlines()]
    killed = next(e["ts_ms"] for e in truth if e["action"] == "kill_broker")
    # the README's three removals: fk-consumer-6's fence, fk-rdk-7's two old member ids
    assert [(r["group"], r["cause"]) for r in removals] == [
        ("fk-consumer-6", "heartbeat_expiry"), ("fk-rdk-7", "heartbeat_expiry"), ("fk-rdk-7", "heartbeat_expiry")]
    for r in removals:
        assert r["root_cause"] == "coordinator_wide", r["evidence"]
        assert r["group_root_cause"] == "unknown" and r[REJOIN_FIELD] is not None   # never stopped
        assert r["evidence"].startswith("broker 2 died ")
        assert 0 < r["removed_at_ms"] - killed < 20_000
    # its partitions stopped at its removal, not a session before (it was consuming until then)
    fenced = removals[0]
    rebalances = [b for b in out["rebalance"] if b["group"] == "fk-consumer-6"]
    charged = [b for b in rebalances if (b.get("partition_seconds_by_departed_member") or {}).get(fenced["member_id"])]
    assert charged and all(b["partition_seconds_by_departed_member"][fenced["member_id"]] < 6 * 4 for b in charged)


# --- never stopped, per group ---------------------------------------------------------------------
def _ev(ts: int, kind: str, member: str | None = None, generation: int | None = None, **data) -> E.Event:
    return E.Event(group="g", ts_ms=ts, source=E.SOURCE_LOG, source_id="b1", seq=ts, kind=kind, broker=1,
                   generation=generation, member_id=member, data=data)


def _consumer_group(fence_at: int, back_after: int, loaded_at: int | None = None) -> dict:
    from state.local import run_events
    evs = [_ev(T0, E.CONSUMER_MEMBER_JOINED, "m1", protocol="consumer"), _ev(T0 + 1, E.GROUP_EPOCH_BUMPED, None, 1),
           _ev(T0 + 2, E.CONSUMER_MEMBER_JOINED, "m2", protocol="consumer"), _ev(T0 + 3, E.GROUP_EPOCH_BUMPED, None, 2),
           _ev(fence_at, E.CONSUMER_MEMBER_FENCED, "m1", fence_reason="session"),
           _ev(fence_at + 1, E.GROUP_EPOCH_BUMPED, None, 3),
           _ev(fence_at + back_after, E.CONSUMER_MEMBER_JOINED, "m1", protocol="consumer"),
           _ev(fence_at + back_after + 1, E.GROUP_EPOCH_BUMPED, None, 4)]
    if loaded_at is not None:
        evs.append(_ev(loaded_at, E.GROUP_LOADED, None, 2))
    (rec,) = run_events(sorted(evs, key=E.Event.sort_key))["removal"]
    return rec


def test_a_member_back_within_a_heartbeat_never_stopped_whatever_explains_it():
    back = _consumer_group(T0 + 20_000, 300)
    assert (back["root_cause"], back["root_cause_confidence"], back[REJOIN_FIELD]) == ("unknown", "low", 300)
    assert "it never stopped" in back["evidence"]
    paused = _consumer_group(T0 + 20_000, 8_000)              # back after a heartbeat interval (5 s)
    assert (paused["root_cause"], paused[REJOIN_FIELD]) == ("process_pause", 8_000)
    moved = _consumer_group(T0 + 20_000, 300, loaded_at=T0 + 18_000)   # its coordinator moved just before
    assert moved["root_cause"] == "coordinator_wide" and "it never stopped" in moved["evidence"]
    crash_near_move = _consumer_group(T0 + 20_000, 8_000, loaded_at=T0 + 18_000)   # one member: its own stop
    assert crash_near_move["root_cause"] == "process_pause"


def test_the_broker_records_survive_a_restart_of_the_driver():
    """The correlator keeps the broker records in the driver's state file: a death seen before a
    restart explains a removal decided after it. A state file of a release before them loads."""
    from state.diagnosis.correlate import Correlator
    before = Correlator(DEFAULT_SETTINGS)
    before.note_brokers(DEATH)
    before.add([_removal("g1", "m1", T0 + 11_000, "unknown", alive=300)])
    assert before.advance(T0 + 12_000) == []                 # still held
    after = Correlator(DEFAULT_SETTINGS)
    after.load_state(json.loads(json.dumps(before.to_state())))
    (rec,) = after.advance(2 ** 62)
    assert rec["root_cause"] == "coordinator_wide" and rec["evidence"].startswith("broker 2 died")
    old = Correlator(DEFAULT_SETTINGS)
    old.load_state({"pending": [], "recent": [], "clock_ms": T0})
    assert old.brokers.records == [] and old.advance(T0 + 1) == []


def test_the_controllers_fence_dates_a_death_when_no_peer_said_it_first():
    only = BrokerLog([_b(T0 + 9_000, E.BROKER_FENCED, 100, subject=2)])
    (death,) = only.deaths("c")
    assert (death.broker, death.at_ms) == (2, T0 + 9_000) and "controller 100 fenced" in death.evidence
    both = BrokerLog([_b(T0 + 1_000, E.BROKER_UNREACHABLE, 1, subject=2), _b(T0 + 9_000, E.BROKER_FENCED, 100, subject=2)])
    assert [(d.broker, d.at_ms) for d in both.deaths("c")] == [(2, T0 + 1_000)]


def test_members_that_never_stopped_are_no_host_failure():
    """Two members of one host removed together and back at once, with no broker death known: their
    host did not fail either (on Kafka 4.0.2 a follower that led no partition died unseen by its
    peers, and the host-wide rule called the stall's two librdkafka members host_wide)."""
    pair = [_removal("g1", "m1", T0 + 18_000, "unknown", alive=0), _removal("g1", "m2", T0 + 18_001, "unknown", alive=0)]
    for r in pair:
        r["client_host"], r["host_members"] = "/10.0.0.1", 2
    assert [r["root_cause"] for r in correlate_all(pair, DEFAULT_SETTINGS)] == ["unknown", "unknown"]


def test_a_shutdown_before_the_brokers_restart_explains_nothing_after_it():
    """4.0.2 matrix: the coordinator broker stopped with SIGTERM (failover), started again, then
    killed as a follower 90 s later: its earlier controlled shutdown must not make that death a
    planned stop."""
    log = BrokerLog([_b(T0, E.BROKER_SHUTTING_DOWN, 1), _b(T0 + 500, E.BROKER_UNREACHABLE, 2, subject=1),
                     _b(T0 + 20_000, E.BROKER_STARTING, 1),
                     _b(T0 + 90_000, E.BROKER_UNREACHABLE, 2, subject=1),          # killed
                     _b(T0 + 300_000, E.BROKER_UNREACHABLE, 2, subject=1)])        # the same death
    assert [(d.broker, d.at_ms) for d in log.deaths("c")] == [(1, T0 + 90_000)]
    # a long planned stop stays planned until the broker starts again
    long_stop = BrokerLog([_b(T0, E.BROKER_SHUTTING_DOWN, 1), _b(T0 + 500_000, E.BROKER_UNREACHABLE, 2, subject=1)])
    assert long_stop.deaths("c") == []
