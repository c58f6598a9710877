"""Scenarios as data: what to do to a group, and which broker lines must follow.

Each scenario function drives the runner and returns nothing; the ground truth is the
runner's timeline. `Expect` entries are the broker's own `server.log` lines the scenario
must cause (regexes over the shipped lines, `{g}` = the scenario's group), with the
`parse-logs` event kind each one should become (for the end-to-end smoke)."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from collections.abc import Callable

from testbed.bed import jars, stall
from testbed.bed.members import MemberSpec
from testbed.bed.procs import wait_for
from testbed.bed.runner import Runner
from testbed.bed.settings import KIP848_SETTINGS

# Broker lines (every wording seen from 2.8 to 4.4; `{g}` is re.escape'd group).
PREPARE = r"Preparing to rebalance group {g} "
STABILIZED = r"Stabilized group {g} generation"
ASSIGNMENT = r"Assignment received from leader.* for group {g} "
FAILED = r"Member \S+ in group {g} has failed"
LEFT = (r"(in group {g} has left"                                   # 2.8
        r"|has left group {g} through explicit"                       # 3.x: Member MemberMetadata(...) has left group
        r"|\[Group {g}\] Member \S+ has left group)")                 # 4.x
EMPTY = r"Group {g} with generation \d+ is now empty"
STATIC_REPLACE = (r"(joins group {g} in Stable state\. Replacing previously mapped member"      # 4.x
                  r"|Static member \S+ of group {g} with unknown member id rejoins)")          # 2.8
LOADED = r"(Loaded classic group {g} with|Loading group metadata for {g} with generation)"
DELETED = r"(The following groups were deleted: .*\b{g}\b|\[GroupId {g}\] .*[Dd]eleted|groups were deleted.*{g})"
# 2.8/3.x name the group; 4.x only says how many tombstones the group's partition {p} wrote.
EXPIRED = (r"(Group {g} transitioned to Dead|topic=__consumer_offsets partition={p}\] "
           r"Generated \d+ tombstone records while cleaning up group metadata)")
C_JOINED = r"\[GroupId {g}\] Member \S+ joins the consumer group"
C_BUMPED = r"\[GroupId {g}\] Bumped group epoch to \d+"
C_LEFT = r"\[GroupId {g}\] Member \S+ left the consumer group"
C_FENCED = r"\[GroupId {g}\] Member \S+ fenced from the group because the member session expired"
S_JOINED = r"\[GroupId {g}\] Member \S+ joins the share group"
S_ANY = r"\[GroupId {g}\]"
ST_JOINED = r"\[GroupId {g}\](\[MemberId \S+\])? Member( \S+)? joins the streams group"
ST_FENCED = r"\[GroupId {g}\] Streams member \S+ fenced from the group"


@dataclass
class Expect:
    label: str
    pattern: str
    min_count: int = 1
    kind: str | None = None        # the parse-logs event kind of such a line

    def regex(self, group: str, partitions: int = 10) -> re.Pattern:
        from testbed.bed.admin import offsets_partition
        return re.compile(self.pattern.replace("{g}", re.escape(group))
                          .replace("{p}", str(offsets_partition(group, partitions))))


@dataclass
class Ctx:
    version: str
    group: str
    topic: str
    library: str = "kafka-python"     # the Python library for classic members
    has_java: bool = False
    # "member": MemberSpec defaults for every member (e.g. {"max_poll_interval_ms": 10000}, so a
    # LeaveGroup's diagnosis window, which is the member's rebalance timeout, stays short)
    options: dict = field(default_factory=dict)

    @property
    def v(self) -> tuple:
        return jars.parse_version(self.version)


@dataclass
class Scenario:
    name: str
    run: Callable[[Runner, Ctx], None]
    expect: Callable[[Ctx], list]
    min_version: tuple = (0,)
    needs: tuple = ()                 # "java", "streams", "retention"
    quick: bool = False               # in the default pytest selection
    partitions: int = 4
    # More groups than ctx.group: the groups of its kill_broker entry, each judged on its own
    # (testbed/judge/live_run.py)
    multi_group: bool = False


# max.poll.interval.ms of members that do not set it (the clients' default is 300 s): it is the
# classic rebalance timeout, and the monitor holds a LeaveGroup removal for
# max(rebalance timeout, 60 s) of event time before its record is final (docs/diagnosis.md).
MAX_POLL_INTERVAL_MS = 30000


def _spec(ctx: Ctx, cid: str, **kw) -> MemberSpec:
    kw = {**ctx.options.get("member", {}), **kw}
    kw.setdefault("max_poll_interval_ms", MAX_POLL_INTERVAL_MS)
    return MemberSpec(kw.pop("library", ctx.library), ctx.group, [ctx.topic], f"{ctx.group}-{cid}", **kw)


def _start_all(r: Runner, specs: list, settle: bool = True) -> list:
    """Start the members and wait until each has joined, then (`settle`, eager classic members)
    until the group has settled: every member owns partitions and none owns another's. A member's
    first 'assigned' can come while another's assignment of the same rebalance is still on its way
    (the first member revoked, not yet given its share), and a mark taken then would see that
    late 'assigned' as the next rebalance (a CI run's poll_timeout resumed polling 0.1 s after it
    stopped). Cooperative and KIP-848 members get partitions over several steps: not settled here."""
    members = [r.start(s, wait=False) for s in specs]
    for m in members:
        r.wait_joined(m)
    if settle and len(members) > 1:
        wait_for(lambda: settled(members), 60,
                 f"group {members[0].spec.group} to settle (every member owning its own partitions)")
    return members


def settled(members: list) -> bool:
    """Every member owns partitions, and no partition is owned twice (by the members' callbacks)."""
    owned = [m.owned() for m in members]
    return all(owned) and sum(map(len, owned)) == len(set().union(*owned))


def join_leave(r: Runner, ctx: Ctx) -> None:
    a, b = _start_all(r, [_spec(ctx, "a"), _spec(ctx, "b")])
    mark = b.mark()
    r.leave(a)
    r.wait_reassigned([b], [mark])
    r.leave(b)
    r.wait_log(EMPTY.replace("{g}", re.escape(ctx.group)), 30)


COOPERATIVE = {"partition.assignment.strategy": "cooperative-sticky"}
COOPERATIVE_PARTITIONS = 6


def _balanced(members: list) -> bool:
    """No member owns more than one partition more than another (a sticky assignor's target)."""
    counts = [len(m.owned()) for m in members]
    return max(counts) - min(counts) <= 1


def cooperative(r: Runner, ctx: Ctx) -> None:
    """A cooperative-sticky group (KIP-429): a join moves only what the new member gets (revoked in
    one rebalance, assigned in the follow-up); a killed member's partitions go to the others
    while they keep theirs; a leaving member's go to the last one."""
    def spec(cid: str) -> MemberSpec:
        return _spec(ctx, cid, library="confluent", session_timeout_ms=3000, extra=COOPERATIVE)
    a, b = _start_all(r, [spec("a"), spec("b")], settle=False)
    c = r.start(spec("c"), wait=False)
    r.wait_given(c, 0)
    # c can be given partitions while a revocation of the same join is still pending (a and b
    # started together, unsettled): a killed then stops that partition too (CI: 3 stopped, a owned 2)
    names = {f"{ctx.topic}-{p}" for p in range(COOPERATIVE_PARTITIONS)}
    wait_for(lambda: _owns_all([a, b, c], names) and _balanced([a, b, c]), 60,
             f"group {ctx.group} to be balanced over {len(names)} partitions")
    marks = [b.mark(), c.mark()]
    r.kill(a)
    r.wait_taken_over(a.owned(), [b, c], marks)
    mark, owned = c.mark(), b.owned()
    r.leave(b)
    r.wait_taken_over(owned, [c], [mark])
    r.leave(c)


def kill(r: Runner, ctx: Ctx) -> None:
    ms = _start_all(r, [_spec(ctx, c, session_timeout_ms=3000) for c in "abc"])
    marks = [m.mark() for m in ms[1:]]
    r.kill(ms[0])
    r.wait_reassigned(ms[1:], marks)
    for m in ms[1:]:
        r.leave(m)


# A frozen member the bed resumes comes back at least this long after the broker expired it: a
# member back within one heartbeat interval of its removal never stopped (docs/diagnosis.md; the
# monitor's classic heartbeat_interval_seconds is 3 s), so a pause must outlast its expiry by more.
PAUSE_BEYOND_EXPIRY_S = 6.0


def _resume_after_expiry(r: Runner, ctx: Ctx, m, since: dict, beyond_s: float = PAUSE_BEYOND_EXPIRY_S) -> None:
    """Resume a frozen member `beyond_s` after the broker's line that removed it."""
    (line,) = r.wait_log(rf"Member {re.escape(m.spec.client_id)}-\S+ in group {re.escape(ctx.group)} has failed",
                         60, since)[:1]
    wait = beyond_s - (time.time() * 1000 - line.read_ms) / 1000
    if wait > 0:
        time.sleep(wait)      # the pause's length IS the scenario
    r.resume(m)


def pause(r: Runner, ctx: Ctx) -> None:
    a, b = _start_all(r, [_spec(ctx, "a", session_timeout_ms=3000), _spec(ctx, "b", session_timeout_ms=3000)])
    mark_a, mark_b = a.mark(), b.mark()
    since = r.shipper.mark()
    r.pause(a)
    r.wait_reassigned([b], [mark_b])         # a's session expired, b owns everything
    _resume_after_expiry(r, ctx, a, since)
    r.wait_reassigned([a], [mark_a])         # a rejoins as a new member
    r.leave(a)
    r.leave(b)


def poll_timeout(r: Runner, ctx: Ctx) -> None:
    lib = "java" if ctx.has_java else ctx.library
    a, b = _start_all(r, [_spec(ctx, "a", library=lib, max_poll_interval_ms=3000),
                          _spec(ctx, "b", library=lib, max_poll_interval_ms=3000)])
    mark_a, mark_b = a.mark(), b.mark()
    r.stop_polling(a)                             # a slow batch: the client's poll timeout fires
    r.wait_reassigned([b], [mark_b])
    r.resume_polling(a)                           # the batch ends: a polls again and rejoins
    r.wait_reassigned([a], [mark_a])
    r.leave(a)
    r.leave(b)


def _start_static_pair(r: Runner, ctx: Ctx, session_timeout_ms: int) -> list:
    """Static members a and b (group.instance.id <group>-i-a and -i-b): the static scenarios differ
    only in the session timeout and in how long a is away."""
    # kafka-python: its members report their auto-commits, by which the runner times a static
    # member's stop (Runner._await_commit_schedule).
    return _start_all(r, [_spec(ctx, c, library="kafka-python", instance_id=f"{ctx.group}-i-{c}",
                                session_timeout_ms=session_timeout_ms) for c in "ab"])


def _static_restart(r: Runner, ctx: Ctx, how: str) -> None:
    a, b = _start_static_pair(r, ctx, session_timeout_ms=10000)
    since = r.shipper.mark()
    a2 = r.restart(a, gap_s=0.0, how=how)       # back well within the 10 s session
    r.wait_log(STATIC_REPLACE.replace("{g}", re.escape(ctx.group)), 30, since)
    r.leave(a2)
    r.leave(b)


def static_within(r: Runner, ctx: Ctx) -> None:
    """A static member killed and started again at once: the new instance replaces it (a crash)."""
    _static_restart(r, ctx, "kill")


def static_close(r: Runner, ctx: Ctx) -> None:
    """A static member closed and started again at once: replaced the same way (a planned restart)."""
    _static_restart(r, ctx, "close")


def static_beyond(r: Runner, ctx: Ctx) -> None:
    a, b = _start_static_pair(r, ctx, session_timeout_ms=3000)
    since = r.shipper.mark()
    r.kill(a)
    r.wait_log(FAILED.replace("{g}", re.escape(ctx.group)), 30, since)   # session expired
    a2 = r.start(a.spec)
    r.leave(a2)
    r.leave(b)


def host_pair(r: Runner, ctx: Ctx) -> None:
    """Two members of a host of their own (127.0.0.2) killed together, next to an independent crash
    on the shared host: the pair is host-wide, the other a crash (docs/diagnosis.md host_wide)."""
    def spec(cid: str, source: str | None = None) -> MemberSpec:
        return _spec(ctx, cid, library="kafka-python", session_timeout_ms=3000, source_address=source)
    a, b, c, d = _start_all(r, [spec("a", "127.0.0.2"), spec("b", "127.0.0.2"), spec("c"), spec("d")])
    mark = d.mark()
    for m in (a, b, c):
        r.kill(m)
    r.wait_reassigned([d], [mark])
    r.leave(d)


def pause_crash(r: Runner, ctx: Ctx) -> None:
    """A member frozen and another killed at the same moment on the same host: a pause (it comes
    back) and a crash, not one host-wide cause."""
    a, b, c = _start_all(r, [_spec(ctx, x, library="kafka-python", session_timeout_ms=3000) for x in "abc"])
    mark_a, mark_c = a.mark(), c.mark()
    since = r.shipper.mark()
    r.pause(a)
    r.kill(b)
    r.wait_reassigned([c], [mark_c])          # both sessions expired, c owns everything
    _resume_after_expiry(r, ctx, a, since)
    r.wait_reassigned([a], [mark_a])          # a rejoins as a new member
    r.leave(a)
    r.leave(c)


# After a crash of the coordinator the members find the new one a heartbeat or more after it
# loaded the group (1.3 s for a share member on 4.2.2): a member that closes sooner may never reach
# it and is fenced when its session lapses, which is not what these scenarios are about. The
# scenario waits one session of the bed's brokers (group.{consumer,share,streams}.session.timeout.ms)
# so that every member has either reached it or been fenced.
FAILOVER_SETTLE_S = max(KIP848_SETTINGS[f"group.{kind}.session.timeout.ms"]
                        for kind in ("consumer", "share", "streams")) / 1000


def _after_failover(r: Runner, ctx: Ctx, how: str, then: Callable[[], None]) -> None:
    """The group's coordinator broker stopped (`how`: SIGTERM, a controlled shutdown; SIGKILL, a
    crash), the group moved to the other broker, `then` done there; the broker started again."""
    r.shipper.mark()
    bid = r.stop_coordinator(ctx.group, how)
    try:
        new = r.cluster.coordinator_of(ctx.group, timeout=90)
        r.record("coordinator_moved", group=ctx.group, old_broker=bid, new_broker=new)
        if how == "SIGKILL":
            time.sleep(FAILOVER_SETTLE_S)
        then()
    finally:
        r.start_broker(bid)


def _leave_one_then_other(r: Runner, a, b) -> Callable[[], None]:
    def act() -> None:
        mark_b = b.mark()
        r.leave(a)                                # handled by the new coordinator
        r.wait_reassigned([b], [mark_b])
        r.leave(b)
    return act


def failover(r: Runner, ctx: Ctx) -> None:
    a, b = _start_all(r, [_spec(ctx, "a"), _spec(ctx, "b")])
    _after_failover(r, ctx, "SIGTERM", _leave_one_then_other(r, a, b))


def failover_kill(r: Runner, ctx: Ctx) -> None:
    """The coordinator broker killed under a classic group: the members find the new coordinator,
    which loads the group (no member's session may lapse for it), then leave one by one."""
    a, b = _start_all(r, [_spec(ctx, "a"), _spec(ctx, "b")])
    _after_failover(r, ctx, "SIGKILL", _leave_one_then_other(r, a, b))


def consumer_failover(r: Runner, ctx: Ctx) -> None:
    """The same under a KIP-848 consumer group: the new coordinator replays the group's records."""
    a, b = _start_all(r, [_spec(ctx, "a", library="confluent", protocol="consumer"),
                          _spec(ctx, "b", library="confluent", protocol="consumer")], settle=False)
    _after_failover(r, ctx, "SIGKILL", _leave_one_then_other(r, a, b))


def share_failover(r: Runner, ctx: Ctx) -> None:
    """The same under a share group (KIP-932)."""
    joined_since = r.shipper.mark()
    a, b = _start_all(r, [_spec(ctx, "a", library="java-share"), _spec(ctx, "b", library="java-share")],
                      settle=False)
    r.wait_log(S_JOINED.replace("{g}", re.escape(ctx.group)), 30, joined_since, count=2)

    def act() -> None:
        r.leave(a)
        r.leave(b)
    _after_failover(r, ctx, "SIGKILL", act)


def streams_failover(r: Runner, ctx: Ctx) -> None:
    """The same under a streams group (KIP-1071): the instance closes on the new coordinator, which
    fences it when its session lapses (Kafka Streams sends no leave)."""
    r.cluster.create_topic(f"{ctx.group}-out", 1, 1)
    (a,) = _start_all(r, [_spec(ctx, "a", library="java-streams", protocol="streams")])

    def act() -> None:
        since = r.shipper.mark()
        r.leave(a)
        r.wait_log(ST_FENCED.replace("{g}", re.escape(ctx.group)), 30, since)
    _after_failover(r, ctx, "SIGKILL", act)


def delete_group(r: Runner, ctx: Ctx) -> None:
    (a,) = _start_all(r, [_spec(ctx, "a")])
    r.wait_committed(ctx.group)
    r.leave(a)
    r.wait_log(EMPTY.replace("{g}", re.escape(ctx.group)), 30)
    r.delete_group(ctx.group)
    r.wait_log(DELETED.replace("{g}", re.escape(ctx.group)), 30)


def offset_expiry(r: Runner, ctx: Ctx) -> None:
    (a,) = _start_all(r, [_spec(ctx, "a")])
    r.wait_committed(ctx.group)
    r.leave(a)
    for p in r.producers:        # no new records: nothing keeps the group's offsets fresh
        p.stop()
    r.wait_offsets_gone(ctx.group, 150)   # offsets.retention.minutes >= 1: about 60-70 s


def storm(r: Runner, ctx: Ctx) -> None:
    live = r.storm(_spec(ctx, "s", session_timeout_ms=6000), n=3, rounds=4)
    for m in live:
        r.leave(m)


def kip848(r: Runner, ctx: Ctx) -> None:
    specs = [_spec(ctx, "a", library="confluent", protocol="consumer"),
             _spec(ctx, "b", library="confluent", protocol="consumer")]
    if ctx.has_java:
        specs.append(_spec(ctx, "j", library="java", protocol="consumer"))
    ms = _start_all(r, specs, settle=False)
    since = r.shipper.mark()
    survivors = [ms[0]] + ms[2:]
    marks = [m.mark() for m in survivors]
    r.kill(ms[1])                                 # fenced when its session (6 s) expires
    r.wait_log(C_FENCED.replace("{g}", re.escape(ctx.group)), 30, since)
    r.wait_taken_over(ms[1].owned(), survivors, marks)    # what its partitions cost ends there
    for m in survivors:
        r.leave(m)


def _owns_all(members: list, partitions: set) -> bool:
    """Between them the members own exactly `partitions`, none owned twice (by their callbacks)."""
    return settled(members) and set().union(*(m.owned() for m in members)) == partitions


# kip848_partitions: the topic's partitions at the start; the scenario doubles them.
GROWN_TOPIC_PARTITIONS = 4


def kip848_partitions(r: Runner, ctx: Ctx) -> None:
    """A stable KIP-848 consumer group whose subscribed topic gets more partitions: the coordinator
    (4.1+) sees the subscribed topics' metadata hash change and bumps the group epoch with no member
    change (`metadata_change`); the members are given the new partitions, then close."""
    specs = [_spec(ctx, "a", library="confluent", protocol="consumer"),
             _spec(ctx, "b", library="java" if ctx.has_java else "confluent", protocol="consumer")]
    ms = _start_all(r, specs, settle=False)
    before = GROWN_TOPIC_PARTITIONS
    names = {f"{ctx.topic}-{p}" for p in range(before)}
    wait_for(lambda: _owns_all(ms, names), 60, f"group {ctx.group} to be stable over {sorted(names)}")
    since = r.shipper.mark()
    marks = [m.mark() for m in ms]
    r.add_partitions(ctx.topic, 2 * before, [ctx.group])
    r.wait_log(C_BUMPED.replace("{g}", re.escape(ctx.group)), 30, since)
    added = {f"{ctx.topic}-{p}" for p in range(before, 2 * before)}
    r.wait_taken_over(added, ms, marks)
    wait_for(lambda: _owns_all(ms, names | added), 60, f"group {ctx.group} to be stable over the new partitions too")
    for m in ms:
        r.leave(m)


def share_group(r: Runner, ctx: Ctx) -> None:
    joined_since = r.shipper.mark()
    ms = _start_all(r, [_spec(ctx, "a", library="java-share"), _spec(ctx, "b", library="java-share")], settle=False)
    # A share consumer prints "assigned" when its first poll returns, which can be before its
    # first heartbeat reached the coordinator: wait for both join lines before killing one.
    r.wait_log(S_JOINED.replace("{g}", re.escape(ctx.group)), 30, joined_since, count=2)
    since = r.shipper.mark()
    r.kill(ms[1])
    r.wait_log(S_ANY.replace("{g}", re.escape(ctx.group)) + r".*(fenced|expired|left)", 30, since)
    r.leave(ms[0])


def streams_group(r: Runner, ctx: Ctx) -> None:
    r.cluster.create_topic(f"{ctx.group}-out", 1, 1)
    (a,) = _start_all(r, [_spec(ctx, "a", library="java-streams", protocol="streams")])
    since = r.shipper.mark()
    r.leave(a)
    # Kafka Streams sends no leave when it closes: the broker fences the member when its session
    # (6 s) expires. Wait for that line, so the fence and its epoch bump belong to the scenario.
    r.wait_log(ST_FENCED.replace("{g}", re.escape(ctx.group)), 30, since)


def _classic(ctx: Ctx, *extra: Expect) -> list:
    return [Expect("prepare", PREPARE, 1, "prepare_rebalance"), Expect("stabilized", STABILIZED, 1, "join_complete"),
            *extra]


SCENARIOS = [
    Scenario("join_leave", join_leave, lambda c: _classic(c, Expect("left", LEFT, 2, "member_left"),
                                                          Expect("empty", EMPTY, 1, "group_empty")), quick=True),
    Scenario("kill", kill, lambda c: _classic(c, Expect("failed", FAILED, 1, "member_failed")), quick=True),
    Scenario("cooperative", cooperative, lambda c: _classic(c, Expect("failed", FAILED, 1, "member_failed")),
             quick=True, partitions=COOPERATIVE_PARTITIONS),
    Scenario("pause", pause, lambda c: _classic(c, Expect("failed", FAILED, 1, "member_failed"))),
    Scenario("poll_timeout", poll_timeout, lambda c: _classic(c, Expect("left", LEFT, 1, "member_left"))),
    # Before the static ones, not right before failover: their expiries would come within the
    # coordinator-wide window of the broker stop that moves every group of that broker.
    Scenario("host_pair", host_pair, lambda c: _classic(c, Expect("failed", FAILED, 3, "member_failed"))),
    Scenario("pause_crash", pause_crash, lambda c: _classic(c, Expect("failed", FAILED, 2, "member_failed"))),
    Scenario("static_within", static_within, lambda c: _classic(c, Expect("static", STATIC_REPLACE, 1)), quick=True),
    Scenario("static_close", static_close, lambda c: _classic(c, Expect("static", STATIC_REPLACE, 1))),
    Scenario("static_beyond", static_beyond, lambda c: _classic(c, Expect("failed", FAILED, 1, "member_failed"))),
    Scenario("failover", failover, lambda c: _classic(c, Expect("loaded", LOADED, 1))),
    Scenario("failover_kill", failover_kill, lambda c: _classic(c, Expect("loaded", LOADED, 1))),
    Scenario("consumer_failover", consumer_failover,
             lambda c: [Expect("joined", C_JOINED, 2, "consumer_member_joined"),
                        Expect("left", C_LEFT, 2, "consumer_member_left")], min_version=(4, 0)),
    Scenario("share_failover", share_failover, lambda c: [Expect("joined", S_JOINED, 2)], min_version=(4, 2),
             needs=("java",)),
    Scenario("streams_failover", streams_failover,
             lambda c: [Expect("joined", ST_JOINED, 1, "consumer_member_joined"),
                        Expect("fenced", ST_FENCED, 1, "consumer_member_fenced")],
             min_version=(4, 2), needs=("streams",)),
    # the coordinator stall, testbed/bed/stall.py
    Scenario("follower_kill", lambda r, c: stall.follower_kill(r, c), lambda c: _classic(c), min_version=(4, 0),
             multi_group=True),
    Scenario("rejoin_at_once", lambda r, c: stall.rejoin_at_once(r, c), lambda c: _classic(c), min_version=(4, 0),
             multi_group=True),
    Scenario("delete_group", delete_group, lambda c: _classic(c, Expect("deleted", DELETED, 1))),
    Scenario("offset_expiry", offset_expiry, lambda c: _classic(c, Expect("expired", EXPIRED, 1)),
             needs=("retention",)),
    Scenario("storm", storm, lambda c: _classic(c, Expect("prepare", PREPARE, 3, "prepare_rebalance"))),
    Scenario("kip848", kip848, lambda c: [Expect("joined", C_JOINED, 2, "consumer_member_joined"),
                                          Expect("bumped", C_BUMPED, 3, "group_epoch_bumped"),
                                          Expect("fenced", C_FENCED, 1, "consumer_member_fenced"),
                                          Expect("left", C_LEFT, 1, "consumer_member_left")],
             min_version=(4, 0), quick=True),
    Scenario("kip848_partitions", kip848_partitions,
             lambda c: [Expect("joined", C_JOINED, 2, "consumer_member_joined"),
                        Expect("bumped", C_BUMPED, 3, "group_epoch_bumped"),     # the joins and the new partitions
                        Expect("left", C_LEFT, 2, "consumer_member_left")],
             min_version=(4, 1), partitions=GROWN_TOPIC_PARTITIONS),
    Scenario("share_group", share_group, lambda c: [Expect("joined", S_JOINED, 2)], min_version=(4, 2),
             needs=("java",)),
    Scenario("streams_group", streams_group, lambda c: [Expect("joined", ST_JOINED, 1, "consumer_member_joined"),
                                                        Expect("fenced", ST_FENCED, 1, "consumer_member_fenced")],
             min_version=(4, 2),
             needs=("streams",)),
]
BY_NAME = {s.name: s for s in SCENARIOS}
# The scenarios that stop a broker: nothing else may be in flight while they run.
BROKER_STOPS = ("failover", "failover_kill", "consumer_failover", "share_failover", "streams_failover",
                "follower_kill", "rejoin_at_once")


def applicable(version: str, names: list | None = None, quick: bool = False) -> list:
    v = jars.parse_version(version)
    out = [s for s in SCENARIOS if v >= s.min_version and (not quick or s.quick)]
    if names:
        out = [s for s in out if s.name in names]
    return out


def with_group(ctx: Ctx, scenario: Scenario, prefix: str) -> Ctx:
    g = f"{prefix}-{scenario.name}".replace("_", "-")
    return replace(ctx, group=g, topic=f"{g}-data")
