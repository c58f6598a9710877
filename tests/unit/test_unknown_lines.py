"""Unknown coordinator lines: every one is counted by logger, a sample is kept in quarantine."""
from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa

from sinks.exposition import text
from sinks.metrics import MetricsSink
from streaming.app.settings import DEFAULT_DURATION_BUCKETS
from streaming.logs.step import LogRow, LogSourceSpec, log_rows_to_events, parse_log_rows
from streaming.rows import EVENT_COLUMNS

GC = "kafka.coordinator.group.GroupCoordinator"
GMM = "org.apache.kafka.coordinator.group.GroupMetadataManager"


def _line(i: int, logger: str) -> str:
    prefix = "[GroupCoordinator 1]: " if logger == GC else "[GroupCoordinator id=1 topic=__consumer_offsets partition=3] "
    return f"[2026-11-21 19:22:55,{i % 1000:03d}] WARN {prefix}Frobnicated group g{i} ({logger})"


def _frame(lines: list[str], first_seq: int = 1) -> pa.RecordBatch:
    """One Arrow batch of raw rows, as the JVM hands it to the parse step (mapInArrow)."""
    return pa.RecordBatch.from_pandas(pd.DataFrame({"source_id": "c:b1.log", "seq": range(first_seq, first_seq + len(lines)),
                         "line": lines, "raw": lines,
                         "broker_hint": pd.array([None] * len(lines), dtype="Int32"),
                         "host_hint": pd.array([None] * len(lines), dtype="string"),
                                                    "ts_hint_ms": 1795289000000, "eof": False}), preserve_index=False)


def _frames(batches) -> list[pd.DataFrame]:
    return [b.to_pandas() for b in batches]


def test_sample_per_logger_and_batch_with_counts():
    lines = [_line(i, GC) for i in range(25)] + [_line(100 + i, GMM) for i in range(3)]
    # two Arrow batches in one task: the sampler spans them
    frames = _frames(log_rows_to_events(iter([_frame(lines[:12]), _frame(lines[12:], 13)]),
                                     {"c:b1.log": LogSourceSpec(cluster="c")}, unknown_sample=10))
    all_rows = [dict(zip(EVENT_COLUMNS, r)) for f in frames for r in f.itertuples(index=False, name=None)]
    rows = [r for r in all_rows if r["kind"] == "quarantine"]
    records = [json.loads(r["data_json"]) for r in rows]
    # the task's per-source counts come last: all 28 lines, default layout, unknown templates
    stats = [json.loads(r["data_json"]) for r in all_rows if r["kind"] == "log_stats"]
    assert stats == [{"cluster": "c", "source": "c:b1.log", "layouts": {"default": 28},
                      "classes": {"unknown_template": 28}}]
    assert all(r["group"] is None for r in all_rows if r["kind"] == "log_stats")   # no group: rows.py
    assert all(r["kind"] == "quarantine" and r["reason"] == "unknown_coordinator_line" for r in rows)
    gc = [q for q in records if q["logger"] == GC]
    gmm = [q for q in records if q["logger"] == GMM]
    assert [q["count"] for q in gc] == [1] * 10 + [15] and [q["count"] for q in gmm] == [1, 1, 1]
    summary = gc[-1]
    assert summary["sampled_out"] is True and summary["raw"] is None and summary["seq"] == 25
    assert "15 more" in summary["detail"] and "at most 10" in summary["detail"]
    assert [q["seq"] for q in gc[:10]] == list(range(1, 11))   # the first ones, verbatim
    sink = MetricsSink(DEFAULT_DURATION_BUCKETS)
    for q in records:
        sink.observe("quarantine", q)
    page = text(sink.registry)
    assert f'rebalance_monitor_unknown_coordinator_lines_total{{cluster="c",logger="{GC}"}} 25.0' in page
    assert f'rebalance_monitor_unknown_coordinator_lines_total{{cluster="c",logger="{GMM}"}} 3.0' in page
    assert ('rebalance_monitor_quarantined_records_total{cluster="c",reason="unknown_coordinator_line",'
            'source="broker_log"} 28.0') in page


def test_without_a_sampler_every_unknown_line_is_kept():
    lines = [_line(i, GC) for i in range(25)]
    rows = parse_log_rows([LogRow("c:b1.log", i + 1, line, line, None, None, 1, False) for i, line in enumerate(lines)],
                          {"c:b1.log": LogSourceSpec(cluster="c")})
    assert len(rows) == 25 and all(json.loads(r[-1])["count"] == 1 for r in rows)


def test_sample_zero_keeps_only_counts():
    lines = [_line(i, GC) for i in range(4)]
    frames = _frames(log_rows_to_events(iter([_frame(lines)]), {"c:b1.log": LogSourceSpec(cluster="c")},
                                     unknown_sample=0))
    records = [json.loads(r) for f in frames for r, kind in zip(f["data_json"], f["kind"]) if kind == "quarantine"]
    assert [(q["count"], q.get("sampled_out")) for q in records] == [(4, True)]


def test_unknown_layout_lines_are_sampled_and_counted_apart():
    """A coordinator line whose layout is not understood is quarantined as unparseable (sampled like
    unknown templates) and counted as class unknown_layout, not as an unknown template."""
    odd = [f"<{i}> something [GroupCoordinator 1]: no time here ({GC})" for i in range(13)]
    known = [_line(0, GC)]
    frames = _frames(log_rows_to_events(iter([_frame(odd + known)]), {"c:b1.log": LogSourceSpec(cluster="c")},
                                     unknown_sample=10))
    rows = [dict(zip(EVENT_COLUMNS, r)) for f in frames for r in f.itertuples(index=False, name=None)]
    quarantine = [json.loads(r["data_json"]) for r in rows if r["kind"] == "quarantine"]
    unparseable = [q for q in quarantine if q["reason"] == "unparseable_line"]
    assert [q["count"] for q in unparseable] == [1] * 10 + [3] and "layout is not understood" in unparseable[0]["detail"]
    assert [q["reason"] for q in quarantine if q not in unparseable] == ["unknown_coordinator_line"]
    stats = [json.loads(r["data_json"]) for r in rows if r["kind"] == "log_stats"]
    assert stats == [{"cluster": "c", "source": "c:b1.log", "layouts": {"default": 1, "unknown": 13},
                      "classes": {"unknown_layout": 13, "unknown_template": 1}}]
    sink = MetricsSink(DEFAULT_DURATION_BUCKETS)
    for kind, r in [(r["kind"], json.loads(r["data_json"])) for r in rows]:
        sink.observe(kind, r)
    page = text(sink.registry)
    assert 'rebalance_monitor_log_lines_total{class="unknown_layout",cluster="c",source="c:b1.log"} 13.0' in page
    assert 'rebalance_monitor_log_lines_total{class="unknown_template",cluster="c",source="c:b1.log"} 1.0' in page
    assert f'rebalance_monitor_unknown_coordinator_lines_total{{cluster="c",logger="{GC}"}} 1.0' in page
    assert ('rebalance_monitor_quarantined_records_total{cluster="c",reason="unparseable_line",source="broker_log"} 13.0'
            in page)
    assert 'rebalance_monitor_log_layout_info{cluster="c",layout="default",source="c:b1.log"} 1.0' in page
