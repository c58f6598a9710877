"""Incident gauges: the incident board (state/incidents.py) on /metrics, one collector for the
four incident families. The alerts that page (dashboards/alert_rules.py, INCIDENT_ALERTS) fire on
them; Alertmanager groups by the `incident` label, so one incident is one page.

Bounded: an incident has series only while it is active (state/incidents.py, hold), and its
groups are those that lost members to it or that its broker coordinated."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from state.diagnosis.brokers import BrokerLog
from state.incidents import DEFAULT_INCIDENT_SETTINGS, Incident, IncidentBoard, IncidentSettings
from state.diagnosis.rules import DEFAULT_SETTINGS, DiagnosisSettings
from state.vocabulary import METRIC_PREFIX as PREFIX

STARTED = f"{PREFIX}_incident_started_timestamp_seconds"
GROUPS = f"{PREFIX}_incident_groups"
GROUP_INFO = f"{PREFIX}_incident_group_info"
EVIDENCE_INFO = f"{PREFIX}_incident_evidence_info"


class IncidentCollector(Collector):
    def __init__(self, group_label: Callable[[str, str], str] = lambda cluster, group: group,
                 diagnosis: DiagnosisSettings = DEFAULT_SETTINGS,
                 settings: IncidentSettings = DEFAULT_INCIDENT_SETTINGS) -> None:
        self._lock = threading.Lock()
        self._group_label = group_label
        self.board = IncidentBoard(diagnosis, settings)
        self._active: list[Incident] = []

    def configure(self, diagnosis: DiagnosisSettings, settings: IncidentSettings = DEFAULT_INCIDENT_SETTINGS) -> None:
        """The configured thresholds; before the first input (RunCollector.configure)."""
        with self._lock:
            self.board = IncidentBoard(diagnosis, settings)

    # --- evidence (the batch thread) ---------------------------------------------------------------
    def note_snapshot(self, snap: dict[str, Any]) -> None:
        with self._lock:
            self.board.note_snapshot(snap)

    def note_removals(self, records: Iterable[dict[str, Any]], decided: bool) -> None:
        with self._lock:
            self.board.note_removals(records, decided)

    def forget(self, key: tuple[str, str]) -> None:
        """A group swept from /metrics (Dead past its retention)."""
        with self._lock:
            self.board.forget_group(*key)

    def refresh(self, brokers: BrokerLog | None = None, clock_ms: int | None = None) -> None:
        """After a batch: the brokers' deaths, the watermark, and the incidents they make now."""
        with self._lock:
            if brokers is not None:
                for cluster in {r["cluster"] for r in brokers.records} | set(self.board.clusters()):
                    self.board.note_deaths(cluster, brokers.deaths(cluster))
            if clock_ms is not None:
                for cluster in self.board.clusters():
                    self.board.advance(cluster, clock_ms)
            self.board.prune()
            self._active = self.board.incidents()

    def active(self) -> list[Incident]:
        with self._lock:
            return list(self._active)

    # --- exposition (the scrape thread) ------------------------------------------------------------
    def describe(self) -> Iterable[GaugeMetricFamily]:
        return self._families([])

    def collect(self) -> Iterable[GaugeMetricFamily]:
        return self._families(self.active())

    def _families(self, incidents: list[Incident]) -> list[GaugeMetricFamily]:
        started = GaugeMetricFamily(
            STARTED, "Event time an active incident started (Unix seconds): a broker died, members of one "
            "client host were removed across groups, a member's poll or a rebalance timed out, a client "
            "crash-loops (state/incidents.py). One series per incident while it is active.",
            labels=["cluster", "incident", "kind", "root_cause", "subject"])
        groups = GaugeMetricFamily(GROUPS, "Groups an active incident affected (lost members to it, or "
                                   "were coordinated by its broker).", labels=["cluster", "incident"])
        info = GaugeMetricFamily(GROUP_INFO, "1 for each group an active incident affected.",
                                 labels=["cluster", "incident", "group"])
        evidence = GaugeMetricFamily(EVIDENCE_INFO, "1, with the incident's evidence in words in the label "
                                     "`evidence` (the page's text; it changes as evidence comes).",
                                     labels=["cluster", "incident", "evidence"])
        for i in incidents:
            evidence.add_metric([i.cluster, i.id, i.evidence], 1.0)
            started.add_metric([i.cluster, i.id, i.kind, i.root_cause, i.subject], i.started_ms / 1000.0)
            labels = sorted({self._group_label(i.cluster, g) for g in i.groups})
            groups.add_metric([i.cluster, i.id], float(len(i.groups)))
            for g in labels:
                info.add_metric([i.cluster, i.id, g], 1.0)
        return [started, groups, info, evidence]
