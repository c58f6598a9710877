"""The per-group state machine: events in time order -> rebalance / removal / anomaly records.

`GroupStateMachine(model).apply(event)` mutates the model and collects output records in
`.outputs` as (kind, dict) pairs. It never raises on odd input: a transition that Kafka's table
forbids is counted (model.invalid_transitions, an "anomaly" record) and the model resynchronises
to what the event says.

Output contract: see docs/output.md (rebalances.jsonl, member_removals.jsonl).
"""
from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any, Iterable, Optional

from state import events as E
from state.diagnosis.rules import DEFAULT_SETTINGS, DiagnosisSettings, classify_in_group, decision_window_ms
from state.model import (
    ASSIGNING, COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, PROTOCOL_CLASSIC,
    PROTOCOL_CONSUMER, RECONCILING, STABLE, UNKNOWN, GroupModel, Member, OpenRebalance, is_legal,
)

OUT_REBALANCE = "rebalance"
OUT_REMOVAL = "removal"
OUT_ANOMALY = "anomaly"
OUT_CLOCK_SKEW = "clock_skew"

OUTCOMES = ("stable", "empty", "superseded", "in_progress", "dead")
CAUSES = ("heartbeat_expiry", "leave_group", "poll_timeout", "rebalance_timeout", "sync_timeout",
          "pending_member_timeout", "static_member_fenced", "group_deleted")

# A completed classic rebalance waits this long (event time) for the GroupMetadata record of its
# generation, which carries the member list; Kafka appends it within milliseconds.
METADATA_GRACE_MS = 2000
# A classic generation seen in one source waits this long (event time) for the other source's
# evidence before it is flagged as a `source_mismatch` anomaly (the GroupMetadata record is
# appended within milliseconds of "Assignment received"; 10 s also covers small clock skew).
SOURCE_CHECK_GRACE_MS = 10_000
# Removals logged just before "Preparing to rebalance" (Kafka 2.2-2.8, Java LeaveGroup) belong to
# the rebalance they caused; so does a member id created just before it (the trigger of a rebalance
# logged without a reason, Kafka 1.1-2.0).
REMOVAL_ATTACH_WINDOW_MS = 1000
# A member missing from the next generation without a removal line was dropped at the rebalance
# timeout (silent before Kafka 2.7) if the JOIN phase lasted at least this share of its timeout.
REBALANCE_TIMEOUT_SHARE = 0.95
INFERRED_LEAVE = ("inferred: member of generation {prev}, absent from generation {gen}, no removal line; "
                  "left with LeaveGroup (logged at DEBUG before Kafka 2.2)")
INFERRED_TIMEOUT = ("inferred: member of generation {prev}, absent from generation {gen}, no removal line; "
                    "the JOIN phase lasted its rebalance timeout (dropped silently before Kafka 2.7)")
# Clock-skew pairs waiting for their partner are kept for this many generations per kind.
SKEW_PROBE_KEEP = 8
# KIP-848 member state STABLE (record type 8).
MEMBER_STATE_STABLE = 0

_UUID_SUFFIX = re.compile(r"^(.+)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

_REMOVAL_CAUSE_TO_TRIGGER = {
    "heartbeat_expiry": "heartbeat_expiry", "leave_group": "member_leave",
    "poll_timeout": "poll_timeout", "rebalance_timeout": "rebalance_timeout",
    "sync_timeout": "rebalance_timeout", "pending_member_timeout": "member_leave",
    "static_member_fenced": "static_member_replaced", "group_deleted": "unknown",
}


def client_id_from_member_id(member_id: str) -> Optional[str]:
    """Classic member ids are `<client.id>-<uuid>` (broker-generated); KIP-848 ids are opaque."""
    match = _UUID_SUFFIX.match(member_id or "")
    return match.group(1) if match else None


class GroupStateMachine:
    def __init__(self, model: GroupModel, settings: DiagnosisSettings = DEFAULT_SETTINGS):
        self.m = model
        self.settings = settings
        # (position among the non-removal outputs, record) of every removal held by this instance:
        # where it would have been emitted without the decision window (tests, debugging).
        self.hold_order: list[tuple[int, dict[str, Any]]] = []
        self._released = 0
        self.outputs: list[tuple[str, dict[str, Any]]] = []
        # Observations about the inputs rather than the group (clock_skew records).
        self.observations: list[tuple[str, dict[str, Any]]] = []

    # ------------------------------------------------------------------ entry points
    def apply(self, ev: E.Event) -> None:
        m = self.m
        if ev.source not in m.seen_sources:
            m.seen_sources = sorted(m.seen_sources + [ev.source])
        self._resolve_source_checks(ev.ts_ms)
        self._note_generation_evidence(ev)
        self._flush_pending_completion(ev.ts_ms, closing_event=ev)
        if ev.broker is not None and ev.source == E.SOURCE_LOG and ev.kind != E.GROUP_UNLOADED:
            m.coordinator = ev.broker
        handler = _HANDLERS.get(ev.kind)
        if handler is not None:
            handler(self, ev)
        self._probe_clock(ev)
        m.last_event_ms = ev.ts_ms if m.last_event_ms is None else max(m.last_event_ms, ev.ts_ms)

    def apply_all(self, events: Iterable[E.Event]) -> list[tuple[str, dict[str, Any]]]:
        for ev in sorted(events, key=E.Event.sort_key):
            self.apply(ev)
        return self.outputs

    def advance_to(self, watermark_ms: int) -> None:
        """Event time has passed `watermark_ms`: emit what was waiting for later evidence."""
        self._flush_pending_completion(watermark_ms)
        self._resolve_source_checks(watermark_ms)
        self._release_removals(watermark_ms)

    def next_deadline_ms(self) -> Optional[int]:
        """Event time at which `advance_to` has something to do (None: nothing pending)."""
        m = self.m
        # A check can only flag when both sources have delivered events for the group; until
        # then it waits for the next event (apply resolves due checks too) and sets no timer.
        both = E.SOURCE_LOG in m.seen_sources and E.SOURCE_OFFSETS in m.seen_sources
        deadlines = [c["due_ms"] for c in m.generation_checks.values()] if both else []
        deadlines += [h["decide_at"] for h in self.m.held_removals]
        o = self.m.open_rebalance
        if o is not None and o.completed_at_ms is not None:
            deadlines.append(o.completed_at_ms + METADATA_GRACE_MS)
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------------------ source cross-check
    def _note_generation_evidence(self, ev: E.Event) -> None:
        """Classic generations: the log says a generation completed (or its join ended), the
        offsets topic has its GroupMetadata record. Each side is noted per generation."""
        gen = ev.generation
        if gen is None or gen <= 0:
            return   # generation 0: the Java coordinator's creation record, no rebalance
        if self.m.checked_generation is not None and gen <= self.m.checked_generation:
            return   # a rewrite of a checked generation (static member replaced) or a late line
        if ev.source == E.SOURCE_LOG and ev.kind in (E.JOIN_COMPLETE, E.ASSIGNMENT_RECEIVED, E.GROUP_EMPTY,
                                                     E.PREPARE_REBALANCE):
            # "Preparing to rebalance ... old generation N" also shows N existed (e.g. the
            # record a consumer -> classic downgrade writes, whose next line is that one).
            side = "log"
        elif ev.source == E.SOURCE_OFFSETS and ev.kind == E.GROUP_METADATA:
            side = "offsets"
        else:
            return
        checks = self.m.generation_checks
        c = checks.get(str(gen))
        if c is None:
            c = checks[str(gen)] = {"log": False, "log_completed": False, "offsets": False,
                                    "ts_ms": ev.ts_ms, "due_ms": ev.ts_ms + SOURCE_CHECK_GRACE_MS,
                                    "source_id": ev.source_id, "seq": ev.seq}
        c[side] = True
        if side == "log" and ev.kind in (E.ASSIGNMENT_RECEIVED, E.GROUP_EMPTY):
            c["log_completed"] = True

    def _resolve_source_checks(self, now_ms: int) -> None:
        """Flag generations whose grace has passed with evidence from one source only, when the
        group has events from both sources (otherwise a source is simply not configured)."""
        m = self.m
        if not m.generation_checks:
            return
        due = sorted((c["due_ms"], int(g)) for g, c in m.generation_checks.items() if now_ms > c["due_ms"])
        both = E.SOURCE_LOG in m.seen_sources and E.SOURCE_OFFSETS in m.seen_sources
        for _, gen in due:
            c = m.generation_checks.pop(str(gen))
            m.checked_generation = gen if m.checked_generation is None else max(m.checked_generation, gen)
            if not both:
                continue
            missing = None
            if c["log_completed"] and not c["offsets"]:
                missing, seen = "offsets", "log"
            elif c["offsets"] and not c["log"]:
                missing, seen = "logs", "offsets"
            if missing is None:
                continue
            self.outputs.append((OUT_ANOMALY, {
                "cluster": m.cluster, "group": m.group, "ts_ms": c["ts_ms"], "kind": "source_mismatch",
                "protocol": PROTOCOL_CLASSIC, "generation": gen, "seen_in": seen, "missing_in": missing,
                "checked_at_ms": c["due_ms"], "source_id": c["source_id"], "seq": c["seq"],
            }))
            m.source_mismatches += 1

    # ------------------------------------------------------------------ diagnosis (held removals)
    def _hold_removal(self, record: dict[str, Any], known: Optional[Member]) -> None:
        """Keep a removal record until event time passes its decision window (state/diagnosis.py)."""
        m = self.m
        held: dict[str, Any] = {"rec": record,
                                "decide_at": record["removed_at_ms"] + decision_window_ms(record, self.settings)}
        if record["cause"] == "leave_group":
            at = record["removed_at_ms"]
            stall = record.get("rebalance_timeout_ms")
            parts = None if known is None else known.partitions
            if parts and stall:
                commits = [m.partition_commits[p] for p in parts if p in m.partition_commits]
                newest = max((c for c in commits if c <= at), default=None)
                held["stalled"] = newest is None or newest <= at - stall
                if newest is None:
                    held["commit_text"] = f"no commit on its {len(parts)} partition(s) before the leave"
                else:
                    held["commit_text"] = (f"last commit on its {len(parts)} partition(s) "
                                           f"{(at - newest) / 1000:.1f} s before the leave "
                                           f"({'no commit during' if held['stalled'] else 'commits during'} "
                                           f"the last {stall / 1000:.1f} s)")
            else:
                held["commit_text"] = "commit evidence not available (assignment unknown), the rejoin alone decides"
        m.held_removals.append(held)
        self.hold_order.append((len(self.outputs) - self._released, record))

    def _observe_join(self, member_id: Optional[str], client_id: Optional[str], client_host: Optional[str],
                      ts_ms: int) -> None:
        """A member (re)joined: the client of a held removal came back?"""
        if client_id is None and member_id is not None and self.m.protocol == PROTOCOL_CLASSIC:
            client_id = client_id_from_member_id(member_id)
        for h in self.m.held_removals:
            r = h["rec"]
            if h.get("rejoined_at_ms") is not None or ts_ms <= r["removed_at_ms"] or ts_ms > h["decide_at"]:
                continue
            same_id = member_id is not None and member_id == r["member_id"]
            same_client = (not same_id and r.get("protocol") != PROTOCOL_CONSUMER and client_id is not None and client_id == r.get("client_id")
                           and (client_host is None or r.get("client_host") is None
                                or client_host == r.get("client_host")))
            if same_id or same_client:
                h["rejoined_at_ms"] = ts_ms
                h["same_member_id"] = same_id

    def _release_removals(self, now_ms: int) -> None:
        m = self.m
        if not m.held_removals:
            return
        keep = []
        for h in m.held_removals:
            if now_ms <= h["decide_at"]:
                keep.append(h)
                continue
            rec = h["rec"]
            window = self.settings.coordinator_wide_window_ms
            moves = [t for t in m.coordinator_moves if abs(t - rec["removed_at_ms"]) <= window]
            if moves:
                h["coordinator_move_ms"] = min(moves, key=lambda t: abs(t - rec["removed_at_ms"]))
            if rec["cause"] == "leave_group" and h.get("rejoined_at_ms") is not None \
                    and (rec.get("reason_text") or "not provided") == "not provided" \
                    and h["rejoined_at_ms"] - rec["removed_at_ms"] <= self.settings.leave_window_ms(
                        rec.get("rebalance_timeout_ms")) \
                    and h.get("stalled", True):
                h["poll_inferred"] = True
            classify_in_group(rec, h, self.settings)
            self.outputs.append((OUT_REMOVAL, rec))
            self._released += 1
        m.held_removals = keep

    # ------------------------------------------------------------------ clock skew
    def _probe_clock(self, ev: E.Event) -> None:
        """Pair a log line with the offsets record the coordinator wrote at the same moment.

        The coordinator logs "Assignment received ... generation N" and appends the GroupMetadata
        record of generation N within milliseconds ("is now empty" and the empty record, "Bumped
        group epoch to N" and the ConsumerGroupMetadata record likewise). Log times come from a
        zone-less header read in the configured zone; record times are UTC. Their difference is
        the log source's clock or zone error: a whole hour means a wrong broker_timezone.
        """
        if ev.generation is None:
            return
        d = ev.data
        if ev.kind in (E.ASSIGNMENT_RECEIVED, E.GROUP_EMPTY):
            side, key = "log", f"classic{'0' if ev.kind == E.GROUP_EMPTY else '1'}:{ev.generation}"
        elif ev.kind == E.GROUP_EPOCH_BUMPED:
            side, key = "log", f"consumer:{ev.generation}"
        elif ev.kind == E.GROUP_METADATA:
            side, key = "rec", f"classic{'1' if d.get('members') else '0'}:{ev.generation}"
        elif ev.kind == E.CG_EPOCH and not d.get("tombstone"):
            side, key = "rec", f"consumer:{ev.generation}"
        else:
            return
        probe = self.m.skew_probe
        mine, other = probe.setdefault(side, {}), probe.setdefault("rec" if side == "log" else "log", {})
        if key in other:
            log = other.pop(key) if side == "rec" else [ev.ts_ms, d.get("log_host") or ev.source_id]
            record_ts = ev.ts_ms if side == "rec" else other.pop(key)
            self.observations.append((OUT_CLOCK_SKEW, {
                "cluster": self.m.cluster, "group": self.m.group, "source": log[1],
                "pair": key.split(":")[0], "generation": ev.generation, "log_ts_ms": log[0],
                "record_ts_ms": record_ts, "skew_ms": log[0] - record_ts, "ts_ms": max(log[0], record_ts)}))
            return
        if key in mine:
            return   # the first one counts (a static member replacement rewrites the record later)
        mine[key] = [ev.ts_ms, d.get("log_host") or ev.source_id] if side == "log" else ev.ts_ms
        if len(mine) > SKEW_PROBE_KEEP:
            oldest = min(mine, key=lambda k: mine[k][0] if side == "log" else mine[k])
            del mine[oldest]

    # ------------------------------------------------------------------ transitions
    def _transition(self, target: str, ev: E.Event) -> None:
        m = self.m
        previous = m.state
        if previous == target and target not in (DEAD, PREPARING_REBALANCE):
            return
        if previous != UNKNOWN and not is_legal(previous, target):
            m.invalid_transitions += 1
            self.outputs.append((OUT_ANOMALY, {
                "cluster": m.cluster, "group": m.group, "ts_ms": ev.ts_ms, "kind": "invalid_transition",
                "from_state": previous, "to_state": target, "event_kind": ev.kind,
                "source_id": ev.source_id, "seq": ev.seq,
            }))
        m.state = target
        m.state_since_ms = ev.ts_ms

    def _set_state(self, target: str, ts_ms: int) -> None:
        """A state change outside the classic table (KIP-848 derived states, reloads)."""
        if self.m.state != target:
            self.m.state = target
            self.m.state_since_ms = ts_ms

    def _reincarnate_if_dead(self, ev: E.Event) -> None:
        """A group id used again after its group died is a new group (generation from 0)."""
        m = self.m
        if m.state != DEAD:
            return
        m.members.clear()
        m.members_generation = None
        m.generation = 0
        m.leader = None
        m.open_rebalance = None
        m.unattached_removals = []
        m.recent_joins = []
        m.last_emitted_generation = None
        m.target_assignment_epoch = None
        m.checked_generation = None
        m.generation_checks = {}
        m.state = EMPTY
        m.state_since_ms = ev.ts_ms

    # ------------------------------------------------------------------ records
    def _member_info(self, member_id: str, known: Optional[Member]) -> dict[str, Any]:
        info = {
            "member_id": member_id, "client_id": None, "client_host": None,
            "group_instance_id": None, "session_timeout_ms": None, "rebalance_timeout_ms": None,
        }
        if known is not None:
            for key in ("client_id", "client_host", "group_instance_id", "session_timeout_ms",
                        "rebalance_timeout_ms"):
                info[key] = getattr(known, key)
        if info["client_id"] is None and info["group_instance_id"] is None \
                and self.m.protocol == PROTOCOL_CLASSIC:
            info["client_id"] = client_id_from_member_id(member_id)
        return info

    def _removal_record(self, member_id: str, known: Optional[Member], cause: str, ev: E.Event,
                        at_ms: int, generation: Optional[int], reason_text: Optional[str] = None,
                        evidence: str = "") -> dict[str, Any]:
        m = self.m
        return {
            "cluster": m.cluster, "group": m.group, "protocol": m.protocol,
            **self._member_info(member_id, known),
            "removed_at_ms": at_ms, "cause": cause, "root_cause": "unknown", "evidence": evidence,
            "reason_text": reason_text, "generation": generation,
            "coordinator": ev.broker if ev.broker is not None else m.coordinator,
            "source_id": ev.source_id, "seq": ev.seq,
        }

    def _remove_member(self, member_id: str, cause: str, ev: E.Event,
                       reason_text: Optional[str] = None) -> None:
        m = self.m
        known = m.members.pop(member_id, None)
        if m.leader == member_id:
            m.leader = None
        record = self._removal_record(member_id, known, cause, ev, ev.ts_ms, m.generation, reason_text)
        self._hold_removal(record, known)
        m.removals_total += 1
        if m.open_rebalance is not None and m.open_rebalance.completed_at_ms is None:
            self._note_removal_in(m.open_rebalance, member_id, known, cause)
        else:
            m.unattached_removals.append([member_id, ev.ts_ms, cause])

    @staticmethod
    def _note_removal_in(o: OpenRebalance, member_id: str, known: Optional[Member], cause: str) -> None:
        o.removals.append(member_id)
        if cause in ("rebalance_timeout", "sync_timeout"):
            o.timeout_removals.append(member_id)
        if known is not None and known.rebalance_timeout_ms:
            o.max_rebalance_timeout_ms = max(o.max_rebalance_timeout_ms or 0, known.rebalance_timeout_ms)

    def _take_recent_removals(self, ts_ms: int) -> list[list]:
        recent = [r for r in self.m.unattached_removals if ts_ms - r[1] <= REMOVAL_ATTACH_WINDOW_MS]
        self.m.unattached_removals = []
        return recent

    def _open(self, ev: E.Event, protocol: str, previous_generation: Optional[int],
              trigger: str, trigger_member: Optional[str], reason: Optional[str],
              started_at_ms: Optional[int], generation: Optional[int] = None) -> OpenRebalance:
        m = self.m
        recent = self._take_recent_removals(ev.ts_ms)
        joins = [j for j in m.recent_joins if 0 <= ev.ts_ms - j[1] <= REMOVAL_ATTACH_WINDOW_MS]
        m.recent_joins = []
        if trigger == "unknown" and protocol == PROTOCOL_CLASSIC and reason is None:
            # Brokers before 2.1 log no reason: the removal or the new member id just before is
            # the trigger (the later of the two; a removal wins a tie).
            if joins and (not recent or joins[-1][1] > recent[-1][1]):
                trigger, trigger_member = "member_join", trigger_member or joins[-1][0]
            elif recent:
                trigger = _REMOVAL_CAUSE_TO_TRIGGER.get(recent[-1][2], "unknown")
                trigger_member = trigger_member or recent[-1][0]
        elif trigger == "unknown" and recent:
            trigger = _REMOVAL_CAUSE_TO_TRIGGER.get(recent[-1][2], "unknown")
            trigger_member = trigger_member or recent[-1][0]
        opened = OpenRebalance(
            protocol=protocol, previous_generation=previous_generation, started_at_ms=started_at_ms,
            trigger=trigger, trigger_member=trigger_member, reason_text=reason,
            coordinator=ev.broker if ev.broker is not None else m.coordinator,
            generation=generation, removals=[r[0] for r in recent],
        )
        timeouts = [mm.rebalance_timeout_ms for mm in m.members.values() if mm.rebalance_timeout_ms]
        if timeouts:
            opened.max_rebalance_timeout_ms = max(timeouts)
        if ev.ts_ms is not None:
            window = self.settings.storm_window_ms
            m.rebalance_starts = [t for t in m.rebalance_starts if ev.ts_ms - t < window][-999:] + [ev.ts_ms]
        m.open_rebalance = opened
        return opened

    def _emit_rebalance(self, opened: OpenRebalance, outcome: str, ended_at_ms: Optional[int],
                        members: Optional[int]) -> None:
        m = self.m
        start, join_end, done = opened.started_at_ms, opened.join_completed_at_ms, opened.completed_at_ms

        def seconds(a: Optional[int], b: Optional[int]) -> Optional[float]:
            return None if a is None or b is None else round((b - a) / 1000.0, 3)

        total = seconds(start, done)
        if outcome == "empty" and total is None:
            # ended when the group emptied (classic: the "is now empty" line = join_end;
            # KIP-848: no join phase, the record that emptied it = ended_at_ms)
            total = seconds(start, join_end if join_end is not None else ended_at_ms)
        record = {
            "cluster": m.cluster, "group": m.group, "protocol": opened.protocol,
            "generation": opened.generation, "previous_generation": opened.previous_generation,
            "coordinator": opened.coordinator, "started_at_ms": start,
            "join_completed_at_ms": join_end, "completed_at_ms": done,
            "ended_at_ms": ended_at_ms,
            "join_seconds": seconds(start, join_end), "sync_seconds": seconds(join_end, done),
            "total_seconds": total, "trigger": opened.trigger,
            "trigger_member": opened.trigger_member, "reason_text": opened.reason_text,
            "outcome": outcome, "members": members, "removed_members": list(opened.removals),
        }
        record.update(self._slow_rebalance_fields(opened, record))
        self.outputs.append((OUT_REBALANCE, record))
        m.rebalances_total += 1
        if opened.generation is not None:
            prior = m.last_emitted_generation
            m.last_emitted_generation = opened.generation if prior is None else max(prior, opened.generation)
        if m.open_rebalance is opened:
            m.open_rebalance = None

    def _slow_rebalance_fields(self, o: OpenRebalance, record: dict[str, Any]) -> dict[str, Any]:
        return slow_rebalance_fields(
            o.protocol, o.previous_generation, o.timeout_removals,
            [mm.rebalance_timeout_ms for mm in self.m.members.values()] + [o.max_rebalance_timeout_ms],
            record["join_seconds"])

    def _flush_pending_completion(self, now_ms: int, closing_event: Optional[E.Event] = None) -> None:
        """Emit a Stable-completed classic rebalance still waiting for its metadata record."""
        o = self.m.open_rebalance
        if o is None or o.completed_at_ms is None:
            return
        due = now_ms > o.completed_at_ms + METADATA_GRACE_MS
        if closing_event is not None and not due:
            # Anything but that generation's metadata record closes the wait as well.
            due = not (closing_event.kind == E.GROUP_METADATA
                       and closing_event.generation == o.generation) \
                and closing_event.kind not in (E.OFFSET_COMMIT, E.OFFSET_TOMBSTONE,
                                               E.ASSIGNMENT_RECEIVED)
        if due:
            self._emit_rebalance(o, "stable", o.completed_at_ms, len(self.m.members) or None)

    def _close_open_as(self, outcome: str, ev: E.Event) -> None:
        o = self.m.open_rebalance
        if o is None:
            return
        members = 0 if outcome in ("empty", "dead") else (len(self.m.members) or None)
        self._emit_rebalance(o, outcome, ev.ts_ms, members)

    def _reconcile_membership(self, o: Optional[OpenRebalance], previous: dict[str, Member],
                              new_ids: list[str], ev: E.Event) -> None:
        """A classic generation completed: account for members that changed without a line.

        Kafka 1.1-2.1 logs a LeaveGroup only at DEBUG and no reason on "Preparing to rebalance";
        before 2.7 members that miss the JOIN phase are dropped silently. So a member of the
        previous generation that is absent from the new one and was not removed by any line is
        removed here (cause leave_group, or rebalance_timeout when the JOIN phase lasted its
        rebalance timeout), and a rebalance without a reason gets the trigger the membership
        change shows: member_leave if someone left, else member_join if someone new is in.
        Only when `previous` is the member list of the generation this rebalance started from.
        """
        m = self.m
        if o is None or o.protocol != PROTOCOL_CLASSIC or o.previous_generation is None:
            return
        if m.members_generation != o.previous_generation \
                and not (o.previous_generation == 0 and not previous):   # a new group has no members
            return
        current = set(new_ids)
        join_ms = None if o.started_at_ms is None or o.join_completed_at_ms is None \
            else o.join_completed_at_ms - o.started_at_ms
        leavers = []
        for member_id in sorted(mid for mid in previous if mid not in current):
            known = previous[member_id]
            timeout = known.rebalance_timeout_ms
            timed_out = join_ms is not None and bool(timeout) and join_ms >= REBALANCE_TIMEOUT_SHARE * timeout
            cause = "rebalance_timeout" if timed_out else "leave_group"
            at_ms = o.join_completed_at_ms if timed_out else o.started_at_ms
            if at_ms is None:
                at_ms = ev.ts_ms
            template = INFERRED_TIMEOUT if timed_out else INFERRED_LEAVE
            record = self._removal_record(member_id, known, cause, ev, at_ms, o.previous_generation,
                                          evidence=template.format(prev=o.previous_generation, gen=o.generation))
            self._hold_removal(record, known)
            m.removals_total += 1
            self._note_removal_in(o, member_id, known, cause)
            if not timed_out:
                leavers.append(member_id)
        if o.trigger == "unknown" and o.reason_text is None:
            joined = [mid for mid in new_ids if mid not in previous and mid not in o.removals]
            if m.leader in joined:
                # The first member to join a group becomes its leader: into a group without
                # members, that is the member whose JoinGroup started the rebalance.
                joined.remove(m.leader)
                joined.insert(0, m.leader)
            if leavers:
                o.trigger, o.trigger_member = "member_leave", o.trigger_member or leavers[0]
            elif joined:
                o.trigger, o.trigger_member = "member_join", o.trigger_member or joined[0]

    # ------------------------------------------------------------------ classic handlers
    def on_member_created(self, ev: E.Event) -> None:
        if not ev.member_id:
            return
        m = self.m
        m.recent_joins = [j for j in m.recent_joins if ev.ts_ms - j[1] <= REMOVAL_ATTACH_WINDOW_MS]
        m.recent_joins.append([ev.member_id, ev.ts_ms])
        self._observe_join(ev.member_id, None, None, ev.ts_ms)

    def on_prepare(self, ev: E.Event) -> None:
        m = self.m
        self._reincarnate_if_dead(ev)
        if m.protocol == PROTOCOL_CONSUMER:
            # Downgrade to classic: the consumer epoch ends, the classic rebalance starts.
            self._close_open_as("superseded", ev)
            m.protocol = PROTOCOL_CLASSIC
            m.state = STABLE
        o = m.open_rebalance
        if o is not None:
            self._close_open_as("superseded", ev)
        self._transition(PREPARING_REBALANCE, ev)
        if ev.generation is not None:
            m.generation = ev.generation
        trigger = ev.data.get("trigger") or "unknown"
        reason = ev.reason or ""
        if reason.startswith("Downgrade group"):
            trigger = "unknown"   # caused by the consumer member that just left (attached below)
        self._open(ev, PROTOCOL_CLASSIC, ev.generation, trigger, ev.data.get("trigger_member"),
                   ev.reason, ev.ts_ms)
        if trigger == "member_join" and ev.data.get("trigger_member"):
            self._observe_join(ev.data["trigger_member"], None, None, ev.ts_ms)

    def on_join_complete(self, ev: E.Event) -> None:
        m = self.m
        if m.open_rebalance is None:
            self._open(ev, PROTOCOL_CLASSIC, (ev.generation or 1) - 1, "unknown", None, None, None)
        self._transition(COMPLETING_REBALANCE, ev)
        m.generation = ev.generation
        m.open_rebalance.generation = ev.generation
        m.open_rebalance.join_completed_at_ms = ev.ts_ms

    def on_group_empty(self, ev: E.Event) -> None:
        m = self.m
        if m.state == EMPTY and ev.generation is not None and m.last_emitted_generation is not None \
                and ev.generation <= m.last_emitted_generation:
            return   # the empty GroupMetadata record of this generation came first
        if m.open_rebalance is None:
            self._open(ev, PROTOCOL_CLASSIC, (ev.generation or 1) - 1, "unknown", None, None, None)
        self._transition(EMPTY, ev)
        m.generation = ev.generation
        o = m.open_rebalance
        o.generation = ev.generation
        o.join_completed_at_ms = ev.ts_ms
        self._reconcile_membership(o, m.members, [], ev)
        m.members.clear()
        m.members_generation = ev.generation
        m.leader = None
        self._emit_rebalance(o, "empty", ev.ts_ms, 0)

    def on_assignment_received(self, ev: E.Event) -> None:
        m = self.m
        if ev.member_id:
            m.leader = ev.member_id
        o = m.open_rebalance
        if m.state == STABLE and m.generation == ev.generation:
            return  # the metadata record came first
        if o is None or m.state != COMPLETING_REBALANCE or m.generation != ev.generation:
            if m.last_emitted_generation is not None and ev.generation is not None \
                    and ev.generation <= m.last_emitted_generation:
                return
            o = o or self._open(ev, PROTOCOL_CLASSIC, (ev.generation or 1) - 1, "unknown",
                                None, None, None)
            o.generation = ev.generation
            m.generation = ev.generation
        self._transition(STABLE, ev)
        o.completed_at_ms = ev.ts_ms
        if ev.data.get("members") is not None:
            # Kafka 2.8+ says how many members: nothing to wait for.
            self._emit_rebalance(o, "stable", ev.ts_ms, ev.data["members"])

    def on_group_metadata(self, ev: E.Event) -> None:
        m = self.m
        d = ev.data
        members = d.get("members") or []
        gen = ev.generation
        if gen == 0 and not members:
            # Java coordinator: an empty record when the group is created.
            if m.state in (UNKNOWN, DEAD):
                self._reincarnate_if_dead(ev)
                self._set_state(EMPTY, ev.ts_ms)
                m.generation = 0
            return
        self._reincarnate_if_dead(ev)
        if m.protocol == PROTOCOL_CONSUMER and m.open_rebalance is not None \
                and m.open_rebalance.protocol == PROTOCOL_CONSUMER:
            self._close_open_as("superseded", ev)
        m.protocol = PROTOCOL_CLASSIC
        if d.get("protocol_type") is not None:
            m.protocol_type = d["protocol_type"]
        m.selected_protocol = d.get("protocol")
        m.leader = d.get("leader")
        new_members: dict[str, Member] = {}
        for raw in members:
            mid = raw.get("member_id")
            if not mid:
                continue
            new_members[mid] = Member(
                member_id=mid, client_id=raw.get("client_id"), client_host=raw.get("client_host"),
                group_instance_id=raw.get("group_instance_id"),
                session_timeout_ms=raw.get("session_timeout_ms"),
                rebalance_timeout_ms=raw.get("rebalance_timeout_ms"), partitions=raw.get("partitions"),
            )
        for mid, mm in new_members.items():
            if mid not in m.members:
                self._observe_join(mid, mm.client_id, mm.client_host, ev.ts_ms)
        previous, previous_generation = m.members, m.members_generation
        m.members = new_members
        m.members_generation = gen
        o = m.open_rebalance

        def reconcile() -> None:
            m.members_generation = previous_generation
            self._reconcile_membership(o, previous, list(new_members), ev)
            m.members_generation = gen

        if o is not None and o.generation == gen and o.completed_at_ms is not None:
            reconcile()
            self._emit_rebalance(o, "stable", o.completed_at_ms, len(new_members))
            return
        already = m.last_emitted_generation is not None and gen is not None \
            and gen <= m.last_emitted_generation
        if not members:
            if m.state == EMPTY and m.generation == gen:
                return
            if o is not None and m.state == PREPARING_REBALANCE:
                # The "is now empty" line is missing: the record ends the rebalance.
                self._transition(EMPTY, ev)
                m.generation = gen
                o.generation = gen
                o.join_completed_at_ms = ev.ts_ms
                reconcile()
                self._emit_rebalance(o, "empty", ev.ts_ms, 0)
                return
            # Stable -> (PreparingRebalance) -> Empty: offsets-only input never sees the middle
            # state, as for the Stable -> Stable case below; not an invalid transition.
            self._set_state(EMPTY, ev.ts_ms) if m.state in (UNKNOWN, DEAD, STABLE) \
                else self._transition(EMPTY, ev)
            if not already and gen is not None and (m.generation is None or gen > m.generation):
                if o is not None:
                    self._close_open_as("superseded", ev)
                o = self._open(ev, PROTOCOL_CLASSIC, m.generation, "unknown", None, None, None, gen)
                o.join_completed_at_ms = ev.ts_ms
                self._emit_rebalance(o, "empty", ev.ts_ms, 0)
            m.generation = gen
            return
        if o is not None and m.state == COMPLETING_REBALANCE and m.generation == gen:
            # "Assignment received" is missing: the record is when the group became Stable.
            self._transition(STABLE, ev)
            o.completed_at_ms = ev.ts_ms
            reconcile()
            self._emit_rebalance(o, "stable", ev.ts_ms, len(new_members))
            return
        if m.state == STABLE and m.generation == gen:
            return  # static member replacement rewrites the record without a rebalance
        if already:
            m.generation = gen
            return
        # No log evidence for this generation (offsets topic only, or lines missed).
        if o is not None:
            self._close_open_as("superseded", ev)
        if m.state in (UNKNOWN, DEAD, EMPTY, STABLE):
            self._set_state(STABLE, ev.ts_ms)
        else:
            self._transition(STABLE, ev)
        o = self._open(ev, PROTOCOL_CLASSIC, m.generation, "unknown", None, None, None, gen)
        o.completed_at_ms = ev.ts_ms
        m.generation = gen
        self._emit_rebalance(o, "stable", ev.ts_ms, len(new_members))

    def on_member_failed(self, ev: E.Event) -> None:
        if ev.member_id:
            self._remove_member(ev.member_id, "heartbeat_expiry", ev)

    def on_member_left(self, ev: E.Event) -> None:
        if not ev.member_id:
            return
        client_reason = ev.data.get("client_reason")
        cause = "poll_timeout" if client_reason and "poll timeout" in client_reason.lower() else "leave_group"
        self._remove_member(ev.member_id, cause, ev, client_reason)

    def on_pending_member_expired(self, ev: E.Event) -> None:
        if ev.member_id:
            self._remove_member(ev.member_id, "pending_member_timeout", ev)

    def on_members_not_joined(self, ev: E.Event) -> None:
        for member_id in ev.data.get("member_ids") or []:
            self._remove_member(member_id, "rebalance_timeout", ev)

    def on_members_not_synced(self, ev: E.Event) -> None:
        for member_id in ev.data.get("member_ids") or []:
            self._remove_member(member_id, "sync_timeout", ev)

    def on_static_member_replaced(self, ev: E.Event) -> None:
        m = self.m
        old = ev.data.get("old_member_id")
        previous = m.members.get(old) if old else None
        if old:
            self._remove_member(old, "static_member_fenced", ev)
        if ev.member_id:
            replacement = Member(**asdict(previous)) if previous else Member(member_id=ev.member_id)
            replacement.member_id = ev.member_id
            replacement.group_instance_id = ev.data.get("group_instance_id") or replacement.group_instance_id
            m.members[ev.member_id] = replacement
            self._observe_join(ev.member_id, replacement.client_id, replacement.client_host, ev.ts_ms)

    def on_group_dead(self, ev: E.Event) -> None:
        m = self.m
        if m.state == DEAD:
            return
        self._close_open_as("dead", ev)
        # Sorted: the members dict comes back key-sorted from to_json/from_json (Spark state),
        # so insertion order would make the output depend on batch boundaries.
        for member_id in sorted(m.members):
            self._remove_member(member_id, "group_deleted", ev)
        if m.state == UNKNOWN:
            self._set_state(DEAD, ev.ts_ms)
        else:
            self._transition(DEAD, ev)

    def on_group_tombstone(self, ev: E.Event) -> None:
        m = self.m
        if m.protocol == PROTOCOL_CONSUMER and ev.kind == E.GROUP_TOMBSTONE:
            return  # classic -> consumer conversion deletes the classic record, not the group
        self.on_group_dead(ev)

    def on_group_unloaded(self, ev: E.Event) -> None:
        self._note_coordinator_move(ev)

    def _note_coordinator_move(self, ev: E.Event) -> None:
        if ev.source == E.SOURCE_LOG:
            self.m.coordinator_moves = (self.m.coordinator_moves + [ev.ts_ms])[-4:]

    def on_group_loaded(self, ev: E.Event) -> None:
        m = self.m
        self._note_coordinator_move(ev)
        if ev.generation is not None and m.generation is None:
            m.generation = ev.generation
        if m.open_rebalance is not None and m.open_rebalance.completed_at_ms is None \
                and m.protocol == PROTOCOL_CLASSIC:
            # A coordinator move aborts the join in progress; the new coordinator starts from
            # the last persisted generation.
            self._close_open_as("superseded", ev)
            loaded_members = ev.data.get("members")
            if loaded_members is not None:
                self._set_state(STABLE if loaded_members else EMPTY, ev.ts_ms)
        elif m.state == UNKNOWN and ev.data.get("members") is not None:
            self._set_state(STABLE if ev.data["members"] else EMPTY, ev.ts_ms)

    def on_offset_commit(self, ev: E.Event) -> None:
        m = self.m
        commit_ts = ev.data.get("commit_ts_ms") or ev.ts_ms
        m.last_commit_ms = commit_ts if m.last_commit_ms is None else max(m.last_commit_ms, commit_ts)
        m.commits_total += int(ev.data.get("count") or 1)
        if ev.data.get("topic") is not None and ev.data.get("partition") is not None:
            key = f"{ev.data['topic']}:{ev.data['partition']}"
            m.partition_commits[key] = max(m.partition_commits.get(key, commit_ts), commit_ts)

    def on_offset_tombstone(self, ev: E.Event) -> None:
        if ev.data.get("topic") is not None:
            self.m.partition_commits.pop(f"{ev.data['topic']}:{ev.data.get('partition')}", None)

    # ------------------------------------------------------------------ KIP-848 handlers
    def _note_consumer_trigger(self, trigger: str, member_id: Optional[str], ev: E.Event) -> None:
        if self.m.pending_consumer_trigger is None:
            self.m.pending_consumer_trigger = {"trigger": trigger, "member": member_id,
                                               "reason": ev.data.get("message") or ev.reason}

    def _become_consumer(self, ev: E.Event) -> None:
        m = self.m
        self._reincarnate_if_dead(ev)
        if m.protocol != PROTOCOL_CONSUMER:
            if m.open_rebalance is not None:
                self._close_open_as("superseded", ev)
            m.protocol = PROTOCOL_CONSUMER
            m.members = {k: v for k, v in m.members.items() if v.has_assignment_record}
            m.members_generation = None

    def on_consumer_member_joined(self, ev: E.Event) -> None:
        m = self.m
        self._become_consumer(ev)
        if ev.member_id and ev.member_id not in m.members:
            m.members[ev.member_id] = Member(member_id=ev.member_id,
                                             group_instance_id=ev.data.get("group_instance_id"))
        if ev.member_id:
            self._observe_join(ev.member_id, None, None, ev.ts_ms)
        self._note_consumer_trigger("member_join", ev.member_id, ev)

    def on_consumer_member_left(self, ev: E.Event) -> None:
        self._become_consumer(ev)
        if ev.member_id:
            self._remove_member(ev.member_id, "leave_group", ev)
            self._note_consumer_trigger("member_leave", ev.member_id, ev)

    def on_consumer_member_fenced(self, ev: E.Event) -> None:
        self._become_consumer(ev)
        reason = ev.data.get("fence_reason")
        cause = {"session": "heartbeat_expiry", "rebalance": "rebalance_timeout",
                 "join": "rebalance_timeout", "sync": "sync_timeout"}.get(reason, "heartbeat_expiry")
        if ev.member_id:
            self._remove_member(ev.member_id, cause, ev)
            self._note_consumer_trigger(_REMOVAL_CAUSE_TO_TRIGGER[cause], ev.member_id, ev)

    def _start_epoch(self, ev: E.Event, epoch: int) -> None:
        m = self.m
        self._become_consumer(ev)
        if m.open_rebalance is not None:
            self._close_open_as("superseded", ev)
        pending = m.pending_consumer_trigger or {}
        m.pending_consumer_trigger = None
        self._open(ev, PROTOCOL_CONSUMER, m.generation,
                            pending.get("trigger") or "group_epoch_bump", pending.get("member"),
                            pending.get("reason") or ev.reason, ev.ts_ms, generation=epoch)
        m.generation = epoch
        # Completion is decided by the member assignment records (type 8).
        self._set_state(ASSIGNING if m.members else EMPTY, ev.ts_ms)

    def on_group_epoch_bumped(self, ev: E.Event) -> None:
        m = self.m
        if ev.generation is None:
            return
        o = m.open_rebalance
        if m.protocol == PROTOCOL_CONSUMER and m.generation is not None and ev.generation <= m.generation:
            # The epoch record (type 3) sorted first and opened this epoch already: the log
            # line only brings an earlier start and the reason.
            if o is not None and o.protocol == PROTOCOL_CONSUMER and o.generation == ev.generation \
                    and o.started_at_ms is not None:
                o.started_at_ms = min(o.started_at_ms, ev.ts_ms)
            return
        self._start_epoch(ev, ev.generation)

    def on_target_assignment(self, ev: E.Event) -> None:
        m = self.m
        m.target_assignment_epoch = ev.generation
        if m.protocol == PROTOCOL_CONSUMER and m.members:
            self._set_state(RECONCILING, ev.ts_ms)

    def on_group_converted(self, ev: E.Event) -> None:
        m = self.m
        if ev.data.get("to") == PROTOCOL_CONSUMER:
            self._become_consumer(ev)
        elif ev.data.get("to") == PROTOCOL_CLASSIC and m.protocol == PROTOCOL_CONSUMER:
            self._close_open_as("superseded", ev)
            m.protocol = PROTOCOL_CLASSIC

    def on_cg_epoch(self, ev: E.Event) -> None:
        m = self.m
        if ev.data.get("tombstone"):
            if m.protocol == PROTOCOL_CONSUMER:
                self.on_group_dead(ev)
            return
        if ev.generation is None:
            return
        if m.protocol == PROTOCOL_CONSUMER and m.generation is not None and ev.generation <= m.generation:
            return
        if m.protocol == PROTOCOL_CLASSIC and m.state not in (UNKNOWN, DEAD) \
                and m.last_emitted_generation is not None:
            # Conversion writes an epoch record without a "Bumped" line; the next bump counts.
            self._become_consumer(ev)
            m.generation = ev.generation
            return
        self._start_epoch(ev, ev.generation)

    def on_cg_member(self, ev: E.Event) -> None:
        m = self.m
        if not ev.member_id:
            return
        if ev.data.get("tombstone"):
            return
        self._become_consumer(ev)
        member = m.members.get(ev.member_id) or Member(member_id=ev.member_id)
        member.client_id = ev.data.get("client_id", member.client_id)
        member.client_host = ev.data.get("client_host", member.client_host)
        member.group_instance_id = ev.data.get("instance_id", member.group_instance_id)
        member.rebalance_timeout_ms = ev.data.get("rebalance_timeout_ms", member.rebalance_timeout_ms)
        if ev.data.get("session_timeout_ms") is not None:
            member.session_timeout_ms = ev.data["session_timeout_ms"]
        m.members[ev.member_id] = member
        self._observe_join(ev.member_id, member.client_id, member.client_host, ev.ts_ms)

    def on_cg_target_epoch(self, ev: E.Event) -> None:
        if not ev.data.get("tombstone") and ev.generation is not None:
            self.m.target_assignment_epoch = ev.generation

    def on_cg_member_assignment(self, ev: E.Event) -> None:
        m = self.m
        if not ev.member_id:
            return
        if ev.data.get("tombstone"):
            m.members.pop(ev.member_id, None)
        else:
            self._become_consumer(ev)
            member = m.members.get(ev.member_id) or Member(member_id=ev.member_id)
            member.member_epoch = ev.data.get("member_epoch")
            member.member_state = ev.data.get("state")
            member.has_assignment_record = True
            m.members[ev.member_id] = member
        self._check_consumer_convergence(ev)

    def _check_consumer_convergence(self, ev: E.Event) -> None:
        m = self.m
        o = m.open_rebalance
        if o is None or o.protocol != PROTOCOL_CONSUMER or o.generation is None:
            return
        live = [mm for mm in m.members.values() if mm.has_assignment_record]
        if not live:
            if not m.members:
                self._set_state(EMPTY, ev.ts_ms)
                self._emit_rebalance(o, "empty", ev.ts_ms, 0)
            return
        if all(mm.member_epoch == o.generation and mm.member_state == MEMBER_STATE_STABLE for mm in live):
            o.completed_at_ms = ev.ts_ms
            self._set_state(STABLE, ev.ts_ms)
            self._emit_rebalance(o, "stable", ev.ts_ms, len(live))


_HANDLERS = {
    E.PREPARE_REBALANCE: GroupStateMachine.on_prepare,
    E.JOIN_COMPLETE: GroupStateMachine.on_join_complete,
    E.GROUP_EMPTY: GroupStateMachine.on_group_empty,
    E.MEMBER_CREATED: GroupStateMachine.on_member_created,
    E.ASSIGNMENT_RECEIVED: GroupStateMachine.on_assignment_received,
    E.GROUP_METADATA: GroupStateMachine.on_group_metadata,
    E.MEMBER_FAILED: GroupStateMachine.on_member_failed,
    E.MEMBER_LEFT: GroupStateMachine.on_member_left,
    E.PENDING_MEMBER_EXPIRED: GroupStateMachine.on_pending_member_expired,
    E.MEMBERS_NOT_JOINED: GroupStateMachine.on_members_not_joined,
    E.MEMBERS_NOT_SYNCED: GroupStateMachine.on_members_not_synced,
    E.STATIC_MEMBER_REPLACED: GroupStateMachine.on_static_member_replaced,
    E.GROUP_DEAD: GroupStateMachine.on_group_dead,
    E.GROUP_DELETED: GroupStateMachine.on_group_dead,
    E.GROUP_TOMBSTONE: GroupStateMachine.on_group_tombstone,
    E.GROUP_LOADED: GroupStateMachine.on_group_loaded,
    E.OFFSET_COMMIT: GroupStateMachine.on_offset_commit,
    E.OFFSET_TOMBSTONE: GroupStateMachine.on_offset_tombstone,
    E.GROUP_UNLOADED: GroupStateMachine.on_group_unloaded,
    E.CONSUMER_MEMBER_JOINED: GroupStateMachine.on_consumer_member_joined,
    E.CONSUMER_MEMBER_LEFT: GroupStateMachine.on_consumer_member_left,
    E.CONSUMER_MEMBER_FENCED: GroupStateMachine.on_consumer_member_fenced,
    E.GROUP_EPOCH_BUMPED: GroupStateMachine.on_group_epoch_bumped,
    E.TARGET_ASSIGNMENT: GroupStateMachine.on_target_assignment,
    E.GROUP_CONVERTED: GroupStateMachine.on_group_converted,
    E.CG_EPOCH: GroupStateMachine.on_cg_epoch,
    E.CG_MEMBER: GroupStateMachine.on_cg_member,
    E.CG_TARGET_EPOCH: GroupStateMachine.on_cg_target_epoch,
    E.CG_MEMBER_ASSIGNMENT: GroupStateMachine.on_cg_member_assignment,
}


def slow_rebalance_fields(protocol: str, previous_generation: Optional[int], timeout_removals: list[str],
                          timeouts: Iterable[Optional[int]], join_seconds: Optional[float]) -> dict[str, Any]:
    """waited_for_member / hit_rebalance_timeout / rebalance_timeout_ms / initial_delay_seconds of a
    rebalance record: `timeouts` are the rebalance timeouts known for the group's members (None
    where unknown); `join_seconds` is None while the JOIN phase is open."""
    timeout = max((t for t in timeouts if t), default=None)
    hit = bool(timeout_removals) or (
        protocol == PROTOCOL_CLASSIC and join_seconds is not None and timeout is not None
        and join_seconds * 1000 >= REBALANCE_TIMEOUT_SHARE * timeout)
    initial = None
    if protocol == PROTOCOL_CLASSIC and previous_generation == 0 and join_seconds is not None:
        # A new (Empty) group: the JOIN phase is group.initial.rebalance.delay.ms (extended while
        # members keep joining); there is no old member to wait for.
        initial = join_seconds
    return {"waited_for_member": timeout_removals[-1] if timeout_removals else None,
            "hit_rebalance_timeout": hit, "rebalance_timeout_ms": timeout,
            "initial_delay_seconds": initial}


def snapshot(model: GroupModel) -> dict[str, Any]:
    """The current state of one group (groups.jsonl row; gauges are computed from it)."""
    o = model.open_rebalance
    return {
        "cluster": model.cluster, "group": model.group, "protocol": model.protocol,
        "state": model.state, "generation": model.generation, "leader": model.leader,
        "protocol_type": model.protocol_type, "assignor": model.selected_protocol,
        "coordinator": model.coordinator, "state_since_ms": model.state_since_ms,
        "member_count": len(model.members),
        "members": [asdict(mm) for _, mm in sorted(model.members.items())],
        "rebalance_in_progress": None if o is None else asdict(o),
        "rebalances_total": model.rebalances_total, "removals_total": model.removals_total,
        "invalid_transitions": model.invalid_transitions,
        "last_commit_ms": model.last_commit_ms, "commits_total": model.commits_total,
        "last_event_ms": model.last_event_ms,
        "rebalance_timeout_ms": max((mm.rebalance_timeout_ms for mm in model.members.values()
                                     if mm.rebalance_timeout_ms), default=None),
        "recent_rebalance_starts_ms": list(model.rebalance_starts),
        "held_removals": len(model.held_removals),
    }
