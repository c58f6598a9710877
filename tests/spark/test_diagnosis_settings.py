"""Configured diagnosis thresholds reach the streaming query exactly as they reach the plain-Python pipeline."""
from __future__ import annotations

from streaming.app.local import run_local
from tests.support.capture_expectations import capture_inputs


def test_configured_thresholds_reach_the_diagnosis(spark, tmp_path):
    """[diagnosis] settings change verdicts in the Spark query and in the plain-Python path alike:
    with host_wide needing 6 removals, the 5 simultaneous kills of the 2.7 storm are crashes."""
    from state.local import run_events  # noqa: F401  (run_local uses it)
    from streaming.app.replay import replay
    from streaming.app.settings import ReplaySettings, load
    from streaming.app.settings.wiring import diagnosis_settings
    settings = load(ReplaySettings, diagnosis={"host_wide_min_removals": 6})
    logs, offsets = capture_inputs("kafka-2.7")
    collector = replay(spark, settings, logs, offsets, out_dir=str(tmp_path))
    storm = sorted((r["group"], r["root_cause"]) for r in collector.removals
                   if r["group"].startswith("sc10-") and r["cause"] == "heartbeat_expiry")
    assert len(storm) == 5 and {rc for _, rc in storm} == {"process_crash"}
    local = run_local(logs, offsets, diagnosis_settings(settings.diagnosis))
    assert sorted((r["group"], r["root_cause"]) for r in local["removal"]
                  if r["group"].startswith("sc10-") and r["cause"] == "heartbeat_expiry") == storm
