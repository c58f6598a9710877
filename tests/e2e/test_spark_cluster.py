"""`replay` and `run` submitted to a real Spark standalone cluster (a master and 2 one-core
workers from the installed pyspark, each executor its own JVM, testbed/spark_cluster.py)
the way the chart submits: spark-submit with the settings of the chart's rendered
SparkApplication (testbed/chart.py), scripts/spark_entrypoint.py, `--master spark://...`.

- The Python data sources are planned on the driver and read in the executors: the outputs equal
  the goldens (tests/fixtures/golden) byte for byte, as a local[2] run's do.
- kill -9 of an executor in the middle of the streaming stage: Spark reschedules its tasks on a
  new executor and nothing is lost or counted twice (the records and the group metrics still
  equal the goldens; smaller micro-batches, so the batch-count health series differ).

CI (scripts/test) runs the 2.7 capture's replay, the executor kill and `run` with the connector
(about 2 min; 4.5 with tests/e2e/kafka/test_spark_cluster_live.py's 150 s); the tests marked
spark_cluster_check (the 4.0 capture's replay, the driver and master faults, `run` with the
kafka-python source on tansu) run in scripts/spark-cluster-check, which runs everything here.

Found by this test: under spark-submit, PySpark's SparkConf() does not see the submitted master
before the SparkContext exists, so every submitted run ran local[2] inside the driver
(streaming/spark/session.under_spark_submit); and relative input paths were opened in the
executors' working directory (replay_files plans absolute paths)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from testbed.chart import Submission, spark_application
from testbed.spark_cluster import ROOT, StandaloneCluster, record_figure
from tests.support.capture_expectations import FIXTURES, LOG_FILES, utc_ms
from tests.support.golden import GOLDEN, comparable, differing_files, lost_and_doubled

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    yield c
    c.stop()


def _replay_argv(capture: str, out: Path, *extra: str) -> list[str]:
    # relative input paths, as a user in the project directory types them
    logs = [os.path.relpath(FIXTURES / capture / name, ROOT) for name in LOG_FILES[capture]]
    dump = os.path.relpath(FIXTURES / capture / "offsets-topic.jsonl", ROOT)
    return ["replay", "--broker-log", *logs, "--offsets", dump, "--out", str(out), *extra]


# the 4.0 capture's replay (30 s) in scripts/spark-cluster-check only, to keep CI's share under 5 min
@pytest.mark.parametrize("capture", ["kafka-2.7", pytest.param("kafka-4.0", marks=pytest.mark.spark_cluster_check)])
def test_replay_on_the_cluster_writes_the_golden_outputs(cluster, tmp_path, capture):
    before = {p.parent.parent.name for p in cluster.executor_logs()}
    result = cluster.submit(_replay_argv(capture, tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Starting executor ID driver" not in result.stderr      # not local mode in the driver
    tasks = cluster.tasks_per_executor(before)
    differ = differing_files(capture, tmp_path / "out")
    record_figure("executors", sum(1 for n in tasks.values() if n > 0))
    record_figure("records_equal", differ == [])
    assert len(tasks) == 2 and all(n > 0 for n in tasks.values()), tasks
    assert differ == []


def _newest_app(cluster: StandaloneCluster) -> str | None:
    apps = sorted({p.parent.parent.name for p in cluster.executor_logs()})
    return apps[-1] if apps else None


def test_an_executor_killed_mid_stream_loses_and_doubles_nothing(cluster, tmp_path):
    before = _newest_app(cluster)
    err = tmp_path / "submit.err"
    with open(err, "w") as handle:
        proc = subprocess.Popen(cluster.submit_argv(_replay_argv("kafka-2.7", tmp_path / "out",
                                                                 "--max-rows-per-batch", "300")),
                                cwd=ROOT, env=cluster.env(), stdout=subprocess.PIPE, stderr=handle, text=True)
    killed = None
    try:
        deadline = time.monotonic() + 300
        while killed is None and time.monotonic() < deadline and proc.poll() is None:
            app = _newest_app(cluster)
            logs = [p for p in cluster.executor_logs() if app != before and p.parent.parent.name == app]
            # the streaming stage has run a few micro-batches (one or more stages each)
            busy = [p for p in logs if "in stage 12." in p.read_text(errors="replace")]
            if busy:
                pid_file = busy[0].parent / "stderr"
                pids = cluster.executor_pids()
                assert pids, "no executor JVM"
                # the executor of that log: the one whose command line names its executor id
                exec_id = busy[0].parent.name
                for pid in pids:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    if b"--executor-id" in cmd and cmd[cmd.index(b"--executor-id") + 1].decode() == exec_id:
                        os.kill(pid, signal.SIGKILL)
                        killed = (exec_id, pid, pid_file)
                        break
            time.sleep(0.2)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = err.read_text(errors="replace")
    assert killed is not None, f"no executor reached the streaming stage's batches:\n{stderr[-3000:]}"
    if proc.returncode == 0:
        lost, doubled = lost_and_doubled("kafka-2.7", tmp_path / "out")
        record_figure("executor_kill_lost", lost)
        record_figure("executor_kill_doubled", doubled)
    assert proc.returncode == 0, stderr[-4000:]
    assert "Lost executor" in stderr or "lost executor" in stderr.lower(), stderr[-4000:]
    assert [f for f in differing_files("kafka-2.7", tmp_path / "out") if f != "metrics.prom"] == []
    # /metrics: the same, but for the health series that count micro-batches (smaller batches here)
    assert _without(BATCH_COUNTS, comparable("metrics.prom", (tmp_path / "out" / "metrics.prom").read_text())) == \
        _without(BATCH_COUNTS, (GOLDEN / "kafka-2.7" / "metrics.prom").read_text())


BATCH_COUNTS = ("rebalance_monitor_batches_total", "rebalance_monitor_group_turns_total",
                "rebalance_monitor_stateful_calls_total", "rebalance_monitor_source_event_skew_seconds")


def _without(names: tuple[str, ...], text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith(names)]


# the kafka-python source on the cluster also runs in CI in tests/e2e/kafka/test_spark_cluster_live.py
@pytest.mark.parametrize("source", [pytest.param("python", marks=pytest.mark.spark_cluster_check), "spark"])
def test_run_on_the_cluster_reads_the_topics_in_its_executors(cluster, tmp_path, source):
    """`run` submitted to the cluster reads the log and offsets topics in its executors (a
    Kafka-protocol broker on loopback, tansu, holding the Kafka 2.7 capture): the kafka-python
    source's readers pickled to them, or Spark's Kafka connector shipped with `--packages` from
    the chart's connector profile (spark-submit resolves it from Maven through Ivy). The event sink and /metrics show every
    rebalance and removal of the capture's README, as tests/e2e/test_live_kafka.py's local run does."""
    from tests.e2e.test_live_kafka import LOG_TOPIC, OFFSETS_TOPIC, _config, _scrape, _stop, _wait
    from tests.support.kafka_harness import create_topics, free_port, produce_capture, read_sink, tansu_broker
    from tests.support.readme_checks import assert_kafka27_rebalances, assert_kafka27_removals
    before = {p.parent.parent.name for p in cluster.executor_logs()}
    with tansu_broker() as bootstrap:
        create_topics(bootstrap, {LOG_TOPIC: 2, OFFSETS_TOPIC: 10})
        assert produce_capture(bootstrap, "kafka-2.7", LOG_TOPIC, OFFSETS_TOPIC) == (3486, 1606)
        port = free_port()
        config = _config(tmp_path / "monitor.toml", bootstrap, port, tmp_path, lateness_seconds=5,
                         kafka={"source": f'"{source}"'})
        # the chart's profile with the connector: its `deps.packages`, resolved by spark-submit
        submission = Submission.of(spark_application("spark-connector-values.yaml")) if source == "spark" else None
        log = tmp_path / "run.log"
        with open(log, "w") as handle:
            proc = subprocess.Popen(cluster.submit_argv(["run", "--config", str(config)], submission), cwd=ROOT,
                                    env=cluster.env(), stdout=handle, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            events = tmp_path / "events"
            # removals are released after their decision windows, and a capped connector's markers
            # wait for its caught-up report: wait for what is checked, not only the rebalances
            _wait(lambda: len(read_sink(events, "rebalances")) >= 82 and len(read_sink(events, "member_removals")) >= 75,
                  "82 rebalances and 75 removals", proc, log, timeout=360)
            page = _scrape(port)
        finally:
            _stop(proc, timeout=90)
    text = log.read_text(errors="replace")
    assert "Starting executor ID driver" not in text, text[-3000:]
    assert f"reading Kafka with the {source} source" in text
    tasks = cluster.tasks_per_executor(before)
    assert len(tasks) == 2 and all(n > 0 for n in tasks.values()), tasks
    assert_kafka27_rebalances(read_sink(events, "rebalances"))
    assert_kafka27_removals(read_sink(events, "member_removals"))
    assert read_sink(events, "quarantine") == []
    # the connector's rows count by their topic's kind too (its offsets name topics, not kinds)
    counted = [line for line in page.splitlines() if "input_records_total{" in line]
    assert 'rebalance_monitor_input_records_total{source="broker_log"} 3486.0' in page, counted
    assert 'rebalance_monitor_input_records_total{source="offsets"} 1606.0' in page, counted
    assert 'rebalance_monitor_late_rows_total 0.0' in page


@pytest.mark.spark_cluster_check       # 95 s; the local run's kill -9 and restart is in CI (test_live_kafka)
def test_driver_killed_and_resubmitted_equals_an_uninterrupted_run(cluster, tmp_path):
    """kill -9 of the driver (spark-submit's JVM and its Python) between planning and committing
    a micro-batch, then a new submission on the same checkpoint and event sink: the records and
    /metrics equal an uninterrupted cluster run's (the executors of the killed application are
    ended by their workers)."""
    from tests.e2e.test_live_kafka import kill_and_restart_equals_an_uninterrupted_run

    def start(config: Path, log: Path, **env: str) -> subprocess.Popen:
        with open(log, "a") as handle:
            return subprocess.Popen(cluster.submit_argv(["run", "--config", str(config)]), cwd=ROOT,
                                    env={**cluster.env(), **env}, stdout=handle, stderr=subprocess.STDOUT,
                                    start_new_session=True)
    try:
        kill_and_restart_equals_an_uninterrupted_run(tmp_path, start)
    except AssertionError:
        record_figure("driver_kill_equal", False)
        raise
    record_figure("driver_kill_equal", True)


@pytest.mark.spark_cluster_check       # 50 and 75 s, a cluster of their own each
@pytest.mark.parametrize("recovery", [True, False], ids=["filesystem-recovery", "no-recovery"])
def test_a_master_restarted_under_a_running_query(tmp_path, recovery):
    """kill -9 of the standalone master while `run` is mid-stream, and a new master on the same
    port (docs/deploy.md). With spark.deploy.recoveryMode=FILESYSTEM the new master takes
    the application and the workers back, the executors keep running and the query's results are
    complete. Without it, the new master does not know the application and tells the workers,
    when they register with it, to kill its executors: the driver is left without executors and
    its query stops making progress (the monitor does not exit; spark-operator or the user must
    submit it again)."""
    cluster = StandaloneCluster(tmp_path / "cluster", recovery_dir=(tmp_path / "recovery") if recovery else None)
    cluster.start()
    try:
        _master_restart_under_run(cluster, tmp_path, recovery)
    finally:
        cluster.stop()


def _master_restart_under_run(cluster: StandaloneCluster, tmp_path: Path, recovery: bool) -> None:
    from tests.e2e.test_live_kafka import LOG_TOPIC, OFFSETS_TOPIC, _config, _stop, _wait
    from tests.support.kafka_harness import (
        create_topics, free_port, produce_capture, produce_flush_markers, read_sink, tansu_broker,
    )
    from tests.support.readme_checks import assert_kafka27_rebalances, assert_kafka27_removals
    split = utc_ms("19:27:00.000")
    with tansu_broker() as bootstrap:
        create_topics(bootstrap, {LOG_TOPIC: 2, OFFSETS_TOPIC: 10})
        produce_capture(bootstrap, "kafka-2.7", LOG_TOPIC, OFFSETS_TOPIC, keep=lambda ts: ts < split)
        config = _config(tmp_path / "monitor.toml", bootstrap, free_port(), tmp_path, lateness_seconds=60,
                         kafka={"idle_flush": "false"})
        log = tmp_path / "run.log"
        with open(log, "w") as handle:
            proc = subprocess.Popen(cluster.submit_argv(["run", "--config", str(config)]), cwd=ROOT,
                                    env=cluster.env(), stdout=handle, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        events = tmp_path / "events"
        try:
            _wait(lambda: read_sink(events, "rebalances"), "the first rebalances", proc, log, timeout=240)
            registered = min(cluster.registrations(i) for i in range(1, cluster.workers + 1))
            new_master = cluster.restart_master()
            cluster.await_workers(registered + 1)
            produce_capture(bootstrap, "kafka-2.7", LOG_TOPIC, OFFSETS_TOPIC, keep=lambda ts: ts >= split)
            produce_flush_markers(bootstrap, LOG_TOPIC, OFFSETS_TOPIC)
            if not recovery:
                _wait(lambda: "Lost executor" in log.read_text(errors="replace"), "the executors killed", proc, log,
                      timeout=120)
                before = len(read_sink(events, "rebalances"))
                time.sleep(20)     # the rest of the input is in the topics: nothing reads it
                assert len(read_sink(events, "rebalances")) == before < 82
                assert proc.poll() is None
                return
            _wait(lambda: len(read_sink(events, "rebalances")) >= 82, "82 rebalances", proc, log, timeout=300)
        finally:
            _stop(proc, timeout=90)
    assert_kafka27_rebalances(read_sink(events, "rebalances"))
    assert_kafka27_removals(read_sink(events, "member_removals"))
    # the recovered master took the application back; its executors were never lost
    assert "Lost executor" not in log.read_text(errors="replace")
    assert "Application has been re-registered" in cluster.log(new_master), cluster.log(new_master)[-2000:]
