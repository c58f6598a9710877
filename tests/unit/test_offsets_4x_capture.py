"""Real records of share, streams and KIP-848 groups from Kafka 4.2.2 and 4.4.0 brokers
(tests/fixtures/offsets-4x, README there): every record decodes, and the decoded values agree with
what the test bed's members did (timeline.jsonl)."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from state import events as E
from streaming.offsets.decoder import decode_record
from streaming.offsets.dump import iter_jsonl_dump
from streaming.offsets.record_events import record_to_events
from streaming.offsets.per_record import record_outcome
from tests.support.capture_expectations import FIXTURES

VERSIONS = ["4.2.2", "4.4.0"]
PARTITIONS = 4          # every scenario topic
SESSION_MS = 6000       # the bed's share/streams/consumer session timeout


def _records(version):
    out = []
    for _, rec in iter_jsonl_dump(str(FIXTURES / "offsets-4x" / version / "offsets-topic.jsonl")):
        assert isinstance(rec, dict), rec
        out.append(rec)
    return out


def _events(version):
    out = []
    for rec in _records(version):
        result = record_to_events(partition=rec["partition"], offset=rec["offset"], timestamp_ms=rec["timestamp"],
                                  key=rec["key"], value=rec["value"])
        assert isinstance(result, list), result        # no quarantine
        assert record_outcome(rec["key"], rec["value"], result)[2] == "decoded"
        out += result
    return out


def _timeline(version):
    path = FIXTURES / "offsets-4x" / version / "timeline.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _group(version, scenario):
    return f"x{version.replace('.', '')}-{scenario}"


@pytest.mark.parametrize("version", VERSIONS)
def test_every_record_decodes_with_every_field_read(version):
    types: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0])   # key type -> [values, tombstones]
    for rec in _records(version):
        d = decode_record(rec["key"], rec["value"])
        types[d["key"]["type"]][d["tombstone"]] += 1
        if d["value"] is not None:
            assert d["value"]["trailing_bytes"] == 0 and "unknown_tags" not in d["value"], d
            assert "layout" not in d["value"]          # 4.0 early-access layouts only
    assert {t for t, (values, _) in types.items() if values} == {1, 3, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 17,
                                                                 19, 20, 21, 22, 23}
    assert {t for t, (_, tombs) in types.items() if tombs} >= {5, 7, 8, 10, 13, 14, 19, 21, 22}


@pytest.mark.parametrize("version", VERSIONS)
def test_group_types_and_members_match_the_timeline(version):
    events = _events(version)
    timeline = _timeline(version)
    for scenario, group_type in (("share-group", "share"), ("streams-group", "streams"),
                                 ("streams-pair", "streams"), ("kip848", "consumer")):
        g = _group(version, scenario)
        mine = [e for e in events if e.group == g and e.kind != E.OFFSET_COMMIT]
        assert mine and {e.data["group_type"] for e in mine} == {group_type}
        started = {t["client_id"]: t for t in timeline if t["group"] == g and t["action"] == "start"}
        # Kafka Streams names its consumer <client.id>-StreamThread-1-consumer
        suffix = "-StreamThread-1-consumer" if group_type == "streams" else ""
        joined = {e.data["client_id"]: e for e in mine if e.kind == E.CG_MEMBER and not e.data["tombstone"]}
        assert set(joined) == {c + suffix for c in started}
        for e in joined.values():
            assert e.data["client_host"] == "/127.0.0.1" and e.data["instance_id"] is None
            if group_type == "streams":
                assert e.data["topology_epoch"] == 0 and e.data["rebalance_timeout_ms"] == 300_000
                assert e.data["subscribed_topics"] is None and len(e.data["process_id"]) == 36
            elif group_type == "share":
                assert e.data["subscribed_topics"] == [f"{g}-data"] and e.data["rebalance_timeout_ms"] is None
            else:
                assert e.data["subscribed_topics"] == [f"{g}-data"] and e.data["classic"] is False
        # Each member's records end with tombstones: soon after a share/consumer member closes,
        # a session timeout after a kill (and after a Kafka Streams close: it does not leave).
        for cid, e in joined.items():
            (gone,) = [x for x in mine if x.kind == E.CG_MEMBER and x.member_id == e.member_id and x.data["tombstone"]]
            action = next(t for t in timeline if t.get("client_id") == cid.removesuffix(suffix)
                          and t["action"] in ("kill", "leave"))
            after = gone.ts_ms - action["ts_ms"]
            if action["action"] == "kill" or group_type == "streams":
                assert SESSION_MS - 1000 <= after <= SESSION_MS + 2000, (cid, action, after)
            else:
                assert 0 <= after < 1000, (cid, after)


def _by_kind(events, group, kind):
    return [e for e in events if e.group == group and e.kind == kind]


@pytest.mark.parametrize("version", VERSIONS)
def test_epochs_and_assignments(version):
    events = _events(version)
    for scenario in ("share-group", "streams-pair", "kip848"):
        g = _group(version, scenario)
        epochs = [e.generation for e in _by_kind(events, g, E.CG_EPOCH) if not e.data["tombstone"]]
        assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs) and epochs[0] >= 1
        targets = [e.generation for e in _by_kind(events, g, E.CG_TARGET_EPOCH) if not e.data["tombstone"]]
        assert set(targets) <= set(epochs)
        for e in _by_kind(events, g, E.CG_MEMBER_ASSIGNMENT):
            if not e.data["tombstone"]:
                assert e.data["member_epoch"] <= max(epochs) and 0 <= e.data["assigned"] <= PARTITIONS
        # each target assignment hands out every partition (task) once, or nothing yet (a share
        # group's first epoch, before the share-partition state is initialised)
        totals = [sum(_assigned(d) for d in live.values()) for _, live in _targets(events, g)]
        assert set(totals) <= {0, PARTITIONS} and PARTITIONS in totals, (g, totals)


def _assigned(data):
    return data["partitions"] if "partitions" in data else data["active_tasks"]


def _targets(events, group):
    """(target-epoch event, {member: its latest target-member data}) for each target epoch of the
    group, over the members alive then (their member record not tombstoned)."""
    latest, out = {}, []
    alive: set[str | None] = set()
    for e in events:
        if e.group != group:
            continue
        if e.kind == E.CG_MEMBER:
            (alive.discard if e.data["tombstone"] else alive.add)(e.member_id)
        elif e.kind == E.CG_TARGET_MEMBER and not e.data["tombstone"]:
            latest[e.member_id] = e.data
        elif e.kind == E.CG_TARGET_EPOCH and not e.data["tombstone"]:
            out.append((e, {m: latest[m] for m in alive if m in latest}))
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_streams_task_moves_show_unrevoked_and_unreleased_states(version):
    events = _events(version)
    g = _group(version, "streams-pair")
    states = [(e.data["state_name"], e.data["assigned"], e.data["pending_revocation"])
              for e in _by_kind(events, g, E.CG_MEMBER_ASSIGNMENT) if not e.data["tombstone"]]
    # a gives 2 of its 4 tasks to b: first revoking them, b waiting for their release
    assert ("UNREVOKED_TASKS", 2, 2) in states
    assert any(s == "UNRELEASED_TASKS" for s, _, _ in states)
    assert ("STABLE", PARTITIONS, 0) in states
    assert {s for s, _, _ in states} <= {"STABLE", "UNREVOKED_TASKS", "UNRELEASED_TASKS"}


@pytest.mark.parametrize("version", VERSIONS)
def test_assignment_timestamp_is_the_assignment_time_from_43(version):
    events = _events(version)
    targets = [e for e in events if e.kind == E.CG_TARGET_EPOCH and not e.data["tombstone"]]
    with_ts = [e for e in targets if "assignment_ts_ms" in e.data]
    if version == "4.2.2":
        assert with_ts == []
        return
    # 4.4.0 stamps the target assignment of consumer, share and streams groups, right before it
    # writes it; the epochs that only empty a group compute no assignment and carry no stamp.
    assert {e.data["group_type"] for e in with_ts} == {"consumer", "share", "streams"}
    for e in with_ts:
        assert 0 <= e.ts_ms - e.data["assignment_ts_ms"] < 1000, e
    for g in {e.group for e in targets}:
        for e, live in _targets(events, g):
            assert ("assignment_ts_ms" in e.data) == bool(live), (g, e.generation, live)
