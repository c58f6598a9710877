"""Group gauges, computed at scrape time from the latest snapshot of each group (a prometheus_client
custom collector: snapshot-on-scrape, no per-group gauge objects)."""
from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from state.model import DEAD
from state.vocabulary import METRIC_PREFIX as PREFIX, REBALANCING_STATES, Trigger


def _live_families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    started = GaugeMetricFamily(
        f"{PREFIX}_group_rebalance_started_timestamp_seconds",
        "Event time the group's open rebalance started (Unix seconds), labelled with its trigger; "
        "live view: shown in the batch that read the line. Only groups with an open rebalance.",
        labels=["cluster", "group", "protocol", "trigger"])
    pending = GaugeMetricFamily(
        f"{PREFIX}_group_pending_removals",
        "Member removals seen whose record is not final yet (root cause pending: decision window, "
        "watermark or cross-group correlation), by the cause the broker line gave.",
        labels=["cluster", "group", "cause"])
    return started, pending


class GroupStateCollector(Collector):
    """Gauges from the latest snapshot per (cluster, group)."""

    # States in which a group is rebalancing (classic) or converging (KIP-848).
    IN_PROGRESS = REBALANCING_STATES

    def __init__(self, storm_window_ms: int = 600_000) -> None:
        self._lock = threading.Lock()
        self._snapshots: dict[tuple[str, str], dict[str, Any]] = {}
        # Removals already final per group but held by the driver's cross-group correlator
        # (state/diagnosis/correlate.py): still `pending` for the live view, by cause.
        self._correlating: dict[tuple[str, str], dict[str, int]] = {}
        self.storm_window_ms = storm_window_ms

    def update(self, snapshot: dict[str, Any]) -> None:
        key = (snapshot["cluster"], snapshot["group"])
        with self._lock:
            self._snapshots[key] = snapshot

    def forget(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._snapshots.pop(key, None)

    def set_correlating(self, records: Iterable[dict[str, Any]]) -> None:
        """The removal records the correlator holds now (replaces the previous set)."""
        by_group: dict[tuple[str, str], dict[str, int]] = {}
        for r in records:
            causes = by_group.setdefault((r["cluster"], r["group"]), {})
            causes[r["cause"]] = causes.get(r["cause"], 0) + 1
        with self._lock:
            self._correlating = by_group

    def pending_by_cause(self, snap: dict[str, Any]) -> dict[str, int]:
        """Removals of the group seen but not final yet (live view), by cause."""
        with self._lock:
            counts = dict(self._correlating.get((snap["cluster"], snap["group"]), {}))
        for p in snap.get("pending_removals") or []:
            counts[p["cause"]] = counts.get(p["cause"], 0) + 1
        return counts

    def snapshots(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._snapshots.values())

    def describe(self) -> Iterable[GaugeMetricFamily]:
        """The families collect() yields, without samples: a registry restricted to some names
        (`/metrics?name[]=...`) finds this collector by them."""
        return self._families([])

    def collect(self) -> Iterable[GaugeMetricFamily]:
        return self._families(self.snapshots())

    def _families(self, snapshots: list[dict[str, Any]]) -> list[GaugeMetricFamily]:
        state = GaugeMetricFamily(f"{PREFIX}_group_state",
                                  "1, with the group's current state in the label `state` (one series per group).",
                                  labels=["cluster", "group", "protocol", "state"])
        generation = GaugeMetricFamily(f"{PREFIX}_group_generation",
                                       "Current generation (classic) or group epoch (consumer).",
                                       labels=["cluster", "group", "protocol"])
        members = GaugeMetricFamily(f"{PREFIX}_group_members", "Members in the current generation.",
                                    labels=["cluster", "group", "protocol"])
        since = GaugeMetricFamily(f"{PREFIX}_group_state_since_timestamp_seconds",
                                  "Event time of the group's last state transition (Unix seconds).",
                                  labels=["cluster", "group", "protocol"])
        groups = GaugeMetricFamily(f"{PREFIX}_groups", "Groups tracked, by state.",
                                   labels=["cluster", "state"])
        in_progress = GaugeMetricFamily(
            f"{PREFIX}_group_rebalance_in_progress_seconds",
            "Event-time seconds the group has been rebalancing (PreparingRebalance/CompletingRebalance, "
            "or Assigning/Reconciling for consumer groups): newest event time of the cluster minus the "
            "group's last transition. Only groups that are rebalancing have a series.",
            labels=["cluster", "group", "protocol"])
        timeout = GaugeMetricFamily(
            f"{PREFIX}_group_rebalance_timeout_seconds",
            "The group's rebalance timeout: the largest rebalance timeout (max.poll.interval.ms) of its members.",
            labels=["cluster", "group", "protocol"])
        in_window = GaugeMetricFamily(
            f"{PREFIX}_group_rebalances_in_window",
            "Rebalances the group started within the storm window (event time, default 10 min) before "
            "the newest event time of the cluster.", labels=["cluster", "group", "protocol"])
        member_total = GaugeMetricFamily(f"{PREFIX}_state_members",
                                         "Members held in the monitor's state, over all groups.",
                                         labels=["cluster"])
        started, pending = _live_families()
        per_state: dict[tuple[str, str], int] = {}
        per_cluster_members: dict[str, int] = {}
        cluster_now: dict[str, int] = {}
        for snap in snapshots:
            if snap.get("last_event_ms") is not None:
                cluster_now[snap["cluster"]] = max(cluster_now.get(snap["cluster"], 0), snap["last_event_ms"])
        for snap in sorted(snapshots, key=lambda s: (s["cluster"], s["group"])):
            if snap["state"] == DEAD:
                continue   # a Dead group has no gauge series (docs/metrics.md)
            per_cluster_members[snap["cluster"]] = per_cluster_members.get(snap["cluster"], 0) \
                + int(snap.get("member_count") or 0)
            if snap.get("_over_cap"):
                k = (snap["cluster"], snap["state"])
                per_state[k] = per_state.get(k, 0) + 1
                continue
            labels = [snap["cluster"], snap["group"], snap["protocol"]]
            state.add_metric(labels + [snap["state"]], 1.0)
            if snap.get("generation") is not None:
                generation.add_metric(labels, float(snap["generation"]))
            members.add_metric(labels, float(snap.get("member_count") or 0))
            if snap.get("state_since_ms") is not None:
                since.add_metric(labels, snap["state_since_ms"] / 1000.0)
            now = cluster_now.get(snap["cluster"])
            if snap["state"] in self.IN_PROGRESS and snap.get("state_since_ms") is not None and now:
                in_progress.add_metric(labels, max(0.0, (now - snap["state_since_ms"]) / 1000.0))
            if snap.get("rebalance_timeout_ms"):
                timeout.add_metric(labels, snap["rebalance_timeout_ms"] / 1000.0)
            if now:
                starts = snap.get("recent_rebalance_starts_ms") or []
                in_window.add_metric(labels, float(sum(1 for t in starts if now - t < self.storm_window_ms)))
            self._live(snap, labels, started, pending)
            k = (snap["cluster"], snap["state"])
            per_state[k] = per_state.get(k, 0) + 1
        for (cluster, name), count in sorted(per_state.items()):
            groups.add_metric([cluster, name], float(count))
        for cluster, count in sorted(per_cluster_members.items()):
            member_total.add_metric([cluster], float(count))
        return [state, generation, members, since, groups, member_total, in_progress, timeout, in_window,
                started, pending]

    def _live(self, snap: dict[str, Any], labels: list[str], started: GaugeMetricFamily,
              pending: GaugeMetricFamily) -> None:
        o = snap.get("rebalance_in_progress")
        if o and o.get("started_at_ms") is not None and o.get("completed_at_ms") is None:
            started.add_metric(labels + [o.get("trigger") or Trigger.UNKNOWN], o["started_at_ms"] / 1000.0)
        for cause, n in sorted(self.pending_by_cause(snap).items()):
            pending.add_metric([snap["cluster"], snap["group"], cause], float(n))
