"""Removal records held in the group's model until their decision time (per-group diagnosis).

A removal's root cause depends on what the group does next (did the same client come back, and
how soon?), so the state machine hands each removal record here instead of emitting it. The
record waits in `GroupModel.held_removals` until event time passes `removed_at + decision
window` (state/diagnosis/rules.py), collecting what is learned meanwhile; then the rules decide.
"""
from __future__ import annotations

from typing import Any

from state import events as E
from state.diagnosis.rules import DiagnosisSettings, _secs, classify_in_group, decision_window_ms
from state.model import EPOCH_PROTOCOLS, PROTOCOL_CLASSIC, GroupModel, HeldRemoval, Member
from state.outputs import client_id_from_member_id
from state.vocabulary import RemovalCause


def _commit_evidence(model: GroupModel, record: dict[str, Any], known: Member | None, held: HeldRemoval) -> None:
    """A LeaveGroup: did the member's partitions see commits during the last poll interval?"""
    at = record["removed_at_ms"]
    stall = record.get("rebalance_timeout_ms")
    generation = record.get("generation")
    polled = model.polled_generations.get(str(generation)) if record.get("protocol") == PROTOCOL_CLASSIC else None
    if stall and polled is not None and polled > at - stall:
        # A classic member joins and syncs inside poll(): it was polling when the rebalance of its
        # generation ran, less than max.poll.interval.ms before the leave (assumed: its poll()
        # calls are short next to max.poll.interval.ms), so its poll cannot have timed out.
        held.stalled = False
        held.commit_text = (f"it joined generation {generation}, whose rebalance started "
                            f"{(at - polled) / 1000:.1f} s before the leave, within max.poll.interval.ms "
                            f"{stall / 1000:.1f} s")
        return
    parts = None if known is None else known.partitions
    if not (parts and stall):
        held.commit_text = "commit evidence not available (assignment unknown), the rejoin alone decides"
        return
    held.commit_known = True
    commits = [model.partition_commits[p] for p in parts if p in model.partition_commits]
    # A leave whose line writes whole seconds may have come after a commit of its second.
    newest = max((c for c in commits if c <= (held.latest_ms or at)), default=None)
    if held.latest_ms is not None:
        held.commit_partitions = list(parts)    # one that comes later may be of its second (note_commit_times)
    _read_leave_commits(held, len(parts), newest, at, stall)


def _read_leave_commits(held: HeldRemoval, partitions: int, newest: int | None, at: int, stall: int) -> None:
    held.stalled = newest is None or newest <= at - stall
    if newest is None:
        held.commit_text = f"no commit on its {partitions} partition(s) before the leave"
    else:
        held.commit_text = (f"last commit on its {partitions} partition(s) "
                            f"{max(at - newest, 0) / 1000:.1f} s before the leave "
                            f"({'no commit during' if held.stalled else 'commits during'} "
                            f"the last {stall / 1000:.1f} s)")


def _start_close_evidence(model: GroupModel, record: dict[str, Any], known: Member | None, held: HeldRemoval) -> None:
    """A static member removed (replaced or expired; it sends no LeaveGroup): did it commit on the
    way out? Its partitions' commit times up to the removal are collected while it is held
    (note_commit_times: the decoder packs a batch's commits at the batch's latest commit, which may
    come after the removal) and read at its decision (_read_close_evidence)."""
    at = record["removed_at_ms"]
    parts = None if known is None else known.partitions
    if not parts:
        held.commit_text = "its partitions are not known, so neither are its commits"
        return
    held.commit_partitions = list(parts)
    held.commit_times = E.newest_commit_times(
        t for p in parts for t in (model.partition_commits.get(p), *model.partition_prior_commits.get(p, ()))
        if t is not None and t <= at)


def note_commit_times(model: GroupModel, key: str, times: tuple[int | None, ...]) -> None:
    """A partition's commit times (a commit entry's) for the held static removals that own it, and
    for the held LeaveGroups of whole-second lines that own it: a commit within the leave's second
    may have come before it (what a consumer commits when it closes)."""
    for h in model.held_removals:
        if not (h.commit_partitions and key in h.commit_partitions):
            continue
        at = h.rec["removed_at_ms"]
        if h.commit_times is not None:
            h.commit_times = E.newest_commit_times([*h.commit_times, *(t for t in times if t is not None and t <= at)])
        elif h.latest_ms is not None and h.commit_known and h.rec["cause"] == RemovalCause.LEAVE_GROUP:
            late = [t for t in times if t is not None and at <= t <= h.latest_ms]
            if late:
                _read_leave_commits(h, len(h.commit_partitions), max(late), at, h.rec["rebalance_timeout_ms"])


def _read_close_evidence(h: HeldRemoval, s: DiagnosisSettings) -> None:
    """From the newest commit times of its partitions before the removal (an auto-commit writes
    every partition at once): its last commit, the gap to the one before, and the interval before
    that. A close's commit comes off the schedule; a killed consumer's commits stop on it."""
    times, at = h.commit_times, h.rec["removed_at_ms"]
    if times is None:
        return
    if len(times) < 3:
        h.commit_text = f"{len(times)} commit(s) of its partitions known before it went, too few for a schedule"
        return
    last, gap, interval = times[0], times[0] - times[1], times[1] - times[2]
    said = (f"its last commit {_secs(at - last)} before the removal came {_secs(gap)} after the one before, "
            f"where it had committed {_secs(interval)} apart")
    if gap <= s.close_commit_max_fraction * interval:
        h.closed, h.commit_text = True, said + " (off its schedule: the commit of a close)"
    elif gap >= s.scheduled_commit_min_fraction * interval:
        h.closed, h.commit_text = False, said + " (on schedule, then none: no commit on close)"
    else:
        h.commit_text = said + " (neither clearly off nor on its schedule)"


def hold_removal(model: GroupModel, record: dict[str, Any], known: Member | None,
                 settings: DiagnosisSettings, latest_ms: int | None = None) -> None:
    """Keep a removal record until event time passes its decision window. `latest_ms`: its line
    writes whole seconds, the removal happened at the latest then (None: at removed_at_ms)."""
    held = HeldRemoval(rec=record, decide_at=record["removed_at_ms"] + decision_window_ms(record, settings),
                       latest_ms=latest_ms)
    if record["cause"] == RemovalCause.LEAVE_GROUP:
        _commit_evidence(model, record, known, held)
    elif record.get("group_instance_id") is not None and record["cause"] in (RemovalCause.STATIC_MEMBER_FENCED,
                                                                             RemovalCause.HEARTBEAT_EXPIRY):
        _start_close_evidence(model, record, known, held)
    model.held_removals.append(held)


def observe_join(model: GroupModel, member_id: str | None, client_id: str | None,
                 client_host: str | None, ts_ms: int) -> list[HeldRemoval]:
    """A member (re)joined: is it the client of a held removal coming back? Returns the held
    removals it is the return of."""
    back: list[HeldRemoval] = []
    if client_id is None and member_id is not None and model.protocol == PROTOCOL_CLASSIC:
        client_id = client_id_from_member_id(member_id)
    for h in model.held_removals:
        r = h.rec
        # At the removal's own time, a join applied after it came after it when the removal's
        # line wrote whole seconds (placed before the records of its second, state/event_order.py).
        if h.rejoined_at_ms is not None or ts_ms < r["removed_at_ms"] or ts_ms > h.decide_at \
                or (ts_ms == r["removed_at_ms"] and h.latest_ms is None):
            continue
        same_id = member_id is not None and member_id == r["member_id"]
        # Epoch-based members keep their member id across a rejoin; only classic ones need the client.
        same_client = (not same_id and r.get("protocol") not in EPOCH_PROTOCOLS and client_id is not None
                       and client_id == r.get("client_id")
                       and (client_host is None or r.get("client_host") is None
                            or client_host == r.get("client_host")))
        if same_id or same_client:
            h.rejoined_at_ms = ts_ms
            h.same_member_id = same_id
            back.append(h)
            if r["cause"] == RemovalCause.LEAVE_GROUP:
                # The rejoin is what a LeaveGroup's verdict waits for (poll timeout or restart):
                # decide it now, not at the end of the window, so that a rebalance waiting for its
                # trigger (trigger_may_change) is settled within a batch or two.
                h.decide_at = min(h.decide_at, ts_ms)
    return back


def never_stopped(h: HeldRemoval, settings: DiagnosisSettings) -> bool:
    """An expired member whose client came back within one heartbeat interval: it was alive."""
    r = h.rec
    return (r["cause"] == RemovalCause.HEARTBEAT_EXPIRY and h.rejoined_at_ms is not None
            and h.rejoined_at_ms - r["removed_at_ms"] <= settings.alive_rejoin_ms(r.get("protocol")))


def _poll_timeout_inferred(h: HeldRemoval, settings: DiagnosisSettings) -> bool:
    """A LeaveGroup without a client reason, the same client back within the poll window, and no
    commits on its partitions while it was stalled: the client left on a poll timeout."""
    rec = h.rec
    return (rec["cause"] == RemovalCause.LEAVE_GROUP and h.rejoined_at_ms is not None
            and (rec.get("reason_text") or "not provided") == "not provided"
            and h.rejoined_at_ms - rec["removed_at_ms"] <= settings.leave_window_ms(rec.get("rebalance_timeout_ms"))
            and h.may_have_stalled)


def trigger_may_change(model: GroupModel, member_id: str | None) -> bool:
    """Is the removal of the member a rebalance names as its leaver still undecided, and may it
    be decided a poll timeout (a LeaveGroup without a client reason, no commits while it may
    have been stalled)? Then the rebalance's trigger is not final (GroupModel.provisional_triggers)."""
    if member_id is None:
        return False
    if any(p.rec["member_id"] == member_id for p in model.pending_inferred):
        return True
    return any(h.rec["member_id"] == member_id and h.rec["cause"] == RemovalCause.LEAVE_GROUP
               and (h.rec.get("reason_text") or "not provided") == "not provided" and h.may_have_stalled
               for h in model.held_removals)


def undecided_members(model: GroupModel) -> set[str]:
    """Members whose removal is held or waiting for its own line."""
    return ({h.rec["member_id"] for h in model.held_removals}
            | {p.rec["member_id"] for p in model.pending_inferred})


def _expired_with_others(model: GroupModel, h: HeldRemoval, window: int) -> bool:
    """Did other members of the group expire within `window` of this one? A coordinator in trouble
    loses every member that heartbeats to it; alive members follow a plain move to the new
    coordinator, so one member expiring near a move (a crash next to a failover) is not its doing.
    Both records are marked: the earlier one may be released before the later one is decided."""
    rec = h.rec
    others = [o for o in model.held_removals if o is not h and o.rec["cause"] == RemovalCause.HEARTBEAT_EXPIRY
              and abs(o.rec["removed_at_ms"] - rec["removed_at_ms"]) <= window]
    for o in others:
        o.expired_with_others = True
    return bool(others) or h.expired_with_others


def release_removals(model: GroupModel, now_ms: int, settings: DiagnosisSettings) -> list[HeldRemoval]:
    """The held entries whose decision time event time has passed, their records decided, in
    holding order."""
    if not model.held_removals:
        return []
    keep, decided = [], []
    for h in model.held_removals:
        if now_ms <= h.decide_at:
            keep.append(h)
            continue
        rec = h.rec
        window = settings.coordinator_wide_window_ms
        moves = [t for t in model.coordinator_moves if abs(t - rec["removed_at_ms"]) <= window]
        # members that expire while their coordinator moves share its cause; so does one that never
        # stopped (it came back at once: its coordinator, not its process, went away)
        if moves and _expired_with_others(model, h, window):
            h.expired_with_others = True
        if moves and (h.expired_with_others or never_stopped(h, settings)):
            h.coordinator_move_ms = min(moves, key=lambda t: abs(t - rec["removed_at_ms"]))
        if _poll_timeout_inferred(h, settings):
            h.poll_inferred = True
        _read_close_evidence(h, settings)
        classify_in_group(rec, h, settings)
        decided.append(h)
    model.held_removals = keep
    return decided
