"""Consumer lag (issue 54 items 1, 2, 5): the lag book (state/lag.py), the committed offsets the
stateful step sends, the sampler (streaming/app/lag_sampler.py) and the gauges (sinks/lag_gauges.py)."""
from __future__ import annotations

import itertools
import json
import logging
import threading
import types

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from state import events as E
from state.lag import HISTORY_SAMPLES, REASON_BROKER, REASON_NOT_AUTHORIZED, REASON_NOT_SAMPLED, REASON_STALE, REASON_TOPIC_MISSING, LagBook
from state.outputs import OutputKind


def _commits(group, *offsets, cluster="c"):
    return {"cluster": cluster, "group": group, "offsets": [list(o) for o in offsets]}


def _book(*commits, sample_seconds=10.0):
    book = LagBook(sample_seconds)
    for record in commits:
        book.note_commits(record)
    return book


def _lags(book, now):
    return {(lag.group, lag.topic): lag for lag in book.lags(now)}


def test_records_are_summed_over_partitions_and_clamped_at_zero():
    book = _book(_commits("g", ("t", 0, 90, 1000), ("t", 1, 200, 1000), ("u", 0, 5, 1000)))
    assert book.partitions("c") == [("t", 0), ("t", 1), ("u", 0)]
    book.note_ends("c", book.partitions("c"), {("t", 0): 100, ("t", 1): 150, ("u", 0): 5}, {}, 1000.0)
    lags = _lags(book, 1000.0)
    assert lags[("g", "t")].records == 10          # 10 + max(0, -50)
    assert lags[("g", "u")].records == 0 and lags[("g", "u")].seconds == 0.0


def test_time_lag_is_interpolated_between_the_samples_around_the_committed_offset():
    book = _book(_commits("g", ("t", 0, 150, 1)))
    tp = [("t", 0)]
    book.note_ends("c", tp, {("t", 0): 100}, {}, 1000.0)
    book.note_ends("c", tp, {("t", 0): 100}, {}, 1010.0)     # idle: the end was 100 until 1010
    book.note_ends("c", tp, {("t", 0): 200}, {}, 1020.0)
    book.note_ends("c", tp, {("t", 0): 300}, {}, 1030.0)
    lag = _lags(book, 1040.0)[("g", "t")]
    # 150 is half way from 100 (last seen 1010) to 200 (first seen 1020): written at 1015
    assert lag.records == 150 and lag.seconds == pytest.approx(25.0)
    book.note_commits(_commits("g", ("t", 0, 300, 2)))
    assert _lags(book, 1040.0)[("g", "t")].seconds == 0.0    # caught up


def test_an_offset_older_than_the_history_is_placed_by_its_rate():
    book = _book(_commits("g", ("t", 0, 0, 1)))
    for i in range(HISTORY_SAMPLES + 4):
        book.note_ends("c", [("t", 0)], {("t", 0): 1000 + 100 * i}, {}, 1000.0 + 10 * i)
    lag = _lags(book, 1000.0 + 10 * (HISTORY_SAMPLES + 3))[("g", "t")]
    # 10 records a second: offset 0 was the end 100 s before offset 1000's time
    assert lag.seconds == pytest.approx(10 * (HISTORY_SAMPLES + 3) + 100.0)


def test_the_newest_commit_wins_and_a_tombstone_removes_the_partition():
    book = _book(_commits("g", ("t", 0, 50, 2000)), _commits("g", ("t", 0, 70, 1000)))
    book.note_ends("c", [("t", 0)], {("t", 0): 100}, {}, 5.0)
    assert _lags(book, 5.0)[("g", "t")].records == 50          # the older commit came later: ignored
    book.note_commits(_commits("g", ("t", 0, 10, 3000)))       # a reset to an earlier offset
    assert _lags(book, 5.0)[("g", "t")].records == 90
    book.note_commits(_commits("g", ("t", 0, None, 4000)))
    assert book.lags(5.0) == [] and book.partitions("c") == []


def test_unknown_until_sampled_when_failing_and_when_stale():
    book = _book(_commits("g", ("t", 0, 5, 1)), sample_seconds=10.0)
    assert _lags(book, 0.0)[("g", "t")].unknown == REASON_NOT_SAMPLED
    book.note_ends("c", [("t", 0)], {("t", 0): 10}, {}, 100.0)
    book.note_ends("c", [("t", 0)], {}, {("t", 0): REASON_TOPIC_MISSING}, 110.0)
    assert _lags(book, 120.0)[("g", "t")].records == 5         # the last sample is recent enough
    lag = _lags(book, 131.0)[("g", "t")]                        # older than 3 intervals: unknown
    assert (lag.records, lag.unknown) == (None, REASON_TOPIC_MISSING)
    book.note_ends("c", [("t", 0)], {("t", 0): 12}, {}, 140.0)
    assert _lags(book, 141.0)[("g", "t")].records == 7
    assert _lags(book, 171.0)[("g", "t")].unknown == REASON_STALE    # no round since


def test_a_forgotten_group_loses_its_lag_and_unused_histories_go():
    book = _book(_commits("g", ("t", 0, 5, 1)), _commits("h", ("u", 0, 5, 1)))
    book.note_ends("c", book.partitions("c"), {("t", 0): 9, ("u", 0): 9}, {}, 1.0)
    book.forget_group(("c", "g"))
    assert [lag.group for lag in book.lags(1.0)] == ["h"]
    book.note_ends("c", book.partitions("c"), {("u", 0): 9}, {}, 2.0)
    assert list(book._ends) == [("c", ("u", 0))]


def test_the_stateful_step_sends_the_newest_committed_offset_per_partition():
    from streaming.spark.stateful import committed_offsets_row
    packed = {"commits": [["t", 0, 40, 1000, 2], ["t", 1, 7, 1000, 1]]}
    events = [(E.OFFSET_COMMITS, packed, 1000), (E.OFFSET_COMMIT, json.dumps(
        {"topic": "t", "partition": 0, "offset": 45, "commit_ts_ms": 1500, "count": 1}), 1500),
        (E.OFFSET_TOMBSTONE, {"topic": "t", "partition": 1}, 1600), ("group_metadata", {}, 1700)]
    row = committed_offsets_row("c", "g", events)
    assert row is not None
    kind, cluster, group, ts, text = row
    assert (kind, cluster, group, ts) == (OutputKind.COMMITTED_OFFSETS, "c", "g", 1600)
    assert json.loads(text) == {"cluster": "c", "group": "g", "offsets": [["t", 0, 45, 1500], ["t", 1, None, 1600]]}
    assert committed_offsets_row("c", "g", [("group_metadata", {}, 1)]) is None


class FakeEnds:
    def __init__(self):
        self.answers: list = []
        self.closed = threading.Event()
        self.offsets: dict[str, dict] = {}
        self.asked: list[list[str]] = []

    def committed(self, groups):
        self.asked.append(list(groups))
        return {g: self.offsets[g] for g in groups if g in self.offsets}

    def fetch(self, partitions):
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self):
        self.closed.set()


def test_the_sampler_counts_each_reason_and_logs_it_once(caplog):
    from streaming.app.lag_sampler import LagSampler
    book = _book(_commits("g", ("t", 0, 5, 1), ("gone", 0, 1, 1)))
    source, counted = FakeEnds(), []
    sampler = LagSampler(book, "c", source, count_error=lambda reason, n: counted.append((reason, n)),
                         clock=iter(range(100, 200, 10)).__next__)
    source.answers = [({("t", 0): 9}, {("gone", 0): REASON_TOPIC_MISSING})] * 2 + [
        RuntimeError("boom"), ({("t", 0): 9, ("gone", 0): 3}, {})]
    with caplog.at_level(logging.WARNING, logger="rebalance_monitor.lag"):
        for _ in range(4):
            sampler.sample_once()
    assert counted == [(REASON_TOPIC_MISSING, 1), (REASON_TOPIC_MISSING, 1), ("list_offsets_error", 2)]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4, lines        # topic_missing starts, ends; list_offsets_error starts, ends
    assert "topic_missing" in lines[0] and "gone" in lines[0]
    assert _lags(book, 131.0)[("g", "gone")].records == 2


def test_the_sampler_thread_ends_at_stop_and_closes_its_client():
    from streaming.app.lag_sampler import LagSampler
    book = _book(_commits("g", ("t", 0, 5, 1)), sample_seconds=0.01)
    source = FakeEnds()
    source.answers = [({("t", 0): 9}, {})] * 1000
    stop = threading.Event()
    sampler = LagSampler(book, "c", source)
    thread = sampler.start(stop)
    stop.set()
    thread.join(10)
    assert not thread.is_alive() and source.closed.is_set()


def test_error_reasons_from_kafka_python_errors():
    from kafka import errors

    from streaming.app.lag_sampler import error_reason
    assert error_reason(errors.KafkaTimeoutError()) == REASON_BROKER
    assert error_reason(errors.KafkaConnectionError()) == REASON_BROKER
    assert error_reason(errors.TopicAuthorizationFailedError()) == "not_authorized"
    assert error_reason(errors.UnknownTopicOrPartitionError()) == REASON_TOPIC_MISSING
    assert error_reason(ValueError("x")) == "list_offsets_error"


def test_lag_gauges_only_for_groups_with_gauges_of_their_own():
    from sinks.metrics import MetricsSink
    sink = MetricsSink([1.0], registry=CollectorRegistry(), max_groups=2)
    book = _book(*(_commits(g, ("t", 0, 5, 1)) for g in ("live", "empty", "dead", "over", "nosnap")))
    sink.attach_lag(book, "c")
    book.note_ends("c", book.partitions("c"), {("t", 0): 9}, {}, 1e12)
    for group, state in (("live", "Stable"), ("empty", "Empty"), ("dead", "Dead"), ("over", "Stable")):
        sink.observe(OutputKind.SNAPSHOT, {"cluster": "c", "group": group, "state": state, "protocol": "classic"})
    text = generate_latest(sink.registry).decode()
    lines = [line for line in text.splitlines() if line.startswith("rebalance_monitor_group_topic_lag{")]
    assert sorted(lines) == ['rebalance_monitor_group_topic_lag{cluster="c",group="empty",topic="t"} 4.0',
                             'rebalance_monitor_group_topic_lag{cluster="c",group="live",topic="t"} 4.0']
    assert 'rebalance_monitor_lag_sample_errors_total{cluster="c",reason="topic_missing"} 0.0' in text


def test_lag_sample_seconds_precedence(tmp_path, monkeypatch):
    from streaming.app.cli import build_parser
    from streaming.app.cli.run import run_settings
    cfg = tmp_path / "monitor.toml"
    cfg.write_text('checkpoint_location = "/tmp/c"\n[kafka]\nbootstrap_servers = "k:9092"\n[lag]\nsample_seconds = 5\n')
    args = ["run", "--config", str(cfg)]
    assert run_settings(build_parser().parse_args(args)).lag.sample_seconds == 5
    monkeypatch.setenv("REBALANCE_MONITOR_LAG__SAMPLE_SECONDS", "7")
    assert run_settings(build_parser().parse_args(args)).lag.sample_seconds == 7
    assert run_settings(build_parser().parse_args([*args, "--lag-sample-seconds", "3"])).lag.sample_seconds == 3
    monkeypatch.delenv("REBALANCE_MONITOR_LAG__SAMPLE_SECONDS")
    cfg.write_text('checkpoint_location = "/tmp/c"\n[kafka]\nbootstrap_servers = "k:9092"\n')
    assert run_settings(build_parser().parse_args(args)).lag.sample_seconds == 10


def test_run_stateful_calls_send_committed_offsets_folded_or_not():
    """process_group and process_bucket (folded commits too) send each call's COMMITTED_OFFSETS
    row with committed_offsets; without it (replay, demo) none."""
    import pandas as pd

    from streaming.rows import PACKED_EVENT, event_row, pack_event_row
    from streaming.spark.stateful import process_bucket, process_group
    from tests.unit.test_stateful_call import FakeState, _commit, _frame, _metadata

    def kinds_and_offsets(frames):
        out: dict[str, list[dict]] = {}
        for frame in frames:
            for kind, text in zip(frame["kind"], frame["record_json"]):
                out.setdefault(kind, []).append(json.loads(text))
        return out

    group_state = FakeState(watermark=10_000)
    first = kinds_and_offsets(process_group(("c", "g"), iter([_frame([_metadata(1_000), _commit(2_000, 0)])]),
                                            group_state, committed_offsets=True))
    assert first[OutputKind.COMMITTED_OFFSETS] == [{"cluster": "c", "group": "g", "offsets": [["t", 0, 2000, 2000]]}]
    plain = kinds_and_offsets(process_group(("c", "g"), iter([_frame([_commit(3_000, 0)])]), group_state))
    assert OutputKind.COMMITTED_OFFSETS not in plain

    def bucket_frame(events):
        return pd.DataFrame({"group": [ev.group for ev in events],
                             PACKED_EVENT: [pack_event_row(event_row(ev)) for ev in events]})

    bucket_state = FakeState(watermark=10_000)
    for events, offset in (([_metadata(1_000), _commit(2_000, 0)], 2000), ([_commit(3_000, 0)], 3000)):
        out = kinds_and_offsets(process_bucket(("c", 0), iter([bucket_frame(events)]), bucket_state,
                                               committed_offsets=True))
        assert out[OutputKind.COMMITTED_OFFSETS][0]["offsets"] == [["t", 0, offset, offset]]
    assert out[OutputKind.CLOCK][0]["folds"] == 1          # the second call folded its commit


def test_after_a_restart_known_groups_get_their_committed_offsets_once():
    """The query does not read a quiet group's commits again after a restart: the sampler
    fetches them (OffsetFetch) for the known groups the book lacks; a decoded commit wins."""
    from streaming.app.lag_sampler import LagSampler
    book = _book(_commits("busy", ("t", 0, 50, 5)))
    source = FakeEnds()
    source.offsets = {"quiet": {("t", 0): 40, ("t", 1): 7}, "busy": {("t", 0): 1}}
    source.answers = [({("t", 0): 60, ("t", 1): 10}, {})] * 3
    known = [("c", "busy"), ("c", "quiet"), ("c", "nothing"), ("other", "quiet")]
    sampler = LagSampler(book, "c", source, groups=lambda: known, clock=lambda: 100.0)
    sampler.sample_once()
    known.append(("c", "newer"))                             # known later: brings its own commits
    sampler.sample_once()
    assert sorted(source.asked[0]) == ["nothing", "quiet"] and len(source.asked) == 1   # once, those the book lacks
    lags = _lags(book, 100.0)
    assert (lags[("busy", "t")].records, lags[("quiet", "t")].records) == (10, 23)
    book.note_commits(_commits("quiet", ("t", 1, 8, 1)))    # any decoded commit wins
    sampler.sample_once()
    assert _lags(book, 100.0)[("quiet", "t")].records == 22


def test_known_groups_are_fetched_in_chunks_for_at_most_the_seconds_of_a_round():
    """10,000 groups with series come back within a few rounds: SEED_CHUNK groups an OffsetFetch,
    as many chunks as SEED_SECONDS_PER_ROUND allows; the rest in the next rounds."""
    from streaming.app import lag_sampler
    book = _book()
    source = FakeEnds()
    known = [("c", f"g{i:05d}") for i in range(2 * lag_sampler.SEED_CHUNK + 7)]
    source.offsets = {g: {("t", i % 4): i} for i, (_, g) in enumerate(known)}
    source.answers = [({("t", p): 10_000 for p in range(4)}, {})] * 3
    ticks = itertools.count(0.0, 0.9)   # each read of the clock: 0.9 s later
    sampler = lag_sampler.LagSampler(book, "c", source, groups=lambda: known, clock=lambda: 100.0,
                                     monotonic=lambda: float(next(ticks)))
    assert lag_sampler.SEED_SECONDS_PER_ROUND == 2.0
    sampler.sample_once()           # the clock reads 0, 0.9 (chunk 1), 1.8 (chunk 2), 2.7: the round's 2 s are up
    assert [len(a) for a in source.asked] == [lag_sampler.SEED_CHUNK] * 2
    sampler.sample_once()           # the 7 left
    sampler.sample_once()           # nothing left: nothing asked
    assert [len(a) for a in source.asked] == [lag_sampler.SEED_CHUNK] * 2 + [7]
    assert sorted(g for asked in source.asked for g in asked) == [g for _, g in known]
    assert all(book.has_group(key) for key in known)


def test_committed_offsets_asked_group_by_group_when_the_whole_request_fails():
    """A group-level error (a coordinator loading, a group the principal may not read) fails
    kafka-python's request for every group: each is then asked alone, and only the failing one
    is left out."""
    from kafka.errors import GroupAuthorizationFailedError
    from kafka.structs import OffsetAndMetadata, TopicPartition

    from streaming.app.lag_sampler import KafkaEndOffsets

    class Admin:
        def __init__(self):
            self.calls: list = []

        def list_group_offsets(self, specs):
            groups = list(specs)
            self.calls.append(groups)
            if "denied" in groups:
                raise GroupAuthorizationFailedError("denied")
            return {g: {TopicPartition("t", 0): OffsetAndMetadata(5, "", -1),
                        TopicPartition("t", 1): OffsetAndMetadata(-1, "", -1)} for g in groups}
    source = KafkaEndOffsets("k:9092", {}, 10.0)
    source._admin = admin = Admin()
    assert source.committed(["a", "denied", "b"]) == {"a": {("t", 0): 5}, "b": {("t", 0): 5}}
    assert admin.calls == [["a", "denied", "b"], ["a"], ["denied"], ["b"]]
    admin.calls.clear()
    assert source.committed(["a", "b"]) == {"a": {("t", 0): 5}, "b": {("t", 0): 5}}
    assert admin.calls == [["a", "b"]]          # one request for all


def test_committed_offsets_not_asked_again_of_a_broker_that_does_not_answer():
    """A timeout or a lost connection would cost as much for every group asked alone after it: the
    request of all is not split, and the groups after a group that timed out are not asked."""
    from kafka.errors import GroupAuthorizationFailedError, KafkaTimeoutError
    from kafka.structs import OffsetAndMetadata, TopicPartition

    from streaming.app.lag_sampler import KafkaEndOffsets

    class Admin:
        def __init__(self, fail_all: Exception):
            self.calls: list = []
            self.fail_all = fail_all

        def list_group_offsets(self, specs):
            groups = list(specs)
            self.calls.append(groups)
            if len(groups) > 1:
                raise self.fail_all
            if groups == ["denied"]:
                raise GroupAuthorizationFailedError("denied")
            if groups == ["slow"]:
                raise KafkaTimeoutError("no answer")
            return {groups[0]: {TopicPartition("t", 0): OffsetAndMetadata(5, "", -1)}}
    source = KafkaEndOffsets("k:9092", {}, 10.0)
    source._admin = admin = Admin(KafkaTimeoutError("no answer"))
    assert source.committed(["a", "b"]) == {} and admin.calls == [["a", "b"]]
    source._admin = admin = Admin(GroupAuthorizationFailedError("denied"))
    assert source.committed(["a", "denied", "slow", "b"]) == {"a": {("t", 0): 5}}
    assert admin.calls == [["a", "denied", "slow", "b"], ["a"], ["denied"], ["slow"]]


def test_a_group_swept_by_the_metrics_leaves_the_lag_book():
    """The lag of a Dead group goes with its other series: hidden at once, forgotten with them
    after dead_group_retention_seconds (MetricsSink.sweep)."""
    from sinks.metrics import MetricsSink
    now = [0.0]
    sink = MetricsSink([1.0], registry=CollectorRegistry(), dead_group_retention_seconds=60, clock=lambda: now[0])
    book = _book(_commits("g", ("t", 0, 5, 1)))
    sink.attach_lag(book, "c")
    book.note_ends("c", [("t", 0)], {("t", 0): 9}, {}, 1e12)
    sink.observe(OutputKind.SNAPSHOT, {"cluster": "c", "group": "g", "state": "Empty", "protocol": "classic"})
    assert "rebalance_monitor_group_topic_lag{" in generate_latest(sink.registry).decode()
    sink.observe(OutputKind.SNAPSHOT, {"cluster": "c", "group": "g", "state": "Dead", "protocol": "classic"})
    assert "rebalance_monitor_group_topic_lag{" not in generate_latest(sink.registry).decode()
    assert book.has_group(("c", "g"))
    now[0] = 61.0
    sink.sweep()
    assert not book.has_group(("c", "g")) and book.partitions("c") == []


def test_the_lag_families_are_documented_and_absent_from_a_replay():
    """Only `run` attaches the lag: a replay's page (and its goldens) does not name the families."""
    from pathlib import Path

    from sinks.metrics import MetricsSink
    sink = MetricsSink([1.0], registry=CollectorRegistry())
    assert "_lag" not in generate_latest(sink.registry).decode()
    sink.attach_lag(LagBook(10.0), "c")
    text = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    names = {m.name for m in sink.registry.collect() if "lag" in m.name}
    assert names == {"rebalance_monitor_group_topic_lag", "rebalance_monitor_group_topic_lag_seconds",
                     "rebalance_monitor_group_lag_unknown", "rebalance_monitor_lag_sample_errors",
                     "rebalance_monitor_group_partition_lag", "rebalance_monitor_group_partition_lag_seconds"}
    assert all(f"### {n}" in text or f"### {n}_total" in text for n in names)


def test_a_member_with_records_waiting_and_no_commit_is_at_risk_on_metrics_and_logged_once(caplog):
    """The lag book's commits and end offsets and the group's snapshot (state/at_risk.py): m-1
    committed t:0 at 1,000 s and nothing since, with records waiting; its rebalance timeout is
    30 s, so 15 s later it is at risk. m-2's partition is idle: never at risk."""
    from sinks.metrics import MetricsSink
    now = [1_000.0]
    sink = MetricsSink([1.0], registry=CollectorRegistry())
    sink.lag.clock = lambda: now[0]
    book = _book(_commits("g", ("t", 0, 100, 1_000_000), ("t", 1, 50, 900_000)))
    sink.attach_lag(book, "c")
    members = [{"member_id": "m-1", "client_id": "app-1", "partitions": ["t:0"], "rebalance_timeout_ms": 30_000},
               {"member_id": "m-2", "client_id": "app-2", "partitions": ["t:1"], "rebalance_timeout_ms": 30_000}]
    sink.observe(OutputKind.SNAPSHOT, {"cluster": "c", "group": "g", "state": "Stable", "protocol": "classic",
                                       "state_since_ms": 500_000, "members": members})
    gauge = 'rebalance_monitor_group_members_at_risk{cluster="c",group="g"}'

    def scrape(at):
        now[0] = at
        book.note_ends("c", book.partitions("c"), {("t", 0): 180, ("t", 1): 50}, {}, at)
        return generate_latest(sink.registry).decode()
    with caplog.at_level(logging.WARNING, logger="rebalance_monitor"):
        assert f"{gauge} 0.0" in scrape(1_014.0)
        assert f"{gauge} 1.0" in scrape(1_016.0)
        assert f"{gauge} 1.0" in scrape(1_020.0)
    lines = [r.getMessage() for r in caplog.records if "at risk" in r.getMessage()]
    assert lines == ["run: member m-1 (client app-1) of group g is at risk of a poll timeout: 1 of its partitions "
                     "have records waiting and none was committed for 16 s of its 30 s rebalance timeout "
                     "(max.poll.interval.ms)"]
    book.note_commits(_commits("g", ("t", 0, 180, 1_021_000)))      # it committed again: caught up
    assert f"{gauge} 0.0" in scrape(1_022.0)
    sink.observe(OutputKind.SNAPSHOT, {"cluster": "c", "group": "g", "state": "PreparingRebalance",
                                       "protocol": "classic", "state_since_ms": 1_030_000, "members": members})
    assert f"{gauge} 0.0" in scrape(1_100.0)                          # a rebalancing group: nobody judged


def test_lag_at_risk_fraction_is_a_checked_setting(tmp_path):
    from streaming.app.cli import build_parser
    from streaming.app.cli.run import run_settings
    cfg = tmp_path / "monitor.toml"
    cfg.write_text('checkpoint_location = "/tmp/c"\n[kafka]\nbootstrap_servers = "k:9092"\n[lag]\nat_risk_fraction = 0.8\n')
    args = ["run", "--config", str(cfg)]
    assert run_settings(build_parser().parse_args(args)).lag.at_risk_fraction == 0.8
    assert run_settings(build_parser().parse_args([*args, "--lag-at-risk-fraction", "0.3"])).lag.at_risk_fraction == 0.3
    with pytest.raises(Exception, match="at_risk_fraction"):
        run_settings(build_parser().parse_args([*args, "--lag-at-risk-fraction", "2"]))


def test_the_partitions_asked_follow_every_groups_commits():
    """LagBook.partitions is kept between rounds (a round of 100,000 partitions does not gather
    and sort them again): a partition stays while some group commits to it, goes with the last."""
    book = _book(_commits("g", ("t", 1, 5, 1), ("t", 0, 5, 1)), _commits("h", ("t", 0, 3, 1)))
    asked = book.partitions("c")
    assert asked == [("t", 0), ("t", 1)]
    asked.append(("x", 0))                                   # a copy: the book's list is its own
    assert book.partitions("c") == [("t", 0), ("t", 1)]
    book.note_commits(_commits("g", ("t", 0, None, 2)))      # h still commits to t-0
    assert book.partitions("c") == [("t", 0), ("t", 1)]
    book.forget_group(("c", "h"))
    assert book.partitions("c") == [("t", 1)]
    book.seed(("c", "q"), {("u", 0): 4, ("t", 1): 2})
    book.note_commits(_commits("g", ("t", 1, 6, 3)))         # a partition it had: nothing new
    assert book.partitions("c") == [("t", 1), ("u", 0)] and book.partitions("other") == []
    book.note_commits(_commits("g", ("t", 1, None, 4)))
    book.forget_group(("c", "q"))
    assert book.partitions("c") == []


def test_a_groups_committed_offsets_and_fresh_ends_in_one_look():
    book = _book(_commits("g", ("t", 0, 5, 1), ("t", 1, 5, 1), ("u", 0, 2, 1)), sample_seconds=10.0)
    book.note_ends("c", book.partitions("c"), {("t", 0): 9, ("u", 0): 2}, {("t", 1): REASON_BROKER}, 100.0)
    book.note_ends("c", book.partitions("c"), {("t", 0): 11}, {("u", 0): REASON_BROKER}, 125.0)
    committed, ends = book.committed_and_fresh_ends(("c", "g"), 131.0)
    assert committed == book.committed_of(("c", "g"))
    assert ends == {tp: book.fresh_end("c", tp, 131.0) for tp in committed if book.fresh_end("c", tp, 131.0) is not None}
    assert ends == {("t", 0): 11}                            # u-0's last sample is older than 3 intervals
    assert book.committed_and_fresh_ends(("c", "nobody"), 131.0) == ({}, {})


class FakeCluster:
    """kafka-python's ClusterMetadata as the last metadata answer left it: topic -> partition -> leader."""

    def __init__(self, leaders):
        self.leaders, self.unauthorized_topics = leaders, set()

    def topics(self, exclude_internal_topics=True):
        return set(self.leaders)

    def partitions_for_topic(self, topic):
        return set(self.leaders[topic]) if topic in self.leaders else None

    def leader_for_partition(self, tp):
        return self.leaders.get(tp.topic, {}).get(tp.partition)


class FakeBrokers:
    """The truth: each partition's leader and end offset, the brokers that are down; a kafka-python
    3 consumer on them (metadata answers counted, the ListOffsets requests answered by _send)."""

    def __init__(self, leaders, ends):
        self.truth, self.ends, self.down = leaders, ends, set()
        self.denied: set[str] = set()     # topics the principal may not describe (ACLs)
        self.cluster = FakeCluster({})
        self._client = types.SimpleNamespace(cluster=self.cluster)
        self._manager = types.SimpleNamespace(least_loaded_node=lambda: 1)
        self.metadata = 0
        self.asked: list[tuple[int, list]] = []
        self.named: list[list[str]] = []  # metadata requests by topic name

    def topics(self):
        """An all-topics metadata answer: it leaves out the denied topics."""
        self.metadata += 1
        self.cluster.leaders = {t: dict(ps) for t, ps in self.truth.items() if t not in self.denied}
        return set(self.cluster.leaders)

    def answer(self, node, request):
        from kafka import errors
        if type(request).__name__ == "MetadataRequest":
            names = [t.name for t in request.topics]
            self.named.append(names)
            return types.SimpleNamespace(topics=[types.SimpleNamespace(
                name=t, error_code=29 if t in self.denied else 0 if t in self.truth else 3) for t in names])
        asked = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
        self.asked.append((node, asked))
        if node in self.down:
            return errors.KafkaConnectionError("down")
        by_topic: dict[str, list] = {}
        for topic, partition in asked:
            leader = self.truth.get(topic, {}).get(partition)
            code = 3 if leader is None else 6 if leader != node else 0
            by_topic.setdefault(topic, []).append(types.SimpleNamespace(
                partition_index=partition, error_code=code, offset=self.ends.get((topic, partition), -1) if code == 0 else -1))
        return types.SimpleNamespace(API_VERSION=11, topics=[types.SimpleNamespace(name=t, partitions=ps)
                                                             for t, ps in by_topic.items()])


def _end_offsets(brokers, now):
    from streaming.app.lag_sampler import KafkaEndOffsets

    class Scripted(KafkaEndOffsets):
        def _send(self, consumer, requests):
            return {node: brokers.answer(node, request) for node, request in requests.items()}
    source = Scripted("k:9092", {}, 10.0, clock=lambda: now[0])
    source._consumer = brokers
    return source


def test_the_end_offsets_metadata_is_asked_for_again_only_when_it_may_be_out_of_date():
    """A full metadata answer is the largest thing a round of many partitions decodes: kept
    between rounds, asked for again for partitions it did not have, when an answer says it is out
    of date (then those partitions are asked again at their new leader), every minute while a
    partition asked is missing, and every 5 minutes anyway. The requests are kept with it."""
    brokers = FakeBrokers({"t": {0: 1, 1: 2}}, {("t", 0): 5, ("t", 1): 7, ("u", 0): 3})
    now = [1000.0]
    source = _end_offsets(brokers, now)
    t = [("t", 0), ("t", 1)]
    assert source.fetch(t) == ({("t", 0): 5, ("t", 1): 7}, {})
    requests = source._plan.requests()
    assert source.fetch(t) == ({("t", 0): 5, ("t", 1): 7}, {}) and brokers.metadata == 1
    assert source._plan.requests() is requests                             # made once
    brokers.truth["u"] = {0: 1}                                            # a new topic
    assert source.fetch([*t, ("u", 0)]) == ({("t", 0): 5, ("t", 1): 7, ("u", 0): 3}, {}) and brokers.metadata == 2
    brokers.truth["t"][1] = 1                                              # its leader moved
    brokers.asked.clear()
    assert source.fetch([*t, ("u", 0)]) == ({("t", 0): 5, ("t", 1): 7, ("u", 0): 3}, {}) and brokers.metadata == 3
    assert brokers.asked[-1] == (1, [("t", 1)])                            # asked again at the new leader
    del brokers.truth["u"]                                                 # deleted
    assert source.fetch([*t, ("u", 0)]) == ({("t", 0): 5, ("t", 1): 7}, {("u", 0): REASON_TOPIC_MISSING})
    assert brokers.metadata == 4
    now[0] += 30
    assert source.fetch([*t, ("u", 0)])[1] == {("u", 0): REASON_TOPIC_MISSING} and brokers.metadata == 4
    now[0] += 31                                                           # a minute: is it back?
    source.fetch([*t, ("u", 0)])
    assert brokers.metadata == 5
    source.fetch(t)                                                        # fewer partitions: known
    now[0] += 299
    source.fetch(t)
    assert brokers.metadata == 5
    now[0] += 1
    source.fetch(t)
    assert brokers.metadata == 6


def test_a_topic_the_principal_may_not_describe_is_not_authorized_and_a_deleted_one_missing():
    """An all-topics metadata answer leaves out a topic the monitor's principal may not describe
    (ACLs) as it leaves out a deleted one. Asked by name, once per answer, Kafka refuses the first
    (TOPIC_AUTHORIZATION_FAILED: not_authorized) and does not know the second (topic_missing)."""
    brokers = FakeBrokers({"t": {0: 1}, "secret": {0: 1}}, {("t", 0): 5, ("secret", 0): 9})
    brokers.denied.add("secret")
    now = [0.0]
    source = _end_offsets(brokers, now)
    asked = [("t", 0), ("secret", 0), ("gone", 0)]
    expected = ({("t", 0): 5}, {("secret", 0): REASON_NOT_AUTHORIZED, ("gone", 0): REASON_TOPIC_MISSING})
    assert source.fetch(asked) == expected
    assert brokers.named == [["gone", "secret"]]
    assert source.fetch(asked) == expected and len(brokers.named) == 1        # the same answer: not asked again
    now[0] += 61                                                                # a new answer: asked again
    assert source.fetch(asked) == expected and len(brokers.named) == 2
    brokers.denied.clear()                                                      # an ACL lifted
    now[0] += 61
    assert source.fetch(asked) == ({("t", 0): 5, ("secret", 0): 9}, {("gone", 0): REASON_TOPIC_MISSING})


def test_a_broker_that_does_not_answer_costs_only_its_partitions_once_a_round():
    from kafka import errors

    from streaming.app.lag_sampler import error_reason
    brokers = FakeBrokers({"t": {0: 1, 1: 2}, "v": {0: 2}}, {("t", 0): 5, ("t", 1): 7, ("v", 0): 1})
    source = _end_offsets(brokers, [0.0])
    asked = [("t", 0), ("t", 1), ("v", 0)]
    source.fetch(asked)
    brokers.down.add(2)
    brokers.asked.clear()
    reason = error_reason(errors.KafkaConnectionError())
    assert source.fetch(asked) == ({("t", 0): 5}, {("t", 1): reason, ("v", 0): reason})
    assert sorted(node for node, _ in brokers.asked) == [1, 2] and brokers.metadata == 2   # not asked twice
    brokers.truth["t"][1] = -1                                             # no leader now
    assert source.fetch(asked)[1] == {("t", 1): REASON_BROKER, ("v", 0): reason} and brokers.metadata == 3
    brokers.down.clear()
    brokers.truth["t"][1] = 1
    assert source.fetch(asked) == ({("t", 0): 5, ("t", 1): 7, ("v", 0): 1}, {})   # leaderless: asked again each round


def test_a_scrape_looks_at_each_group_once_and_sees_what_lags_says():
    book = _book(_commits("g", ("t", 0, 5, 1), ("t", 1, 5, 1), ("u", 0, 2, 1)), _commits("h", ("t", 0, 9, 1)))
    book.note_ends("c", book.partitions("c"), {("t", 0): 9, ("t", 1): 20, ("u", 0): 2}, {}, 100.0)
    book.note_ends("c", book.partitions("c"), {("t", 0): 11, ("t", 1): 30}, {("u", 0): REASON_BROKER}, 125.0)
    for now in (126.0, 131.0):
        for group in ("g", "h", "nobody"):
            lags, committed, ends = book.group_view(("c", group), now)
            assert lags == [lag for lag in book.lags(now) if lag.group == group]
            assert (committed, ends) == book.committed_and_fresh_ends(("c", group), now)


def test_a_group_that_only_commits_gets_a_snapshot_once_and_so_its_lag():
    """A group without membership records (an assign() consumer that commits, as Flink's source
    does) has gauges, and a lag, from its first call in `run`: kafka-consumer-groups shows its
    lag too. Its later commits send none (a replay sends its snapshot at the end)."""
    import pandas as pd

    from sinks.metrics import MetricsSink
    from streaming.rows import PACKED_EVENT, event_row, pack_event_row
    from streaming.spark.stateful import process_bucket, process_group
    from tests.unit.test_stateful_call import FakeState, _commit, _frame

    def snapshots(frames) -> list[dict]:
        return [json.loads(text) for frame in frames for kind, text in zip(frame["kind"], frame["record_json"])
                if kind == OutputKind.SNAPSHOT]

    group_state = FakeState(watermark=1_000)
    first = snapshots(process_group(("c", "g"), iter([_frame([_commit(2_000, 0)])]), group_state,
                                    committed_offsets=True))
    assert [(s["cluster"], s["group"]) for s in first] == [("c", "g")]
    assert snapshots(process_group(("c", "g"), iter([_frame([_commit(3_000, 0)])]), group_state,
                                   committed_offsets=True)) == []
    bucket = pd.DataFrame({"group": ["g"], PACKED_EVENT: [pack_event_row(event_row(_commit(2_000, 0)))]})
    assert len(snapshots(process_bucket(("c", 0), iter([bucket]), FakeState(watermark=1_000),
                                        committed_offsets=True))) == 1
    sink = MetricsSink([1.0], registry=CollectorRegistry())
    book = _book(_commits("g", ("t", 0, 5, 1)))
    sink.attach_lag(book, "c")
    book.note_ends("c", book.partitions("c"), {("t", 0): 9}, {}, 1e12)
    sink.observe(OutputKind.SNAPSHOT, first[0])
    assert 'rebalance_monitor_group_topic_lag{cluster="c",group="g",topic="t"} 4.0' in generate_latest(
        sink.registry).decode()


@pytest.mark.parametrize("capture", ["kafka-2.7", "kafka-4.0"])
def test_a_groups_offsets_partition_is_the_one_kafka_chose(capture):
    """Every group of a real capture (offsets.topic.num.partitions=10) wrote its records to the
    partition offsets_partition names: Kafka's abs(groupId.hashCode()) % partitions."""
    import base64
    import struct
    from pathlib import Path

    from state.lag import offsets_partition
    where = {}
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / capture / "offsets-topic.jsonl"
    for line in fixture.read_text().splitlines():
        record = json.loads(line)
        key = base64.b64decode(record["key_b64"])
        (n,) = struct.unpack(">h", key[2:4])
        where[key[4:4 + n].decode()] = record["partition"]
    assert len(where) >= 20 and len(set(where.values())) == 10
    assert {g: offsets_partition(g, 10) for g in where} == where
    assert offsets_partition("", 50) == 0 and offsets_partition("é-groupe", 50) == offsets_partition("é-groupe", 50)


OFFSETS = "__consumer_offsets"


def _reading_book():
    """A book of `run`: it notes the monitor's own positions in a 2-partition offsets topic; g's
    records are in partition 1 (offsets_partition("g", 2))."""
    from state.lag import offsets_partition
    assert offsets_partition("g", 2) == 1
    book = LagBook(10.0, read_cluster="c")
    book.note_commits(_commits("g", ("t", 0, 100, 1_000_000)))
    return book


def test_commits_are_read_through_the_last_sample_the_monitor_had_read_to():
    book = _reading_book()
    assert book.commits_read_through(("c", "g"), 1_000.0) is None         # nothing known yet: no silence
    book.note_read({OFFSETS: {0: 7, 1: 40}}, None)
    assert (OFFSETS, 1) in book.partitions("c")                           # the sampler asks about them
    book.note_ends("c", book.partitions("c"), {("t", 0): 200, (OFFSETS, 0): 7, (OFFSETS, 1): 40}, {}, 1_010.0)
    assert book.commits_read_through(("c", "g"), 1_012.0) == 1_010.0      # at the end when sampled
    book.note_ends("c", book.partitions("c"), {("t", 0): 200, (OFFSETS, 0): 7, (OFFSETS, 1): 60}, {}, 1_020.0)
    # 20 records written since: the end was 40 (its position) last at 1,010
    assert book.commits_read_through(("c", "g"), 1_025.0) == 1_010.0
    book.note_read({OFFSETS: {0: 7, 1: 50}}, None)
    # half way to 60: read surely through 1,010 only (when the end was last seen at or below 50)
    assert book.commits_read_through(("c", "g"), 1_025.0) == 1_010.0
    book.note_read({OFFSETS: {0: 7, 1: 30}}, None)       # older than every sample kept
    assert book.commits_read_through(("c", "g"), 1_025.0) is None
    book.note_read({OFFSETS: {0: 7, 1: 50}}, 1_024.0)       # its source read every partition to its end
    assert book.commits_read_through(("c", "g"), 1_025.0) == 1_024.0
    assert book.commits_read_through(("c", "g"), 1_023.0) == 1_023.0      # never beyond the moment asked
    assert book.commits_read_through(("other", "g"), 1_025.0) is None
    assert LagBook(10.0).commits_read_through(("c", "g"), 1_025.0) == 1_025.0   # replay, tests: no positions


def test_no_member_is_at_risk_while_the_monitor_cannot_read_its_groups_commits():
    """The coordinator broker killed: the members' commits stop, and so does the monitor's reading
    of the group's offsets partition (its leader is that broker). However long the wall clock runs
    while the sampler cannot reach it and the source says no caught-up marker, no silence is
    measured; once the monitor reads it again, a real silence still is."""
    from sinks.metrics import MetricsSink
    now = [1_000.0]
    sink = MetricsSink([1.0], registry=CollectorRegistry())
    sink.lag.clock = lambda: now[0]
    book = _reading_book()
    sink.attach_lag(book, "c")
    members = [{"member_id": "m-1", "client_id": "app-1", "partitions": ["t:0"], "rebalance_timeout_ms": 30_000}]
    sink.observe(OutputKind.SNAPSHOT, {"cluster": "c", "group": "g", "state": "Stable", "protocol": "classic",
                                       "state_since_ms": 500_000, "members": members})
    gauge = 'rebalance_monitor_group_members_at_risk{cluster="c",group="g"}'
    book.note_read({OFFSETS: {0: 7, 1: 40}}, 1_001.0)

    def scrape(at, offsets_end=None):
        now[0] = at
        ends = {("t", 0): 180, (OFFSETS, 0): 7}
        errors = {}
        if offsets_end is None:
            errors[(OFFSETS, 1)] = REASON_BROKER               # its leader is dead
        else:
            ends[(OFFSETS, 1)] = offsets_end
        book.note_ends("c", book.partitions("c"), ends, errors, at)
        return generate_latest(sink.registry).decode()
    assert f"{gauge} 0.0" in scrape(1_005.0, offsets_end=40)
    for at in (1_020.0, 1_040.0, 1_080.0):
        assert f"{gauge} 0.0" in scrape(at), at                 # no end of the partition, no marker: not known
    assert f"{gauge} 1.0" in scrape(1_090.0, offsets_end=40)    # read again to its end: 90 s without a commit


@pytest.mark.parametrize("offset", [
    {"source": "offsets", "topics": {OFFSETS: {"0": 7, "1": 40}}, "tick": 1_024_000, "error": None},   # kafka-python source
    {OFFSETS: {"0": 7, "1": 40}},                                                                       # Spark's connector
])
def test_the_collector_notes_where_each_batch_left_the_offsets_source(offset):
    from sinks.health import BatchReport, SourceBatch
    from streaming.app.collector import RunCollector
    book = _reading_book()
    tick = 1_024_000.0 if "tick" in offset else None
    report = BatchReport(sources=(SourceBatch("broker_log", 3, offset={"source": "broker_log", "lines": 3}),
                                  SourceBatch("offsets", 2, offset=offset, tick_ms=tick)))
    RunCollector.note_offsets_read(book, report)
    assert {(OFFSETS, 0), (OFFSETS, 1)} <= set(book.partitions("c"))
    book.note_ends("c", book.partitions("c"), {(OFFSETS, 0): 7, (OFFSETS, 1): 40}, {}, 1_010.0)
    assert book.commits_read_through(("c", "g"), 1_030.0) == (1_024.0 if tick else 1_010.0)


def test_the_sampler_names_the_topics_by_id_for_kip_848_assignments():
    """The metadata (v10+) carries each topic's id: the book gets {id as Kafka writes it: name}
    after each round, which at_risk.py needs for a consumer-protocol member's assignment."""
    import uuid

    from streaming.app.lag_sampler import LagSampler, topic_names_by_id
    ids = {"t": uuid.UUID("ab5995d2-d473-490e-9ddd-b2f9c58da6f3"), "old": uuid.UUID(int=0)}
    cluster = types.SimpleNamespace(topic_id=ids.get)
    assert topic_names_by_id(cluster, ["t", "old", "none"]) == {"q1mV0tRzSQ6d3bL5xY2m8w": "t"}
    assert topic_names_by_id(object(), ["t"]) == {}                       # kafka-python 2: no ids
    brokers = FakeBrokers({"t": {0: 1}}, {("t", 0): 5})
    brokers.cluster.topic_id = ids.get           # type: ignore[attr-defined]
    book = _book(_commits("g", ("t", 0, 1, 1)))
    LagSampler(book, "c", _end_offsets(brokers, [1000.0])).sample_once()
    assert book.topic_names("c") == {"q1mV0tRzSQ6d3bL5xY2m8w": "t"} and book.topic_names("other") == {}


def test_lag_per_partition_only_for_the_groups_named():
    """lag.partition_groups (opt-in): the named groups' lag per partition, as
    kafka-consumer-groups --describe shows it; no other group gets a partition series."""
    import re

    from sinks.metrics import MetricsSink
    sink = MetricsSink([1.0], registry=CollectorRegistry())
    sink.lag.clock = lambda: 1_030.0
    book = _book(_commits("orders-app", ("t", 0, 150, 1), ("t", 1, 40, 1)), _commits("other", ("t", 0, 100, 1)))
    sink.attach_lag(book, "c")
    for group in ("orders-app", "other"):
        sink.observe(OutputKind.SNAPSHOT, {"cluster": "c", "group": group, "state": "Stable", "protocol": "classic",
                                           "members": []})
    book.note_ends("c", book.partitions("c"), {("t", 0): 100, ("t", 1): 40}, {}, 1_010.0)
    book.note_ends("c", book.partitions("c"), {("t", 0): 200, ("t", 1): 40}, {}, 1_020.0)
    page = generate_latest(sink.registry).decode()
    assert "_group_partition_lag{" not in page                           # none by default
    sink.lag.partition_groups = re.compile("orders-.*")
    page = generate_latest(sink.registry).decode()
    lines = sorted(line for line in page.splitlines() if line.startswith("rebalance_monitor_group_partition_lag"))
    assert lines == [
        'rebalance_monitor_group_partition_lag_seconds{cluster="c",group="orders-app",partition="0",topic="t"} 15.0',
        'rebalance_monitor_group_partition_lag_seconds{cluster="c",group="orders-app",partition="1",topic="t"} 0.0',
        'rebalance_monitor_group_partition_lag{cluster="c",group="orders-app",partition="0",topic="t"} 50.0',
        'rebalance_monitor_group_partition_lag{cluster="c",group="orders-app",partition="1",topic="t"} 0.0']
    assert 'rebalance_monitor_group_topic_lag{cluster="c",group="orders-app",topic="t"} 50.0' in page


def test_lag_partition_groups_is_a_checked_setting(tmp_path):
    from streaming.app.cli import build_parser
    from streaming.app.cli.run import run_settings
    cfg = tmp_path / "monitor.toml"
    cfg.write_text('checkpoint_location = "/tmp/c"\n[kafka]\nbootstrap_servers = "k:9092"\n[lag]\npartition_groups = "a.*"\n')
    args = ["run", "--config", str(cfg)]
    assert run_settings(build_parser().parse_args(args)).lag.partition_groups == "a.*"
    assert run_settings(build_parser().parse_args([*args, "--lag-partition-groups", "b|c"])).lag.partition_groups == "b|c"
    with pytest.raises(Exception, match="partition_groups"):
        run_settings(build_parser().parse_args([*args, "--lag-partition-groups", "(unclosed"]))
