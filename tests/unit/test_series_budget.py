"""Series per group stay within the default budget (docs/metrics.md, "Series per group"): duration
histograms are per cluster, protocol and phase; a group gets its own histograms only when the
group_histograms setting names it."""
from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from sinks.exposition import SERIES_PER_GROUP_BUDGET, series_per_group, text
from sinks.metrics import MetricsSink
from state.outputs import OutputKind
from tests.support.golden import CAPTURES, GOLDEN


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_group_of_the_replayed_captures_is_within_the_budget(capture):
    # The golden metrics.prom is the replay's output (scripts/replay-golden and the golden test keep
    # it equal to a fresh replay of the capture).
    counts = series_per_group((GOLDEN / capture / "metrics.prom").read_text())
    assert len(counts) > 20
    over = {group: n for group, n in counts.items() if n > SERIES_PER_GROUP_BUDGET}
    assert over == {}
    # and no per-group histogram without the opt-in
    assert "rebalance_monitor_group_rebalance_duration_seconds_bucket" not in \
        (GOLDEN / capture / "metrics.prom").read_text()


def _rebalance(group: str, trigger: str, outcome: str = "stable", join: float = 1.5) -> dict:
    return {"cluster": "c", "group": group, "protocol": "classic", "trigger": trigger, "outcome": outcome,
            "join_seconds": join, "sync_seconds": 0.01, "total_seconds": join + 0.01}


def _snapshot(group: str, state: str = "Stable") -> dict:
    return {"cluster": "c", "group": group, "protocol": "classic", "state": state, "generation": 7,
            "member_count": 3, "state_since_ms": 1_000, "last_event_ms": 2_000, "rebalance_timeout_ms": 300_000,
            "recent_rebalance_starts_ms": [1_500]}


def _feed(sink: MetricsSink, group: str) -> None:
    for trigger in ("member_join", "heartbeat_expiry", "member_leave"):
        sink.observe(OutputKind.REBALANCE, _rebalance(group, trigger))
    sink.observe(OutputKind.REMOVAL, {"cluster": "c", "group": group, "protocol": "classic",
                                      "cause": "heartbeat_expiry", "root_cause": "process_crash"})
    sink.observe(OutputKind.SNAPSHOT, _snapshot(group, "PreparingRebalance"))


def test_a_busy_group_stays_within_the_budget_and_histograms_are_per_cluster():
    sink = MetricsSink([0.5, 5.0, 60.0], registry=CollectorRegistry())
    _feed(sink, "busy")
    page = text(sink.registry)
    assert series_per_group(page)[("c", "busy")] <= SERIES_PER_GROUP_BUDGET
    # one series with the current state, not one per state
    assert [line for line in page.splitlines() if line.startswith("rebalance_monitor_group_state{")] == [
        'rebalance_monitor_group_state{cluster="c",group="busy",protocol="classic",state="PreparingRebalance"} 1.0']
    assert 'rebalance_monitor_rebalance_duration_seconds_count{cluster="c",phase="join",protocol="classic"} 3.0' \
        in page
    assert 'rebalance_monitor_group_last_rebalance_duration_seconds{cluster="c",group="busy",phase="total"} 1.51' \
        in page
    assert 'rebalance_monitor_member_removals_total{cause="heartbeat_expiry",cluster="c",group="busy",' \
           'protocol="classic",root_cause="process_crash"} 1.0' in page
    assert "_created" not in page


def test_allow_listed_groups_get_their_own_histograms():
    sink = MetricsSink([0.5, 5.0, 60.0], registry=CollectorRegistry(), group_histograms=["payments-.*"])
    for group in ("payments-eu", "orders", "xpayments-eu"):
        _feed(sink, group)
    page = text(sink.registry)
    own = {line.split('group="')[1].split('"')[0] for line in page.splitlines()
           if line.startswith("rebalance_monitor_group_rebalance_duration_seconds_count")}
    assert own == {"payments-eu"}     # full match: xpayments-eu is not in the list
    counts = series_per_group(page)
    assert counts[("c", "orders")] <= SERIES_PER_GROUP_BUDGET
    # the opt-in adds 3 phases x (3 buckets + +Inf + sum + count) to that group only
    assert counts[("c", "payments-eu")] == counts[("c", "orders")] + 3 * 6
    # the cluster histogram counts every group
    assert 'rebalance_monitor_rebalance_duration_seconds_count{cluster="c",phase="total",protocol="classic"} 9.0' \
        in page


def test_the_group_histograms_setting_is_typed():
    from streaming.app.settings import ConfigError
    from streaming.app.settings import ReplaySettings, load
    from streaming.app.settings.wiring import metrics_sink_options
    assert metrics_sink_options(load(ReplaySettings, group_histograms=["a.*"])) == {"group_histograms": ("a.*",)}
    with pytest.raises(ConfigError, match="group_histograms"):
        load(ReplaySettings, group_histograms=["("])


def test_series_per_group_reads_escaped_label_values():
    page = ('m{cluster="c",group="a\\"b,c",x="1"} 1.0\n'
            'm{cluster="c",group="__other__"} 2.0\n'
            '# HELP m group="no"\n'
            'm{cluster="c",group="a\\"b,c",x="2"} 1.0\n')
    assert series_per_group(page) == {("c", 'a"b,c'): 2}
