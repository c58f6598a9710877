"""One `__consumer_offsets` record -> the state machine's events, or a quarantined input."""
from __future__ import annotations

import base64
from typing import Any

from state.events import (
    CG_EPOCH, CG_MEMBER, CG_MEMBER_ASSIGNMENT, CG_OTHER, CG_TARGET_EPOCH, CG_TARGET_MEMBER, GROUP_METADATA,
    GROUP_TOMBSTONE, OFFSET_COMMIT, OFFSET_TOMBSTONE, SOURCE_OFFSETS, Event
)
from state.quarantine_reasons import QuarantineReason as R
from state.vocabulary import Protocol
from streaming.offsets.decoder import decode_record
from streaming.offsets.records import GROUP_TYPE_BY_TYPE, KIND_BY_TYPE, OFFSET_COMMIT_TYPES, OFFSETS_SOURCE_PREFIX
from streaming.offsets.structs import count_partitions, partition_keys
from streaming.offsets.wire import DecodeError, UnknownRecordType, UnknownVersion
from streaming.quarantine import RAW_LIMIT, Quarantined


def _b64(b: bytes | None) -> str:
    return "" if b is None else base64.b64encode(b).decode("ascii")


def _raw(key: bytes | None, value: bytes | None) -> str:
    return (_b64(key) + "|" + _b64(value))[:RAW_LIMIT]


def _group_metadata_data(v: dict) -> dict:
    members = []
    for m in v["members"]:
        assignment = m.get("assignment")
        if assignment is not None:
            assigned: int | None = count_partitions(assignment["assigned_partitions"])
        elif "assignment" in m and "assignment_error" not in m:
            assigned = 0  # consumer protocol, empty assignment blob: no partitions
        else:
            assigned = None  # not the consumer protocol, or undecodable
        em = {"member_id": m["member_id"], "group_instance_id": m["group_instance_id"],
              "client_id": m["client_id"], "client_host": m["client_host"],
              "session_timeout_ms": m["session_timeout"],
              "rebalance_timeout_ms": m["rebalance_timeout"],
              "assigned_partitions": assigned,
              "partitions": None if assignment is None else sorted(
                  f"{tp['topic']}:{p}" for tp in assignment["assigned_partitions"] for p in tp["partitions"])}
        sub = m.get("subscription")
        if sub is not None:
            # ConsumerProtocolSubscription: topics (v0+), owned partitions (v1+, cooperative),
            # the member's generation (v2+, -1 = unknown) and rack (v3+).
            em["topics"] = sub["topics"]
            owned = sub.get("owned_partitions")
            em["owned_partitions"] = None if owned is None else count_partitions(owned)
            gen = sub.get("generation_id")
            em["member_generation"] = None if gen is None or gen < 0 else gen
            em["rack_id"] = sub.get("rack_id")
        if assignment is not None:
            em["assigned_topics"] = sorted({tp["topic"] for tp in assignment["assigned_partitions"]})
        for err in ("subscription_error", "assignment_error"):
            if err in m:
                em[err] = m[err]
        members.append(em)
    ts = v["current_state_timestamp"]
    return {"protocol_type": v["protocol_type"], "protocol": v["protocol"], "leader": v["leader"],
            "current_state_ts_ms": None if ts is None or ts == -1 else ts,
            "members": members, "value_version": v["version"]}


def _event_fields(k: dict[str, Any], value: dict[str, Any] | None
                  ) -> tuple[str, int | None, str | None, dict[str, Any]]:
    """(kind, generation, member_id, data) for one decoded record."""
    t = k["type"]
    tomb = value is None
    v: dict[str, Any] = value if value is not None else {}   # read only when not a tombstone
    if t in OFFSET_COMMIT_TYPES:
        if tomb:
            return OFFSET_TOMBSTONE, None, None, {"topic": k["topic"], "partition": k["partition"]}
        return OFFSET_COMMIT, None, None, {
            "topic": k["topic"], "partition": k["partition"], "offset": v["offset"],
            "commit_ts_ms": v["commit_timestamp"], "count": 1}
    if t == 2:
        if tomb:
            return GROUP_TOMBSTONE, None, None, {}
        return GROUP_METADATA, v["generation"], None, _group_metadata_data(v)
    group_type = GROUP_TYPE_BY_TYPE[t]
    kind = KIND_BY_TYPE.get(t, CG_OTHER)
    member_id = k.get("member_id")
    if kind == CG_OTHER:
        # 4 and 9 (partition metadata), 15 (share state initialisation), 16 (regex), 23 (topology)
        data: dict[str, Any] = {"type": t, "type_name": k["type_name"], "tombstone": tomb}
        if t == 23 and not tomb:
            data["topology_epoch"] = v["epoch"]
    elif tomb:
        data = {"tombstone": True}
    else:
        data = _KIP848_DATA[kind](v, group_type)
    data["group_type"] = group_type
    generation = None
    if not tomb and kind == CG_EPOCH:
        generation = v["epoch"]
    elif not tomb and kind == CG_TARGET_EPOCH:
        generation = v["assignment_epoch"]
    return kind, generation, member_id, data


def _epoch_data(v: dict[str, Any], group_type: str) -> dict[str, Any]:
    """Types 3, 11, 17: the group epoch (the event's generation)."""
    data: dict[str, Any] = {"tombstone": False}
    for field in ("metadata_hash", "validated_topology_epoch"):   # 4.1+; the second streams 4.2+
        if field in v:
            data[field] = v[field]
    return data


def _member_data(v: dict[str, Any], group_type: str) -> dict[str, Any]:
    """Types 5, 10, 19: a member's metadata."""
    data: dict[str, Any] = {"client_id": v["client_id"], "client_host": v["client_host"],
                            "instance_id": v.get("instance_id"), "rack_id": v["rack_id"],
                            "rebalance_timeout_ms": v.get("rebalance_timeout_ms"),
                            "subscribed_topics": v.get("subscribed_topic_names"), "tombstone": False}
    if group_type == Protocol.CONSUMER:
        classic = v["classic_member_metadata"]
        data["classic"] = classic is not None
        data["session_timeout_ms"] = classic["session_timeout_ms"] if classic else None
    elif group_type == Protocol.STREAMS:
        data["topology_epoch"] = v["topology_epoch"]
        data["process_id"] = v["process_id"]
    return data


def _target_epoch_data(v: dict[str, Any], group_type: str) -> dict[str, Any]:
    """Types 6, 12, 20: the assignment epoch (the event's generation) and, 4.3+, when the
    assignment calculation finished."""
    data: dict[str, Any] = {"tombstone": False}
    if "assignment_timestamp" in v:
        data["assignment_ts_ms"] = v["assignment_timestamp"]
    return data


def _target_member_data(v: dict[str, Any], group_type: str) -> dict[str, Any]:
    """Types 7, 13, 21: a member's target assignment (partitions, or streams tasks)."""
    if group_type == Protocol.STREAMS:
        return {"active_tasks": count_partitions(v["active_tasks"]),
                "standby_tasks": count_partitions(v["standby_tasks"]),
                "warmup_tasks": count_partitions(v["warmup_tasks"]), "tombstone": False}
    return {"partitions": count_partitions(v["topic_partitions"]), "tombstone": False}


def _member_assignment_data(v: dict[str, Any], group_type: str) -> dict[str, Any]:
    """Types 8, 14, 22: a member's current assignment and epoch. Streams: active tasks."""
    if group_type == Protocol.STREAMS:
        assigned, pending = v["active_tasks"], v["active_tasks_pending_revocation"]
    else:
        assigned, pending = v["assigned_partitions"], v.get("partitions_pending_revocation")
    data = {"member_epoch": v["member_epoch"], "previous_member_epoch": v["previous_member_epoch"],
            "state": v["state"], "state_name": v["state_name"], "assigned": count_partitions(assigned),
            "pending_revocation": count_partitions(pending), "tombstone": False}
    if group_type == Protocol.CONSUMER:
        # what the member owns (it consumes the partitions pending revocation until it revokes them)
        data["owned"] = partition_keys(assigned, pending)
    return data


_KIP848_DATA = {CG_EPOCH: _epoch_data, CG_MEMBER: _member_data, CG_TARGET_EPOCH: _target_epoch_data,
                CG_TARGET_MEMBER: _target_member_data, CG_MEMBER_ASSIGNMENT: _member_assignment_data}


def record_to_events(*, partition: int, offset: int, timestamp_ms: int, key: bytes | None,
                     value: bytes | None, source_id: str | None = None
                     ) -> list[Event] | Quarantined:
    """One `__consumer_offsets` record -> [Event], or Quarantined when it cannot be used.
    Never raises."""
    sid = source_id if source_id is not None else f"{OFFSETS_SOURCE_PREFIX}{partition}"

    def quarantine(reason: str, detail: str) -> Quarantined:
        return Quarantined(source=SOURCE_OFFSETS, source_id=sid, seq=offset, reason=reason,
                           detail=detail, raw=_raw(key, value), ts_ms=timestamp_ms)

    if key is None:
        return quarantine(R.NULL_KEY, "record key is null")
    try:
        rec = decode_record(key, value)
        kind, generation, member_id, data = _event_fields(rec["key"], rec["value"])
    except UnknownRecordType as e:
        return quarantine(R.UNKNOWN_RECORD_TYPE, str(e))
    except UnknownVersion as e:
        return quarantine(R.UNKNOWN_VALUE_VERSION, str(e))
    except DecodeError as e:
        return quarantine(R.CORRUPT_RECORD, str(e))
    except Exception as e:  # a decoder bug must not stop the stream; keep the record for replay
        return quarantine(R.CORRUPT_RECORD, f"internal decoder error: {type(e).__name__}: {e}")
    v = rec["value"]
    if v is not None and v.get("trailing_bytes"):
        data["trailing_bytes"] = v["trailing_bytes"]
    return [Event(group=rec["key"]["group"], ts_ms=timestamp_ms, source=SOURCE_OFFSETS,
                  source_id=sid, seq=offset, kind=kind, generation=generation,
                  member_id=member_id, data=data)]

