"""Rounds of rebalances and removals for the latency probe and benches (testbed/judge/latency.py,
bench/latency): kafka-python members of the classic protocol driven through the runner, and a
group id put on a chosen coordinator."""
from __future__ import annotations

from typing import Any

from testbed.bed.members import MemberSpec


def group_on(cluster, broker_id: int, prefix: str, tries: int = 200) -> str:
    """A group id whose coordinator is `broker_id` (FindCoordinator), e.g. to put a group on the
    broker whose shipper lags."""
    for i in range(tries):
        group = f"{prefix}-{i}"
        if cluster.coordinator_of(group) == broker_id:
            return group
    raise AssertionError(f"no group {prefix}-N coordinated by broker {broker_id} in {tries} tries")


def scripted_round(runner, group: str, topic: str, slow_ms: int = 3000) -> None:
    """One round of rebalances and removals on `group` (kafka-python members, classic protocol):
    a joins; b joins (the JOIN phase waits for a, which sleeps `slow_ms` after each poll, so the
    rebalance lasts up to that); b is SIGKILLed (heartbeat expiry after 3 s, a rebalance that
    again waits for a); a leaves (LeaveGroup, the group becomes empty)."""
    common: dict[str, Any] = {"session_timeout_ms": 3000, "max_poll_interval_ms": 10000}
    a = runner.start(MemberSpec("kafka-python", group, [topic], f"{group}-a", slow_ms=slow_ms, **common))
    b = runner.start(MemberSpec("kafka-python", group, [topic], f"{group}-b", **common), wait=False)
    mark_a = a.mark()
    runner.wait_joined(b)
    runner.wait_reassigned([a], [mark_a])
    mark_a = a.mark()
    runner.kill(b)
    runner.wait_reassigned([a], [mark_a])
    runner.leave(a)


def long_join_rebalance(runner, group: str, topic: str, slow_ms: int = 20000) -> None:
    """A rebalance whose JOIN phase lasts about `slow_ms`: a sleeps `slow_ms` after each poll;
    b joins right after a's poll, so the coordinator waits for a's next one. Then both leave."""
    common: dict[str, Any] = {"session_timeout_ms": 6000, "max_poll_interval_ms": slow_ms + 10000}
    a = runner.start(MemberSpec("kafka-python", group, [topic], f"{group}-a", slow_ms=slow_ms, **common))
    a.wait_event("consumed", slow_ms / 1000 + 30, a.mark())
    b = runner.start(MemberSpec("kafka-python", group, [topic], f"{group}-b", **common), wait=False)
    mark_a = a.mark()
    runner.wait_joined(b, slow_ms / 1000 + 30)
    runner.wait_reassigned([a], [mark_a], slow_ms / 1000 + 30)
    runner.leave(b)
    runner.leave(a, slow_ms / 1000 + 30)
