"""Dead groups' series are dropped after the retention, and taking snapshots does not rescan
every Dead group each time (sinks/metrics.py MetricsSink.sweep)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry

from sinks.exposition import text
from sinks.metrics import MetricsSink
from state.outputs import OutputKind


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _snap(group: str, state: str) -> dict:
    return {"cluster": "c", "group": group, "protocol": "classic", "state": state, "generation": 1,
            "member_count": 0, "state_since_ms": 1_700_000_000_000}


def _groups(sink: MetricsSink) -> set[str]:
    return {line.split('group="')[1].split('"')[0] for line in text(sink.registry).splitlines()
            if line.startswith("rebalance_monitor_group_state{")}


def test_dead_groups_go_after_the_retention_in_order_of_death():
    clock = Clock()
    sink = MetricsSink([1.0], registry=CollectorRegistry(), dead_group_retention_seconds=600, clock=clock)
    for i in range(3):
        sink.observe(OutputKind.SNAPSHOT, _snap(f"g{i}", "Stable"))
    sink.observe(OutputKind.SNAPSHOT, _snap("g0", "Dead"))
    clock.now += 300
    sink.observe(OutputKind.SNAPSHOT, _snap("g1", "Dead"))
    sink.observe(OutputKind.SNAPSHOT, _snap("g1", "Empty"))      # revived: not Dead any more
    sink.observe(OutputKind.SNAPSHOT, _snap("g2", "Dead"))
    clock.now += 299
    sink.sweep()
    assert set(sink.book.dead_since) == {("c", "g0"), ("c", "g2")}
    clock.now += 1                                                # g0 Dead for 600 s
    sink.sweep()
    assert set(sink.book.dead_since) == {("c", "g2")}
    assert _groups(sink) == {"g1"}                                # Dead groups have no gauges
    clock.now += 300
    sink.observe(OutputKind.SNAPSHOT, _snap("g9", "Stable"))      # a snapshot sweeps too
    assert sink.book.dead_since == {}
    assert _groups(sink) == {"g1", "g9"}


def test_a_batch_of_snapshots_sweeps_at_most_once_per_second(monkeypatch):
    clock = Clock()
    sink = MetricsSink([1.0], registry=CollectorRegistry(), clock=clock)
    sweeps = []
    real = sink.sweep
    def counted_sweep() -> None:
        sweeps.append(clock.now)
        real()
    monkeypatch.setattr(sink, "sweep", counted_sweep)
    for i in range(2000):
        sink.observe(OutputKind.SNAPSHOT, _snap(f"g{i}", "Dead"))
    assert len(sweeps) == 1
    clock.now += 1.0
    sink.observe(OutputKind.SNAPSHOT, _snap("g-next", "Dead"))
    assert len(sweeps) == 2
