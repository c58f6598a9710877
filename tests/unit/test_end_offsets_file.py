"""A replay's end offsets (`replay --end-offsets`): the two layouts read alike, bad entries counted
beside the good ones, a file without a sample refused before Spark starts; the unbounded history
the samples go into answers as the linear scan did."""
import json
import random

import pytest

from state.lag import EndHistory, LagBook
from state.rebalance_cost import RebalanceCosts
from streaming.app.cli import main
from streaming.app.end_offsets_file import EndOffsetsError, read_end_offsets

FIXTURE = "tests/fixtures/kafka-2.7"
T0_MS = 1_795_289_000_000


def _lines(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _prometheus(path, series, labels=("topic", "partition")):
    result = [{"metric": {"__name__": "kafka_topic_partition_current_offset", labels[0]: topic,
                          labels[1]: str(partition), "instance": "exporter:9308"},
               "values": [[t_ms / 1000, str(offset)] for t_ms, offset in points]}
              for (topic, partition), points in series.items()]
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}))
    return str(path)


SERIES = {("orders", 0): [(T0_MS + 10_000 * k, 100 * k) for k in range(5)],
          ("orders", 1): [(T0_MS + 10_000 * k + 3, 50 * k) for k in range(5)]}


def _rows(series):
    return [{"time_ms": t, "topic": topic, "partition": p, "offset": o}
            for (topic, p), points in series.items() for t, o in points]


def test_json_lines_and_both_prometheus_label_sets_read_alike(tmp_path):
    lines = read_end_offsets(_lines(tmp_path / "ends.jsonl", list(reversed(_rows(SERIES)))), "default")
    exporter = read_end_offsets(_prometheus(tmp_path / "exporter.json", SERIES), "default")
    kminion = read_end_offsets(_prometheus(tmp_path / "kminion.json", SERIES, ("topic_name", "partition_id")),
                               "default")
    expected = {tp: [(t / 1000, o) for t, o in points] for tp, points in SERIES.items()}
    assert lines.samples == exporter.samples == kminion.samples == expected      # sorted by time
    assert lines.skipped == exporter.skipped == 0
    assert lines.count == 10 and lines.span_s == (T0_MS / 1000, (T0_MS + 40_003) / 1000)
    assert lines.interval_s() == pytest.approx(10.0)


def test_bad_lines_are_counted_and_the_good_ones_around_them_kept(tmp_path):
    rows = _rows(SERIES)
    path = tmp_path / "ends.jsonl"
    text = "".join(json.dumps(r) + "\n" for r in rows[:3]) + "not json\n[1, 2]\n" \
        + json.dumps({"time_ms": T0_MS, "topic": "orders", "partition": 0}) + "\n" \
        + json.dumps({"time_ms": T0_MS, "topic": "orders", "partition": -1, "offset": 5}) + "\n" \
        + json.dumps({**rows[3], "cluster": "other"}) + "\n" \
        + "".join(json.dumps(r) + "\n" for r in rows[4:])
    path.write_text(text)
    ends = read_end_offsets(str(path), "default")
    assert ends.count == len(rows) - 1 and ends.other_clusters == 1
    assert ends.skipped == 4 and ends.first_skip == "line 4: not JSON"


@pytest.mark.parametrize("text, reason", [
    ("", "no end-offset sample"),
    ("garbage\n", "line 1: not JSON"),
    (json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}), "not a Prometheus range"),
    (json.dumps({"time_ms": T0_MS, "topic": "t", "partition": 0, "offset": "many"}) + "\n", "offset is not a number"),
])
def test_a_file_without_a_sample_is_refused_with_its_reason(tmp_path, text, reason):
    path = tmp_path / "ends.jsonl"
    path.write_text(text)
    with pytest.raises(EndOffsetsError, match=reason):
        read_end_offsets(str(path), "default")
    with pytest.raises(EndOffsetsError, match="cannot read"):
        read_end_offsets(str(tmp_path / "missing.jsonl"), "default")


def test_replay_refuses_a_bad_end_offsets_file_before_spark_starts(tmp_path, capsys):
    path = tmp_path / "ends.jsonl"
    path.write_text("garbage\n")
    code = main(["replay", "--broker-log", f"{FIXTURE}/broker1-server.log", "--end-offsets", str(path),
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "configuration error: end_offsets (--end-offsets):" in err and "line 1: not JSON" in err
    assert "Traceback" not in err


def _linear_scan_offset_at(samples, at_s):
    """EndHistory.offset_at as it was before bisect, the reference."""
    if not samples or at_s < samples[0].first_s or at_s > samples[-1].last_s:
        return None
    previous = None
    for sample in samples:
        if at_s < sample.first_s and previous is not None:
            share = (at_s - previous.last_s) / (sample.first_s - previous.last_s)
            return round(previous.offset + share * (sample.offset - previous.offset))
        if at_s <= sample.last_s:
            return sample.offset
        previous = sample
    return None


def _linear_scan_written_at(history, committed):
    samples = history.samples
    if not samples or committed >= samples[-1].offset:
        return None
    previous = None
    for sample in samples:
        if committed < sample.offset:
            if previous is None:
                return history._before_history(committed)
            share = (committed - previous.offset) / (sample.offset - previous.offset)
            return previous.last_s + share * (sample.first_s - previous.last_s)
        previous = sample
    return None


@pytest.mark.parametrize("keep", [16, None])
def test_bisect_answers_as_the_linear_scan_did(keep):
    rng = random.Random(7)
    for _ in range(50):
        history, offset, t = EndHistory(keep=keep), rng.randrange(0, 50), 1000.0
        for _ in range(rng.randrange(1, 60)):
            t += rng.choice([5.0, 10.0, 10.0, 12.5])
            offset += rng.choice([0, 0, 3, 40])
            history.add(offset, t)
        samples = list(history.samples)
        assert keep is None or len(samples) <= keep
        for _ in range(40):
            at_s = rng.uniform(samples[0].first_s - 20, samples[-1].last_s + 20)
            assert history.offset_at(at_s) == _linear_scan_offset_at(samples, at_s)
            committed = rng.randrange(0, offset + 5)
            assert history.written_at(committed) == _linear_scan_written_at(history, committed)


def test_a_loaded_history_keeps_every_sample_and_a_replay_measures_no_catch_up():
    book = LagBook(10.0)
    points = [(1000.0 + 10 * k, 100 * k) for k in range(500)]
    book.load_history("c", {("orders", 0): points})
    assert book.ends_at("c", [(("orders", 0), 1005.0), (("orders", 0), 5985.0)]) == [50, 49850]
    book.note_commits({"cluster": "c", "group": "g", "offsets": [["orders", 0, 40_000, 5_000_000]]})
    costs = RebalanceCosts(10.0, catch_up=False)
    stops = {"cluster": "c", "group": "g", "generation": 3, "started_at_ms": 2_000_000, "completed_at_ms": 2_004_000,
             "stops": [["orders", 0, 2_000_000]]}
    costs.note(stops, book)
    records, catch_ups = costs.due(book, 5990.0)
    assert [r["records_delayed"] for r in records] == [40]        # 4 s at 10 records/s
    assert records[0]["lag_before"] is None and records[0]["catch_up_deadline_ms"] is None
    assert catch_ups == [] and costs.catching_up == []
