"""Members about to be removed for a poll timeout (state/at_risk.py): records waiting on their
partitions and no commit of them for more than half their rebalance timeout."""
from __future__ import annotations

from typing import Any

import pytest

from state.at_risk import AtRisk, members_at_risk, named_partition

NOW = 1_000_000
TIMEOUT = 30_000          # max.poll.interval.ms: at risk after 15 s without a commit


def _snapshot(state: str = "Stable", **member: Any) -> dict[str, Any]:
    m = {"member_id": "m-1", "client_id": "app", "partitions": ["t:0", "t:1"], "rebalance_timeout_ms": TIMEOUT,
         **member}
    return {"state": state, "state_since_ms": NOW - 600_000, "members": [m]}


def _ends(**ends: int):
    return lambda tp: ends.get(f"{tp[0]}{tp[1]}")


def test_a_member_with_records_waiting_and_no_commit_for_over_half_its_timeout_is_at_risk():
    committed = {("t", 0): (100, NOW - 16_000), ("t", 1): (50, NOW - 20_000)}
    got = members_at_risk(_snapshot(), committed, _ends(t0=180, t1=90), NOW)
    assert got == [AtRisk("m-1", "app", waiting_partitions=2, silent_ms=16_000, rebalance_timeout_ms=TIMEOUT)]


def test_a_recent_commit_on_a_waiting_partition_keeps_it_safe():
    committed = {("t", 0): (100, NOW - 14_000), ("t", 1): (50, NOW - 60_000)}
    assert members_at_risk(_snapshot(), committed, _ends(t0=180, t1=90), NOW) == []


def test_an_idle_member_is_never_at_risk_however_long_it_did_not_commit():
    """librdkafka commits only offsets that changed: an idle consumer commits nothing, for hours."""
    committed = {("t", 0): (100, NOW - 3_600_000), ("t", 1): (50, NOW - 3_600_000)}
    assert members_at_risk(_snapshot(), committed, _ends(t0=100, t1=50), NOW) == []


def test_only_the_partitions_with_records_waiting_count():
    """t:1 idle (committed at its end) long ago; t:0 waiting, committed 10 s ago: safe. The idle
    partition's old commit does not make the member look stalled."""
    committed = {("t", 0): (100, NOW - 10_000), ("t", 1): (50, NOW - 900_000)}
    assert members_at_risk(_snapshot(), committed, _ends(t0=500, t1=50), NOW) == []


@pytest.mark.parametrize("state", ["PreparingRebalance", "CompletingRebalance", "Empty", "Dead"])
def test_members_of_a_group_that_is_not_stable_are_not_judged(state):
    committed = {("t", 0): (100, NOW - 60_000)}
    assert members_at_risk(_snapshot(state), committed, _ends(t0=500), NOW) == []


def test_the_silence_counts_from_the_assignment_not_before_it():
    """The group became Stable 5 s ago: a partition the member just got has not been silent for
    the 60 s since its last commit by someone else."""
    snapshot = dict(_snapshot(), state_since_ms=NOW - 5_000)
    committed = {("t", 0): (100, NOW - 60_000)}
    assert members_at_risk(snapshot, committed, _ends(t0=500), NOW) == []
    assert members_at_risk(snapshot, committed, _ends(t0=500), NOW + 11_000)[0].silent_ms == 16_000


@pytest.mark.parametrize("member", [{"rebalance_timeout_ms": None}, {"partitions": None}, {"partitions": []},
                                    {"partitions": ["AAAAAAAAAAAAAAAAAAAAAA:0"]}])
def test_members_without_a_timeout_or_named_partitions_are_not_judged(member):
    committed = {("t", 0): (100, NOW - 60_000)}
    assert members_at_risk(_snapshot(**member), committed, _ends(t0=500), NOW) == []


def test_an_unsampled_partition_or_one_never_committed_is_not_evidence():
    assert members_at_risk(_snapshot(), {("t", 0): (100, NOW - 60_000)}, _ends(), NOW) == []
    assert members_at_risk(_snapshot(), {}, _ends(t0=500, t1=500), NOW) == []


def test_partition_names():
    assert named_partition("orders:3") == ("orders", 3)
    assert named_partition("a:b:12") == ("a:b", 12)
    assert named_partition("orders") is None and named_partition(":3") is None and named_partition("t:x") is None


def test_the_silence_counts_from_the_coordinators_last_change():
    """No commit can be made while a group has no coordinator: a killed coordinator's group is
    silent until the new one has loaded it (its first line, 5 s ago), and that silence is not the
    members' poll loops'."""
    snapshot = dict(_snapshot(), coordinators=[[NOW - 900_000, 2], [NOW - 5_000, 1]])
    committed = {("t", 0): (100, NOW - 30_000)}
    assert members_at_risk(snapshot, committed, _ends(t0=500), NOW) == []
    assert members_at_risk(snapshot, committed, _ends(t0=500), NOW + 11_000)[0].silent_ms == 16_000


TOPIC_ID = "q1mV0tRzSQ6d3bL5xY2m8w"          # a Kafka Uuid as the offsets records write it


def test_a_kip_848_member_is_judged_through_its_topics_names():
    """A consumer-protocol member's assignment names its topics by id, its commits by name: with
    the sampler's metadata ({id: name}) it is judged like a classic member; without it, not."""
    snapshot = dict(_snapshot(partitions=[f"{TOPIC_ID}:0", f"{TOPIC_ID}:1"]), protocol="consumer")
    committed = {("t", 0): (100, NOW - 16_000), ("t", 1): (50, NOW - 20_000)}
    got = members_at_risk(snapshot, committed, _ends(t0=180, t1=90), NOW, topic_names={TOPIC_ID: "t"})
    assert [(r.member_id, r.waiting_partitions, r.silent_ms) for r in got] == [("m-1", 2, 16_000)]
    assert members_at_risk(snapshot, committed, _ends(t0=180, t1=90), NOW) == []
    classic = dict(snapshot, protocol="classic")       # a classic group's topic names are names
    assert members_at_risk(classic, committed, _ends(t0=180, t1=90), NOW, topic_names={TOPIC_ID: "t"}) == []


def test_a_commit_of_unknown_time_is_no_evidence_of_a_silence():
    """After a restart the lag book holds offsets fetched from the cluster (OffsetFetch) with commit
    time 0 for the groups whose commits the query will not read again: how old such a commit is
    is not known, so a partition whose newest commit is one is not judged (CI, 4.4.0 kip848: the
    monitor killed and restarted mid-scenario flagged every member of a healthy group)."""
    committed = {("t", 0): (100, 0), ("t", 1): (50, 0)}
    assert members_at_risk(_snapshot(), committed, _ends(t0=180, t1=90), NOW) == []
    committed[("t", 1)] = (50, NOW - 20_000)                    # a decoded commit again: judged
    assert [r.waiting_partitions for r in members_at_risk(_snapshot(), committed, _ends(t0=180, t1=90), NOW)] == [1]
