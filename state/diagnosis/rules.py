"""Root-cause rules for member removals (pure Python, no Spark).

Two parts (rules and examples: docs/diagnosis.md):

* per group (`classify_in_group`, called by state/diagnosis/holding.py): a removal is held until event time
  passes `removed_at + decision window`, so that the group's later events can tell whether the
  same client came back (pause vs crash; poll timeout inferred from a quick rejoin after a leave);
* across groups (state/diagnosis/correlate.py): host-wide and coordinator-wide bursts override the
  crash/pause verdicts of the removals they explain.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from state.model import HeldRemoval
from state.vocabulary import Confidence, Protocol, RemovalCause, RootCause

ROOT_CAUSES = tuple(RootCause)
# How sure a root cause is (root_cause_confidence), with the reason in root_cause_confidence_reason.
CONFIDENCES = tuple(Confidence)


@dataclass(frozen=True)
class DiagnosisSettings:
    # An expired / session-fenced member whose client (client_id + client_host; KIP-848: the same
    # member id) joins again within this long after the removal was paused, not crashed.
    pause_rejoin_window_ms: int = 60_000
    # A LeaveGroup followed by a rejoin of the same client within
    # max(its rebalance_timeout_ms (= max.poll.interval.ms), this) is a poll timeout (inferred).
    poll_rejoin_min_window_ms: int = 60_000
    # host_wide: at least this many involuntary removals of members on one client host, across the
    # groups of a cluster, within the window (0: each removal's session timeout, 45 s if unknown)...
    host_wide_min_removals: int = 3
    host_wide_window_ms: int = 0
    # ... or at least two within this much of each other, when they were every member that host
    # had in their groups (members killed together expire within a heartbeat interval or so).
    host_wide_together_ms: int = 5_000
    # coordinator_wide: at least this many groups of one coordinator losing members involuntarily
    # within the window, the members on at least as many distinct hosts (else host_wide explains it);
    # or a load/unload of the group by its
    # coordinator within the window around the removal.
    coordinator_wide_min_groups: int = 3
    coordinator_wide_window_ms: int = 10_000
    # ... and at least this many times the groups of that coordinator that lose members in a window
    # of that length in the background: the rate over the baseline before the window (from its
    # first such removal on, if later). Independent expiries in a big fleet are not a burst.
    coordinator_wide_background_factor: float = 3.0
    coordinator_wide_baseline_ms: int = 600_000
    # A static member sends no LeaveGroup, so its commits tell its close from its crash: its last
    # commit before the removal came at most this fraction of its commit interval (the gap between
    # the two commits before it) after the one before: off its schedule, the commit a consumer
    # makes when it closes...
    close_commit_max_fraction: float = 0.5
    # ... at least this fraction: on schedule, and no commit on close: a crash. In between, or with
    # fewer than three commits of its partitions, the commits cannot tell.
    scheduled_commit_min_fraction: float = 0.8
    # A replaced static member's verdict waits this long for the commit packs that may still bring
    # its commits before the replacement (an expiry waits longer anyway).
    static_commit_window_ms: int = 15_000
    # Rebalance-storm gauge: rebalances started within this much event time.
    storm_window_ms: int = 600_000
    # A member expired or fenced whose client joined again within one heartbeat interval of its
    # removal never stopped: a live client learns of its removal at its next heartbeat and rejoins
    # at once, where a paused or crashed one comes back only when it runs again, if ever. The
    # classic clients' heartbeat.interval.ms (the brokers' records do not carry it; 3 s is the
    # clients' default) ...
    heartbeat_interval_ms: int = 3_000
    # ... and the brokers' group.{consumer,share,streams}.heartbeat.interval.ms (5 s by default)
    # for members of epoch-based groups.
    consumer_heartbeat_interval_ms: int = 5_000
    # The coordinator stall: a broker of the cluster died (its peers lost it, or it left the ISR of
    # __consumer_offsets partitions), and a coordinator whose partitions it followed could not
    # commit its writes until the dead replica was dropped (KRaft: the broker's session,
    # broker.session.timeout.ms; ZooKeeper: replica.lag.time.max.ms, 30 s), answering nothing
    # meanwhile (Kafka 4.x's coordinator runtime answers a request once the writes before it are
    # committed). Expiries within this long after the death may be the stall's ...
    broker_death_window_ms: int = 60_000
    # ... when members of at least this many groups of one coordinator expired within this much of
    # each other (or the member never stopped: it rejoined within a heartbeat interval).
    coordinator_stall_min_groups: int = 2
    coordinator_stall_together_ms: int = 5_000
    # How long such a stall can last after the death (ZooKeeper mode: replica.lag.time.max.ms, 30 s;
    # KRaft: the broker's session, 9 s): a member the stall removed learns of it only when its
    # coordinator answers again, so it is back by then plus one heartbeat interval. One back later
    # stopped on its own (a pause).
    coordinator_stall_max_ms: int = 30_000
    # The brokers' group.consumer.session.timeout.ms: a consumer-protocol (KIP-848) member's
    # records carry no session timeout, so a session fence counts its partitions from this long
    # before the fence (state/impact.py), and the host-wide window of such a removal is this long.
    consumer_session_timeout_ms: int = 45_000

    def alive_rejoin_ms(self, protocol: str | None) -> int:
        """How soon after its removal a member that never stopped is back (one heartbeat interval)."""
        if protocol in (None, Protocol.CLASSIC):
            return self.heartbeat_interval_ms
        return self.consumer_heartbeat_interval_ms

    def leave_window_ms(self, rebalance_timeout_ms: int | None) -> int:
        return max(rebalance_timeout_ms or 0, self.poll_rejoin_min_window_ms)

    def correlation_window_ms(self) -> int:
        """How far the cross-group rules look either side of a removal (upper bound)."""
        return max(self.host_wide_window_ms or self.consumer_session_timeout_ms, self.coordinator_wide_window_ms,
                   self.coordinator_stall_together_ms, MAX_SESSION_LOOKAROUND_MS)


# Classic session timeouts up to this are used as host_wide windows; longer ones are capped
# (the correlator must know how long to hold a removal).
MAX_SESSION_LOOKAROUND_MS = 60_000

DEFAULT_SETTINGS = DiagnosisSettings()


def _secs(ms: int | None) -> str:
    return "?" if ms is None else f"{ms / 1000:.1f} s"


# The session timeout of the members of an epoch-based group is the broker's (or the group's
# config), by type; the members carry none.
SESSION_SETTING: dict[str, str] = {Protocol.CONSUMER: "group.consumer.session.timeout.ms",
                                   Protocol.SHARE: "group.share.session.timeout.ms",
                                   Protocol.STREAMS: "group.streams.session.timeout.ms"}


def _session(rec: dict[str, Any]) -> str:
    """`its session timeout 6.0 s`; members of epoch-based groups carry none (the broker's
    group.<type>.session.timeout.ms applies)."""
    ms = rec.get("session_timeout_ms")
    setting = SESSION_SETTING.get(rec.get("protocol") or "")
    if ms is None and setting is not None:
        return f"the broker's {rec['protocol']} session timeout ({setting})"
    return f"its session timeout {_secs(ms)}"


# A removal record's field, present only on an expiry whose client came back within the pause
# window: the milliseconds from the removal to its return. Within one heartbeat interval it never
# stopped; the correlator's coordinator-stall rule reads when it was back (state/diagnosis/correlate.py).
REJOIN_FIELD = "rejoined_after_ms"

Verdict = tuple[str, str, str, str]    # root cause, evidence, confidence, the confidence's reason


def classify_in_group(rec: dict[str, Any], held: HeldRemoval, s: DiagnosisSettings) -> None:
    """Set cause / root_cause / its confidence / evidence of a held removal record at its decision
    time (group_root_cause keeps this verdict when the correlator overrides root_cause).

    `held` carries what the machine learned while holding it: the rejoin (rejoined_at_ms,
    same_member_id), the commit evidence (stalled, commit_text; commit_known: whether its
    partitions were known), coordinator_move_ms, poll_inferred.
    """
    if rec["cause"] == RemovalCause.LEAVE_GROUP and held.poll_inferred:
        rec["cause"] = RemovalCause.POLL_TIMEOUT
    rule = _RULES.get(rec["cause"])
    root, text, sure, why = (RootCause.UNKNOWN, "no rule matched", Confidence.LOW, "no rule matched") if rule is None \
        else rule(rec, held, s)
    prior = rec.get("evidence") or ""
    rec["root_cause"] = rec["group_root_cause"] = root
    rec["root_cause_confidence"], rec["root_cause_confidence_reason"] = sure, why
    rec["evidence"] = f"{prior}; {text}" if prior else text


def _who(rec: dict[str, Any]) -> str:
    return f"{rec.get('client_id') or rec['member_id']}@{rec.get('client_host') or '?'}"


def _gap(rec: dict[str, Any], held: HeldRemoval) -> int | None:
    rejoin = held.rejoined_at_ms
    return None if rejoin is None else rejoin - rec["removed_at_ms"]


def _poll_timeout(rec: dict[str, Any], held: HeldRemoval, s: DiagnosisSettings) -> Verdict:
    if not held.poll_inferred:
        return (RootCause.SLOW_PROCESSING, f"the client said so (reason: {rec.get('reason_text')!r}): processing "
                "between polls exceeded max.poll.interval.ms", Confidence.HIGH, "the client gave the reason")
    text = (f"{_who(rec)} sent LeaveGroup and the same client joined again {_secs(_gap(rec, held))} later, "
            f"within max(max.poll.interval.ms {_secs(rec.get('rebalance_timeout_ms'))}, "
            f"{_secs(s.poll_rejoin_min_window_ms)}); {held.commit_text}: poll timeout (inferred)")
    if held.commit_known:
        return (RootCause.SLOW_PROCESSING, text, Confidence.MEDIUM,
                "inferred: a quick rejoin, and no commit on its partitions while it stalled")
    return (RootCause.SLOW_PROCESSING, text, Confidence.LOW,
            "inferred from the quick rejoin alone: its partitions were not known")


def _timed_out(rec: dict[str, Any], held: HeldRemoval, s: DiagnosisSettings) -> Verdict:
    step = "rejoin" if rec["cause"] == RemovalCause.REBALANCE_TIMEOUT else "sync"
    return (RootCause.SLOW_PROCESSING, f"{_who(rec)} did not {step} within the rebalance timeout "
            f"{_secs(rec.get('rebalance_timeout_ms'))} (max.poll.interval.ms): still busy in processing between polls",
            Confidence.HIGH, "the broker removed it at the rebalance timeout")


def _left(rec: dict[str, Any], held: HeldRemoval, s: DiagnosisSettings) -> Verdict:
    text = f"{_who(rec)} sent LeaveGroup (consumer closed)"
    if held.rejoined_at_ms is None:
        return (RootCause.GRACEFUL_SHUTDOWN, text + " and did not come back", Confidence.HIGH,
                "the client sent LeaveGroup")
    text += (f"; the same client joined again {_secs(_gap(rec, held))} later but "
             f"{held.commit_text or 'no poll-timeout evidence'}: a restart")
    if (rec.get("reason_text") or "not provided") == "not provided":
        return (RootCause.GRACEFUL_SHUTDOWN, text, Confidence.MEDIUM,
                "a quick rejoin without a client reason: a restart, not a poll timeout, by the commit or poll evidence")
    return RootCause.GRACEFUL_SHUTDOWN, text, Confidence.HIGH, "the client sent LeaveGroup"


def _never_joined(rec: dict[str, Any], held: HeldRemoval, s: DiagnosisSettings) -> Verdict:
    return (RootCause.UNKNOWN, f"{_who(rec)} never completed its join", Confidence.LOW,
            "a join that never completed says nothing of the client")


def _static_replaced(rec: dict[str, Any], held: HeldRemoval, s: DiagnosisSettings) -> Verdict:
    text = (f"static member {rec.get('group_instance_id')} was replaced by a new instance with the same "
            "group.instance.id (static members send no LeaveGroup)")
    return _static_stop(text, held, "a restart", "a crash followed by a quick restart is replaced the same way")


def _static_stop(text: str, held: HeldRemoval, planned: str, unsure: str) -> Verdict:
    """A static member's stop (replaced, or expired): its commits tell a close from a crash."""
    if held.closed is True:
        return (RootCause.GRACEFUL_SHUTDOWN, f"{text}; {held.commit_text}: {planned}", Confidence.MEDIUM,
                "its last commit came off its commit schedule, as a consumer commits when it closes")
    if held.closed is False:
        return (RootCause.PROCESS_CRASH, f"{text}; {held.commit_text}: the process died", Confidence.LOW,
                "its commits stopped on their schedule with no commit on close; a consumer that commits only "
                "changed offsets (librdkafka) with nothing new, or that does not commit when it closes, looks "
                "the same")
    evidence = f"; {held.commit_text}" if held.commit_text else ""
    return (RootCause.GRACEFUL_SHUTDOWN, f"{text}{evidence}: {planned} or a crash, the commits cannot tell",
            Confidence.LOW,
            f"graceful_shutdown or process_crash: {unsure}, and its commits do not tell them apart; "
            "graceful_shutdown because static membership is there for planned restarts, not because "
            "this record shows one")


def _deleted(rec: dict[str, Any], held: HeldRemoval, s: DiagnosisSettings) -> Verdict:
    return RootCause.UNKNOWN, "the group was deleted or its offsets expired", Confidence.HIGH, "the group itself ended"


def _expired(rec: dict[str, Any], held: HeldRemoval, s: DiagnosisSettings) -> Verdict:
    who, gap = _who(rec), _gap(rec, held)
    if rec.get("group_instance_id") is not None:
        return _static_stop(f"static member {rec.get('group_instance_id')} ({who}) expired after its session timeout "
                            f"{_secs(rec.get('session_timeout_ms'))} (static members send no LeaveGroup on close)",
                            held, "a stop", "a static member's stop and its crash both end in a session expiry")
    move = held.coordinator_move_ms
    if gap is not None and gap <= s.pause_rejoin_window_ms:
        rec[REJOIN_FIELD] = gap
    # back within one heartbeat interval: it never stopped, not a crash or a pause, whatever else explains it
    alive = gap is not None and gap <= s.alive_rejoin_ms(rec.get("protocol"))
    if move is not None:
        moved = (f"{who} expired {_secs(abs(move - rec['removed_at_ms']))} "
                 f"{'after' if move <= rec['removed_at_ms'] else 'before'} its coordinator loaded/unloaded the group")
        if held.expired_with_others:
            return (RootCause.COORDINATOR_WIDE, f"{moved}, with other members of the group", Confidence.MEDIUM,
                    "the coordinator moved the group as several of its members expired")
        return (RootCause.COORDINATOR_WIDE, f"{moved}, and came back {_secs(gap)} after its removal: it never stopped",
                Confidence.MEDIUM, "the coordinator moved the group as it expired a member that never stopped")
    if alive:
        back = "with the same member id" if held.same_member_id else "(the same client id and host)"
        return (RootCause.UNKNOWN, f"{who} was removed after {_session(rec)} without heartbeats, yet came back {back} "
                f"{_secs(gap)} later, within one heartbeat interval "
                f"({_secs(s.alive_rejoin_ms(rec.get('protocol')))}): it never stopped; its heartbeats did not "
                "reach the coordinator or went unanswered (a coordinator stall, a network fault)", Confidence.LOW,
                "a member that never stopped is no crash or pause; neither a broker's death nor a coordinator "
                "move explains it, and the record cannot tell a stalled coordinator from a network fault "
                "(a process resumed within a heartbeat of its expiry looks the same)")
    if gap is not None and gap <= s.pause_rejoin_window_ms:
        same = "with the same member id" if held.same_member_id else "with a new member id"
        text = (f"{who} missed heartbeats for {_session(rec)} and came back {same} {_secs(gap)} later "
                f"(within {_secs(s.pause_rejoin_window_ms)}): the process froze and resumed")
        if held.same_member_id:
            return RootCause.PROCESS_PAUSE, text, Confidence.HIGH, "the same member came back"
        return (RootCause.PROCESS_PAUSE, text, Confidence.MEDIUM,
                "the same client id and host came back with a new member id (a fast restart looks the same)")
    text = (f"{who} missed heartbeats for {_session(rec)} and did not come back within "
            f"{_secs(s.pause_rejoin_window_ms)}: the process died")
    if rec.get("protocol") == Protocol.STREAMS:
        # Kafka Streams stays in the group when it closes (KIP-1092's default): a stop and a crash
        # both end in a session expiry.
        return (RootCause.PROCESS_CRASH,
                text + "; Kafka Streams instances do not leave the group when they close, so it may have stopped",
                Confidence.LOW, "a Kafka Streams instance does not leave when it closes: a stop looks the same")
    return (RootCause.PROCESS_CRASH, text, Confidence.MEDIUM,
            "it did not come back; a longer freeze or a lost host looks the same")


_RULES = {RemovalCause.POLL_TIMEOUT: _poll_timeout, RemovalCause.REBALANCE_TIMEOUT: _timed_out,
          RemovalCause.SYNC_TIMEOUT: _timed_out, RemovalCause.LEAVE_GROUP: _left,
          RemovalCause.PENDING_MEMBER_TIMEOUT: _never_joined, RemovalCause.STATIC_MEMBER_FENCED: _static_replaced,
          RemovalCause.GROUP_DELETED: _deleted, RemovalCause.HEARTBEAT_EXPIRY: _expired}


def decision_window_ms(rec: dict[str, Any], s: DiagnosisSettings) -> int:
    """How long after the removal the group's own events may still change its verdict."""
    if rec["cause"] == RemovalCause.LEAVE_GROUP:
        return s.leave_window_ms(rec.get("rebalance_timeout_ms"))
    if rec["cause"] == RemovalCause.STATIC_MEMBER_FENCED:
        # Its commits before the removal may come packed with later ones (holding.note_commit_times).
        return s.static_commit_window_ms
    if rec["cause"] == RemovalCause.HEARTBEAT_EXPIRY:
        return max(s.pause_rejoin_window_ms, s.coordinator_wide_window_ms)
    return 0
