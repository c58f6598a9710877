"""The entries GroupModel keeps while it waits (held removals, inferred removals, generation
checks, provisional triggers) are dataclasses; their stored form is the one the release that kept
them as dicts (82c26b9) wrote, byte for byte, and every older form loads
(tests/fixtures/state-entries/README.md)."""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from state.model import (
    GenerationCheck, GroupModel, HeldRemoval, InferredRemoval, Member, OpenRebalance, ProvisionalTrigger, unpack,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "state-entries" / "dict-era.json"
CASES: dict[str, dict[str, str]] = json.loads(FIXTURE.read_text())


def rec(member_id: str, cause: str, at: int, **kw: Any) -> dict[str, Any]:
    r = {"cluster": "c", "group": "g", "protocol": "classic", "member_id": member_id,
         "client_id": f"client-{member_id}", "client_host": "/10.0.0.1", "group_instance_id": None,
         "session_timeout_ms": 10000, "rebalance_timeout_ms": 300000, "removed_at_ms": at, "cause": cause,
         "root_cause": "unknown", "evidence": "", "root_cause_confidence": None,
         "root_cause_confidence_reason": None, "group_root_cause": None, "host_members": 2,
         "reason_text": None, "generation": 3, "coordinator": 1, "source_id": "log-1", "seq": at // 10,
         "partition_seconds_stopped": None}
    r.update(kw)
    return r


def _as_stored_then(member: Member) -> dict[str, Any]:
    """A member as the fixture's release stored it: without the fields Member gained since
    (reached_at_ms); loaded, it is written back so."""
    known = dataclasses.asdict(member)
    del known["reached_at_ms"]
    return known


def every_entry() -> GroupModel:
    """The model of the fixture's `every_entry`, with the dataclasses."""
    m = GroupModel(cluster="c", group="g", state="Stable", generation=4, coordinator=1,
                   seen_sources=["log", "offsets"])
    m.members["m1"] = Member(member_id="m1", client_id="client-m1", partitions=["t:0"])
    m.held_removals = [
        HeldRemoval(rec("m2", "pending_member_timeout", 1000), 1000),
        HeldRemoval(rec("m3", "leave_group", 2000), 2500, stalled=False,
                    commit_text="it joined generation 3, whose rebalance started 1.0 s before the leave, within "
                                "max.poll.interval.ms 300.0 s", rejoined_at_ms=2500, same_member_id=False),
        HeldRemoval(rec("m4", "leave_group", 3000, partition_seconds_stopped=1.5), 303000, commit_known=True,
                    stalled=True, commit_text="no commit on its 1 partition(s) before the leave"),
        HeldRemoval(rec("m5", "leave_group", 3100, reason_text="not provided"), 303100,
                    commit_text="commit evidence not available (assignment unknown), the rejoin alone decides"),
        HeldRemoval(rec("m6", "heartbeat_expiry", 4000), 64000, expired_with_others=True, rejoined_at_ms=5000,
                    same_member_id=True),
        HeldRemoval(rec("m7", "heartbeat_expiry", 4100), 64100, expired_with_others=True, coordinator_move_ms=4050,
                    poll_inferred=True),
    ]
    m.pending_inferred = [
        InferredRemoval(6000, rec("m8", "leave_group", 4000, evidence="inferred"), _as_stored_then(
            Member(member_id="m8", client_id="client-m8", client_host="/10.0.0.2", session_timeout_ms=10000,
                   rebalance_timeout_ms=300000, partitions=["t:1", "t:2"]))),
        InferredRemoval(6100, rec("m9", "leave_group", 4100), _as_stored_then(Member(member_id="m9"))),
    ]
    m.generation_checks = {
        "4": GenerationCheck(log=True, log_completed=False, offsets=False, ts_ms=7000, due_ms=17000,
                             source_id="log-1", seq=70),
        "5": GenerationCheck(log=True, log_completed=True, offsets=True, ts_ms=8000, due_ms=18000,
                             source_id="offsets-1", seq=80),
        "6": GenerationCheck(log=False, log_completed=False, offsets=True, ts_ms=9000, due_ms=19000,
                             source_id="offsets-1", seq=90),
    }
    m.provisional_triggers = [
        ProvisionalTrigger("m3", 4, 2000, "classic", "stable", "member_leave", "m3",
                           impact={"partition_seconds_stopped": 2.5, "partition_seconds_by_topic": {"t": 2.5},
                                   "partition_seconds_by_departed_member": {"m3": 2.5},
                                   "partition_stop_seconds": [[2.5, 1]]},
                           member_stops=[["t:0", 2.5]]),
        ProvisionalTrigger("m5", None, None, "classic", "empty", "member_leave", "m5",
                           impact={"partition_seconds_stopped": None, "partition_seconds_by_topic": None,
                                   "partition_seconds_by_departed_member": None, "partition_stop_seconds": None},
                           member_stops=[]),
    ]
    return m


def older_entries() -> GroupModel:
    """The model of the fixture's `older_entries`: entries as older releases stored them."""
    m = GroupModel(cluster="c", group="old", state="PreparingRebalance", generation=2)
    m.open_rebalance = OpenRebalance(protocol="classic", previous_generation=2, started_at_ms=500,
                                     trigger="member_leave", trigger_member="m1", reason_text=None, coordinator=1)
    known = _as_stored_then(Member(member_id="m2", client_id="client-m2", partitions=["t:3"]))
    del known["assignment_record_ms"]      # a member stored before f08167f
    m.held_removals = [HeldRemoval(rec("m1", "leave_group", 400), 300400, stalled=False,
                                   commit_text="last commit on its 1 partition(s) 0.1 s before the leave "
                                               "(commits during the last 300.0 s)")]
    m.pending_inferred = [InferredRemoval(2400, rec("m2", "leave_group", 400), known)]
    m.provisional_triggers = [ProvisionalTrigger("m1", 2, 100, "classic", "stable", "member_leave", "m1")]
    m.generation_checks = {"2": GenerationCheck(log=True, log_completed=True, offsets=False, ts_ms=450,
                                                due_ms=10450, source_id="log-1", seq=45)}
    return m


MODELS: dict[str, Callable[[], GroupModel]] = {"every_entry": every_entry, "older_entries": older_entries}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_same_state_is_stored_as_the_dict_era_stored_it(name: str) -> None:
    model = MODELS[name]()
    assert unpack(model.to_json()) == CASES[name]["stored"]
    assert GroupModel.from_json(model.to_json()) == model


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_stored_form_loads_into_the_dataclasses_and_is_written_back_as_before(name: str) -> None:
    loaded = GroupModel.from_json(CASES[name]["stored"])
    assert loaded == MODELS[name.split("/")[0]]()
    assert unpack(loaded.to_json()) == CASES[name]["written_back"]


def test_an_optional_field_is_stored_once_set_false_included() -> None:
    """Not learned (None, or False for the flags only ever set true) is left out; a False that was
    learned (stalled, same_member_id) is stored."""
    raw = json.loads(CASES["every_entry"]["stored"])
    assert [sorted(k for k in h if k != "rec") for h in raw["held_removals"]] == [
        ["decide_at"],
        ["commit_text", "decide_at", "rejoined_at_ms", "same_member_id", "stalled"],
        ["commit_known", "commit_text", "decide_at", "stalled"],
        ["commit_text", "decide_at"],
        ["decide_at", "expired_with_others", "rejoined_at_ms", "same_member_id"],
        ["coordinator_move_ms", "decide_at", "expired_with_others", "poll_inferred"]]
    assert raw["held_removals"][1]["stalled"] is False and raw["held_removals"][1]["same_member_id"] is False
    assert sorted(json.loads(CASES["older_entries"]["stored"])["provisional_triggers"][0]) == [
        "generation", "member_id", "outcome", "protocol", "started_at_ms", "trigger", "trigger_member"]
    assert raw["generation_checks"]["6"]["log"] is False and raw["pending_inferred"][1]["known"]["partitions"] is None
