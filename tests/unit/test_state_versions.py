"""The group state's stored form is versioned: every older version loads, a newer one is refused
with a message that says so (docs/design.md, "State versions")."""
from __future__ import annotations

import dataclasses
import json

import pytest

from state.model import (
    PACKED, STATE_VERSION, VERSION_KEY, GroupModel, HeldRemoval, Member, OpenRebalance, pack, unpack,
)


def _model() -> GroupModel:
    m = GroupModel(cluster="c", group="g", state="Stable", generation=3)
    m.members["m1"] = Member(member_id="m1", client_id="c1", partitions=["t:0"])
    m.open_rebalance = OpenRebalance(protocol="classic", previous_generation=3, started_at_ms=10, trigger="member_join",
                                     trigger_member="m2", reason_text=None, coordinator=1)
    m.held_removals = [HeldRemoval(rec={"member_id": "m0"}, decide_at=99)]
    return m


def test_round_trip_carries_the_version():
    m = _model()
    raw = json.loads(unpack(m.to_json()))
    assert raw[VERSION_KEY] == STATE_VERSION
    assert GroupModel.from_json(m.to_json()) == m


def test_version_1_without_a_key_loads():
    raw = json.loads(unpack(_model().to_json()))
    del raw[VERSION_KEY]
    assert GroupModel.from_json(json.dumps(raw)) == _model()


def test_a_version_1_model_as_2a45599_wrote_it_loads():
    """Every field that commit's GroupModel had, no version key. (The real v1 models sit in the
    Spark state store of tests/fixtures/checkpoint-v1, which tests/spark/test_checkpoint_compat.py
    resumes.)"""
    v1 = {"checked_generation": None, "cluster": "default", "commits_total": 4, "coordinator": 2,
          "coordinator_moves": [], "generation": 1, "generation_checks": {}, "group": "sc01-single-join-leave",
          "held_removals": [], "invalid_transitions": 0, "last_commit_ms": 1795288985000,
          "last_emitted_generation": 1, "last_event_ms": 1795288985000, "leader": "c-1",
          "members": {"c-1": {"client_host": "/127.0.0.1", "client_id": "sc01-c1", "group_instance_id": None,
                              "has_assignment_record": False, "member_epoch": None, "member_id": "c-1",
                              "member_state": None, "partitions": ["sc01:0"], "rebalance_timeout_ms": 300000,
                              "session_timeout_ms": 10000}},
          "members_generation": 1, "open_rebalance": None, "partition_commits": {"sc01:0": 1795288985000},
          "pending_consumer_trigger": None, "protocol": "classic", "protocol_type": "consumer",
          "rebalance_starts": [1795288979000], "rebalances_total": 1, "recent_joins": [], "removals_total": 0,
          "seen_sources": ["log", "offsets"], "selected_protocol": "range", "skew_probe": {}, "source_mismatches": 0,
          "state": "Stable", "state_since_ms": 1795288985000, "target_assignment_epoch": None,
          "unattached_removals": []}
    m = GroupModel.from_json(json.dumps(v1))
    assert m.members["c-1"].partitions == ["sc01:0"] and m.state == "Stable"


def test_a_newer_version_is_refused_with_a_clear_message():
    raw = json.loads(unpack(_model().to_json()))
    raw[VERSION_KEY] = STATE_VERSION + 1
    with pytest.raises(ValueError, match="written by a newer release"):
        GroupModel.from_json(json.dumps(raw))


def test_a_version_2_model_loads():
    """Version 2 (up to 5ad38f9): every field, members with their ids, plain JSON."""
    raw = {**dataclasses.asdict(_model()), VERSION_KEY: 2}
    assert GroupModel.from_json(json.dumps(raw, sort_keys=True)) == _model()


def test_version_3_leaves_out_defaults_and_member_ids():
    raw = json.loads(unpack(_model().to_json()))
    assert raw["members"] == {"m1": {"client_id": "c1", "partitions": ["t:0"]}}
    assert "leader" not in raw and "recent_joins" not in raw and raw["state"] == "Stable"
    assert raw["open_rebalance"]["trigger"] == "member_join" and "removals" not in raw["open_rebalance"]


def test_a_large_state_is_packed_and_a_small_one_is_not():
    small = GroupModel(cluster="c", group="g", state="Empty")
    assert small.to_json().startswith("{") and GroupModel.from_json(small.to_json()) == small
    m = _model()
    for i in range(30):
        m.members[f"member-{i}"] = Member(member_id=f"member-{i}", client_id=f"client-{i}", client_host="/10.1.2.3",
                                          session_timeout_ms=45_000, rebalance_timeout_ms=300_000)
    stored = m.to_json()
    assert stored.startswith(PACKED) and len(stored) < len(unpack(stored)) / 2
    assert GroupModel.from_json(stored) == m


def test_held_rows_of_every_version_load():
    rows = [["c", "g", 5, "offsets", "__consumer_offsets-1", i, "offset_commit", None, None, None, None,
             '{"count":1}'] for i in range(20)]
    plain = json.dumps(rows, separators=(",", ":"))
    assert json.loads(unpack(plain)) == rows          # versions 1 and 2 stored plain JSON
    assert pack(plain).startswith(PACKED) and json.loads(unpack(pack(plain))) == rows


def test_a_removal_stored_before_the_impact_fields_loads_and_is_written_back_so():
    """Unattached removals were [member id, time, cause] before their stop time and partitions were
    kept (state/impact.py): one loads as stopped at its removal, and keeps its three fields."""
    from state.model import UnattachedRemoval
    raw = json.loads(unpack(_model().to_json()))
    raw["unattached_removals"] = [["m0", 5, "leave_group"], ["m9", 7, "heartbeat_expiry", 2, ["t:1"]]]
    m = GroupModel.from_json(json.dumps(raw))
    assert m.unattached_removals == [UnattachedRemoval("m0", 5, "leave_group"),
                                     UnattachedRemoval("m9", 7, "heartbeat_expiry", 2, ["t:1"])]
    assert [r.departure() for r in m.unattached_removals] == [[5, None], [2, ["t:1"]]]
    assert json.loads(unpack(m.to_json()))["unattached_removals"] == raw["unattached_removals"]


def test_recent_joins_are_stored_as_member_id_and_time():
    """A member id created just before a rebalance without a reason (Kafka 1.1-2.0) waits as a
    RecentJoin, stored as [member_id, at_ms] as before it had a name."""
    from state.model import RecentJoin
    raw = json.loads(unpack(_model().to_json()))
    raw["recent_joins"] = [["m5", 11], ["m6", 12]]
    m = GroupModel.from_json(json.dumps(raw))
    assert m.recent_joins == [RecentJoin("m5", 11), RecentJoin("m6", 12)] and m.recent_joins[-1].at_ms == 12
    assert json.loads(unpack(m.to_json()))["recent_joins"] == raw["recent_joins"]
