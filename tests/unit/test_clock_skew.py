"""Clock skew between a log source and __consumer_offsets.

The coordinator logs "Assignment received ... generation N" (or "is now empty", or "Bumped group
epoch to N") and appends the GroupMetadata (ConsumerGroupMetadata) record of that generation
within milliseconds. Log4j times carry no zone, so a wrong `broker_timezone` shifts every log time
by whole hours against the records. The state machine pairs the two and emits `clock_skew`
records; the metrics sink exports the median per log source.
"""
from __future__ import annotations

import statistics
from collections import defaultdict

import pytest

from sinks.exposition import text
from sinks.metrics import MetricsSink
from sinks.recorders import CLOCK_SKEW_WINDOW
from state import events as E
from state.machine import GroupStateMachine
from state.model import GroupModel
from state.outputs import OutputKind
from streaming.app.local import run_local
from streaming.app.settings import DEFAULT_DURATION_BUCKETS, LogInput
from tests.support.capture_expectations import capture_inputs
from tests.support.machine_events import C1, LOG_SOURCE, G, ev, md_member, metadata


def skews(events):
    machine = GroupStateMachine(GroupModel(cluster="default", group=G))
    machine.apply_all(events)
    assert all(k != OutputKind.CLOCK_SKEW for k, _ in machine.outputs)
    return [r for k, r in machine.observations if k == OutputKind.CLOCK_SKEW]


def test_assignment_line_and_its_record_are_paired():
    [s] = skews([ev(1000, E.PREPARE_REBALANCE, 0), ev(4000, E.JOIN_COMPLETE, 1),
                 ev(4007, E.ASSIGNMENT_RECEIVED, 1), metadata(4005, 1, [md_member(C1)])])
    assert (s["source"], s["pair"], s["generation"], s["log_ts_ms"], s["record_ts_ms"], s["skew_ms"]) == \
        (LOG_SOURCE, "classic1", 1, 4007, 4005, 2)


def test_a_shifted_log_is_paired_across_the_hour_and_a_rewritten_record_is_ignored():
    hour = 3_600_000
    events = [metadata(4005, 1, [md_member(C1)]),
              metadata(9000, 1, [md_member(C1, instance="i-1")]),          # static replacement rewrite
              ev(4007 - hour, E.ASSIGNMENT_RECEIVED, 1),
              ev(20000 - hour, E.GROUP_EMPTY, 2), metadata(20001, 2, []),
              ev(30000 - hour, E.GROUP_EPOCH_BUMPED, 3, data={"log_host": "kafka-0"}),
              ev(30002, E.CG_EPOCH, 3, data={"tombstone": False})]
    got = {s["pair"]: (s["skew_ms"], s["source"]) for s in skews(events)}
    assert got == {"classic1": (2 - hour, LOG_SOURCE), "classic0": (-1 - hour, LOG_SOURCE),
                   "consumer": (-2 - hour, "kafka-0")}


def test_unpaired_lines_are_kept_for_a_few_generations_only():
    machine = GroupStateMachine(GroupModel(cluster="default", group=G))
    machine.apply_all([ev(1000 * g, E.ASSIGNMENT_RECEIVED, g) for g in range(1, 50)])
    assert len(machine.m.skew_probe["log"]) <= 8
    assert machine.observations == []


def _by_source(out):
    by = defaultdict(list)
    for s in out["clock_skew"]:
        by[s["source"]].append(s["skew_ms"])
    return by


@pytest.mark.parametrize("capture, pairs", [("kafka-2.7", 82), ("kafka-4.0", 105)])
def test_captures_with_the_right_zone_have_no_skew(capture, pairs):
    by = _by_source(run_local(*capture_inputs(capture)))
    assert sum(len(v) for v in by.values()) == pairs
    assert len(by) == 2 and all(abs(v) <= 100 for values in by.values() for v in values)


@pytest.mark.parametrize("capture, zone, hours", [("kafka-2.7", "Europe/Berlin", -1),
                                                   ("kafka-4.0", "America/New_York", 5)])
def test_a_wrong_zone_shows_as_whole_hours(capture, zone, hours):
    """The captures are UTC; read as another zone every log time moves by that zone's offset."""
    logs, offsets = capture_inputs(capture)
    logs = [LogInput(path=i.path, cluster=i.cluster, broker_timezone=zone) for i in logs]
    by = _by_source(run_local(logs, offsets))
    assert len(by) == 2
    for values in by.values():
        assert statistics.median(values) == pytest.approx(hours * 3_600_000, abs=100)


def test_metric_is_the_median_of_the_last_pairs_per_source():
    sink = MetricsSink(DEFAULT_DURATION_BUCKETS)
    for _i, skew_ms in enumerate([3_600_000] * 3 + [5] * (CLOCK_SKEW_WINDOW - 1) + [-2]):
        sink.observe("clock_skew", {"cluster": "c", "source": "c:broker1-server.log", "skew_ms": skew_ms})
    sink.observe("clock_skew", {"cluster": "c", "source": "c:broker2-server.log", "skew_ms": -3_600_004})
    page = text(sink.registry)
    # window of 15: the three hour-long pairs fell out; median of fourteen 5 ms and one -2 ms
    assert 'rebalance_monitor_log_clock_skew_seconds{cluster="c",source="c:broker1-server.log"} 0.005' in page
    assert 'rebalance_monitor_log_clock_skew_seconds{cluster="c",source="c:broker2-server.log"} -3600.004' in page
