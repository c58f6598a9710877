"""The stored state of one real group (issue 15's budget): the Kafka 2.7 capture's sc03 group at
its last Stable moment, commit rows held for one lateness window, and the bytes both state columns
(model and held event rows) take as the stateful step stores them. tests/unit/test_state_budget.py
asserts the budget; bench/scale reports `state_bytes_per_group` with this tree's encoder."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from state import events as E
from state.machine import GroupStateMachine
from state.model import STABLE, GroupModel, pack, unpack
from streaming.app.local import capture_events
from streaming.app.settings import LogInput, OffsetsInput
from streaming.rows import event_row
from streaming.spark.stateful import _dump

CAPTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "kafka-2.7"
LOG_FILES = ("broker1-server.log", "broker2-server.log")
GROUP = "sc03-heartbeat-expiry"


def sc03() -> tuple[GroupModel, E.Event]:
    """The real sc03 group of the Kafka 2.7 capture at its last Stable moment (after the
    heartbeat expiry: two members, the removal held for its decision), and its latest commit."""
    logs = [LogInput(path=str(CAPTURE / name), cluster="default") for name in LOG_FILES]
    offsets = [OffsetsInput(path=str(CAPTURE / "offsets-topic.jsonl"), cluster="default")]
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


def held_commits(commit: E.Event, partitions: int = 3, batches: int = 6) -> list[list]:
    """What waits in the state for the watermark: one commit pack (all partitions of an
    auto-commit) per micro-batch over a 30 s lateness at 5 s commits (6 batches x 3 partitions),
    as the stateful step holds them (the data as an object: streaming/rows.py PACKED_DATA)."""
    topic, _, offset, _, count = commit.data["commits"][0][:5]
    rows = []
    for b in range(batches):
        entries = [[topic, p, offset + 100 * b, commit.ts_ms + 5_000 * b, count] for p in range(partitions)]
        row = event_row(dataclasses.replace(commit, ts_ms=commit.ts_ms + 5_000 * b, seq=b * 10 + partitions,
                                            data={"commits": entries}))
        rows.append([*row[:-1], {"commits": entries}])
    return rows


def stored_bytes(model: GroupModel, held: list[list]) -> int:
    """Both state columns as stored (model JSON, packed held rows), checked to round-trip."""
    model_json, held_json = model.to_json(), pack(_dump(held)) if held else "[]"
    assert GroupModel.from_json(model_json) == model
    assert json.loads(unpack(held_json)) == json.loads(_dump(held))
    return len(model_json.encode()) + len(held_json.encode())
