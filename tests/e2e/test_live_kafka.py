"""The live service against a real Kafka-protocol broker on loopback (tansu): the Kafka 2.7
capture is produced into a log topic and an offsets topic (bytes as captured), `rebalance-monitor
run` reads them with the kafka-python source, and /metrics and the event sink must show every
rebalance and removal the capture's README lists. Then a kill -9 in mid-stream, while the live
view is ahead of the final records (provisional state), and a restart from the checkpoint must
give exactly what an uninterrupted run gives."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from sinks.files import GroupStateFile
from tests.support.capture_expectations import utc_ms
from tests.support.kafka_harness import (
    FLUSH_GROUP, create_topics, free_port, produce_capture, produce_flush_markers, read_sink, tansu_broker
)
from testbed.proc import stop_group
from tests.support.readme_checks import assert_kafka27_rebalances, assert_kafka27_removals

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
LOG_TOPIC, OFFSETS_TOPIC = "broker-logs", "consumer-offsets"


def _config(path: Path, bootstrap: str, port: int, workdir: Path, **extra) -> Path:
    kafka = dict(extra.pop("kafka", {}))
    source = kafka.pop("source", '"python"')
    kafka_extra = "\n".join(f"{k} = {v}" for k, v in kafka.items())
    top_extra = "\n".join(f"{k} = {v}" for k, v in extra.items())
    path.write_text(f"""
metrics_host = "127.0.0.1"
metrics_port = {port}
checkpoint_location = "{workdir / 'checkpoint'}"
events_dir = "{workdir / 'events'}"
trigger_interval_seconds = 1
group_deny = ["^{FLUSH_GROUP}$"]
{top_extra}

[kafka]
bootstrap_servers = "{bootstrap}"
log_topics = ["{LOG_TOPIC}"]
offsets_topic = "{OFFSETS_TOPIC}"
source = {source}
{kafka_extra}
""")
    return path


def _start(config: Path, log: Path, **env_extra: str) -> subprocess.Popen:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", **env_extra)
    handle = open(log, "a")
    return subprocess.Popen([sys.executable, "-m", "streaming.app.cli", "run", "--config", str(config)],
                            cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _wait(condition, what: str, proc: subprocess.Popen, log: Path, timeout: float = 240.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"monitor exited ({proc.returncode}) while waiting for {what}:\n"
                                 + log.read_text()[-4000:])
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n" + log.read_text()[-4000:])
        time.sleep(0.5)


def _stop(proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """SIGTERM, then kill -9 of its process group after `timeout` seconds, and whatever it left in
    the group (spark-submit's Python driver outlives its JVM)."""
    stop_group(proc, timeout)


def _scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


GROUP_FAMILIES = re.compile(r"^rebalance_monitor_(rebalances_total|member_removals_total|rebalance_duration_seconds_"
                            r"(bucket|count|sum)|group_(state|generation|members|state_since_timestamp_seconds|"
                            r"last_rebalance_duration_seconds)|groups)\{")


def _group_series(page: str) -> list[str]:
    """The group and cluster series of a page; `_sum` samples rounded to 1e-9: the cluster-level
    duration histograms add the observations of all groups in the order their batches bring them,
    so a restart that cuts batches elsewhere changes the float sum in its last bits."""
    out = []
    for line in page.splitlines():
        if GROUP_FAMILIES.match(line):
            name, value = line.rsplit(" ", 1)
            out.append(f"{name} {round(float(value), 9)}" if "_sum{" in name else line)
    return sorted(out)


def test_live_run_reads_topics_and_shows_every_readme_rebalance(tmp_path):
    with tansu_broker() as bootstrap:
        create_topics(bootstrap, {LOG_TOPIC: 2, OFFSETS_TOPIC: 10})
        lines, records = produce_capture(bootstrap, "kafka-2.7", LOG_TOPIC, OFFSETS_TOPIC)
        assert (lines, records) == (3486, 1606)
        port = free_port()
        config = _config(tmp_path / "monitor.toml", bootstrap, port, tmp_path, lateness_seconds=5)
        log = tmp_path / "run.log"
        proc = _start(config, log)
        try:
            events = tmp_path / "events"
            # Nothing marks the end here: the idle flush (caught-up marker at wall-clock time)
            # must release the last events by itself.
            _wait(lambda: len(read_sink(events, "rebalances")) >= 82, "82 rebalances", proc, log)
            time.sleep(3)   # a few more (idle) batches must not add anything
            page = _scrape(port)
        finally:
            _stop(proc)
        assert "reading Kafka with the python source" in log.read_text()
    assert_kafka27_rebalances(read_sink(events, "rebalances"))
    assert_kafka27_removals(read_sink(events, "member_removals"))
    assert read_sink(events, "quarantine") == []
    assert 'rebalance_monitor_rebalances_total{cluster="default",group="sc03-heartbeat-expiry",' \
           'outcome="stable",protocol="classic",trigger="heartbeat_expiry"} 1.0' in page
    assert 'rebalance_monitor_source_up{source="offsets"} 1.0' in page
    assert 'rebalance_monitor_input_records_total{source="broker_log"} 3486.0' in page
    assert 'rebalance_monitor_input_records_total{source="offsets"} 1606.0' in page
    assert 'rebalance_monitor_late_rows_total 0.0' in page
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing (Debian package prometheus; scripts/test installs it)"
    check = subprocess.run([promtool, "check", "metrics"], input=page, capture_output=True, text=True)
    assert (check.returncode, check.stdout + check.stderr) == (0, "")


def _run_to_end(bootstrap: str, tmp: Path, port: int, proc_log: Path, config: Path, start=None,
                **env_extra: str) -> str:
    proc = (start or _start)(config, proc_log, **env_extra)
    try:
        _wait(lambda: len(read_sink(tmp / "events", "rebalances")) >= 82, "82 rebalances", proc, proc_log)
        _wait(lambda: "rebalance_monitor_rebalances_total" in _scrape(port), "/metrics", proc, proc_log)
        return _scrape(port)
    finally:
        _stop(proc)


def _batch_ids(checkpoint: Path, log: str) -> set[int]:
    return {int(p.name) for p in (checkpoint / "query" / log).glob("[0-9]*")}


def test_kill_and_restart_equals_an_uninterrupted_run(tmp_path):
    kill_and_restart_equals_an_uninterrupted_run(tmp_path, _start)


def kill_and_restart_equals_an_uninterrupted_run(tmp_path: Path, start) -> None:
    """`start(config, log, **env)` starts `run` (a local process, or spark-submit to a cluster)
    in its own process group, which the kill -9 takes down (driver and Python workers)."""
    first, second = utc_ms("19:25:00.000"), utc_ms("19:29:00.000")
    # Old data: no idle flush (it would stamp "now" and make the rest of the capture late);
    # markers dated 2099 end the input instead.
    settings = {"lateness_seconds": 60, "kafka": {"idle_flush": "false"}}

    # Uninterrupted baseline: everything produced, then one run.
    base = tmp_path / "baseline"
    base.mkdir()
    with tansu_broker() as bootstrap:
        create_topics(bootstrap, {LOG_TOPIC: 2, OFFSETS_TOPIC: 10})
        produce_capture(bootstrap, "kafka-2.7", LOG_TOPIC, OFFSETS_TOPIC)
        produce_flush_markers(bootstrap, LOG_TOPIC, OFFSETS_TOPIC)
        port = free_port()
        baseline_page = _run_to_end(bootstrap, base, port, base / "run.log",
                                    _config(base / "monitor.toml", bootstrap, port, base, **settings), start)

    # Interrupted run: part 1 is processed; part 2 arrives and the process is killed -9 as soon
    # as Spark has planned the batch for it (before that batch is committed); part 3 and the end
    # markers arrive; the monitor restarts on the same checkpoint and event sink.
    run = tmp_path / "restarted"
    run.mkdir()
    checkpoint = run / "checkpoint"
    with tansu_broker() as bootstrap:
        create_topics(bootstrap, {LOG_TOPIC: 2, OFFSETS_TOPIC: 10})
        produce_capture(bootstrap, "kafka-2.7", LOG_TOPIC, OFFSETS_TOPIC, keep=lambda ts: ts < first)
        port = free_port()
        config = _config(run / "monitor.toml", bootstrap, port, run, **settings)
        log = run / "run.log"
        proc = start(config, log)
        try:
            _wait(lambda: _batch_ids(checkpoint, "commits") and read_sink(run / "events", "rebalances"),
                  "part 1 processed", proc, log)
            # The kill lands in the middle of provisional state: with a 60 s lateness the live view
            # (gauges, state file) is ahead of the final records (issue 14).
            groups = GroupStateFile(str(checkpoint / "rebalance-monitor" / "groups.json")).read().groups.values()
            assert [g["group"] for g in groups if g.get("provisional_events")], groups
            assert "rebalance_monitor_group_pending_removals{" in _scrape(port)
            planned_before = _batch_ids(checkpoint, "offsets")
            produce_capture(bootstrap, "kafka-2.7", LOG_TOPIC, OFFSETS_TOPIC, keep=lambda ts: first <= ts < second)
            _wait(lambda: _batch_ids(checkpoint, "offsets") - planned_before, "a batch planned for part 2",
                  proc, log)
        finally:
            stop_group(proc, kill=True)   # kill -9 of the driver and Python workers (the group)
        uncommitted = _batch_ids(checkpoint, "offsets") - _batch_ids(checkpoint, "commits")
        produce_capture(bootstrap, "kafka-2.7", LOG_TOPIC, OFFSETS_TOPIC, keep=lambda ts: ts >= second)
        produce_flush_markers(bootstrap, LOG_TOPIC, OFFSETS_TOPIC)
        # restarted with more state partitions configured: the checkpoint keeps its 2, and says so
        restarted_page = _run_to_end(bootstrap, run, port, log, config, start,
                                     REBALANCE_MONITOR_SHUFFLE_PARTITIONS="8")
    assert uncommitted, "the kill should land between planning and committing a batch"
    assert (f"shuffle_partitions: the checkpoint in {checkpoint / 'query'} was written with 2 state partitions "
            "and Spark keeps them (the setting says 8)") in log.read_text()
    for kind in ("rebalances", "member_removals", "quarantine", "anomalies"):
        assert sorted(map(repr, read_sink(run / "events", kind))) == \
            sorted(map(repr, read_sink(base / "events", kind))), kind
    assert_kafka27_rebalances(read_sink(run / "events", "rebalances"))
    # Counters and histograms come back from the event sink, gauges from the state file: the
    # restarted process shows what the uninterrupted one shows.
    assert _group_series(restarted_page) == _group_series(baseline_page)


def test_missing_topic_is_a_clear_error(tmp_path):
    with tansu_broker() as bootstrap:
        create_topics(bootstrap, {LOG_TOPIC: 1})          # the offsets topic is missing
        config = _config(tmp_path / "monitor.toml", bootstrap, free_port(), tmp_path)
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
        result = subprocess.run([sys.executable, "-m", "streaming.app.cli", "run", "--config", str(config)],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert f"topic(s) not found at {bootstrap}: {OFFSETS_TOPIC}" in result.stderr


def test_unreachable_broker_is_retried_then_the_run_proceeds(tmp_path):
    kafka_port, metrics_port = free_port(), free_port()
    bootstrap = f"127.0.0.1:{kafka_port}"
    config = _config(tmp_path / "monitor.toml", bootstrap, metrics_port, tmp_path, lateness_seconds=5)
    log = tmp_path / "run.log"
    proc = _start(config, log)
    try:
        _wait(lambda: "next attempt in" in log.read_text(), "a retry log line", proc, log, timeout=60)

        def down() -> bool:
            try:
                return 'rebalance_monitor_source_up{source="offsets"} 0.0' in _scrape(metrics_port)
            except OSError:
                return False
        _wait(down, "source_up 0 on /metrics", proc, log, timeout=60)
        with tansu_broker(kafka_port):
            create_topics(bootstrap, {LOG_TOPIC: 2, OFFSETS_TOPIC: 10})
            produce_capture(bootstrap, "kafka-2.7", LOG_TOPIC, OFFSETS_TOPIC,
                            keep=lambda ts: ts < utc_ms("19:23:00.000"))
            _wait(lambda: len(read_sink(tmp_path / "events", "rebalances")) >= 6, "the first rebalances",
                  proc, log)
            page = _scrape(metrics_port)
    finally:
        _stop(proc)
    assert 'rebalance_monitor_source_up{source="offsets"} 1.0' in page
    m = re.search(r'rebalance_monitor_source_errors_total\{source="kafka"\} (\S+)', page)
    assert m is not None, page
    assert float(m.group(1)) >= 1
