"""scripts/lag-check's last line (testbed/lag_check.py): figures combined over the tests and
versions, each against its target; a figure no test recorded fails the check."""
from __future__ import annotations

import json

from testbed.lag_check import FIGURES, FIGURES_ENV, record_figure
from testbed.figures import summary


def _write(path, entries):
    path.write_text("".join(json.dumps({"name": n, "value": v}) + "\n" for n, v in entries))
    return path


GOOD = [("lag_agrees", True), ("lag_agrees", True), ("records_delayed_error_max", 0.002),
        ("records_delayed_error_max", 0.03), ("at_risk_lead_seconds_min", 20.6), ("at_risk_lead_seconds_min", 14.0),
        ("idle_at_risk", 0), ("idle_at_risk", 0)]


def test_the_line_combines_each_figure_over_the_tests(tmp_path):
    line, ok = summary(_write(tmp_path / "f", GOOD), FIGURES)
    assert line == "lag_agrees=true records_delayed_error_max=0.03 at_risk_lead_seconds_min=14 idle_at_risk=0"
    assert ok


def test_a_figure_off_target_or_missing_fails(tmp_path):
    for bad in [("lag_agrees", False), ("records_delayed_error_max", 0.051), ("at_risk_lead_seconds_min", 9.9),
                ("idle_at_risk", 1)]:
        assert not summary(_write(tmp_path / "f", [*GOOD, bad]), FIGURES)[1], bad
    line, ok = summary(_write(tmp_path / "f", [e for e in GOOD if e[0] != "idle_at_risk"]), FIGURES)
    assert not ok and line.endswith("idle_at_risk=missing")


def test_tests_record_only_under_the_check(tmp_path, monkeypatch):
    monkeypatch.delenv(FIGURES_ENV, raising=False)
    record_figure("lag_agrees", True)               # a plain pytest run: nowhere to write, no error
    monkeypatch.setenv(FIGURES_ENV, str(tmp_path / "f"))
    record_figure("idle_at_risk", 0)
    assert json.loads((tmp_path / "f").read_text())["name"] == "idle_at_risk"
