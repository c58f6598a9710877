"""The Alertmanager configuration (dashboards/alertmanager.py): the plain file and the chart's
AlertmanagerConfig are one configuration, `amtool check-config` accepts both, and its routes send
each severity where docs/runbooks.md ("Paging") says. Inhibition and grouping run for real in the
pager check (testbed/judge/pager_check.py, tests/e2e/kafka/test_pager_live.py)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from dashboards import alert_rules, alertmanager
from testbed.chart import one, render

ROOT = Path(__file__).resolve().parents[2]
PLAIN = ROOT / "alerts" / "alertmanager.yml"
URLS = {"pager": "http://pager.example:9095/page", "tickets": "http://tickets.example:9095/ticket",
        "deadman": "http://deadman.example:9095/ping"}


def amtool() -> str:
    found = shutil.which("amtool")
    if found is None:
        pytest.fail("amtool not installed: Debian's prometheus-alertmanager (scripts/test installs it)")
    return found


def check_config(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([amtool(), "check-config", str(path)], capture_output=True, text=True, timeout=60)


def test_amtool_accepts_the_shipped_file():
    result = check_config(PLAIN)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 inhibit rules" in result.stdout and "3 receivers" in result.stdout, result.stdout


def test_amtool_rejects_a_broken_file(tmp_path):
    """The check can fail: a route to a receiver that does not exist."""
    doc = yaml.safe_load(PLAIN.read_text())
    doc["route"]["routes"][1]["receiver"] = "nobody"
    (tmp_path / "am.yml").write_text(yaml.safe_dump(doc))
    assert check_config(tmp_path / "am.yml").returncode != 0


def test_the_charts_alertmanager_config_is_the_plain_file_with_its_receivers(tmp_path):
    sets = [f"alertmanagerConfig.receivers.{name}.url={url}" for name, url in URLS.items()]
    doc = one(render(None, "alertmanagerConfig.enabled=true", *sets), "AlertmanagerConfig")
    assert doc["apiVersion"] == "monitoring.coreos.com/v1alpha1"
    plain = alertmanager.plain_from_operator(doc["spec"])
    assert plain == alertmanager.config(URLS)
    (tmp_path / "from-chart.yml").write_text(yaml.safe_dump(plain))
    result = check_config(tmp_path / "from-chart.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    # the plain file is the same configuration with placeholder receivers
    shipped = yaml.safe_load(PLAIN.read_text())
    assert shipped == alertmanager.config()


def test_the_chart_renders_no_alertmanager_config_unless_enabled():
    assert [d for d in render(None) if d["kind"] == "AlertmanagerConfig"] == []


@pytest.mark.parametrize("labels, receiver", [
    ({"alertname": "KafkaBrokerDown", "severity": "page", "cluster": "c", "incident": "broker-2@t"}, "pager"),
    ({"alertname": "RebalanceMonitorDown", "severity": "page"}, "pager"),
    ({"alertname": "KafkaConsumerGroupMembersRemoved", "severity": "ticket", "group": "g"}, "tickets"),
    ({"alertname": "RebalanceMonitorLagging", "severity": "ticket"}, "tickets"),
    ({"alertname": "Watchdog", "severity": "none"}, "deadman"),
])
def test_routes_send_each_severity_to_its_receiver(labels, receiver):
    args = [f"{k}={v}" for k, v in labels.items()]
    result = subprocess.run([amtool(), "config", "routes", "test", f"--config.file={PLAIN}", *args],
                            capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == receiver, result.stdout + result.stderr


def test_every_alert_has_a_severity_the_routes_know():
    severities = {r["labels"]["severity"] for g in alert_rules.rule_groups() for r in g["rules"]}
    assert severities == {"page", "ticket", "none"}
