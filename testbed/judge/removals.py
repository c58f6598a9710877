"""What the monitor must report of the members the bed took out of a group: each removal's cause
and root cause (docs/diagnosis.md), and what a killed member's partitions cost (testbed/judge/
expect.py puts them in Expected; the module docstring there says how each action reads).
Derived from what the bed did, never from the monitor's output."""
from __future__ import annotations

from dataclasses import dataclass

from testbed.judge.ownership import ExpGap, Ownership


@dataclass
class ExpRemoval:
    client_id: str
    cause: str
    root_cause: str
    action: str
    at_ms: int                        # the action's time (the removal line follows it)
    # When what the brokers record cannot tell the bed's action from another (a static member's or
    # a Kafka Streams member's close from its crash): the root cause the evidence points to, which
    # the monitor must then rate `low` (root_cause_confidence).
    confidence: str | None = None
    # A removal the broker made without the bed touching the member (a coordinator stall): the
    # member as the broker's line names it, and what its evidence must say (the killed broker).
    member_id: str | None = None
    evidence_has: str | None = None


@dataclass
class ExpStop:
    """A killed member's partitions: when they stopped being consumed (the kill) and when each was
    assigned again (a survivor's client said so). The ground truth of what its removal cost."""
    client_id: str                    # as the broker knows it
    stopped_ms: int
    partitions: list
    reassigned_ms: dict               # partition -> when a survivor's client got it
    group_partitions: int = 0         # what every member owned at the kill (an eager rebalance stops all)


def _static(entry: dict) -> bool:
    return bool(entry.get("instance_id"))


def _no_leave_on_close(entry: dict, protocol: str) -> bool:
    """Members whose close sends no LeaveGroup, so the broker removes them when their session
    expires: static classic members (KIP-345) and Kafka Streams (it does not leave on close)."""
    return (_static(entry) and protocol == "classic") or entry.get("library") == "java-streams"


STREAMS_THREADS = 1      # BedStreams sets num.stream.threads=1


def broker_client_id(entry: dict) -> str:
    """The client id the broker records for this bed member. Kafka Streams' group member is its
    stream thread's consumer, whose client id Streams derives from client.id (BedStreams sets it
    to the bed's client id): `<client.id>-StreamThread-<n>-consumer` (StreamThread.create:
    clientId + "-StreamThread-" + n; ClientUtils.consumerClientId: + "-consumer")."""
    cid = entry["client_id"]
    if entry.get("library") == "java-streams":
        return f"{cid}-StreamThread-{STREAMS_THREADS}-consumer"
    return cid


def expected_removals(timeline: list, version: str, protocol: str, pause_window_ms: int,
                      left: frozenset = frozenset(), expired: frozenset = frozenset()) -> list[ExpRemoval]:
    """Walks each member (client id) through its actions: a member that had been assigned
    partitions and is then killed, frozen, stalled or closed is removed. So is a member closed
    before it said it joined whose leave the broker logged (`left`: the broker completed its join
    while it was closing, under load)."""
    out: list[ExpRemoval] = []
    in_group: dict[str, bool] = {}
    # The monitor measures a comeback from the broker's expiry, a session timeout after the kill
    # or freeze (docs/diagnosis.md), not from the bed's action.
    session_ms = {e["client_id"]: int(e.get("session_timeout_ms") or 0) for e in timeline
                  if e["action"] == "start" and e.get("client_id")}
    for k, e in enumerate(timeline):
        cid, a = e.get("client_id"), e["action"]
        if cid is None:
            continue
        if a in ("joined", "reassigned"):
            in_group[cid] = True
            continue
        if a not in ("kill", "pause", "stop_polling", "leave") or \
                not (in_group.get(cid) or (a == "leave" and cid in left)):
            continue
        later = timeline[k + 1:]
        static = _static(e) and protocol == "classic"
        bcid = broker_client_id(e)
        if a in ("kill", "leave") and static and _restarted_within_session(e, later):
            # The new instance takes the member's place (still in the group); the commits tell the
            # kill from the close (docs/diagnosis.md, static members).
            root, sure = _static_verdict(e, a)
            out.append(ExpRemoval(bcid, "static_member_fenced", root, f"{a}+restart", e["ts_ms"], confidence=sure))
            continue
        in_group[cid] = False
        if protocol == "streams" and (a in ("kill", "pause") or (a == "leave" and _no_leave_on_close(e, protocol))):
            # Kafka Streams sends no leave when it closes (KIP-1092's default): a close and a crash
            # both end in a session fence, which the broker's records cannot tell apart unless the
            # member comes back (docs/diagnosis.md: process_crash rated low, or process_pause).
            back = _rejoined(cid, e["ts_ms"] + session_ms.get(cid, 0), later, pause_window_ms)
            out.append(ExpRemoval(bcid, "heartbeat_expiry", "process_pause" if back else "process_crash", a, e["ts_ms"],
                                  confidence=None if back or a != "leave" else "low"))
        elif (a == "kill" and static) or (a == "leave" and _no_leave_on_close(e, protocol)):
            root, sure = _static_verdict(e, a)
            out.append(ExpRemoval(bcid, "heartbeat_expiry", root, a, e["ts_ms"], confidence=sure))
        elif a == "kill" or a == "pause":
            back = _rejoined(cid, e["ts_ms"] + session_ms.get(cid, 0), later, pause_window_ms)
            root = "process_pause" if back else "process_crash"
            out.append(ExpRemoval(bcid, "heartbeat_expiry", root, a, e["ts_ms"]))
        elif a == "stop_polling":
            out.append(ExpRemoval(bcid, "poll_timeout", "slow_processing", a, e["ts_ms"]))
        elif cid in expired and cid not in left:
            # closed, but its LeaveGroup never reached the broker, which expired it (under load)
            out.append(ExpRemoval(bcid, "heartbeat_expiry", "process_crash", a, e["ts_ms"]))
        else:
            out.append(ExpRemoval(bcid, "leave_group", "graceful_shutdown", a, e["ts_ms"]))
    return _killed_together(out, timeline)


# Kills the bed makes one after the other, as one event: within this much of each other.
TOGETHER_MS = 2000


def _killed_together(removals: list[ExpRemoval], timeline: list) -> list[ExpRemoval]:
    """Members of one host (their client host) killed together, all the members that host had in the
    group: one cause, the host (docs/diagnosis.md host_wide), not as many crashes."""
    host_of = {broker_client_id(e): e.get("host") or "/127.0.0.1" for e in timeline if e["action"] == "start"}
    members_of: dict[str, set] = {}
    for cid, host in host_of.items():
        members_of.setdefault(host, set()).add(cid)
    crashes = [r for r in removals if r.action == "kill" and r.root_cause == "process_crash"]
    for host, members in members_of.items():
        killed = sorted((r for r in crashes if host_of.get(r.client_id) == host), key=lambda r: r.at_ms)
        if len(killed) >= 2 and killed[-1].at_ms - killed[0].at_ms <= TOGETHER_MS and \
                {r.client_id for r in killed} == members:
            for r in killed:
                r.root_cause = "host_wide"
    return removals


def expected_stops(timeline: list, gaps: list[ExpGap]) -> list[ExpStop]:
    """Members killed (not static: a static member's partitions wait for it) while they owned
    partitions, and when the survivors' clients got each of those partitions."""
    out: list[ExpStop] = []
    kills = [e["ts_ms"] for e in timeline if e["action"] == "kill"]
    for e in timeline:
        if e["action"] != "kill" or _static(e):
            continue
        mine = [g for g in gaps if g.owner == e["client_id"] and g.how == "kill" and g.stopped_ms == e["ts_ms"]]
        if mine:
            # Members killed together are one rebalance: it stops what the group owned before the first.
            first = min(t for t in kills if e["ts_ms"] - TOGETHER_MS <= t <= e["ts_ms"])
            out.append(ExpStop(broker_client_id(e), e["ts_ms"], sorted(g.partition for g in mine),
                               {g.partition: g.resumed_ms for g in mine},
                               len(Ownership(timeline, until_ms=first).consumed())))
    return out


def _static_verdict(entry: dict, action: str) -> tuple[str, str | None]:
    """A static member stopped: its root cause and confidence. The bed stops a static kafka-python
    member after a commit schedule (Runner._await_commit_schedule), so its commits tell: a close's
    commit off the schedule (graceful_shutdown, medium), a kill's stop on it (process_crash, low).
    Other clients report no commits to time the stop by: the rule may not tell (no expectation
    beyond a stop's graceful_shutdown)."""
    if entry.get("library") == "kafka-python":
        return ("process_crash", "low") if action == "kill" else ("graceful_shutdown", "medium")
    return "graceful_shutdown", None


def _restarted_within_session(kill: dict, later: list) -> bool:
    """Back well within the session (the broker counts it from the last heartbeat, before the
    kill): the scenarios restart either at once or after the broker said the member failed."""
    session = kill.get("session_timeout_ms") or 0
    for e in later:
        if e.get("client_id") == kill["client_id"] and e["action"] == "start":
            return e["ts_ms"] - kill["ts_ms"] < session / 2
    return False


def _rejoined(cid: str, since_ms: int, later: list, window_ms: int) -> bool:
    """The same client is assigned again within the window after `since_ms` (a new member id for
    classic)."""
    return any(e.get("client_id") == cid and e["action"] in ("joined", "reassigned")
               and e["ts_ms"] - since_ms <= window_ms for e in later)
