"""The counters and histograms the records feed (MetricsSink.observe), as one JSON document and
back: the event sink's snapshot (sinks/event_sink.py COUNTERS_FILE), so a restart loads it and
replays only the records after it instead of the whole sink.

What it holds is what replaying the records rebuilds: the per-group series (sinks/group_series.py),
the per-cluster counters and histograms, the clock-skew windows, the log sources' line counters
and layouts. Group gauges come from the state file's snapshots, not from here.

prometheus_client has no public way to set a histogram's buckets: `_load_histogram` sets its
children's values (`_buckets`, `_sum`); tests/unit/test_bounded_sink.py compares the page before
and after a round trip, which fails if prometheus_client changes them.
"""
from __future__ import annotations

import logging
from typing import Any

from sinks.event_sink import SinkError
from sinks.exposition import OTHER_GROUPS
from sinks.health import LogSourceLines
from sinks.metrics import MetricsSink

LOG = logging.getLogger("rebalance_monitor.events")
VERSION = 1


def _series_families(sink: MetricsSink) -> dict[str, Any]:
    rebalance, impact = sink.rebalance, sink.impact
    return {f.name: f for f in (rebalance.rebalances, sink.removal.removals, rebalance.rebalance_timeouts,
                                impact.partition_seconds, rebalance.last_duration, impact.records_delayed,
                                impact.not_caught_up)}


def _counters(sink: MetricsSink) -> dict[str, Any]:
    inputs = sink.inputs
    return {c._name: c for c in (inputs.quarantined, inputs.unknown_lines, inputs.invalid_transitions,
                                 inputs.source_mismatches, sink.statistics.offsets_records, sink.log_sources.lines)}


def _duration_histograms(sink: MetricsSink) -> dict[str, Any]:
    """The histograms whose buckets are the duration_buckets setting."""
    return {h._name: h for h in (sink.rebalance.rebalance_duration, sink.rebalance.group_rebalance_duration,
                                 sink.impact.partition_stop)}


def _histograms(sink: MetricsSink) -> dict[str, Any]:
    return {**_duration_histograms(sink), sink.impact.catch_up._name: sink.impact.catch_up}


def counter_state(sink: MetricsSink) -> dict[str, Any]:
    """The sink's counters and histograms now (call it where no record is being counted)."""
    with sink.book.lock:
        families = {name: [[*labels, value] for labels, value in f._values.items()]
                    for name, f in _series_families(sink).items()}
        counters = {name: [[*labels, child._value.get()] for labels, child in list(c._metrics.items())]
                    for name, c in _counters(sink).items()}
        histograms = {name: [[*labels, [b.get() for b in child._buckets], child._sum.get()]
                             for labels, child in list(h._metrics.items())]
                      for name, h in _histograms(sink).items()}
        skews = [[c, s, list(window)] for (c, s), window in sink.skew.windows.items()]
        layouts = [[c, s, src.layout] for (c, s), src in sink.log_sources._sources.items()]
        return {"version": VERSION, "buckets": list(sink.rebalance.rebalance_duration._upper_bounds),
                "clusters": sorted(sink.inputs.clusters), "families": families, "counters": counters,
                "histograms": histograms, "clock_skew": skews, "layouts": layouts}


def load_counter_state(sink: MetricsSink, doc: Any) -> None:
    """Set a fresh sink's counters and histograms to a snapshot of `counter_state`. A document of
    another version or shape raises SinkError and leaves the sink as it was (it is loaded into a
    scratch sink first)."""
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        version = doc.get("version") if isinstance(doc, dict) else None
        raise SinkError(f"counters snapshot version {version!r} (this release reads {VERSION})")
    try:
        _load(MetricsSink(sink.rebalance.rebalance_duration._upper_bounds[:-1]), doc)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise SinkError(f"counters snapshot unreadable ({type(exc).__name__}: {exc})") from None
    _load(sink, doc)


def _load(sink: MetricsSink, doc: dict[str, Any]) -> None:
    for cluster in doc["clusters"]:
        sink.inputs.cluster_seen(cluster)
    families = _series_families(sink)
    for name, rows in doc["families"].items():
        family = families[name]
        for *labels, value in rows:
            labels = tuple(labels)
            if labels[1] != OTHER_GROUPS:
                sink.book.label(labels[0], labels[1])      # takes its place under max_groups
            (sink.book.count if family.kind == "counter" else sink.book.set)(family, (labels[0], labels[1]), labels,
                                                                             value)
    counters = _counters(sink)
    for name, rows in doc["counters"].items():
        for *labels, value in rows:
            counters[name].labels(*labels).inc(value)
    _load_histograms(sink, doc)
    for cluster, source, values in doc["clock_skew"]:
        sink.skew.load(cluster, source, values)
    for cluster, source, layout in doc["layouts"]:
        # the layout reported, with no lines (the counters above have them)
        sink.log_sources.observe_lines(LogSourceLines(cluster, source, {layout: 1} if layout else {}, {}))


def _load_histograms(sink: MetricsSink, doc: dict[str, Any]) -> None:
    bounds = list(sink.rebalance.rebalance_duration._upper_bounds)
    skipped: set[str] = set()
    if [float(b) for b in doc["buckets"]] != bounds:
        LOG.warning("events_dir: duration_buckets changed since the counters' snapshot; the duration "
                    "histograms start again from 0")
        skipped = set(_duration_histograms(sink))
    histograms = _histograms(sink)
    for name, rows in doc["histograms"].items():
        if name in skipped:
            continue
        histogram = histograms[name]
        for *labels, buckets, total in rows:
            labels = tuple(labels)
            if name == sink.rebalance.group_rebalance_duration._name:
                child = sink.book.child(histogram, (labels[0], labels[1]), labels)
            else:
                child = sink.book.shared_child(histogram, labels)
            for value, bucket in zip(buckets, child._buckets, strict=True):
                bucket.set(value)
            child._sum.set(total)
