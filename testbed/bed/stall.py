"""The coordinator stall on the bed (docs/diagnosis.md, testbed/README.md): a broker that follows,
not leads, the __consumer_offsets partition of several groups dies. Until the controller fences it
(its session, 9 s) the coordinator cannot commit its writes, and Kafka 4.x's coordinator runtime
answers nothing meanwhile: members whose sessions (6 s here) lapse are removed although they never
stopped, and come back at once. The Scala coordinator of 2.x/3.x answers heartbeats without
waiting: 4.0+. Registered in scenarios.SCENARIOS (follower_kill, rejoin_at_once)."""
from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from testbed.bed.members import MemberSpec
from testbed.bed.procs import wait_for
from testbed.bed.runner import Runner

if TYPE_CHECKING:
    from testbed.bed.scenarios import Ctx


STALL_SESSION_MS = 6000


def _groups_on_partition_of(ctx: Ctx, suffixes: list[str]) -> dict[str, str]:
    """Group names, one per suffix, on the __consumer_offsets partition of ctx.group (so that they
    share its coordinator and its follower)."""
    from testbed.bed.admin import offsets_partition
    target = offsets_partition(ctx.group)
    out = {}
    for suffix in suffixes:
        out[suffix] = next(f"{ctx.group}-{suffix}{i}" for i in range(10_000)
                           if offsets_partition(f"{ctx.group}-{suffix}{i}") == target)
    return out


def _kill_follower(r: Runner, ctx: Ctx, groups: list[str], paused=None) -> None:
    """Kill the broker that follows the groups' __consumer_offsets partition (not its leader, their
    coordinator), while their members commit; wait for the stall to remove someone and for the
    removed to come back; start the broker again. `paused`: a member frozen at the kill and resumed
    well after its own expiry (a pause of its own, next to the stall)."""
    r.cluster.await_in_sync()
    coordinator = r.cluster.coordinator_of(ctx.group)
    follower = next(b for b in r.cluster.running_brokers() if b != coordinator)
    # The follower leads a partition the coordinator's broker follows, as every broker of a real
    # cluster leads some: the bed's earlier broker restarts can leave one leading none, and then
    # no peer's replica fetcher loses it when it dies (the monitor dates a death by its peers).
    r.cluster.create_topic(f"{ctx.group}-led", 1, 2, assignment=[[follower, coordinator]])
    since = r.shipper.mark()
    if paused is not None:
        r.pause(paused)
    r.record("kill_broker", group=None, groups=groups, broker_id=follower, coordinator=coordinator)
    r.cluster.kill_broker(follower)
    try:
        removed = "|".join(re.escape(g) for g in groups)
        r.wait_log(rf"(in group (?:{removed}) has failed|\[GroupId (?:{removed})\] (?:Streams |Share )?[Mm]ember \S+ "
                   rf"fenced from the group because the member session expired)", 45, since)
        if paused is not None:
            from testbed.bed.scenarios import _resume_after_expiry   # scenarios imports this module
            # back after the stall can have ended (the monitor's coordinator_stall_max_seconds, 30 s
            # after the death, plus a heartbeat): a pause of its own
            mark = paused.mark()
            _resume_after_expiry(r, replace(ctx, group=paused.spec.group), paused, since, PAUSED_IN_STALL_S)
            r.wait_reassigned([paused], [mark])
        _await_groups_quiet(r, groups)       # the removed are back, their rebalances done
    finally:
        r.start_broker(follower)


# How long after its expiry the member frozen next to a stall is resumed (rejoin_at_once).
PAUSED_IN_STALL_S = 35.0
# The groups' lines have stopped (their rebalances are done) when none came for this long.
QUIET_S = 5.0


def _await_groups_quiet(r: Runner, groups: list[str], timeout: float = 90.0) -> None:
    rx = re.compile(r"(?<![\w.-])(?:" + "|".join(re.escape(g) for g in groups) + r")(?![\w-])")

    def quiet() -> bool:
        last = max((ln.read_ms for ln in r.shipper.lines() if rx.search(ln.text)), default=0)
        return time.time() * 1000 - last >= QUIET_S * 1000
    wait_for(quiet, timeout, f"the lines of groups {groups} to stop for {QUIET_S} s", interval=0.5)


def _stall_specs(ctx: Ctx, groups: dict[str, str], kinds: dict[str, tuple]) -> list:
    from testbed.bed.scenarios import MAX_POLL_INTERVAL_MS
    specs = []
    for suffix, (library, protocol) in kinds.items():
        group = groups[suffix]
        topic = ctx.topic if group == ctx.group else f"{group}-data"
        for cid in "ab" if library != "java-streams" else "a":
            specs.append(MemberSpec(library, group, [topic], f"{group}-{cid}", protocol=protocol,
                                    session_timeout_ms=STALL_SESSION_MS,
                                    max_poll_interval_ms=MAX_POLL_INTERVAL_MS))
    return specs


def _stall_run(r: Runner, ctx: Ctx, kinds: dict[str, tuple], paused_kind: str | None = None) -> None:
    from testbed.bed.scenarios import _start_all
    groups = {"": ctx.group, **_groups_on_partition_of(ctx, [k for k in kinds if k])}
    for suffix, group in groups.items():
        if group != ctx.group:
            r.topic(f"{group}-data", 4, 2)
        if kinds[suffix][0] == "java-streams":
            r.cluster.create_topic(f"{group}-out", 1, 1)
    ms = _start_all(r, _stall_specs(ctx, groups, kinds), settle=False)
    r.wait_committed(ctx.group)
    paused = next((m for m in ms if m.spec.group == groups.get(paused_kind or "-")), None) if paused_kind else None
    _kill_follower(r, ctx, list(groups.values()), paused)
    since = r.shipper.mark()
    for m in ms:
        r.leave(m)
    for m in ms:
        if m.spec.library == "java-streams":
            # Kafka Streams sends no leave when it closes: the broker fences it a session later.
            # Wait for that line, so that no later broker kill falls between the close and the fence.
            r.wait_log(rf"\[GroupId {re.escape(m.spec.group)}\] Streams member \S+ fenced from the group", 30, since)


def follower_kill(r: Runner, ctx: Ctx) -> None:
    """The follower of the groups' offsets partition killed under classic (librdkafka, kafka-python),
    consumer, share (4.2+) and streams (4.2+) groups on one coordinator: the coordinator stall."""
    kinds: dict[str, tuple] = {"": ("confluent", "classic"), "py": ("kafka-python", "classic"),
                               "cg": ("confluent", "consumer")}
    if ctx.v >= (4, 2) and ctx.has_java:
        kinds.update({"sh": ("java-share", "classic"), "st": ("java-streams", "streams")})
    _stall_run(r, ctx, kinds)


def rejoin_at_once(r: Runner, ctx: Ctx) -> None:
    """The same stall (members that never stopped rejoin at once) next to a real SIGSTOP: a
    kafka-python member of another group of the same coordinator frozen at the kill and resumed
    well after its expiry (process_pause)."""
    _stall_run(r, ctx, {"": ("confluent", "classic"), "cg": ("confluent", "consumer"),
                        "ps": ("kafka-python", "classic")}, paused_kind="ps")
