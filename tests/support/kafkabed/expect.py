"""What the monitor must report for one scenario, derived from what the bed did, never from the
monitor's output.

- Rebalances: one per rebalance the broker started for the group: a "Preparing to rebalance"
  line (classic) or a "Bumped group epoch" line (KIP-848, share, streams). Its start and end are
  the times of the broker's own lines (the end: "Assignment received ... generation N" for
  stable, "... generation N is now empty" for empty; KIP-848 groups end on an offsets record,
  so only their start is a line). Its trigger is what the bed did last before that line (the
  ground-truth timeline) read with protocol knowledge: a SIGKILL or SIGSTOP ends in a heartbeat
  expiry, a stalled poll loop in a poll timeout, a close in a LeaveGroup (except for static
  members, which send none: their session expires), a start or a resumed process in a join.
- Removals: one per member the bed took out of the group while it was in it (the member had
  been assigned partitions), with the cause and root cause the protocol and the bed's actions
  imply (docs/diagnosis.md): SIGKILL -> heartbeat_expiry/process_crash; SIGSTOP then SIGCONT
  within the pause window -> heartbeat_expiry/process_pause; a stalled poll loop ->
  poll_timeout/slow_processing; close -> leave_group/graceful_shutdown; a static member closed or
  killed -> heartbeat_expiry/graceful_shutdown; a static member restarted within its session ->
  static_member_fenced/graceful_shutdown (the replaced member id; no rebalance).
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from . import jars

HEADER = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ")
TIME_TOLERANCE_MS = 5       # the monitor takes the line's own header time: equal up to rounding


def line_ms(text: str) -> int | None:
    """The log4j header time of a line (the bed's brokers log in UTC)."""
    m = HEADER.match(text)
    if not m:
        return None
    stamp = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=dt.timezone.utc)
    return int(stamp.timestamp() * 1000)


@dataclass
class GLine:
    ts_ms: int
    broker: int
    text: str
    read_ms: int | None = None


def group_lines(shipped: list, group: str) -> list[GLine]:
    """The shipped coordinator lines that name `group`, in time order."""
    rx = re.compile(r"(?<![\w.-])" + re.escape(group) + r"(?![\w-])")
    out = []
    for ln in shipped:
        if "oordinator" in ln.text and rx.search(ln.text) and (ts := line_ms(ln.text)) is not None:
            out.append(GLine(ts, ln.broker_id, ln.text, ln.read_ms))
    out.sort(key=lambda g: g.ts_ms)
    return out


# ---------------------------------------------------------------------------- broker lines
def _rx(pattern: str, group: str) -> re.Pattern:
    return re.compile(pattern.replace("{g}", re.escape(group)))


CLASSIC = {
    "prepare": r"Preparing to rebalance group {g} in state \w+ with old generation (\d+)",
    "stabilized": r"Stabilized group {g} generation (\d+)",
    "assignment": r"Assignment received from leader.* for group {g} for generation (\d+)",
    "empty": r"Group {g} with generation (\d+) is now empty",
    "loaded": r"(Loaded classic group {g} with|Loading group metadata for {g} with generation)",
    "dead": r"(Group {g} transitioned to Dead|The following groups were deleted: .*\b{g}\b)",
}
BUMPED = r"\[GroupId {g}\](?:\[MemberId \S+\])? Bumped (?:streams |share )?group epoch to (\d+)"
# Lines that remove a member: (regex, member id group index).
REMOVAL_LINES = [
    r"Member (\S+) in group {g} has failed",
    r"Member (\S+) in group {g} has left",
    r"member\.id (\S+?)\] in group {g} has left",                       # 2.8
    r"Member (?:MemberMetadata\(memberId=)?(\S+?),? .*has left group {g} through explicit",
    r"\[Group {g}\] Member (\S+) has left group",
    r"Replacing previously mapped member (\S+) with this groupInstanceId",
    r"Static member \S+ of group {g} with unknown member id rejoins, assigning new member id \S+, "
    r"while old member id (\S+) will be removed",
    r"\[GroupId {g}\] (?:Streams |Share )?[Mm]ember (\S+) fenced from the group",
    r"\[GroupId {g}\] Member (\S+) left the (?:consumer|share|streams) group",
    r"Pending member (\S+) in group {g} has been removed",
]


def removal_line_times(lines: list[GLine], group: str) -> dict[str, list[int]]:
    """member id -> times of the broker lines that removed it."""
    out: dict[str, list[int]] = {}
    for pattern in REMOVAL_LINES:
        rx = _rx(pattern, group)
        for ln in lines:
            if m := rx.search(ln.text):
                out.setdefault(m.group(1).rstrip(",."), []).append(ln.ts_ms)
    return out


# ---------------------------------------------------------------------------- expectations
@dataclass
class ExpRebalance:
    protocol: str
    start_ms: int | None
    trigger: str
    cause: str                        # the timeline action behind it ("kill x-a")
    generation: int | None = None
    outcomes: tuple = ("stable",)     # allowed outcomes (KIP-848: stable or superseded mid-change)
    end_ms: int | None = None         # the broker line that ended it (stable, empty)
    start_line: str = ""


@dataclass
class ExpRemoval:
    client_id: str
    cause: str
    root_cause: str
    action: str
    at_ms: int                        # the action's time (the removal line follows it)


@dataclass
class Expected:
    group: str
    protocol: str
    rebalances: list = field(default_factory=list)
    removals: list = field(default_factory=list)
    dead: bool = False                # the group ends Dead (deleted, offsets expired)
    last_line_ms: int | None = None
    removal_lines: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


# Rebalances a client starts by itself, not because of anything the bed did: the broker's
# reason names them (a kafka-python leader rejoins when it sees the group's subscriptions change).
CLIENT_OWN = (("leader_rejoin", "re-joining group during"), ("metadata_change", "Updating metadata for member"))
CAUSE_ACTIONS = ("start", "kill", "pause", "resume", "stop_polling", "resume_polling", "leave", "stop_broker")


def _static(entry: dict) -> bool:
    return bool(entry.get("instance_id"))


def _no_leave_on_close(entry: dict, protocol: str) -> bool:
    """Members whose close sends no LeaveGroup, so the broker removes them when their session
    expires: static classic members (KIP-345) and Kafka Streams (it does not leave on close)."""
    return (_static(entry) and protocol == "classic") or entry.get("library") == "java-streams"


def action_trigger(entry: dict, protocol: str) -> str:
    """The trigger a rebalance caused by this bed action has (protocol knowledge)."""
    a = entry["action"]
    if a in ("start", "resume", "resume_polling"):
        return "member_join"                 # a new member, or a frozen/stalled one rejoining
    if a in ("kill", "pause"):
        return "heartbeat_expiry"            # no more heartbeats: the session expires
    if a == "stop_polling":
        return "poll_timeout"                # the client leaves when max.poll.interval.ms passes
    if a == "leave":
        return "heartbeat_expiry" if _no_leave_on_close(entry, protocol) else "member_leave"
    if a == "stop_broker":
        return "coordinator_failover"
    return "unknown"


NAMED_MEMBER = re.compile(r"\(reason: (?:Adding new member|removing member) (\S+?)[ ,;)]")


def _cause_before(timeline: list, ts_ms: int, group: str, line: str = "") -> dict | None:
    prior = [e for e in timeline if e["action"] in CAUSE_ACTIONS and e["ts_ms"] <= ts_ms
             and e.get("group") in (group, None)]
    # The broker's reason names the member (2.4+): take that member's last action, not the bed's
    # last action (a member started before another one's close can join after it, under load).
    named = NAMED_MEMBER.search(line)
    if named is not None:
        mine = [e for e in prior if e.get("client_id") and named.group(1).startswith(e["client_id"] + "-")]
        if mine:
            return mine[-1]
    return prior[-1] if prior else None


def _describe(entry: dict | None) -> str:
    return "-" if entry is None else f"{entry['action']} {entry.get('client_id') or entry.get('broker_id') or ''}".strip()


def classic_rebalances(lines: list[GLine], group: str, timeline: list) -> list[ExpRebalance]:
    rx = {k: _rx(v, group) for k, v in CLASSIC.items()}
    out: list[ExpRebalance] = []
    open_: ExpRebalance | None = None
    for ln in lines:
        if m := rx["prepare"].search(ln.text):
            if open_ is not None:
                open_.outcomes = ("superseded",)
            cause = _cause_before(timeline, ln.ts_ms, group, ln.text)
            trigger, why = action_trigger(cause, "classic") if cause else "unknown", _describe(cause)
            for client_trigger, phrase in CLIENT_OWN:
                if phrase in ln.text:     # the client rejoined on its own: no bed action, the broker says so
                    trigger, why = client_trigger, f"the client itself ({phrase})"
            open_ = ExpRebalance("classic", ln.ts_ms, trigger, why, outcomes=("in_progress",), start_line=ln.text)
            out.append(open_)
        elif open_ is None:
            continue
        elif m := rx["stabilized"].search(ln.text):
            open_.generation = int(m.group(1))
        elif m := rx["assignment"].search(ln.text):
            open_.generation, open_.end_ms, open_.outcomes = int(m.group(1)), ln.ts_ms, ("stable",)
            open_ = None
        elif m := rx["empty"].search(ln.text):
            open_.generation, open_.end_ms, open_.outcomes = int(m.group(1)), ln.ts_ms, ("empty",)
            open_ = None
        elif rx["loaded"].search(ln.text):
            open_.outcomes, open_ = ("superseded",), None     # the new coordinator starts over
        elif rx["dead"].search(ln.text):
            open_.outcomes, open_ = ("dead",), None
    return out


def consumer_rebalances(lines: list[GLine], group: str, timeline: list, protocol: str,
                        settle_ms: int = 2000) -> list[ExpRebalance]:
    """One per epoch bump. The end is an offsets record (members reconciled), not a line: a bump
    followed by the next one within `settle_ms` (a heartbeat round or two) may end either way;
    otherwise every member had time to reconcile (stable). The last bump of an emptied group
    ends it empty."""
    rx = _rx(BUMPED, group)
    bumps = [(ln, int(m.group(1))) for ln in lines if (m := rx.search(ln.text))]
    out = []
    for k, (ln, epoch) in enumerate(bumps):
        cause = _cause_before(timeline, ln.ts_ms, group)
        nxt = bumps[k + 1][0].ts_ms if k + 1 < len(bumps) else None
        # A member killed or frozen before it could reconcile holds the epoch open until its
        # fence bumps it again (no line for that bump in 4.x): superseded then.
        stalled = any(e["action"] in ("kill", "pause") and e.get("group") in (group, None)
                      and 0 <= e["ts_ms"] - ln.ts_ms < settle_ms for e in timeline)
        outcomes: tuple = ("stable",) if (nxt is None or nxt - ln.ts_ms >= settle_ms) and not stalled \
            else ("stable", "superseded")
        out.append(ExpRebalance(protocol, ln.ts_ms, action_trigger(cause, protocol) if cause else "unknown",
                                _describe(cause), generation=epoch, outcomes=outcomes, start_line=ln.text))
    return out


def group_protocol(timeline: list) -> str:
    protos = {e.get("protocol") for e in timeline if e["action"] == "start"}
    libs = {e.get("library") for e in timeline if e["action"] == "start"}
    if "java-share" in libs:
        return "share"
    if "streams" in protos:
        return "streams"
    return "consumer" if "consumer" in protos else "classic"


def expected_removals(timeline: list, version: str, protocol: str, pause_window_ms: int,
                      left: frozenset = frozenset()) -> list[ExpRemoval]:
    """Walks each member (client id) through its actions: a member that had been assigned
    partitions and is then killed, frozen, stalled or closed is removed. So is a member closed
    before it said it joined whose leave the broker logged (`left`: the broker completed its join
    while it was closing, under load)."""
    out: list[ExpRemoval] = []
    in_group: dict[str, bool] = {}
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
        if a == "kill" and static and _restarted_within_session(e, later):
            out.append(ExpRemoval(cid, "static_member_fenced", "graceful_shutdown", "kill+restart", e["ts_ms"]))
            continue      # the new instance takes the member's place: still in the group
        in_group[cid] = False
        if (a == "kill" and static) or (a == "leave" and _no_leave_on_close(e, protocol)):
            out.append(ExpRemoval(cid, "heartbeat_expiry", "graceful_shutdown", a, e["ts_ms"]))
        elif a == "kill" or a == "pause":
            back = _rejoined(cid, e["ts_ms"], later, pause_window_ms)
            out.append(ExpRemoval(cid, "heartbeat_expiry", "process_pause" if back else "process_crash", a, e["ts_ms"]))
        elif a == "stop_polling":
            out.append(ExpRemoval(cid, "poll_timeout", "slow_processing", a, e["ts_ms"]))
        else:
            out.append(ExpRemoval(cid, "leave_group", "graceful_shutdown", a, e["ts_ms"]))
    return out


def _restarted_within_session(kill: dict, later: list) -> bool:
    """Back well within the session (the broker counts it from the last heartbeat, before the
    kill): the scenarios restart either at once or after the broker said the member failed."""
    session = kill.get("session_timeout_ms") or 0
    for e in later:
        if e.get("client_id") == kill["client_id"] and e["action"] == "start":
            return e["ts_ms"] - kill["ts_ms"] < session / 2
    return False


def _rejoined(cid: str, since_ms: int, later: list, window_ms: int) -> bool:
    """The same client is assigned again within the window (a new member id for classic)."""
    return any(e.get("client_id") == cid and e["action"] in ("joined", "reassigned")
               and e["ts_ms"] - since_ms <= window_ms for e in later)


def _session_of(timeline: list, cid: str) -> int | None:
    for e in timeline:
        if e.get("client_id") == cid and e["action"] == "start":
            return e.get("session_timeout_ms")
    return None


def expected(version: str, group: str, timeline: list, shipped: list, pause_window_ms: int = 60_000) -> Expected:
    """Everything the monitor must report for `group` after the bed ran its scenario."""
    # Start entries carry the member's session timeout; kill entries need it too.
    for e in timeline:
        if e.get("client_id") and "session_timeout_ms" not in e:
            e["session_timeout_ms"] = _session_of(timeline, e["client_id"])
    lines = group_lines(shipped, group)
    protocol = group_protocol(timeline)
    exp = Expected(group, protocol, last_line_ms=lines[-1].ts_ms if lines else None,
                   removal_lines=removal_line_times(lines, group))
    if protocol == "classic":
        exp.rebalances = classic_rebalances(lines, group, timeline)
    else:
        exp.rebalances = consumer_rebalances(lines, group, timeline, protocol)
        last = exp.rebalances[-1] if exp.rebalances else None
        if last is not None and _emptied(timeline) and last.trigger != "member_join":
            last.outcomes = ("empty",)     # the bump that removed the last member
    exp.removals = expected_removals(timeline, version, protocol, pause_window_ms, _left_clients(lines, timeline))
    exp.dead = any(e["action"] in ("delete_group", "offsets_expired") for e in timeline)
    if jars.parse_version(version) < (3, 2):
        exp.notes.append("no KIP-800 client reasons (3.2+): poll timeouts are inferred from the rejoin")
    return exp


LEFT_MEMBER = re.compile(r"(?:member\.id |Member )(\S+?)\]? (?:in group \S+ has left|has left group)")


def _left_clients(lines: list, timeline: list) -> frozenset:
    """Client ids whose member the broker's lines say left the group (classic member ids are
    `<client id>-<uuid>`)."""
    ids = {m.group(1) for ln in lines if (m := LEFT_MEMBER.search(ln.text))}
    clients = {e["client_id"] for e in timeline if e.get("client_id")}
    return frozenset(c for c in clients if any(i.startswith(c + "-") for i in ids))


def _emptied(timeline: list) -> bool:
    """Every member the bed started was closed, killed or never joined at the end."""
    alive: dict[str, bool] = {}
    for e in timeline:
        cid = e.get("client_id")
        if cid is None:
            continue
        if e["action"] in ("joined", "reassigned"):
            alive[cid] = True
        elif e["action"] in ("kill", "leave"):
            alive[cid] = False
    return not any(alive.values())
