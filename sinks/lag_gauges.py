"""Lag gauges, computed at scrape time from the lag book (state/lag.py): per group and topic the
lag in records and in seconds, per group the topics whose lag is unknown, by reason, and the
members at risk of a poll timeout (state/at_risk.py: records waiting, no commit).

Only groups with gauges of their own have lag series: a group that has a snapshot, is not Dead
and is within max_groups (a group folded into `__other__` has none: summing lags over groups
means nothing). Labels are cluster, group, topic (or reason): never members, and partitions only
for the groups `lag.partition_groups` names (an opt-in outside the series budget).
"""
from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from state.at_risk import AT_RISK_FRACTION, members_at_risk
from state.lag import LagBook
from state.model import DEAD
from state.vocabulary import METRIC_PREFIX as PREFIX

LOG = logging.getLogger("rebalance_monitor")


class LagCollector(Collector):
    """The lag families of the groups `snapshots` says have gauges."""

    def __init__(self, snapshots: Callable[[], Iterable[dict[str, Any]]],
                 clock: Callable[[], float] = time.time) -> None:
        self.book: LagBook | None = None      # `run` sets it; without a broker (replay) no lag
        self.at_risk_fraction = AT_RISK_FRACTION
        # lag.partition_groups: the groups whose lag is also shown per partition (None: none)
        self.partition_groups: re.Pattern[str] | None = None
        self._snapshots = snapshots
        self.clock = clock      # a replay's: the end of its end-offset samples
        # (cluster, group, member id) at risk at the last scrape: a member is logged when it
        # becomes at risk, not at every scrape
        self._at_risk: set[tuple[str, str, str]] = set()
        self._at_risk_lock = threading.Lock()

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return self._families()

    def _families(self) -> list[GaugeMetricFamily]:
        return [
            GaugeMetricFamily(
                f"{PREFIX}_group_topic_lag",
                "Records the group has not consumed on the topic: sum over the partitions it committed to of "
                "end offset minus committed offset (at least 0). Live service only (sampled end offsets).",
                labels=["cluster", "group", "topic"]),
            GaugeMetricFamily(
                f"{PREFIX}_group_topic_lag_seconds",
                "How long ago the group's committed offset was the end offset, on its most behind partition of "
                "the topic (interpolated between end-offset samples); 0 when caught up.",
                labels=["cluster", "group", "topic"]),
            GaugeMetricFamily(
                f"{PREFIX}_group_lag_unknown",
                "Topics of the group whose lag is unknown (no series in the lag gauges), by reason: the end "
                "offsets could not be had, or their last sample is older than 3 sampling intervals.",
                labels=["cluster", "group", "reason"]),
            GaugeMetricFamily(
                f"{PREFIX}_group_members_at_risk",
                "Members of the Stable group with records waiting on their partitions and no commit of them "
                "for over lag.at_risk_fraction of their rebalance timeout (max.poll.interval.ms): heading for "
                "a poll timeout. Classic and consumer (KIP-848) groups' members.",
                labels=["cluster", "group"]),
            GaugeMetricFamily(
                f"{PREFIX}_group_partition_lag",
                "As group_topic_lag, per partition, for the groups lag.partition_groups names (opt-in).",
                labels=["cluster", "group", "topic", "partition"]),
            GaugeMetricFamily(
                f"{PREFIX}_group_partition_lag_seconds",
                "As group_topic_lag_seconds, per partition, for the groups lag.partition_groups names (opt-in).",
                labels=["cluster", "group", "topic", "partition"]),
        ]

    def collect(self) -> Iterable[GaugeMetricFamily]:
        families = self._families()
        records, seconds, unknown, at_risk, partition_records, partition_seconds = families
        book = self.book
        if book is None:
            return families
        now_s = self.clock()
        snapshots = [s for s in self._snapshots() if s.get("state") != DEAD and not s.get("_over_cap")]
        # one look at each shown group's partitions (LagBook.group_view): its lags, commits, fresh ends
        views = {(s["cluster"], s["group"]): book.group_view((s["cluster"], s["group"]), now_s) for s in snapshots}
        self._members_at_risk(book, views, snapshots, now_s, at_risk)
        unknown_counts: dict[tuple[str, str, str], int] = {}
        for lag in (lag for key in sorted(views) for lag in views[key][0]):
            if lag.unknown is not None:
                k = (lag.cluster, lag.group, lag.unknown)
                unknown_counts[k] = unknown_counts.get(k, 0) + 1
                continue
            labels = [lag.cluster, lag.group, lag.topic]
            records.add_metric(labels, float(lag.records or 0))
            seconds.add_metric(labels, round(float(lag.seconds or 0.0), 3))
        for (cluster, group, reason), n in sorted(unknown_counts.items()):
            unknown.add_metric([cluster, group, reason], float(n))
        pattern = self.partition_groups
        for key in sorted(k for k in views if pattern is not None and pattern.fullmatch(k[1])):
            for (topic, partition), behind, behind_s in book.partition_lags(key, now_s):
                labels = [key[0], key[1], topic, str(partition)]
                partition_records.add_metric(labels, float(behind))
                partition_seconds.add_metric(labels, round(behind_s, 3))
        return families

    def _members_at_risk(self, book: LagBook, views: dict[tuple[str, str], tuple[Any, dict, dict]],
                         snapshots: list[dict[str, Any]], now_s: float, family: GaugeMetricFamily) -> None:
        """A series per group the book has commits of; one log line per member that becomes at risk."""
        found: dict[tuple[str, str, str], str] = {}
        for snap in snapshots:
            key = (snap["cluster"], snap["group"])
            _, committed, ends = views[key]
            if not committed:
                continue
            # a silence is measured only to where the monitor has read the group's commits
            through = book.commits_read_through(key, now_s)
            risks = [] if through is None else members_at_risk(snap, committed, ends.get, int(through * 1000),
                                                                self.at_risk_fraction, book.topic_names(key[0]))
            family.add_metric(list(key), float(len(risks)))
            for r in risks:
                found[(*key, r.member_id)] = (
                    f"run: member {r.member_id} (client {r.client_id}) of group {key[1]} is at risk of a poll "
                    f"timeout: {r.waiting_partitions} of its partitions have records waiting and none was "
                    f"committed for {r.silent_ms / 1000:.0f} s of its {r.rebalance_timeout_ms / 1000:.0f} s "
                    f"rebalance timeout (max.poll.interval.ms)")
        with self._at_risk_lock:
            new = sorted(set(found) - self._at_risk)
            self._at_risk = set(found)
        for member in new:
            LOG.warning("%s", found[member])
