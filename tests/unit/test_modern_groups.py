"""Share and streams groups on real 4.2.2 and 4.4.0 brokers (tests/fixtures/kafka-4.*-modern,
made by scripts/capture-modern-groups): the rebalance and removal records carry the right
`protocol`, and the removals match what the capture did to the members (its ground truth), read
from the brokers' logs alone and together with `__consumer_offsets`."""
from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from typing import Any

import pytest

from streaming.app.local import run_local
from tests.support.capture_expectations import FIXTURES, capture_inputs

CAPTURES = {"kafka-4.2-modern": "k422", "kafka-4.4-modern": "k440"}
SESSION_MS = 6000      # the bed's share and streams session timeouts
SLACK_MS = 3000        # heartbeat interval, expiry check and shipping


def _truth(capture: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / capture / "ground-truth.jsonl").read_text().splitlines()]


def _action(truth: list[dict[str, Any]], action: str, client: str) -> int:
    return next(e["ts_ms"] for e in truth if e["action"] == action and e.get("client_id") == client)


def _run(capture: str, with_offsets: bool) -> dict[str, list[Any]]:
    logs, offsets = capture_inputs(capture)
    return run_local(logs, offsets if with_offsets else [])


@pytest.fixture(scope="module", params=[(c, o) for c in CAPTURES for o in (False, True)],
                ids=lambda p: f"{p[0]}-{'logs+offsets' if p[1] else 'logs'}")
def replayed(request):
    capture, with_offsets = request.param
    return capture, CAPTURES[capture], _run(capture, with_offsets)


def _logged(capture: str, text: str) -> int:
    """The time of the one broker line of the capture that contains `text`."""
    found = [line for name in ("broker1-server.log", "broker2-server.log")
             for line in (FIXTURES / capture / name).read_text().splitlines() if text in line]
    assert len(found) == 1, found
    stamp = datetime.strptime(found[0][1:24], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc)
    return int(stamp.timestamp() * 1000)


def _of(out: dict[str, list[Any]], kind: str, group: str) -> list[dict[str, Any]]:
    return [r for r in out[kind] if r["group"] == group]


def test_every_record_of_a_share_or_streams_group_says_so(replayed):
    _, prefix, out = replayed
    for group_type in ("share", "streams"):
        group = f"{prefix}-{group_type}"
        records = _of(out, "rebalance", group) + _of(out, "removal", group) + _of(out, "snapshot", group)
        assert records, group
        assert {r["protocol"] for r in records} == {group_type}, group


def test_share_group_removals_match_what_was_done(replayed):
    capture, prefix, out = replayed
    group, truth = f"{prefix}-share", _truth(capture)
    removals = sorted(_of(out, "removal", group), key=lambda r: r["removed_at_ms"])
    assert [r["cause"] for r in removals] == ["heartbeat_expiry", "leave_group", "leave_group"]
    killed = _action(truth, "kill", f"{group}-b")
    assert killed + SESSION_MS - SLACK_MS <= removals[0]["removed_at_ms"] <= killed + SESSION_MS + SLACK_MS
    assert removals[0]["root_cause"] == "process_crash"
    left = sorted(_action(truth, "leave", f"{group}-{c}") for c in "ac")
    closed = max(_action(truth, "closed", f"{group}-{c}") for c in "ac")
    for removal in removals[1:]:
        assert left[0] <= removal["removed_at_ms"] <= closed
        assert removal["root_cause"] == "graceful_shutdown"
    # the three members are three different ids
    assert len({r["member_id"] for r in removals}) == 3


def test_share_group_rebalances_name_their_triggers(replayed):
    _, prefix, out = replayed
    rebalances = _of(out, "rebalance", f"{prefix}-share")
    triggers = Counter(r["trigger"] for r in rebalances)
    # a, b and c joined; b's session expired; the broker bumps the epoch once more by itself when
    # it initialises the share partitions (no member change: group_epoch_bump)
    assert triggers["member_join"] == 3 and triggers["heartbeat_expiry"] == 1, triggers
    assert set(triggers) <= {"member_join", "heartbeat_expiry", "group_epoch_bump", "member_leave"}, triggers
    fenced = next(i for i, r in enumerate(rebalances) if r["trigger"] == "heartbeat_expiry")
    if rebalances[fenced]["outcome"] == "superseded":
        # 4.2: the fence's epoch (its record only; no log line) is followed within 250 ms by the
        # share-partition initialisation's bump, which completes
        nxt = rebalances[fenced + 1]
        assert nxt["trigger"] == "group_epoch_bump" and nxt["generation"] == rebalances[fenced]["generation"] + 1
        assert nxt["started_at_ms"] - rebalances[fenced]["started_at_ms"] < 1000
        fenced += 1
    assert rebalances[fenced]["outcome"] == "stable" and rebalances[fenced]["total_seconds"] is not None
    generations = [r["generation"] for r in rebalances]
    assert generations == sorted(generations) and len(set(generations)) == len(generations)
    # nothing left rebalancing: the last member's leave empties the group
    snapshot, = [s for s in out["snapshot"] if s["group"] == f"{prefix}-share"]
    assert snapshot["state"] == "Empty" and snapshot["rebalance_in_progress"] is None


def test_streams_group_removals_and_rebalances(replayed):
    capture, prefix, out = replayed
    group, truth = f"{prefix}-streams", _truth(capture)
    removals = sorted(_of(out, "removal", group), key=lambda r: r["removed_at_ms"])
    # b was killed; a closed, and Kafka Streams does not leave on close: both sessions expire,
    # and the broker's record cannot tell the stop from the crash: a crash each, rated low
    assert [r["cause"] for r in removals] == ["heartbeat_expiry", "heartbeat_expiry"]
    assert {(r["root_cause"], r["root_cause_confidence"]) for r in removals} == {("process_crash", "low")}
    assert "Kafka Streams" in removals[0]["root_cause_confidence_reason"]
    killed, closed = _action(truth, "kill", f"{group}-b"), _action(truth, "leave", f"{group}-a")
    assert killed + SESSION_MS - SLACK_MS <= removals[0]["removed_at_ms"] <= killed + SESSION_MS + SLACK_MS
    assert closed + SESSION_MS - SLACK_MS <= removals[1]["removed_at_ms"] <= closed + SESSION_MS + SLACK_MS
    rebalances = _of(out, "rebalance", group)
    first = rebalances[0]
    assert (first["trigger"], first["outcome"]) == ("member_join", "stable")
    assert Counter(r["trigger"] for r in rebalances)["member_join"] == 2
    if capture == "kafka-4.2-modern":
        # b's join: b was killed UNRELEASED_TASKS at 3 and fenced; its tombstones come with epoch 4,
        # so epoch 3 never completed (a was STABLE at 3), with the records read or not
        joined = [r for r in rebalances if r["trigger"] == "member_join"][1]
        assert (joined["generation"], joined["outcome"], joined["completed_at_ms"]) == (3, "superseded", None)
    if capture == "kafka-4.4-modern":
        # b's join: b UNRELEASED_TASKS at 3, a UNREVOKED_TASKS at 2, a STABLE at 3, b STABLE at 3; the
        # type-22 records say the same in the streams enum (STABLE is 1): complete at b's line, read
        # with the records or without
        joined = [r for r in rebalances if r["trigger"] == "member_join"][1]
        assert (joined["generation"], joined["outcome"], joined["members"]) == (3, "stable", 2)
        assert joined["completed_at_ms"] == _logged(capture, "[GroupId k440-streams][MemberId B-ysFiqEQWyUNVomRhCfgQ] "
                                                             "Member's new assignment state: epoch=3, previousEpoch=3, "
                                                             "state=STABLE")
    snapshot, = [s for s in out["snapshot"] if s["group"] == group]
    assert snapshot["state"] == "Empty" and snapshot["rebalance_in_progress"] is None


def test_no_input_is_quarantined(replayed):
    _, _, out = replayed
    assert out["quarantine"] == []


@pytest.mark.parametrize("capture", CAPTURES)
def test_an_epoch_completes_alike_from_logs_and_from_logs_with_offsets(capture):
    """The members' "new assignment state" lines and their current-assignment records say the same
    thing: an epoch both inputs show completes in both, at the same time, or in neither (a streams
    record's state is of another enum; a departure's tombstones come with the next epoch)."""
    prefix = CAPTURES[capture]
    logs, both = _run(capture, False), _run(capture, True)
    for group_type in ("share", "streams"):
        group = f"{prefix}-{group_type}"
        from_logs = {r["generation"]: r for r in _of(logs, "rebalance", group)}
        with_offsets = {r["generation"]: r for r in _of(both, "rebalance", group)}
        completed = [(g, from_logs[g]["completed_at_ms"], with_offsets[g]["completed_at_ms"])
                     for g in sorted(set(from_logs) & set(with_offsets))
                     if "stable" in (from_logs[g]["outcome"], with_offsets[g]["outcome"])]
        assert completed and all(a == b is not None for _, a, b in completed), (group, completed)
