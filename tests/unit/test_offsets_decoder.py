"""Tests for streaming/offsets/decoder.py: real 2.7 / 4.0 dumps, hand-built vectors for versions the
captures lack, corruption and malformed dump lines."""
from __future__ import annotations

import base64
import collections
import datetime
import json
import random
import struct

import pytest

from state.events import (
    CG_EPOCH, CG_MEMBER, CG_MEMBER_ASSIGNMENT, CG_OTHER, CG_TARGET_EPOCH, CG_TARGET_MEMBER, GROUP_METADATA,
    GROUP_TOMBSTONE, OFFSET_COMMIT, OFFSET_TOMBSTONE, SOURCE_OFFSETS, Event
)
from streaming.offsets.decoder import decode_key, decode_record, decode_value
from streaming.offsets.dump import iter_jsonl_dump
from streaming.offsets.record_events import record_to_events
from streaming.offsets.wire import DecodeError, UnknownRecordType, UnknownVersion
from streaming.quarantine import Quarantined
from tests.support.capture_expectations import FIXTURES
from tests.support.offsets_encoder import compact as cb  # short names below
from tests.support.offsets_encoder import nullable_bytes as b32
from tests.support.offsets_encoder import string as s16
from tests.support.offsets_encoder import tagged_fields as tags
from tests.support.offsets_encoder import uvarint as uv

DUMP_27 = FIXTURES / "kafka-2.7" / "offsets-topic.jsonl"
DUMP_40 = FIXTURES / "kafka-4.0" / "offsets-topic.jsonl"


# --- a small encoder for hand-built vectors ------------------------------------------------------

def i8(v): return struct.pack(">b", v)
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def i64(v): return struct.pack(">q", v)


def cs(x):  # compact (nullable) string
    return cb(None if x is None else x.encode())


def arr(items): return i32(len(items)) + b"".join(items)
def carr(items): return uv(len(items) + 1) + b"".join(items)


def subscription(version, topics, user_data=b"", owned=None, generation=-1, rack=None):
    out = i16(version) + arr([s16(t) for t in topics]) + b32(user_data)
    if version >= 1:
        out += arr([s16(t) + arr([i32(p) for p in ps]) for t, ps in (owned or {}).items()])
    if version >= 2:
        out += i32(generation)
    if version >= 3:
        out += s16(rack)
    return out


def assignment(version, parts, user_data=b""):
    return (i16(version) + arr([s16(t) + arr([i32(p) for p in ps]) for t, ps in parts.items()])
            + b32(user_data))


def gm_member(version, member_id, client_id, host, session, sub, asg, rebalance=300000,
              instance=None):
    if version >= 4:
        return (cs(member_id) + cs(instance) + cs(client_id) + cs(host) + i32(rebalance)
                + i32(session) + cb(sub) + cb(asg) + tags())
    out = s16(member_id)
    if version >= 3:
        out += s16(instance)
    out += s16(client_id) + s16(host)
    if version >= 1:
        out += i32(rebalance)
    return out + i32(session) + b32(sub) + b32(asg)


def gm_value(version, protocol_type, generation, protocol, leader, members, state_ts=-1,
             top_tags=None):
    if version >= 4:
        return (i16(4) + cs(protocol_type) + i32(generation) + cs(protocol) + cs(leader)
                + i64(state_ts) + carr(members) + tags(top_tags))
    out = i16(version) + s16(protocol_type) + i32(generation) + s16(protocol) + s16(leader)
    if version >= 2:
        out += i64(state_ts)
    return out + arr(members)


def offset_key(group, topic, partition, key_version=1):
    return i16(key_version) + s16(group) + s16(topic) + i32(partition)


def group_key(group):
    return i16(2) + s16(group)


TOPIC_UUID = bytes(range(16))
TOPIC_UUID_STR = base64.urlsafe_b64encode(TOPIC_UUID).rstrip(b"=").decode()


def events_of(key, value, **kw):
    out = record_to_events(partition=kw.get("partition", 3), offset=kw.get("offset", 17),
                           timestamp_ms=kw.get("timestamp_ms", 1_700_000_000_000), key=key,
                           value=value, source_id=kw.get("source_id"))
    return out


# --- the real dumps ------------------------------------------------------------------------------

def _load(path):
    records, events, quarantined = [], [], []
    for _line_no, rec in iter_jsonl_dump(str(path)):
        if isinstance(rec, Quarantined):
            quarantined.append(rec)
            continue
        records.append(rec)
        out = record_to_events(partition=rec["partition"], offset=rec["offset"],
                               timestamp_ms=rec["timestamp"], key=rec["key"], value=rec["value"])
        if isinstance(out, Quarantined):
            quarantined.append(out)
        else:
            events.extend(out)
    return records, events, quarantined


@pytest.fixture(scope="module")
def dump27():
    return _load(DUMP_27)


@pytest.fixture(scope="module")
def dump40():
    return _load(DUMP_40)


def _counts_by_type(records):
    counts: collections.Counter[tuple[int, str]] = collections.Counter()
    for rec in records:
        t = decode_key(rec["key"])["type"]
        counts[(t, "records")] += 1
        counts[(t, "tombstones")] += rec["value"] is None
    return counts


def _utc_ms(text):
    dt = datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
    return round(dt.timestamp() * 1000)


def test_kafka27_dump_decodes_completely_with_documented_counts(dump27):
    records, events, quarantined = dump27
    assert quarantined == []
    assert len(records) == 1606 == len(events)
    counts = _counts_by_type(records)
    # README Files table: 1484 offset commits, 27 offset tombstones, 83 group-metadata records,
    # 12 group tombstones (2.7 writes key version 1 for offset commits).
    assert counts[(1, "records")] - counts[(1, "tombstones")] == 1484
    assert counts[(1, "tombstones")] == 27
    assert counts[(2, "records")] - counts[(2, "tombstones")] == 83
    assert counts[(2, "tombstones")] == 12
    kinds = collections.Counter(e.kind for e in events)
    assert kinds == {OFFSET_COMMIT: 1484, OFFSET_TOMBSTONE: 27, GROUP_METADATA: 83,
                     GROUP_TOMBSTONE: 12}


def test_kafka40_dump_decodes_completely_with_documented_counts(dump40):
    records, events, quarantined = dump40
    assert quarantined == []
    assert len(records) == 4634 == len(events)
    counts = _counts_by_type(records)
    expected = {1: (4166, 148), 2: (103, 20), 3: (55, 9), 4: (25, 9), 5: (50, 25), 6: (41, 9),
                7: (85, 25), 8: (109, 25)}  # key-versions.md
    for t, (total, tombstones) in expected.items():
        assert (counts[(t, "records")], counts[(t, "tombstones")]) == (total, tombstones), t
    assert sum(n for (t, what), n in counts.items() if what == "records") == 4634
    kinds = collections.Counter(e.kind for e in events)
    assert kinds == {OFFSET_COMMIT: 4018, OFFSET_TOMBSTONE: 148, GROUP_METADATA: 83,
                     GROUP_TOMBSTONE: 20, CG_EPOCH: 55, CG_OTHER: 25, CG_MEMBER: 50,
                     CG_TARGET_EPOCH: 41, CG_TARGET_MEMBER: 85, CG_MEMBER_ASSIGNMENT: 109}


def test_event_envelope_from_dump(dump40):
    records, events, _ = dump40
    for rec, ev in zip(records[:50], events[:50]):
        assert isinstance(ev, Event)
        assert ev.source == SOURCE_OFFSETS
        assert ev.source_id == f"__consumer_offsets-{rec['partition']}"
        assert ev.seq == rec["offset"] and ev.ts_ms == rec["timestamp"]


def test_decode_record_is_json_serialisable_for_every_record(dump27, dump40):
    for records in (dump27[0], dump40[0]):
        for rec in records:
            d = decode_record(rec["key"], rec["value"])
            json.dumps(d)
            assert d["tombstone"] is (rec["value"] is None)
            if d["value"] is not None:
                assert d["value"]["trailing_bytes"] == 0


def test_kafka27_sc03_generation1_has_three_members_with_6s_sessions(dump27):
    _, events, _ = dump27
    gm = [e for e in events if e.group == "sc03-heartbeat-expiry" and e.kind == GROUP_METADATA]
    gen1 = [e for e in gm if e.generation == 1]
    assert len(gen1) == 1
    d = gen1[0].data
    assert d["protocol_type"] == "consumer" and d["protocol"] == "range"
    assert d["value_version"] == 3
    assert sorted(m["client_id"] for m in d["members"]) == ["sc03-c1", "sc03-c2", "sc03-c3"]
    assert {m["session_timeout_ms"] for m in d["members"]} == {6000}
    # sc03-topic has 3 partitions, range-assigned one each.
    assert [m["assigned_partitions"] for m in d["members"]] == [1, 1, 1]
    assert d["leader"] in {m["member_id"] for m in d["members"]}
    # README: generation 1 became Stable at 19:22:59.773 (currentStateTimestamp).
    assert d["current_state_ts_ms"] == _utc_ms("2026-11-21 19:22:59.773")
    # After the SIGKILL of c2: generation 2 with the two survivors, then Empty generation 3.
    gen2 = next(e for e in gm if e.generation == 2).data
    assert sorted(m["client_id"] for m in gen2["members"]) == ["sc03-c1", "sc03-c3"]
    assert sum(m["assigned_partitions"] for m in gen2["members"]) == 3
    gen3 = next(e for e in gm if e.generation == 3).data
    assert gen3["members"] == [] and gen3["leader"] is None and gen3["protocol"] is None


def test_kafka27_kafka_python_subscription_v0(dump27):
    records, _, _ = dump27
    for rec in records:
        k = decode_key(rec["key"])
        if k["type"] == 2 and k["group"] == "sc05b-poll-timeout-kafka-python" and rec["value"]:
            members = decode_value(2, rec["value"])["members"]
            if members:
                sub = members[0]["subscription"]
                assert sub["version"] == 0 and sub["topics"] == ["sc05-topic"]
                assert "owned_partitions" not in sub
                return
    pytest.fail("no sc05b GroupMetadata record")


def test_kafka40_sc09_consumer_protocol_epochs_go_up_to_10(dump40):
    _, events, _ = dump40
    epochs = [e for e in events if e.group == "k4-sc09-consumer-protocol" and e.kind == CG_EPOCH]
    live = [e.generation for e in epochs if not e.data["tombstone"]]
    assert live == list(range(1, 11))
    tombs = [e for e in epochs if e.data["tombstone"]]
    assert len(tombs) == 1 and tombs[0].generation is None
    targets = [e.generation for e in events
               if e.group == "k4-sc09-consumer-protocol" and e.kind == CG_TARGET_EPOCH
               and not e.data["tombstone"]]
    assert targets == list(range(1, 9))  # consumer-epochs.md: epochs 9 and 10 never got a target


def test_kafka40_member_assignment_epoch_and_state(dump40):
    _, events, _ = dump40
    # consumer-epochs.md: 19:27:59.564 73VETViuR1KUPfcsQRhXRQ memberEpoch=1 previousEpoch=1
    # state=UNREVOKED_PARTITIONS, then at 19:27:59.578 memberEpoch=2 STABLE.
    rows = [e for e in events if e.kind == CG_MEMBER_ASSIGNMENT
            and e.member_id == "73VETViuR1KUPfcsQRhXRQ" and not e.data["tombstone"]]
    by_ts = {e.ts_ms: e for e in rows}
    unrevoked = by_ts[_utc_ms("2026-11-21 19:27:59.564")]
    assert unrevoked.group == "k4-sc09-consumer-protocol"
    assert (unrevoked.data["member_epoch"], unrevoked.data["previous_member_epoch"]) == (1, 1)
    assert (unrevoked.data["state"], unrevoked.data["state_name"]) == (1, "UNREVOKED_PARTITIONS")
    assert unrevoked.data["pending_revocation"] > 0
    stable = by_ts[_utc_ms("2026-11-21 19:27:59.578")]
    assert (stable.data["member_epoch"], stable.data["state_name"]) == (2, "STABLE")
    assert stable.data["pending_revocation"] == 0
    # First record of the group: the only member owns all 6 partitions of k4-t1.
    first = rows[0]
    assert (first.data["member_epoch"], first.data["previous_member_epoch"]) == (1, 0)
    assert first.data["assigned"] == 6


def test_kafka40_classic_group_records(dump40):
    _, events, _ = dump40
    gm = [e for e in events if e.group == "k4-sc03-heartbeat-expiry" and e.kind == GROUP_METADATA]
    # The Java coordinator first writes an "empty" record: protocolType "", generation 0.
    assert (gm[0].generation, gm[0].data["protocol_type"], gm[0].data["members"]) == (0, "", [])
    gen1 = next(e for e in gm if e.generation == 1).data
    assert len(gen1["members"]) == 3
    assert {m["session_timeout_ms"] for m in gen1["members"]} == {6000}
    assert sum(m["assigned_partitions"] for m in gen1["members"]) == 6  # k4-t1 has 6 partitions


def test_kafka40_consumer_group_member_and_partition_metadata(dump40):
    _, events, _ = dump40
    members = {e.member_id: e for e in events
               if e.group == "k4-sc11-mixed-classic-first" and e.kind == CG_MEMBER
               and not e.data["tombstone"]}
    classic = members["sc11-classic-c1-e8ca7dd4-78d2-475f-a192-b1cce469f567"].data
    assert classic["classic"] is True and classic["session_timeout_ms"] == 6000
    assert classic["client_id"] == "sc11-classic-c1" and classic["subscribed_topics"] == ["k4-t1"]
    consumer = members["bz61I6GLS4ycOeaIxnAFVA"].data
    assert consumer["classic"] is False and consumer["session_timeout_ms"] is None
    # The classic member's supported protocol metadata is its ConsumerProtocolSubscription.
    records, _, _ = dump40
    for rec in records:
        k = decode_key(rec["key"])
        if k["type"] == 5 and k.get("member_id", "").startswith("sc11-classic-c1") and rec["value"]:
            cmm = decode_value(5, rec["value"])["classic_member_metadata"]
            (proto,) = cmm["supported_protocols"]
            assert proto["name"] == "range"
            assert proto["subscription"]["topics"] == ["k4-t1"]
            break
    else:
        pytest.fail("no classic member metadata record")
    # Type 4 for the smoke group: topic k4-smoke with 2 partitions (README, Topics).
    for rec in records:
        k = decode_key(rec["key"])
        if k["type"] == 4 and k["group"] == "k4-smoke-g" and rec["value"]:
            (topic,) = decode_value(4, rec["value"])["topics"]
            assert (topic["topic_name"], topic["num_partitions"]) == ("k4-smoke", 2)
            assert len(topic["topic_id"]) == 22  # Kafka's base64url topic-id string
            break
    else:
        pytest.fail("no partition metadata record for k4-smoke-g")


# --- hand-built vectors --------------------------------------------------------------------------

def test_offset_commit_key_v0_and_value_v0():
    key = offset_key("g", "t", 4, key_version=0)
    value = i16(0) + i64(42) + s16("meta") + i64(1_600_000_000_123)
    assert decode_key(key) == {"type": 0, "type_name": "OffsetCommit", "group": "g", "topic": "t",
                               "partition": 4}
    assert decode_value(0, value) == {"version": 0, "offset": 42, "metadata": "meta",
                                      "commit_timestamp": 1_600_000_000_123, "trailing_bytes": 0}
    (ev,) = events_of(key, value)
    assert ev.kind == OFFSET_COMMIT and ev.group == "g"
    assert ev.data == {"topic": "t", "partition": 4, "offset": 42,
                       "commit_ts_ms": 1_600_000_000_123, "count": 1}


def test_offset_commit_value_v1_and_v2():
    v1 = i16(1) + i64(7) + s16("") + i64(100) + i64(200)
    assert decode_value(1, v1)["expire_timestamp"] == 200
    v2 = i16(2) + i64(8) + s16("x") + i64(300)
    assert decode_value(1, v2) == {"version": 2, "offset": 8, "metadata": "x",
                                   "commit_timestamp": 300, "trailing_bytes": 0}


def test_offset_commit_value_v4_flexible_with_tagged_fields():
    value = (i16(4) + i64(99) + i32(5) + cs("md") + i64(1234)
             + tags({0: TOPIC_UUID, 7: b"future"}))
    d = decode_value(1, value)
    assert d == {"version": 4, "offset": 99, "leader_epoch": 5, "metadata": "md",
                 "commit_timestamp": 1234, "topic_id": TOPIC_UUID_STR, "unknown_tags": [7],
                 "trailing_bytes": 0}
    (ev,) = events_of(offset_key("g", "t", 0), value)
    assert ev.data["offset"] == 99 and ev.data["commit_ts_ms"] == 1234


def test_trailing_bytes_are_tolerated_and_counted():
    value = i16(3) + i64(1) + i32(-1) + s16("") + i64(2) + b"\x00\x01\x02"
    assert decode_value(1, value)["trailing_bytes"] == 3
    (ev,) = events_of(offset_key("g", "t", 0), value)
    assert ev.data["trailing_bytes"] == 3


def test_group_metadata_value_v0():
    sub = subscription(0, ["orders"])
    asg = assignment(0, {"orders": [0, 1, 2]})
    value = gm_value(0, "consumer", 5, "range", "m1",
                     [gm_member(0, "m1", "c1", "/10.0.0.1", 10000, sub, asg)])
    d = decode_value(2, value)
    assert d["version"] == 0 and d["generation"] == 5 and d["current_state_timestamp"] is None
    (m,) = d["members"]
    assert (m["member_id"], m["client_id"], m["client_host"]) == ("m1", "c1", "/10.0.0.1")
    assert m["rebalance_timeout"] is None and m["group_instance_id"] is None
    assert m["subscription"]["topics"] == ["orders"]
    assert m["assignment"]["assigned_partitions"] == [{"topic": "orders", "partitions": [0, 1, 2]}]
    (ev,) = events_of(group_key("g0"), value)
    assert ev.kind == GROUP_METADATA and ev.generation == 5 and ev.group == "g0"
    assert ev.data["current_state_ts_ms"] is None and ev.data["value_version"] == 0
    assert ev.data["members"] == [{"member_id": "m1", "group_instance_id": None, "client_id": "c1",
                                   "client_host": "/10.0.0.1", "session_timeout_ms": 10000,
                                   "rebalance_timeout_ms": None, "assigned_partitions": 3,
                                   "topics": ["orders"], "owned_partitions": None,
                                   "member_generation": None, "rack_id": None,
                                   "assigned_topics": ["orders"],
                                   "partitions": ["orders:0", "orders:1", "orders:2"]}]


def test_group_metadata_value_v1_with_subscription_v1_owned_partitions():
    sub = subscription(1, ["a", "b"], owned={"a": [0]})
    asg = assignment(1, {"a": [0], "b": [1, 2]})
    value = gm_value(1, "consumer", 2, "cooperative-sticky", "m1",
                     [gm_member(1, "m1", "c1", "/h", 6000, sub, asg, rebalance=45000),
                      gm_member(1, "m2", "c2", "/h", 6000, subscription(1, ["a"]), b"")])
    d = decode_value(2, value)
    m1, m2 = d["members"]
    assert m1["rebalance_timeout"] == 45000
    assert m1["subscription"]["owned_partitions"] == [{"topic": "a", "partitions": [0]}]
    assert m2["assignment"] is None and "assignment_error" not in m2  # empty blob: no assignment
    (ev,) = events_of(group_key("g1"), value)
    assert [m["assigned_partitions"] for m in ev.data["members"]] == [3, 0]
    assert ev.data["members"][0]["rebalance_timeout_ms"] == 45000


def test_group_metadata_value_v2_other_protocol_type_is_not_decoded():
    value = gm_value(2, "connect", 9, "sessioned", "w1",
                     [gm_member(2, "w1", "worker", "/h", 10000, b"\x00\x01opaque", b"\xff\xfe")],
                     state_ts=1_700_000_000_555)
    d = decode_value(2, value)
    assert d["current_state_timestamp"] == 1_700_000_000_555
    (m,) = d["members"]
    assert "subscription" not in m and m["subscription_size"] == 8 and m["assignment_size"] == 2
    (ev,) = events_of(group_key("connect-cluster"), value)
    assert ev.data["current_state_ts_ms"] == 1_700_000_000_555
    assert ev.data["members"][0]["assigned_partitions"] is None


def test_group_metadata_value_v2_unknown_state_timestamp_is_none():
    value = gm_value(2, "consumer", 3, None, None, [], state_ts=-1)
    (ev,) = events_of(group_key("g"), value)
    assert ev.data["current_state_ts_ms"] is None and ev.data["members"] == []


def test_group_metadata_value_v4_flexible():
    sub = subscription(3, ["t"], owned={"t": [1]}, generation=7, rack="rack-a")
    asg = assignment(3, {"t": [1, 2]})
    value = gm_value(4, "consumer", 8, "range", "m1",
                     [gm_member(4, "m1", "c1", "/h", 6000, sub, asg, rebalance=30000,
                                instance="inst-1")],
                     state_ts=1234, top_tags={3: b"\x01\x02"})
    d = decode_value(2, value)
    assert (d["version"], d["generation"], d["current_state_timestamp"]) == (4, 8, 1234)
    assert d["unknown_tags"] == [3] and d["trailing_bytes"] == 0
    (m,) = d["members"]
    assert m["group_instance_id"] == "inst-1" and m["rebalance_timeout"] == 30000
    assert m["subscription"] == {"version": 3, "topics": ["t"], "user_data_size": 0,
                                 "owned_partitions": [{"topic": "t", "partitions": [1]}],
                                 "generation_id": 7, "rack_id": "rack-a"}
    (ev,) = events_of(group_key("g4"), value)
    em = ev.data["members"][0]
    assert em["group_instance_id"] == "inst-1" and em["assigned_partitions"] == 2
    # embedded subscription v3: topics, owned partitions, the member's generation and rack
    assert (em["topics"], em["owned_partitions"], em["member_generation"], em["rack_id"]) == (["t"], 1, 7, "rack-a")
    assert em["assigned_topics"] == ["t"]


def test_bad_embedded_subscription_does_not_fail_the_record():
    bad_sub = i16(1) + i32(1) + s16("t") + i32(0)[:2]  # truncated inside userData length
    value = gm_value(3, "consumer", 1, "range", "m1",
                     [gm_member(3, "m1", "c1", "/h", 6000, bad_sub,
                                assignment(0, {"t": [0]}))])
    d = decode_value(2, value)
    (m,) = d["members"]
    assert m["subscription"] is None
    assert "GroupMetadataValue.members[0].subscription.userData at byte 9" in m["subscription_error"]
    (ev,) = events_of(group_key("g"), value)
    assert ev.data["members"][0]["assigned_partitions"] == 1
    assert "subscription_error" in ev.data["members"][0]


def test_consumer_group_metadata_value_with_metadata_hash_tag():
    value = i16(0) + i32(12) + tags({0: i64(-42)})
    assert decode_value(3, value) == {"version": 0, "epoch": 12, "metadata_hash": -42,
                                      "trailing_bytes": 0}
    (ev,) = events_of(i16(3) + s16("cg"), value)
    assert ev.kind == CG_EPOCH and ev.generation == 12
    assert ev.data == {"tombstone": False, "metadata_hash": -42, "group_type": "consumer"}


def test_kip848_tombstones_and_target_member():
    (ev,) = events_of(i16(3) + s16("cg"), None)
    assert (ev.kind, ev.generation, ev.data) == (CG_EPOCH, None, {"tombstone": True, "group_type": "consumer"})
    (ev,) = events_of(i16(8) + s16("cg") + s16("m-1"), None)
    assert (ev.kind, ev.member_id, ev.data["tombstone"]) == (CG_MEMBER_ASSIGNMENT, "m-1", True)
    value = i16(0) + carr([TOPIC_UUID + carr([i32(0), i32(3)]) + tags()]) + tags()
    (ev,) = events_of(i16(7) + s16("cg") + s16("m-1"), value)
    assert (ev.kind, ev.member_id, ev.data) == (CG_TARGET_MEMBER, "m-1",
                                                {"partitions": 2, "tombstone": False, "group_type": "consumer"})


def test_regex_topology_and_share_state_records_are_cg_other():
    key = i16(16) + s16("cg") + s16("orders-.*")
    value = i16(0) + carr([cs("orders-1"), cs("orders-2")]) + i64(3) + i64(1_700_000_000_000) + tags()
    assert decode_key(key)["regular_expression"] == "orders-.*"
    assert decode_value(16, value)["topics"] == ["orders-1", "orders-2"]
    (ev,) = events_of(key, value)
    assert ev.kind == CG_OTHER and ev.data == {"type": 16, "type_name": "ConsumerGroupRegularExpression",
                                               "tombstone": False, "group_type": "consumer"}
    # ShareGroupStatePartitionMetadataValue (4.1+): three empty topic lists
    (ev,) = events_of(i16(15) + s16("sg"), i16(0) + carr([]) + carr([]) + carr([]) + tags())
    assert ev.kind == CG_OTHER and ev.data == {"type": 15, "type_name": "ShareGroupStatePartitionMetadata",
                                               "tombstone": False, "group_type": "share"}
    (ev,) = events_of(i16(23) + s16("streams-app"), i16(0) + i32(4) + carr([]) + tags())
    assert ev.kind == CG_OTHER and ev.data["topology_epoch"] == 4 and ev.data["group_type"] == "streams"
    (ev,) = events_of(i16(23) + s16("streams-app"), None)
    assert ev.kind == CG_OTHER and ev.data["tombstone"] is True and "topology_epoch" not in ev.data


def test_offset_and_group_tombstones():
    (ev,) = events_of(offset_key("g", "t", 2), None)
    assert (ev.kind, ev.data) == (OFFSET_TOMBSTONE, {"topic": "t", "partition": 2})
    (ev,) = events_of(group_key("g"), None)
    assert ev.kind == GROUP_TOMBSTONE and ev.generation is None
    assert decode_record(group_key("g"), None) == {
        "key": {"type": 2, "type_name": "GroupMetadata", "group": "g"}, "value": None,
        "tombstone": True}


# --- corruption ----------------------------------------------------------------------------------

def test_truncated_value_is_quarantined_with_field_path_and_offset():
    m0 = gm_member(3, "m0", "c0", "/h", 6000, b"", b"")
    m1_prefix = s16("m1") + s16(None) + s16("c1")  # member 1 up to (not including) clientHost
    head = i16(3) + s16("consumer") + i32(1) + s16("range") + s16("m0") + i64(-1) + i32(2)
    value = head + m0 + m1_prefix + s16("/10.1.2.3")[:4]   # clientHost cut short
    client_host_at = len(head) + len(m0) + len(m1_prefix)
    with pytest.raises(DecodeError) as exc:
        decode_value(2, value)
    assert exc.value.field == "GroupMetadataValue.members[1].clientHost"
    assert exc.value.offset == client_host_at
    q = events_of(group_key("g"), value, partition=5, offset=77, timestamp_ms=123)
    assert isinstance(q, Quarantined)
    assert (q.source, q.source_id, q.seq, q.reason, q.ts_ms) == (
        "offsets", "__consumer_offsets-5", 77, "corrupt_record", 123)
    assert f"GroupMetadataValue.members[1].clientHost at byte {client_host_at}" in q.detail
    assert q.raw is not None
    key_b64, value_b64 = q.raw.split("|")
    assert base64.b64decode(key_b64) == group_key("g") and base64.b64decode(value_b64) == value


def test_truncated_real_record_is_quarantined(dump40):
    records, _, _ = dump40
    rec = next(r for r in records if r["value"] and decode_key(r["key"])["type"] == 8)
    q = events_of(rec["key"], rec["value"][:-3])
    assert isinstance(q, Quarantined) and q.reason == "corrupt_record"
    assert q.detail.startswith("ConsumerGroupCurrentMemberAssignmentValue.")
    assert " at byte " in q.detail


def test_unknown_record_types():
    for t in (99, 18, 24, -1):
        with pytest.raises(UnknownRecordType):
            decode_key(i16(t) + s16("g"))
        q = events_of(i16(t) + s16("g"), b"\x00\x00")
        assert isinstance(q, Quarantined) and q.reason == "unknown_record_type"
        assert str(t) in q.detail
    assert issubclass(UnknownRecordType, DecodeError)


def test_unknown_value_versions():
    cases = [(offset_key("g", "t", 0), i16(5) + i64(1)), (group_key("g"), i16(5) + b"\x00" * 20),
             (i16(3) + s16("cg"), i16(1) + i32(1) + tags())]
    for key, value in cases:
        q = events_of(key, value)
        assert isinstance(q, Quarantined) and q.reason == "unknown_value_version", q
        assert "Value.version at byte 0" in q.detail
    with pytest.raises(UnknownVersion):
        decode_value(2, i16(5))
    assert issubclass(UnknownVersion, DecodeError)


def test_null_key_and_short_inputs():
    q = events_of(None, b"\x00\x01")
    assert isinstance(q, Quarantined) and q.reason == "null_key" and q.raw == "|AAE="
    q = events_of(b"\x00", None)
    assert isinstance(q, Quarantined) and q.reason == "corrupt_record"
    q = events_of(group_key("g"), b"\x00")
    assert isinstance(q, Quarantined) and q.reason == "corrupt_record"
    assert "GroupMetadataValue.version at byte 0" in q.detail
    q = events_of(offset_key("g", "t", 0)[:-2], None)  # key truncated inside partition
    assert isinstance(q, Quarantined) and "OffsetCommitKey.partition" in q.detail


def test_raw_is_truncated():
    value = gm_value(3, "consumer", 1, None, None, []) + b"\x00" * 5000
    key = b"\x00\x63" + b"x" * 3000
    q = events_of(key, value)
    assert isinstance(q, Quarantined) and q.raw is not None and len(q.raw) == 2000


def test_corrupt_counts_and_lengths():
    # an array count far larger than the bytes left must fail fast, not loop
    value = i16(3) + s16("consumer") + i32(1) + s16(None) + s16(None) + i64(-1) + i32(2**31 - 1)
    q = events_of(group_key("g"), value)
    assert isinstance(q, Quarantined) and "GroupMetadataValue.members at byte" in q.detail
    value = i16(3) + i64(1) + i32(0) + i16(-5) + i64(0)
    q = events_of(offset_key("g", "t", 0), value)
    assert isinstance(q, Quarantined) and "OffsetCommitValue.metadata at byte 14" in q.detail
    # a varint that never ends
    q = events_of(i16(3) + s16("cg"), i16(0) + i32(1) + b"\xff\xff\xff\xff\xff\xff")
    assert isinstance(q, Quarantined) and "unsigned varint" in q.detail
    # invalid UTF-8 in a string
    q = events_of(group_key("g"), i16(3) + i16(2) + b"\xff\xfe" + i32(1))
    assert isinstance(q, Quarantined) and "GroupMetadataValue.protocolType at byte 2" in q.detail


@pytest.mark.parametrize("tail, message", [(b"\x80", "truncated unsigned varint"),
                                           (b"\xff" * 5 + b"\x01", "unsigned varint longer than 5 bytes")])
def test_a_bad_unsigned_varint_names_its_field_and_first_byte(tail, message):
    with pytest.raises(DecodeError) as exc:
        decode_value(3, i16(0) + i32(5) + tail)   # ConsumerGroupMetadataValue v0: epoch, then tags
    assert str(exc.value) == f"ConsumerGroupMetadataValue._tagged_fields at byte 6: {message}"


def test_record_to_events_never_raises_on_mutations(dump27, dump40):
    rng = random.Random(848)
    samples: list[dict] = []
    for records in (dump27[0], dump40[0]):
        by_type: dict[int, dict] = {}
        for rec in records:
            if rec["value"]:
                by_type.setdefault(decode_key(rec["key"])["type"], rec)
        samples.extend(by_type.values())
    for rec in samples:
        key, value = rec["key"], rec["value"]
        for cut in range(len(value)):
            out = events_of(key, value[:cut])
            assert isinstance(out, (list, Quarantined))
        for _ in range(200):
            mutated = bytearray(value)
            for _ in range(rng.randint(1, 4)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            out = events_of(key, bytes(mutated))
            assert isinstance(out, (list, Quarantined))
        for cut in range(len(key)):
            assert isinstance(events_of(key[:cut], value), (list, Quarantined))


# --- JSONL dump reader ---------------------------------------------------------------------------

def test_malformed_dump_lines_are_quarantined_and_good_lines_still_decode(tmp_path):
    good = json.loads(DUMP_27.open().readline())
    good2 = dict(good, offset=good["offset"] + 1, value_b64=None)
    lines = [
        json.dumps(good).encode(),                                  # 1 good
        b"{not json",                                               # 2
        json.dumps({k: v for k, v in good.items() if k != "key_b64"}).encode(),   # 3 missing field
        json.dumps(dict(good, value_b64="!!!not base64***")).encode(),            # 4 bad base64
        json.dumps(dict(good, partition=True)).encode(),            # 5 bool is not an int
        json.dumps(dict(good, offset="12")).encode(),               # 6 string offset
        b"[1, 2, 3]",                                               # 7 not an object
        b"\xff\xfe garbage",                                        # 8 not UTF-8
        b"",                                                        # 9 blank: skipped
        json.dumps(good2).encode(),                                 # 10 good tombstone
    ]
    path = tmp_path / "dump.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    out = list(iter_jsonl_dump(str(path)))
    assert [n for n, _ in out] == [1, 2, 3, 4, 5, 6, 7, 8, 10]
    bad = [r for _, r in out if isinstance(r, Quarantined)]
    assert [q.seq for q in bad] == [2, 3, 4, 5, 6, 7, 8]
    assert {q.reason for q in bad} == {"malformed_dump_line"}
    assert {q.source_id for q in bad} == {"dump.jsonl"} and {q.source for q in bad} == {"offsets"}
    assert "key_b64" in bad[1].detail and "base64" in bad[2].detail
    good_recs = [r for _, r in out if not isinstance(r, Quarantined)]
    assert [r["offset"] for r in good_recs] == [good["offset"], good["offset"] + 1]
    assert good_recs[0]["key"] == base64.b64decode(good["key_b64"])
    assert set(good_recs[0]) == {"partition", "offset", "timestamp", "key", "value"}
    assert good_recs[1]["value"] is None
    for r in good_recs:
        evs = record_to_events(partition=r["partition"], offset=r["offset"],
                               timestamp_ms=r["timestamp"], key=r["key"], value=r["value"])
        assert isinstance(evs, list) and len(evs) == 1


def test_dump_with_null_key_line_yields_record_then_null_key_quarantine(tmp_path):
    path = tmp_path / "nk.jsonl"
    path.write_text(json.dumps({"partition": 1, "offset": 5, "timestamp": 9, "key_b64": None,
                                "value_b64": "AAE="}) + "\n")
    ((n, rec),) = list(iter_jsonl_dump(str(path)))
    assert isinstance(rec, dict)
    assert rec["key"] is None
    q = record_to_events(partition=rec["partition"], offset=rec["offset"],
                         timestamp_ms=rec["timestamp"], key=rec["key"], value=rec["value"])
    assert isinstance(q, Quarantined) and q.reason == "null_key" and q.seq == 5
