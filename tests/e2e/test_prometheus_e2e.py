"""End to end with a real Prometheus server (Debian's `prometheus`) on loopback.

Prometheus scrapes, every second, as job "rebalance-monitor":
- the demo (`python -m streaming.app.cli demo`, shared with test_cli via conftest.demo_server): the
  bundled Kafka 2.7 and 4.0 captures replayed through the Spark query;
- `rebalance-monitor run` pointed at a Kafka port where nothing listens: the live service whose
  source is down (the only place rebalance_monitor_source_up and source errors exist);
- a port where nothing listens: a monitor that is down (up == 0);
- an in-process MetricsSink holding the captures' groups as the state machine had them at a moment
  in the middle of rebalances (MID_REBALANCE): the demo is scraped after its replay, when every
  group has finished rebalancing, so the gauges of rebalances in progress and of the groups'
  rebalance timeouts (which need members) come from there; and a live source's backlog as a
  catch-up's batch reports it (the demo reads files, which have none, and the run without Kafka
  does not know it).
It loads alerts/rebalance-monitor.rules.yml and evaluates them every second.

Then every query of every dashboard panel, with $cluster/$group as ".*", $__rate_interval as 1m,
$__range as 1h and $storm_window/$timeout_window as 5s, must be valid PromQL and return at least one series: a panel query that
returns nothing is a broken panel. For each alert, the whole expression must be valid PromQL and
its probe (alert_rules.py: the expression before the threshold) must return series (the
counter windows of the storm, burst, rebalance-timeout and cost alerts are shortened to 5 s, E2E_PARAMS,
as Prometheus holds only seconds of data); the alerts
that the scraped data really should trigger (the down target, the down Kafka source, the demo's
hours-old data, the groups caught in a rebalance hours ago) must return series as whole expressions and be pending in Prometheus. The
others must not fire on this data, which is why their probes are what is checked.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from dashboards import alert_rules

ROOT = Path(__file__).resolve().parents[2]

# Prometheus holds only seconds of data here: the alerts' counter windows (10m/5m by default) are
# shortened so that "growth over the window" has samples at both ends. Everything else is default.
E2E_PARAMS = {"stormWindow": "5s", "heartbeatBurstWindow": "5s", "rebalanceTimeoutWindow": "5s", "costWindow": "5s",
              "removalsWindow": "5s", "lagRebalanceWindow": "5s"}
SUBSTITUTIONS = {"$storm_window": E2E_PARAMS["stormWindow"], "$timeout_window": E2E_PARAMS["rebalanceTimeoutWindow"],
                 "$__rate_interval": "1m", "$__range": "1h", "$__interval": "15s",
                 '"$cluster"': '".*"', '"$group"': '".*"'}
# The incidents of the captures still active at their end (state/incidents.py: their last evidence
# within 15 minutes of the capture's last event): the poll timeouts of 2.7/4.0 sc05 and the
# rebalance timeouts of sc05b/sc11 (KafkaConsumerGroupSlowProcessing).
DEMO_INCIDENT_ALERTS = ("KafkaConsumerGroupSlowProcessing",)
# Alerts whose whole expression must hold on the scraped data (and which are pending in Prometheus),
# and on which targets.
EXPECTED_ALERTS: dict[str, frozenset] = {
    "RebalanceMonitorDown": frozenset({"closed"}),          # nothing listens on that target's port
    "RebalanceMonitorSourceDown": frozenset({"run"}),       # `run` with no Kafka behind its bootstrap address
    "RebalanceMonitorLagging": frozenset({"demo"}),         # the captures' events are hours old
    "KafkaConsumerGroupRebalanceStuck": frozenset({"mid-rebalance"}),   # in a rebalance since hours ago
    "Watchdog": frozenset({None}),                          # always: vector(1) has no target
    **{name: frozenset({"demo"}) for name in DEMO_INCIDENT_ALERTS},
}
# capture -> (cut: UTC time on the capture day (utc_ms), {group: (its state then, its rebalance timeout in s)}).
# The mid-rebalance target holds every group of the capture with the events up to the cut applied:
# 2.7 sc11 is in the JOIN phase that ends at its 15 s rebalance timeout, 4.0 sc09 (KIP-848) is
# reconciling with a 300 s timeout.
MID_REBALANCE = {
    "kafka-2.7": ("19:31:25.000", {"sc11-stuck-in-rebalance": ("PreparingRebalance", 15.0)}),
    "kafka-4.0": ("19:28:11.000", {"k4-sc09-consumer-protocol": ("Reconciling", 300.0)}),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read().decode())


@pytest.fixture(scope="session")
def monitor_without_kafka(tmp_path_factory):
    """`rebalance-monitor run` whose Kafka is unreachable: it serves /metrics at once and, after its
    first failed attempt (about 30 s, kafka-python's request timeout), shows source_up 0."""
    port, kafka_port = _free_port(), _free_port()
    folder = tmp_path_factory.mktemp("run-no-kafka")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    with open(folder / "run.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "streaming.app.cli", "run", "--bootstrap-servers",
                                 f"127.0.0.1:{kafka_port}", "--log-topic", "broker-logs",
                                 "--checkpoint", str(folder / "checkpoint"), "--host", "127.0.0.1",
                                 "--port", str(port), "--cluster", "down-cluster"],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    yield port
    proc.terminate()        # SIGTERM ends it at once, even in its Kafka check (test_live_stop.py)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def mid_rebalance_snapshots() -> list[dict]:
    """Snapshots of every group of the MID_REBALANCE captures after the events up to the cut, under
    the cluster label "<capture>-mid-rebalance" (apart from the demo's groups)."""
    from collections import defaultdict

    from state import events as E
    from state.machine import GroupStateMachine
    from state.model import GroupModel
    from state.outputs import snapshot
    from streaming.app.local import capture_events
    from streaming.app.settings import LogInput, OffsetsInput
    from tests.support.capture_expectations import FIXTURES, LOG_FILES, utc_ms

    out: list[dict] = []
    for capture, (cut, expected) in MID_REBALANCE.items():
        cluster = f"{capture}-mid-rebalance"
        logs = [LogInput(path=str(FIXTURES / capture / name), cluster=cluster) for name in LOG_FILES[capture]]
        offsets = [OffsetsInput(path=str(FIXTURES / capture / "offsets-topic.jsonl"), cluster=cluster)]
        by_group = defaultdict(list)
        for ev in capture_events(logs, offsets):
            if ev.group is not None and ev.kind != E.END_OF_INPUT and ev.ts_ms <= utc_ms(cut):
                by_group[ev.group].append(ev)
        snapshots = {}
        for group, evs in by_group.items():
            machine = GroupStateMachine(GroupModel(cluster=cluster, group=group))
            machine.apply_all(evs)
            snapshots[group] = snapshot(machine.m)
        for group, (state, timeout_s) in expected.items():
            snap = snapshots[group]
            assert (snap["state"], snap["rebalance_timeout_ms"]) == (state, timeout_s * 1000), snap
        out += snapshots.values()
    return out


def _attach_lag(sink: Any, snapshots: list[dict]) -> None:
    """`run`'s lag families (the demo, a replay, has none): a live group 50 records and some seconds
    behind on one partition, its end offsets sampled now (fresh for an hour: the sampling interval)."""
    from state.lag import LagBook
    live = next(s for s in snapshots if s["state"] not in ("Dead", "Empty"))
    book = LagBook(3600.0)
    sink.attach_lag(book, live["cluster"])
    now = time.time()
    book.note_commits({"cluster": live["cluster"], "group": live["group"],
                       "offsets": [["orders", 0, 100, int(now * 1000)]]})
    book.note_ends(live["cluster"], [("orders", 0)], {("orders", 0): 100}, {}, now - 60)
    book.note_ends(live["cluster"], [("orders", 0)], {("orders", 0): 150}, {}, now)


@pytest.fixture(scope="session")
def monitor_mid_rebalance():
    """A /metrics endpoint whose group gauges are the mid_rebalance_snapshots.
    Yields (port, snapshots)."""
    from prometheus_client import CollectorRegistry

    from sinks.exposition import serve
    from sinks.metrics import MetricsSink
    sink = MetricsSink([1.0], registry=CollectorRegistry())
    snapshots = mid_rebalance_snapshots()
    for snap in snapshots:
        sink.observe("snapshot", snap)
    sink.health.note_backlog("offsets", 1_200_000, 250_000, 10.0)
    _attach_lag(sink, snapshots)
    server, _ = serve(sink.registry, "127.0.0.1", 0)
    yield server.server_port, snapshots
    server.shutdown()


@pytest.fixture(scope="session")
def prometheus(monitor_without_kafka, demo_server, monitor_mid_rebalance, tmp_path_factory):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus not installed (Debian package 'prometheus'; scripts/test installs it)")
    demo_port, _ = demo_server
    folder = tmp_path_factory.mktemp("prometheus")
    (folder / "rules.yml").write_text(yaml.safe_dump({"groups": alert_rules.rule_groups(params=E2E_PARAMS)}))
    targets = {"demo": demo_port, "run": monitor_without_kafka, "closed": _free_port(),
               "mid-rebalance": monitor_mid_rebalance[0]}
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
        "rule_files": ["rules.yml"],
        "scrape_configs": [{"job_name": "rebalance-monitor", "static_configs": [
            {"targets": [f"127.0.0.1:{port}"], "labels": {"target": name}} for name, port in targets.items()]}],
    }
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = _free_port()
    with open(folder / "prometheus.log", "w") as log:
        proc = subprocess.Popen([binary, f"--config.file={folder / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={folder / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                                 "--storage.tsdb.retention.time=1h", "--log.level=warn"],
                                cwd=folder, stdout=log, stderr=subprocess.STDOUT)
    api = f"http://127.0.0.1:{port}/api/v1"
    try:
        deadline = time.monotonic() + 120
        # Data: several scrapes of the demo, and the live monitor's failed Kafka check.
        while True:
            assert proc.poll() is None, (folder / "prometheus.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no data in Prometheus after 120 s"
            try:
                samples = _query(api, 'count_over_time(rebalance_monitor_batches_total{target="demo"}[1m])')
                source = _query(api, 'count_over_time(rebalance_monitor_source_errors_total{target="run"}[1m])')
                if samples and float(samples[0]["value"][1]) >= 8 and source and float(source[0]["value"][1]) >= 3:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        yield api, targets
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _query(api: str, expr: str) -> list:
    doc = _get(f"{api}/query?" + urllib.parse.urlencode({"query": expr}))
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def _try_query(api: str, expr: str) -> tuple[str, list]:
    """(error or "", result)."""
    try:
        doc = _get(f"{api}/query?" + urllib.parse.urlencode({"query": expr}))
    except urllib.error.HTTPError as exc:
        return exc.read().decode()[:300], []
    if doc["status"] != "success":
        return str(doc)[:300], []
    return "", doc["data"]["result"]


def substitute(expr: str) -> str:
    for variable, value in SUBSTITUTIONS.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def dashboard_queries() -> list[tuple[str, str, str]]:
    out = []
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                out.append((path.name, f"{panel['title']} [{target['refId']}]", target["expr"]))
    return out


def test_every_dashboard_query_is_valid_and_returns_series(prometheus):
    api, _ = prometheus
    queries = dashboard_queries()
    assert len(queries) > 40
    broken = []
    for board, panel, expr in queries:
        error, result = _try_query(api, substitute(expr))
        if error or not result:
            broken.append(f"{board}: {panel}: {error or 'no series'}\n    {substitute(expr)}")
    assert not broken, "\n".join(broken)


def test_dashboard_variables_have_values(prometheus):
    api, _ = prometheus
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        for var in json.loads(path.read_text())["templating"]["list"]:
            if var["type"] != "query":
                continue
            inner = var["query"]["query"]
            metric, label = inner[len("label_values("):-1].rsplit(", ", 1)
            doc = _get(f"{api}/series?" + urllib.parse.urlencode({"match[]": substitute(metric)}))
            values = {s[label] for s in doc["data"] if label in s}
            assert values, f"{path.name}: variable {var['name']} has no values"
            if var["name"] == "cluster":
                assert {"kafka-2.7", "kafka-4.0"} <= values


def test_every_alert_expression_is_valid_and_its_probe_returns_series(prometheus):
    api, targets = prometheus
    problems = []
    rules = {r["alert"]: r for g in alert_rules.rule_groups(params=E2E_PARAMS) for r in g["rules"]}
    probes = alert_rules.probes(E2E_PARAMS)
    assert set(rules) == set(probes) == {a.name for a in alert_rules.ALERTS}
    for name, rule in rules.items():
        error, result = _try_query(api, rule["expr"])
        if error:
            problems.append(f"{name}: expression invalid: {error}")
            continue
        if name in EXPECTED_ALERTS:
            where = {s["metric"].get("target") for s in result}
            if where != EXPECTED_ALERTS[name]:
                problems.append(f"{name}: expected to hold for targets {set(EXPECTED_ALERTS[name])}, got {where}")
        error, result = _try_query(api, probes[name])
        if error or not result:
            problems.append(f"{name}: probe {'invalid: ' + error if error else 'returns no series'}\n    {probes[name]}")
    assert not problems, "\n".join(problems)


def test_prometheus_evaluates_every_rule_without_errors_and_the_expected_alerts_are_pending(prometheus):
    api, _ = prometheus
    # let the rule manager evaluate a few times after the data arrived
    deadline = time.monotonic() + 30
    while True:
        groups = _get(f"{api}/rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        evaluated = all(r.get("lastEvaluation", "").startswith("20") for r in rules)
        alerts = _get(f"{api}/alerts")["data"]["alerts"]
        active = {a["labels"]["alertname"] for a in alerts}
        if (evaluated and set(EXPECTED_ALERTS) <= active) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(rules) == len(alert_rules.ALERTS)
    assert [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []
    assert set(EXPECTED_ALERTS) <= active, active
    base = alert_rules.DEFAULTS["runbookBaseUrl"]
    assert isinstance(base, str), base
    for alert in alerts:
        if alert["labels"]["alertname"] in EXPECTED_ALERTS:
            assert alert["labels"].get("target") in EXPECTED_ALERTS[alert["labels"]["alertname"]], alert
            assert alert["annotations"]["runbook_url"].startswith(base + "#")
    # nothing else fires on this data: no storm, stuck group, burst or input error in the demo
    assert active == set(EXPECTED_ALERTS), active - set(EXPECTED_ALERTS)


def test_stuck_threshold_per_group_on_the_exported_gauges(prometheus, monitor_mid_rebalance):
    """The stuck alert's threshold, evaluated by Prometheus on what the exporter serves, is
    max(factor x rebalance timeout, floor) for the groups whose timeout is known and the fixed
    threshold for the others; the groups caught rebalancing hours ago (classic JOIN phase and
    KIP-848 Reconciling) are over it."""
    api, _ = prometheus
    _, snapshots = monitor_mid_rebalance
    params: dict[str, Any] = {**alert_rules.DEFAULTS, **E2E_PARAMS}
    expected = {}
    for snap in snapshots:
        key = (snap["cluster"], snap["group"], snap["protocol"])
        if snap["state"] == "Dead":
            continue        # a Dead group has no gauge series (docs/metrics.md)
        if snap.get("rebalance_timeout_ms"):
            expected[key] = max(params["stuckTimeoutFactor"] * snap["rebalance_timeout_ms"] / 1000,
                                params["stuckMinSeconds"])
        elif snap.get("state_since_ms") is not None:
            expected[key] = params["stuckSeconds"]
    threshold = alert_rules.fill(alert_rules.stuck_threshold('target="mid-rebalance"'), E2E_PARAMS)
    got = {(s["metric"]["cluster"], s["metric"]["group"], s["metric"]["protocol"]): float(s["value"][1])
           for s in _query(api, threshold)}
    assert got == pytest.approx(expected)
    assert got[("kafka-2.7-mid-rebalance", "sc11-stuck-in-rebalance", "classic")] == params["stuckMinSeconds"]
    assert got[("kafka-4.0-mid-rebalance", "k4-sc09-consumer-protocol", "consumer")] == \
        params["stuckTimeoutFactor"] * 300
    assert params["stuckSeconds"] in got.values()        # some groups' timeouts are unknown
    rule = next(r for g in alert_rules.rule_groups(params=E2E_PARAMS) for r in g["rules"]
                if r["alert"] == "KafkaConsumerGroupRebalanceStuck")
    stuck = {(s["metric"]["group"], s["metric"]["state"]) for s in _query(api, rule["expr"])}
    assert {("sc11-stuck-in-rebalance", "PreparingRebalance"), ("k4-sc09-consumer-protocol", "Reconciling")} <= stuck
