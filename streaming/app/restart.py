"""A restarted `run` (or a test's second collector) picks up where the last one stopped: counters
and histograms from the event sink's snapshot and the records after it; group gauges and
snapshots, the correlator and the state keys' timeouts from the state file. /metrics then shows what
an uninterrupted run would, and batches Spark runs again are not counted twice
(RunCollector.counted_through, correlated_through, statistics_through)."""
from __future__ import annotations

import logging

from sinks.event_sink import EventSink, SinkError
from sinks.metrics_state import load_counter_state
from state.outputs import RECORD_KINDS, STATISTICS_KINDS, OutputKind
from streaming.app.collector import RunCollector, enforce_retention

LOG = logging.getLogger("rebalance_monitor.events")


def restore(collector: RunCollector) -> int:
    """After a restart: counters and histograms from the event sink, then the groups from the
    state file, so /metrics shows what an uninterrupted run would. Returns the last batch id."""
    restore_sink(collector)
    return restore_groups(collector)


def restore_sink(collector: RunCollector) -> None:
    """The first half of a restart, which `run` does before it serves /metrics: counters and
    histograms from the event sink's snapshot (their size does not grow with the groups'), and
    the sink's retention. Their groups are those that held the `max_groups` slots before the
    restart, and take them again; restore_groups then gives those groups their gauges. The other
    way round, the state file's first groups (the oldest) took the slots, the counters' groups got
    series beyond the cap, and most groups had counters without gauges or gauges without counters
    (bench/soak: gauges of 65 groups instead of 10,000 a batch later)."""
    sink = collector.event_sink
    if sink is None:
        return
    restore_counters(collector, sink)
    collector.counted_through = max(sink.last_batch_id(), collector.counted_through)
    # Statistics count as counted through the last batch whose statistics the sink holds, not
    # through counted_through: a batch whose records reached the sink but which was not committed
    # (a crash, or a stop while the checkpoint's disk was full) runs again, and its progress
    # report, the first for that batch, carries statistics nobody counted.
    collector.statistics_through = max(collector.statistics_through, sink.last_batch_id(STATISTICS_KINDS))
    # Retention at start too, not only after a roll: lowering events_max_bytes and restarting
    # frees a full disk, where the next roll would first need room.
    enforce_retention(sink)
    collector.note_sink_usage()


def restore_groups(collector: RunCollector) -> int:
    """The second half, which `run` does while it already serves /metrics: the group snapshots
    (their gauges), the correlator and the state keys' timeouts from the state file, which grows
    with the groups (8 s at 233,000 groups: docs/benchmarks.md, Soak). Returns the last batch id."""
    last = -1
    saved = collector.state_file.read() if collector.state_file is not None else None
    if saved is not None:
        last = saved.batch_id
        collector.correlator.load_state(saved.correlator)
        collector.markers.timeouts = saved.timeouts
        collector.metrics.groups.set_correlating(collector.correlator.pending)
        collector.correlated_through = last
        for key, snap in saved.groups.items():
            collector.snapshots[key] = snap
            collector.metrics.observe(OutputKind.SNAPSHOT, snap)
        if collector.event_sink is not None:
            collector.counted_through = max(last, collector.counted_through)
    collector.note_incidents()
    collector.metrics.health.restoring_groups.set(0)
    return last


def restore_counters(collector: RunCollector, sink: EventSink) -> None:
    """Counters and histograms from the sink's snapshot, then the records after it. A sink
    without one (written before snapshots existed, or its snapshot unreadable) is replayed
    whole, as before. The incident board gets the removals of the newest files too (it looks
    at the last minutes of event time, which the snapshot does not hold)."""
    records_through = statistics_through = -1
    try:
        doc = sink.load_counters()
        if doc is not None:
            through = int(doc["records_through"]), int(doc["statistics_through"])
            load_counter_state(collector.metrics, doc.get("metrics"))
            records_through, statistics_through = through
    except (KeyError, TypeError, ValueError) as exc:     # SinkError is a ValueError
        LOG.warning("events_dir: the counters' snapshot is unusable (%s); counting every record kept instead",
                    exc if isinstance(exc, SinkError) else f"{type(exc).__name__}: {exc}")
    for kind in RECORD_KINDS:
        after = statistics_through if kind in STATISTICS_KINDS else records_through
        for record in sink.records(kind, after=after):
            collector.metrics.observe(kind, record)
    if records_through >= 0:
        files = sink.files(OutputKind.REMOVAL)
        rolled = [f for f in files if f.rolled]
        start = (rolled[-1] if rolled else files[0]).first if files else records_through + 1
        collector.metrics.incidents.note_removals(
            sink.records(OutputKind.REMOVAL, after=start - 1, through=records_through), decided=True)
    collector.statistics_through = statistics_through
    collector.counted_through = records_through

