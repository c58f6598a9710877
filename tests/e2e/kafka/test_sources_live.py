"""Spark's kafka connector and the kafka-python source, live, over SASL_SSL, on one real cluster.

One 4.x cluster with the bed's SASL_SSL listener (SCRAM-SHA-512, openssl-made CA). Two scenarios
run on it (join_leave, kill) while the bed ships the brokers' server.log into a log topic; the
shipper then drains and stops, so the log topic and `__consumer_offsets` hold exactly the same
records for everything that reads them afterwards. Then `rebalance-monitor run` reads them twice,
at the same time, over SASL_SSL with the settings of docs/configuration.md:

- `kafka.source = "spark"`: Spark's connector, its jars fetched from Maven the way
  `spark-submit --packages` resolves them (testbed/bed/jars.py) and put on the
  classpath with `spark_conf."spark.jars"`; only `kafka.spark_options` carry the TLS/SASL
  settings, the password through Kafka's DirectoryConfigProvider (as the Helm chart does);
- `kafka.source = "python"`: the kafka-python Data Source; only `kafka.client` (+ the password
  from a file, `kafka.client_secret_files`).

Both must see the scenarios' rebalances and removals (the ground truth is the bed's timeline) and
give identical event-sink records and group series on /metrics. A wrong password must stop `run`
at start with exit 2 and one line naming the user, the server and the settings to check (the
spark-source run with a wrong password starts together with the two monitors, so that the three
share the wait for Spark).

Short diagnosis windows (`[diagnosis]`, members with max.poll.interval.ms = 10 s) release the held
removals within seconds instead of the default 60 s / 300 s."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from testbed.bed import KafkaCluster, LogShipper, SaslSsl, wait_for
from testbed.bed.jars import MavenError, fetch_spark_connector, spark_jars
from testbed.bed.running import run_scenario
from testbed.bed.scenarios import BY_NAME, Ctx, with_group
from testbed.metrics import parse
from testbed.monitor import MonitorProcess, MonitorSettings

from .conftest import NEWEST_4X

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
REPO = Path(__file__).resolve().parents[3]
USER, PASSWORD = "rebalance-monitor", "monitor-secret"
LOG_TOPIC = "kafkabed-broker-logs"
KINDS = ("rebalances", "member_removals", "quarantine", "anomalies")
GROUP_FAMILIES = re.compile(r"^rebalance_monitor_(rebalances_total|member_removals_total|rebalance_duration_seconds_"
                            r"(bucket|count|sum)|group_(state|generation|members|state_since_timestamp_seconds)|groups)\{")
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
# Short windows: a removal is released within seconds (members with max.poll.interval.ms = 10 s)
DIAGNOSIS = {"pause_rejoin_window_seconds": 5, "poll_rejoin_min_window_seconds": 5}
CATCH_UP_CAP = 300      # the python source's kafka.catch_up_max_rows_per_batch
CONNECTOR_CAP = 700     # the connector's (its fixed batch size while behind)


@dataclass
class Bed:
    cluster: KafkaCluster
    sasl: SaslSsl
    groups: dict            # scenario name -> group
    timelines: dict         # scenario name -> the runner's timeline
    out: Path


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    out = tmp_path_factory.mktemp("sources")
    sasl = SaslSsl({USER: PASSWORD})
    # ACLs checked (allowed where none is set): test_lag_unknown_when_acls_refuse_the_monitor's DENY
    cluster = KafkaCluster(NEWEST_4X, workdir=out / "cluster", sasl=sasl, authorizer=True)
    shipper = None
    try:
        cluster.start()
        shipper = LogShipper(cluster, LOG_TOPIC).start()
        groups, timelines = {}, {}
        for name in ("join_leave", "kill"):
            scenario = BY_NAME[name]
            ctx = with_group(Ctx(NEWEST_4X, "", "", options={"member": {"max_poll_interval_ms": 10000}}),
                             scenario, "src")
            res = run_scenario(cluster, shipper, scenario, ctx, out)
            assert res.passed, f"{name}: {res.error}"
            groups[name], timelines[name] = ctx.group, res.timeline
        shipper.stop(drain=True, timeout=30)    # from here on the log topic does not change
        shipper = None
        yield Bed(cluster, sasl, groups, timelines, out)
    finally:
        if shipper is not None:
            shipper.stop(drain=False, timeout=10)
        cluster.close(keep=True)


def _toml_table(values: dict) -> str:
    return "\n".join(f'"{k}" = {_toml_value(v)}' for k, v in values.items())


def _toml_value(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "'" + value + "'" if '"' in str(value) else f'"{value}"'


def _monitor(bed: Bed, workdir: Path, source: str, password: str) -> MonitorProcess:
    """`run` over SASL_SSL with `source`, each source with only its own TLS/SASL table."""
    workdir.mkdir(parents=True, exist_ok=True)
    secrets = workdir / "secrets"
    secrets.mkdir(exist_ok=True)
    # No newline at the end, like a Kubernetes secret: Kafka's DirectoryConfigProvider keeps it.
    (secrets / "password").write_text(password)
    lines = []
    if source == "spark":
        # Capped too (batches of CONNECTOR_CAP while behind, markers held until it is caught up).
        lines += [f"catch_up_max_rows_per_batch = {CONNECTOR_CAP}"]
        lines += ["[spark_conf]", _toml_table({"spark.jars": spark_jars(fetch_spark_connector(_pyspark()))}),
                  "[kafka.spark_options]", _toml_table({
            "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(bed.sasl.ca),
            "kafka.config.providers": "dir",
            "kafka.config.providers.dir.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
            "kafka.sasl.jaas.config": f'{SCRAM} required username="{USER}" password="${{dir:{secrets}:password}}";'})]
    else:
        # A catch-up in capped batches (the topics hold a few thousand records): the outputs must
        # still equal the connector's, which reads in batches of another size.
        lines += [f"catch_up_max_rows_per_batch = {CATCH_UP_CAP}"]
        lines += ["[kafka.client]", _toml_table({"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                                                 "sasl_plain_username": USER, "ssl_cafile": str(bed.sasl.ca)}),
                  "[kafka.client_secret_files]", _toml_table({"sasl_plain_password": str(secrets / "password")})]
    settings = MonitorSettings.defaults(trigger_s=1, lateness_s=2, diagnosis=DIAGNOSIS)
    return MonitorProcess(bed.cluster.sasl_bootstrap, [LOG_TOPIC], workdir, settings, source=source,
                          extra_toml="\n".join(lines) + "\n")


def _pyspark() -> str:
    import pyspark
    return pyspark.__version__


def _env() -> dict:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    env.pop("REBALANCE_MONITOR_METRICS_PORT", None)
    return env


def _records(monitor: MonitorProcess, kind: str, groups: set | None = None) -> list[dict]:
    return [r for r in monitor.records(kind) if groups is None or r.get("group") in groups]


def _done(monitor: MonitorProcess, groups: set) -> bool:
    """Every removal released (5: join_leave a, b; kill a, b, c) and both groups back to Empty."""
    removals = _records(monitor, "member_removals", groups)
    empty = {r["group"] for r in _records(monitor, "rebalances", groups) if r.get("outcome") == "empty"}
    if len(removals) < 5 or empty != groups:
        return False
    # the sink is written before the metrics: wait for those too
    page = parse(monitor.scrape("rebalance_monitor_member_removals_total"))
    counted = sum(v for labels, v in page.series("rebalance_monitor_member_removals_total")
                  if labels.get("group", "").startswith("src-"))
    return counted == len(removals)


@dataclass
class Finished:
    code: int
    stderr: str
    output: str
    seconds: float


def _wrong_password_run(bed: Bed, workdir: Path, source: str) -> tuple[subprocess.Popen, Path, Path, float]:
    monitor = _monitor(bed, workdir, source, "not-the-password")
    monitor.write_config()
    err, out = workdir / "stderr", workdir / "stdout"
    with open(err, "w") as e, open(out, "w") as o:
        proc = subprocess.Popen(monitor.command(), cwd=REPO, env=_env(), stdout=o, stderr=e, start_new_session=True)
    return proc, err, out, time.monotonic()


def _finish(run: tuple[subprocess.Popen, Path, Path, float], timeout: float = 300) -> Finished:
    proc, err, out, t0 = run
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError(f"run with a wrong password still running after {timeout:.0f} s: "
                             f"{err.read_text()[-3000:]}") from None
    return Finished(code, err.read_text(), out.read_text() + err.read_text(), time.monotonic() - t0)


@pytest.fixture(scope="module")
def monitors(bed):
    """Both sources' runs over the same topics, at the same time, and (also at the same time, to
    share the wait for Spark) a spark-source run with a wrong password."""
    groups = set(bed.groups.values())
    wrong = _wrong_password_run(bed, bed.out / "wrong-spark", "spark")
    runs = {source: _monitor(bed, bed.out / f"monitor-{source}", source, PASSWORD).launch()
            for source in ("spark", "python")}
    try:
        t0 = time.monotonic()
        for m in runs.values():
            m.wait_ready(240, batches=0)
        for source, m in runs.items():
            wait_for(partial(_done, m, groups), 300, f"the {source} source's records of {sorted(groups)}",
                     interval=1.0, alive=m.alive)
        print(f"both monitors done {time.monotonic() - t0:.1f} s after start")
        pages = {source: m.scrape() for source, m in runs.items()}
    finally:
        for m in runs.values():
            m.stop()
        finished = _finish(wrong)
    yield {source: (m, pages[source]) for source, m in runs.items()} | {"wrong-spark": finished}


def test_each_source_reads_over_sasl_ssl_and_sees_the_scenarios(bed, monitors):
    kill, join_leave = bed.groups["kill"], bed.groups["join_leave"]
    killed = next(e for e in bed.timelines["kill"] if e["action"] == "kill")
    for source in ("spark", "python"):
        m, page = monitors[source]
        log = m.log_path.read_text()
        assert f"reading Kafka with the {source} source" in log, source
        removals = {(r["group"], r["client_id"]): r for r in _records(m, "member_removals", {kill, join_leave})}
        assert set(removals) == {(kill, f"{kill}-a"), (kill, f"{kill}-b"), (kill, f"{kill}-c"),
                                 (join_leave, f"{join_leave}-a"), (join_leave, f"{join_leave}-b")}, source
        crashed = removals[(kill, f"{kill}-a")]
        assert (crashed["cause"], crashed["root_cause"]) == ("heartbeat_expiry", "process_crash"), (source, crashed)
        # the broker expires the session 3 s (session.timeout.ms) after the SIGKILL, give or take a heartbeat
        assert 2000 <= crashed["removed_at_ms"] - killed["ts_ms"] <= 6000, (source, crashed, killed)
        for key in [(kill, f"{kill}-b"), (kill, f"{kill}-c"), (join_leave, f"{join_leave}-a"), (join_leave, f"{join_leave}-b")]:
            assert removals[key]["cause"] == "leave_group", (source, removals[key])
        triggers = {(r["group"], r["trigger"]) for r in _records(m, "rebalances", {kill, join_leave})}
        assert {(kill, "heartbeat_expiry"), (join_leave, "member_leave")} <= triggers, (source, triggers)
        assert re.search(r'rebalance_monitor_member_removals_total\{[^}]*cause="heartbeat_expiry"[^}]*group="'
                         + re.escape(kill) + r'"[^}]*\} 1\.0', page), source


@pytest.mark.parametrize(("source", "cap"), [("python", CATCH_UP_CAP), ("spark", CONNECTOR_CAP)])
def test_each_source_caught_up_in_capped_batches(monitors, source, cap):
    """Each run read the log topic's backlog in batches of at most its cap, said so in its log
    with the ETA, and said when it was back at the head."""
    monitor, page = monitors[source]
    log = monitor.log_path.read_text()
    assert re.search(r"run: catching up on broker_log: [0-9,]+ records behind, reading [0-9,]+ records/s", log), log
    assert re.search(r"run: caught up on broker_log after [0-9]+ s: [0-9,]+ records read", log), log
    assert 'rebalance_monitor_source_catching_up{source="broker_log"} 0.0' in page
    assert 'rebalance_monitor_source_backlog_records{source="broker_log"} 0.0' in page
    batches = parse(page).value("rebalance_monitor_batches_total") or 0
    lines = parse(page).value("rebalance_monitor_input_records_total", source="broker_log") or 0
    assert batches >= lines / cap, (batches, lines)


def test_the_connector_and_the_python_source_give_identical_outputs(monitors):
    (spark, spark_page), (python, python_page) = monitors["spark"], monitors["python"]
    for kind in KINDS:
        assert sorted(map(repr, spark.records(kind))) == sorted(map(repr, python.records(kind))), kind
    assert len(spark.records("rebalances")) >= 6
    series = sorted(line for line in spark_page.splitlines() if GROUP_FAMILIES.match(line))
    assert len(series) > 50
    assert series == sorted(line for line in python_page.splitlines() if GROUP_FAMILIES.match(line))


def _assert_one_clear_line(finished: Finished, source: str, config_dir: Path) -> None:
    assert finished.code == 2, finished.output[-3000:]
    assert "Traceback" not in finished.output and "retrying" not in finished.output, finished.output[-3000:]
    lines = [ln for ln in finished.stderr.splitlines() if ln.startswith("rebalance-monitor: ")]
    assert len(lines) == 1, finished.output[-3000:]
    setting = ('kafka.spark_options "kafka.sasl.jaas.config"' if source == "spark"
               else f"the password in {config_dir / 'secrets' / 'password'} (kafka.client_secret_files.sasl_plain_password)")
    assert re.fullmatch(rf"rebalance-monitor: Kafka authentication failed for user '{USER}' at 127\.0\.0\.1:\d+\S* "
                        r"\(SCRAM-SHA-512\): Authentication failed during authentication due to invalid credentials "
                        rf"with SASL mechanism SCRAM-SHA-512; check .*{re.escape(setting)}.*", lines[0]), lines[0]
    print(f"{source}: exit 2 after {finished.seconds:.1f} s")


def test_a_wrong_password_is_one_clear_start_up_error_python(bed, tmp_path):
    _assert_one_clear_line(_finish(_wrong_password_run(bed, tmp_path / "python", "python"), 120), "python",
                           tmp_path / "python")


def test_a_wrong_password_is_one_clear_start_up_error_spark(bed, monitors):
    _assert_one_clear_line(monitors["wrong-spark"], "spark", bed.out / "wrong-spark")


def test_a_connector_maven_does_not_serve_is_one_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("REBALANCE_MONITOR_CACHE", str(tmp_path))
    with pytest.raises(MavenError, match=r"^Maven failed for org\.apache\.spark:spark-sql-kafka-0-10_2\.13:0\.0\.1: "
                                         r".*spark-sql-kafka-0-10_2\.13:jar:0\.0\.1"):
        fetch_spark_connector("0.0.1")
    assert not (tmp_path / "spark-connector" / "0.0.1" / ".lib.complete").exists()


LAG, UNKNOWN = "rebalance_monitor_group_topic_lag", "rebalance_monitor_group_lag_unknown"
SAMPLE_ERRORS = "rebalance_monitor_lag_sample_errors_total"


def _consume_and_commit(bootstrap: str, group: str, topics: list[str], records: int) -> None:
    """A member of `group` reads `records` records of `topics`, commits them and leaves (Empty)."""
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "log_level": 2})
    consumer.subscribe(topics)
    read = 0
    try:
        deadline = time.monotonic() + 60
        while read < records and time.monotonic() < deadline:
            read += sum(m.error() is None for m in consumer.consume(num_messages=100, timeout=0.5))
        assert read == records, f"{group}: read {read} of {records} records"
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_lag_unknown_when_acls_refuse_the_monitor(bed, tmp_path):
    """Issue 54 item 5, ACLs, on real brokers: the monitor's principal may not describe one of the
    two topics a group committed to (a DENY binding; the bed's members are super users). Its lag is
    unknown (reason not_authorized, counted, one log line), never shown; the other topic's lag is
    shown and right. The monitor neither crashes nor logs a traceback."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
    cluster = bed.cluster
    open_topic, denied_topic, group = "acl-open", "acl-denied", "acl-lag"
    for topic in (open_topic, denied_topic):
        cluster.create_topic(topic, 1)
    deny = AclBinding(ResourceType.TOPIC, denied_topic, ResourcePatternType.LITERAL, f"User:{USER}", "*",
                      AclOperation.DESCRIBE, AclPermissionType.DENY)
    cluster.admin().create_acls([deny])[deny].result(30)
    for topic in (open_topic, denied_topic):
        cluster.produce(topic, 5)
    _consume_and_commit(cluster.bootstrap, group, [open_topic, denied_topic], 10)
    for topic in (open_topic, denied_topic):
        cluster.produce(topic, 3)        # a lag of 3 on each

    def shown() -> bool:
        page = parse(monitor.scrape())
        return (page.value(UNKNOWN, cluster="bed", group=group, reason="not_authorized") == 1.0
                and {labels["topic"]: value for labels, value in page.series(LAG, group=group)} == {open_topic: 3.0})
    monitor = _monitor(bed, tmp_path / "monitor", "python", PASSWORD).launch()
    try:
        monitor.wait_ready(240, batches=0)
        wait_for(shown, 120, f"the lag of {open_topic} and {denied_topic}'s unknown", interval=1.0, alive=monitor.alive)
        page = parse(monitor.scrape())
        assert (page.value(SAMPLE_ERRORS, cluster="bed", reason="not_authorized") or 0) > 0
    finally:
        code = monitor.stop()
    log = monitor.log_path.read_text()
    assert code == 0, monitor.log_tail()
    assert log.count("end offsets unavailable (not_authorized) for") == 1, monitor.log_tail()
    assert "Traceback" not in log, monitor.log_tail()

