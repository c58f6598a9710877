"""The bounded event sink (sinks/event_sink.py) and the restart from its counters' snapshot
(sinks/metrics_state.py, streaming/app/restart.py): rolls and retention keep every record once, and a
restarted monitor shows what an uninterrupted one shows, reading only what came after the snapshot."""
from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

import sinks.event_sink as event_sink
from sinks.event_sink import COUNTERS_FILE, EventSink, sink_files, statistics_totals
from sinks.files import GroupStateFile
from sinks.metrics import MetricsSink
from state.outputs import OutputKind
from state.rebalance_cost import REASON_NOT_CAUGHT_UP
from streaming.app.collector import RunCollector
from streaming.app.restart import restore
from streaming.app.settings import DEFAULT_DURATION_BUCKETS
from tests.support.report_pages import records as golden

ROOT = Path(__file__).resolve().parents[2]
BATCHES = 12
# The families records feed (the monitor's own health, e.g. batches run by this process, is not restored).
RESTORED = ("rebalance_monitor_rebalances_total", "rebalance_monitor_member_removals_total",
            "rebalance_monitor_rebalance_duration_seconds", "rebalance_monitor_partition_stop_seconds",
            "rebalance_monitor_partition_seconds_stopped_total", "rebalance_monitor_group_last_rebalance_duration",
            "rebalance_monitor_rebalance_timeouts_total", "rebalance_monitor_quarantined_records_total",
            "rebalance_monitor_offsets_records_total", "rebalance_monitor_log_lines_total",
            "rebalance_monitor_log_clock_skew_seconds", "rebalance_monitor_invalid_transitions_total",
            "rebalance_monitor_source_mismatches_total", "rebalance_monitor_log_layout_info",
            "rebalance_monitor_rebalance_records_delayed_total", "rebalance_monitor_rebalances_not_caught_up_total",
            "rebalance_monitor_rebalance_catch_up_seconds")
KINDS = {OutputKind.REBALANCE: "rebalances.jsonl", OutputKind.REMOVAL: "member_removals.jsonl",
         OutputKind.REBALANCE_TRIGGER: "rebalance_triggers.jsonl", OutputKind.CLOCK_SKEW: "clock_skew.jsonl"}


def _rows(batch: int) -> list[tuple[str, str]]:
    """Batch `batch` of the golden records (every BATCHES-th), and a clock row that decides removals."""
    rows = [(str(kind), json.dumps(r)) for kind, name in KINDS.items() for r in golden(name)[batch::BATCHES]]
    clock = {"watermark_ms": 2 ** 50, "turns": 1, "folds": 0, "cluster": "c", "key": None}
    # what `run` measures (the lag's end offsets): records delayed, a catch-up or none in time
    cost = {"cluster": "c", "group": f"g{batch % 3}", "records_delayed": 7 * batch}
    catch_up = ({"cluster": "c", "group": f"g{batch % 3}", "catch_up_seconds": 1.5 * batch} if batch % 2 else
                {"cluster": "c", "group": f"g{batch % 3}", "catch_up_seconds": None,
                 "catch_up_unknown_reason": REASON_NOT_CAUGHT_UP})
    return rows + [(str(OutputKind.CLOCK), json.dumps(clock)), (str(OutputKind.REBALANCE_COST), json.dumps(cost)),
                   (str(OutputKind.CATCH_UP), json.dumps(catch_up))]


def _progress(batch: int) -> dict[str, Any]:
    lines = {"classes": {"coordinator": batch % 3, "not_coordinator": 5}, "cluster": "default",
             "layouts": {"strimzi4": 5 + batch % 3}, "source": f"b{batch % 2}"}
    counts = {"cluster": "default", "counts": [[1, 3, "decoded", 10 + batch], [1, 4, "unknown_version", batch % 2]]}
    return {"batchId": batch, "observedMetrics": {
        "source_broker_log": {"statistics": [json.dumps(lines)]},
        "source_offsets": {"statistics": [json.dumps(counts)]}}}


def _collector(workdir: Path, roll: bool, **sink: Any) -> RunCollector:
    events = EventSink(str(workdir / "events"), roll_seconds=0.0 if roll else 1e12, **sink)
    collector = RunCollector(MetricsSink(DEFAULT_DURATION_BUCKETS), keep_records=False, event_sink=events,
                             state_file=GroupStateFile(str(workdir / "groups.json")),
                             batch_rows=lambda rows, _batch: rows)
    collector.snapshot_seconds = 0.0 if roll else 1e12
    restore(collector)
    return collector


def _run(collector: RunCollector, batches: range) -> None:
    for batch in batches:
        collector.foreach_batch(_rows(batch), batch)
        collector.count_progress(_progress(batch))


def _page(collector: RunCollector) -> list[str]:
    text = generate_latest(collector.metrics.registry).decode()
    return sorted(line for line in text.splitlines() if line.startswith(RESTORED))


def _uninterrupted(tmp_path: Path) -> list[str]:
    collector = _collector(tmp_path / "once", roll=False)
    _run(collector, range(BATCHES))
    return _page(collector)


def test_a_restart_from_the_snapshot_shows_what_an_uninterrupted_run_shows(tmp_path, monkeypatch):
    expected = _uninterrupted(tmp_path)
    assert any("rebalance_duration_seconds_bucket" in line for line in expected)
    assert any(line.startswith("rebalance_monitor_offsets_records_total") for line in expected)
    assert any(line.startswith("rebalance_monitor_rebalances_not_caught_up_total{") for line in expected)
    assert any(line.startswith("rebalance_monitor_rebalance_catch_up_seconds_count{") for line in expected)
    first = _collector(tmp_path, roll=True)
    _run(first, range(7))
    events = tmp_path / "events"
    assert (events / COUNTERS_FILE).exists() and list((events / "rebalances").glob("rolled-*.jsonl"))
    assert len(list((events / "decode_stats").glob("batch-*.jsonl"))) <= 2   # batches 5 and 6: not rolled yet
    opened: list[str] = []
    read = event_sink.read_lines

    def reading(path: Path) -> Any:
        opened.append(path.name)
        return read(path)
    monkeypatch.setattr(event_sink, "read_lines", reading)
    second = _collector(tmp_path, roll=True)
    # the snapshot, then only the files after it (and the newest removals, for the incident board)
    assert [name for name in opened if name.startswith("rolled-")] == sorted(
        p.name for p in (events / "member_removals").glob("rolled-*"))[-1:]
    assert second.counted_through == 6
    second.foreach_batch(_rows(6), 6)            # Spark runs the last batch again after the restart
    second.count_progress(_progress(6))
    _run(second, range(7, BATCHES))
    assert _page(second) == expected
    assert sorted(json.dumps(r, sort_keys=True) for r in EventSink(str(events)).records(OutputKind.REBALANCE)) == \
        sorted(json.dumps(r, sort_keys=True) for r in golden("rebalances.jsonl"))


def test_a_sink_written_before_snapshots_and_rolls_loads_and_then_restarts_from_its_snapshot(tmp_path):
    """The layout of earlier releases (only batch-<id>.jsonl parts, no counters.json): its
    records are counted once at the first start, rolled with a snapshot, and the next start reads
    the snapshot. tests/fixtures/checkpoint-v1/events was written by commit 2a45599."""
    shutil.copytree(ROOT / "tests" / "fixtures" / "checkpoint-v1" / "events", tmp_path / "events")
    old = _collector(tmp_path, roll=True)
    page = _page(old)
    assert any(line.startswith("rebalance_monitor_rebalances_total") for line in page)
    assert old.counted_through == 3
    old.foreach_batch([], 4)       # the next batch, empty: the snapshot and the roll of batches 0-3
    assert not list((tmp_path / "events").glob("*/batch-*.jsonl"))
    assert [p.name for p in (tmp_path / "events" / "rebalances").iterdir()] == ["rolled-000000000001-000000000003.jsonl"]
    again = _collector(tmp_path, roll=True)
    assert _page(again) == page and again.counted_through == 4


def test_a_crash_between_writing_a_rolled_file_and_deleting_its_parts_reads_each_record_once(tmp_path, caplog):
    sink = EventSink(str(tmp_path), roll_seconds=0.0)
    for batch in range(4):
        sink.write_batch(batch, {OutputKind.REBALANCE: [{"cluster": "c", "group": "g", "generation": batch}]})
    kept = {p.name: p.read_bytes() for p in (tmp_path / "rebalances").iterdir()}
    sink.roll({OutputKind.REBALANCE: 2})
    for name, data in kept.items():          # the parts back, as if the roll had stopped before deleting them
        (tmp_path / "rebalances" / name).write_bytes(data)
    (tmp_path / "rebalances" / "rolled-000000000004-000000000009.jsonl.tmp").write_text('{"half')
    (tmp_path / "rebalances" / "notes.txt").write_text("mine")
    generations = [r["generation"] for r in EventSink(str(tmp_path)).records(OutputKind.REBALANCE)]
    assert generations == [0, 1, 2, 3]
    with caplog.at_level(logging.WARNING, "rebalance_monitor.events"):
        reopened = EventSink(str(tmp_path))
    assert sorted(p.name for p in (tmp_path / "rebalances").iterdir()) == [
        "batch-000000000003.jsonl", "notes.txt", "rolled-000000000000-000000000002.jsonl"]
    assert [r["generation"] for r in reopened.records(OutputKind.REBALANCE)] == [0, 1, 2, 3]
    assert f"{tmp_path / 'rebalances' / 'notes.txt'} is not a file of the event sink" in caplog.text


def test_corrupt_lines_are_skipped_and_kept_aside_and_the_good_ones_around_them_stay(tmp_path, caplog):
    sink = EventSink(str(tmp_path), roll_seconds=0.0)
    sink.write_batch(0, {OutputKind.REMOVAL: [{"member_id": "a"}]})
    sink.write_batch(1, {OutputKind.REMOVAL: [{"member_id": "b"}]})
    part = tmp_path / "member_removals" / "batch-000000000001.jsonl"
    part.write_text('{"member_id": "b"}\n{"member_id": "trunc\n[1]\n{"member_id": "c"}')
    with caplog.at_level(logging.WARNING, "rebalance_monitor.events"):
        assert [r["member_id"] for r in EventSink(str(tmp_path)).records(OutputKind.REMOVAL)] == ["a", "b", "c"]
    assert f"{part}:2 is not a JSON object; skipped" in caplog.text
    EventSink(str(tmp_path)).roll({OutputKind.REMOVAL: 1})
    assert [r["member_id"] for r in EventSink(str(tmp_path)).records(OutputKind.REMOVAL)] == ["a", "b", "c"]
    aside = (tmp_path / "member_removals" / "unreadable-000000000000-000000000001.txt").read_text().splitlines()
    assert aside == ['batch-000000000001.jsonl:2: {"member_id": "trunc', "batch-000000000001.jsonl:3: [1]"]


def test_statistics_roll_into_one_totals_record_per_cluster_and_source(tmp_path):
    sink = EventSink(str(tmp_path))
    for batch in range(3):
        sink.write_batch(batch, {OutputKind.DECODE_STATS: [{"cluster": "c", "counts": [[1, 3, "decoded", 10]]},
                                                           {"cluster": "d", "counts": [[1, 3, "decoded", batch]]}],
                                 OutputKind.LOG_STATS: [{"cluster": "c", "source": "b1", "layouts": {"x": 1},
                                                         "classes": {"coordinator": batch}}]})
    sink.roll({OutputKind.DECODE_STATS: 2, OutputKind.LOG_STATS: 1})
    assert list(sink.records(OutputKind.DECODE_STATS)) == [{"cluster": "c", "counts": [["1", "3", "decoded", 30]]},
                                                           {"cluster": "d", "counts": [["1", "3", "decoded", 3]]}]
    assert [(r["layouts"], r["classes"]) for r in sink.records(OutputKind.LOG_STATS)] == [
        ({"x": 2}, {"coordinator": 1}), ({"x": 1}, {"coordinator": 2})]
    assert statistics_totals(OutputKind.LOG_STATS, []) == []


def test_retention_deletes_rolled_files_by_age_then_the_oldest_by_size_and_never_parts(tmp_path):
    now = time.time()
    sink = EventSink(str(tmp_path), retention_days=1.0, clock=lambda: now)
    for batch in range(6):
        sink.write_batch(batch, {OutputKind.REBALANCE: [{"generation": batch, "pad": "x" * 100}]})
        os.utime(tmp_path / "rebalances" / f"batch-{batch:012d}.jsonl", (now - (6 - batch) * 36_000,) * 2)
    sink = EventSink(str(tmp_path), retention_days=1.0, clock=lambda: now, roll_bytes=250)
    sink.roll({OutputKind.REBALANCE: 4})       # in files of about roll_bytes: 0-1, 2-3, 4
    names = sorted(p.name for p in (tmp_path / "rebalances").iterdir())
    assert names == ["batch-000000000005.jsonl", "rolled-000000000000-000000000001.jsonl",
                     "rolled-000000000002-000000000003.jsonl", "rolled-000000000004-000000000004.jsonl"]
    # by age: their newest parts were 50 h and 30 h old (a day kept); rolled 4 is 20 h old
    assert [p.name for p in sink.enforce_retention()] == ["rolled-000000000000-000000000001.jsonl",
                                                          "rolled-000000000002-000000000003.jsonl"]
    sink.max_bytes = sink.usage()[0] - 1
    assert [p.name for p in sink.enforce_retention()] == ["rolled-000000000004-000000000004.jsonl"]
    sink.max_bytes = 1
    sink.enforce_retention()
    assert [r["generation"] for r in sink.records(OutputKind.REBALANCE)] == [5] and sink.usage()[1] == 1


def test_a_restart_after_retention_keeps_the_counters_it_deleted_the_records_of(tmp_path):
    expected = _uninterrupted(tmp_path)
    first = _collector(tmp_path, roll=True, max_bytes=1)
    _run(first, range(8))
    assert len(list(EventSink(str(tmp_path / "events")).records(OutputKind.REBALANCE))) < len(golden("rebalances.jsonl"))
    second = _collector(tmp_path, roll=True, max_bytes=1)
    _run(second, range(8, BATCHES))
    assert _page(second) == expected


def test_the_sinks_size_on_metrics_is_what_its_folders_hold_after_retention(tmp_path):
    collector = _collector(tmp_path, roll=True, max_bytes=4000)
    _run(collector, range(8))
    collector.maintain_sink(8)            # the next batch's maintenance: what the parts of 7 left
    on_disk = list((tmp_path / "events").glob("*/*.jsonl"))
    health = collector.metrics.health
    assert health.event_sink_files._value.get() == len(on_disk) > 0
    assert health.event_sink_bytes._value.get() == sum(p.stat().st_size for p in on_disk)
    assert sum(p.stat().st_size for p in on_disk if p.name.startswith("rolled-")) <= 4000
    restarted = _collector(tmp_path, roll=True, max_bytes=4000)     # known from the start, before a batch
    assert restarted.metrics.health.event_sink_files._value.get() == len(on_disk)


@pytest.mark.parametrize("snapshot", ['{"half', '{"records_through": 3}',
                                      '{"records_through": 3, "statistics_through": 3, "metrics": {"version": 1}}'])
def test_an_unusable_snapshot_is_one_warning_and_the_records_kept_are_counted(tmp_path, caplog, snapshot):
    first = _collector(tmp_path, roll=False)
    _run(first, range(4))
    (tmp_path / "events" / COUNTERS_FILE).write_text(snapshot)
    with caplog.at_level(logging.WARNING, "rebalance_monitor.events"):
        second = _collector(tmp_path, roll=False)
    assert _page(second) == _page(first)
    assert caplog.text.count("counters' snapshot is unusable") == 1


def test_the_report_reads_a_rolled_sink_as_it_read_the_parts(tmp_path):
    from sinks.report import build, render
    for folder in ("parts", "rolled"):
        sink = EventSink(str(tmp_path / folder))
        for batch in range(BATCHES):
            sink.write_batch(batch, {kind: golden(name)[batch::BATCHES] for kind, name in KINDS.items()})
    EventSink(str(tmp_path / "rolled"), roll_bytes=20_000).roll(dict.fromkeys(KINDS, 8))
    assert len(sink_files(tmp_path / "rolled", OutputKind.REBALANCE)) < BATCHES
    pages = [render(build([tmp_path / folder])).replace(str(tmp_path / folder), "") for folder in ("parts", "rolled")]
    assert pages[0] == pages[1] and pages[0].count('class="group-row') == 56
    # the command, with a window inside the rolled files
    from streaming.app.cli import main
    for folder in ("parts", "rolled"):
        assert main(["report", str(tmp_path / folder), "--since", "2026-11-21T19:30:00",
                     "-o", str(tmp_path / f"{folder}.html")]) == 0
    windows = [(tmp_path / f"{folder}.html").read_text().replace(str(tmp_path / folder), "")
               for folder in ("parts", "rolled")]
    assert windows[0] == windows[1] and 0 < windows[0].count('class="group-row') < 56
