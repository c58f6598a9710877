"""What a rebalance cost in records (issue 54 item 3, state/rebalance_cost.py): the stops the
machine reports for a measured classic rebalance, and records_delayed from the sampled end
offsets around them, measured once a sample after the rebalance has come."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from sinks.metrics import MetricsSink
from state.lag import END_BEFORE_HISTORY, END_LATER, REASON_BROKER, EndHistory, LagBook
from state.outputs import OutputKind
from state.rebalance_cost import MAX_WAIT_SAMPLES, REASON_NOT_CAUGHT_UP, ROW_GRACE_S, RebalanceCosts
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
    costs.note(_stops(("t", 0, 1_010_000), ("t", 1, 1_025_000), ("u", 0, 1_010_000)), book)
    [cost], _ = costs.due(book, 1041.0)
    assert cost["records_delayed"] == 200 + 25 and cost["records_delayed_by_topic"] == {"t": 225, "u": 0}
    assert cost["partitions_stopped"] == 3 and cost["records_delayed_unknown_reason"] is None
    assert (cost["generation"], cost["started_at_ms"], cost["completed_at_ms"]) == (5, 1_010_000, 1_030_000)
    assert costs.due(book, 1042.0)[0] == [] and costs.pending == []       # once


def test_a_consumer_groups_stops_each_count_to_their_own_end_and_name_topics_by_id():
    """A KIP-848 group's partition stops when its owner releases it and resumes when a member's
    record gains it: each stop its own span (t:1 twice, across a superseded epoch), topics by id in
    the row, by name in the commits and samples (the sampler's metadata maps them)."""
    times = [1000.0 + 10 * i for i in range(5)]
    book = _book({("t", 0): [(100 * i, at) for i, at in enumerate(times)],
                  ("t", 1): [(50 * i, at) for i, at in enumerate(times)]})
    book.note_topic_names("c", {"AAAAAAAAAAAAAAAAAAAAAA": "t"})
    _commit(book, [("t", 0, 95, 1_009_000), ("t", 1, 40, 1_009_500)])          # on revoke, before the stops
    costs = RebalanceCosts(10.0, catch_up_deadline_s=60)
    costs.note_rebalancing([{"cluster": "c", "group": "g", "protocol": "consumer",
                             "rebalance_in_progress": {"started_at_ms": 1_010_000}}], book, 1011.0)
    tid = "AAAAAAAAAAAAAAAAAAAAAA"
    costs.note(_stops((tid, 0, 1_010_000, 1_012_000), (tid, 1, 1_010_000, 1_014_000),
                      (tid, 1, 1_020_000, 1_025_000)), book)                      # completed at 1030 s
    assert costs.watching == {}
    [cost], _ = costs.due(book, 1041.0)
    # t:0 10 a second over 2 s; t:1 5 a second over 4 s and over 5 s
    assert cost["records_delayed"] == 20 + 20 + 25 and cost["records_delayed_by_topic"] == {"t": 65}
    assert cost["partitions_stopped"] == 2 and cost["records_delayed_unknown_reason"] is None
    # the lag when each first stopped, by the commits made on revoke: (100 - 95) + (50 - 40)
    assert cost["lag_before"] == 15


def test_a_rebalance_waits_for_a_sample_after_its_end_then_goes_out_unmeasured():
    book = _book({("t", 0): [(0, 1000.0), (100, 1010.0)]})
    costs = RebalanceCosts(10.0)
    costs.note(_stops(("t", 0, 1_005_000), completed_ms=1_015_000), book)
    assert costs.due(book, 1016.0)[0] == [] and len(costs.pending) == 1  # the sample after 1015 s is to come
    book.note_ends("c", [("t", 0)], {("t", 0): 200}, {}, 1020.0)
    [cost], _ = costs.due(book, 1021.0)
    assert cost["records_delayed"] == 150 - 50
    # no sample after the end within MAX_WAIT_SAMPLES intervals: not measured, and said why
    costs.note(_stops(("t", 0, 1_015_000), completed_ms=1_025_000), book)
    assert costs.due(book, 1025.0 + 10 * MAX_WAIT_SAMPLES)[0] == []
    [late], _ = costs.due(book, 1025.0 + 10 * MAX_WAIT_SAMPLES + 1)
    assert late["records_delayed"] is None and late["records_delayed_unknown_reason"] == END_LATER


def test_a_stop_older_than_the_samples_or_a_failed_partition_is_not_measured():
    book = _book({("t", 0): [(0, 1000.0), (100, 1040.0)]})
    costs = RebalanceCosts(10.0)
    costs.note(_stops(("t", 0, 990_000)), book)                 # a backlog's rebalance: before the history
    [old], _ = costs.due(book, 1041.0)
    assert old["records_delayed"] is None and old["records_delayed_unknown_reason"] == END_BEFORE_HISTORY
    book.note_ends("c", [("t", 0)], {}, {("t", 0): REASON_BROKER}, 1050.0)
    book2 = LagBook(10.0)
    book2.note_commits({"cluster": "c", "group": "g", "offsets": [["t", 0, 0, 1]]})
    book2.note_ends("c", [("t", 0)], {}, {("t", 0): REASON_BROKER}, 1050.0)
    costs.note(_stops(("t", 0, 1_010_000)), book2)
    [failed], _ = costs.due(book2, 1051.0)
    assert failed["records_delayed_unknown_reason"] == REASON_BROKER


@pytest.mark.parametrize("capture", ["kafka-2.7", "kafka-4.0"])
def test_the_machine_reports_the_stops_of_each_measured_rebalance(capture):
    """Each PARTITION_STOPS row belongs to a rebalance record, and its stops add up to that
    record's partitions and partition-seconds (state/impact.py), but for what a later poll-timeout
    decision adds (partition_seconds_added: not in records_delayed, state/rebalance_cost.py). A
    classic rebalance's stops end at its completion; a consumer group's each at its own end, by
    the completion."""
    out = run_local(*capture_inputs(capture))
    rebalances = {(r["group"], r["generation"], r["started_at_ms"]): r for r in out[OutputKind.REBALANCE]}
    added = {(d["group"], d["generation"], d["started_at_ms"]): d.get("partition_seconds_added") or 0.0
             for d in out[OutputKind.REBALANCE_TRIGGER]}
    rows = out[OutputKind.PARTITION_STOPS]
    assert rows
    protocols = set()
    for row in rows:
        key = (row["group"], row["generation"], row["started_at_ms"])
        r = rebalances[key]
        protocols.add(r["protocol"])
        assert r["completed_at_ms"] == row["completed_at_ms"]
        assert len({(t, p) for t, p, *_ in row["stops"]}) == r["partitions_stopped"]
        if r["protocol"] == "classic":
            assert all(len(stop) == 3 for stop in row["stops"])
            seconds = sum(row["completed_at_ms"] - at for _, _, at in row["stops"]) / 1000
        else:
            assert r["protocol"] == "consumer" and all(len(stop) == 4 for stop in row["stops"])
            assert all(start <= end <= row["completed_at_ms"] for _, _, start, end in row["stops"]), row
            seconds = sum(end - start for _, _, start, end in row["stops"]) / 1000
        assert seconds + added.get(key, 0.0) == pytest.approx(r["partition_seconds_stopped"], abs=0.01)
    # not a group that emptied: nobody resumed its partitions (no completion)
    measured = [r for r in rebalances.values() if r["protocol"] in ("classic", "consumer") and r["partitions_stopped"]
                and r["completed_at_ms"] is not None]
    assert len(rows) == len(measured)
    assert protocols == ({"classic"} if capture == "kafka-2.7" else {"classic", "consumer"})


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


def test_catch_ups_on_metrics_a_histogram_per_cluster_and_the_late_ones_per_group():
    sink = MetricsSink([1.0])
    base = {"cluster": "c", "group": "g", "generation": 1, "started_at_ms": 1, "completed_at_ms": 2,
            "lag_before": 10, "lag_after": 5, "measured_at_ms": 3}
    sink.observe(OutputKind.CATCH_UP, {**base, "catch_up_seconds": 19.0, "caught_up_at_ms": 19_002,
                                       "catch_up_unknown_reason": None})
    sink.observe(OutputKind.CATCH_UP, {**base, "catch_up_seconds": None, "caught_up_at_ms": None,
                                       "catch_up_unknown_reason": REASON_NOT_CAUGHT_UP})
    sink.observe(OutputKind.CATCH_UP, {**base, "catch_up_seconds": None, "caught_up_at_ms": None,
                                       "catch_up_unknown_reason": "committed_unknown"})
    value = sink.registry.get_sample_value
    assert value("rebalance_monitor_rebalance_catch_up_seconds_bucket", {"cluster": "c", "le": "15.0"}) == 0
    assert value("rebalance_monitor_rebalance_catch_up_seconds_bucket", {"cluster": "c", "le": "30.0"}) == 1
    assert value("rebalance_monitor_rebalance_catch_up_seconds_count", {"cluster": "c"}) == 1
    from prometheus_client import generate_latest
    page = generate_latest(sink.registry).decode()
    assert 'rebalance_monitor_rebalances_not_caught_up_total{cluster="c",group="g"} 1.0' in page


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


def _commit(book, commits):
    """commits: [(topic, partition, offset, commit time ms)] of group g."""
    book.note_commits({"cluster": "c", "group": "g", "offsets": [list(c) for c in commits]})


def test_the_group_catches_up_when_its_lag_on_the_stopped_partitions_is_back_to_its_level_before():
    # 10 records a second on t:0 and t:1 from 1000 s on; the group consumed up to 50 behind
    times = [1000.0 + 10 * i for i in range(9)]
    book = _book({("t", 0): [(100 * i, at) for i, at in enumerate(times[:4])],
                  ("t", 1): [(100 * i, at) for i, at in enumerate(times[:4])]})
    _commit(book, [("t", 0, 50, 1_009_000), ("t", 1, 60, 1_009_000)])         # before the stop at 1010 s
    costs = RebalanceCosts(10.0, catch_up_deadline_s=60)
    # a batch shows the group rebalancing (its rebalance began at 1010 s): its offsets are kept
    costs.note_rebalancing([{"cluster": "c", "group": "g", "protocol": "classic",
                             "rebalance_in_progress": {"started_at_ms": 1_010_000}}], book, 1011.0)
    _commit(book, [("t", 0, 100, 1_012_000), ("t", 1, 100, 1_012_000)])       # the next ones came after
    assert costs.due(book, 1012.5) == ([], [])
    _commit(book, [("t", 0, 102, 1_031_000), ("t", 1, 102, 1_031_000)])       # (new owners: after the end)
    assert costs.due(book, 1031.2) == ([], [])
    _commit(book, [("t", 0, 103, 1_031_300)])
    # its row comes a few seconds after the completion: the watch saw the commits before it
    costs.note(_stops(("t", 0, 1_010_000), ("t", 1, 1_010_000)), book)              # completed at 1030 s
    assert costs.pending[0].seen == [[(1_031_000, 102)], [(1_031_000, 102)]]
    assert costs.pending[0].at_completion == [100, 100] and costs.watching == {}
    _commit(book, [("t", 0, 105, 1_031_500)])
    [cost], catch_ups = costs.due(book, 1031.0)
    # lag before: (100 - 50) + (100 - 60), by the offsets kept while it rebalanced
    assert cost["lag_before"] == 90 and cost["catch_up_deadline_ms"] == 1_090_000 and catch_ups == []
    # after it: a commit at 1035 s still 150 behind on t:0; t:1 not committed since (300 - 100)
    _commit(book, [("t", 0, 200, 1_035_000)])
    for i, at in enumerate(times[4:6], start=4):
        book.note_ends("c", [("t", 0), ("t", 1)], {("t", 0): 100 * i, ("t", 1): 100 * i}, {}, at)
    assert costs.due(book, 1051.0) == ([], []) and len(costs.catching_up) == 1
    # both within 50 by 1048 s and 1049 s: caught up at the newer commit, 19 s after the completion
    _commit(book, [("t", 0, 440, 1_048_000), ("t", 1, 460, 1_049_000)])
    book.note_ends("c", [("t", 0), ("t", 1)], {("t", 0): 600, ("t", 1): 600}, {}, 1060.0)
    [], [caught] = costs.due(book, 1060.5)
    assert (caught["catch_up_seconds"], caught["caught_up_at_ms"], caught["lag_before"]) == (19.0, 1_049_000, 90)
    assert caught["lag_after"] == (480 - 440) + (490 - 460) and caught["catch_up_unknown_reason"] is None
    assert costs.due(book, 1061.0) == ([], []) and costs.catching_up == []    # once


def test_a_group_that_does_not_catch_up_by_the_deadline_is_reported_so():
    times = [1000.0 + 10 * i for i in range(5)]
    book = _book({("t", 0): [(100 * i, at) for i, at in enumerate(times)]})
    _commit(book, [("t", 0, 90, 1_009_000)])
    costs = RebalanceCosts(10.0, catch_up_deadline_s=20)
    costs.note(_stops(("t", 0, 1_010_000)), book)
    [cost], [] = costs.due(book, 1041.0)
    assert cost["lag_before"] == 10
    _commit(book, [("t", 0, 300, 1_045_000)])          # 150 behind at its commit, never better
    book.note_ends("c", [("t", 0)], {("t", 0): 500}, {}, 1050.0)
    assert costs.due(book, 1049.9) == ([], [])
    [], [late] = costs.due(book, 1050.0)
    assert late["catch_up_seconds"] is None and late["catch_up_unknown_reason"] == REASON_NOT_CAUGHT_UP
    assert late["lag_after"] == 150


def test_an_idle_partition_catches_up_at_the_completion_and_an_unknown_commit_is_not_awaited():
    times = [1000.0 + 10 * i for i in range(5)]
    book = _book({("u", 0): [(7, at) for at in times]})
    _commit(book, [("u", 0, 7, 1_005_000)])             # nothing waiting, no commit since (librdkafka)
    costs = RebalanceCosts(10.0)
    costs.note(_stops(("u", 0, 1_010_000)), book)
    [cost], [caught] = costs.due(book, 1041.0)
    assert cost["lag_before"] == 0 and caught["catch_up_seconds"] == 0.0
    # not seen rebalancing, and its last two commits came after the completion: its lag before is
    # not known, nothing awaited
    other = _book({("t", 0): [(100 * i, at) for i, at in enumerate(times)]})
    _commit(other, [("t", 0, 150, 1_031_000), ("t", 0, 160, 1_032_000)])
    costs.note(_stops(("t", 0, 1_010_000)), other)
    [cost], [] = costs.due(other, 1041.0)
    assert cost["records_delayed"] == 200 and cost["lag_before"] is None and cost["catch_up_deadline_ms"] is None
    assert costs.catching_up == []


def test_the_report_ranks_rebalances_by_records_delayed_and_says_the_catch_up():
    from sinks.report.page import costliest_table
    from sinks.report.data import GroupView
    from sinks.report.svg import impact_line
    from state.rebalance_cost import apply_rebalance_costs
    base = {"cluster": "c", "group": "g", "partitions_stopped": 4, "trigger": "member_join", "outcome": "stable"}
    cheap = {**base, "generation": 5, "started_at_ms": 1_010_000, "partition_seconds_stopped": 98.0}
    costly = {**base, "generation": 6, "started_at_ms": 1_050_000, "partition_seconds_stopped": 12.0}
    costs = [{"cluster": "c", "group": "g", "generation": g, "started_at_ms": t, "records_delayed": n,
              "records_delayed_unknown_reason": None} for g, t, n in ((5, 1_010_000, 10), (6, 1_050_000, 900))]
    catch_ups = [{"cluster": "c", "group": "g", "generation": 6, "started_at_ms": 1_050_000, "catch_up_seconds": 12.5,
                  "catch_up_unknown_reason": None},
                 {"cluster": "c", "group": "g", "generation": 5, "started_at_ms": 1_010_000, "catch_up_seconds": None,
                  "catch_up_unknown_reason": REASON_NOT_CAUGHT_UP}]
    first, second = apply_rebalance_costs([cheap, costly], costs, catch_ups)
    assert impact_line(second).endswith("; the group was back to its lag before it 12.5 s after")
    assert impact_line(first).endswith("; catch-up: not caught up")
    view = GroupView("c", "g")
    view.rebalances += [first, second]
    table = costliest_table(SimpleNamespace(groups=[view]))       # type: ignore[arg-type]
    assert table.index(">900<") < table.index(">10<") and ">12.5<" in table


def test_without_a_batch_that_saw_it_rebalancing_the_commit_on_revoke_gives_the_lag_before():
    """A rebalance within one micro-batch: the newest commit by the completion, a commit on revoke
    after the stop, counts with the end offset at its own time (the consumer stopped there)."""
    times = [1000.0 + 10 * i for i in range(5)]
    book = _book({("t", 0): [(100 * i, at) for i, at in enumerate(times)]})
    _commit(book, [("t", 0, 50, 1_009_000)])
    _commit(book, [("t", 0, 115, 1_012_000)])          # on revoke: 2 s after the stop, 5 behind
    costs = RebalanceCosts(10.0)
    costs.note(_stops(("t", 0, 1_010_000)), book)
    [cost], _ = costs.due(book, 1041.0)
    assert cost["lag_before"] == 120 - 115 and costs.watching == {}


def test_the_catch_up_is_the_first_commit_that_brought_the_lag_back_though_later_ones_came_first():
    """Commits come each micro-batch, end-offset samples every 10 s: the moments between two
    samples are judged once the later sample comes, each at its own commit."""
    times = [1000.0 + 10 * i for i in range(4)]
    book = _book({("t", 0): [(100 * i, at) for i, at in enumerate(times)]})
    _commit(book, [("t", 0, 95, 1_009_500)])                       # 5 behind at the stop (1010 s)
    costs = RebalanceCosts(10.0)
    costs.note(_stops(("t", 0, 1_010_000)), book)
    [cost], [] = costs.due(book, 1030.5)
    assert cost["lag_before"] == 100 - 95
    for offset, at_ms in ((310, 1_032_000), (330, 1_033_000), (338, 1_034_000)):
        _commit(book, [("t", 0, offset, at_ms)])     # 10, 0 and 2 behind at their commits
        assert costs.due(book, at_ms / 1000 + 0.1) == ([], [])      # no sample after them yet
    book.note_ends("c", [("t", 0)], {("t", 0): 400}, {}, 1040.0)
    [], [caught] = costs.due(book, 1040.5)
    assert (caught["catch_up_seconds"], caught["lag_after"]) == (3.0, 0)


def test_a_watched_rebalance_that_stops_nothing_is_forgotten_a_grace_after_it_ended():
    book = _book({("t", 0): [(0, 1000.0)]})
    costs = RebalanceCosts(10.0)
    rebalancing = {"cluster": "c", "group": "g", "protocol": "classic",
                   "rebalance_in_progress": {"started_at_ms": 1_000_000}}
    costs.note_rebalancing([rebalancing], book, 1000.0)
    costs.note_rebalancing([rebalancing], book, 1001.0)          # still in it: one watch
    assert list(costs.watching) == [("c", "g", 1_000_000)]
    costs.note_rebalancing([{**rebalancing, "rebalance_in_progress": None}], book, 1002.0)   # a first join: no row
    costs.due(book, 1002.0 + ROW_GRACE_S)
    assert list(costs.watching) == [("c", "g", 1_000_000)]
    costs.due(book, 1002.1 + ROW_GRACE_S)
    assert costs.watching == {} and costs.watched == {}
