"""The test bed's expectations for share and streams groups (tests/support/kafkabed/expect.py),
derived from real 4.2.2 and 4.4.0 brokers' lines (tests/fixtures/kafka-4.*-modern) and what the
capture did to the members (its ground truth), never from the monitor.

The brokers bump a share or streams group's epoch without a "Bumped" line when a member is
fenced or leaves, and a share group's once more with no member change when its share partitions
are initialised (4.2: also right after a fence): the rebalances follow the broker's lines, not
one per "Bumped" line."""
from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.capture_expectations import FIXTURES
from tests.support.kafkabed.expect import (
    Expected, ExpRemoval, broker_client_id, epoch_line_rebalances, expected_removals, group_lines
)
from tests.support.kafkabed.verdict import judge


def _capture(name: str) -> tuple[list[Any], list[dict[str, Any]]]:
    shipped = [SimpleNamespace(text=text, broker_id=b, read_ms=None)
               for b in (1, 2) for text in (FIXTURES / name / f"broker{b}-server.log").read_text().splitlines()]
    truth = [json.loads(line) for line in (FIXTURES / name / "ground-truth.jsonl").read_text().splitlines()]
    return shipped, truth


def _rebalances(name: str, group: str, protocol: str) -> list[tuple]:
    shipped, truth = _capture(name)
    timeline = [e for e in truth if e.get("group") in (group, None)]
    return [(r.generation, r.trigger, r.outcomes, r.start_line)
            for r in epoch_line_rebalances(group_lines(shipped, group), group, timeline, protocol)]


@pytest.mark.parametrize("name,group,after_fence", [
    ("kafka-4.4-modern", "k440-share", []),
    # 4.2 checks for unassigned initialised share partitions on every heartbeat: the fenced
    # member's partitions are, so the next heartbeat bumps again (with a "Bumped" line)
    ("kafka-4.2-modern", "k422-share", ["group_epoch_bump"]),
])
def test_share_group_rebalances_follow_the_brokers_lines(name, group, after_fence):
    got = _rebalances(name, group, "share")
    # a and b join; the broker bumps once more by itself (share partitions initialised); b is
    # fenced; c joins; a and c leave
    assert [t for _, t, _, _ in got] == ["member_join", "member_join", "group_epoch_bump", "heartbeat_expiry",
                                         *after_fence, "member_join", "member_leave", "member_leave"]
    generations = [g for g, _, _, _ in got]
    assert generations == list(range(generations[0], generations[0] + len(got)))
    fence = next(r for r in got if r[1] == "heartbeat_expiry")
    assert "fenced from the group because the member session expired" in fence[3]
    assert "stable" in fence[2]
    if after_fence:
        assert "superseded" in fence[2]       # the next bump may come before the member reconciles
    assert "left the share group" in got[-1][3] and got[-1][2] == ("empty",)
    assert all("empty" not in outcomes for _, _, outcomes, _ in got[:-1])


@pytest.mark.parametrize("name,group", [("kafka-4.4-modern", "k440-streams"), ("kafka-4.2-modern", "k422-streams")])
def test_streams_group_rebalances_and_removals(name, group):
    got = _rebalances(name, group, "streams")
    # a joins, b joins, b (killed) is fenced, a (closed: Streams sends no leave) is fenced
    assert [(t, o) for _, t, o, _ in got] == [("member_join", ("stable",)), ("member_join", ("stable", "superseded")),
                                              ("heartbeat_expiry", ("stable", "superseded")),
                                              ("heartbeat_expiry", ("empty",))]
    assert [g for g, _, _, _ in got] == [2, 3, 4, 5]     # a new streams group's first bump is to 2
    _, truth = _capture(name)
    timeline = [e for e in truth if e.get("group") == group]
    removals = expected_removals(timeline, "4.4.0", "streams", 60_000)
    assert [(r.client_id, r.cause, r.root_cause, r.action) for r in removals] == [
        (f"{group}-b-StreamThread-1-consumer", "heartbeat_expiry", "unknown", "kill"),
        (f"{group}-a-StreamThread-1-consumer", "heartbeat_expiry", "unknown", "leave")]


def test_a_streams_instance_is_named_by_its_thread_consumer():
    assert broker_client_id({"client_id": "g-a", "library": "java-streams"}) == "g-a-StreamThread-1-consumer"
    assert broker_client_id({"client_id": "g-a", "library": "java-share"}) == "g-a"


def test_a_removal_of_another_protocol_than_the_groups_fails_the_verdict():
    exp = Expected("g", "share", removals=[ExpRemoval("g-b", "heartbeat_expiry", "process_crash", "kill", 1000)],
                   removal_lines={"m": [7000]})
    rec = {"group": "g", "client_id": "g-b", "member_id": "m", "removed_at_ms": 7000, "cause": "heartbeat_expiry",
           "root_cause": "process_crash"}

    def removal_failures(protocol):
        return [f for f in judge("4.4.0", "share_group", exp, {"member_removals": [{**rec, "protocol": protocol}]},
                                 {}).failures if f[0] == "removals"]
    assert removal_failures("share") == []
    assert removal_failures("consumer") == [("removals", "g-b: protocol consumer, expected share")]
