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
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


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
