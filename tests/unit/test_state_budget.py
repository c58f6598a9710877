"""The Spark state of a group stays small (issue 15): <= 2 KB for an idle group, <= 8 KB for a
group of 100 members, counting both state columns (model and held event rows) as stored."""
from __future__ import annotations

import dataclasses
import json
import random
import uuid

import pytest

from state import events as E
from state.machine import GroupStateMachine
from state.model import STABLE, GroupModel, Member, pack, unpack
from streaming.app.local import capture_events
from streaming.rows import event_row
from streaming.spark.stateful import _dump
from tests.support.capture_expectations import capture_inputs

IDLE_GROUP_BYTES = 2 * 1024
HUNDRED_MEMBERS_BYTES = 8 * 1024
GROUP = "sc03-heartbeat-expiry"


@pytest.fixture(scope="module")
def sc03():
    """The real sc03 group of the Kafka 2.7 capture at its last Stable moment (after the
    heartbeat expiry: two members, the removal held for its decision), and its latest commit."""
    logs, offsets = capture_inputs("kafka-2.7")
    # in the stateful step's order (capture_events lists each input's events in turn)
    events = sorted((e for e in capture_events(logs, offsets) if e.group == GROUP), key=E.Event.sort_key)
    machine = GroupStateMachine(GroupModel(cluster="default", group=GROUP))
    stable = None
    for ev in events:
        machine.apply(ev)
        if machine.m.state == STABLE and len(machine.m.members) >= 2:
            stable = GroupModel.from_json(machine.m.to_json())
    commit = [e for e in events if e.kind == E.OFFSET_COMMITS][-1]
    assert stable is not None and len(stable.members) == 2
    return stable, commit


def _held_commits(commit, partitions: int = 3, batches: int = 6) -> list[list]:
    """What waits in the state for the watermark: one commit pack (all partitions of an
    auto-commit) per micro-batch over a 30 s lateness at 5 s commits (6 batches x 3 partitions)."""
    topic, _, offset, _, count = commit.data["commits"][0]
    rows = []
    for b in range(batches):
        entries = [[topic, p, offset + 100 * b, commit.ts_ms + 5_000 * b, count] for p in range(partitions)]
        rows.append(list(event_row(dataclasses.replace(commit, ts_ms=commit.ts_ms + 5_000 * b, seq=b * 10 + partitions,
                                                       data={"commits": entries}))))
    return rows


def _stored_bytes(model: GroupModel, held: list[list]) -> int:
    model_json, held_json = model.to_json(), pack(_dump(held)) if held else "[]"
    assert GroupModel.from_json(model_json) == model
    assert json.loads(unpack(held_json)) == json.loads(_dump(held))
    return len(model_json.encode()) + len(held_json.encode())


def test_an_idle_group_fits_in_2_kb(sc03):
    model, commit = sc03
    size = _stored_bytes(model, _held_commits(commit))
    assert size <= IDLE_GROUP_BYTES, size


def test_a_group_of_100_members_fits_in_8_kb(sc03):
    model, commit = sc03
    real = next(iter(model.members.values()))
    rng = random.Random(15)
    for i in range(100):
        member_id = f"{GROUP}-c{i}-{uuid.UUID(int=rng.getrandbits(128), version=4)}"
        model.members[member_id] = dataclasses.replace(
            real, member_id=member_id, client_id=f"{GROUP}-c{i}", client_host=f"/10.0.{i // 250}.{i % 250}",
            partitions=[f"sc03-topic:{i}"])
    model.members = dict(list(model.members.items())[-100:])
    size = _stored_bytes(model, _held_commits(commit, partitions=100, batches=1))
    assert size <= HUNDRED_MEMBERS_BYTES, size


def test_the_budget_test_would_see_an_uncompressed_state(sc03):
    """The same 100 members in the version-2 form (every field, plain JSON) are far over 8 KB."""
    model, _ = sc03
    members = {f"m-{i}-{uuid.uuid4()}": Member(member_id="x", client_id=f"c{i}", client_host="/10.0.0.1",
                                               session_timeout_ms=45_000, rebalance_timeout_ms=300_000,
                                               partitions=[f"t:{i}"]) for i in range(100)}
    v2 = json.dumps({**dataclasses.asdict(dataclasses.replace(model, members=members)), "schema_version": 2})
    assert len(v2) > HUNDRED_MEMBERS_BYTES
