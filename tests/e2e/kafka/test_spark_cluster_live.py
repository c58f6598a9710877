"""`run` on a Spark standalone cluster against real Kafka gives what a `local[2]` run gives.

A Kafka 4.4 broker of the bed runs the `kill` scenario (classic: a member SIGKILLed, its
session expires, the others leave) and the `kip848` scenario (KIP-848 consumer group: a member
killed and fenced, the other leaves) while the bed ships its server.log into a log topic; the
shipper then drains and stops, so the log topic and `__consumer_offsets` hold the same records
for every reader. Then `rebalance-monitor run` reads them three times, at the same time, with the
same settings: in local[2] mode; submitted to a standalone cluster (a master and 2 one-core
workers, testbed/spark_cluster.py) the way the chart submits; and in local[2] mode with 8
state partitions, the way docs/deploy.md gives to more partitions (a new checkpoint rebuilt from
the topics). The cluster run's and the rebuilt run's event sink and /metrics group series must
equal the local run's, every run must be right by the bed's ground truth, and both of the
cluster's executors must have run tasks."""
from __future__ import annotations

import re
import time
from dataclasses import replace

import pytest

from streaming.spark.state_layout import checkpoint_shuffle_partitions
from testbed.bed import KafkaCluster, LogShipper
from testbed.bed.procs import wait_for
from testbed.bed.running import run_scenario
from testbed.bed.scenarios import BY_NAME, Ctx, with_group
from testbed.judge.expect import expected
from testbed.judge.verdict import judge
from testbed.judge.watch import MetricsWatch
from testbed.metrics import parse
from testbed.monitor import MonitorProcess, MonitorSettings, ensure_offsets_topic, now_ms
from testbed.spark_cluster import StandaloneCluster, record_figure

from .conftest import NEWEST_4X

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
LOG_TOPIC = "kafkabed-broker-logs"
SCENARIOS = ("kill", "kip848")
KINDS = ("rebalances", "member_removals", "rebalance_triggers", "anomalies", "quarantine", "clock_skew")
# The lag families are left out: sampled from the brokers' end offsets at wall-clock moments of each
# run's own (test_lag_live.py judges them against Kafka's tool), so two runs never show the same values.
GROUP_SERIES = re.compile(r"^rebalance_monitor_(rebalances_total|member_removals_total|rebalance_duration_seconds_"
                          r"(bucket|count|sum)|rebalance_phase_seconds_\w+|group_(?!topic_lag|lag_|members_at_risk)\w+"
                          r"|groups)\{")
# Short windows: a LeaveGroup's decision window is the member's max.poll.interval.ms (10 s here)
SETTINGS = MonitorSettings(diagnosis={"pause_rejoin_window_seconds": 5, "poll_rejoin_min_window_seconds": 5})


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """The scenarios' traffic, then a drained shipper: yields (cluster, {scenario: the bed's
    expectations (expect.py) for its group}, the last shipped line's time, the output folder)."""
    out = tmp_path_factory.mktemp("cluster-live")
    cluster = KafkaCluster(NEWEST_4X, workdir=out / "kafka")
    shipper = None
    try:
        cluster.start()
        ensure_offsets_topic(cluster)
        shipper = LogShipper(cluster, LOG_TOPIC).start()
        results = {}
        for name in SCENARIOS:
            ctx = with_group(Ctx(NEWEST_4X, "", "", options={"member": {"max_poll_interval_ms": 10000}}),
                             BY_NAME[name], "cl")
            res = run_scenario(cluster, shipper, BY_NAME[name], ctx, out)
            assert res.passed, f"{name}: {res.error}"
            results[name] = (ctx.group, res.timeline)
        shipper.stop(drain=True, timeout=30)
        shipped = shipper.lines()
        window_ms = int(SETTINGS.diagnosis_settings().pause_rejoin_window_ms)
        truth = {name: expected(NEWEST_4X, group, timeline, shipped, window_ms)
                 for name, (group, timeline) in results.items()}
        last_line_ms = max(line.read_ms for line in shipped)
        shipper = None
        yield cluster, truth, last_line_ms, out
    finally:
        if shipper is not None:
            shipper.stop(drain=False, timeout=10)
        cluster.close(keep=True)


@pytest.fixture(scope="module")
def runs(bed, tmp_path_factory):
    kafka, truth, last_line_ms, out = bed
    spark = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    monitors = {"local": MonitorProcess(kafka.bootstrap, [LOG_TOPIC], out / "local", SETTINGS, name="local"),
                # the bed's monitor, submitted to the standalone cluster with spark-submit
                "cluster": MonitorProcess(kafka.bootstrap, [LOG_TOPIC], out / "cluster", SETTINGS, name="cluster",
                                          submit=spark.submit_argv),
                # the way to more state partitions (docs/deploy.md): a new checkpoint, rebuilt from the topics
                "rebuilt-8": MonitorProcess(kafka.bootstrap, [LOG_TOPIC], out / "rebuilt-8",
                                            replace(SETTINGS, shuffle_partitions=8), name="rebuilt-8")}
    watches = {}
    try:
        t0 = time.monotonic()
        for m in monitors.values():
            m.start(timeout=300)
        for name, m in monitors.items():
            watches[name] = MetricsWatch(m)
            watches[name].start()
        # Nothing more arrives: a run is done once its watermark (idle markers at wall-clock
        # time) passed the last line by the longest removal hold, and two more batches ran.
        hold_s = max(SETTINGS.removal_hold_s(c, 10000) for c in ("heartbeat_expiry", "leave_group", "poll_timeout"))
        target = last_line_ms + int(hold_s * 1000)
        for name, m in monitors.items():
            budget = max(0.0, (target - now_ms()) / 1000) + SETTINGS.record_delay_s() + 240
            def passed(w: MetricsWatch = watches[name]) -> bool:
                return w.watermark_ms() >= target
            wait_for(passed, budget, f"the {name} run's watermark to pass {target}", interval=0.5, alive=m.alive)
        for name, m in monitors.items():
            b0 = watches[name].batches()
            def two_more(w: MetricsWatch = watches[name], b0: int = b0) -> bool:
                return w.batches() >= b0 + 2
            wait_for(two_more, 120, f"two more {name} batches", interval=0.25, alive=m.alive)
        print(f"every run done {time.monotonic() - t0:.1f} s after start")
        pages = {name: m.scrape() for name, m in monitors.items()}
        records = {name: {kind: m.records(kind) for kind in KINDS} for name, m in monitors.items()}
        logs = {name: m.log_tail(10**7) for name, m in monitors.items()}
    finally:
        for w in watches.values():
            w.stop()
        for m in monitors.values():
            m.stop(timeout=90)
        tasks = spark.tasks_per_executor()
        spark.stop()
    yield {"pages": pages, "records": records, "truth": truth, "tasks": tasks, "logs": logs,
           "checkpoints": {name: m.checkpoint / "query" for name, m in monitors.items()}}


def _series(page: str) -> list[str]:
    return sorted(line for line in page.splitlines() if GROUP_SERIES.match(line))


def _differences(runs: dict, name: str, other: str = "local") -> list[str]:
    """The sink kinds whose records differ between two runs, and "series" when their /metrics
    group series do."""
    records = runs["records"]
    differ = [k for k in KINDS if sorted(map(repr, records[name][k])) != sorted(map(repr, records[other][k]))]
    return differ + (["series"] if _series(runs["pages"][name]) != _series(runs["pages"][other]) else [])


def test_the_cluster_run_equals_the_local_run(runs):
    differ = _differences(runs, "cluster")
    executors = sum(1 for n in runs["tasks"].values() if n > 0)
    record_figure("records_equal", differ == [])
    record_figure("executors", executors)
    assert "Starting executor ID driver" not in runs["logs"]["cluster"]       # not local mode in the driver
    assert executors == 2, runs["tasks"]
    assert differ == []
    assert len(_series(runs["pages"]["local"])) > 40


def test_a_new_checkpoint_with_more_state_partitions_rebuilds_the_same_records(runs):
    """A monitor that outgrew its 2 state partitions starts on a new checkpoint with 8 and
    `kafka.starting_offsets = earliest` (the default): it rebuilds every group from the topics
    and writes what the 2-partition run wrote."""
    assert _differences(runs, "rebuilt-8") == []
    assert "state partitions" not in runs["logs"]["rebuilt-8"]     # a new checkpoint: nothing to warn about
    assert checkpoint_shuffle_partitions(str(runs["checkpoints"]["rebuilt-8"])) == 8
    assert checkpoint_shuffle_partitions(str(runs["checkpoints"]["local"])) == 2


def test_both_runs_see_each_scenario(runs):
    """Not only equal: right. Each run (the rebuilt one too), judged by the bed as test_monitor_live judges it
    (verdict.judge against expect.py's ground truth): every rebalance with its trigger and
    outcome, every removal with its cause and root cause, the group's counters on /metrics."""
    for name, records in runs["records"].items():
        samples = parse(runs["pages"][name])
        for scenario, exp in runs["truth"].items():
            mine = {kind: [r for r in recs if r.get("group") == exp.group] for kind, recs in records.items()}
            verdict = judge(NEWEST_4X, scenario, exp, mine, samples, quarantine=mine["quarantine"])
            assert verdict.status == "PASS" and exp.removals, (name, scenario, verdict)
