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

ROOT_CAUSES = ("process_crash", "process_pause", "slow_processing", "graceful_shutdown",
               "host_wide", "coordinator_wide", "unknown")


@dataclass(frozen=True)
class DiagnosisSettings:
    # An expired / session-fenced member whose client (client_id + client_host; KIP-848: the same
    # member id) joins again within this long after the removal was paused, not crashed.
    pause_rejoin_window_ms: int = 60_000
    # A LeaveGroup followed by a rejoin of the same client within
    # max(its rebalance_timeout_ms (= max.poll.interval.ms), this) is a poll timeout (inferred).
    poll_rejoin_min_window_ms: int = 60_000
    # host_wide: at least this many involuntary removals of members on one client host, across the
    # groups of a cluster, within the window (0: each removal's session timeout, 45 s if unknown).
    host_wide_min_removals: int = 3
    host_wide_window_ms: int = 0
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
    # Rebalance-storm gauge: rebalances started within this much event time.
    storm_window_ms: int = 600_000
    # The brokers' group.consumer.session.timeout.ms: a consumer-protocol (KIP-848) member's
    # records carry no session timeout, so a session fence counts its partitions from this long
    # before the fence (state/impact.py), and the host-wide window of such a removal is this long.
    consumer_session_timeout_ms: int = 45_000

    def leave_window_ms(self, rebalance_timeout_ms: int | None) -> int:
        return max(rebalance_timeout_ms or 0, self.poll_rejoin_min_window_ms)

    def correlation_window_ms(self) -> int:
        """How far the cross-group rules look either side of a removal (upper bound)."""
        return max(self.host_wide_window_ms or self.consumer_session_timeout_ms, self.coordinator_wide_window_ms,
                   MAX_SESSION_LOOKAROUND_MS)


# Classic session timeouts up to this are used as host_wide windows; longer ones are capped
# (the correlator must know how long to hold a removal).
MAX_SESSION_LOOKAROUND_MS = 60_000

DEFAULT_SETTINGS = DiagnosisSettings()


def _secs(ms: int | None) -> str:
    return "?" if ms is None else f"{ms / 1000:.1f} s"


# The session timeout of the members of an epoch-based group is the broker's (or the group's
# config), by type; the members carry none.
SESSION_SETTING = {"consumer": "group.consumer.session.timeout.ms", "share": "group.share.session.timeout.ms",
                   "streams": "group.streams.session.timeout.ms"}


def _session(rec: dict[str, Any]) -> str:
    """`its session timeout 6.0 s`; members of epoch-based groups carry none (the broker's
    group.<type>.session.timeout.ms applies)."""
    ms = rec.get("session_timeout_ms")
    setting = SESSION_SETTING.get(rec.get("protocol") or "")
    if ms is None and setting is not None:
        return f"the broker's {rec['protocol']} session timeout ({setting})"
    return f"its session timeout {_secs(ms)}"


def classify_in_group(rec: dict[str, Any], held: dict[str, Any], s: DiagnosisSettings) -> None:
    """Set cause / root_cause / evidence of a held removal record at its decision time.

    `held` carries what the machine learned while holding it: rejoined_at_ms, rejoin_member,
    commit evidence (stall_commit_ms: newest commit on its partitions before the leave;
    commit_known: whether its partitions were known), coordinator_move_ms.
    """
    cause = rec["cause"]
    static = rec.get("group_instance_id") is not None
    rejoin = held.get("rejoined_at_ms")
    gap = None if rejoin is None else rejoin - rec["removed_at_ms"]
    who = rec.get("client_id") or rec["member_id"]
    host = rec.get("client_host") or "?"
    prior = rec.get("evidence") or ""
    text: str
    root = "unknown"
    if cause == "leave_group" and held.get("poll_inferred"):
        rec["cause"] = cause = "poll_timeout"
    if cause == "poll_timeout":
        root = "slow_processing"
        if held.get("poll_inferred"):
            text = (f"{who}@{host} sent LeaveGroup and the same client joined again {_secs(gap)} later, "
                    f"within max(max.poll.interval.ms {_secs(rec.get('rebalance_timeout_ms'))}, "
                    f"{_secs(s.poll_rejoin_min_window_ms)}); {held.get('commit_text')}: poll timeout (inferred)")
        else:
            text = (f"the client said so (reason: {rec.get('reason_text')!r}): processing between polls exceeded "
                    "max.poll.interval.ms")
    elif cause in ("rebalance_timeout", "sync_timeout"):
        root = "slow_processing"
        text = (f"{who}@{host} did not {'rejoin' if cause == 'rebalance_timeout' else 'sync'} within the "
                f"rebalance timeout {_secs(rec.get('rebalance_timeout_ms'))} (max.poll.interval.ms): "
                "still busy in processing between polls")
    elif cause in ("leave_group", "pending_member_timeout"):
        root = "graceful_shutdown"
        text = f"{who}@{host} sent LeaveGroup (consumer closed)"
        if cause == "pending_member_timeout":
            root, text = "unknown", f"{who}@{host} never completed its join"
        elif rejoin is not None:
            text += (f"; the same client joined again {_secs(gap)} later but "
                     f"{held.get('commit_text') or 'no poll-timeout evidence'}: a restart")
        else:
            text += " and did not come back"
    elif cause == "static_member_fenced":
        root = "graceful_shutdown"
        text = (f"static member {rec.get('group_instance_id')} was replaced by a new instance with the same "
                "group.instance.id: a restart (static members send no LeaveGroup)")
    elif cause == "group_deleted":
        root, text = "unknown", "the group was deleted or its offsets expired"
    elif cause == "heartbeat_expiry":
        if static:
            root = "graceful_shutdown"
            text = (f"static member {rec.get('group_instance_id')} ({who}@{host}) expired after its session "
                    f"timeout {_secs(rec.get('session_timeout_ms'))}: static members send no LeaveGroup on "
                    "close, so a stop looks like this")
        elif held.get("coordinator_move_ms") is not None:
            root = "coordinator_wide"
            text = (f"{who}@{host} expired {_secs(abs(held['coordinator_move_ms'] - rec['removed_at_ms']))} "
                    f"{'after' if held['coordinator_move_ms'] <= rec['removed_at_ms'] else 'before'} its "
                    "coordinator loaded/unloaded the group, with other members of the group")
        elif rejoin is not None and gap is not None and gap <= s.pause_rejoin_window_ms:
            root = "process_pause"
            same = "with the same member id" if held.get("same_member_id") else "with a new member id"
            text = (f"{who}@{host} missed heartbeats for {_session(rec)} and came back {same} {_secs(gap)} later "
                    f"(within {_secs(s.pause_rejoin_window_ms)}): the process froze and resumed")
        elif rec.get("protocol") == "streams":
            # Kafka Streams stays in the group when it closes (KIP-1092's default): a stop and a
            # crash both end in a session expiry, and nothing the broker records tells them apart.
            root = "unknown"
            text = (f"{who}@{host} missed heartbeats for {_session(rec)} and did not come back within "
                    f"{_secs(s.pause_rejoin_window_ms)}: Kafka Streams instances do not leave the group when "
                    "they close, so this is a stop or a crash")
        else:
            root = "process_crash"
            text = (f"{who}@{host} missed heartbeats for {_session(rec)} and did not come back within "
                    f"{_secs(s.pause_rejoin_window_ms)}: the process died")
    else:
        text = "no rule matched"
    rec["root_cause"] = root
    rec["evidence"] = f"{prior}; {text}" if prior else text


def decision_window_ms(rec: dict[str, Any], s: DiagnosisSettings) -> int:
    """How long after the removal the group's own events may still change its verdict."""
    if rec["cause"] == "leave_group":
        return s.leave_window_ms(rec.get("rebalance_timeout_ms"))
    if rec["cause"] == "heartbeat_expiry":
        return max(s.pause_rejoin_window_ms, s.coordinator_wide_window_ms)
    return 0
