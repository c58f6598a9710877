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

ROOT = Path(__file__).resolve().parents[1]
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
    result = subprocess.run([sys.executable, str(ROOT / "dashboards" / "generate.py"), "--check"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_generator_check_notices_a_hand_edit(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "dashboards"))
    import generate
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
    (tmp_path / RULES.name).write_text(RULES.read_text().replace("> 600\n    for: 5m", "> 6000\n    for: 5m"))
    result = subprocess.run([promtool(), "test", "rules", UNIT_TESTS.name], capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode != 0
    assert "KafkaConsumerGroupRebalanceStuck" in result.stdout + result.stderr


def test_every_alert_has_a_firing_and_a_quiet_unit_test():
    doc = yaml.safe_load(UNIT_TESTS.read_text())
    firing, quiet = set(), set()
    for test in doc["tests"]:
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {r["alert"] for r in rules()}
    assert names - firing == set(), "alerts without a firing case"
    assert names - quiet == set(), "alerts without a not-firing case"


def test_every_alert_is_labelled_annotated_and_has_a_runbook_section():
    runbooks = (ROOT / "docs" / "runbooks.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 _-]", "", h.lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", runbooks, flags=re.M)}
    for rule in rules():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
        url = rule["annotations"]["runbook_url"]
        assert url.startswith("docs/runbooks.md#"), url
        assert url.split("#", 1)[1] in anchors, f"{rule['alert']}: no section {url} in docs/runbooks.md"
