"""Incidents: what on-call is paged for, one per cause, not one per group (pure Python).

A removal record is final about two minutes after the removal (docs/diagnosis.md, "When a removal
is decided"): too late for a page. The incident board reads the same evidence as it arrives, from
the live view of each group (its pending removals, its coordinator), the removals the correlator
holds and the decided ones, and the brokers' deaths (state/diagnosis/brokers.py), and names the
incidents they make now:

| kind | subject | root_cause | when |
|---|---|---|---|
| broker | the broker id | broker_death | a broker died (its peers lost it, no controlled shutdown of its own) |
| host | the client host | host_wide | involuntary removals of members of one host across groups (below) |
| slow_processing | the group | slow_processing | a member left because its poll timed out (max.poll.interval.ms) |
| rebalance_timeout | the group | slow_processing | a member did not rejoin within the rebalance timeout |
| crash_loop | the group | process_crash | one client of a group removed involuntarily again and again |

An incident's groups are those that lost members to it; a broker's also those it coordinated
when it died. Removals within the broker-death window after a death are the broker's (its
coordinator stall, or members of groups it coordinated); no host or crash-loop incident counts
them. An incident is active until event time passes its last evidence by `hold_ms`: it stays
long enough to explain (and silence) the per-group removal alerts of its removals, which count
decided records.

The host rule is the correlator's (state/diagnosis/correlate.py) without its wait: at least
`host_wide_min_removals` distinct members of one host removed within the host window, or at least
two within `host_wide_together_ms` that were every member the host had in their groups; never when
more of the host's members in those groups stayed than went. The final root causes of its removals
come later and may differ; the incident says what the evidence said when it was paged.

Incident ids carry their start (`broker-2@2026-12-02T13:45:01Z`): a second death of the same
broker is a new incident, the same one recomputed keeps its id.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from state import events as E
from state.diagnosis.brokers import BrokerDeath
from state.diagnosis.rules import DEFAULT_SETTINGS, MAX_SESSION_LOOKAROUND_MS, DiagnosisSettings
from state.vocabulary import GroupState, RemovalCause, RootCause

KINDS = ("broker", "host", "slow_processing", "rebalance_timeout", "crash_loop")
# An incident's root cause: a word of RootCause, or broker_death (an incident's own: the removals'
# brokers died, state/diagnosis/brokers.py).
ROOT_CAUSE_OF_KIND = {"broker": "broker_death", "host": RootCause.HOST_WIDE,
                      "slow_processing": RootCause.SLOW_PROCESSING, "rebalance_timeout": RootCause.SLOW_PROCESSING,
                      "crash_loop": RootCause.PROCESS_CRASH}
INVOLUNTARY = (RemovalCause.HEARTBEAT_EXPIRY,)
# Watermarks this close to the end-of-input marker come from it (minus the lateness), not from events.
_END_OF_INPUT_SPAN_MS = 365 * 86_400_000
# A removal whose decided root cause is one of these was no crash, pause or host fault.
NOT_A_FAULT = (RootCause.GRACEFUL_SHUTDOWN, RootCause.SLOW_PROCESSING)


@dataclass(frozen=True)
class IncidentSettings:
    # An incident stays active this long (event time) after its last evidence; longer than the
    # per-group removal alerts' window plus a removal's decision delay, so that those alerts of
    # its removals are silenced for as long as they would fire.
    hold_ms: int = 900_000
    # crash_loop: one client of a group removed involuntarily at least this often within the window.
    crash_loop_min_removals: int = 3
    crash_loop_window_ms: int = 600_000


DEFAULT_INCIDENT_SETTINGS = IncidentSettings()


@dataclass(frozen=True)
class Removal:
    """What the board needs of a removal, pending or decided."""
    cluster: str
    group: str
    member_id: str
    removed_at_ms: int
    cause: str
    client_id: str | None = None
    client_host: str | None = None
    group_instance_id: str | None = None
    session_timeout_ms: int | None = None
    root_cause: str | None = None      # None: pending
    host_members: int | None = None    # the group's members on its host when it went, itself included

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.cluster, self.group, self.member_id, self.removed_at_ms)

    @property
    def client(self) -> tuple[str, str]:
        """The client across restarts: classic members get a new member id when they come back."""
        return (self.group, self.client_id or self.group_instance_id or self.member_id)

    @classmethod
    def of(cls, cluster: str, group: str, r: dict[str, Any], decided: bool) -> Removal:
        return cls(cluster, group, str(r.get("member_id") or r.get("client_id")), int(r["removed_at_ms"]),
                   str(r.get("cause")),
                   r.get("client_id"), r.get("client_host"), r.get("group_instance_id"),
                   r.get("session_timeout_ms"), r.get("root_cause") if decided else None, r.get("host_members"))


@dataclass
class Incident:
    cluster: str
    kind: str
    subject: str
    started_ms: int
    last_ms: int
    groups: set[str] = field(default_factory=set)
    removals: int = 0
    evidence: str = ""

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.subject}@{_iso(self.started_ms)}"

    @property
    def root_cause(self) -> str:
        return ROOT_CAUSE_OF_KIND[self.kind]


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms // 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class IncidentBoard:
    """The evidence of the recent past per cluster, and the incidents it makes."""

    def __init__(self, diagnosis: DiagnosisSettings = DEFAULT_SETTINGS,
                 settings: IncidentSettings = DEFAULT_INCIDENT_SETTINGS) -> None:
        self.d = diagnosis
        self.s = settings
        self._removals: dict[tuple[str, str, str, int], Removal] = {}
        # (cluster, group) -> [(since, coordinator)], its coordinator changes (the snapshot's)
        self._coordinators: dict[tuple[str, str], list[tuple[int, int]]] = {}
        # (cluster, group) -> the group's members now: its latest snapshot's list, as it is (no copy:
        # only a host incident without host_members reads it)
        self._members: dict[tuple[str, str], list[dict[str, Any]]] = {}
        # (cluster, group) -> the event time of its last snapshot with members
        self._had_members_ms: dict[tuple[str, str], int] = {}
        self._deaths: dict[str, list[BrokerDeath]] = {}
        self._clock: dict[str, int] = {}

    # --- evidence -------------------------------------------------------------------------------
    def note_snapshot(self, snap: dict[str, Any]) -> None:
        cluster, group = snap["cluster"], snap["group"]
        key = (cluster, group)
        self._tick(cluster, snap.get("last_event_ms"))
        changes = snap.get("coordinators")
        if changes:
            self._coordinators[key] = [(int(t), int(b)) for t, b in changes]
        elif isinstance(snap.get("coordinator"), int):
            # a snapshot without the changes (a release before them): the changes seen per batch
            history = self._coordinators.setdefault(key, [])
            if not history or history[-1][1] != snap["coordinator"]:
                history.append((int(snap.get("last_event_ms") or 0), snap["coordinator"]))
                del history[:-4]
        self._members[key] = snap.get("members") or []
        if self._members[key] and isinstance(snap.get("last_event_ms"), int):
            self._had_members_ms[key] = max(self._had_members_ms.get(key, 0), snap["last_event_ms"])
        elif snap.get("state") == GroupState.EMPTY and isinstance(snap.get("state_since_ms"), int) \
                and self._had_members_ms.get(key):
            # emptied at state_since_ms: it had members until then, though no batch's snapshot
            # showed them after an earlier moment (its joins and leaves came in one batch)
            self._had_members_ms[key] = max(self._had_members_ms[key], snap["state_since_ms"])
        for p in snap.get("pending_removals") or []:
            self._add(Removal.of(cluster, group, p, decided=False))

    def note_removals(self, records: Iterable[dict[str, Any]], decided: bool) -> None:
        """Removal records: held by the correlator (not decided) or decided."""
        for r in records:
            if r.get("removed_at_ms") is not None:
                self._add(Removal.of(r["cluster"], r["group"], r, decided))

    def note_deaths(self, cluster: str, deaths: list[BrokerDeath]) -> None:
        self._deaths[cluster] = list(deaths)
        for d in deaths:
            self._tick(cluster, d.at_ms)

    def advance(self, cluster: str, clock_ms: int | None) -> None:
        """The cluster's event time (its watermark) reached `clock_ms`. The end of a finite input
        (a replay's last watermark) is no time: the incidents of its last minutes stay active."""
        if clock_ms is not None and clock_ms < E.END_OF_INPUT_TS_MS - _END_OF_INPUT_SPAN_MS:
            self._tick(cluster, clock_ms)

    def forget_group(self, cluster: str, group: str) -> None:
        for table in (self._coordinators, self._members, self._had_members_ms):
            table.pop((cluster, group), None)

    def _add(self, r: Removal) -> None:
        old = self._removals.get(r.key)
        if old is None or (old.root_cause is None and r.root_cause is not None):
            self._removals[r.key] = r
        self._tick(r.cluster, r.removed_at_ms)

    def _tick(self, cluster: str, ms: Any) -> None:
        if isinstance(ms, int) and ms > self._clock.get(cluster, -1):
            self._clock[cluster] = ms

    def clusters(self) -> list[str]:
        return sorted(self._clock)

    def prune(self) -> None:
        """Forget the evidence no active incident can still use."""
        keep = self.s.hold_ms + max(self.s.crash_loop_window_ms, self.d.broker_death_window_ms,
                                    MAX_SESSION_LOOKAROUND_MS)
        self._removals = {k: r for k, r in self._removals.items()
                          if r.removed_at_ms >= self._clock.get(r.cluster, 0) - keep}
        for cluster, deaths in self._deaths.items():
            self._deaths[cluster] = [d for d in deaths if d.at_ms >= self._clock.get(cluster, 0) - keep]

    # --- incidents ------------------------------------------------------------------------------
    def incidents(self) -> list[Incident]:
        """The active incidents of every cluster, in (cluster, start) order."""
        out: list[Incident] = []
        for cluster in self.clusters():
            now = self._clock[cluster]
            found = self._cluster_incidents(cluster)
            out.extend(i for i in found if now <= i.last_ms + self.s.hold_ms)
        return sorted(out, key=lambda i: (i.cluster, i.started_ms, i.id))

    def _cluster_incidents(self, cluster: str) -> list[Incident]:
        removals = sorted((r for r in self._removals.values() if r.cluster == cluster),
                          key=lambda r: (r.removed_at_ms, r.group, r.member_id))
        found: list[Incident] = []
        explained: set[tuple[str, str, str, int]] = set()
        for d in self._deaths.get(cluster, []):
            inc = Incident(cluster, "broker", str(d.broker), d.at_ms, d.at_ms, evidence=d.evidence)
            inc.groups |= self._coordinated_by(cluster, d.broker, d.at_ms)
            for r in removals:
                if d.at_ms <= r.removed_at_ms <= d.at_ms + self.d.broker_death_window_ms \
                        and r.cause in INVOLUNTARY and r.key not in explained:
                    explained.add(r.key)
                    inc.groups.add(r.group)
                    inc.removals += 1
                    inc.last_ms = max(inc.last_ms, r.removed_at_ms)
            found.append(inc)
        faults = [r for r in removals if r.cause in INVOLUNTARY and r.key not in explained
                  and r.root_cause not in NOT_A_FAULT]
        found.extend(self._host_incidents(cluster, [r for r in faults if r.group_instance_id is None]))
        found.extend(self._crash_loops(faults))
        found.extend(self._slow(removals))
        return found

    def _coordinated_by(self, cluster: str, broker: int, at_ms: int) -> set[str]:
        """Groups whose coordinator was `broker` when it died (the last change seen before then)
        and that had members then (they have some now, or had some after it): an empty group lost
        nothing."""
        groups = set()
        for (c, group), history in self._coordinators.items():
            if c != cluster or not (self._members.get((c, group))
                                    or self._had_members_ms.get((c, group), 0) >= at_ms):
                continue
            before = [b for t, b in history if t <= at_ms]
            if (before[-1] if before else history[0][1]) == broker:
                groups.add(group)
        return groups

    def _host_window(self, r: Removal) -> int:
        if self.d.host_wide_window_ms:
            return self.d.host_wide_window_ms
        return min(r.session_timeout_ms or self.d.consumer_session_timeout_ms, MAX_SESSION_LOOKAROUND_MS)

    def _host_incidents(self, cluster: str, faults: list[Removal]) -> list[Incident]:
        by_host: dict[str, list[Removal]] = {}
        for r in faults:
            if r.client_host:
                by_host.setdefault(r.client_host.lstrip("/"), []).append(r)   # Kafka writes "/10.0.0.9"
        out = []
        for host, rs in by_host.items():
            for episode in _episodes(rs, self._host_window):
                went = {r.client for r in episode}
                by_group: dict[str, list[Removal]] = {}
                for r in episode:       # once: a fleet's episode holds thousands of groups
                    by_group.setdefault(r.group, []).append(r)
                groups = set(by_group)
                stayed = sum(self._stayed(cluster, g, host, of_group) for g, of_group in by_group.items())
                if stayed > len(went):
                    continue
                together = episode[-1].removed_at_ms - episode[0].removed_at_ms <= self.d.host_wide_together_ms
                if len(went) >= self.d.host_wide_min_removals or (len(went) >= 2 and together and stayed == 0):
                    first, last = episode[0].removed_at_ms, episode[-1].removed_at_ms
                    out.append(Incident(cluster, "host", host, first, last, groups, len(episode),
                                        f"{len(went)} member(s) of {len(groups)} group(s) on {host} removed "
                                        f"within {(last - first) / 1000:.1f} s; {stayed} of the host's members "
                                        "in those groups stayed"))
        return out

    def _stayed(self, cluster: str, group: str, host: str, went: list[Removal]) -> int:
        """The group's members on `host` that did not go: from the removals' host_members (the host's
        members when each went), else from the group's members now."""
        clients = {r.client for r in went}
        known = [r.host_members for r in went if r.host_members is not None]
        if known:
            return max(0, max(known) - len(clients))
        return sum(1 for m in self._members.get((cluster, group), [])
                   if (m.get("client_host") or "").lstrip("/") == host
                   and (group, m.get("client_id") or m.get("group_instance_id") or m.get("member_id") or "")
                   not in clients)

    def _crash_loops(self, faults: list[Removal]) -> list[Incident]:
        by_client: dict[tuple[str, str], list[Removal]] = {}
        for r in faults:
            by_client.setdefault(r.client, []).append(r)
        out = []
        for (group, client), rs in by_client.items():
            for episode in _episodes(rs, lambda r: self.s.crash_loop_window_ms):
                if len(episode) >= self.s.crash_loop_min_removals:
                    out.append(Incident(episode[0].cluster, "crash_loop", group, episode[0].removed_at_ms,
                                        episode[-1].removed_at_ms, {group}, len(episode),
                                        f"{client} removed {len(episode)} times for heartbeat expiry in "
                                        f"{(episode[-1].removed_at_ms - episode[0].removed_at_ms) / 1000:.0f} s"))
        return out

    def _slow(self, removals: list[Removal]) -> list[Incident]:
        out = []
        for kind, causes in (("slow_processing", (RemovalCause.POLL_TIMEOUT,)),
                             ("rebalance_timeout", (RemovalCause.REBALANCE_TIMEOUT, RemovalCause.SYNC_TIMEOUT))):
            by_group: dict[str, list[Removal]] = {}
            for r in removals:
                if r.cause in causes:
                    by_group.setdefault(r.group, []).append(r)
            for group, rs in by_group.items():
                for episode in _episodes(rs, lambda r: self.s.hold_ms):
                    who = sorted({r.client_id or r.member_id for r in episode})
                    out.append(Incident(episode[0].cluster, kind, group, episode[0].removed_at_ms,
                                        episode[-1].removed_at_ms, {group}, len(episode),
                                        f"{len(episode)} removal(s) for {'/'.join(causes)}: {', '.join(who[:5])}"))
        return out


def _episodes(rs: list[Removal], gap_ms: Callable[[Removal], int]) -> list[list[Removal]]:
    """`rs` (time order) cut where one is further than gap_ms(previous) from the previous."""
    out: list[list[Removal]] = []
    for r in sorted(rs, key=lambda r: r.removed_at_ms):
        if out and r.removed_at_ms - out[-1][-1].removed_at_ms <= gap_ms(out[-1][-1]):
            out[-1].append(r)
        else:
            out.append([r])
    return out
