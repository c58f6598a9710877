"""Hand-made events for the state machine tests, and the records they should give."""
from __future__ import annotations

import itertools
import json
from typing import Any

from state import events as E
from state.impact import IMPACT_FIELDS
from state.machine import GroupStateMachine
from state.model import GroupModel

G = "orders-app"
CLUSTER = "default"
LOG_SOURCE = "broker1/server.log"
OFFSETS_SOURCE = "__consumer_offsets-12"
FAR_FUTURE_MS = E.END_OF_INPUT_TS_MS

# Classic member ids are broker-generated `<client.id>-<uuid>`.
C1 = "consumer-orders-1-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
C2 = "consumer-orders-2-1b2c3d4e-5f6a-4b7c-9d8e-0f1a2b3c4d5e"
C3 = "consumer-orders-3-2c3d4e5f-6a7b-4c8d-ae9f-1a2b3c4d5e6f"
C4 = "consumer-orders-4-3d4e5f6a-7b8c-4d9e-bf0a-2b3c4d5e6f7a"
# Static members: `<group.instance.id>-<uuid>`.
S_OLD = "inst-a-4e5f6a7b-8c9d-4e0f-8a1b-3c4d5e6f7a8b"
S_NEW = "inst-a-5f6a7b8c-9d0e-4f1a-9b2c-4d5e6f7a8b9c"
# KIP-848 member ids are client-generated and opaque.
K1 = "WLAp9ronRLWs/Gq7JdNBDw"
K2 = "x3Jd0c8QTm2uU5vY1q9ZtA"

HOSTS = {C1: "/10.0.0.1", C2: "/10.0.0.2", C3: "/10.0.0.3", C4: "/10.0.0.4"}
CLIENT_IDS = {C1: "consumer-orders-1", C2: "consumer-orders-2", C3: "consumer-orders-3",
              C4: "consumer-orders-4"}

_seq = itertools.count()


# ------------------------------------------------------------------------------- helpers
def ev(ts: int, kind: str, generation: int | None = None, member_id: str | None = None,
       reason: str | None = None, data: dict[str, Any] | None = None, *,
       broker: int | None = None, source: str | None = None, group: str = G) -> E.Event:
    """One event; log kinds come from broker 1's server.log, the rest from __consumer_offsets."""
    if source is None:
        source = E.SOURCE_OFFSETS if kind in E.OFFSETS_KINDS else E.SOURCE_LOG
    if broker is None and source == E.SOURCE_LOG:
        broker = 1
    return E.Event(group=group, ts_ms=ts, source=source,
                   source_id=LOG_SOURCE if source == E.SOURCE_LOG else OFFSETS_SOURCE,
                   seq=next(_seq), kind=kind, broker=broker, generation=generation,
                   member_id=member_id, reason=reason, data=dict(data or {}))


def md_member(member_id: str, *, client_id: str | None = None, host: str | None = None,
              instance: str | None = None, session: int = 10000, rebalance: int = 300000) -> dict:
    return {"member_id": member_id, "client_id": client_id or CLIENT_IDS.get(member_id),
            "client_host": host or HOSTS.get(member_id), "group_instance_id": instance,
            "session_timeout_ms": session, "rebalance_timeout_ms": rebalance}


def metadata(ts: int, generation: int, members: list[dict], *, leader: str | None = None) -> E.Event:
    return ev(ts, E.GROUP_METADATA, generation, data={
        "protocol_type": "consumer", "protocol": "range" if members else None,
        "leader": leader if leader is not None else (members[0]["member_id"] if members else None),
        "current_state_ts_ms": ts, "members": members})


def prepare(ts: int, old_gen: int, trigger: str | None = "member_join",
            member: str | None = None, reason: str | None = None) -> E.Event:
    data: dict[str, Any] = {}
    if trigger is not None:
        data["trigger"] = trigger
    if member is not None:
        data["trigger_member"] = member
    return ev(ts, E.PREPARE_REBALANCE, old_gen, reason=reason, data=data)


def new_machine() -> GroupStateMachine:
    return GroupStateMachine(GroupModel(cluster=CLUSTER, group=G))


def run(events: list[E.Event], machine: GroupStateMachine | None = None) -> GroupStateMachine:
    machine = machine or new_machine()
    machine.apply_all(events)
    return machine


DIAGNOSIS_REBALANCE_KEYS = ("waited_for_member", "hit_rebalance_timeout", "rebalance_timeout_ms",
                            "initial_delay_seconds", "trigger_final", *IMPACT_FIELDS)   # impact: test_impact.py


def _undiagnosed_removal(r: dict) -> dict:
    r = dict(r)
    r.pop("partition_seconds_stopped", None)       # what the removal cost: tests/unit/test_impact.py
    for key in ("root_cause_confidence", "root_cause_confidence_reason", "group_root_cause", "host_members",
                "rejoined_after_ms"):
        r.pop(key, None)                           # the diagnosis: tests/unit/test_diagnosis.py
    r["root_cause"] = "unknown"
    if r["cause"] == "poll_timeout" and "(inferred)" in (r.get("evidence") or ""):
        r["cause"] = "leave_group"
    ev = r.get("evidence") or ""
    r["evidence"] = ev.split("; ")[0] if ev.startswith("inferred:") else ""
    return r


def outs(machine: GroupStateMachine) -> list:
    """machine.outputs as before the diagnosis (tested in tests/unit/test_diagnosis.py): removals at the
    place they were found (held or not), without root cause, rebalances without the new fields
    and without their trigger decisions (tests/unit/test_trigger_decisions.py)."""
    others = [(k, r) for k, r in machine.outputs if k not in ("removal", "rebalance_trigger")]
    out: list = []
    held = list(machine.hold_order)
    for i, (kind, r) in enumerate(others + [(None, None)]):
        while held and held[0][0] <= i:
            out.append(("removal", _undiagnosed_removal(held.pop(0)[1])))
        if kind == "rebalance":
            assert r is not None
            r = {k: v for k, v in r.items() if k not in DIAGNOSIS_REBALANCE_KEYS}
        if kind is not None:
            out.append((kind, r))
    return out


def records(machine: GroupStateMachine, kind: str) -> list[dict]:
    """Records of one kind without the diagnosis (tested in tests/unit/test_diagnosis.py): removals
    still held for their decision window included, root_cause/evidence as before diagnosis."""
    return [r for k, r in outs(machine) if k == kind]


def rebalance(**fields: Any) -> dict:
    """An expected rebalance record: every field must be given except cluster/group/protocol, and
    assigned_at_ms of a classic one (always null)."""
    base: dict[str, Any] = {"cluster": CLUSTER, "group": G, "protocol": "classic"}
    base.update(fields)
    if base["protocol"] == "classic":
        base.setdefault("assigned_at_ms", None)
    keys = {"cluster", "group", "protocol", "generation", "previous_generation", "coordinator",
            "started_at_ms", "join_completed_at_ms", "assigned_at_ms", "completed_at_ms", "ended_at_ms",
            "join_seconds", "sync_seconds", "total_seconds", "trigger", "trigger_member",
            "reason_text", "outcome", "members", "removed_members"}
    assert set(base) == keys, set(base) ^ keys
    return base


def removal(e: E.Event, member_id: str, cause: str, *, generation: int | None,
            protocol: str = "classic", client_id: str | None = None,
            client_host: str | None = None, group_instance_id: str | None = None,
            session_timeout_ms: int | None = None, rebalance_timeout_ms: int | None = None,
            reason_text: str | None = None, coordinator: int | None = 1) -> dict:
    return {"cluster": CLUSTER, "group": G, "protocol": protocol, "member_id": member_id,
            "client_id": client_id, "client_host": client_host,
            "group_instance_id": group_instance_id, "session_timeout_ms": session_timeout_ms,
            "rebalance_timeout_ms": rebalance_timeout_ms, "removed_at_ms": e.ts_ms, "cause": cause,
            "root_cause": "unknown", "evidence": "", "reason_text": reason_text,
            "generation": generation, "coordinator": coordinator, "source_id": e.source_id,
            "seq": e.seq}


def known_removal(e: E.Event, member_id: str, cause: str, *, generation: int | None,
                  **kw: Any) -> dict:
    """Removal of a member known from a GroupMetadata record built with md_member defaults."""
    return removal(e, member_id, cause, generation=generation, client_id=CLIENT_IDS[member_id],
                   client_host=HOSTS[member_id], session_timeout_ms=10000,
                   rebalance_timeout_ms=300000, **kw)


def anomaly(e: E.Event, from_state: str, to_state: str) -> dict:
    return {"cluster": CLUSTER, "group": G, "ts_ms": e.ts_ms, "kind": "invalid_transition",
            "from_state": from_state, "to_state": to_state, "event_kind": e.kind,
            "source_id": e.source_id, "seq": e.seq}


def stable_group(members: list[str], *, t0: int = 1000) -> tuple[list[E.Event], dict]:
    """Kafka 2.8+ start-up of a group to generation 1 with `members`; returns (events, record)."""
    evs = [
        prepare(t0, 0, "member_join", members[0],
                f"Adding new member {members[0]} with group instance id None"),
        ev(t0 + 3000, E.JOIN_COMPLETE, 1),
        ev(t0 + 3010, E.ASSIGNMENT_RECEIVED, 1, members[0],
           data={"members": len(members), "static_members": 0}),
        metadata(t0 + 3012, 1, [md_member(m) for m in members]),
    ]
    rec = rebalance(generation=1, previous_generation=0, coordinator=1, started_at_ms=t0,
                    join_completed_at_ms=t0 + 3000, completed_at_ms=t0 + 3010,
                    ended_at_ms=t0 + 3010, join_seconds=3.0, sync_seconds=0.01,
                    total_seconds=3.01, trigger="member_join", trigger_member=members[0],
                    reason_text=f"Adding new member {members[0]} with group instance id None",
                    outcome="stable", members=len(members), removed_members=[])
    return evs, rec


def machine_outputs_in_batches(capture: str, group: str, batches: int = 1) -> list[tuple[str, dict]]:
    """A capture group's machine outputs, its events applied in `batches` turns, each advanced to
    its last event's time, with the model going through its stored form in between (as the Spark
    state does), then advanced to the end of input."""
    from streaming.app.local import capture_events
    from tests.support.capture_expectations import capture_inputs
    events = sorted((e for e in capture_events(*capture_inputs(capture)) if e.group == group), key=E.Event.sort_key)
    state = GroupModel(cluster=CLUSTER, group=group).to_json()
    out: list[tuple[str, dict]] = []
    size = -(-len(events) // batches)
    for i in range(0, len(events), size):
        machine = GroupStateMachine(GroupModel.from_json(state))
        machine.apply_all(events[i:i + size])
        machine.advance_to(events[min(i + size, len(events)) - 1].ts_ms)
        out += machine.outputs
        state = machine.m.to_json()
    machine = GroupStateMachine(GroupModel.from_json(state))
    machine.advance_to(FAR_FUTURE_MS)
    return out + machine.outputs


def as_sorted_json(outputs: list[tuple[str, dict]]) -> list[tuple[str, str]]:
    """Outputs in a form that compares regardless of their order (batching-independence tests)."""
    return sorted((kind, json.dumps(rec, sort_keys=True)) for kind, rec in outputs)
