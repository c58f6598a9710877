"""Lag gauges, computed at scrape time from the lag book (state/lag.py): per group and topic the
lag in records and in seconds, and per group the topics whose lag is unknown, by reason.

Only groups with gauges of their own have lag series: a group that has a snapshot, is not Dead
and is within max_groups (a group folded into `__other__` has none: summing lags over groups
means nothing). Labels are cluster, group, topic (or reason): never members or partitions.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from state.lag import LagBook
from state.model import DEAD
from state.vocabulary import METRIC_PREFIX as PREFIX


class LagCollector(Collector):
    """The lag families of the groups `snapshots` says have gauges."""

    def __init__(self, snapshots: Callable[[], Iterable[dict[str, Any]]],
                 clock: Callable[[], float] = time.time) -> None:
        self.book: LagBook | None = None      # `run` sets it; without a broker (replay) no lag
        self._snapshots = snapshots
        self._clock = clock

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
        ]

    def collect(self) -> Iterable[GaugeMetricFamily]:
        records, seconds, unknown = self._families()
        book = self.book
        if book is None:
            return [records, seconds, unknown]
        shown = {(s["cluster"], s["group"]) for s in self._snapshots()
                 if s.get("state") != DEAD and not s.get("_over_cap")}
        unknown_counts: dict[tuple[str, str, str], int] = {}
        for lag in book.lags(self._clock()):
            if (lag.cluster, lag.group) not in shown:
                continue
            if lag.unknown is not None:
                k = (lag.cluster, lag.group, lag.unknown)
                unknown_counts[k] = unknown_counts.get(k, 0) + 1
                continue
            labels = [lag.cluster, lag.group, lag.topic]
            records.add_metric(labels, float(lag.records or 0))
            seconds.add_metric(labels, round(float(lag.seconds or 0.0), 3))
        for (cluster, group, reason), n in sorted(unknown_counts.items()):
            unknown.add_metric([cluster, group, reason], float(n))
        return [records, seconds, unknown]
