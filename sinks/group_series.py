"""A metric family of per-group series kept as plain numbers: a prometheus_client collector.

prometheus_client makes a child object for every label set (`labels()` takes a lock, checks and
str()s each label and builds a child metric): 90,000 of them in a replay of 10,000 groups, about
2.5 s of its driver's time, and every record's update went through one. Here a series is a dict
entry, and the family's samples are built when it is collected (a scrape, the replay's
metrics.prom), in the order the series first appeared, as prometheus_client orders children.
One collector per family, registered where the prometheus_client metric was, keeps the page's
order of families.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from sinks.exposition import OTHER_GROUPS

GroupKey = tuple[str, str]      # (cluster, group)


class SeriesFamily(Collector):
    """Counter (`inc`) or gauge (`set`) series of one family, by their label values."""

    def __init__(self, kind: str, name: str, documentation: str, labelnames: Iterable[str]) -> None:
        if kind not in ("counter", "gauge"):
            raise ValueError(f"SeriesFamily: kind must be counter or gauge, not {kind!r}")
        self.kind = kind
        # A counter's name ends in _total on the page; the family is named without it.
        self.name = name.removesuffix("_total") if kind == "counter" else name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()

    def inc(self, labels: tuple[str, ...], amount: float = 1.0) -> bool:
        """Add `amount` (a counter never goes down: callers clamp at 0); True if the series is new."""
        if amount < 0:
            raise ValueError(f"{self.name}: counters only go up ({amount} given)")
        with self._lock:
            old = self._values.get(labels)
            self._values[labels] = (old or 0.0) + amount
        return old is None

    def set(self, labels: tuple[str, ...], value: float) -> bool:
        """Set a gauge's series; True if the series is new."""
        with self._lock:
            new = labels not in self._values
            self._values[labels] = float(value)
        return new

    def remove(self, *labels: str) -> None:
        """Drop one series (prometheus_client's `remove` signature; MetricsSink.sweep calls it)."""
        with self._lock:
            del self._values[labels]

    def _family(self) -> CounterMetricFamily | GaugeMetricFamily:
        make = CounterMetricFamily if self.kind == "counter" else GaugeMetricFamily
        return make(self.name, self.documentation, labels=self.labelnames)

    def describe(self) -> Iterable[CounterMetricFamily | GaugeMetricFamily]:
        """Without samples: a registry restricted to some names (`/metrics?name[]=...`) finds this
        collector by them."""
        return [self._family()]

    def collect(self) -> Iterable[CounterMetricFamily | GaugeMetricFamily]:
        family = self._family()
        with self._lock:
            series = list(self._values.items())
        for labels, value in series:
            family.add_metric(labels, value)
        return [family]


class GroupSeriesBook:
    """Every metric family's series of each group, so a group's can all go at once: the
    `max_groups` cap (groups beyond it are folded into group="__other__"), the series each group
    has, and its removal once the group has been Dead for `dead_group_retention_seconds`
    (processing time). The recorders (sinks/recorders.py) count through it."""

    def __init__(self, max_groups: int, dead_group_retention_seconds: float, clock: Callable[[], float]) -> None:
        self.max_groups = max_groups
        self.dead_group_retention_seconds = dead_group_retention_seconds
        self.clock = clock
        self.lock = threading.RLock()
        self._exported: set[GroupKey] = set()          # groups with their own series
        # A group's series, for sweep(): (metric, labels) -> its prometheus_client child (found
        # without labels(), child() says why), or None for a SeriesFamily's series.
        self._series: dict[GroupKey, dict[tuple[Any, tuple], Any]] = {}
        self._shared: dict[tuple[Any, tuple], Any] = {}       # series of no one group: never removed
        # Insertion order is the order of `since` (the clock does not go back): sweep() stops at
        # the first group still within the retention.
        self.dead_since: dict[GroupKey, float] = {}
        self._next_sweep = float("-inf")
        self._forgotten: list[GroupKey] = []           # swept groups not yet taken
        self.over_cap: set[GroupKey] = set()            # live groups folded into __other__

    def label(self, cluster: str, group: str) -> str:
        """The group label of (cluster, group): the group, or "__other__" beyond the cap."""
        key = (cluster, group)
        with self.lock:
            if key in self._exported:
                return group
            if len(self._exported) < self.max_groups:
                self._exported.add(key)
                return group
        return OTHER_GROUPS

    def count(self, family: SeriesFamily, key: GroupKey, labels: tuple, amount: float = 1.0) -> None:
        """Add to a group's counter series (labels[1] is the group label); a new series of a group
        (not of the `__other__` fold) is remembered for sweep()."""
        if family.inc(labels, amount) and labels[1] != OTHER_GROUPS:
            self._remember(family, key, labels)

    def set(self, family: SeriesFamily, key: GroupKey, labels: tuple, value: float) -> None:
        if family.set(labels, value) and labels[1] != OTHER_GROUPS:
            self._remember(family, key, labels)

    def _remember(self, metric: Any, key: GroupKey, labels: tuple) -> None:
        with self.lock:
            self._series.setdefault(key, {})[(metric, labels)] = None

    def child(self, metric: Any, key: GroupKey, labels: tuple) -> Any:
        """The child of a group's series (labels[1] is the group label), kept: prometheus_client's
        labels() takes a lock, checks and str()s each label, 2 of the 4.6 s the driver spent
        counting bench/cost replay's 180,000 records. sweep() removes a group's children."""
        if labels[1] == OTHER_GROUPS:
            return self.shared_child(metric, labels)
        with self.lock:
            children = self._series.setdefault(key, {})
            child = children.get((metric, labels))
            if child is None:
                child = children[(metric, labels)] = metric.labels(*labels)
            return child

    def shared_child(self, metric: Any, labels: tuple) -> Any:
        """The child of a series no sweep removes (per cluster, or the groups over the cap)."""
        child = self._shared.get((metric, labels))
        if child is None:
            with self.lock:
                child = self._shared[(metric, labels)] = metric.labels(*labels)
        return child

    def note_state(self, key: GroupKey, dead: bool) -> bool:
        """A group's latest snapshot: Dead since when, over the cap or not. True when over it."""
        with self.lock:
            over = self.label(*key) == OTHER_GROUPS
            (self.over_cap.add if over else self.over_cap.discard)(key)
            if dead:
                self.dead_since.setdefault(key, self.clock())
            else:
                self.dead_since.pop(key, None)
        return over

    def sweep_due(self) -> bool:
        """At most once per second from a batch of snapshots (`run` also sweeps every second):
        sweeping once per snapshot was quadratic in Dead groups (a cold start over 23,000 groups
        spent 10 s in it)."""
        return bool(self.dead_since) and self.clock() >= self._next_sweep

    def sweep(self, forget: Callable[[GroupKey], None]) -> None:
        """Drop every series of groups that have been Dead longer than the retention, and call
        `forget` with each. Costs the number of groups it drops, not the number of groups."""
        now = self.clock()
        self._next_sweep = now + 1.0
        with self.lock:
            expired = []
            for k, since in self.dead_since.items():
                if now - since < self.dead_group_retention_seconds:
                    break
                expired.append(k)
            for key in expired:
                del self.dead_since[key]
                for metric, labels in self._series.pop(key, {}):
                    try:
                        metric.remove(*labels)
                    except KeyError:
                        pass
                self._exported.discard(key)
                self.over_cap.discard(key)
                forget(key)
                self._forgotten.append(key)

    def take_forgotten(self) -> list[GroupKey]:
        """The groups swept since the last call (the collector drops their snapshots)."""
        with self.lock:
            taken, self._forgotten = self._forgotten, []
        return taken
