"""Assertions that a run's records match what the Kafka 2.7 capture's README lists.

Shared by the file replay tests and the live (Kafka topic) tests: both must produce the same.
"""
from __future__ import annotations

import pytest

from tests.support.capture_expectations import assignment_received_ms, expected_trigger, readme_rebalances_27


def assert_kafka27_rebalances(rebalances: list[dict]) -> None:
    got: dict = {}
    for r in rebalances:
        got.setdefault((r["group"], r["generation"]), []).append(r)
    completed = assignment_received_ms("kafka-2.7")
    expected = readme_rebalances_27()
    assert len(expected) == 82
    for exp in expected:
        [r] = got.pop((exp.group, exp.generation))
        assert r["protocol"] == "classic"
        assert r["previous_generation"] == exp.generation - 1
        assert r["started_at_ms"] == exp.started_at_ms, exp
        assert r["join_completed_at_ms"] == exp.ended_at_ms, exp
        assert r["outcome"] == exp.outcome, exp
        assert r["trigger"] == expected_trigger(exp.reason, exp.group, exp.generation), exp
        assert r["reason_text"].startswith(exp.reason.split("…")[0]), exp
        assert exp.ended_at_ms is not None, exp
        assert r["join_seconds"] == pytest.approx((exp.ended_at_ms - exp.started_at_ms) / 1000)
        if exp.outcome == "stable":
            # Stable when the leader's assignment was received (line quoted verbatim from the log).
            assert r["completed_at_ms"] == completed[(exp.group, exp.generation)], exp
            assert r["total_seconds"] == pytest.approx((r["completed_at_ms"] - exp.started_at_ms) / 1000)
            assert r["sync_seconds"] == pytest.approx((r["completed_at_ms"] - exp.ended_at_ms) / 1000)
            assert r["members"] >= 1
        else:
            assert r["completed_at_ms"] is None and r["members"] == 0
            assert r["total_seconds"] == pytest.approx(r["join_seconds"])
        assert r["coordinator"] in (1, 2)
    assert got == {}, "rebalances the README does not list"


def assert_kafka27_removals(removals: list[dict]) -> None:
    expected = [(exp.group, rm) for exp in readme_rebalances_27() for rm in exp.removals]
    assert len(expected) == 75
    unmatched = list(removals)
    for group, rm in expected:
        match = [r for r in unmatched if r["group"] == group and r["member_id"].startswith(rm.member_prefix)
                 and r["removed_at_ms"] == rm.at_ms]
        assert len(match) == 1, (group, rm)
        # The README names the broker's view (LeaveGroup); the diagnosis refines a LeaveGroup
        # followed by a quick rejoin of the same client to an inferred poll timeout (sc05).
        cause = match[0]["cause"]
        if cause == "poll_timeout" and "(inferred)" in match[0]["evidence"]:
            cause = "leave_group"
        assert cause == rm.cause, (group, rm)
        assert match[0]["client_id"] == rm.member_prefix.rsplit("-", 1)[0] or rm.member_prefix.startswith("sc06-inst")
        unmatched.remove(match[0])
    # The one removal the table leaves to the text: sc06's quick static restart replaced the
    # member id without a rebalance (README sc06, 19:26:45,960).
    [static] = unmatched
    assert (static["group"], static["cause"], static["group_instance_id"]) == \
        ("sc06-static-membership", "static_member_fenced", "sc06-inst-1")
    assert static["member_id"].startswith("sc06-inst-1-a40772ac")
