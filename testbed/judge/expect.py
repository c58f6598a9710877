"""What the monitor must report for one scenario, derived from what the bed did, never from the
monitor's output.

- Rebalances: one per rebalance the broker started for the group: a "Preparing to rebalance"
  line (classic), a "Bumped group epoch" line (KIP-848, share, streams), and for share and
  streams groups also the session-fence and leave lines, whose epoch bump the broker does not
  log (`epoch_line_rebalances`). Its start and end are
  the times of the broker's own lines (the end: "Assignment received ... generation N" for
  stable, "... generation N is now empty" for empty; KIP-848 groups end on an offsets record,
  so only their start is a line). Its trigger is what the bed did last before that line (the
  ground-truth timeline) read with protocol knowledge: a SIGKILL or SIGSTOP ends in a heartbeat
  expiry, a stalled poll loop in a poll timeout, a close in a LeaveGroup (except for static
  members, which send none: their session expires), a start or a resumed process in a join, more
  partitions for a subscribed topic in a KIP-848 or streams group's metadata change.
- Removals: one per member the bed took out of the group while it was in it (the member had
  been assigned partitions), with the cause and root cause the protocol and the bed's actions
  imply (docs/diagnosis.md): SIGKILL -> heartbeat_expiry/process_crash; SIGSTOP then SIGCONT
  within the pause window -> heartbeat_expiry/process_pause; a stalled poll loop ->
  poll_timeout/slow_processing; close -> leave_group/graceful_shutdown; a static member closed ->
  heartbeat_expiry/graceful_shutdown, killed -> heartbeat_expiry/process_crash (its commits tell:
  _static_verdict); a static member restarted within its session -> static_member_fenced with the
  same root causes (the replaced member id; no rebalance); a Kafka Streams
  instance closed (it sends no leave) or killed -> heartbeat_expiry/unknown (the broker's records
  cannot tell the two apart), process_pause if it came back. A removal names the client id the
  broker records (`broker_client_id`: a Streams instance's is its thread's consumer's).
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from testbed.bed import jars
from testbed.judge.ownership import Ownership
from testbed.judge.removals import (  # noqa: F401 (ExpRemoval, ExpStop, broker_client_id: this module's contract too)
    ExpRemoval, ExpStop, _no_leave_on_close, broker_client_id, expected_removals, expected_stops,
)

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
    r"\[GroupId {g}\]\[MemberId \S+\] Member (\S+) left the streams group",
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
class Expected:
    group: str
    protocol: str
    rebalances: list = field(default_factory=list)
    removals: list = field(default_factory=list)
    dead: bool = False                # the group ends Dead (deleted, offsets expired)
    last_line_ms: int | None = None
    removal_lines: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    stops: list = field(default_factory=list)     # ExpStop: killed members' partitions
    gaps: list = field(default_factory=list)      # ExpGap: every partition's stops that ended
    first_given: dict = field(default_factory=dict)   # partition -> when a client was first given it


# Rebalances a client starts by itself, not because of anything the bed did: the broker's
# reason names them (a kafka-python leader rejoins when it sees the group's subscriptions change).
CLIENT_OWN = (("leader_rejoin", "re-joining group during"), ("metadata_change", "Updating metadata for member"))
CAUSE_ACTIONS = ("start", "kill", "pause", "resume", "stop_polling", "resume_polling", "leave", "stop_broker",
                 "add_partitions", "kill_broker")


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
    if a == "kill_broker":
        return "heartbeat_expiry"            # a follower's death stalls the coordinator: sessions expire
    if a == "add_partitions" and protocol in ("consumer", "streams"):
        return "metadata_change"             # the coordinator bumps the epoch for the new metadata hash (4.1+)
    return "unknown"


NAMED_MEMBER = re.compile(r"\(reason: (Adding new member|removing member) (\S+?)[ ,;)]")


def _actions_before(timeline: list, ts_ms: int, group: str, actions: tuple) -> list[dict]:
    """The bed's `actions` on the group (or the cluster, or a topic it reads: `groups`) up to `ts_ms`, in order."""
    return [e for e in timeline if e["action"] in actions and e["ts_ms"] <= ts_ms
            and (e.get("group") in (group, None) or group in (e.get("groups") or ()))]


def _cause_before(timeline: list, ts_ms: int, group: str, line: str = "") -> dict | None:
    prior = _actions_before(timeline, ts_ms, group, CAUSE_ACTIONS)
    # The broker's reason names the member (2.4+): take that member's last action, not the bed's
    # last action (a member started before another one's close can join after it, under load).
    named = NAMED_MEMBER.search(line)
    if named is not None:
        mine = [e for e in prior if e.get("client_id") and named.group(2).startswith(e["client_id"] + "-")]
        if named.group(1) == "Adding new member":
            # its JoinGroup reached the broker after the bed had already closed it, under load
            mine = [e for e in mine if e["action"] in ("start", "resume", "resume_polling")]
        elif mine and mine[-1]["action"] in ("start", "resume", "resume_polling"):
            # removed, though the bed did not take it out: the cluster did (a broker's death)
            mine = []
        if mine:
            return mine[-1]
    return prior[-1] if prior else None


def _describe(entry: dict | None) -> str:
    if entry is None:
        return "-"
    return f"{entry['action']} {entry.get('client_id') or entry.get('broker_id') or entry.get('topic') or ''}".strip()


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
            if cause is not None and cause["action"] == "leave" and "on heartbeat expiration" in ln.text:
                # its close's LeaveGroup never reached the coordinator (2.8.2 failover: sent while
                # the coordinator moved): the broker expired it, and its reason says so
                trigger = "heartbeat_expiry"
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


# A consumer group's member change that bumps its epoch (4.x), and how long before the bump its
# line may be.
C_MEMBER_CHANGE = (r"\[GroupId {g}\] Member \S+ (?:joins the consumer group|left the consumer group"
                   r"|fenced from the group)")
REASON_WINDOW_MS = 1000
# The same lines, naming the member and what it did.
C_MEMBER = r"\[GroupId {g}\] Member (\S+) (joins|left|fenced)"


def consumer_rebalances(lines: list[GLine], group: str, timeline: list, protocol: str,
                        settle_ms: int = 2000) -> list[ExpRebalance]:
    """One per epoch bump. The end is an offsets record (members reconciled), not a line: a bump
    followed by the next one within `settle_ms` (a heartbeat round or two) may end either way;
    otherwise every member had time to reconcile (stable). The last bump of an emptied group
    ends it empty."""
    rx, reason_rx, member_rx = _rx(BUMPED, group), _rx(C_MEMBER_CHANGE, group), _rx(C_MEMBER, group)
    bumps: list[tuple[GLine, int, GLine | None]] = []    # (the bump's line, its epoch, the member change before it)
    reason: GLine | None = None
    # The members the lines show in the group: a bump that leaves none empties it, whatever the bed
    # did (a broker's death can fence every member: 4.4.0 follower_kill[cg] in CI).
    members: set[str] = set()
    emptied: set[int] = set()
    last_out = False          # the member change before the bump took the last known member out
    for ln in lines:
        if (m := rx.search(ln.text)):
            bumps.append((ln, int(m.group(1)), reason))
            if reason is not None and last_out:
                emptied.add(len(bumps) - 1)
            reason, last_out = None, False
        elif reason_rx.search(ln.text):
            reason, last_out = ln, False
            if (mm := member_rx.search(ln.text)):
                if mm.group(2) == "joins":
                    members.add(mm.group(1))
                elif mm.group(1) in members:
                    members.discard(mm.group(1))
                    last_out = not members
    out = []
    for k, (ln, epoch, why) in enumerate(bumps):
        # The bed's cause is its last action before the member change the bump follows (logged
        # just before it, in the same coordinator step), not before the bump: under load a fence
        # bumped 10 ms after its line, in the millisecond the bed sent the next member's leave.
        changed_ms = why.ts_ms if why is not None and 0 <= ln.ts_ms - why.ts_ms <= REASON_WINDOW_MS else ln.ts_ms
        cause = _cause_before(timeline, changed_ms, group)
        trigger = action_trigger(cause, protocol) if cause else "unknown"
        if cause is not None and cause["action"] == "kill_broker" and why is not None and changed_ms == why.ts_ms:
            # after a broker's death the members change by themselves: the line says how
            trigger = ("member_join" if "joins the consumer group" in why.text else
                       "member_leave" if "left the consumer group" in why.text else "heartbeat_expiry")
        nxt = bumps[k + 1][0].ts_ms if k + 1 < len(bumps) else None
        # A member killed or frozen before it could reconcile holds the epoch open until its
        # fence bumps it again (no line for that bump in 4.x): superseded then. So does the
        # coordinator stopped: the members reconcile with the next one, if before the next bump.
        stalled = any(e["action"] in ("kill", "pause", "stop_broker", "kill_broker") and e.get("group") in (group, None)
                      and 0 <= e["ts_ms"] - ln.ts_ms < settle_ms for e in timeline)
        outcomes: tuple = ("stable",) if (nxt is None or nxt - ln.ts_ms >= settle_ms) and not stalled \
            else ("stable", "superseded")
        if k in emptied:
            outcomes = ("empty",)
        out.append(ExpRebalance(protocol, ln.ts_ms, trigger, _describe(cause), generation=epoch, outcomes=outcomes,
                                start_line=ln.text))
    return out


# Share (KIP-932) and streams (KIP-1071) groups: what the group coordinator logs and when it bumps
# the epoch, read in its code (GroupMetadataManager: the 4.2.1 and 4.3.1 sources, the 4.4.0
# bytecode; 4.2.2 and 4.4.0 publish no sources jar):
# - shareGroupHeartbeat / streamsGroupHeartbeat bump the epoch and log "Bumped (streams )?group
#   epoch to N": for a join (a new member's subscription or topology; its "Member M joins the
#   share/streams group" line comes in the same heartbeat, before or after the bump's line in the
#   same millisecond) and, with no member change, when the group's metadata or topology changed
#   or (share groups) when share partitions the share coordinator has initialised are not all in
#   the target assignment (initializedAssignmentPending: the first assignment comes before the
#   partitions are initialised, so it holds none and the broker bumps again once they are). 4.2
#   checks that on every heartbeat, so the heartbeat after a fence or leave of a member that
#   held partitions bumps once more; 4.3+ only when no new assignment is pending.
# - A session fence ("Member M fenced from the group because the member session expired", share;
#   "Streams member M fenced ...", streams) and a leave ("Member M left the share group"; "...
#   Member M left the streams group") go through shareGroupFenceMember / streamsGroupFenceMember,
#   which write the member's tombstones and the epoch record of epoch + 1 and log no "Bumped"
#   line: that rebalance starts at the fence or leave line, and empties the group when the member
#   was the last one.
# So one rebalance per Bumped line (member_join when a join line of the same heartbeat is unpaired, else
# group_epoch_bump: the broker bumped on its own; metadata_change, a streams group's first after the bed
# grew a topic it reads) and one per fence line (heartbeat_expiry) and leave line (member_leave), in order.
EPOCH_LINES = {
    "join": (r"\[GroupId {g}\] Member (\S+) joins the share group",
             r"\[GroupId {g}\]\[MemberId (\S+)\] Member joins the streams group"),
    "bumped": (BUMPED,),
    "fence": (r"\[GroupId {g}\] (?:Streams )?[Mm]ember (\S+) fenced from the group because (.*)",),
    "leave": (r"\[GroupId {g}\] Member (\S+) left the share group",
              r"\[GroupId {g}\]\[MemberId \S+\] Member (\S+) left the streams group"),
}
EPOCH_LINE_ORDER = {"join": 0, "bumped": 1, "fence": 1, "leave": 1}   # a join's line first within its ms


def _epoch_events(lines: list[GLine], group: str) -> list[tuple]:
    rx = [(kind, _rx(p, group)) for kind, pats in EPOCH_LINES.items() for p in pats]
    out = []
    for k, ln in enumerate(lines):
        for kind, r in rx:
            if m := r.search(ln.text):
                out.append((ln.ts_ms, EPOCH_LINE_ORDER[kind], k, kind, m, ln))
                break
    out.sort(key=lambda e: e[:3])
    return out


def _last_action(timeline: list, ts_ms: int, group: str, actions: tuple) -> dict | None:
    prior = _actions_before(timeline, ts_ms, group, actions)
    return prior[-1] if prior else None


# What the bed does that takes a member out of a share or streams group (a Streams close sends nothing).
TAKES_MEMBER_OUT = ("kill", "pause", "leave", "stop_polling")


# A member's line on reaching an epoch (share and streams groups log one per member and epoch).
EPOCH_REACHED = r"\[GroupId {g}\] Member (\S+) new assignment state: epoch=(\d+),"


def epoch_line_rebalances(lines: list[GLine], group: str, timeline: list, protocol: str,
                          settle_ms: int = 2000) -> list[ExpRebalance]:
    """Share and streams groups: one rebalance per epoch bump the broker's lines show (above).
    A bump followed by the next one within `settle_ms`, or by the bed taking a member out (kill,
    pause, close: a Streams instance's close sends nothing) or stopping the coordinator before the
    members could reconcile, may end stable or superseded; a fence or leave of the last member ends `empty`."""
    out: list[ExpRebalance] = []
    members: set = set()
    unpaired_joins: list = []
    epoch: int | None = None
    lineless: set[int] = set()          # indices in `out` of the bumps a fence or leave implies
    members_at: list[frozenset] = []    # per bump in `out`, the members the lines show in the group
    for ts, _, _, kind, m, ln in _epoch_events(lines, group):
        if kind == "join":
            members.add(m.group(1))
            unpaired_joins.append(m.group(1))
            continue
        if kind == "bumped":
            epoch = int(m.group(1))
            if unpaired_joins:
                trigger, why = "member_join", f"join of member {unpaired_joins.pop(0)}"
            elif protocol == "streams" and (cause := _last_action(timeline, ts, group, CAUSE_ACTIONS)) is not None \
                    and cause["action"] == "add_partitions" and (not out or (out[-1].start_ms or 0) < cause["ts_ms"]):
                trigger, why = action_trigger(cause, protocol), _describe(cause)
            else:
                trigger = "group_epoch_bump"
                why = ("the broker itself (share partitions initialised)" if protocol == "share"
                       else "the broker itself (metadata or topology changed)")
            out.append(ExpRebalance(protocol, ts, trigger, why, generation=epoch, start_line=ln.text))
            members_at.append(frozenset(members))
            continue
        members.discard(m.group(1).rstrip(".,"))
        epoch = epoch + 1 if epoch is not None else None          # the line-less bump
        lineless.add(len(out))
        if kind == "fence":
            trigger = "heartbeat_expiry" if "session expired" in m.group(2) else "rebalance_timeout"
            why = _describe(_last_action(timeline, ts, group, TAKES_MEMBER_OUT))
        else:
            trigger, why = "member_leave", _describe(_last_action(timeline, ts, group, ("leave",)))
        out.append(ExpRebalance(protocol, ts, trigger, why, generation=epoch,
                                outcomes=("empty",) if not members else ("stable",), start_line=ln.text))
        members_at.append(frozenset(members))
    removed = [ts for ts, _, _, kind, _, _ in _epoch_events(lines, group) if kind in ("fence", "leave")]
    reached_rx = _rx(EPOCH_REACHED, group)
    # (when, epoch, member) of each member's line on reaching an epoch; none: the version logs no such lines
    reached = [(ln.ts_ms, int(m.group(2)), m.group(1)) for ln in lines if (m := reached_rx.search(ln.text))]
    for k, reb in enumerate(out):
        if reb.outcomes == ("empty",):
            continue
        nxt = out[k + 1].start_ms if k + 1 < len(out) else None
        start = reb.start_ms or 0
        stalled = any(e["action"] in (*TAKES_MEMBER_OUT, "stop_broker") and e.get("group") in (group, None)
                      and 0 <= e["ts_ms"] - start < settle_ms for e in timeline)
        # a member the bed killed or froze before the bump and the broker removed only after it:
        # still in the group, it never reaches the epoch, whose members then never all reconcile
        dead = any(e["action"] in ("kill", "pause") and e.get("group") == group and e["ts_ms"] < start
                   and min((t for t in removed if t >= e["ts_ms"]), default=start + 1) > start for e in timeline)
        # a line-less bump (a fence or leave) no member's line shows reached before the next bump (4.2.2
        # follower_kill[sh]: the stall fenced b, which rejoined 3 s later; a went from epoch 3 to 5)
        at_epoch = {member for ts, e, member in reached if start <= ts < (nxt or ts + 1) and e == reb.generation}
        unreached = k in lineless and nxt is not None and reb.generation is not None and bool(reached) \
            and not at_epoch
        # a member the lines show in the group that reached the epoch only after the next bump, or
        # never: its members did not all reconcile (likely 4.4.0 follower_kill[sh] in one CI run,
        # whose lines were not kept: a join's epoch waits on its share partitions, and the bed
        # killed a leader of some 2 s after the join)
        lagging = nxt is not None and reb.generation is not None and bool(reached) \
            and bool(members_at[k] - at_epoch)
        if (nxt is not None and nxt - start < settle_ms) or stalled or dead or unreached or lagging:
            reb.outcomes = ("stable", "superseded")
    return out


def group_protocol(timeline: list) -> str:
    protos = {e.get("protocol") for e in timeline if e["action"] == "start"}
    libs = {e.get("library") for e in timeline if e["action"] == "start"}
    if "java-share" in libs:
        return "share"
    if "streams" in protos:
        return "streams"
    return "consumer" if "consumer" in protos else "classic"


def _session_of(timeline: list, cid: str) -> int | None:
    for e in timeline:
        if e.get("client_id") == cid and e["action"] == "start":
            return e.get("session_timeout_ms")
    return None


def of_group(timeline: list, group: str) -> list:
    """The entries about `group`: its own, the cluster's (no group), and those naming it among theirs."""
    return [e for e in timeline if e.get("group") in (group, None) or group in (e.get("groups") or ())]


# After a broker's death, a coordinator that stalled removes members within this long (its
# ISR waits for the controller to fence the dead broker, then the sessions it could not renew lapse).
STALL_WINDOW_MS = 60_000
STALL_REMOVALS = (r"Member (\S+) in group {g} has failed",
                  r"\[GroupId {g}\] (?:Streams |Share )?[Mm]ember (\S+) fenced from the group because the member "
                  r"session expired")


def stall_removals(timeline: list, lines: list[GLine], group: str, client_ids: set) -> list[ExpRemoval]:
    """Removals the broker made in the window after a broker the bed killed (kill_broker: a follower
    of the group's __consumer_offsets partition) of members the bed did not take out: the
    coordinator stall, which the monitor must tell and name the killed broker (docs/diagnosis.md)."""
    kills = [e for e in timeline if e["action"] == "kill_broker" and group in (e.get("groups") or ())]
    taken = [e for e in timeline
             if e["action"] in ("kill", "pause", "stop_polling", "leave") and e.get("group") == group]
    out = []
    for kill in kills:
        # until the bed takes members out itself (its closes after the broker is back)
        until = min([kill["ts_ms"] + STALL_WINDOW_MS] + [t["ts_ms"] for t in taken if t["action"] != "pause"
                                                         and t["ts_ms"] > kill["ts_ms"]])
        for pattern in STALL_REMOVALS:
            rx = _rx(pattern, group)
            for ln in lines:
                m = rx.search(ln.text)
                if m is None or not kill["ts_ms"] <= ln.ts_ms <= until:
                    continue
                member = m.group(1).rstrip(".,")
                cid = next((c for c in sorted(client_ids, key=len, reverse=True) if member.startswith(c + "-")), member)
                if any(t.get("client_id") == cid and t["ts_ms"] <= ln.ts_ms for t in taken):
                    continue      # the bed's own doing (a pause next to the stall)
                out.append(ExpRemoval(cid, "heartbeat_expiry", "coordinator_wide", "kill_broker", ln.ts_ms,
                                      member_id=member, evidence_has=f"broker {kill['broker_id']} died"))
    return out


def expected(version: str, group: str, timeline: list, shipped: list, pause_window_ms: int = 60_000) -> Expected:
    """Everything the monitor must report for `group` after the bed ran its scenario."""
    timeline = of_group(timeline, group)
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
    elif protocol in ("share", "streams"):
        exp.rebalances = epoch_line_rebalances(lines, group, timeline, protocol)
    else:
        exp.rebalances = consumer_rebalances(lines, group, timeline, protocol)
        last = exp.rebalances[-1] if exp.rebalances else None
        if last is not None and _emptied(timeline) and last.trigger != "member_join":
            last.outcomes = ("empty",)     # the bump that removed the last member
    exp.removals = expected_removals(timeline, version, protocol, pause_window_ms, _left_clients(lines, timeline),
                                     _clients_of(EXPIRED_MEMBER, lines, timeline))
    exp.removals += stall_removals(timeline, lines, group, {e["client_id"] for e in timeline if e.get("client_id")})
    exp.dead = any(e["action"] in ("delete_group", "offsets_expired") for e in timeline)
    owners = Ownership(timeline)
    exp.gaps, exp.first_given = owners.gaps, owners.first_given
    exp.stops = expected_stops(timeline, exp.gaps)
    if jars.parse_version(version) < (3, 2):
        exp.notes.append("no KIP-800 client reasons (3.2+): poll timeouts are inferred from the rejoin")
    return exp


# "Member[..., member.id M] in group G has left" (2.x), "Member MemberMetadata(memberId=M, ...) has
# left group G" (3.x), "Member M has left group through ..." (4.x)
LEFT_MEMBER = re.compile(r"(?:member\.id |memberId=|Member (?!MemberMetadata))([\w.-]+)[^\n]*? "
                         r"(?:in group \S+ has left|has left group)")


EXPIRED_MEMBER = re.compile(r"Member ([\w.-]+) in group \S+ has failed")


def _left_clients(lines: list, timeline: list) -> frozenset:
    """Client ids whose member the broker's lines say left the group (classic member ids are
    `<client id>-<uuid>`)."""
    return _clients_of(LEFT_MEMBER, lines, timeline)


def _clients_of(pattern: re.Pattern, lines: list, timeline: list) -> frozenset:
    """Client ids whose member a broker line of this pattern names."""
    ids = {m.group(1) for ln in lines if (m := pattern.search(ln.text))}
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
