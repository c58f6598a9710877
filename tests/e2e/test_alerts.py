"""Alert rules: promtool accepts them, every alert has firing and quiet unit tests, every alert has
its severity, summary, description and a runbook section, and the generated files are current."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dashboards import alert_rules

ROOT = Path(__file__).resolve().parents[2]

RULES = ROOT / "alerts" / "rebalance-monitor.rules.yml"
UNIT_TESTS = ROOT / "alerts" / "rebalance-monitor.test.yml"


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not installed (Debian package 'prometheus'; scripts/test installs it)")
    return path


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_generated_files_are_current():
    result = subprocess.run([sys.executable, "-m", "dashboards.generate", "--check"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_generator_check_notices_a_hand_edit(tmp_path, monkeypatch):
    from dashboards import generate
    edited = tmp_path / "rules.yml"
    edited.write_text(RULES.read_text().replace("> 10", "> 11"))
    outputs = generate.outputs()
    assert outputs[RULES] == RULES.read_text()
    assert outputs[RULES] != edited.read_text()


def test_promtool_check_rules():
    result = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_promtool_unit_tests_pass():
    result = subprocess.run([promtool(), "test", "rules", str(UNIT_TESTS)], capture_output=True, text=True,
                            cwd=UNIT_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_can_fail(tmp_path):
    """The unit tests really compare: a changed threshold makes them fail."""
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    (tmp_path / RULES.name).write_text(RULES.read_text().replace("> 10\n    for: 10m", "> 100\n    for: 10m"))
    result = subprocess.run([promtool(), "test", "rules", UNIT_TESTS.name], capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode != 0
    assert "KafkaConsumerGroupRebalanceStorm" in result.stdout + result.stderr


def _with_expressions_of(params: dict, edit=lambda expr: expr) -> dict:
    """The default rules with the expressions (only) of the rules rendered with `params` and
    passed through `edit`: the annotations keep their default text, so a unit test can only fail
    because the alert fires or stays quiet where it should not."""
    groups = alert_rules.rule_groups()
    for group, changed in zip(groups, alert_rules.rule_groups(params=params)):
        for rule, other in zip(group["rules"], changed["rules"]):
            rule["expr"] = edit(other["expr"])
    return {"groups": groups}


@pytest.mark.parametrize("params, edit, failing_test", [
    ({"stuckTimeoutFactor": 20}, None, "stuck uses 2 times the group's rebalance timeout when it is known"),
    ({"stuckTimeoutFactor": 1}, None, "stuck uses 2 times the group's rebalance timeout when it is known"),
    ({"stuckMinSeconds": 0}, None, "stuck uses the 120 s floor when 2 times the rebalance timeout is shorter"),
    ({"stuckMinSeconds": 6000}, None, "stuck uses the 120 s floor when 2 times the rebalance timeout is shorter"),
    ({"stuckSeconds": 6000}, None, "stuck uses the fixed 600 s while the group's rebalance timeout is unknown"),
    ({}, lambda e: e.replace("|Assigning|Reconciling", ""),
     "stuck covers the KIP-848 rebalancing states Assigning and Reconciling"),
    ({"rebalanceTimeouts": 1}, None, "rebalance timeout fires for a rebalance that waited the whole timeout"),
    ({}, lambda e: e.replace(" or (rebalance_monitor_rebalance_timeouts_total", " and (rebalance_monitor_rebalance_timeouts_total"),
     "rebalance timeout fires for a rebalance that waited the whole timeout"),
], ids=["factor-20", "factor-1", "floor-0", "floor-6000", "fixed-6000", "no-kip848-states", "timeouts-1",
        "timeouts-without-new-series"])
def test_unit_tests_catch_each_threshold_of_the_stuck_and_timeout_alerts(tmp_path, params, edit, failing_test):
    """Each parameter of the per-group stuck threshold, the KIP-848 states and the counting of
    new timeout series are pinned by the unit test named for them."""
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    (tmp_path / RULES.name).write_text(yaml.safe_dump(_with_expressions_of(params, edit or (lambda e: e))))
    result = subprocess.run([promtool(), "test", "rules", UNIT_TESTS.name], capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode != 0
    assert f"name: {failing_test}" in result.stdout + result.stderr


def test_every_alert_has_a_firing_and_a_quiet_unit_test():
    doc = yaml.safe_load(UNIT_TESTS.read_text())
    firing: set[str] = set()
    quiet: set[str] = set()
    for test in doc["tests"]:
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {r["alert"] for r in rules()}
    assert names - firing == set(), "alerts without a firing case"
    assert names - quiet == {"Watchdog"}, "alerts without a not-firing case (the Watchdog always fires)"


def test_runbook_urls_are_absolute_by_default():
    """An alert's link must open from Alertmanager, Slack or a pager: not a path relative to nothing."""
    base = alert_rules.DEFAULTS["runbookBaseUrl"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/blob/main/docs/runbooks\.md", str(base)), base
    values = yaml.safe_load((ROOT / "helm" / "rebalance-monitor" / "values.yaml").read_text())
    assert values["prometheusRule"]["params"]["runbookBaseUrl"] == base


def test_every_alert_is_labelled_annotated_and_has_a_runbook_section():
    runbooks = (ROOT / "docs" / "runbooks.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 _-]", "", h.lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", runbooks, flags=re.M)}
    for rule in rules():
        assert rule["labels"]["severity"] in {"page", "ticket", "none"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
        url = rule["annotations"]["runbook_url"]
        base = alert_rules.DEFAULTS["runbookBaseUrl"]
        assert isinstance(base, str), base
        assert url.startswith(base + "#"), url
        assert url.split("#", 1)[1] in anchors, f"{rule['alert']}: no section {url} in docs/runbooks.md"
