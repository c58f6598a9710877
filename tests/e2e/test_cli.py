"""The command line as an operator uses it: the demo end to end (HTTP scrape + promtool),
decode-offsets, and configuration errors that name the bad field."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.support.capture_expectations import FIXTURES

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "streaming.app.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env():
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    env.pop("REBALANCE_MONITOR_METRICS_PORT", None)
    return env


@pytest.mark.spark
def test_replay_prints_a_summary_and_writes_its_report(tmp_path):
    """`replay` end to end (the offsets dump alone: one Spark run, no logs): outputs, report.html and a
    summary for a 100-column terminal on stdout."""
    out = tmp_path / "out"
    result = subprocess.run([*CLI, "replay", "--offsets", str(FIXTURES / "kafka-2.7" / "offsets-topic.jsonl"),
                             "--out", str(out), "--cluster", "kafka-2.7"], cwd=ROOT, env=_env(),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rebalances = (out / "rebalances.jsonl").read_text().splitlines()
    assert result.stdout.startswith("DIAGNOSIS: ")
    assert max(len(line) for line in result.stdout.splitlines()) <= 100
    assert f"EVENTS BY GROUP: {len(rebalances)} rebalances" in result.stdout
    assert f"timeline report: {out / 'report.html'}" in result.stdout
    page = (out / "report.html").read_text()
    assert page.count('<g class="rebalance"') == len(rebalances) > 20
    assert "Traceback" not in result.stderr


@pytest.mark.spark
def test_replay_command_writes_the_golden_outputs(tmp_path):
    """`replay` with both logs and the dump of the 2.7 capture, as an operator runs it (the record
    files and the report written by a forked child while the command writes metrics.prom and the
    summary: streaming/app/beside.py): every output file equals the golden one."""
    from tests.support.capture_expectations import LOG_FILES
    from tests.support.golden import differing_files
    capture, out = "kafka-2.7", tmp_path / "out"
    logs = [str(FIXTURES / capture / name) for name in LOG_FILES[capture]]
    result = subprocess.run([*CLI, "replay", "--broker-log", *logs, "--offsets",
                             str(FIXTURES / capture / "offsets-topic.jsonl"), "--out", str(out)],
                            cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert differing_files(capture, out) == []
    assert (out / "report.html").read_text().count('<g class="rebalance"') == \
        len((out / "rebalances.jsonl").read_text().splitlines())
    assert result.stdout.startswith("DIAGNOSIS: ") and "Traceback" not in result.stderr


@pytest.mark.spark
def test_replay_of_a_real_follower_kill_names_the_dead_broker(tmp_path):
    """`replay` of a real Kafka 4.4.0 follower kill (tests/fixtures/kafka-4.4-follower-kill), as an
    operator runs it: the broker lines reach the driver's correlator through the Spark query, and
    every removal the coordinator stall made is coordinator_wide, naming broker 2."""
    folder, out = FIXTURES / "kafka-4.4-follower-kill", tmp_path / "out"
    result = subprocess.run([*CLI, "replay", "--broker-log", str(folder / "broker1-server.log"),
                             str(folder / "broker2-server.log"), "--offsets", str(folder / "offsets-topic.jsonl"),
                             "--out", str(out)], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    removals = [json.loads(line) for line in (out / "member_removals.jsonl").read_text().splitlines()]
    assert sorted(r["group"] for r in removals) == ["fk-consumer-6", "fk-rdk-7", "fk-rdk-7"]
    for r in removals:
        assert (r["cause"], r["root_cause"], r["root_cause_confidence"]) == \
            ("heartbeat_expiry", "coordinator_wide", "medium"), r["evidence"]
        assert r["evidence"].startswith("broker 2 died ") and "it never stopped" in r["evidence"]
    assert "coordinator_wide" in result.stdout and "Traceback" not in result.stderr


@pytest.mark.spark
def test_demo_serves_real_rebalances_and_promtool_accepts_the_page(demo_server):
    port, folder = demo_server     # conftest.py: the demo process, shared with test_prometheus_e2e
    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    # Real rebalances of both bundled clusters, e.g. sc03's heartbeat expiry on Kafka 2.7.
    assert 'rebalance_monitor_rebalances_total{cluster="kafka-2.7",group="sc03-heartbeat-expiry",' \
           'outcome="stable",protocol="classic",trigger="heartbeat_expiry"} 1.0' in page
    assert 'rebalance_monitor_member_removals_total{cause="heartbeat_expiry",cluster="kafka-4.0",' \
           'group="k4-sc09-consumer-protocol",protocol="consumer",root_cause="process_crash"} 1.0' in page
    assert 'rebalance_monitor_member_removals_total{cause="heartbeat_expiry",cluster="kafka-4.0",' \
           'group="k4-sc09-consumer-protocol",protocol="consumer",root_cause="process_pause"} 1.0' in page
    # Its fenced members' partitions count from their last heartbeat: the fence minus the 10 s
    # session timeout that the 4.0 brokers' start-up lines say (docs/impact.md).
    assert 'rebalance_monitor_partition_seconds_stopped_total{cluster="kafka-4.0",' \
           'group="k4-sc09-consumer-protocol"} 64.194' in page
    # Duration histograms per cluster, protocol and phase; per group the last duration of each phase.
    assert 'rebalance_monitor_rebalance_duration_seconds_bucket{cluster="kafka-2.7",' \
           'le="30.0",phase="join",protocol="classic"}' in page
    assert 'rebalance_monitor_group_last_rebalance_duration_seconds{cluster="kafka-2.7",' \
           'group="sc11-stuck-in-rebalance",phase="join"} 0.197' in page
    # the groups of REBALANCE_MONITOR_GROUP_HISTOGRAMS (conftest.py) have their own histograms, no other
    own: set[str] = set()
    for line in page.splitlines():
        if line.startswith("rebalance_monitor_group_rebalance_duration_seconds_count"):
            m = re.search(r'group="([^"]*)"', line)
            assert m is not None, line
            own.add(m.group(1))
    assert own == {"sc11-stuck-in-rebalance", "k4-sc09-consumer-protocol"}
    assert 'rebalance_monitor_group_rebalance_duration_seconds_bucket{cluster="kafka-2.7",group="sc11-stuck-in-rebalance",' \
           'le="30.0",phase="join",protocol="classic"} 4.0' in page
    # Error counters exist at 0 per cluster, so an increase() alert sees the first bad input.
    assert 'rebalance_monitor_quarantined_records_total{cluster="kafka-4.0",reason="corrupt_record",' \
           'source="offsets"} 0.0' in page
    assert 'rebalance_monitor_invalid_transitions_total{cluster="kafka-2.7"} 0.0' in page
    summary = (folder / "demo.stdout").read_text()
    assert summary.startswith("DIAGNOSIS: 155 member removals in 56 groups")
    assert "EVENTS BY GROUP: 188 rebalances, 155 member removals in 56 groups" in summary
    # what the rebalances cost (docs/impact.md), before the per-group listing
    assert 0 < summary.index("\nCOST: the rebalances stopped ") < summary.index("\nEVENTS BY GROUP")
    assert "100% of it from the removal of" in " ".join(summary.split())
    assert max(len(line) for line in summary.splitlines()) <= 100
    # the demo says where its full records and its report are, and they are there
    report = folder / "out" / "report.html"
    assert f"timeline report: {report} (open it in a browser)" in summary
    assert f"full records: {folder / 'out' / '*.jsonl'}" in summary
    assert report.read_text().count('<section class="card group"') == 56
    # written from the records in memory: the page `report` makes of the files (with the trigger
    # decisions of the 2.7 and 4.0 poll-timeout groups)
    again = folder / "again.html"
    made = subprocess.run([*CLI, "report", str(folder / "out"), "-o", str(again)], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    assert (folder / "out" / "rebalance_triggers.jsonl").read_text().strip()
    assert again.read_text() == report.read_text()
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not installed (Debian package 'prometheus'; scripts/test installs it)")
    check = subprocess.run([promtool, "check", "metrics"], input=page, capture_output=True, text=True)
    assert (check.returncode, check.stdout + check.stderr) == (0, "")


def test_decode_offsets_prints_one_object_per_record(tmp_path):
    dump = FIXTURES / "kafka-4.0" / "offsets-topic.jsonl"
    result = subprocess.run(CLI + ["decode-offsets", str(dump)], cwd=ROOT, env=_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 4634
    assert "4634 decoded, 0 failed" in result.stderr
    types = {r["key"]["type"] for r in records}
    assert types == {1, 2, 3, 4, 5, 6, 7, 8}
    epoch = next(r for r in records if r["key"]["type"] == 3 and not r["tombstone"])
    assert epoch["key"]["group"] and "epoch" in epoch["value"]


@pytest.mark.parametrize("args,message", [
    (["replay", "--out", "x"], "give at least one --broker-log or --offsets"),
    (["replay", "--broker-log", "no-such.log", "--out", "x"], "--broker-log[0]: path: Value error, no such file"),
    (["replay", "--offsets", str(FIXTURES / "kafka-2.7" / "offsets-topic.jsonl"), "--broker-timezone",
      "Mars/Olympus", "--out", "x"], "broker_timezone: Value error, unknown time zone 'Mars/Olympus'"),
    (["replay", "--offsets", str(FIXTURES / "kafka-2.7" / "offsets-topic.jsonl"), "--lateness-seconds", "-1",
      "--out", "x"], "lateness_seconds: Input should be greater than or equal to 0"),
    (["replay", "--offsets", str(FIXTURES / "kafka-2.7" / "segments" / "broker1" / "no-such-dir"), "--out", "x"],
     "--offsets[0]: path: Value error, no such file or directory"),
    (["replay", "--offsets", str(ROOT / "docs"), "--out", "x"],
     "--offsets[0]: path: Value error, no __consumer_offsets-N directory in"),
])
def test_configuration_errors_name_the_field(args, message):
    result = subprocess.run(CLI + args, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr


def test_settings_file_and_environment(tmp_path, monkeypatch):
    from streaming.app.settings import ConfigError, DemoSettings, load
    cfg = tmp_path / "monitor.toml"
    cfg.write_text('broker_timezone = "Europe/Berlin"\nmetrics_port = 9200\n')
    monkeypatch.setenv("REBALANCE_MONITOR_LATENESS_SECONDS", "5")
    s = load(DemoSettings, str(cfg))
    assert (s.broker_timezone, s.metrics_port, s.lateness_seconds) == ("Europe/Berlin", 9200, 5.0)
    cfg.write_text('metrics_port = "high"\n')
    with pytest.raises(ConfigError, match=r"monitor.toml: metrics_port: Input should be a valid integer"):
        load(DemoSettings, str(cfg))
    cfg.write_text('metric_port = 1\n')   # a typo is an error, not silently ignored
    with pytest.raises(ConfigError, match="metric_port: Extra inputs are not permitted"):
        load(DemoSettings, str(cfg))


def test_input_rows_are_counted_per_source_kind_without_markers():
    from sinks.exposition import text
    from sinks.metrics import MetricsSink
    from streaming.app.collector import RunCollector
    collector = RunCollector(MetricsSink([1.0]))
    # Shapes as Spark reports them (first batch's start is the string "null").
    collector.count_progress({"sources": [
        {"startOffset": "null", "endOffset": '{"source": "offsets", "i": 1606, "eof": true}', "numInputRows": 1607},
        {"startOffset": "null", "endOffset": '{"source": "broker_log", "emitted": 500, "eof": false}',
         "numInputRows": 500}]})
    collector.count_progress({"sources": [
        {"startOffset": '{"source": "offsets", "i": 1606, "eof": true}',
         "endOffset": '{"source": "offsets", "i": 1606, "eof": true}', "numInputRows": 0}]})
    page = text(collector.metrics.registry)
    assert 'rebalance_monitor_input_records_total{source="offsets"} 1606.0' in page
    assert 'rebalance_monitor_input_records_total{source="broker_log"} 500.0' in page


def test_input_rows_of_the_log_reader_count_every_line_read():
    """The log reader emits only coordinator-marker lines; its offsets count every line read."""
    from sinks.exposition import text
    from sinks.metrics import MetricsSink
    from streaming.app.collector import RunCollector
    collector = RunCollector(MetricsSink([1.0]))
    collector.count_progress({"sources": [
        {"startOffset": "null", "endOffset": '{"source": "broker_log", "lines": 2000, "emitted": 300, "eof": false}',
         "numInputRows": 300}]})
    collector.count_progress({"sources": [
        {"startOffset": '{"source": "broker_log", "lines": 2000, "emitted": 300, "eof": false}',
         "endOffset": '{"source": "broker_log", "lines": 3486, "emitted": 567, "eof": true}', "numInputRows": 267}]})
    assert 'rebalance_monitor_input_records_total{source="broker_log"} 3486.0' in text(collector.metrics.registry)


def _parse_logs(*args):
    result = subprocess.run(CLI + ["parse-logs", *args], cwd=ROOT, env=_env(), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()], result.stderr


def test_parse_logs_prints_the_coordinator_events_of_a_real_log():
    log = FIXTURES / "kafka-2.7" / "broker1-server.log"
    events, stderr = _parse_logs(str(log))
    assert len(events) == 174
    # 13 of them the broker lines read for broker deaths (docs/diagnosis.md): its own start and
    # shutdown, and the controller's 11 failed connections to broker 2 after broker 2's shutdown
    assert sum(1 for e in events if e["kind"].startswith("broker_") and e["group"] is None) == 13
    assert events[0]["kind"] == "broker_started" and events[0]["line"] == 519    # the broker's own start
    first_group_event = next(e for e in events if e["group"] is not None)
    assert first_group_event == {
        "ts_ms": 1795288918686, "broker": 1, "kind": "prepare_rebalance", "group": "sc08-offset-expiry",
        "generation": 0, "member_id": None, "trigger": "member_join", "file": str(log), "line": 803,
        "reason": "Adding new member sc08-exp-c1-70b11e09-ec73-430b-84f9-4e385cd43d51 with group instance id None"}
    assert ("1321 lines, 295 coordinator lines: 174 events from 174 lines (13 of them broker lines: a peer "
            "unreachable, a broker's start or shutdown), 134 known lines not needed (loads, elections, offset "
            "cleanups)") in stderr
    assert "0 unrecognised" in stderr
    shifted, _ = _parse_logs(str(log), "--broker-timezone", "Asia/Kolkata")
    assert [e["ts_ms"] for e in shifted] == [e["ts_ms"] - 19_800_000 for e in events]   # UTC+05:30


def test_parse_logs_reads_envelopes_and_counts_unrecognised_lines_by_logger(tmp_path):
    from tests.support.log_rewrite import read_lines, vector, write
    lines = read_lines(FIXTURES / "kafka-4.0" / "node1-server.log")
    lines += ["[2026-11-21 19:40:00,000] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=1] "
              "[GroupId g] Member m teleported. (org.apache.kafka.coordinator.group.GroupMetadataManager)"] * 2
    lines += ["[2026-11-21 19:40:01,000] WARN Frobnicated (kafka.coordinator.group.GroupMetadata)"]
    path = write(tmp_path / "node1.json", vector(lines, host="kafka-node-1"))
    events, stderr = _parse_logs(path, "--log-envelope", "json")
    plain, _ = _parse_logs(write(tmp_path / "node1.log", lines))
    assert [{k: v for k, v in e.items() if k not in ("file", "host")} for e in events] == \
        [{k: v for k, v in e.items() if k != "file"} for e in plain]
    assert events and all(e["host"] == "kafka-node-1" for e in events)
    assert "3 unrecognised" in stderr
    assert "unrecognised 2 org.apache.kafka.coordinator.group.GroupMetadataManager" in stderr
    assert "unrecognised 1 kafka.coordinator.group.GroupMetadata\n" in stderr


def test_parse_logs_broker_id_per_file(tmp_path):
    from tests.support.log_rewrite import write
    # a coordinator line without the `[GroupCoordinator N]: ` prefix: the broker comes from --broker-id
    line = ("[2026-11-21 19:33:51,663] INFO The following groups were deleted: g1. A total of 2 offsets were "
            "removed. (kafka.coordinator.group.GroupCoordinator)")
    a, b = write(tmp_path / "a.log", [line]), write(tmp_path / "b.log", [line])
    events, _ = _parse_logs(a, b, "--broker-id", "4", "5")
    assert [(e["file"], e["broker"]) for e in events] == [(a, 4), (b, 5)]
    events, _ = _parse_logs(a, b, "--broker-id", "7")
    assert [e["broker"] for e in events] == [7, 7]
    result = subprocess.run(CLI + ["parse-logs", a, b, "--broker-id", "1", "2", "3"], cwd=ROOT, env=_env(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "one per log file (3 ids for 2 files)" in result.stderr
