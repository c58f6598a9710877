"""What a rebalance cost in records (issue 54 item 3, state/rebalance_cost.py): the stops the
machine reports for a measured classic rebalance, and records_delayed from the sampled end
offsets around them, measured once a sample after the rebalance has come."""
from __future__ import annotations

import pytest

from sinks.metrics import MetricsSink
from state.lag import END_BEFORE_HISTORY, END_LATER, REASON_BROKER, EndHistory, LagBook
from state.outputs import OutputKind
from state.rebalance_cost import MAX_WAIT_SAMPLES, RebalanceCosts
from streaming.app.local import run_local
from tests.support.capture_expectations import capture_inputs


def test_the_end_offset_at_a_moment_is_interpolated_between_the_samples_around_it():
    h = EndHistory()
    h.add(100, 1000.0)
    h.add(100, 1010.0)          # idle until 1010
    h.add(200, 1020.0)
    h.add(300, 1030.0)
    assert h.offset_at(999.0) is None               # before the history
    assert h.offset_at(1005.0) == 100
    assert h.offset_at(1015.0) == 150               # half way from (100, 1010) to (200, 1020)
    assert h.offset_at(1027.5) == 275
    assert h.offset_at(1030.0) == 300
    assert h.offset_at(1030.5) is None              # no sample that new yet


def _stops(*stops, completed_ms=1_030_000):
    return {"cluster": "c", "group": "g", "generation": 5, "started_at_ms": 1_010_000,
            "completed_at_ms": completed_ms, "stops": [list(s) for s in stops]}


def _book(samples, sample_seconds=10.0):
    """samples: {(topic, partition): [(end offset, at_s), ...]}, committed to by group g."""
    book = LagBook(sample_seconds)
    book.note_commits({"cluster": "c", "group": "g", "offsets": [[t, p, 0, 1] for t, p in samples]})
    rounds = sorted({at for points in samples.values() for _, at in points})
    for at in rounds:
        ends = {tp: off for tp, points in samples.items() for off, t in points if t == at}
        book.note_ends("c", sorted(samples), ends, {}, at)
    return book


def test_records_delayed_sum_each_partitions_arrivals_over_its_own_stop():
    # t:0 grows 10 records a second, t:1 5 a second, u:0 is idle
    times = [1000.0 + 10 * i for i in range(5)]
    book = _book({("t", 0): [(100 * i, at) for i, at in enumerate(times)],
                  ("t", 1): [(50 * i, at) for i, at in enumerate(times)],
                  ("u", 0): [(7, at) for at in times]})
    costs = RebalanceCosts(10.0)
    # t:0 stopped at 1010 s, t:1 at 1025 s (a later departure), u:0 at 1010 s; all end at 1030 s
    costs.note(_stops(("t", 0, 1_010_000), ("t", 1, 1_025_000), ("u", 0, 1_010_000)))
    [cost] = costs.due(book, 1041.0)
    assert cost["records_delayed"] == 200 + 25 and cost["records_delayed_by_topic"] == {"t": 225, "u": 0}
    assert cost["partitions_stopped"] == 3 and cost["records_delayed_unknown_reason"] is None
    assert (cost["generation"], cost["started_at_ms"], cost["completed_at_ms"]) == (5, 1_010_000, 1_030_000)
    assert costs.due(book, 1042.0) == [] and costs.pending == []       # once


def test_a_rebalance_waits_for_a_sample_after_its_end_then_goes_out_unmeasured():
    book = _book({("t", 0): [(0, 1000.0), (100, 1010.0)]})
    costs = RebalanceCosts(10.0)
    costs.note(_stops(("t", 0, 1_005_000), completed_ms=1_015_000))
    assert costs.due(book, 1016.0) == [] and len(costs.pending) == 1  # the sample after 1015 s is to come
    book.note_ends("c", [("t", 0)], {("t", 0): 200}, {}, 1020.0)
    [cost] = costs.due(book, 1021.0)
    assert cost["records_delayed"] == 150 - 50
    # no sample after the end within MAX_WAIT_SAMPLES intervals: not measured, and said why
    costs.note(_stops(("t", 0, 1_015_000), completed_ms=1_025_000))
    assert costs.due(book, 1025.0 + 10 * MAX_WAIT_SAMPLES) == []
    [late] = costs.due(book, 1025.0 + 10 * MAX_WAIT_SAMPLES + 1)
    assert late["records_delayed"] is None and late["records_delayed_unknown_reason"] == END_LATER


def test_a_stop_older_than_the_samples_or_a_failed_partition_is_not_measured():
    book = _book({("t", 0): [(0, 1000.0), (100, 1040.0)]})
    costs = RebalanceCosts(10.0)
    costs.note(_stops(("t", 0, 990_000)))                 # a backlog's rebalance: before the history
    [old] = costs.due(book, 1041.0)
    assert old["records_delayed"] is None and old["records_delayed_unknown_reason"] == END_BEFORE_HISTORY
    book.note_ends("c", [("t", 0)], {}, {("t", 0): REASON_BROKER}, 1050.0)
    book2 = LagBook(10.0)
    book2.note_commits({"cluster": "c", "group": "g", "offsets": [["t", 0, 0, 1]]})
    book2.note_ends("c", [("t", 0)], {}, {("t", 0): REASON_BROKER}, 1050.0)
    costs.note(_stops(("t", 0, 1_010_000)))
    [failed] = costs.due(book2, 1051.0)
    assert failed["records_delayed_unknown_reason"] == REASON_BROKER


@pytest.mark.parametrize("capture", ["kafka-2.7", "kafka-4.0"])
def test_the_machine_reports_the_stops_of_each_measured_classic_rebalance(capture):
    """Each PARTITION_STOPS row belongs to a rebalance record, and its stops add up to that
    record's partitions and partition-seconds (state/impact.py), but for what a later poll-timeout
    decision adds (partition_seconds_added: not in records_delayed, state/rebalance_cost.py)."""
    out = run_local(*capture_inputs(capture))
    rebalances = {(r["group"], r["generation"], r["started_at_ms"]): r for r in out[OutputKind.REBALANCE]}
    added = {(d["group"], d["generation"], d["started_at_ms"]): d.get("partition_seconds_added") or 0.0
             for d in out[OutputKind.REBALANCE_TRIGGER]}
    rows = out[OutputKind.PARTITION_STOPS]
    assert rows
    for row in rows:
        key = (row["group"], row["generation"], row["started_at_ms"])
        r = rebalances[key]
        assert r["protocol"] == "classic" and r["completed_at_ms"] == row["completed_at_ms"]
        assert len(row["stops"]) == r["partitions_stopped"]
        seconds = sum(row["completed_at_ms"] - at for _, _, at in row["stops"]) / 1000
        assert seconds + added.get(key, 0.0) == pytest.approx(r["partition_seconds_stopped"], abs=0.01)
    measured = [r for r in rebalances.values() if r["protocol"] == "classic" and r["partitions_stopped"]]
    assert len(rows) == len(measured)


def test_records_delayed_count_per_group_on_metrics():
    sink = MetricsSink([1.0])
    base = {"cluster": "c", "group": "g", "generation": 1, "started_at_ms": 1, "completed_at_ms": 2,
            "partitions_stopped": 1, "records_delayed_by_topic": {}, "measured_at_ms": 3}
    sink.observe(OutputKind.REBALANCE_COST, {**base, "records_delayed": 40, "records_delayed_unknown_reason": None})
    sink.observe(OutputKind.REBALANCE_COST, {**base, "records_delayed": None,
                                             "records_delayed_unknown_reason": END_BEFORE_HISTORY})
    from prometheus_client import generate_latest
    page = generate_latest(sink.registry).decode()
    assert 'rebalance_monitor_rebalance_records_delayed_total{cluster="c",group="g"} 40.0' in page


def test_the_report_says_what_a_rebalance_delayed():
    from sinks.report.svg import impact_line
    from state.rebalance_cost import apply_rebalance_costs
    r = {"cluster": "c", "group": "g", "generation": 5, "started_at_ms": 1_010_000, "partitions_stopped": 4,
         "partition_seconds_stopped": 98.0}
    other = {**r, "generation": 6, "started_at_ms": 1_050_000}
    cost = {"cluster": "c", "group": "g", "generation": 5, "started_at_ms": 1_010_000, "records_delayed": 1904,
            "records_delayed_unknown_reason": None}
    shown, untouched = apply_rebalance_costs([r, other], [cost])
    assert impact_line(shown).endswith("; 1,904 records arrived on them while stopped")
    assert untouched == other and "records" not in impact_line(untouched)
