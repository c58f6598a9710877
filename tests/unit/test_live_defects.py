"""Small defects of the live service seen with short triggers (issue 14), each pinned by a test:
a Dead group's gauges, the watermark delay before the first watermark, the newest-event age of a
quiet source, stopping between micro-batches, and the diagnosis doc's delay wording."""
from __future__ import annotations

import math
import re
import threading
import time
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest

from sinks.metrics import MetricsSink
from state.outputs import OutputKind
from streaming.app.collector import RunCollector

ROOT = Path(__file__).resolve().parents[2]


def _snap(state: str, group: str = "g1") -> dict:
    return {"cluster": "c", "group": group, "protocol": "classic", "state": state, "generation": 3,
            "member_count": 0, "state_since_ms": 1_000, "last_event_ms": 1_000}


def _page(sink: MetricsSink) -> str:
    return generate_latest(sink.registry).decode()


def test_a_dead_group_has_no_gauge_series():
    sink = MetricsSink([1.0])
    sink.observe(OutputKind.SNAPSHOT, _snap("Stable", "alive"))
    sink.observe(OutputKind.SNAPSHOT, _snap("Dead", "gone"))
    page = _page(sink)
    assert 'group="alive"' in page
    assert 'group="gone"' not in page
    assert 'state="Dead"} 1.0' not in page
    assert not re.search(r'rebalance_monitor_groups\{cluster="c",state="Dead"\}', page)


def _progress(watermark: str | None = None, newest: int | None = None, oldest: int | None = None,
              tick: int | None = None) -> dict:
    end: dict[str, Any] = {"source": "broker_log", "topics": {}, "tick": tick, "gap": 0, "error": None}
    return {"sources": [{"numInputRows": 0, "startOffset": {"source": "broker_log", "tick": None},
                         "endOffset": end}],
            "eventTime": {"watermark": watermark} if watermark else {},
            "observedMetrics": {"source_broker_log": {"newest_event_ms": newest, "oldest_event_ms": oldest}}}


def test_watermark_delay_is_not_shown_before_the_first_watermark():
    sink = MetricsSink([1.0])
    collector = RunCollector(sink, keep_records=False)
    collector.count_progress(_progress("1970-01-01T00:00:00.000Z"))
    assert math.isnan(sink.health.watermark_delay._value.get())
    collector.count_progress(_progress(time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - 12))))
    assert 10 < sink.health.watermark_delay._value.get() < 60


def test_newest_event_age_keeps_growing_while_a_source_is_quiet():
    sink = MetricsSink([1.0])
    now = [1_000_000.0]
    sink.health._wall = lambda: now[0]
    collector = RunCollector(sink, keep_records=False)
    collector.count_progress(_progress(newest=int(now[0] * 1000) - 2_000, oldest=int(now[0] * 1000) - 3_000))
    age = re.compile(r'rebalance_monitor_source_newest_event_age_seconds\{source="broker_log"\} (\S+)')

    def scraped_age() -> float:
        m = age.search(_page(sink))
        assert m is not None
        return float(m.group(1))

    assert scraped_age() == 2.0
    now[0] += 30
    collector.count_progress(_progress())            # quiet: a batch without events of the source
    assert scraped_age() == 32.0
    now[0] += 10                                     # no batch at all: still the age at scrape time
    assert scraped_age() == 42.0


def test_event_skew_is_how_far_rows_arrive_behind_the_sources_front():
    sink = MetricsSink([1.0])
    sink.health._wall = lambda: 1_000.0
    collector = RunCollector(sink, keep_records=False)
    collector.count_progress(_progress(newest=100_000, oldest=90_000, tick=101_000))
    collector.count_progress(_progress(newest=104_000, oldest=96_000))   # a lagging broker: 5 s behind the tick
    skew = re.search(r'rebalance_monitor_source_event_skew_seconds\{source="broker_log"\} (\S+)', _page(sink))
    assert skew and float(skew.group(1)) == 5.0


class _FakeQuery:
    """Records whether stop() came while a foreachBatch was running."""

    def __init__(self, running: threading.Event):
        self.running = running
        self.stopped_during_batch: bool | None = None

    def stop(self) -> None:
        self.stopped_during_batch = self.running.is_set()


def _batch_in_thread(collector: RunCollector, seconds: float) -> tuple[threading.Event, threading.Thread]:
    """A foreachBatch that runs for `seconds` (Spark's collect inside it)."""
    import pyarrow as pa
    running = threading.Event()

    class SlowFrame:
        def select(self, *columns):
            return self

        def toArrow(self):
            running.set()
            time.sleep(seconds)
            running.clear()
            return pa.table({"kind": pa.array([], pa.string()), "record_json": pa.array([], pa.string())})
    thread = threading.Thread(target=collector.foreach_batch, args=(SlowFrame(), 0), daemon=True)
    thread.start()
    assert running.wait(5)
    return running, thread


class _EmptyFrame:
    def select(self, *columns):
        return self

    def toArrow(self):
        import pyarrow as pa
        return pa.table({"kind": pa.array([], pa.string()), "record_json": pa.array([], pa.string())})


def test_stop_waits_for_the_running_foreach_batch():
    from streaming.app.service import _stop_query
    collector = RunCollector(MetricsSink([1.0]), keep_records=False)
    running, thread = _batch_in_thread(collector, 0.5)
    query = _FakeQuery(running)
    _stop_query(query, collector.gate)
    assert query.stopped_during_batch is False
    thread.join(5)
    assert collector.last_batch_id == 0          # the running batch was applied in full
    # a batch that reaches foreachBatch after the stop fails (uncommitted), it is not skipped
    try:
        collector.foreach_batch(_EmptyFrame(), 1)
    except Exception as exc:
        assert type(exc).__name__ == "QueryStopping"
    else:
        raise AssertionError("a batch after the stop request must not be applied")
    assert collector.last_batch_id == 0


def test_stop_gives_up_waiting_after_the_drain_timeout():
    from streaming.app.service import _stop_query
    collector = RunCollector(MetricsSink([1.0]), keep_records=False)
    running, thread = _batch_in_thread(collector, 3.0)
    query = _FakeQuery(running)
    t0 = time.monotonic()
    _stop_query(query, collector.gate, drain_timeout_s=0.2)
    assert time.monotonic() - t0 < 2
    assert query.stopped_during_batch is True
    thread.join(5)


def test_diagnosis_limits_give_the_real_delay_of_removal_records():
    """docs/diagnosis.md said "about two minutes": a LeaveGroup of a member with the client
    default max.poll.interval.ms (300 s) is held 300 s, and the correlator holds every removal."""
    from state.diagnosis.correlate import Correlator
    from state.diagnosis.rules import DEFAULT_SETTINGS
    text = (ROOT / "docs" / "diagnosis.md").read_text()
    limits = text[text.index("## Limits"):]
    assert "about two minutes" not in limits
    hold_s = Correlator(DEFAULT_SETTINGS).hold_ms // 1000
    assert f"{hold_s} s" in limits                  # the correlator's hold
    assert "300 s" in limits                        # the default max.poll.interval.ms
    assert "group_pending_removals" in limits       # where the removal is seen meanwhile


class _Frame:
    """A foreachBatch frame of output rows (kind, record)."""

    def __init__(self, rows: list[tuple[str, dict]]):
        self.rows = rows

    def select(self, *columns):
        return self

    def toArrow(self):
        import json

        import pyarrow as pa
        return pa.table({"kind": pa.array([k for k, _ in self.rows], pa.string()),
                         "record_json": pa.array([json.dumps(r) for _, r in self.rows], pa.string())})


def test_the_quiet_sources_marker_plan_follows_the_state_timeouts_and_held_removals(tmp_path):
    """The driver keeps every state key's timeout from the CLOCK rows (a key called without a
    timeout drops it) and the correlator's next decision, writes the earliest plus the lateness as
    the sources' marker plan (sources/markers.py), and saves the timeouts with the state file so a
    restarted monitor plans the same."""
    from sinks.files import GroupStateFile
    from streaming.app.marker_planner import MarkerPlanner
    from streaming.app.restart import restore
    from streaming.spark.sources.markers import read_plan

    def clock(key, timeout, watermark=1_000):
        return ("clock", {"watermark_ms": watermark, "turns": 1, "folds": 0, "cluster": "c", "key": key,
                          "timeout_ms": timeout})
    state = GroupStateFile(str(tmp_path / "groups.json"))
    collector = RunCollector(MetricsSink([1.0]), keep_records=False, state_file=state,
                             markers=MarkerPlanner(str(tmp_path / "plan.json"), lateness_ms=10_000))
    collector.foreach_batch(_Frame([clock("7", 50_000), clock("9", 20_000)]), 0)
    assert read_plan(collector.markers.path) == {"due_ms": 30_001, "caught_up": []}
    collector.foreach_batch(_Frame([clock("9", None)]), 1)        # bucket 9 has nothing left waiting
    assert read_plan(collector.markers.path) == {"due_ms": 60_001, "caught_up": []}
    removal = {"cluster": "c", "group": "g", "member_id": "m", "removed_at_ms": 2_000, "cause": "heartbeat_expiry",
               "root_cause": "process_crash", "client_host": "/10.0.0.1", "protocol": "classic"}
    collector.foreach_batch(_Frame([("removal", removal), clock("7", 500_000)]), 2)
    assert read_plan(collector.markers.path) == {"due_ms": 2_000 + collector.correlator.hold_ms + 10_001, "caught_up": []}
    restarted = RunCollector(MetricsSink([1.0]), keep_records=False, state_file=state)
    restore(restarted)
    assert restarted.markers.timeouts == {"c\t7": 500_000}
    collector.foreach_batch(_Frame([clock("7", None)]), 3)
    collector.correlator.pending.clear()
    collector.markers.plan()
    assert read_plan(collector.markers.path) == {"due_ms": None, "caught_up": []}


def test_the_plan_says_which_sources_read_everything_waiting(tmp_path):
    """The progress listener's reports set `caught_up` in the marker plan (a capped connector's
    clock waits for it); a (re)started query forgets it until a batch says it again."""
    from sinks.health import BatchReport, SourceBatch
    from streaming.app.marker_planner import MarkerPlanner
    from streaming.spark.sources.markers import read_plan
    collector = RunCollector(MetricsSink([1.0]), keep_records=False, markers=MarkerPlanner(str(tmp_path / "plan.json")))
    collector.markers.query_started()
    assert read_plan(collector.markers.path) == {"due_ms": None, "caught_up": []}
    collector.markers.note_caught_up(BatchReport(sources=(SourceBatch("offsets", 1000, backlog=4_000_000),
                                                  SourceBatch("broker_log", 3, backlog=0))))
    assert (read_plan(collector.markers.path) or {}).get("caught_up") == ["broker_log"]
    collector.markers.note_caught_up(BatchReport(sources=(SourceBatch("offsets", 1000, backlog=0),
                                                  SourceBatch("staged", 9))))        # says nothing: kept
    assert (read_plan(collector.markers.path) or {}).get("caught_up") == ["broker_log", "offsets"]
    collector.markers.query_started()
    assert (read_plan(collector.markers.path) or {}).get("caught_up") == []
