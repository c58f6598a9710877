"""docs/ is a contract: every setting and every exported metric is documented."""
from __future__ import annotations

import tomllib
from pathlib import Path

from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parents[2]


def test_every_setting_is_in_the_configuration_reference():
    from streaming.app.settings import COMMANDS, KafkaSettings
    text = (ROOT / "docs" / "configuration.md").read_text()
    for settings_cls in COMMANDS:
        for name in settings_cls.model_fields:
            if name != "kafka":
                assert f"`{name}`" in text, name
    for name in KafkaSettings.model_fields:
        assert f"`kafka.{name}`" in text, name


def test_example_config_is_valid(tmp_path):
    from streaming.app.settings import RunSettings
    doc = tomllib.loads((ROOT / "docs" / "monitor.example.toml").read_text())
    doc["kafka"].pop("client_secret_files")     # names files that exist only in a pod
    settings = RunSettings(**doc)
    assert settings.kafka.log_topics == ["kafka-broker-logs"]


def test_every_metric_is_in_docs_metrics():
    from sinks.metrics import MetricsSink
    sink = MetricsSink([1.0], registry=CollectorRegistry())
    text = (ROOT / "docs" / "metrics.md").read_text()
    names = set()
    for metric in sink.registry.collect():
        names.add(metric.name)
    assert len(names) > 20
    for name in sorted(names):
        documented = f"### {name}" in text or f"### {name}_total" in text
        assert documented, f"{name} is not documented in docs/metrics.md"


def test_metrics_doc_lists_every_root_cause():
    from state.diagnosis.rules import ROOT_CAUSES
    text = (ROOT / "docs" / "metrics.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| label values | `cause`:")
               and "`root_cause`" in line)
    listed = row.split("`root_cause`:", 1)[1]
    assert [c for c in ROOT_CAUSES if f"`{c}`" not in listed] == []
    assert "always `unknown`" not in listed
